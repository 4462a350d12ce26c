"""Random programs under the runtime's other options, against the serial run.

Under both memory models, serial execution, eager polling, stress mode and every scheduling
policy, a random program (launches, host reads and host writes) must read and leave the values
the serial oracle does, with an instrument registered (which takes the labelled-edge path) and
without. The same launches recorded into a graph and replayed (plain and ``static=True``) with
host writes between calls must compute what the same calls compute unrecorded, and reach
replay.

``Log``, ``fresh_sim`` and ``statistics`` are shared with the recorder tests.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Mapping

import programs
import pytest
from hypothesis import HealthCheck, given, settings

import asyncgpu as ag

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
def fresh_sim(**options):
    """A fresh ``sim`` runtime (asynchronous, randomized, seed 17) for one run."""
    from asyncgpu.runtime import current as _runtime

    # (a seed no other test uses: the configure below makes a fresh runtime, not a
    # reconfigured one whose simulator has already drawn random numbers)
    with ag.configure(backend="sim", sim_seed=424242, sim_strategy="eager"):
        _runtime.current_runtime()
    with ag.configure(**({"backend": "sim", "execution": "async", "sim_seed": 17,
                          "sim_strategy": "random"} | options)):
        yield


def statistics():
    """The runtime's statistics as plain values."""
    snap = ag.statistics()
    return {f.name: (dict(v) if isinstance(v, Mapping) else v)
            for f in dataclasses.fields(snap) for v in [getattr(snap, f.name)]}


def run(steps, init, instrumented: bool, options: dict):
    """One run on a fresh runtime: (host reads, final values, issued nodes)."""
    log = Log()
    with fresh_sim(**options):
        with ag.instrument(log) if instrumented else contextlib.nullcontext():
            reads, final = programs.run(ag, steps, init)
    return [r.tolist() for r in reads], [f.tolist() for f in final], log.nodes


def run_calls(steps, init, recorded: bool, static: bool = False):
    """The program's launches as one body called four times, with host writes between calls,
    on a fresh runtime, recorded (``@ag.graph``: recorded, captured, then replayed) or not:
    (final values, outcomes)."""
    launches = [s for s in steps if isinstance(s, programs.Launch)]
    outcomes = []
    with fresh_sim():
        allocs = [ag.array(init[i]) for i in range(3)]
        views = programs.views(allocs)

        def body():
            for step in launches:
                programs.launch(ag, step, views)

        fn = ag.graph(body, static=static) if recorded else body
        for i in range(4):
            fn()
            outcomes.append(getattr(fn, "outcome", None))
            allocs[i % 3][0:2] = float(i)           # a host write between calls
        final = [a.numpy().tolist() for a in allocs]
    return final, outcomes


@pytest.mark.parametrize("options", CONFIGS, ids=lambda o: ",".join(f"{k}={v}" for k, v in
                                                                     o.items()) or "default")
@settings(max_examples=programs.examples(12), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(steps=programs.strategies())
def test_random_programs_equal_serial_under_every_option(options, steps):
    init = programs.initial(2)
    serial_reads, serial_final = programs.run_serial(ag, programs.run, steps, init)
    expected = [r.tolist() for r in serial_reads], [f.tolist() for f in serial_final]
    plain = run(steps, init, False, options)
    watched = run(steps, init, True, options)
    assert plain[:2] == expected                 # host reads, final values
    assert watched[:2] == expected
    if any(isinstance(s, programs.Launch) for s in steps):
        assert watched[2], "the instrument saw no node"


@pytest.mark.parametrize("static", [False, True], ids=["plain", "static"])
@settings(max_examples=programs.examples(15), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(steps=programs.strategies())
def test_recorded_calls_equal_unrecorded_calls(static, steps):
    if not any(isinstance(s, programs.Launch) for s in steps):
        return
    init = programs.initial(3)
    final, outcomes = run_calls(steps, init, True, static)
    assert final == run_calls(steps, init, False)[0]
    assert "replayed" in outcomes
