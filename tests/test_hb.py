"""Tests of the happens-before checker (pure CPU, no backend).

The first group ports the ideas of PyTorch's ``test/test_cuda_sanitizer.py::TestEventHandler``
(synthetic stream, event and buffer ids); then host synchronization, host accesses, free, byte
intervals, state after a failed check, boundedness, and property tests, including a differential
test against a naive checker that keeps the whole history.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from asyncgpu.core.errors import RaceError
from asyncgpu.core.hb import HappensBeforeChecker

N = 64  # bytes of every buffer in these tests


def rd(buffer, start=0, stop=N):
    return (buffer, start, stop, False)


def wr(buffer, start=0, stop=N):
    return (buffer, start, stop, True)


@pytest.fixture
def hb():
    return HappensBeforeChecker()


# -- ports of CSAN's TestEventHandler ---------------------------------------------------------


def test_simple_error(hb):
    hb.launch(1, [wr(5)], "kernel 'a' at prog.py:6")
    with pytest.raises(RaceError) as info:
        hb.launch(2, [rd(5)], "kernel 'b' at prog.py:7")
    assert str(info.value) == (
        "race (RAW): kernel 'b' at prog.py:7 on stream 2 reads bytes [0, 64) of buffer 5 written by "
        "kernel 'a' at prog.py:6 on stream 1, with no event, stream order or host synchronization "
        "between them"
    )


def test_simple_sync(hb):
    hb.launch(1, [wr(5)], "a")
    hb.record("e", 1)
    hb.wait(2, "e")
    hb.launch(2, [rd(5)], "b")


def test_same_stream_is_ordered(hb):
    hb.launch(1, [wr(5)], "a")
    hb.launch(1, [rd(5)], "b")
    hb.launch(1, [wr(5)], "c")


def test_reads_check_last_write(hb):
    # Both streams read after the write on stream 1 is synced; stream 2's read is fine without
    # syncing on stream 3's read, since reads never conflict.
    hb.launch(1, [wr(5)], "a")
    hb.record("e", 1)
    hb.wait(2, "e")
    hb.wait(3, "e")
    hb.launch(2, [rd(5)], "b")
    hb.launch(3, [rd(5)], "c")
    hb.launch(1, [wr(6)], "d")
    with pytest.raises(RaceError, match=r"RAW.*buffer 6 written by d on stream 1"):
        hb.launch(2, [rd(6)], "e")


def test_later_read_does_not_hide_the_write(hb):
    hb.launch(1, [wr(5)], "a")
    hb.launch(1, [rd(5)], "b")  # ordered after a, but a later reader must still see a
    with pytest.raises(RaceError, match="RAW.*written by a"):
        hb.launch(2, [rd(5, 0, 8)], "c")


def _branch(hb):
    hb.launch(1, [wr(5)], "a")
    hb.record("e", 1)
    hb.wait(2, "e")
    hb.wait(3, "e")


def test_branch_sync_reads(hb):
    _branch(hb)
    hb.launch(2, [rd(5)], "b")
    hb.launch(3, [rd(5)], "c")


def test_branch_sync_writes(hb):
    _branch(hb)
    hb.launch(2, [wr(5)], "b")
    with pytest.raises(RaceError, match=r"WAW.*c on stream 3 writes.*written by b on stream 2"):
        hb.launch(3, [wr(5)], "c")


def test_branch_sync_read_then_write(hb):
    _branch(hb)
    hb.launch(2, [rd(5)], "b")
    with pytest.raises(RaceError, match=r"WAR.*c on stream 3 writes.*read by b on stream 2"):
        hb.launch(3, [wr(5)], "c")


def test_chain_sync(hb):
    hb.launch(0, [wr(5)], "a")
    for i in range(10):
        hb.record(f"e{i}", i)
        hb.wait(i + 1, f"e{i}")
    hb.launch(10, [rd(5)], "b")
    hb.launch(10, [wr(5)], "c")


def test_broken_chain_raises(hb):
    hb.launch(0, [wr(5)], "a")
    for i in range(10):
        if i != 5:
            hb.record(f"e{i}", i)
            hb.wait(i + 1, f"e{i}")
    with pytest.raises(RaceError, match="RAW"):
        hb.launch(10, [rd(5)], "b")


def test_expired_record(hb):
    hb.launch(1, [rd(5)], "a")
    hb.record("e", 1)
    hb.launch(1, [wr(5)], "b")  # after the record: not covered by it
    hb.wait(2, "e")
    with pytest.raises(RaceError, match=r"RAW.*written by b on stream 1"):
        hb.launch(2, [rd(5)], "c")


def test_forgotten_event_is_no_longer_waited_on(hb):
    hb.launch(1, [wr(5)], "a")
    hb.record("e", 1)
    hb.forget_event("e")
    hb.wait(2, "e")
    with pytest.raises(RaceError):
        hb.launch(2, [rd(5)], "b")


def _readers(hb, n):
    hb.launch(0, [wr(5)], "w0")
    hb.record("w", 0)
    for s in range(1, n + 1):
        hb.wait(s, "w")
        hb.launch(s, [rd(5)], f"r{s}")
        hb.record(f"r{s}", s)


@pytest.mark.parametrize("missing", [1, 3, 5])
def test_all_reads_checked_failing(hb, missing):
    _readers(hb, 5)
    for s in range(1, 6):
        if s != missing:
            hb.wait(0, f"r{s}")
    with pytest.raises(RaceError, match=rf"WAR.*read by r{missing} on stream {missing}"):
        hb.launch(0, [wr(5)], "w1")


def test_all_reads_checked_passing(hb):
    _readers(hb, 5)
    for s in range(1, 6):
        hb.wait(0, f"r{s}")
    hb.launch(0, [wr(5)], "w1")


def test_correct_state_merging(hb):
    # Stream 3 learns of streams 1 and 2 through two waits; its clock keeps both.
    hb.launch(1, [wr(5)], "a")
    hb.launch(2, [wr(6)], "b")
    hb.record("e1", 1)
    hb.record("e2", 2)
    hb.wait(3, "e1")
    hb.wait(3, "e2")
    hb.launch(3, [wr(5), wr(6)], "c")
    hb.record("e3", 3)
    hb.wait(1, "e3")
    hb.wait(2, "e3")
    hb.launch(1, [rd(5), rd(6)], "d")
    hb.launch(2, [rd(5), rd(6)], "e")


def test_record_override(hb):
    hb.launch(1, [wr(5)], "a")
    hb.record("e", 1)          # covers a
    hb.launch(1, [wr(6)], "b")
    hb.wait(2, "e")            # bound to the capture current now (covers a, not b)
    hb.record("e", 1)          # later override covers b, but the wait was enqueued earlier
    hb.launch(2, [rd(5)], "c")
    with pytest.raises(RaceError, match="written by b"):
        hb.launch(2, [rd(6)], "d")


def test_multiple_wait(hb):
    hb.launch(1, [wr(5)], "a")
    hb.record("e", 1)
    hb.wait(2, "e")
    hb.wait(3, "e")
    hb.launch(2, [rd(5)], "b")
    hb.launch(3, [rd(5)], "c")
    hb.record("e2", 2)
    hb.record("e3", 3)
    hb.wait(1, "e2")
    hb.wait(1, "e3")
    hb.launch(1, [wr(5)], "d")


def test_wait_on_never_recorded_event_is_noop(hb):
    hb.wait(2, "never")
    hb.launch(1, [wr(5)], "a")
    hb.wait(2, "never")
    with pytest.raises(RaceError, match="RAW"):
        hb.launch(2, [rd(5)], "b")
    hb.host_sync_event("never")  # also a no-op on the host
    with pytest.raises(RaceError):
        hb.host_access([rd(5)], "host read of 'x'")


# -- host synchronization ---------------------------------------------------------------------


@pytest.mark.parametrize("how", ["event", "stream", "all"])
def test_host_sync_orders_later_launches(hb, how):
    hb.launch(1, [wr(5)], "a")
    hb.record("e", 1)
    {"event": lambda: hb.host_sync_event("e"), "stream": lambda: hb.host_sync_stream(1),
     "all": hb.host_sync_all}[how]()
    hb.launch(2, [rd(5)], "b")
    hb.launch(3, [wr(6)], "c")  # a new stream inherits the host clock too
    hb.record("f", 3)
    hb.wait(2, "f")
    hb.launch(2, [rd(6)], "d")


def test_host_sync_of_other_stream_does_not_help(hb):
    hb.launch(1, [wr(5)], "a")
    hb.launch(3, [wr(6)], "z")
    hb.host_sync_stream(3)
    with pytest.raises(RaceError):
        hb.launch(2, [rd(5)], "b")


def test_host_sync_event_covers_only_its_capture(hb):
    hb.launch(1, [wr(5)], "a")
    hb.record("e", 1)
    hb.launch(1, [wr(5)], "b")
    hb.host_sync_event("e")
    with pytest.raises(RaceError, match="written by b"):
        hb.launch(2, [rd(5)], "c")


def test_host_read_after_unsynchronized_write(hb):
    hb.launch(1, [wr(5)], "kernel 'a'")
    with pytest.raises(RaceError) as info:
        hb.host_access([rd(5, 8, 16)], "host read of 'x'")
    msg = str(info.value)
    assert "race (RAW): host read of 'x' on the host reads bytes [8, 16) of buffer 5" in msg
    assert "kernel 'a' on stream 1" in msg
    hb.host_sync_stream(1)
    hb.host_access([rd(5, 8, 16)], "host read of 'x'")


def test_host_write_vs_pending_device_read(hb):
    hb.launch(1, [rd(5)], "kernel 'r'")
    hb.host_access([rd(5)], "host read of 'x'")  # reads never conflict
    with pytest.raises(RaceError, match=r"race \(WAR\): host write of 'x' on the host writes"):
        hb.host_access([wr(5)], "host write of 'x'")
    hb.host_sync_all()
    hb.host_access([wr(5)], "host write of 'x'")


def test_launch_after_host_write_is_ordered(hb):
    hb.host_access([wr(5)], "host write of 'x'")
    hb.launch(1, [rd(5)], "a")
    hb.launch(2, [rd(5)], "b")


def test_free_with_unsynchronized_device_access(hb):
    hb.launch(1, [rd(5)], "kernel 'r'")
    with pytest.raises(RaceError, match=r"WAR.*free of 'x'.*read by kernel 'r' on stream 1"):
        hb.free(5, "free of 'x'")
    hb.host_sync_stream(1)
    hb.free(5, "free of 'x'")
    assert 5 not in hb._records
    hb.launch(2, [wr(5)], "reuse")  # records were dropped: a new life for the id


def test_free_after_synchronized_write(hb):
    hb.launch(1, [wr(5)], "a")
    with pytest.raises(RaceError, match="WAW"):
        hb.free(5, "free")
    hb.record("e", 1)
    hb.host_sync_event("e")
    hb.free(5, "free")
    hb.free(7, "free of an untouched buffer")


# -- byte intervals ---------------------------------------------------------------------------


def test_disjoint_intervals_never_conflict(hb):
    hb.launch(1, [wr(5, 0, 32)], "a")
    hb.launch(2, [wr(5, 32, 64)], "b")
    hb.launch(3, [rd(5, 32, 32), wr(5, 64, 128)], "c")
    hb.host_access([rd(5, 128, 256), wr(5, 256, 300)], "host access of 'x'")


def test_overlapping_intervals_conflict(hb):
    hb.launch(1, [wr(5, 0, 33)], "a")
    with pytest.raises(RaceError, match=r"reads bytes \[32, 33\) of buffer 5"):
        hb.launch(2, [rd(5, 32, 64)], "b")
    with pytest.raises(RaceError, match=r"WAW.*bytes \[10, 20\)"):
        hb.launch(2, [wr(5, 10, 20)], "c")


def test_different_buffers_never_conflict(hb):
    hb.launch(1, [wr(5)], "a")
    hb.launch(2, [wr(6)], "b")
    hb.launch(3, [rd(7)], "c")


def test_partial_overwrite_keeps_the_rest(hb):
    hb.launch(1, [wr(5, 0, 64)], "a")
    hb.record("e", 1)
    hb.wait(2, "e")
    hb.launch(2, [wr(5, 16, 32)], "b")  # covers part of a
    with pytest.raises(RaceError, match=r"bytes \[0, 16\).*written by a"):
        hb.launch(3, [rd(5, 0, 64)], "c")
    with pytest.raises(RaceError, match=r"bytes \[16, 32\).*written by b"):
        hb.launch(3, [rd(5, 16, 32)], "c")


def test_accesses_of_one_launch_do_not_conflict(hb):
    hb.launch(1, [rd(5), wr(5, 8, 16), wr(5, 12, 20)], "a")
    hb.launch(1, [rd(5)], "b")


def test_empty_interval_is_ignored(hb):
    hb.launch(1, [wr(5, 8, 8)], "a")
    hb.launch(2, [wr(5)], "b")


# -- failed checks and statistics -------------------------------------------------------------


def test_failed_check_leaves_state_unchanged(hb):
    hb.launch(1, [wr(5)], "a")
    hb.record("e", 1)
    hb.launch(3, [wr(7)], "w7")
    # The first access is fine, the second races: neither may be recorded, and stream 2's own
    # sequence number must not advance.
    with pytest.raises(RaceError, match="written by w7"):
        hb.launch(2, [wr(6), rd(7)], "bad")
    with pytest.raises(RaceError):
        hb.host_access([rd(7)], "host read")
    hb.wait(2, "e")
    hb.launch(2, [rd(5)], "ok")  # a correct op is accepted
    hb.launch(1, [wr(6)], "no record of 'bad' on buffer 6")
    hb.record("f", 2)
    hb.host_sync_event("f")  # covers 'ok' (and through it 'a'), so the host may write 5
    hb.host_access([wr(5)], "host write")
    with pytest.raises(RaceError):
        hb.free(6, "free")
    hb.host_sync_stream(1)
    hb.free(6, "free")


def test_checks_counter(hb):
    hb.launch(1, [wr(5), rd(6)], "a")
    hb.host_access([rd(7)], "h")
    assert hb.checks == 3


def test_records_stay_bounded_over_many_launches(hb):
    # (bounded records keep each check's work bounded: no wall-clock limit, which a loaded
    # two-core machine misses; the checker's speed is measured by bench overhead, debug_hb)
    n = 20_000
    for i in range(n):
        w = i % 3
        hb.launch(w, [wr(0), rd(1, 0, 32), wr(2, 8 * (i % 8), 8 * (i % 8) + 8)], f"w{i}")
        hb.record(("e", w), w)
        for r in range(3):
            if r != w:
                hb.wait(r, ("e", w))
                hb.launch(r, [rd(0), rd(2)], f"r{i}.{r}")
                hb.record(("e", r), r)
                hb.wait((i + 1) % 3, ("e", r))
        hb.forget_event(("e", w))
        assert all(len(recs) <= 16 for recs in hb._records.values())
    assert hb.checks == n * 3 + n * 2 * 2


def test_host_syncs_drop_records(hb):
    for i in range(1000):
        hb.launch(i % 4, [wr(i % 2, 0, 8 + i % 7)], "a")
        hb.record("e", i % 4)
        hb.host_sync_event("e")
        hb.host_access([rd(i % 2)], "h")
    assert all(len(recs) <= 2 for recs in hb._records.values())


def live(hb, buffers=None):
    """The checker's access records (of ``buffers``; None: all)."""
    return sum(len(recs) for b, recs in hb._records.items() if buffers is None or b in buffers)


