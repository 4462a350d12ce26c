"""The recorder's benchmarks on the sim backend: INCEPTION replays correctly under every stream
allocation and order (and the allocations differ as they should); the replay micro-benchmark
checks its results."""

from __future__ import annotations

import pytest

from benchmarks import harness, inception, replay
from benchmarks.workloads import WORKLOADS
from recorder_kernels import deferred_launches


def test_inception_replays_under_every_configuration(sim):
    m = inception.measure(sim, "tiny", iterations=1, block=32)
    assert m["kernels"] == 14
    assert {f"{s}/{o}" for s, o in inception.CONFIGS} <= set(m)


def test_inception_stream_allocations(sim):
    from asyncgpu.recorder import capture as _graph_capture

    ag = sim
    wl = inception.Inception(ag, "tiny")
    lanes = {}
    for streams in ("single", "opara", "nimble"):
        with ag.configure(graph_streams=streams):
            rt, launches = deferred_launches(lambda: wl.run(32), "inception")
            preds, lane, order = _graph_capture.plan(rt, launches)
            lanes[streams] = len(set(lane))
    # four branches per block: at least four streams where they may run side by side
    assert lanes["single"] == 1
    assert lanes["opara"] >= 4 and 4 <= lanes["nimble"] <= lanes["opara"]


def test_replay_micro_benchmark_checks_its_results(sim):
    m = replay.measure(sim, (3,), iterations=2)
    assert set(m) == {"chain/3", "independent/3"}
    assert all(v > 0 for case in m.values() for v in case.values())


@pytest.mark.parametrize("name", ["vec", "ml", "hits"])   # the generic runner, and hits' own
def test_recorded_static_skips_the_body_and_passes_checks(name):
    """``recorded_static``: from the third call on, no body runs (the device part is replayed
    from its arguments) and every result is still right, inputs rewritten in between."""
    import asyncgpu as ag

    cls = WORKLOADS[name]
    with ag.configure(backend="sim", sim_seed=4, sim_strategy="random"):
        wl = cls(ag, "tiny")
        part = "iteration" if hasattr(wl, "static_runner") else "run_device"
        inner = getattr(wl, part)
        calls = []

        def counted(*args):
            calls.append(args)
            return inner(*args)

        setattr(wl, part, counted)
        run = harness.static_runner(ag, wl)
        block = (8, 8) if cls.two_d else 32
        for i in range(3):
            wl.reset()
            ok, msg = wl.check(run(block, 2))
            assert ok, (i, msg)
            if i == 1:
                after_capture = len(calls)
        assert len(calls) == after_capture > 0
        run.clear()
