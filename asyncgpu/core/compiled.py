"""Whether this process runs the compiled hot path.

The model
---------
The modules of the launch path (dependency tracking, streams, nodes, binding, issuing, memory
booking, recording and replay) are plain Python, which ``pip install`` compiles with Cython
where a C compiler is present: the same ``.py`` files, with the C types of their hot classes
declared in a ``.pxd`` file beside each. Compiled or not, the code is the same; only its cost
differs. A compiled module is an extension module, so Python imports it instead of the ``.py``.

Invariant: a module is either wholly compiled or wholly Python; nothing switches at run time.

Example::

    compiled_modules()      # ['asyncgpu.core.dag', 'asyncgpu.core.deps', ...] or []
"""

from __future__ import annotations

import importlib.machinery
import sys

#: The file name endings of extension modules on this platform.
EXTENSIONS = tuple(importlib.machinery.EXTENSION_SUFFIXES)


def is_extension(module: object) -> bool:
    """Whether ``module`` (a module object) was loaded from an extension module: compiled."""
    return str(getattr(module, "__file__", "") or "").endswith(EXTENSIONS)


def compiled_modules() -> list[str]:
    """The names of asyncgpu's imported modules that run compiled (extension modules)."""
    return sorted(name for name, module in list(sys.modules.items())
                  if name.startswith("asyncgpu.") and is_extension(module))


def is_compiled() -> bool:
    """Whether the core's launch path runs compiled (``asyncgpu.core.deps`` is the marker:
    the build compiles all of the hot modules or none)."""
    return is_extension(sys.modules.get("asyncgpu.core.deps"))
