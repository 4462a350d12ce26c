"""Interop with other array libraries: importing their arrays (exporting ours:
``asyncgpu.runtime.export``).

Importing (:func:`import_array`: ``asarray`` and kernel arguments)
    A device array of another library (CUDA Array Interface v3: Numba device arrays, CuPy;
    DLPack: PyTorch CUDA tensors, CuPy) becomes an :class:`Array` viewing the producer's
    memory, without a copy: an :class:`Allocation` over that memory (the backend's
    ``foreign_buffer``) that keeps the producer object alive and is never freed by the runtime.
    Its first use is ordered after the producer's work by an *import node* (kind ``"copy"``,
    a write of the whole allocation) whose stream waits for an event: recorded on the stream
    the interface names (CAI ``stream``; the legacy default stream where it names none), or
    on CuPy's current stream, which the producer was asked to make its work visible on
    (DLPack's ``stream=`` handshake). From then on the allocation is tracked like any other.
    One import per memory range and runtime: importing the same memory again (``asarray``
    twice, or passing the object to several launches) returns a view of the same allocation
    while it lives, so launches that use it are ordered among themselves; the producer's
    later work is not waited for again.

    Memory models: ``explicit``, the allocation is device memory whose host mirror is
    allocated on the first host access (a host read copies device-to-host then); ``managed``,
    it is used in place and never prefetched, and the host may touch it only when it is
    managed or host memory. On ``sim`` (no GPU) what can be imported is host memory: arrays
    of Numba's CUDA simulator and DLPack producers on the CPU, also without a copy.

    Refused, with the reason and the fix: memory of another device, host memory as a kernel
    argument (it must be copied: ``asarray`` copies it), read-only or masked arrays, DLPack
    devices other than CUDA, and (in ``Kernel.bind``) layouts or dtypes the parameter cannot
    take. NumPy arrays and array-likes are copied by ``asarray``, as is everything by
    ``asyncgpu.array``.

What the runtime cannot track, either way: work another library enqueues on its own streams
after the hand-over. A later asyncgpu node or host access does not wait for it. After another
library *writes* shared memory (or while it still reads memory asyncgpu will write),
synchronize that library's stream, or call ``asyncgpu.synchronize()`` (a device-wide
synchronize, which covers every stream), before using the array with asyncgpu again. Freeing:
exported memory stays valid while the Array (or a view) is alive; imported memory stays
valid while the Array is, since the allocation holds the producer.
"""

from __future__ import annotations

import logging
import weakref
from typing import Any

import numpy as np

from ..core.dag import Node
from ..core.deps import Access
from ..core.errors import ArgumentError, ArgumentValueError
from .allocation import DEVICE, Allocation, byte_extent, c_contiguous
from .array import Array, host_array
from .current import current_runtime
from .dtypes import refuse_other_order
from .export import lent

log = logging.getLogger("asyncgpu")
#: CUDA's handle of the legacy default stream (``CU_STREAM_LEGACY``, ``cudaStreamLegacy``).
LEGACY_STREAM = 1

_DL_CPU, _DL_CUDA, _DL_CUDA_HOST, _DL_CUDA_MANAGED = 1, 2, 3, 13
_DL_NAMES = {1: "CPU", 2: "CUDA", 3: "CUDA pinned host", 4: "OpenCL", 7: "Vulkan",
             8: "Metal", 9: "VPI", 10: "ROCm", 11: "ROCm pinned host", 13: "CUDA managed",
             14: "oneAPI"}
_MEMORY_TYPES = {1: "host", 2: "device", 3: "managed"}     # cudaMemoryType

#: per runtime: (base address, bytes) -> the live allocation importing that memory
_imports: weakref.WeakKeyDictionary[Any, dict[tuple[int, int], weakref.ref[Allocation]]] = \
    weakref.WeakKeyDictionary()
#: imported allocation -> what its buffer is built from: (owner, base, bytes, kind, host_ok,
#: device slot)
_origins: weakref.WeakKeyDictionary[Allocation, tuple[Any, int, int, str, bool, int]] = \
    weakref.WeakKeyDictionary()


def _simulator_array_type() -> Any:
    try:
        from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray
    except Exception:     # no numba-cuda, or its simulator fails to import
        return None
    return FakeCUDAArray


