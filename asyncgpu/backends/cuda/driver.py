"""The CUDA calls of a launch, made straight into the driver (``Options.direct_driver``).

The model
---------
CuPy reaches the driver through Cython wrappers, and its event record, stream wait and event
query through the CUDA runtime, a layer above. Per launch that is a few microseconds of host
time on the calls alone (docs/performance.md). ``cudriver.DriverCalls`` (the compiled module
``asyncgpu/backends/cuda/cudriver.pyx``) makes the same calls through cuda-python's Cython
bindings of the driver (``cuda.bindings.cydriver``), and enqueues kernels through one-node
graphs where ``single_node_graphs`` asks for it. The cuda backend keeps ``DriverCalls``' bound
methods where it kept CuPy's callables (:func:`cuda_calls`), so every caller makes the same CUDA
call either way.

When it does not apply (the module not built, or cuda-python missing at run time; no CUDA
driver; a CuPy whose calls are Python functions: a stand-in, or calls someone has wrapped) the
backend keeps CuPy's callables, and nothing else changes.

Example::

    calls = driver_calls(cupy)          # None where it does not apply
    record = cuda_calls(cupy, calls).event_record
"""

from __future__ import annotations

import importlib
import inspect
import logging
import operator
from typing import Any, NamedTuple

log = logging.getLogger("asyncgpu")

#: The compiled module of the direct calls (built only where cuda-python was installed).
MODULE = "asyncgpu.backends.cuda.cudriver"


class CudaCalls(NamedTuple):
    """The callables the cuda backend makes a launch's CUDA calls with (CuPy's signatures)."""

    launch_kernel: Any      # (f, gx, gy, gz, bx, by, bz, shared, stream, params, extra)
    event_record: Any       # (event ptr, stream ptr)
    stream_wait: Any        # (stream ptr, event ptr, flags)
    event_done: Any         # (cupy Event) -> bool
    graph_launch: Any       # (cupy Graph, cupy Stream)


def _graph_launch(graph: Any, stream: Any) -> None:
    graph.launch(stream)


def cuda_calls(cupy: Any, calls: Any = None) -> CudaCalls:
    """The callables of a launch: ``calls``' (a ``DriverCalls``), or else CuPy's own."""
    if calls is not None:
        return CudaCalls(calls.launchKernel, calls.eventRecord, calls.streamWaitEvent,
                         calls.eventDone, calls.graphLaunch)
    return CudaCalls(getattr(cupy.cuda.driver, "launchKernel", None),
                     cupy.cuda.runtime.eventRecord, cupy.cuda.runtime.streamWaitEvent,
                     operator.attrgetter("done"), _graph_launch)


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
    cupy_calls = cuda_calls(cupy)
    if any(inspect.isfunction(f) or inspect.ismethod(f) or f is None
           for f in cupy_calls[:3]):
        return None         # not CuPy's compiled calls: they are not ours to go around
    try:
        return module.DriverCalls(getattr(cupy.cuda.driver, "CUDADriverError", None))
    except Exception as exc:   # noqa: BLE001 - no driver to be loaded, no current context
        log.info("asyncgpu: no CUDA driver for direct calls (%s); using CuPy's", exc)
        return None
