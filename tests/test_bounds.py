"""Physical bounds: critical paths of hand-built DAGs, streamed bytes, harness and CLI output."""

from __future__ import annotations

import json

import pytest

from benchmarks import bounds as B
from benchmarks import harness
from benchmarks.workloads import WORKLOADS


def node(i, seconds, *parents):
    return ("node", i, seconds, list(parents))


def test_critical_path_of_a_chain_a_diamond_and_independent_nodes():
    assert B.critical_path([node(1, 2), node(2, 3, 1), node(3, 1, 2)]) == 6
    assert B.critical_path([node(1, 2), node(2, 3), node(3, 1, 1, 2)]) == 4
    assert B.critical_path([node(1, 2), node(2, 5), node(3, 1)]) == 5
    # a diamond whose long side is the second branch
    assert B.critical_path([node(1, 1), node(2, 1, 1), node(3, 7, 1), node(4, 1, 2, 3)]) == 9


def test_host_waits_delay_what_is_issued_after_them():
    # 1 (2 s) and 2 (5 s) are independent; the host waits for 1, then issues 3 (1 s)
    steps = [node(1, 2), node(2, 5), ("barrier", [1]), node(3, 1)]
    assert B.critical_path(steps) == 5                   # 3 runs 2-3, beside 2
    steps = [node(1, 2), node(2, 5), ("barrier", None), node(3, 1)]
    assert B.critical_path(steps) == 6                   # synchronize: 3 starts at 5
    # parents issued before the trace (unknown ids) impose nothing
    assert B.critical_path([node(7, 1, 99), ("barrier", [98])]) == 1
    assert B.critical_path([]) == 0
    with pytest.raises(ValueError, match="unknown"):
        B.critical_path([("launch", 1)])


def traced(ag, cls, mode):
    wl = cls(ag, "tiny")
    block = (8, 8) if cls.two_d else 32
    harness.run_mode(ag, wl, mode, block, 2, 1, 0, "streaming", None)
    return harness.traced_iteration(ag, wl, mode, block, 2, "streaming")


@pytest.mark.parametrize("memory", ["explicit", "managed"])
def test_compute_bound_of_vec_from_serial_times(sim, memory):
    ag = sim
    ag.configure(memory=memory)        # (the sim fixture restores the options afterwards)
    par = traced(ag, WORKLOADS["vec"], "parallel")
    ser = traced(ag, WORKLOADS["vec"], "serial")
    sq_x, sq_y, red = (k.end_s - k.start_s for k in ser.kernels)
    assert B.compute_bound(par, ser) == pytest.approx(max(sq_x, sq_y) + red)
    assert B.compute_bound(ser, ser) == pytest.approx(sq_x + sq_y + red)   # no edges: host waits
    b = B.bounds(1000, None, par, ser, 0.5)
    assert b["transfer_bound_s"] is None and b["compute_bound_s"] is None    # sim: n/a
    assert b["compute_bound_logical_us"] == pytest.approx((max(sq_x, sq_y) + red) * 1e6)
    b = B.bounds(1000, 1e6, par, ser, 0.5)
    assert b["transfer_bound_s"] == pytest.approx(1e-3) and b["bound_s"] == pytest.approx(1e-3)
    assert b["parallel_over_bound"] == pytest.approx(500)
    other = traced(ag, WORKLOADS["bs"], "serial")
    with pytest.raises(ValueError, match="different kernels"):
        B.compute_bound(par, other)


@pytest.mark.usefixtures("managed_memory")     # counts what managed memory prefetches
@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_streamed_bytes_are_what_a_streaming_iteration_prefetches(sim, name):
    ag = sim
    cls = WORKLOADS[name]
    wl = cls(ag, "tiny")
    block = (8, 8) if cls.two_d else 32
    for _ in range(2):      # the first iteration also moves the resident inputs
        wl.reset()
        ag.synchronize()
        before = ag.statistics().bytes_prefetched
        wl.run(block, 2)
        ag.synchronize()
    assert ag.statistics().bytes_prefetched - before == wl.streamed_bytes()


def test_bandwidth_probe_is_not_applicable_on_sim(sim):
    from asyncgpu.runtime.current import current_runtime

    assert B.h2d_bandwidth(current_runtime()) is None


def test_harness_reports_metrics_and_bounds(sim):
    ag = sim
    results = harness.bench_workload(ag, WORKLOADS["vec"], "tiny", harness.MODES, [32], 2,
                                     warmup=0, iterations=1, inputs="streaming", metrics=True,
                                     bounds=True)
    assert all(r.ok for r in results)
    by_mode = {r.mode: r for r in results}
    assert by_mode["serial"].metrics == {"CT": 0.0, "TC": 0.0, "CC": 0.0, "TOT": 0.0}
    assert by_mode["parallel"].metrics["TOT"] >= 0
    assert by_mode["parallel"].bounds["streamed_bytes"] == 16388
    row, = harness.summarize(results)
    assert set(row["metrics"]) == set(harness.TRACEABLE) and row["bounds"]["bound_s"] is None


def test_trace_and_bench_commands(sim, tmp_path):
    from asyncgpu.__main__ import main

    assert main(["trace", "vec", "--out", str(tmp_path)]) == 0
    for ext in ("trace.json", "dot", "timeline.png", "dag.png", "metrics.json"):
        assert (tmp_path / f"vec_parallel.{ext}").stat().st_size > 0
    out = tmp_path / "bench.json"
    assert main(["bench", "vec", "--iterations", "1", "--warmup", "0", "--metrics",
                 "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    row, = doc["summary"]
    assert set(row["metrics"]) == {"serial", "parallel", "handopt"}
    assert row.get("bounds") is None          # (bounds are measured on a GPU only)
    assert all(r["metrics"] is not None for r in doc["results"])
