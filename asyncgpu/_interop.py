"""Interop with other array libraries: importing their arrays, exporting ours.

Importing (:func:`asarray`)
    NumPy arrays and array-likes are copied into the runtime's memory through the host. CuPy
    arrays, Numba device arrays and anything with ``__cuda_array_interface__`` or ``__dlpack__``
    are copied on the device by a node (on ``cuda``). The copy is ordered after the producer's
    work: CuPy honours the interface's ``stream`` (and DLPack's stream handshake) against the
    caller's current stream, and the node's stream waits for the caller's current stream through
    an event; afterwards the caller's current stream waits for the copy, so the source may be
    freed (CuPy's pool reuses memory in stream order) without racing the copy. On ``sim``,
    device arrays of Numba's simulator and CPU DLPack producers are read on the host.

Exporting (``Array.__cuda_array_interface__``, ``Array.__dlpack__``, ``cupy.asarray(x)``)
    The consumer gets the array's memory (no copy) and a stream on which every unfinished node
    that reads or writes the array is ordered: the stream of the last such node, made to wait
    (by events, never blocking the host) for the others. With ``memory="explicit"`` that is the
    device copy, brought current first by a copy node when the host's copy was the current one;
    the array is then device-current (the consumer may write it). CAI v3 consumers that honour the
    ``stream`` field (CuPy, Numba) and DLPack consumers (which pass their stream) are therefore
    ordered after asyncgpu's reads and writes of the array.

What the runtime cannot track after an export: what the consumer does with the memory later.
Work the consumer enqueues on its own streams is invisible to the DAG, so a later asyncgpu node
or host access does not wait for it. After another library *writes* an exported array (or
while it still reads one that asyncgpu will write), synchronize that library's stream, or call
``asyncgpu.synchronize()`` (a device-wide synchronize, which covers every stream), before using
the array with asyncgpu again. Freeing: the exported memory stays valid while the Array (or a
view) is alive; the consumer must not use it after the last Array is gone.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._array import Array
from ._deps import Access
from ._errors import ArgumentError


def _is_device_array(obj: Any) -> bool:
    return hasattr(obj, "__cuda_array_interface__") or (
        hasattr(obj, "__dlpack__") and not isinstance(obj, np.ndarray)
    )


def asarray(obj: Any, dtype: Any = None) -> Array:
    """``obj`` as an :class:`Array`: itself if it is one of that dtype, else a copy."""
    from ._api import array
    from ._library import dispatch
    from ._runtime import current_runtime

    if isinstance(obj, Array):
        if dtype is None or np.dtype(dtype) == obj.dtype:
            return obj
        return dispatch("ndarray.astype", (obj, dtype), {})
    if isinstance(obj, np.ndarray) or not (_is_device_array(obj) or hasattr(obj, "copy_to_host")):
        return array(obj, dtype)
    rt = current_runtime()
    if rt.backend.name != "cuda":
        return array(_host_copy(obj), dtype)
    return _device_copy(obj, dtype)


def _host_copy(obj: Any) -> np.ndarray:
    """A foreign array's values on the host (sim backend)."""
    if hasattr(obj, "copy_to_host"):               # Numba device arrays (and the simulator's)
        return obj.copy_to_host()
    if hasattr(obj, "__dlpack__"):
        try:
            return np.from_dlpack(obj)
        except (BufferError, RuntimeError, TypeError) as exc:
            raise ArgumentError(
                f"asyncgpu.asarray: cannot read a {type(obj).__name__} on the sim backend "
                f"({exc}); pass a NumPy array instead"
            ) from exc
    raise ArgumentError(
        f"asyncgpu.asarray: a {type(obj).__name__} lives in GPU memory, which the sim backend "
        "cannot read; pass a NumPy array, or run on the cuda backend"
    )


def _device_copy(obj: Any, dtype: Any) -> Array:
    """Copy a CUDA array into the runtime's memory with a node (cuda backend)."""
    from ._library import backend_module, dispatch

    cupy = backend_module("cuda")

    try:
        src = cupy.asarray(obj) if hasattr(obj, "__cuda_array_interface__") else \
            cupy.from_dlpack(obj)
    except Exception as exc:
        raise ArgumentError(
            f"asyncgpu.asarray: cannot import a {type(obj).__name__} ({exc}); pass a CuPy "
            "array, a Numba device array, or an object with __cuda_array_interface__ or "
            "__dlpack__"
        ) from exc
    user = cupy.cuda.get_current_stream()
    ready = cupy.cuda.Event(block=False, disable_timing=True)
    ready.record(user)

    def copy_in() -> Any:
        stream = cupy.cuda.get_current_stream()   # the node's stream, inside the call
        stream.wait_event(ready)
        out = cupy.array(src, dtype=dtype, copy=True, order="C")
        done = cupy.cuda.Event(block=False, disable_timing=True)
        done.record(stream)
        user.wait_event(done)                      # the source outlives the copy
        return out

    return dispatch("asarray", (), {}, resolve=lambda backend: copy_in)


