"""Interop with other array libraries: exporting our arrays (importing theirs:
``asyncgpu.runtime.interop``, whose docstring says what neither direction can track).

Exporting (``Array.__cuda_array_interface__``, ``Array.__dlpack__``, ``cupy.asarray(x)``)
    The consumer gets the array's memory (no copy) and a stream on which every unfinished node
    that reads or writes the array is ordered: the stream of the last such node, made to wait
    (by events, never blocking the host) for the others. With ``memory="explicit"`` that is the
    device copy, brought current first by a copy node when the host's copy was the current one;
    the array is then device-current (the consumer may write it). CAI v3 consumers that honour the
    ``stream`` field (CuPy, Numba) and DLPack consumers (which pass their stream) are therefore
    ordered after asyncgpu's reads and writes of the array.

Several devices: an export hands out one device's copy (:func:`export_slot`): another
library's memory on its own device, else the first device holding the array, else its home.

Example::

    cupy.asarray(x)         # x.__cuda_array_interface__: a device pointer and a stream
"""

from __future__ import annotations

import weakref
from typing import Any

from ..core.deps import Access
from . import array_modules
from .array import Array
from .memory import holder
from .node_ops import ops


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


def export_slot(array: Array) -> int:
    """The device slot whose copy an export hands out: with explicit memory on several
    devices, another library's memory on its own GPU, else the first device holding the
    array, else its home; 0 otherwise (one device, or managed memory: one block)."""
    alloc = array._alloc
    rt = alloc.runtime
    if rt.placement is None or rt.memory is None:
        return 0
    if alloc.fixed:
        return alloc.home
    slot = holder(alloc.location)
    return slot if slot >= 0 else max(alloc.home, 0)


def device_export(array: Array, slot: int = 0) -> None:
    """An export of the copy of device slot ``slot``: the allocation is booked as lent
    (:func:`lent`). Explicit memory model: that copy must be current (a copy node if not);
    the consumer may write it, so no other copy is known to be current."""
    rt = array._alloc.runtime
    with rt._lock:
        _lend(rt, array._alloc, slot)
        if rt.memory is not None:
            rt.memory.before_export(array, slot)


#: per runtime: (device slot, device address) -> the allocation whose memory there an export
#: handed out, while it lives (:func:`lent`)
_lent: weakref.WeakKeyDictionary[Any, dict[tuple[int, int], weakref.ref[Any]]] = \
    weakref.WeakKeyDictionary()


def _lend(rt: Any, alloc: Any, slot: int) -> None:
    """Under the lock: book ``alloc``'s memory on device ``slot`` as handed to another
    library. Dropped, its memory waits for a synchronize of the whole device before reuse
    (``Issuing._return_buffer``); passed back to asyncgpu, it is this allocation again
    (:func:`lent`)."""
    if not alloc.nbytes:
        return
    alloc.exported = True
    buffer = alloc.buffer.on(slot) if slot else alloc.buffer
    table = _lent.get(rt)
    if table is None:
        table = _lent[rt] = {}
    table[(slot, buffer.device_pointer())] = weakref.ref(alloc)
    if len(table) >= 64 and len(table) & (len(table) - 1) == 0:
        # (at each power of two: the dead go, so the table stays as large as what lives)
        for key in [k for k, ref in table.items() if _gone(ref())]:
            del table[key]


def _gone(alloc: Any) -> bool:
    return alloc is None or alloc.freed or alloc.buffer is None


def lent(rt: Any, slot: int, base: int, nbytes: int) -> tuple[Any, int] | None:
    """Under the lock: the live allocation of ``rt`` whose memory on device ``slot``, handed
    out by an export, holds ``[base, base + nbytes)``, and its address there; None if none
    does (another library's array over asyncgpu's own memory is a view of the allocation,
    not an import of memory of its own: ``asyncgpu.runtime.interop``)."""
    table = _lent.get(rt)
    if not table:
        return None
    ref = table.get((slot, base))
    if ref is not None:
        alloc = ref()
        if not _gone(alloc) and nbytes <= alloc.nbytes:
            return alloc, base
    for (at, start), ref in table.items():
        if at != slot or start > base:
            continue
        alloc = ref()
        if not _gone(alloc) and base + nbytes <= start + alloc.nbytes:
            return alloc, start
    return None


