"""The ``cuda`` backend's memory: buffers of managed or device memory, and copies between a
device buffer and its pinned host mirror.

A :class:`CudaBuffer` is managed (unified) memory, one allocation the host and the device both
address. A :class:`DeviceBuffer` is device memory plus a pinned host mirror allocated on first
use; the explicit memory model (``asyncgpu.runtime.memory``) moves bytes between the two with
:class:`CudaCopy` (one asynchronous copy on a stream, made by the backend's calls; the backend's
``fetch_to_host`` for host reads). Each buffer has a ``uid`` per copy of its bytes (one for managed memory, two for a
device buffer and its mirror): what the happens-before checker tracks.

Example::

    buf = DeviceBuffer(nbytes, mem, mem.ptr)
    CudaCopy(backend.calls, buf, 0, nbytes, to_device=True)(stream)
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from ...core.errors import OutOfMemoryError

_uids = itertools.count(1)
#: CUDA's ``cudaMemcpyKind`` of the two directions (the driver's copies need none).
HOST_TO_DEVICE, DEVICE_TO_HOST = 1, 2


class CudaBuffer:
    """A block of managed memory and the NumPy view of it that the host uses."""

    __slots__ = ("uid", "host_uid", "nbytes", "mem", "ptr", "host")

    def __init__(self, nbytes: int, mem: Any, ptr: int, host: np.ndarray) -> None:
        self.uid = self.host_uid = next(_uids)     # one memory, seen by host and device
        self.nbytes = nbytes
        self.mem = mem
        self.ptr = ptr
        self.host = host

    def device_pointer(self) -> int:
        return self.ptr


class DeviceBuffer:
    """Device memory (explicit memory model) and its pinned host mirror.

    The mirror is allocated on first use of ``host`` (a host access, or a copy that needs it),
    from CuPy's pinned memory pool, and viewed as NumPy bytes: asynchronous copies need
    page-locked memory to run at full bandwidth and without blocking the host.
    """

    __slots__ = ("uid", "host_uid", "nbytes", "mem", "ptr", "_host", "_pinned", "_host_ptr",
                 "mirror")

    def __init__(self, nbytes: int, mem: Any, ptr: int, mirror: Any = None) -> None:
        self.uid = next(_uids)
        self.nbytes = nbytes
        self.mem = mem
        self.ptr = ptr
        self._host: np.ndarray | None = None
        self._pinned: Any = None
        self._host_ptr = 0
        #: several devices: the :class:`DeviceCopies` whose host mirror this copy shares
        self.mirror = mirror
        self.host_uid = next(_uids) if mirror is None else mirror.host_uid

    @property
    def host(self) -> np.ndarray:
        host = self._host
        if host is None:
            if self.mirror is not None:
                host = self.mirror.host
            elif self.nbytes == 0:
                host = np.empty(0, np.uint8)
            else:
                import cupy

                try:
                    self._pinned = cupy.cuda.alloc_pinned_memory(self.nbytes)
                except Exception as exc:     # cudaErrorMemoryAllocation: page-locked RAM
                    raise OutOfMemoryError(
                        f"cannot allocate {self.nbytes / 2**20:.1f} MiB of pinned host memory "
                        f"for the host copy of an array (explicit memory model): {exc}. Free "
                        "arrays, touch fewer large arrays from the host, or use "
                        "ASYNCGPU_MEMORY=managed"
                    ) from exc
                host = np.frombuffer(self._pinned, np.uint8, self.nbytes)
            self._host = host
        return host

    @property
    def host_ptr(self) -> int:
        """The mirror's address (allocating it): copies take it on every call, and NumPy's
        ``ctypes.data`` builds an object each time it is asked."""
        ptr = self._host_ptr
        if not ptr:
            ptr = self._host_ptr = self.host.ctypes.data
        return ptr

    def release(self) -> None:
        self.mem = None      # back to the pools: every node using them has finished
        self._host = None
        self._pinned = None
        self._host_ptr = 0

    def device_pointer(self) -> int:
        return self.ptr


class DeviceCopies:
    """Explicit memory on a runtime over several devices: one :class:`DeviceBuffer` per device
    slot, made from that device's pool on the first use there (``on``), all sharing one pinned
    host mirror. ``uid_on(slot)`` names a slot's copy for the checker without allocating it;
    ``ptr`` (and ``device_pointer``) is the first slot's copy, the one exports hand out.
    ``make(slot, nbytes)`` allocates a slot's device memory (raising ``OutOfMemoryError``)."""

    __slots__ = ("nbytes", "copies", "uids", "uid", "host_uid", "_mirror", "make")

    def __init__(self, nbytes: int, make: Any) -> None:
        self.nbytes = nbytes
        self.make = make
        self.copies: dict[int, DeviceBuffer] = {}
        self.uids: dict[int, int] = {}
        self._mirror = DeviceBuffer(nbytes, None, 0)     # its host side only
        self.host_uid = self._mirror.host_uid
        self.uid = self.uid_on(0)

    @classmethod
    def adopting(cls, slot: int, buffer: DeviceBuffer, make: Any) -> DeviceCopies:
        """Copies whose slot ``slot`` is ``buffer`` (memory a library call took there)."""
        copies = cls(buffer.nbytes, make)
        buffer.mirror = copies
        buffer.host_uid = copies.host_uid
        copies.uids[slot] = buffer.uid
        copies.copies[slot] = buffer
        return copies

    def uid_on(self, slot: int) -> int:
        uid = self.uids.get(slot)
        if uid is None:
            uid = self.uids[slot] = next(_uids)
        return uid

    def on(self, slot: int) -> DeviceBuffer:
        """Slot ``slot``'s copy (device memory made there on first use)."""
        buf = self.copies.get(slot)
        if buf is None:
            buf = self.make(slot, self.nbytes)
            buf.mirror = self
            buf.host_uid = self.host_uid
            buf.uid = self.uid_on(slot)
            self.copies[slot] = buf
        return buf

    @property
    def host(self) -> np.ndarray:
        return self._mirror.host

    @property
    def host_ptr(self) -> int:
        return self._mirror.host_ptr

    @property
    def ptr(self) -> int:
        return self.on(0).ptr

    def device_pointer(self) -> int:
        return self.ptr

    def release(self) -> None:
        for buf in self.copies.values():
            buf.mem = None
            buf.mirror = None
            buf._host = None
            buf._host_ptr = 0
        self.copies = {}
        self._mirror.release()