def test_a_device_wide_sync_drops_every_record(hb):
    for b in range(8):
        hb.launch(b % 3, [wr(b), rd(100 + b, 0, 8)], "k")
    assert live(hb) == 16
    hb.host_sync_all()
    assert hb._records == {}     # invariant 1: all of them are ordered before the host


def test_a_host_access_drops_the_records_ordered_before_the_host(hb):
    """Invariant 1 at a host access: the accessed buffers' records that the host has waited
    for go, those it has not stay (host accesses themselves are not recorded)."""
    for b in range(8):
        hb.launch(1, [wr(b)], "synced")
        hb.launch(2, [rd(100 + b)], "unsynced")
    hb.host_sync_stream(1)
    assert live(hb) == 16
    hb.host_access([rd(b) for b in range(8)] + [rd(100 + b) for b in range(8)], "host read")
    assert live(hb, range(8)) == 0
    assert live(hb, range(100, 108)) == 8
    # many synced launches, each followed by a host access: the count stays bounded
    for i in range(200):
        hb.launch(1, [wr(i % 8, 0, 8 + i % 7)], "a")
        hb.host_sync_stream(1)
        hb.host_access([rd(i % 8)], "h")
        assert live(hb, range(8)) == 0


def test_free_drops_the_freed_buffers_records(hb):
    hb.launch(1, [wr(5, 0, 8), wr(6)], "w")
    hb.launch(2, [rd(5, 8, 16)], "r")
    hb.host_sync_stream(1)
    hb.host_sync_stream(2)
    assert live(hb, [5]) == 2
    hb.free(5, "free of 'x'")
    assert 5 not in hb._records
    assert live(hb, [6]) == 1    # the other buffer's record is kept