def is_foreign(obj: Any) -> bool:
    """Whether ``obj`` is another library's array that :func:`import_array` may view: it has
    the CUDA Array Interface, DLPack (NumPy arrays excepted: host data, copied instead), or is
    a device array of Numba (real or simulated). ``Kernel.bind`` asks this of an argument that
    is neither an asyncgpu array nor a number."""
    if isinstance(obj, (np.ndarray, np.generic, Array)):
        return False
    return (hasattr(obj, "__cuda_array_interface__") or hasattr(obj, "__dlpack__")
            or hasattr(obj, "__cuda_ndarray__"))


def kind_of(obj: Any) -> str:
    """``numba.DeviceNDArray``, ``torch.Tensor``: how messages name a foreign object."""
    t = type(obj)
    package = t.__module__.split(".")[0]
    return t.__name__ if package == "builtins" else f"{package}.{t.__name__}"


def asarray(obj: Any, dtype: Any = None, copy: bool = False) -> Array:
    """``obj`` as an :class:`Array`: itself if it is one of that dtype; another library's
    device array viewed without a copy (:func:`import_array`); else a copy.

    ``copy=True`` (what ``asyncgpu.array`` passes) always copies; a ``dtype`` other than the
    foreign array's converts into a new array. A ``dtype`` of the other byte order converts
    host data to the device's order and is refused for a device array (as CuPy's ``astype``
    refuses it).
    """
    if isinstance(obj, Array):
        obj._check_alive()          # (a freed array is refused here, not at its first use)
        refuse_other_order(dtype, "asyncgpu.array" if copy else "asyncgpu.asarray")
        if dtype is None or np.dtype(dtype) == obj.dtype:
            return obj.copy() if copy else obj
        return obj.astype(dtype)
    if not is_foreign(obj):
        return host_array(obj, dtype)
    rt = current_runtime()
    host = _host_memory(rt, obj, copy)
    if host is not None:          # a CPU DLPack producer, copied like NumPy data
        return host_array(host, dtype)
    refuse_other_order(dtype, "asyncgpu.array" if copy else "asyncgpu.asarray")
    view = import_array(rt, obj, "asyncgpu.asarray")
    if dtype is not None and np.dtype(dtype) != view.dtype:
        return view.astype(dtype)
    return view.copy() if copy else view


def _host_memory(rt: Any, obj: Any, copy: bool) -> np.ndarray | None:
    """A DLPack producer whose memory is on the CPU (without a CUDA interface) as a NumPy
    view, which ``asarray`` copies: on ``cuda`` always; on ``sim``, which views such memory in
    place, only a read-only one asked to be copied (``asyncgpu.array``: a producer of DLPack's
    older protocol, which cannot say it is writable, say). A writable one is copied on the
    device there, after the work already given its memory through a view. None otherwise."""
    if (rt.backend.name != "cuda" and not copy) or hasattr(obj, "__cuda_array_interface__"):
        return None
    device = _dlpack_device(obj)
    if device is None or device[0] != _DL_CPU:
        return None
    host = np.from_dlpack(obj)
    return host if rt.backend.name == "cuda" or not host.flags.writeable else None


def _dlpack_device(obj: Any) -> tuple[int, int] | None:
    get = getattr(obj, "__dlpack_device__", None)
    if get is None:
        return None
    try:
        kind, dev = get()
        return int(kind), int(dev)
    except Exception:
        return None


class Described:
    """A foreign array read and checked, not yet adopted (nothing enqueued, nothing cached)."""

    __slots__ = ("obj", "kind", "ptr", "shape", "strides", "dtype", "owner", "ready",
                 "host_ok", "slot", "where")

    def __init__(self, obj: Any, kind: str, ptr: int, shape: tuple[int, ...],
                 strides: tuple[int, ...], dtype: np.dtype, owner: Any, ready: Any,
                 host_ok: bool, slot: int = 0) -> None:
        self.obj, self.kind, self.ptr, self.shape, self.strides = obj, kind, ptr, shape, strides
        self.dtype, self.owner, self.ready, self.host_ok = dtype, owner, ready, host_ok
        self.slot = slot        # the runtime's device slot the memory is on
        self.where = "asyncgpu.asarray"     # who imports it, as errors name it

    @property
    def is_c_contiguous(self) -> bool:
        return c_contiguous(self.shape, self.strides, self.dtype.itemsize)


