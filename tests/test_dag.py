"""Dependency vectors of GrCUDA's mock tests, on the pure tracker (no backend)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from asyncgpu.core.backend import Backend
from asyncgpu.core.config import Options
from asyncgpu.core.dag import Node, reduce_parents
from asyncgpu.core.deps import Access, DependencyTracker
from asyncgpu.core.statistics import Counters
from asyncgpu.core.streams import StreamManager, StreamState


class Sim:
    """Drives the tracker like the runtime does, one stream per node."""

    def __init__(self, no_const: bool = False) -> None:
        self.deps = DependencyTracker()
        self.no_const = no_const
        self.nodes: dict[str, Node] = {}
        self.edges: set[tuple[str, str]] = set()

    def launch(self, name: str, *args: str) -> Node:
        accesses = []
        for a in args:
            read_only = a.endswith("r") and not self.no_const
            key = int(a.rstrip("r"))
            accesses.append(Access(key, None, 0, 8, not read_only, str(key)))
        node = Node("kernel", name, None, accesses)
        found = self.deps.conflicts(accesses)
        parents = reduce_parents(found)
        node.parents = parents
        node.stream = StreamState(len(self.nodes), None)
        node.stream.inflight.append(node)
        node.seq = 1
        self.deps.commit(node, accesses)
        for p in parents:
            self.edges.add((p.name, name))
        self.nodes[name] = node
        return node


def test_no_const_simple():
    s = Sim(no_const=True)
    s.launch("A", "1"); s.launch("B", "2"); s.launch("C", "1", "2", "3"); s.launch("D", "3")
    assert s.edges == {("A", "C"), ("B", "C"), ("C", "D")}


def test_no_const_chain():
    s = Sim(no_const=True)
    for name, args in [("A", "12"), ("B", "1"), ("C", "2"), ("D", "13"), ("E", "14"), ("F", "4")]:
        s.launch(name, *args)
    assert s.edges == {("A", "B"), ("A", "C"), ("B", "D"), ("D", "E"), ("E", "F")}


def test_with_const_readers_do_not_depend_on_each_other():
    s = Sim()
    s.launch("A", "1r"); s.launch("B", "1r"); s.launch("C", "1", "2"); s.launch("D", "2")
    assert s.edges == {("A", "C"), ("B", "C"), ("C", "D")}


def test_with_const_writer_after_readers_skips_the_first_writer():
    s = Sim()
    s.launch("A", "1"); s.launch("B", "1r"); s.launch("C", "1r")
    assert s.edges == {("A", "B"), ("A", "C")}
    s.launch("D", "1")
    assert s.edges == {("A", "B"), ("A", "C"), ("B", "D"), ("C", "D")}


def test_with_const_long_vector():
    s = Sim()
    for name, args in [("A", ("1r", "2")), ("B", ("1",)), ("C", ("2r",)), ("D", ("1r", "3")),
                       ("E", ("1r", "4")), ("F", ("4",))]:
        s.launch(name, *args)
    assert s.edges == {("A", "B"), ("A", "C"), ("B", "D"), ("B", "E"), ("E", "F")}
    g = s.launch("G", "1", "3", "4")
    assert {p.name for p in g.parents} == {"D", "F"}


def test_disjoint_byte_ranges_do_not_conflict():
    deps = DependencyTracker()
    a = Node("kernel", "a", None, [Access(1, None, 0, 32, True, "x")])
    a.stream = StreamState(0, None)
    deps.commit(a, a.accesses)
    assert deps.conflicts([Access(1, None, 32, 64, True, "x")]) == {}
    assert list(deps.conflicts([Access(1, None, 16, 48, False, "x")])) == [a]


class _Events(Backend):
    """A backend's stream and event calls, recording nothing."""

    def create_stream(self, device: int = 0) -> object:
        return object()

    def create_event(self, device: int = 0) -> object:
        return object()

    def record(self, event: object, stream: object) -> None:
        pass