# -- property tests ---------------------------------------------------------------------------

_access = st.builds(lambda b, lo, ln, w: (b, lo, lo + ln, w),
                    st.integers(0, 1), st.integers(0, 8), st.integers(1, 8), st.booleans())
_accesses = st.lists(_access, min_size=1, max_size=3)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), _accesses, st.booleans()), max_size=30))
def test_full_sync_after_every_op_never_raises(ops):
    hb = HappensBeforeChecker()
    for stream, accs, on_host in ops:
        if on_host:
            hb.host_access(accs, "host")
        else:
            hb.launch(stream, accs, "k")
        hb.host_sync_all()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(_accesses, st.booleans()), max_size=30))
def test_single_stream_never_raises(ops):
    hb = HappensBeforeChecker()
    for accs, sync in ops:
        hb.launch(7, accs, "k")
        if sync:
            hb.record("e", 7)
            hb.wait(7, "e")


class _Naive:
    """The same rules, with no record management: every access is kept and every pair checked.

    A clock here is the set of operation ids ordered before the next operation.
    """

    def __init__(self):
        self.before = {}
        self.captures = {}
        self.host = set()
        self.history = []  # (op id, buffer, lo, hi, write)
        self.next_id = 0

    def _check(self, accs, before):
        for b, lo, hi, w in accs:
            for op, b2, lo2, hi2, w2 in self.history:
                if b == b2 and lo < hi2 and lo2 < hi and (w or w2) and op not in before:
                    raise RaceError("naive")

    def launch(self, s, accs):
        before = self.before.get(s, set()) | self.host
        self._check(accs, before)
        self.next_id += 1
        self.history += [(self.next_id, *a) for a in accs]
        self.before[s] = before | {self.next_id}

    def record(self, e, s):
        self.captures[e] = self.before.get(s, set()) | self.host

    def wait(self, s, e):
        self.before[s] = self.before.get(s, set()) | self.captures.get(e, set())

    def host_sync_event(self, e):
        self.host |= self.captures.get(e, set())

    def host_sync_stream(self, s):
        self.host |= self.before.get(s, set())

    def host_sync_all(self):
        for s in self.before:
            self.host |= self.before[s]

    def host_access(self, accs):
        self._check(accs, self.host)

    def free(self, b):
        self._check([(b, 0, 1 << 30, True)], self.host)
        self.history = [h for h in self.history if h[1] != b]