def describe_foreign(rt: Any, obj: Any, where: str) -> Described:
    """Read a foreign array's interface and check it can be imported (first half of
    :func:`import_array`: raises :class:`ArgumentError` for what cannot, changing nothing)."""
    kind = kind_of(obj)
    if rt.backend.name == "cuda":
        described = Described(obj, kind, *_describe_device(rt, obj, kind, where))
    else:
        described = Described(obj, kind, *_describe_host(obj, kind, where), None, True, 0)
    dtype = described.dtype
    if dtype.hasobject or dtype.kind in "OUSMm" or (dtype.kind == "V" and dtype.fields is None):
        # (records of numbers stay: Numba's random states are one)
        raise ArgumentError(
            f"{where}: the {kind} holds {dtype}, which asyncgpu arrays cannot hold (booleans, "
            "numbers, and records of them); convert it in the producing library first")
    described.where = where
    lo, hi = byte_extent(described.shape, described.strides, dtype.itemsize, 0)
    if hi > lo:
        with rt._lock:      # (refused here, before anything of the caller is enqueued)
            # (an import dropped since is given back first: it overlaps nothing any more)
            rt._drain_releases()
            table = _imports.get(rt)
            if table:
                _overlapping(table, described.ptr + lo, hi - lo, described)
    return described


def adopt(rt: Any, d: Described) -> Array:
    """The Array viewing a described foreign array: a view of the allocation already
    importing that memory, or a new allocation whose first use is ordered after the
    producer (second half of :func:`import_array`)."""
    lo, hi = byte_extent(d.shape, d.strides, d.dtype.itemsize, 0)
    base, nbytes = d.ptr + lo, hi - lo
    with rt._lock:
        own = lent(rt, d.slot, base, nbytes) if nbytes and rt.backend.name == "cuda" else None
        if own is not None:
            # asyncgpu's own memory, handed out by an export and passed back (a CuPy view of
            # an Array, say): a view of that allocation, ordered with its other uses, the
            # part the view covers written, as far as the tracker knows, by the other
            # library's work on it so far (not inside a recording, which cannot wait for
            # another library's stream: there the view is ordered with asyncgpu's work only)
            alloc, start = own
            view = Array._view(alloc, d.shape, d.dtype, d.strides, d.ptr - start)
            if d.ready is not None and rt.recording is None:
                _order_after_producer(rt, alloc, d.ready, d.kind, d.slot,
                                      (base - start, base - start + nbytes))
            return view
        table = _imports.setdefault(rt, {})
        found = table.get((base, nbytes))
        alloc = found() if found is not None else None
        if (alloc is None or alloc.freed or alloc.buffer is None) and nbytes:
            # (memory inside an earlier import is a view of it, so the tracker orders the two;
            # memory that overlaps one without lying inside it is refused: two allocations
            # over the same bytes would not be ordered)
            alloc, base = _overlapping(table, base, nbytes, d)
        if alloc is None or alloc.freed or alloc.buffer is None:
            origin = (d.owner, base, nbytes, d.kind, d.host_ok, d.slot)
            alloc = Allocation(rt, rt.backend.foreign_buffer(*origin), nbytes,
                               DEVICE << d.slot)
            alloc.home = d.slot
            alloc.fixed = True      # (on several devices, now or after a configure)
            _origins[alloc] = origin
            for key in [k for k, r in table.items() if r() is None]:
                del table[key]
            table[(base, nbytes)] = weakref.ref(alloc)
            if d.ready is not None and nbytes:
                _order_after_producer(rt, alloc, d.ready, d.kind, d.slot)
            log.debug("imported a %s of %d bytes at 0x%x without a copy", d.kind, nbytes, base)
    return Array._view(alloc, d.shape, d.dtype, d.strides, d.ptr - base)