def _export_view(array: Array) -> Any:
    """The CuPy view an export hands out (``cuda``), made current on its device."""
    slot = export_slot(array)
    device_export(array, slot)
    return array._alloc.runtime.backend.part(slot).cupy_view(array)


def cuda_array_interface(array: Array) -> dict[str, Any]:
    """CUDA Array Interface v3 of an array, with the stream consumers must order after."""
    slot = export_slot(array)
    buffer = array._alloc.buffer
    if slot:
        buffer = buffer.on(slot)        # (several devices: that device's copy)
    ptr = buffer.device_pointer() + array._offset if array.size else 0
    device_export(array, slot)
    stream = export_stream(array)
    return {
        "shape": array.shape,
        "typestr": array.dtype.str,
        "data": (ptr, False),
        "strides": None if array.is_c_contiguous else array.strides,
        "version": 3,
        "stream": None if stream is None else int(stream.ptr),
    }


#: DLPack's device type of the host's memory (``kDLCPU``)
_DL_CPU = 1


def dlpack(array: Array, stream: Any = None, max_version: Any = None, dl_device: Any = None,
           copy: Any = None) -> Any:
    """A DLPack capsule of the array, as the array API standard asks of a producer.

    On ``cuda`` it shares the array's device memory (``copy`` None or False); ``copy=True``
    exports a new array made by a copy node, not by waiting: the node is ordered after the
    array's writers, and the array's later writers after it, as any read is (a copy taken
    aside by CuPy would race with them, or the host would have to wait for all of them), and
    the consumer's stream waits for it as for any export. On ``sim`` the array lives in the
    simulator's memory, so the capsule holds a host copy: ``copy=False`` raises
    ``BufferError``, as the standard asks of a producer that cannot avoid a copy.
    ``dl_device``: None or the array's own device (``__dlpack_device__``); the CPU's,
    ``(1, 0)``, gives a host copy (``BufferError`` with ``copy=False``), any other device
    ``BufferError``.
    """
    rt = array._alloc.runtime
    on_host = rt.backend.name != "cuda"
    if dl_device is not None:
        asked, own = tuple(int(d) for d in dl_device), dlpack_device(array)
        if asked != own and asked != (_DL_CPU, 0):
            raise BufferError(
                f"{array.describe()}: __dlpack__(dl_device={asked}) asks for a device the array "
                f"is not on ({own}); asyncgpu exports it on its own device or, as a host copy, "
                f"to the CPU ({_DL_CPU}, 0)")
        on_host = on_host or asked != own
    if on_host:
        if copy is False:
            raise BufferError(
                f"{array.describe()}: __dlpack__(copy=False) cannot be honoured: "
                + ("arrays of the sim backend live in the simulator's memory, "
                   if rt.backend.name != "cuda" else "device memory reaches the CPU ")
                + "and the capsule can only hold a host copy; pass copy=None, or use x.get()")
        if stream is not None and rt.backend.name != "cuda":
            raise BufferError("arrays of the sim backend live on the host: pass stream=None")
        host = array.numpy()        # (a host read: waits for the array's writers only)
        return host.__dlpack__() if max_version is None else \
            host.__dlpack__(max_version=max_version)
    cupy = array_modules.backend_module("cuda")

    if copy:
        array = array.copy()        # (a node; the capsule's view keeps its memory alive)
    view = _export_view(array)
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
    return tuple(rt.backend.part(export_slot(array)).cupy_view(array).__dlpack_device__())


ops.cuda_array_interface = cuda_array_interface
ops.dlpack = dlpack
ops.dlpack_device = dlpack_device
