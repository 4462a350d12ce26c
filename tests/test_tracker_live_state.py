"""The dependency tracker (``asyncgpu.core.deps.DependencyTracker``) on random programs.

Random programs of reads, writes (empty ones included) and finished nodes on a few streams,
checked against every earlier node's accesses:

* every parent found is an unfinished earlier node, for a reason it has (a read after its
  write, a write after its read or write, of overlapping bytes of the same allocation);
* every unfinished earlier node the new one conflicts with is ordered before it: a parent
  found, or (since the tracker forgets the entries a later access covers) an ancestor of one
  through found parents and stream order;
* the live state stays bounded: per allocation at most one entry per distinct byte range for
  the writes and per distinct byte range and stream for the reads, however long the program.
"""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from asyncgpu.core.dag import RAW, WAR, WAW, Node
from asyncgpu.core.deps import Access, DependencyTracker

STREAMS = 3

access = st.tuples(st.integers(0, 1),                      # allocation
                   st.integers(0, 4), st.sampled_from([1, 2, 4, 0]),  # start, length (0: empty)
                   st.booleans())                          # write
step = st.one_of(
    st.tuples(st.just("launch"), st.integers(0, STREAMS - 1),
              st.lists(access, min_size=1, max_size=3)),
    st.tuples(st.just("finish"), st.integers(0, 30)),
)


def reasons_between(new: list[Access], old: list[Access]) -> set[tuple[str, str]]:
    """Why accesses ``new`` may depend on an earlier node's ``old`` (the tracker's test of
    overlap; empty earlier accesses are never kept)."""
    out = set()
    for a in new:
        for b in old:
            if a.key != b.key or b.lo >= b.hi or not (b.lo < a.hi and a.lo < b.hi):
                continue
            if a.write and b.write:
                out.add((WAW, a.label))
            elif a.write:
                out.add((WAR, a.label))
            elif b.write:
                out.add((RAW, a.label))
    return out


def overlaps(new: list[Access], old: list[Access]) -> bool:
    """Whether ``new`` truly conflicts with ``old``: common bytes, one of them a write."""
    return any(a.key == b.key and (a.write or b.write) and max(a.lo, b.lo) < min(a.hi, b.hi)
               for a in new for b in old)


@settings(max_examples=500, deadline=None)
@given(program=st.lists(step, max_size=40))
# (two reads on one stream, a write on another over part of the first: the write keeps the
# read it does not cover whole, which a third stream's write of the rest must still find)
@example(program=[("launch", 0, [(0, 0, 4, False)]), ("launch", 0, [(0, 4, 4, False)]),
                  ("launch", 1, [(0, 0, 2, True)]), ("launch", 2, [(0, 2, 2, True)])])
def test_parents_are_sound_complete_and_the_live_state_bounded(program):
    tracker = DependencyTracker()
    streams = [object() for _ in range(STREAMS)]
    nodes: list[Node] = []
    before: dict[int, set[int]] = {}    # node index -> indices ordered right before it
    ranges: dict[int, set[tuple[int, int]]] = {0: set(), 1: set()}

    def ancestors(i: int) -> set[int]:
        seen, todo = set(), [i]
        while todo:
            for p in before[todo.pop()]:
                if p not in seen:
                    seen.add(p)
                    todo.append(p)
        return seen

    for s in program:
        if s[0] == "finish":
            if s[1] < len(nodes):
                # as the runtime finishes nodes: with everything ordered before them
                for j in ancestors(s[1]) | {s[1]}:
                    nodes[j].finished = True
            continue
        _, stream, accs = s
        accesses = [Access(key, None, lo, lo + length, write, f"a{key}")
                    for key, lo, length, write in accs]
        node = Node("kernel", f"n{len(nodes)}", None, accesses)
        node.stream = streams[stream]
        found = tracker.conflicts(accesses)

        index = {id(n): i for i, n in enumerate(nodes)}
        parents = [index[id(p)] for p in found]
        for p, reasons in found.items():
            assert not p.finished
            assert set(reasons) <= reasons_between(accesses, p.accesses), (p.name, reasons)

        i = len(nodes)
        same_stream = [j for j in range(i) if nodes[j].stream is node.stream]
        before[i] = set(parents) | ({same_stream[-1]} if same_stream else set())
        ordered = set().union(*(ancestors(p) | {p} for p in parents)) if parents else set()
        for j, earlier in enumerate(nodes):
            if not earlier.finished and overlaps(accesses, earlier.accesses):
                assert j in ordered, f"{node.name} is not ordered after {earlier.name}"

        tracker.commit(node, accesses)
        nodes.append(node)
        for a in accesses:
            if a.lo < a.hi:
                ranges[a.key].add((a.lo, a.hi))
        for key, seen in ranges.items():
            assert tracker.live_entries(key) <= len(seen) * (1 + STREAMS)
    assert tracker.version == len(nodes)


def test_the_live_state_of_one_range_stays_small_however_long_the_program():
    tracker = DependencyTracker()
    streams = [object() for _ in range(STREAMS)]
    for i in range(3000):
        accesses = [Access(1, None, 0, 64, i % 5 == 0, "x")]
        node = Node("kernel", "k", None, accesses)
        node.stream = streams[i % STREAMS]
        tracker.conflicts(accesses)
        tracker.commit(node, accesses)
    assert tracker.live_entries(1) <= 1 + STREAMS
    tracker.forget(1)
    assert tracker.live_entries(1) == 0
