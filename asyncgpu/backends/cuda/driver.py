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

log = logging.getLogger("asyncgpu")

#: The compiled module of the direct calls (built only where cuda-python was installed).
MODULE = "asyncgpu.backends.cuda.cudriver"


def compiled_driver() -> Any:
    """The compiled module ``cudriver``, or None where it is not built or cannot load (no
    cuda-python, or one whose driver declarations differ from those it was built against)."""
    try:
        return importlib.import_module(MODULE)
    except ImportError:
        return None
    except Exception as exc:   # noqa: BLE001 - e.g. a cydriver function of another signature
        log.info("asyncgpu: the compiled CUDA driver calls do not load here (%s); using "
                 "CuPy's", exc)
        return None


def driver_calls(cupy: Any) -> Any:
    """A ``cudriver.DriverCalls`` over the process's CUDA driver, raising CuPy's
    ``CUDADriverError`` for a refused call; None where direct calls do not apply (see the
    module docstring). Call it on the thread, and with the device current, that the backend
    launches from: a thread without a current context later gets that one."""
    module = compiled_driver()
    if module is None:
        return None
    cupy_calls = (getattr(cupy.cuda.driver, "launchKernel", None), cupy.cuda.runtime.eventRecord,
                  cupy.cuda.runtime.streamWaitEvent)
    if any(inspect.isfunction(f) or inspect.ismethod(f) or f is None for f in cupy_calls):
        return None         # not CuPy's compiled calls: they are not ours to go around
    try:
        return module.DriverCalls(cupy)
    except Exception as exc:   # noqa: BLE001 - no driver to be loaded, no current context
        log.info("asyncgpu: no CUDA driver for direct calls (%s); using CuPy's", exc)
        return None
