"""Happens-before checking of CUDA's ordering rules, with vector clocks.

The model
---------
CUDA orders work within a stream in enqueue order; across streams only through events, and the
host orders itself after device work only by synchronizing. This module replays the runtime's
operation log against those rules, in the manner of PyTorch's CUDA Stream Sanitizer, and raises
:class:`RaceError` when two conflicting accesses to the same bytes are not ordered.

Every stream ``s`` carries a *vector clock*: a map from stream to the sequence number of the last
operation on that stream known to be ordered before the next operation enqueued on ``s``. A
launch on ``s`` increments ``clock[s][s]`` and is stamped ``(s, seq)``. An earlier access stamped
``(t, n)`` is ordered before an operation whose clock is ``C`` exactly when ``C[t] >= n``.

* ``record(e, s)`` stores a *capture*: a copy of ``clock[s]`` taken at enqueue time.
* ``wait(s, e)`` takes the pointwise max of ``clock[s]`` and the capture current at that call.
  The values are copied, so re-recording ``e`` later changes later waits only.
* Host syncs merge a capture, a stream's clock or every clock into the *host clock*. The host
  issues every later operation, so each stream inherits the host clock before its next operation.

The check runs at enqueue time against these clocks, never against what has actually run, so a
missing edge is reported even in runs where the values happened to come out right.

Memory is tracked per (buffer, byte interval): each buffer keeps a list of access records
``(start, stop, write, stream, seq, label)``. A read is checked against overlapping writes (RAW),
a write against overlapping reads (WAR) and writes (WAW). Three invariants keep the lists short:

1. A record ordered before the host clock is ordered before every future operation: dropped.
2. A new access A that covers part of a record R ordered before it, where A writes or R only reads,
   replaces R on that part: anything later that conflicts with R there conflicts with A as well, so
   must be ordered after A, hence after R.
3. ``free`` drops the buffer's records.

Host accesses are checked but not recorded: whatever is enqueued after them inherits the host
clock, so by invariant 1 their record would be dropped at once.

Example::

    hb = HappensBeforeChecker()
    hb.launch(1, [(5, 0, 64, True)], "kernel 'a'")
    hb.launch(2, [(5, 0, 64, False)], "kernel 'b'")   # RaceError: RAW, no edge from stream 1
    hb.record("e", 1)
    hb.wait(2, "e")
    hb.launch(2, [(5, 0, 64, False)], "kernel 'b'")   # ordered: accepted

The checker is not thread-safe; its caller serializes the log.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import NamedTuple

from .errors import RaceError

Clock = dict[Hashable, int]
Access = tuple[Hashable, int, int, bool]


class _Rec(NamedTuple):
    start: int
    stop: int
    write: bool
    stream: Hashable
    seq: int
    label: str


def _merge(into: Clock, other: Clock) -> bool:
    """Pointwise max of ``other`` into ``into``; whether anything changed."""
    changed = False
    for k, v in other.items():
        if v > into.get(k, 0):
            into[k] = v
            changed = True
    return changed


class HappensBeforeChecker:
    """Checks that every pair of conflicting accesses in an operation log is ordered.

    Feed it the runtime's device operations (``launch``, ``record``, ``wait``), host
    synchronizations and host accesses, in the order the runtime issues them.
    """

    def __init__(self) -> None:
        self._clocks: dict[Hashable, Clock] = {}
        self._captures: dict[Hashable, Clock] = {}
        self._host: Clock = {}
        # Streams absorb the host clock lazily, only when it changed since they last did.
        self._host_epoch = 0
        self._absorbed: dict[Hashable, int] = {}
        self._records: dict[Hashable, list[_Rec]] = {}
        self._checks = 0

    @property
    def checks(self) -> int:
        """Number of accesses checked so far (for statistics)."""
        return self._checks

    # -- clocks ------------------------------------------------------------------------------

    def _clock(self, stream: Hashable) -> Clock:
        clock = self._clocks.get(stream)
        if clock is None:
            clock = self._clocks[stream] = {}
        if self._absorbed.get(stream) != self._host_epoch:
            # Semantically neutral (it only states what every later op gets anyway), so it may
            # happen before a check that raises without breaking "a raise changes nothing".
            _merge(clock, self._host)
            self._absorbed[stream] = self._host_epoch
        return clock

    def _host_merge(self, clock: Clock) -> None:
        if _merge(self._host, clock):
            self._host_epoch += 1

    def record(self, event: Hashable, stream: Hashable) -> None:
        """``event`` captures the work enqueued on ``stream`` so far (replacing any earlier capture)."""
        self._captures[event] = dict(self._clock(stream))

    def wait(self, stream: Hashable, event: Hashable) -> None:
        """Later work on ``stream`` waits for the event's current capture (no-op if never recorded)."""
        capture = self._captures.get(event)
        if capture is not None:
            _merge(self._clock(stream), capture)

    def host_sync_event(self, event: Hashable) -> None:
        """The host has waited for the event's current capture (no-op if never recorded)."""
        capture = self._captures.get(event)
        if capture is not None:
            self._host_merge(capture)

    def host_sync_stream(self, stream: Hashable) -> None:
        """The host has waited for everything enqueued on ``stream``."""
        self._host_merge(self._clock(stream))

    def host_sync_all(self) -> None:
        """Device-wide synchronize: the host has waited for everything enqueued so far."""
        for stream in list(self._clocks):
            self._host_merge(self._clock(stream))
        # Every record is now ordered before the host clock (invariant 1).
        self._records.clear()

    def forget_event(self, event: Hashable) -> None:
        """Drop the event's capture: its id is about to be reused."""
        self._captures.pop(event, None)

    # -- accesses ----------------------------------------------------------------------------

    def _check(self, accesses: list[Access], clock: Clock, label: str, where: str) -> None:
        for buffer, lo, hi, write in accesses:
            self._checks += 1
            for r in self._records.get(buffer, ()):
                if (write or r.write) and r.start < hi and lo < r.stop \
                        and clock.get(r.stream, 0) < r.seq:
                    kind = "RAW" if not write else ("WAW" if r.write else "WAR")
                    _raise(kind, label, where, buffer, max(lo, r.start), min(hi, r.stop), r)

    def launch(self, stream: Hashable, accesses: Iterable[Access], label: str) -> None:
        """A device operation enqueued on ``stream`` that performs ``accesses``.

        Each access is ``(buffer, start, stop, write)``: a byte interval ``[start, stop)`` of a
        buffer, ``write`` true for a write or read-write. Raises :class:`RaceError` if an access
        conflicts with an earlier one not ordered before it; the state is then unchanged.
        """
        accs = [(b, lo, hi, bool(w)) for b, lo, hi, w in accesses if lo < hi]
        clock = self._clock(stream)
        self._check(accs, clock, label, f"on stream {stream}")
        seq = clock[stream] = clock.get(stream, 0) + 1
        for buffer, lo, hi, write in accs:
            recs = self._records.setdefault(buffer, [])
            recs[:] = self._subsume(recs, clock, lo, hi, write)
            recs.append(_Rec(lo, hi, write, stream, seq, label))

    def host_access(self, accesses: Iterable[Access], label: str) -> None:
        """The host reads or writes memory now (same access tuples as :meth:`launch`).

        Raises :class:`RaceError` unless every conflicting device access is ordered before the host
        (through a host synchronization); the state is then unchanged.
        """
        accs = [(b, lo, hi, bool(w)) for b, lo, hi, w in accesses if lo < hi]
        self._check(accs, self._host, label, "on the host")
        for buffer in {a[0] for a in accs}:
            if buffer in self._records:
                self._records[buffer] = self._subsume(self._records[buffer], {}, 0, 0, False)

    def free(self, buffer: Hashable, label: str) -> None:
        """The buffer's memory is returned: a host write of all of it, then its records go.

        Raises :class:`RaceError` if any device access to it is not ordered before the host.
        """
        self._checks += 1
        for r in self._records.get(buffer, ()):
            if self._host.get(r.stream, 0) < r.seq:
                _raise("WAW" if r.write else "WAR", label, "on the host", buffer, r.start, r.stop, r)
        self._records.pop(buffer, None)

    def _subsume(self, recs: list[_Rec], clock: Clock, lo: int, hi: int, write: bool) -> list[_Rec]:
        """``recs`` less those ordered before the host, and less what an access covers (inv. 2)."""
        host = self._host
        kept: list[_Rec] = []
        for r in recs:
            if host.get(r.stream, 0) >= r.seq:
                continue
            if r.start < hi and lo < r.stop and clock.get(r.stream, 0) >= r.seq \
                    and (write or not r.write):
                if r.start < lo:
                    kept.append(r._replace(stop=lo))
                if hi < r.stop:
                    kept.append(r._replace(start=hi))
            else:
                kept.append(r)
        return kept


def _raise(kind: str, label: str, where: str, buffer: Hashable, lo: int, hi: int, r: _Rec) -> None:
    verb, past = {"RAW": ("reads", "written"), "WAR": ("writes", "read"),
                  "WAW": ("writes", "written")}[kind]
    raise RaceError(
        f"race ({kind}): {label} {where} {verb} bytes [{lo}, {hi}) of buffer {buffer} {past} by "
        f"{r.label} on stream {r.stream}, with no event, stream order or host synchronization "
        f"between them"
    )


__all__ = ["HappensBeforeChecker"]
