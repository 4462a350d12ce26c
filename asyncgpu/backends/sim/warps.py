"""Warp-level functions in Numba's simulator: shuffles, votes, matches and ``syncwarp``.

Numba's CUDA simulator has no ``cuda.shfl_sync`` and kin (numba-cuda 0.30): a kernel calling
one failed on ``sim`` where it runs on the GPU. Here each is a collective of the lanes its mask
names, on the block's Python threads (the sim backend runs a kernel that names one of them with
a thread per CUDA thread, as for ``cuda.syncthreads()``).

The model
---------
A block's CUDA threads are numbered as CUDA numbers them (``x + X * (y + Y * z)``); thread ``t``
is lane ``t % 32`` of warp ``t // 32``. A call ``f(mask, value, ...)`` is a *round* of its warp
and ``mask``: each lane the mask names that exists in the block and has not returned puts its
value in, and every one leaves once all have (as a warp's threads converge at a ``.sync``
instruction). Shuffles read the value of the lane PTX's ``shfl.sync`` names (the offset and the
source lane taken modulo 32; up and down past the warp's ends read the caller's own value);
votes and matches read every lane's. Results have Numba's types: a ballot's or a match's mask
is an ``int32`` (a full warp's is -1), ``activemask`` and ``lanemask_lt`` are ``uint32``; a
shuffle takes 32- and 64-bit integers and floats, as Numba's does.

Invariant: what the GPU leaves undefined raises here, naming the lane: a call whose mask leaves
the calling lane out, lanes of one round calling different functions, a shuffle from a lane
outside the round (not in the mask, returned, or past the block's end). A thread that fails
breaks the rounds its block's other threads wait in, as it breaks their barrier; threads that
all wait, in rounds and at the barrier, and cannot go on (the GPU hangs) fail, saying where.

Example::

    v = x[i]
    for k in (16, 8, 4, 2, 1):
        v += cuda.shfl_down_sync(0xFFFFFFFF, v, k)   # lane 0 ends with the warp's sum
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from .elements import Boolean

FULL = 0xFFFFFFFF
#: The functions this module adds to the simulator's ``cuda`` (each a collective but
#: ``lanemask_lt``), which make a kernel run a Python thread per CUDA thread.
WARP_FUNCTIONS = frozenset({
    "shfl_sync", "shfl_up_sync", "shfl_down_sync", "shfl_xor_sync", "all_sync", "any_sync",
    "eq_sync", "ballot_sync", "match_any_sync", "match_all_sync", "activemask", "syncwarp",
})


class _Round:
    __slots__ = ("what", "values", "done")

    def __init__(self, what: str) -> None:
        self.what, self.values, self.done = what, {}, False


class Warps:
    """The warps of one block: the rounds open in each, and which threads have returned. It
    shares the lock of the block's barrier (``barrier``: ``cond``, ``broken``, ``stuck``,
    ``check_stuck``), which finds the block stuck when every thread waits."""

    def __init__(self, threads: int, barrier: Any) -> None:
        self._barrier = barrier
        self._cond = barrier.cond
        self._threads = threads
        self._returned: set[int] = set()
        self._open: dict[tuple[int, int], _Round] = {}

    def exchange(self, thread: int, what: str, mask: Any, value: Any) -> dict[int, Any]:
        """Lane ``thread % 32``'s ``value`` in the round of its warp and ``mask``; every
        lane's value, by lane, once all have put theirs in."""
        warp, lane = divmod(thread, 32)
        mask = int(mask) & FULL
        if not mask >> lane & 1:
            raise RuntimeError(
                f"cuda.{what}: lane {lane} (thread {thread} of its block) called it with mask "
                f"{mask:#010x}, which leaves the lane out: undefined on the GPU; include every "
                "calling lane in the mask")
        barrier = self._barrier
        with self._cond:
            if barrier.broken:
                raise RuntimeError(barrier.stuck or f"abort flag set on {what} call")
            key = (warp, mask)
            rnd = self._open.get(key)
            if rnd is None:
                rnd = self._open[key] = _Round(what)
            elif rnd.what != what:
                raise RuntimeError(
                    f"cuda.{what}: lane {lane} of warp {warp} called it where other lanes of "
                    f"mask {mask:#010x} called cuda.{rnd.what}: undefined on the GPU; every "
                    "lane of the mask must make the same call")
            rnd.values[lane] = value
            self._close_if_complete(key, rnd)
            if not rnd.done:
                barrier.check_stuck()
            while not rnd.done and not barrier.broken:
                self._cond.wait()
            if not rnd.done:
                raise RuntimeError(barrier.stuck or f"abort flag set on {what} clear")
            return rnd.values

    def lanes(self, thread: int) -> int:
        """The lanes of ``thread``'s warp that exist in the block."""
        warp = thread // 32
        return sum(1 << lane for lane in range(32) if warp * 32 + lane < self._threads)

    def left(self, thread: int) -> None:
        """(Under the lock.) Thread ``thread`` returned: the rounds waiting for it alone
        close."""
        self._returned.add(thread)
        for key, rnd in list(self._open.items()):
            self._close_if_complete(key, rnd)

    def waiting(self) -> int:
        """(Under the lock.) The threads waiting in rounds not complete."""
        return sum(len(rnd.values) for rnd in self._open.values())

    def describe_waiting(self) -> str:
        """(Under the lock.) The open rounds: ``cuda.shfl_sync (warp 0, mask 0xffffffff:
        lanes 0-15 of 32)``."""
        return ", ".join(
            f"cuda.{rnd.what} (warp {warp}, mask {mask:#010x}: {len(rnd.values)} of "
            f"{bin(self._present(warp, mask)).count('1')} lanes)"
            for (warp, mask), rnd in self._open.items())

    def _present(self, warp: int, mask: int) -> int:
        lanes = 0
        for lane in range(32):
            t = warp * 32 + lane
            if mask >> lane & 1 and t < self._threads and t not in self._returned:
                lanes |= 1 << lane
        return lanes

    def _close_if_complete(self, key: tuple[int, int], rnd: _Round) -> None:
        expected = self._present(*key)
        if all(expected >> lane & 1 == 0 or lane in rnd.values for lane in range(32)):
            rnd.done = True
            del self._open[key]
            self._cond.notify_all()