def test_finishing_a_node_finishes_its_stream_predecessors_and_ancestors():
    streams = StreamManager(_Events(), Options(), Counters())
    s0, s1 = streams.grow(), streams.grow()
    nodes = []
    for i, stream in enumerate([s0, s0, s1, s1]):
        n = Node("kernel", f"k{i}", None, [])
        n.stream = stream
        streams.issued(n)
        nodes.append(n)
    nodes[2].parents = [nodes[1]]
    assert streams.finished(nodes[2]) == 3
    assert [n.finished for n in nodes] == [True, True, True, False]
    assert list(s0.inflight) == [] and list(s1.inflight) == [nodes[3]]
    assert streams.inflight == 1 and streams.stats.nodes_retired == 3
    assert nodes[2].parents == () and nodes[2].event is None    # history and events let go
    assert streams.finished(nodes[2]) == 0                      # once only


def test_entries_stay_bounded_without_host_sync():
    deps = DependencyTracker()
    streams = [StreamState(i, None) for i in range(3)]
    for i in range(3000):
        write = i % 4 == 0
        n = Node("kernel", "k", None, [Access(1, None, 0, 64, write, "x")])
        n.stream = streams[i % 3]
        n.parents = reduce_parents(deps.conflicts(n.accesses))
        deps.commit(n, n.accesses)
    assert deps.live_entries(1) <= 4


@pytest.mark.parametrize("modes,expected", [(("w", "r"), "RAW"), (("r", "w"), "WAR"),
                                            (("w", "w"), "WAW")])
def test_edge_reasons(modes, expected):
    deps = DependencyTracker()
    first = Node("kernel", "a", None, [Access(1, None, 0, 8, modes[0] == "w", "x")])
    first.stream = StreamState(0, None)
    deps.commit(first, first.accesses)
    found = deps.conflicts([Access(1, None, 0, 8, modes[1] == "w", "x")])
    assert found == {first: [(expected, "x")]}


@given(ops=st.lists(st.tuples(st.integers(0, 2), st.integers(0, 7), st.integers(1, 8),
                              st.booleans(), st.integers(-1, 20)), min_size=1, max_size=40),
       span=st.tuples(st.integers(0, 7), st.integers(1, 8)))
def test_writes_beyond_is_the_whole_allocation_s_writers_outside_the_span_s(ops, span):
    """``writes_beyond(key, found)`` (may a small allocation be fetched whole?) answers exactly
    whether a read of every byte would wait for a writer a read of the span would not."""
    deps = DependencyTracker()
    streams = [StreamState(i, None) for i in range(3)]
    nodes = []
    for stream, lo, length, write, finish in ops:
        acc = [Access(1, None, lo * 8, min(64, (lo + length) * 8), write, "x")]
        n = Node("kernel", "k", None, acc)
        n.stream = streams[stream]
        n.parents = reduce_parents(deps.conflicts(acc))
        deps.commit(n, acc)
        nodes.append(n)
        lo, hi = span[0] * 8, min(64, (span[0] + span[1]) * 8)
        found = deps.conflicts([Access(1, None, lo, hi, False, "x")])
        if 0 <= finish < len(nodes):
            nodes[finish].finished = True       # (its entries stay until a scan drops them)
        beyond = deps.writes_beyond(1, found)
        everything = deps.conflicts([Access(1, None, 0, 64, False, "x")])
        assert beyond == bool(everything.keys() - found.keys())
    assert not deps.writes_beyond(2, {})        # an allocation never written


@pytest.mark.parametrize("count", [2, 3])
def test_a_parent_made_after_its_child_is_still_dropped_as_implied(count):
    # A launch's copy node is made after the launch's node and issued before it, so a parent
    # can be the newer of two candidates: the filter must look both ways.
    launch = Node("kernel", "k", None, [])
    copy = Node("copy", "h2d", None, [])
    launch.parents = [copy]
    others = [Node("kernel", f"o{i}", None, []) for i in range(count - 2)]
    for candidates in ([launch, copy, *others], [copy, launch, *others]):
        kept = reduce_parents(dict.fromkeys(candidates))
        assert copy not in kept
        assert [n.name for n in kept] == ["k"] + [n.name for n in others]