def _overlapping(table: dict[tuple[int, int], Any], base: int, nbytes: int, d: Described
                 ) -> tuple[Allocation | None, int]:
    """The live import whose memory holds ``[base, base + nbytes)``, and its base; (None,
    ``base``) where none overlaps it. Raises where one overlaps it without holding it."""
    for (start, size), ref in table.items():
        alloc = ref()
        if (alloc is None or alloc.freed or alloc.buffer is None or not size
                or start >= base + nbytes or base >= start + size):
            continue
        if start <= base and base + nbytes <= start + size and _origins[alloc][5] == d.slot:
            return alloc, start
        raise ArgumentValueError(
            f"{d.where}: this {d.kind}'s memory (0x{base:x}, {nbytes} bytes) overlaps "
            f"memory imported before (0x{start:x}, {size} bytes) without lying inside it, "
            "imported while an asyncgpu array or unfinished work holds it; work on two imports "
            "of the same bytes could not be ordered: import the whole array first "
            "(w = asyncgpu.asarray(x)) and pass views of it (w[::2]), or synchronize and drop "
            "the earlier one")
    return None, base


def origin(alloc: Allocation) -> tuple[Any, int, int, str, bool, int] | None:
    """What an imported allocation's buffer is built from (``backend.foreign_buffer``'s
    arguments), or None for memory of the runtime's own: a change of memory model builds the
    new model's buffer over the same producer memory (``asyncgpu.runtime.switch``)."""
    return _origins.get(alloc)


def import_array(rt: Any, obj: Any, where: str) -> Array:
    """An :class:`Array` viewing a foreign array's memory without a copy (module docstring).

    ``where`` names the caller in errors (``asyncgpu.asarray``, or a kernel's argument).
    Raises :class:`ArgumentError` before anything is enqueued for what cannot be imported.
    """
    return adopt(rt, describe_foreign(rt, obj, where))


def _layout(shape: Any, strides: Any, dtype: np.dtype, kind: str, where: str
            ) -> tuple[tuple[int, ...], tuple[int, ...]]:
    shape = tuple(int(n) for n in shape)
    if strides is None:
        acc, out = dtype.itemsize, []
        for n in reversed(shape):
            out.append(acc)
            acc *= max(n, 1)
        return shape, tuple(reversed(out))
    strides = tuple(int(s) for s in strides)
    if any(s % dtype.itemsize for s in strides):
        raise ArgumentError(
            f"{where}: the {kind} has strides {strides} that are not multiples of its "
            f"{dtype.itemsize}-byte elements; asyncgpu arrays cannot view it: pass a "
            "contiguous copy (e.g. x.copy() in the producing library)"
        )
    return shape, strides


def _interface_dtype(obj: Any, cai: dict[str, Any], kind: str, where: str) -> np.dtype:
    """The dtype a CUDA Array Interface describes: ``descr`` for record types, else
    ``typestr``; a bare ``|V<n>`` with the object's own ``dtype`` of that size takes that
    (Numba's device arrays describe records without ``descr``)."""
    try:
        dtype = np.dtype(cai["typestr"])
        descr = cai.get("descr")
        if descr is not None and not (len(descr) == 1 and descr[0][0] == ""):
            dtype = np.lib.format.descr_to_dtype(descr)
        elif dtype.kind == "V":
            own = getattr(obj, "dtype", None)
            if isinstance(own, np.dtype) and own.itemsize == dtype.itemsize:
                dtype = own
    except (TypeError, ValueError, KeyError) as exc:
        raise ArgumentError(
            f"{where}: the {kind}'s __cuda_array_interface__ has a type asyncgpu cannot "
            f"read ({exc}); pass an array of a NumPy dtype"
        ) from exc
    return dtype