def export_stream(array: Array) -> Any:
    """The handle of a stream ordered after every unfinished node using ``array``'s bytes.

    ``None`` when nothing is pending. Other streams' nodes are waited for by events on the
    chosen stream (the host never blocks).
    """
    rt = array._alloc.runtime
    with rt._lock:
        alloc = array._alloc
        found = rt.deps.conflicts([Access(alloc.id, alloc, array._lo, array._hi, True,
                                          array.describe())])
        pending = [n for n in found if not n.finished and n.stream is not None]
        if not pending:
            return None
        last = max(pending, key=lambda n: n.id)
        stream = last.stream
        latest: dict[int, Any] = {}
        for n in pending:
            if n.stream is not stream:
                cur = latest.get(n.stream.index)
                if cur is None or n.seq > cur.seq:
                    latest[n.stream.index] = n
        for index, n in latest.items():
            if stream.waited.get(index, -1) < n.seq:
                rt.backend.wait(stream.handle, n.event)
                stream.waited[index] = n.seq
                rt.stats.event_waits += 1
        return stream.handle


def device_export(array: Array) -> None:
    """Explicit memory model: an exported pointer is to the device copy, which must be current
    (a copy node if the host's is the current one); the consumer may write it, so the host
    copy is no longer known to be current."""
    rt = array._alloc.runtime
    if rt.memory is not None:
        with rt._lock:
            rt.memory.before_export(array)


def cuda_array_interface(array: Array) -> dict[str, Any]:
    """CUDA Array Interface v3 of an array, with the stream consumers must order after."""
    ptr = array._alloc.buffer.device_pointer() + array._offset if array.size else 0
    device_export(array)
    stream = export_stream(array)
    return {
        "shape": array.shape,
        "typestr": array.dtype.str,
        "data": (ptr, False),
        "strides": None if array.is_c_contiguous else array.strides,
        "version": 3,
        "stream": None if stream is None else int(stream.ptr),
    }


def dlpack(array: Array, stream: Any = None, max_version: Any = None, dl_device: Any = None,
           copy: Any = None) -> Any:
    """A DLPack capsule of the array (cuda: shared memory; sim: a host copy)."""
    rt = array._alloc.runtime
    if rt.backend.name != "cuda":
        if stream is not None:
            raise BufferError("arrays of the sim backend live on the host: pass stream=None")
        host = array.numpy()
        return host.__dlpack__() if max_version is None else \
            host.__dlpack__(max_version=max_version)
    if copy:
        raise BufferError("asyncgpu arrays are exported without a copy; call x.copy() first")
    from ._library import backend_module
    from .backends._cuda_library import cupy_view

    cupy = backend_module("cuda")

    device_export(array)
    producer = export_stream(array)
    if producer is not None and stream != -1:
        if stream is None or stream == 1:
            consumer = cupy.cuda.Stream.null
        elif stream == 2:
            consumer = cupy.cuda.Stream.ptds
        else:
            consumer = cupy.cuda.ExternalStream(int(stream))
        ready = cupy.cuda.Event(block=False, disable_timing=True)
        ready.record(producer)
        consumer.wait_event(ready)
    view = cupy_view(rt.backend, array)
    kwargs: dict[str, Any] = {"stream": -1}
    if max_version is not None:
        kwargs["max_version"] = max_version
    try:
        return view.__dlpack__(**kwargs)
    except (TypeError, ValueError):   # an older CuPy: no stream=-1 / max_version
        return view.toDlpack()


def dlpack_device(array: Array) -> tuple[int, int]:
    """``(device type, id)``: CUDA managed memory on ``cuda``, the CPU on ``sim``."""
    rt = array._alloc.runtime
    if rt.backend.name != "cuda":
        return (1, 0)
    from .backends._cuda_library import cupy_view

    return tuple(cupy_view(rt.backend, array).__dlpack_device__())
