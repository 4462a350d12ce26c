"""The CUDA calls of a launch, made straight into the driver (``Options.direct_driver``).

The model
---------
CuPy reaches the driver through Cython wrappers, and its event record, stream wait and event
query through the CUDA runtime, a layer above. Per launch that is a few microseconds of host
time on the calls alone (docs/performance.md). ``asyncgpu._speedups.DriverCalls`` makes the
same calls through the driver's own entry points; this module finds them in the ``libcuda``
the process has loaded for CuPy and hands their addresses over. The cuda backend then keeps
``DriverCalls``' callables where it kept CuPy's (:func:`cuda_calls`), so every caller, Python
or compiled, makes the same CUDA call either way.

When it does not apply (no compiled module, the option off, no ``libcuda`` to be found, or a
CuPy whose calls are Python functions: a stand-in, or calls someone has wrapped) the backend
keeps CuPy's callables, and nothing else changes.

Example::

    calls = driver_calls(cupy)          # None where it does not apply
    record = cuda_calls(cupy, calls).event_record
"""

from __future__ import annotations

import ctypes
import inspect
import logging
import operator
import sys
from typing import Any, NamedTuple

from ...core import compiled as _compiled

log = logging.getLogger("asyncgpu")

#: The driver functions ``DriverCalls`` calls, in the order it takes their addresses.
ENTRY_POINTS = ("cuLaunchKernel", "cuEventRecord", "cuStreamWaitEvent", "cuEventQuery",
                "cuGraphLaunch")
#: The one-node graphs' entry points (``single_node_graphs``, asyncgpu/csrc/graph_lanes.c),
#: in the order ``DriverCalls`` takes their addresses; each is the first of its names the
#: library has (the ``_v2`` functions take CUDA 12's kernel node parameters, whose first
#: fields are those of the older layout).
GRAPH_ENTRY_POINTS = (("cuGraphCreate",), ("cuGraphAddKernelNode_v2", "cuGraphAddKernelNode"),
                      ("cuGraphInstantiateWithFlags",),
                      ("cuGraphExecKernelNodeSetParams_v2", "cuGraphExecKernelNodeSetParams"),
                      ("cuGraphExecDestroy",), ("cuGraphDestroy",), ("cuCtxSynchronize",))
_LIBRARIES = {"win32": ("nvcuda.dll",)}.get(sys.platform, ("libcuda.so.1", "libcuda.so"))


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


def entry_points(library: Any) -> tuple[int, ...] | None:
    """The addresses of :data:`ENTRY_POINTS` in a loaded driver library (``ctypes.CDLL``);
    None if one is missing."""
    try:
        return tuple(ctypes.cast(getattr(library, name), ctypes.c_void_p).value or 0
                     for name in ENTRY_POINTS)
    except AttributeError:
        return None


def graph_entry_points(library: Any) -> tuple[int, ...] | None:
    """The addresses of :data:`GRAPH_ENTRY_POINTS` in a loaded driver library; None if one is
    missing (then kernels launch with ``cuLaunchKernel`` alone)."""
    found = []
    for names in GRAPH_ENTRY_POINTS:
        for name in names:
            fn = getattr(library, name, None)
            if fn is not None:
                found.append(ctypes.cast(fn, ctypes.c_void_p).value or 0)
                break
        else:
            return None
    return tuple(found) if all(found) else None


def driver_calls(cupy: Any) -> Any:
    """A ``DriverCalls`` over the process's CUDA driver, falling back to CuPy's callables on
    any refused call; None where direct calls do not apply (see the module docstring)."""
    speedups = _compiled.speedups
    if speedups is None or not hasattr(speedups, "DriverCalls"):
        return None
    cupy_calls = cuda_calls(cupy)
    if any(inspect.isfunction(f) or inspect.ismethod(f) or f is None
           for f in cupy_calls[:3]):
        return None         # not CuPy's compiled calls: they are not ours to go around
    for name in _LIBRARIES:
        try:
            library = ctypes.CDLL(name)
        except OSError:
            continue
        addresses = entry_points(library)
        if addresses is not None and all(addresses):
            graphs = graph_entry_points(library)
            if graphs is None:
                log.info("asyncgpu: this CUDA driver lacks the graph entry points of "
                         "single_node_graphs; kernels launch with cuLaunchKernel")
            return speedups.DriverCalls(addresses + (graphs or ()), *cupy_calls[:3])
    log.info("asyncgpu: no CUDA driver library found for direct calls; using CuPy's")
    return None
