"""The compiled dependency tracker (``asyncgpu/csrc/tracker.c``) against the Python one
(``asyncgpu.core.deps.PythonTracking``): random programs of reads, writes and finished nodes give
the same parents, with the same reasons in the same order, and leave the same live entries."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from asyncgpu.core import compiled as _compiled
from asyncgpu.core.dag import Node
from asyncgpu.core.deps import Access, DependencyTracker, PythonTracking

pytestmark = pytest.mark.skipif(_compiled.speedups is None,
                                reason="asyncgpu._speedups is not built")


class LooseAccess:
    """An access of no registered class: the compiled tracker reads it by name."""

    def __init__(self, key, alloc, lo, hi, write, label):
        self.key, self.lo, self.hi, self.write, self.label = key, lo, hi, write, label


def _state(tracker, names):
    """Every live entry, nodes by name, in order."""
    out = {}
    for key, live in tracker._live.items():
        out[key] = ([(lo, hi, names[id(n)]) for lo, hi, n in live.writes],
                    {s: [(lo, hi, names[id(n)]) for lo, hi, n in es]
                     for s, es in live.reads.items()})
    return out


access = st.tuples(st.integers(0, 1),                      # allocation
                   st.integers(0, 4), st.sampled_from([1, 2, 4, 0]),  # start, length (0: empty)
                   st.booleans(),                          # write
                   st.sampled_from([Access, LooseAccess]))
step = st.one_of(
    st.tuples(st.just("launch"), st.integers(0, 2), st.lists(access, min_size=1, max_size=3)),
    st.tuples(st.just("finish"), st.integers(0, 8)),
)


@settings(max_examples=500, deadline=None)
@given(program=st.lists(step, max_size=30), drop_raw=st.booleans(), drop_war=st.booleans(),
       big=st.booleans())
def test_compiled_tracker_matches_python(program, drop_raw, drop_war, big):
    offset = 1 << 70 if big else 0        # ints beyond 64 bits take Python's comparison
    trackers = {"python": DependencyTracker(drop_raw, drop_war),
                "compiled": DependencyTracker(drop_raw, drop_war)}
    methods = {"python": (PythonTracking.conflicts, PythonTracking.commit),
               "compiled": (type(trackers["compiled"]).__mro__[1].conflicts,
                            type(trackers["compiled"]).__mro__[1].commit)}
    nodes = {"python": [], "compiled": []}
    names = {}
    streams = [object() for _ in range(4)]
    for n, s in enumerate(program):
        if s[0] == "finish":
            for issued in nodes.values():
                if s[1] < len(issued):
                    issued[s[1]].finished = True
            continue
        _, stream, accs = s
        found = {}
        for which, tracker in trackers.items():
            conflicts, commit = methods[which]
            accesses = [cls(key, None, lo + offset, lo + length + offset, write, f"a{key}")
                        for key, lo, length, write, cls in accs]
            node = Node("kernel", f"n{n}", None, accesses)
            node.stream = streams[stream]
            names[id(node)] = node.name
            got = conflicts(tracker, accesses)
            found[which] = [(names[id(p)], reasons) for p, reasons in got.items()]
            commit(tracker, node, accesses)
            nodes[which].append(node)
        assert found["compiled"] == found["python"]
        assert _state(trackers["compiled"], names) == _state(trackers["python"], names)
        assert trackers["compiled"].version == trackers["python"].version


def test_compiled_tracker_is_the_one_in_use():
    if _compiled.in_use():
        assert DependencyTracker.conflicts is not PythonTracking.conflicts
