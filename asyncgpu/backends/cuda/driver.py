"""Which object makes a launch's CUDA calls: CuPy's callables, or straight into the driver
(``Options.direct_driver``).

The model
---------
CuPy reaches the driver through Cython wrappers, and its event record, stream wait and event
query through the CUDA runtime, a layer above. Per launch that is a few microseconds of host
time on the calls alone (docs/performance.md). ``cudriver.DriverCalls`` (the compiled module
``asyncgpu/backends/cuda/cudriver.pyx``) is the :class:`~asyncgpu.backends.cuda.calls.CudaCalls`
that makes the same calls through cuda-python's Cython bindings of the driver
(``cuda.bindings.cydriver``), and enqueues kernels through one-node graphs where
``single_node_graphs`` asks for it. The backend holds one where :func:`driver_calls` makes
one, and CuPy's ``CudaCalls`` otherwise.

When direct calls do not apply (the module not built, or cuda-python missing at run time; no
CUDA driver; a CuPy whose calls are Python functions: a stand-in, or calls someone has wrapped)
the backend makes them through CuPy's callables, and nothing else changes.

Example::

    calls = driver_calls(cupy) or CudaCalls(cupy)
    calls.event_record(event.ptr, stream.ptr)
"""

from __future__ import annotations

import importlib
import inspect
import logging
from typing import Any

from ...core.compiled import is_compiled

log = logging.getLogger("asyncgpu")

#: The compiled module of the direct calls (built only where cuda-python was installed).
MODULE = "asyncgpu.backends.cuda.cudriver"


#: Why the compiled module is not in use (None: it loaded, or nobody has tried yet).
_missing: str | None = None
#: Whether the one line saying launches go through CuPy's calls was logged (once a process).
_said_missing = False


def compiled_driver() -> Any:
    """The compiled module ``cudriver``, or None where it is not built or cannot load (no
    cuda-python, or one whose driver declarations differ from those it was built against);
    :func:`missing_reason` then says which."""
    global _missing
    try:
        module = importlib.import_module(MODULE)
    except ImportError as exc:
        _missing = (f"not built at install: {exc}" if getattr(exc, "name", None) == MODULE
                    else f"it does not load here: {exc}")
        return None
    except Exception as exc:   # noqa: BLE001 - e.g. a cydriver function of another signature
        _missing = f"it does not load here: {exc}"
        return None
    _missing = None
    return module


def missing_reason() -> str | None:
    """Why the compiled driver calls are not in use in this process, or None where they are
    (``asyncgpu info`` shows it)."""
    compiled_driver()
    return _missing


def _say_missing(reason: str) -> None:
    # One visible line a process: a build that compiled the launch path but not the driver
    # calls (cuda-bindings newer than the CUDA headers it was built against, most often) costs
    # every launch a few microseconds, and pip shows a build's messages only with -v.
    global _said_missing
    if _said_missing or not is_compiled():
        return      # (an uncompiled launch path says so itself, and has no driver module)
    _said_missing = True
    log.warning("asyncgpu: the compiled CUDA driver calls are not in use (%s); launches go "
                "through CuPy's calls, a few microseconds more each (the troubleshooting "
                "guide says why and what to do; 'asyncgpu info' shows what is in use)", reason)


def driver_calls(cupy: Any) -> Any:
    """A ``cudriver.DriverCalls`` over the process's CUDA driver, raising CuPy's
    ``CUDADriverError`` for a refused call; None where direct calls do not apply (see the
    module docstring). Call it on the thread, and with the device current, that the backend
    launches from: a thread without a current context later gets that one."""
    cupy_calls = (getattr(cupy.cuda.driver, "launchKernel", None), cupy.cuda.runtime.eventRecord,
                  cupy.cuda.runtime.streamWaitEvent)
    if any(inspect.isfunction(f) or inspect.ismethod(f) or f is None for f in cupy_calls):
        return None         # not CuPy's compiled calls: they are not ours to go around
    module = compiled_driver()
    if module is None:
        _say_missing(_missing or "not built at install")
        return None
    try:
        return module.DriverCalls(cupy)
    except Exception as exc:   # noqa: BLE001 - no driver to be loaded, no current context
        log.info("asyncgpu: no CUDA driver for direct calls (%s); using CuPy's", exc)
        return None