_launch = st.tuples(st.just("launch"), st.integers(0, 2), _accesses)
_op = st.one_of(  # launches weighted up, so that programs have enough accesses to race
    _launch, _launch, _launch, _launch,
    st.tuples(st.just("record"), st.integers(0, 1), st.integers(0, 2)),
    st.tuples(st.just("wait"), st.integers(0, 2), st.integers(0, 1)),
    st.tuples(st.just("host_sync_event"), st.integers(0, 1)),
    st.tuples(st.just("host_sync_stream"), st.integers(0, 2)),
    st.tuples(st.just("host_sync_all")),
    st.tuples(st.just("host_access"), _accesses),
    st.tuples(st.just("free"), st.integers(0, 1)),
)


@settings(max_examples=400, deadline=None)
@given(st.lists(_op, min_size=5, max_size=40))
def test_agrees_with_naive_checker(ops):
    hb, naive = HappensBeforeChecker(), _Naive()
    for name, *args in ops:
        outcomes = []
        for target, call_args in ((hb, args), (naive, args)):
            if name in ("launch", "host_access", "free") and target is hb:
                call_args = [*args, "op"]
            try:
                getattr(target, name)(*call_args)
                outcomes.append(False)
            except RaceError:
                outcomes.append(True)
        assert outcomes[0] == outcomes[1], (name, args)