def _warps(what: str) -> tuple[Warps, int]:
    """This thread's block's warps, and its thread number in the block."""
    thread = threading.current_thread()
    warps = getattr(getattr(thread, "block", None), "warps", None)
    if warps is None:
        raise RuntimeError(
            f"asyncgpu's simulator runs this kernel's threads one after another, having found "
            f"no warp function in its code, yet it reached cuda.{what} (through another name): "
            f"call it as cuda.{what}")
    return warps, thread.thread_id


def _round(what: str, mask: Any, value: Any) -> tuple[dict[int, Any], int]:
    warps, thread = _warps(what)
    return warps.exchange(thread, what, mask, value), thread % 32


def _mask(lanes: int) -> np.int32:
    """A mask as Numba types a ballot's or a match's: an ``int32``, bit 31 its sign."""
    return np.uint32(lanes).view(np.int32)


#: What Numba's shuffles take (``shfl_sync_intrinsic``'s signatures: i4, i8, f4, f8); Python
#: numbers in a simulated kernel stand for 64-bit ones.
_SHUFFLED = (np.int32, np.int64, np.float32, np.float64, int, float)


def _value(what: str, value: Any) -> Any:
    if not isinstance(value, _SHUFFLED) or isinstance(value, (bool, np.bool_, Boolean)):
        raise TypeError(f"cuda.{what} shuffles 32- and 64-bit integers and floats (Numba's "
                        f"shuffles compile for int32, int64, float32 and float64); got "
                        f"{type(value).__name__}: convert it first")
    return value


def _shuffled(what: str, values: dict[int, Any], lane: int, source: int) -> Any:
    if source not in values:
        raise RuntimeError(
            f"cuda.{what}: lane {lane} reads lane {source}, which is not in the call (not in "
            "its mask, returned, or past the block's end): its value is undefined on the GPU")
    return values[source]


