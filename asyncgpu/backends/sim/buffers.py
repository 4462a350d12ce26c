"""Memory of the simulated device: buffers with their host and device copies, and the copies
between them.

The model
---------
A :class:`SimBuffer` is one allocation's bytes. Coherent (managed) mode: one byte array the
host and every device address. Split mode (the explicit memory model): the host mirror and
each device's copy are arrays of their own, made poisoned (0xFF) on first use, so a copy the
runtime forgot shows as stale data; the happens-before checker sees each as a buffer of its
own (``uid``, ``host_uid``, ``uid_on(d)``). A :class:`SimCopy` moves ``[lo, hi)`` between the
mirror and a device, or between two devices, as a kernel does: a snapshot of the source when
it begins, written to the destination when it ends.

Example::

    buf = SimBuffer(64, split=True)
    copy = SimCopy(buf, 0, 64, True, device=1)     # mirror -> device 1
    copy.end(copy.begin())
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from ...core.errors import NotOnSimulatorError, OutOfMemoryError
from .kernels import POISON

_uids = itertools.count(1)


class NoDevicePointer(NotOnSimulatorError, AttributeError):
    """An export of a device pointer on ``sim``: also an ``AttributeError``, so that
    ``hasattr(a, "__cuda_array_interface__")`` (how libraries probe for CUDA arrays) answers
    False instead of raising."""


def _poisoned(nbytes: int, what: str) -> np.ndarray:
    """``nbytes`` of poison (0xFF), or :class:`OutOfMemoryError` where the host has no room."""
    try:
        return np.full(nbytes, POISON, np.uint8)
    except MemoryError as exc:      # (the host's memory: the simulated device's)
        raise OutOfMemoryError(f"cannot allocate {nbytes / 2**20:.1f} MiB of {what}: {exc}. "
                               "Free arrays, or use smaller ones") from None


class SimBuffer:
    """Memory of the simulated device.

    ``dev`` is what kernels and library calls see, ``host`` what host accesses see. Coherent
    (managed) mode: one byte array for both, as unified memory. Split mode (the explicit memory
    model): two arrays, so a copy the runtime forgot shows as stale (poisoned) data, and the
    checker tracks the host mirror as a buffer of its own (``host_uid``).

    Several virtual devices, split mode: every device has a copy of its own (``on(d)``,
    checked as buffer ``uid_on(d)``), made poisoned at its first use, so a peer copy the
    runtime forgot shows as stale data too; ``dev`` and ``uid`` are device 0's. Coherent mode:
    one memory every device and the host address, as managed memory.
    """

    __slots__ = ("uid", "host_uid", "nbytes", "dev", "host", "others")

    def __init__(self, nbytes: int, split: bool = False) -> None:
        self.uid = next(_uids)
        self.nbytes = nbytes
        self.dev = _poisoned(nbytes, "simulated device memory (host memory on sim)")
        #: devices 1, 2, ...: (uid, bytes), made on first use
        self.others: dict[int, tuple[int, np.ndarray]] = {}
        if split:
            self.host = _poisoned(nbytes, "host memory for the array's host mirror")
            self.host_uid = next(_uids)
        else:
            self.host = self.dev
            self.host_uid = self.uid

    def _other(self, device: int) -> tuple[int, np.ndarray]:
        other = self.others.get(device)
        if other is None:
            other = self.others[device] = (next(_uids), _poisoned(
                self.nbytes, f"simulated memory of device {device} (host memory on sim)"))
        return other

    def on(self, device: int) -> np.ndarray:
        """Device ``device``'s copy of the bytes."""
        return self.dev if device == 0 or self.host is self.dev else self._other(device)[1]

    def uid_on(self, device: int) -> int:
        """The checker's name of device ``device``'s copy."""
        return self.uid if device == 0 or self.host is self.dev else self._other(device)[0]

    def poison(self) -> None:
        self.dev.fill(POISON)
        if self.host is not self.dev:
            self.host.fill(POISON)
        for _, data in self.others.values():
            data.fill(POISON)

    def device_pointer(self) -> int:
        raise NoDevicePointer("arrays of the sim backend have no device pointer to export "
                              "(__cuda_array_interface__ is the cuda backend's; DLPack and "
                              "numpy() work on both)")


class ForeignSimBuffer(SimBuffer):
    """Another library's memory imported without a copy (``asyncgpu.asarray``): on ``sim``
    host memory (a CPU DLPack producer, an array of Numba's CUDA simulator). ``dev`` is that
    memory; the split mode's mirror is a buffer of its own, as for any allocation. Never
    poisoned nor pooled: the bytes belong to ``owner``, which the buffer keeps alive."""

    __slots__ = ("owner",)

    def __init__(self, owner: Any, dev: np.ndarray, split: bool) -> None:
        self.uid = next(_uids)
        self.nbytes = dev.size
        self.dev = dev
        self.owner = owner
        self.others = {}
        if split:
            self.host = np.full(dev.size, POISON, np.uint8)
            self.host_uid = next(_uids)
        else:
            self.host = dev
            self.host_uid = self.uid


class SimCopy:
    """One queued copy of ``[lo, hi)``: host mirror to device ``device`` (``to_device``), or
    device ``device`` to the mirror, or, with ``peer`` set, device ``peer`` to device
    ``device`` (a peer copy).

    Like a kernel: *begin* snapshots the source bytes, *end* writes them to the destination,
    so work running in between cannot leak into the copy, nor the copy into it early.
    """

    __slots__ = ("buffer", "lo", "hi", "to_device", "device", "peer")

    def __init__(self, buffer: SimBuffer, lo: int, hi: int, to_device: bool, device: int = 0,
                 peer: int | None = None) -> None:
        self.buffer, self.lo, self.hi, self.to_device = buffer, lo, hi, to_device
        self.device, self.peer = device, peer

    def written_ranges(self) -> list[tuple[int, int, int, bool]]:
        """None: a copy moves bytes as they are, so what faulted work was to write stays
        marked wherever its bytes are copied."""
        return []

    def _ends(self) -> tuple[tuple[int, np.ndarray], tuple[int, np.ndarray]]:
        """((uid, bytes) of the source, (uid, bytes) of the destination)."""
        b, device = self.buffer, self.device
        here = (b.uid_on(device), b.on(device))
        if self.peer is not None:
            return (b.uid_on(self.peer), b.on(self.peer)), here
        host = (b.host_uid, b.host)
        return (host, here) if self.to_device else (here, host)

    def hb_accesses(self) -> list[tuple[int, int, int, bool]]:
        """What the happens-before checker sees: a read of the source, a write of the target."""
        (src, _), (dst, _) = self._ends()
        return [(src, self.lo, self.hi, False), (dst, self.lo, self.hi, True)]

    def begin(self) -> np.ndarray:
        return self._ends()[0][1][self.lo:self.hi].copy()

    def end(self, data: np.ndarray) -> None:
        self._ends()[1][1][self.lo:self.hi] = data
