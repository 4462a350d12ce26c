"""The compiled launch path against the Python one, on random programs.

``Runtime.launch_kernel`` and ``_issue`` (``asyncgpu/csrc/issue.c``), the stream manager,
``Node.__init__`` and the policies' picks (``streams.c``) and the explicit model's booking
(``memory.c``) have Python twins. Under every scheduling policy, both memory models, serial
execution, stress mode and eager polling, a random program must make the same nodes on the
same streams with the same edges in the same order, count the same statistics and compute the
same values, whichever twins run (with an instrument registered, which takes the labelled-edge
path, and without). The same launches recorded into a graph and replayed (``launch_graph``,
plain and ``static=True``) must also go the same way.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Mapping

import programs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import asyncgpu as ag
from asyncgpu.core import compiled as _compiled

pytestmark = pytest.mark.skipif(_compiled.speedups is None,
                                reason="asyncgpu._speedups is not built")

CONFIGS = [
    {},
    {"memory": "managed"},
    {"memory": "managed", "prefetch": "off"},
    {"execution": "sync"},
    {"poll_threshold": 1},
    {"stress": True, "stress_seed": 5},
    *programs.POLICIES,
]


class Log:
    """Every issued node as (kind, name, stream, seq, edges), parents by issue order."""

    def __init__(self) -> None:
        self.order: dict[int, int] = {}
        self.nodes: list[tuple] = []

    def node_issued(self, node) -> None:
        self.order[node.id] = len(self.order)
        edges = tuple((self.order.get(p.id, -1), reason, label) for p, reason, label in node.edges)
        stream = node.stream.index if node.stream is not None else None
        self.nodes.append((node.kind, node.name, stream, node.seq, edges))


@contextlib.contextmanager
def fresh_sim(compiled: bool, **options):
    """A fresh ``sim`` runtime with the compiled or the Python methods, for one run."""
    from asyncgpu.runtime import current as _runtime

    _compiled.use(compiled)
    try:
        # (a seed no other test uses: the configure below makes a fresh runtime, not a
        # reconfigured one whose simulator has already drawn random numbers)
        with ag.configure(backend="sim", sim_seed=424242, sim_strategy="eager"):
            _runtime.current_runtime()
        with ag.configure(**({"backend": "sim", "execution": "async", "sim_seed": 17,
                              "sim_strategy": "random"} | options)):
            yield
    finally:
        _compiled.use(True)


def statistics():
    """The runtime's statistics as plain values."""
    snap = ag.statistics()
    return {f.name: (dict(v) if isinstance(v, Mapping) else v)
            for f in dataclasses.fields(snap) for v in [getattr(snap, f.name)]}


def run(steps, init, compiled: bool, instrumented: bool, options: dict):
    """One run on a fresh runtime: (host reads, final values, issued nodes, statistics)."""
    log = Log()
    with fresh_sim(compiled, **options):
        with ag.instrument(log) if instrumented else contextlib.nullcontext():
            reads, final = programs.run(ag, steps, init)
        stats = statistics()
    return [r.tolist() for r in reads], [f.tolist() for f in final], log.nodes, stats


def run_recorded(steps, init, compiled: bool, static: bool):
    """The program's launches as the body of ``@ag.graph`` called four times (recorded,
    captured, then replayed) with host writes between calls, on a fresh runtime: (final values,
    issued nodes, statistics, outcomes)."""
    launches = [s for s in steps if isinstance(s, programs.Launch)]
    log, outcomes = Log(), []
    with fresh_sim(compiled):
        allocs = [ag.array(init[i]) for i in range(3)]
        views = programs.views(allocs)

        @ag.graph(static=static)
        def body():
            for step in launches:
                programs.launch(ag, step, views)

        with ag.instrument(log):
            for i in range(4):
                body()
                outcomes.append(body.outcome)
                allocs[i % 3][0:2] = float(i)           # a host write between calls
        final = [a.numpy().tolist() for a in allocs]
        stats = statistics()
    return final, log.nodes, stats, outcomes


@pytest.mark.parametrize("options", CONFIGS, ids=lambda o: ",".join(f"{k}={v}" for k, v in
                                                                     o.items()) or "default")
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=programs.strategies(), instrumented=st.booleans())
def test_compiled_and_python_schedule_alike(options, steps, instrumented):
    init = programs.initial(2)
    compiled = run(steps, init, True, instrumented, options)
    python = run(steps, init, False, instrumented, options)
    assert compiled[0] == python[0]              # host reads
    assert compiled[1] == python[1]              # final values
    assert compiled[2] == python[2]              # nodes, streams, sequence numbers, edges
    assert compiled[3] == python[3]              # statistics
    if instrumented:
        assert compiled[2], "the instrument saw no node"


@pytest.mark.parametrize("static", [False, True], ids=["plain", "static"])
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=programs.strategies())
def test_compiled_and_python_record_and_replay_alike(static, steps):
    if not any(isinstance(s, programs.Launch) for s in steps):
        return
    init = programs.initial(3)
    compiled = run_recorded(steps, init, True, static)
    python = run_recorded(steps, init, False, static)
    assert compiled == python
    assert "replayed" in compiled[3]