def shfl_sync(self: Any, mask: Any, value: Any, src_lane: Any) -> Any:
    values, lane = _round("shfl_sync", mask, _value("shfl_sync", value))
    return _shuffled("shfl_sync", values, lane, int(src_lane) & 31)


def shfl_up_sync(self: Any, mask: Any, value: Any, delta: Any) -> Any:
    values, lane = _round("shfl_up_sync", mask, _value("shfl_up_sync", value))
    source = lane - (int(delta) & 31)
    return _shuffled("shfl_up_sync", values, lane, source if source >= 0 else lane)


def shfl_down_sync(self: Any, mask: Any, value: Any, delta: Any) -> Any:
    values, lane = _round("shfl_down_sync", mask, _value("shfl_down_sync", value))
    source = lane + (int(delta) & 31)
    return _shuffled("shfl_down_sync", values, lane, source if source <= 31 else lane)


def shfl_xor_sync(self: Any, mask: Any, value: Any, lane_mask: Any) -> Any:
    values, lane = _round("shfl_xor_sync", mask, _value("shfl_xor_sync", value))
    return _shuffled("shfl_xor_sync", values, lane, lane ^ (int(lane_mask) & 31))


def all_sync(self: Any, mask: Any, predicate: Any) -> bool:
    return all(_round("all_sync", mask, bool(predicate))[0].values())


def any_sync(self: Any, mask: Any, predicate: Any) -> bool:
    return any(_round("any_sync", mask, bool(predicate))[0].values())


def eq_sync(self: Any, mask: Any, predicate: Any) -> bool:
    return len(set(_round("eq_sync", mask, bool(predicate))[0].values())) == 1


def ballot_sync(self: Any, mask: Any, predicate: Any) -> np.int32:
    values, _ = _round("ballot_sync", mask, bool(predicate))
    return _mask(sum(1 << lane for lane, vote in values.items() if vote))


def _pattern(value: Any) -> Any:
    """What ``match.sync`` compares: the value's bits (a NaN matches itself, -0.0 not 0.0), a
    float as Numba types it (a Python float: a float64)."""
    if isinstance(value, (float, np.floating)):
        return (np.float32(value) if isinstance(value, np.float32) else np.float64(value)
                ).tobytes()
    return int(value)


def match_any_sync(self: Any, mask: Any, value: Any) -> np.int32:
    values, _ = _round("match_any_sync", mask, _pattern(_value("match_any_sync", value)))
    mine = _pattern(value)
    return _mask(sum(1 << lane for lane, v in values.items() if v == mine))


def match_all_sync(self: Any, mask: Any, value: Any) -> tuple[np.int32, bool]:
    values, _ = _round("match_all_sync", mask, _pattern(_value("match_all_sync", value)))
    mine = _pattern(value)
    same = all(v == mine for v in values.values())
    return _mask(sum(1 << lane for lane in values) if same else 0), same


def syncwarp(self: Any, mask: Any = FULL) -> None:
    _round("syncwarp", mask, None)


def activemask(self: Any) -> np.uint32:
    """The lanes of the caller's warp that exist in its block (divergence and returned lanes
    are not modelled: a shuffle over this mask leaves a returned lane out, and reading one is
    a fault)."""
    warps, thread = _warps("activemask")
    return np.uint32(warps.lanes(thread))


def lanemask_lt(self: Any) -> np.uint32:
    return np.uint32((1 << threading.current_thread().thread_id % 32) - 1)


def install() -> None:
    """Add the warp functions to the simulator's ``cuda`` module (Numba's has none of them)."""
    from numba.cuda.simulator.kernelapi import FakeCUDAModule

    for fn in (shfl_sync, shfl_up_sync, shfl_down_sync, shfl_xor_sync, all_sync, any_sync,
               eq_sync, ballot_sync, match_any_sync, match_all_sync, syncwarp, activemask,
               lanemask_lt):
        setattr(FakeCUDAModule, fn.__name__, fn)