class PeerCopy:
    """One ``cudaMemcpyPeerAsync`` of ``[lo, hi)`` from one device's copy to another's."""

    __slots__ = ("memcpy", "dst", "dst_device", "src", "src_device", "nbytes", "span")

    def __init__(self, runtime: Any, dst: DeviceBuffer, dst_device: int, src: DeviceBuffer,
                 src_device: int, lo: int, hi: int) -> None:
        self.memcpy = runtime.memcpyPeerAsync
        self.dst, self.dst_device = dst.ptr + lo, dst_device
        self.src, self.src_device = src.ptr + lo, src_device
        self.nbytes = hi - lo
        self.span = (src.uid, dst.uid, lo, hi)

    def hb_accesses(self) -> list[tuple[int, int, int, bool]]:
        """For the checker: reads the source device's copy, writes the destination's."""
        src, dst, lo, hi = self.span
        return [(src, lo, hi, False), (dst, lo, hi, True)]

    def __call__(self, stream: Any) -> None:
        self.memcpy(self.dst, self.dst_device, self.src, self.src_device, self.nbytes,
                    stream.ptr)


class ForeignBuffer:
    """Another library's device memory imported without a copy (``asyncgpu.asarray``) under
    the managed memory model: kernels use it in place and nothing prefetches it. The host can
    address it only when it is managed or host memory (``host`` is then a NumPy view of it);
    plain device memory has no host view, and a host access explains the ways out. The
    explicit model imports into a :class:`DeviceBuffer` instead (a mirror on first host use).
    The runtime never frees the memory: ``owner`` keeps the producer alive until release."""

    __slots__ = ("uid", "host_uid", "nbytes", "mem", "ptr", "_host", "what")

    def __init__(self, nbytes: int, owner: Any, ptr: int, host: np.ndarray | None,
                 what: str) -> None:
        self.uid = self.host_uid = next(_uids)
        self.nbytes = nbytes
        self.mem = owner
        self.ptr = ptr
        self._host = host
        self.what = what

    @property
    def host(self) -> np.ndarray:
        host = self._host
        if host is None:
            from ...core.errors import ArgumentError

            raise ArgumentError(
                f"the host cannot read or write this array in place: it views the device "
                f"memory of a {self.what} (imported without a copy), and with "
                "memory='managed' the host accesses arrays in place. Copy it first "
                "(asyncgpu.array(x) or y = x.copy()), or use the explicit memory model "
                "(ASYNCGPU_MEMORY=explicit, the default), where host reads copy it over"
            )
        return host

    @host.setter
    def host(self, value: Any) -> None:
        self._host = value

    def device_pointer(self) -> int:
        return self.ptr


class CudaCopy:
    """One asynchronous copy between a buffer's pinned mirror and its device memory, made by
    the backend's calls (``calls.memcpy_async``)."""

    __slots__ = ("memcpy", "dst", "src", "nbytes", "kind", "span")

    def __init__(self, calls: Any, buffer: DeviceBuffer, lo: int, hi: int,
                 to_device: bool) -> None:
        host = buffer.host_ptr + lo      # allocates the mirror now, before enqueue
        dev = buffer.ptr + lo
        self.span = (buffer.uid, buffer.host_uid, lo, hi, to_device)
        self.memcpy = calls.memcpy_async
        self.nbytes = hi - lo
        if to_device:
            self.dst, self.src = dev, host
            self.kind = HOST_TO_DEVICE
        else:
            self.dst, self.src = host, dev
            self.kind = DEVICE_TO_HOST

    def hb_accesses(self) -> list[tuple[int, int, int, bool]]:
        """For the checker (``ASYNCGPU_DEBUG_HB``): reads one copy, writes the other."""
        dev, host, lo, hi, to_device = self.span
        src, dst = (host, dev) if to_device else (dev, host)
        return [(src, lo, hi, False), (dst, lo, hi, True)]

    def __call__(self, stream: Any) -> None:
        self.memcpy(self.dst, self.src, self.nbytes, self.kind, stream.ptr)
