"""Device selection: which of the runtime's devices a kernel or library call runs on.

The model
---------
A runtime over several devices numbers them ``0 .. n-1`` (its *slots*; the backend maps them
to the host's device numbers). Every allocation's ``location`` is a bit set: bit 0 the host,
bit ``d + 1`` slot ``d`` (:func:`device_bit`), each set bit a current copy. Before a node is
issued the runtime asks a :class:`Placement` for its slot, giving what the policies look at:
each array argument's location, size and whether its old bytes are needed, and how many
streams of each device have work in flight. The policies are GrCUDA's:

``round-robin``        the next device in turn;
``stream-aware``       the device with the fewest busy streams (ties: round-robin order);
``min-transfer-size``  the device already holding the most bytes the node needs, when that is
                       more than ``threshold`` of them; else the device that used most of its
                       arguments' bytes last (their *home*: an array made inside
                       ``asyncgpu.device(d)`` starts at home on ``d``); else round-robin;
``min-min``            the least estimated transfer time, each missing input fetched over the
                       best link from a holder (bytes / bandwidth, the bandwidth matrix);
``min-max``            the same with each input over its worst link from a holder.

Library calls are always placed by data (``data_first``): where most of their needed bytes
are, else at their arguments' home, round-robin when they have none. Ties between devices (for the transfer
times, costs within 5% of the least) are broken in round-robin order starting from the device
after the last one chosen, so a stream of equivalent independent nodes spreads over every
device.

Invariants: the answer is a slot in ``range(n)``; the policies only decide (the runtime makes
the copies); a placement with one device always answers 0 and moves no state.

Example::

    p = Placement("min-transfer-size", 2, threshold=0.1)
    p.choose([(device_bit(1), 4096, True, -1)], busy=[0, 0])   # 1: it holds all the bytes
    p.choose([(HOST_BIT, 4096, True, -1)], busy=[0, 0])        # round-robin: 0, then 1, ...
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .config import MAX_DEVICES
from .errors import DeviceError

#: The host's bit in a location set.
HOST_BIT = 1

#: ``min-min``/``min-max``: estimated transfer times within this factor of the least are ties.
TIE = 1.05

#: The policies' names, in the order the documentation lists them.
POLICIES = ("round-robin", "stream-aware", "min-transfer-size", "min-min", "min-max")
#: Their codes (``Placement.code``).
ROUND_ROBIN, STREAM_AWARE, MIN_TRANSFER, MIN_MIN, MIN_MAX = range(len(POLICIES))

#: One argument as the policies see it: (location bits, bytes, whether its old bytes are read,
#: its home slot or -1).
Need = tuple[int, int, bool, int]


def device_bit(slot: int) -> int:
    """The location bit of device slot ``slot`` (below ``MAX_DEVICES``: the bit sets are C ints
    where compiled)."""
    return 2 << slot


def default_bandwidth(n: int, host: float = 1.0, peer: float = 7.0) -> list[list[float]]:
    """A bandwidth matrix of ``n`` devices and the host (index 0: the host, ``d + 1``: slot
    ``d``), in relative units: host links ``host``, peer links ``peer``. The simulator's model
    (a host link about 55 GB/s against NVLink's 394 on the H200 hosts measured)."""
    size = n + 1
    return [[0.0 if i == j else (host if 0 in (i, j) else peer) for j in range(size)]
            for i in range(size)]


class Placement:
    """Chooses a device slot per node (see the module docstring)."""

    __slots__ = ("bandwidth", "code", "n", "next", "policy", "threshold")

    def __init__(self, policy: str, n: int, threshold: float = 0.1,
                 bandwidth: Sequence[Sequence[float]] | None = None) -> None:
        if policy not in POLICIES:
            raise ValueError(f"device policy must be one of {', '.join(POLICIES)}; "
                             f"got {policy!r}")
        self.policy = policy
        self.code = POLICIES.index(policy)      # (choose compares integers, not names)
        self.n = n
        self.threshold = threshold
        self.bandwidth = [list(row) for row in (bandwidth or default_bandwidth(n))]
        self.next = 0       # where round-robin goes next

    def _turn(self, values: Sequence[Any], bound: Any, equal: bool) -> int:
        """The first slot at or after the round-robin position whose value is ``bound``
        (``equal``) or at most ``bound``; moves the position on past it."""
        n = self.n
        start = self.next
        for k in range(n):
            d = (start + k) % n
            value = values[d]
            if value == bound if equal else value <= bound:
                self.next = (d + 1) % n
                return d
        raise AssertionError("a bound no slot meets")   # (bounds come from the values)

    def choose(self, needs: Sequence[Need], busy: Sequence[int],
               data_first: bool = False) -> int:
        """The slot for a node whose array arguments are ``needs``; ``busy``: streams with
        work in flight per slot; ``data_first``: place by data (library calls)."""
        n = self.n
        if n == 1:
            return 0
        code = MIN_TRANSFER if data_first else self.code
        if code == ROUND_ROBIN:
            d = self.next
            self.next = (d + 1) % n
            return d
        if code == STREAM_AWARE:
            return self._turn(busy, min(busy), True)
        if code == MIN_TRANSFER:
            held = self.held_bytes(needs)
            total = 0
            for need in needs:
                if need[2]:
                    total += need[1]
            top = 0
            for d in range(n):
                top = max(top, held[d])
            if top > 0 and (data_first or top > self.threshold * total):
                return self._turn(held, top, True)
            homes = [0] * n
            top = 0
            for need in needs:
                d = need[3]
                if d >= 0:
                    homes[d] += need[1] or 1
                    top = max(top, homes[d])
            return self._turn(homes, top, True)
        cost = self.transfer_times(needs, code == MIN_MAX)     # (positional: a C call)
        # (measured links of one kind differ by a few percent: such costs are ties, or every
        # node would go to the device whose host link measured fastest)
        return self._turn(cost, min(cost) * TIE, False)

    def held_bytes(self, needs: Sequence[Need]) -> list[int]:
        """Per slot, the bytes of the needed (read) arguments already current there."""
        n = self.n
        held = [0] * n
        for need in needs:
            if need[2]:
                location = need[0]
                for d in range(n):
                    if location & (2 << d):
                        held[d] += need[1]
        return held

    def transfer_times(self, needs: Sequence[Need], worst: bool) -> list[float]:
        """Per slot, the estimated time to bring the needed arguments there: bytes over the
        bandwidth of the best (or, ``worst``, the slowest) link from a holder."""
        bw = self.bandwidth
        times = [0.0] * self.n
        for location, size, reads, _ in needs:
            if not reads or not size or not location:
                continue
            sources = ([0] if location & HOST_BIT else []) + [
                d + 1 for d in range(self.n) if location & (2 << d)]
            for d in range(self.n):
                if location & (2 << d):
                    continue
                rates = [bw[s][d + 1] for s in sources if bw[s][d + 1] > 0]
                if rates:
                    rate = min(rates) if worst else max(rates)
                    times[d] += size / rate
        return times


def select_devices(devices: Any, device: int, count: int, what: str) -> tuple[int, ...]:
    """The device numbers option ``devices`` selects on a host with ``count`` devices
    (``what`` names them in messages): ``"all"``, a count from ``device`` on, or the numbers
    themselves. DeviceError for a device the host lacks."""
    if devices == "all":
        if count > MAX_DEVICES:
            raise DeviceError(f"devices=\"all\": this machine has {count} {what}, and one "
                              f"runtime spreads work over at most {MAX_DEVICES}; pass "
                              f"devices={MAX_DEVICES} or the device numbers")
        chosen = tuple(range(count))
    elif isinstance(devices, int):
        chosen = tuple(range(device, device + devices))
    else:
        chosen = tuple(devices)
    missing = [d for d in chosen if d >= count]
    if missing and devices == 1:
        raise DeviceError(f"device={device} (the option device, or ASYNCGPU_DEVICE): this "
                          f"machine has {count} {what} (0-{count - 1}); choose among those")
    if missing:
        raise DeviceError(
            f"devices={devices!r} asks for device {missing[0]}, and this machine has {count} "
            f"{what} (0-{count - 1}); choose among those, or devices=\"all\"")
    return chosen