def _describe_device(rt: Any, obj: Any, kind: str, where: str) -> tuple[Any, ...]:
    """cuda: (pointer, shape, strides, dtype, owner, (event, stream-pointer-or-None) or None,
    host addressable) of a foreign device array; refusals raise before anything changes."""
    backend = rt.backend
    device = _dlpack_device(obj)
    if device is not None and (device[0] == _DL_CPU
                               and not hasattr(obj, "__cuda_array_interface__")):
        raise ArgumentError(
            f"{where}: the {kind} lives in host memory (DLPack device CPU), which kernels "
            "cannot read in place; copy it to the device with asyncgpu.asarray(x), or move "
            "it to the GPU in its own library (e.g. x.cuda() in PyTorch)"
        )
    if device is not None and device[0] not in (_DL_CUDA, _DL_CUDA_MANAGED, _DL_CUDA_HOST) \
            and not hasattr(obj, "__cuda_array_interface__"):
        raise ArgumentError(
            f"{where}: the {kind} lives on a DLPack device of type "
            f"{_DL_NAMES.get(device[0], device[0])}; asyncgpu imports CUDA memory only: copy "
            "it to a CUDA device in its own library first"
        )
    if hasattr(obj, "__dlpack__") and device is not None and device[0] != _DL_CPU:
        return _describe_dlpack(backend, obj, kind, where, device)
    try:
        cai = obj.__cuda_array_interface__
    except Exception as exc:
        raise ArgumentError(f"{where}: reading the {kind}'s __cuda_array_interface__ failed "
                            f"({exc})") from exc
    if cai.get("mask") is not None:
        raise ArgumentError(f"{where}: the {kind} is a masked array (its interface has a "
                            "mask); pass the data without the mask")
    ptr, readonly = cai["data"]
    if readonly:
        raise ArgumentError(
            f"{where}: the {kind} is read-only, and asyncgpu arrays are writable; pass a "
            "writable array, or copy it with asyncgpu.array(x)"
        )
    dtype = _interface_dtype(obj, cai, kind, where)
    shape, strides = _layout(cai["shape"], cai.get("strides"), dtype, kind, where)
    memory_type, slot = _check_device(backend, ptr, kind, where)
    stream = cai.get("stream") if cai.get("version", 0) >= 3 else None
    if stream == 0:
        raise ArgumentError(f"{where}: the {kind}'s __cuda_array_interface__ names stream "
                            "0, which the interface forbids (1 is the legacy default "
                            "stream, 2 the per-thread one)")
    # An interface without a stream says the data is ready, but a producer's synchronous copy
    # from pageable host memory (Numba's ``to_device``) returns once the bytes are staged,
    # with the DMA still running on the legacy default stream, which our non-blocking
    # streams do not wait for: the first use then waits for that stream's work as well.
    # (on the memory's device: the legacy stream is the current device's)
    with backend.on_device(slot):
        part = backend.part(slot)
        event = part.create_event()
        part.calls.event_record(event.ptr, LEGACY_STREAM if stream is None else int(stream))
    ready = event     # (the producer's work up to now)
    return (int(ptr), shape, strides, dtype, obj, ready, memory_type in ("managed", "host"),
            slot)


def _describe_dlpack(backend: Any, obj: Any, kind: str, where: str, device: tuple[int, int]
                     ) -> tuple[Any, ...]:
    """cuda, a DLPack producer on a CUDA device: CuPy takes the capsule on the stream that is
    current in CuPy (the user's), passing it as the consumer's stream, and the producer makes
    its work visible there; an event recorded on that stream then covers it.

    (Not on a stream of ours made current for the call: a CuPy producer takes CuPy's current
    stream for its own, so it would see the consumer's stream as its own and order nothing,
    and its kernels still running on the user's stream would be read before they wrote.)"""
    cupy = backend.cupy
    slot = backend.slot_of(device[1])
    if slot < 0:
        _wrong_device(backend, device[1], kind, where)
    with backend.on_device(slot):
        part = backend.part(slot)
        try:
            view = cupy.from_dlpack(obj)
        except Exception as exc:
            raise ArgumentError(
                f"{where}: the {kind} could not be imported through DLPack ({exc}); pass a "
                "C- or F-ordered array of a numeric dtype on this GPU"
            ) from exc
        event = part.create_event()
        part.calls.event_record(event.ptr, cupy.cuda.get_current_stream().ptr)
    dtype = np.dtype(view.dtype)
    shape, strides = _layout(view.shape, view.strides, dtype, kind, where)
    return (int(view.data.ptr), shape, strides, dtype, (view, obj), event,
            device[0] in (_DL_CUDA_MANAGED, _DL_CUDA_HOST), slot)


def _check_device(backend: Any, ptr: int, kind: str, where: str) -> tuple[str, int]:
    """The memory type of ``ptr`` ("device", "managed", "host") and the runtime's slot of its
    device; refuses device memory of a device the runtime does not run on."""
    if not ptr:
        return "device", 0
    try:
        attrs = backend.runtime.pointerGetAttributes(int(ptr))
    except Exception as exc:
        raise ArgumentError(
            f"{where}: the {kind}'s data pointer 0x{int(ptr):x} is not memory CUDA knows "
            f"({exc}); pass a device array"
        ) from exc
    memory_type = _MEMORY_TYPES.get(int(getattr(attrs, "type", 2)), "unregistered")
    if memory_type == "unregistered":
        raise ArgumentError(
            f"{where}: the {kind}'s data pointer 0x{int(ptr):x} is host memory CUDA does "
            "not know; copy it with asyncgpu.array(x)"
        )
    device = int(getattr(attrs, "device", backend.device_numbers()[0]))
    slot = backend.slot_of(device)
    if memory_type == "device" and slot < 0:
        _wrong_device(backend, device, kind, where)
    return memory_type, max(slot, 0)


