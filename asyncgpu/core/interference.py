"""Interference: the pairs of launches the eager scheduler keeps from running side by side.

The model
---------
In ``parallel`` mode two launches with no dependency between them run side by side on two
streams. That usually wins, but two *heavy* launches can lose: launches that each stream
memory near the peak rate, or that each fill the device's threads, share the bandwidth and the
L2 cache or queue behind each other's blocks, and together they may take longer than one after
the other (HITS's two sparse products on an H200: 0.7 ms each alone, 1.7 ms each side by side:
the random gathers of each fit in L2 alone and thrash it together).

A launch is a *suspect* when it moves at least ``min_bytes`` (:data:`MIN_BYTES`) and is
predicted memory-bound (:func:`heuristic_class`) or fills the device's threads by itself. For
each suspect the rule looks at the newest unfinished node of every other stream of its device
whose tenant is as urgent as the launch's or more (its own tenant's, and with tenants of
several priorities, a normal tenant's launch looks at a high-priority tenant's streams but
never the other way); where that node is a suspect too and not a data parent (the
dependency tracker's answer), their pair of launch keys (:func:`launch_key`: kernel, grid,
block, dynamic shared memory, bytes moved) gets a verdict
by a trial on the program's own launches, which measures what the program really does (a
kernel that consumes state, such as a work counter handing out rows, cannot be run again on
the side):

1. the first time the pair meets, the two run side by side;
2. the second time, the later one waits for the earlier (an edge of reason ``interference``);
3. once the timing events recorded around the four launches (:class:`Sample`: the first
   :data:`LEARN` launches of each key are timed) have completed, the side-by-side span, from
   the first start to the last end, is compared with the sum of the two launches' own times
   in sequence (``verdict``, by default :func:`slower_together`: more than ``1 + MARGIN``
   times the sequence). Kept *apart*, every later meeting of the pair gets the edge; side by
   side, none. The host must not enter these times: the side-by-side span leaves out any time
   between the two launches, and the sequence is not a span either, which would time the
   host issuing the second launch.
4. A side-by-side run in which the two shared the device for less than :data:`OVERLAP` of
   the shorter one's time (one waited for other work, or the host issued it late) says
   nothing of how they interfere: the pair runs side by side again at its next timed meeting,
   up to ``tries`` side-by-side runs (:data:`TRIES`); the last one is judged as it ran (a
   pair that never overlapped counts as its sequence: side by side).

Invariants
----------
* An edge only adds ordering: results equal those of any other schedule, trials included.
* Each pair gets at most one verdict per rule (verdicts are symmetric); until its verdict, and
  for a launch that was not timed, a pair runs side by side.
* A launch never waits by this rule for a tenant less urgent than its own: a high-priority
  tenant never waits for a normal one (CUDA stream priorities order only the blocks waiting
  for a multiprocessor; blocks already resident share it, so a normal tenant's heavy launch
  beside a high-priority one slows it whatever the priorities).

Example::

    rule = InterferenceRule(backend, device_threads=132 * 2048)
    rule.partners(node, launcher, arrays, tenant, streams, deps)     # nodes to wait for
    rule.verdicts        # {(key_a, key_b): True (apart) or False}
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from .streams import pool_of

log = logging.getLogger("asyncgpu")

#: Launches moving fewer bytes than this are never suspects: they take a few microseconds on a
#: current GPU, too short for running them apart to pay.
MIN_BYTES = 16 << 20
#: How much slower than in sequence two launches must run together to be kept apart.
MARGIN = 0.03
#: Launches of one key that are timed (a key's pairs are tried among its first launches).
LEARN = 8
#: The share of the shorter launch's time two launches must run together for a side-by-side
#: run to measure their interference.
OVERLAP = 0.5
#: Side-by-side runs a pair gets before its verdict, when the earlier ones did not overlap.
TRIES = 3
#: Threads a device keeps resident per SM (every NVIDIA GPU since Volta but the consumer ones).
THREADS_PER_SM = 2048


def heuristic_class(nbytes: int, threads: int, attrs: dict[str, Any] | None) -> str:
    """A launch's class without a measurement: ``memory``-bound when it moves at least 4 bytes
    per thread it launches and uses few registers (below 64 per thread: no heavy arithmetic
    kept in flight), ``compute``-bound otherwise."""
    regs = (attrs or {}).get("regs", 0)
    if nbytes >= 4 * max(1, threads) and regs < 64:
        return "memory"
    return "compute"


def moved_bytes(accesses: list[Any]) -> int:
    """Bytes a launch moves: each array range once per direction it is used in (read,
    written; a library call's accesses, which do not say whether a written array is also
    read, count as read too: ``Access.read``)."""
    total = 0
    for a in accesses:
        # (bools add as 0 and 1; ``int()`` on them would be a Python call each, compiled)
        total += (a.hi - a.lo) * (a.read + a.write)
    return total


def launch_key(launcher: Any, nbytes: int) -> tuple[Any, ...]:
    """What two launches must share to share a verdict: kernel, grid, block, dynamic shared
    memory, and the bytes they move (:func:`moved_bytes`)."""
    return (launcher.kernel, launcher.grid3, launcher.block3, launcher.shared, nbytes)


def slower_together(together_s: float, in_sequence_s: float) -> bool:
    """The default verdict: apart when side by side took more than ``1 + MARGIN`` times the
    sequence."""
    return together_s > (1.0 + MARGIN) * in_sequence_s


class Sample:
    """A suspect launch, kept on its node (``Node.keepalive``) until the node is finished: its
    key, and, while its key is learning, the timing events the issue records right before and
    right after it (``start``, ``end``; None otherwise). A regulation profile times a graph
    launch with one too (``asyncgpu.runtime.regulator``): its key is then the graph, kept alive
    by it, and ``done`` the graph's own completion event (the stream manager must not pool
    it)."""

    __slots__ = ("key", "start", "end", "done")

    def __init__(self, key: Any, start: Any = None, end: Any = None, done: Any = None
                 ) -> None:
        self.key = key
        self.start = start
        self.end = end
        self.done = done


class InterferenceRule:
    """The verdicts of one runtime (see the module docstring). ``backend`` gives the timing
    events (``timing_event``, ``event_done``, ``elapsed_s``); ``attributes(kernel)`` a
    compiled kernel's ``{"regs", ...}`` or None; ``verdict(together_s, in_sequence_s)`` says
    whether a tried pair is kept apart; ``tries``: side-by-side runs a pair gets when the
    earlier ones did not overlap (:data:`TRIES`)."""

    __slots__ = ("backend", "attributes", "device_threads", "min_bytes", "tries", "verdicts",
                 "verdict", "_suspects", "_seen", "_trials")

    def __init__(self, backend: Any, device_threads: int,
                 attributes: Callable[[Any], Any] | None = None,
                 min_bytes: int = MIN_BYTES) -> None:
        self.backend = backend
        self.attributes = attributes
        self.device_threads = device_threads
        self.min_bytes = min_bytes
        self.tries = TRIES
        self.verdict: Callable[[float, float], bool] = slower_together
        #: (key, key) -> True (kept apart) or False (side by side); both orders are stored
        self.verdicts: dict[tuple[Any, Any], bool] = {}
        self._suspects: dict[tuple[Any, ...], bool] = {}
        self._seen: dict[tuple[Any, ...], int] = {}
        #: pair -> [(first, second) side by side or None (to run again), (first, second) in
        #: sequence or None, side-by-side runs so far]
        self._trials: dict[tuple[Any, Any], list[Any]] = {}

    def suspect(self, key: tuple[Any, ...]) -> bool:
        """Whether launches of ``key`` are heavy enough to be tried against others."""
        known = self._suspects.get(key)
        if known is None:
            kernel, grid, block, _, nbytes = key
            threads = grid[0] * grid[1] * grid[2] * block[0] * block[1] * block[2]
            known = nbytes >= self.min_bytes and (
                threads >= self.device_threads
                or heuristic_class(nbytes, threads, self._attributes(kernel)) == "memory")
            self._suspects[key] = known
        return known

    def _attributes(self, kernel: Any) -> Any:
        if self.attributes is None:
            return None
        try:
            return self.attributes(kernel)
        except Exception:     # (a kernel not compiled yet, a backend without attributes)
            return None

    def partners(self, node: Any, launcher: Any, arrays: list[Any], tenant: int,
                 streams: Any, deps: Any) -> list[Any]:
        """The unfinished nodes of the other streams on the node's device, of ``tenant`` and
        of tenants as urgent or more, that a launch (``node``, not yet issued) must wait for;
        puts a :class:`Sample` on ``node`` when it is a suspect. ``deps``: the dependency
        tracker, which tells the data parents (they run first anyway)."""
        nbytes = moved_bytes(arrays)
        if nbytes < self.min_bytes:      # (the common case, decided without a key)
            return []
        key = launch_key(launcher, nbytes)
        if not self.suspect(key):
            return []
        seen = self._seen.get(key, 0)
        sample = Sample(key)
        if seen < LEARN:
            self._seen[key] = seen + 1
            sample.start = self.backend.timing_event(node.device)
            sample.end = self.backend.timing_event(node.device)
        devices = streams.devices
        pool = pool_of(tenant, node.device, devices)
        levels = streams._priorities            # (per tenant; lower is more urgent)
        level = levels[tenant]
        found = None
        apart = []
        for s in streams.streams:
            if not s.inflight or (s.pool != pool and (s.device != node.device
                                                      or levels[s.pool // devices] > level)):
                continue
            other = s.inflight[-1]
            kept = other.keepalive
            if other.finished or type(kept) is not Sample:
                continue
            if found is None:
                found = deps.conflicts(node.accesses)
            if other in found:
                continue        # (a data parent runs first anyway)
            verdict = self.verdicts.get((key, kept.key))
            if verdict is None:
                verdict = self._trial(kept, sample)
            if verdict:
                apart.append(other)
        node.keepalive = sample
        return apart

    def _trial(self, first: Sample, second: Sample) -> bool:
        """Whether ``second`` (the launch being issued) waits for ``first`` this time, while
        their pair is on trial."""
        pair = (first.key, second.key)
        trial = self._trials.get(pair)
        if trial is None:
            trial = self._trials.get((second.key, first.key))
        timed = first.start is not None and second.start is not None
        if trial is None:
            if timed:
                self._trials[pair] = [(first, second), None, 1]
            return False
        # (not while ``second`` is one of the trial's launches: met beside several streams, a
        # launch joins a trial at the first and is still being issued at the next; CUDA
        # says an event never recorded has completed)
        if (trial[0] is not None and trial[1] is not None and second is not trial[0][1]
                and second is not trial[1][1]):
            verdict = self._decide(pair, trial)
            if verdict is not None:
                return verdict
        if trial[0] is None:         # (the last side-by-side run did not overlap: this one)
            if timed:
                trial[0] = (first, second)
                trial[2] += 1
            return False
        if trial[1] is None and timed:
            trial[1] = (first, second)
            return True
        return False

    def _decide(self, pair: tuple[Any, Any], trial: list[Any]) -> bool | None:
        """The pair's verdict once the trial's launches have completed (None before, and
        when the side-by-side run is to be tried again: ``trial[0]`` is then None)."""
        backend = self.backend
        for first, second in trial[0], trial[1]:
            if not (backend.event_done(first.end) and backend.event_done(second.end)):
                return None
        if trial[2] < self.tries and self._shared(*trial[0]) < OVERLAP:
            trial[0] = None
            return None
        a, b = pair
        together = self._together(*trial[0])
        in_sequence = sum(self._own(s) for s in trial[1])
        apart = bool(self.verdict(together, in_sequence))
        log.info("asyncgpu: '%s' and '%s' took %.3g ms side by side, %.3g ms one after the "
                 "other: %s from now on", a[0].name, b[0].name, together * 1e3,
                 in_sequence * 1e3, "kept apart" if apart else "side by side")
        self.verdicts[(a, b)] = self.verdicts[(b, a)] = apart
        self._trials.pop(pair, None)
        self._trials.pop((b, a), None)
        return apart

    def _times(self, first: Sample, second: Sample) -> tuple[float, float, float]:
        """Seconds from the first's start of two completed launches to the second's start, the
        first's end and the second's end."""
        elapsed = self.backend.elapsed_s
        origin = first.start
        return (elapsed(origin, second.start), elapsed(origin, first.end),
                elapsed(origin, second.end))

    def _together(self, first: Sample, second: Sample) -> float:
        """Seconds from the earlier start of two completed launches to the later end, less the
        time between them when one started after the other had ended (the host issuing it
        late): two launches that never shared the device count as their sequence."""
        second_start, first_end, second_end = self._times(first, second)
        gap = max(0.0, second_start - first_end, 0.0 - second_end)
        return max(first_end, second_end) - min(0.0, second_start) - gap

    def _shared(self, first: Sample, second: Sample) -> float:
        """The share of the shorter of two completed launches' times during which both ran."""
        second_start, first_end, second_end = self._times(first, second)
        shorter = min(first_end, second_end - second_start)
        if shorter <= 0.0:
            return 1.0
        return (min(first_end, second_end) - max(0.0, second_start)) / shorter

    def _own(self, sample: Sample) -> float:
        """Seconds a completed launch took on the device: the sequence is the sum of the two,
        not a span, which would also time the host issuing the second launch late."""
        return self.backend.elapsed_s(sample.start, sample.end)

