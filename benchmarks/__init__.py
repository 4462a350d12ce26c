"""asyncgpu's benchmark suite (the GrCUDA paper's workloads) and its harness.

In the repository this folder is the top-level package ``benchmarks`` next to ``kernels``; an
installed wheel holds the two as ``asyncgpu.benchmarks`` and ``asyncgpu.kernels`` (so that
installing asyncgpu puts no generic top-level names into site-packages). ``kernel_module``
imports a kernel module from whichever of the two layouts this package was imported from.
"""

from __future__ import annotations

import importlib
from types import ModuleType

#: "" in a source tree, "asyncgpu." in an installed wheel: where the kernels package lives.
_PREFIX = __name__[: -len("benchmarks")]


def kernel_module(name: str) -> ModuleType:
    """The module ``kernels.<name>`` of the same layout as this package."""
    return importlib.import_module(f"{_PREFIX}kernels.{name}")