def _wrong_device(backend: Any, dev: int, kind: str, where: str) -> None:
    numbers = backend.device_numbers()
    if len(numbers) == 1:
        raise ArgumentError(
            f"{where}: the {kind} is on GPU {dev}, and this runtime runs on GPU {numbers[0]}; "
            f"copy it to GPU {numbers[0]} in its own library, or configure asyncgpu with "
            f"device={dev} (ASYNCGPU_DEVICE={dev})"
        )
    listed = ", ".join(str(n) for n in numbers)
    raise ArgumentError(
        f"{where}: the {kind} is on GPU {dev}, and this runtime runs on GPUs {listed}; copy "
        f"it to one of them in its own library, or configure asyncgpu with devices that "
        f"include GPU {dev}"
    )


def _describe_host(obj: Any, kind: str, where: str) -> tuple[Any, ...]:
    """sim: (pointer, shape, strides, dtype, owner) of a foreign array in host memory."""
    fake = _simulator_array_type()
    if fake is not None and isinstance(obj, fake):
        host = obj._ary          # the simulator's device array is this NumPy array
    else:
        device = _dlpack_device(obj)
        if device is None or device[0] != _DL_CPU:
            raise ArgumentError(
                f"{where}: the {kind} lives in GPU memory, which the sim backend cannot "
                "read; on sim, pass an asyncgpu array, a NumPy array (asyncgpu.asarray copies "
                "it), a device array of Numba's CUDA simulator (NUMBA_ENABLE_CUDASIM=1) or a "
                "CPU DLPack producer; or run on the cuda backend"
            )
        try:
            host = np.from_dlpack(obj)
        except (BufferError, RuntimeError, TypeError, ValueError) as exc:
            raise ArgumentError(
                f"{where}: the {kind} could not be imported through DLPack ({exc}); pass a "
                "NumPy array instead"
            ) from exc
    if not host.flags.writeable:
        raise ArgumentError(
            f"{where}: the {kind} is read-only, and asyncgpu arrays are writable; pass a "
            "writable array, or copy it with asyncgpu.array(x)"
        )
    dtype = host.dtype
    shape, strides = _layout(host.shape, host.strides, dtype, kind, where)
    return (host.__array_interface__["data"][0], shape, strides, dtype, (host, obj))


class ForeignReady:
    """The launch of an import node: its stream waits for the producer's event."""

    __slots__ = ("wait", "event", "span")

    def __init__(self, backend: Any, event: Any, alloc: Allocation, lo: int, hi: int) -> None:
        self.wait = backend.calls.stream_wait
        self.event = event
        self.span = (alloc.buffer.uid, lo, hi)

    def hb_accesses(self) -> list[tuple[int, int, int, bool]]:
        """For the checker: the producer's write of the memory, which this node stands for."""
        uid, lo, hi = self.span
        return [(uid, lo, hi, True)]

    def __call__(self, stream: Any) -> None:
        self.wait(stream.ptr, self.event.ptr, 0)


def _order_after_producer(rt: Any, alloc: Allocation, event: Any, kind: str,
                          slot: int = 0, span: tuple[int, int] | None = None) -> None:
    """Issue the import node (under the runtime's lock): a write of the whole allocation (or
    of the bytes ``span``), so every later use waits for it, and on the memory's device (slot
    ``slot``) it waits for the producer's event."""
    if rt.recording is not None:
        rt.recording.refuse(f"import of a {kind}")
    label = f"import of a {kind}"
    lo, hi = span if span is not None else (0, alloc.nbytes)
    node = Node("copy", label, None, [Access(alloc.id, alloc, lo, hi, True, label)])
    node.launch = ForeignReady(rt.backend.part(slot), event, alloc, lo, hi)
    node.device = slot
    rt._issue(node)
    alloc.location = DEVICE << slot
