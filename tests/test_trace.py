"""Traces on the sim backend: nodes, streams, edges, device intervals, exports, hooks."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import programs
from test_example import REDUCE_SRC, make_square, reduce_twin

from asyncgpu.runtime.current import current_runtime

# node counts and edges of managed runs (copies: test_memory_model.py)
pytestmark = pytest.mark.usefixtures("managed_memory")


def vec_program(ag, n=64):
    square = make_square(ag)
    reduce = ag.cuda_kernel(REDUCE_SRC, "reduce", sim=reduce_twin)
    x = ag.array(np.arange(n, dtype=np.float32))
    y = ag.array(np.ones(n, dtype=np.float32))
    x1, y1, res = ag.empty_like(x), ag.empty_like(y), ag.zeros(1, np.float32)
    ag.synchronize()

    def run():
        square[2, 32](x, x1, n)
        square[2, 32](y, y1, n)
        reduce[2, 32](x1, y1, res, n)
        return float(res[0])
    return run


def test_trace_of_vec_has_its_nodes_streams_and_edges(sim):
    ag = sim
    run = vec_program(ag)
    with ag.trace() as t:
        value = run()
    assert value == pytest.approx(sum(i * i - 1 for i in range(64)))
    sq_x, sq_y, red = t.kernels
    assert [k.name for k in t.kernels] == ["square", "square", "reduce"]
    assert all(k.site and k.site.startswith("test_trace.py:") for k in t.kernels)
    assert sq_x.stream != sq_y.stream and red.stream == sq_x.stream
    assert t.streams == 2
    assert sorted(red.parents) == sorted([(sq_x.id, "RAW", "x"), (sq_y.id, "RAW", "y")])
    assert sq_x.parents == [] and sq_y.parents == []
    host = [n for n in t.nodes if n.stream is None]
    assert [(h.kind, h.parents) for h in host] == [("host-read", [(red.id, "RAW", "float32[1]")])]
    assert [(s.reason, s.waited) for s in t.syncs] == [("host-read", [red.id])]
    # three prefetches (x, y, res: the host wrote them), each before its kernel on its stream
    assert sorted(p.nbytes for p in t.prefetches) == [4, 256, 256]
    by_id = {k.id: k for k in t.kernels}
    for p in t.prefetches:
        assert p.stream == by_id[p.node].stream and p.end_s <= by_id[p.node].start_s
    # device intervals respect every edge and each stream's order
    for k in t.kernels:
        assert k.start_s < k.end_s
        for pid, _, _ in k.parents:
            assert by_id[pid].end_s <= k.start_s
    assert sq_x.end_s <= red.start_s
    orders = [n.order for n in t.nodes]
    assert orders == sorted(orders)
    enq = [k.enqueue_s for k in t.kernels]
    assert enq == sorted(enq)
    m = t.metrics()
    assert set(m) == {"CT", "TC", "CC", "TOT"} and all(0 <= v <= 1 for v in m.values())


def test_a_host_read_in_explicit_memory_follows_its_fetch_in_the_trace(sim):
    ag = sim
    with ag.configure(memory="explicit"):
        square = make_square(ag)
        x = ag.array(np.arange(64, dtype=np.float32))
        y = ag.empty_like(x)
        ag.synchronize()
        with ag.trace() as t:
            square[2, 32](x, y, 64)
            assert float(y[3]) == 9.0
    kernel, = t.kernels
    fetch, = [n for n in t.copies if any(p == kernel.id for p, _, _ in n.parents)]
    read, = [n for n in t.nodes if n.kind == "host-read"]
    assert read.parents == [(fetch.id, "RAW", "float32[64]")]
    # (each names the user's line it was made for: the read's, the fetch's too)
    assert read.site == fetch.site and read.site.startswith("test_trace.py:")


def test_a_call_whose_result_size_depends_on_its_values_is_traced_at_the_users_line(sim):
    """nonzero, unique, a boolean mask: the call waits for its values inside the package's
    context managers (contextlib's frames), and each node it makes names the user's line."""
    import inspect

    import asyncgpu.cupy as acp

    ag = sim
    a = acp.arange(16, dtype=acp.float32)
    with ag.trace() as t:
        line = inspect.currentframe().f_lineno + 1
        acp.nonzero(a), acp.unique(a), a[a > 3]
    assert t.nodes and {n.site for n in t.nodes} == {f"test_trace.py:{line}"}


def test_a_launch_from_a_folder_named_like_the_package_is_the_users_site(sim):
    """A user's folder beside the package whose name begins with its name (asyncgpu_ext) is
    not the package: its lines are the sites errors and traces name."""
    import os

    from asyncgpu.runtime import checks

    ag = sim
    square = make_square(ag)
    x = ag.zeros(8, np.float32)
    source = "def launch(k, x):\n    k[1, 8](x, 8)\n"
    code = compile(source, os.path.join(checks._PACKAGE_DIR + "_ext", "user.py"), "exec")
    scope: dict = {}
    exec(code, scope)
    with pytest.raises(ag.ArgumentError, match=r"launched at user.py:2\)"):
        scope["launch"](square, x)


def test_a_wait_for_a_tenants_move_into_a_partition_is_a_sync_of_its_own(sim):
    """Moving a tenant's streams waits for its work: that wait is counted and traced as
    ``partition``, not folded into the next host read (which would then span the time
    between them and name the tenant's kernel)."""
    import time

    ag = sim
    square = make_square(ag)
    x = ag.array(np.arange(64, dtype=np.float32))
    y, z = ag.empty_like(x), ag.empty_like(x)
    ag.synchronize()
    with ag.tenant("moved"):
        pass
    s0 = ag.statistics()
    with ag.trace() as t:
        with ag.tenant("moved"):
            square[2, 32](x, y, 64)
        ag.regulate(plan=ag.Plan(partitions={"moved": 40}))
        time.sleep(0.05)
        square[2, 32](x, z, 64)
        assert float(z[1]) == 1.0
    ag.regulate(plan="off")
    moved, read = t.kernels
    assert [(r.reason, r.waited) for r in t.syncs] == [("partition", [moved.id]),
                                                      ("host-read", [read.id])]
    assert t.syncs[1].start_s - t.syncs[0].end_s >= 0.04
    assert (ag.statistics() - s0).host_syncs["partition"] == 1


def test_sync_mode_trace_is_one_stream_without_overlap(sim):
    ag = sim
    run = vec_program(ag)
    with ag.configure(execution="sync"):
        with ag.trace() as t:
            run()
    assert t.streams == 1
    assert all(k.parents == [] for k in t.kernels)      # each node finished before the next
    assert [s.reason for s in t.syncs].count("sync-mode") == 3
    assert t.metrics() == {"CT": 0.0, "TC": 0.0, "CC": 0.0, "TOT": 0.0}


def test_a_trace_saved_without_matplotlib_writes_all_but_the_pictures(sim, tmp_path,
                                                                       monkeypatch, caplog):
    import logging

    from asyncgpu.observe import draw, trace as trace_module

    ag = sim
    run = vec_program(ag)
    with ag.trace() as t:
        run()
    monkeypatch.setattr(trace_module, "can_draw", lambda: False)
    monkeypatch.setattr(draw, "can_draw", lambda: False)
    with caplog.at_level(logging.WARNING, logger="asyncgpu"):
        paths = t.save(str(tmp_path), "vec")
    assert sorted(paths) == ["dot", "metrics", "trace"]
    assert sorted(os.listdir(tmp_path)) == ["vec.dot", "vec.metrics.json", "vec.trace.json"]
    assert [r.getMessage() for r in caplog.records] == [
        "asyncgpu: the trace's pictures need matplotlib: pip install 'asyncgpu[bench]' (or "
        "matplotlib); wrote the trace without them"]
    with pytest.raises(ImportError, match=r"pip install 'asyncgpu\[bench\]'"):
        t.save_dag(str(tmp_path / "d.png"))


def _png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")


def test_a_dag_too_large_to_draw_whole_draws_its_first_nodes_in_a_bounded_picture(
        sim, tmp_path, monkeypatch, caplog):
    import logging

    from asyncgpu.observe import draw

    ag = sim
    monkeypatch.setattr(draw, "DAG_NODES", 12)     # (100 by default: kept small to be fast)
    monkeypatch.setattr(draw, "DAG_INCHES", 8)
    square = make_square(ag)
    x = ag.array(np.arange(64, dtype=np.float32))
    outs = [ag.empty_like(x) for _ in range(30)]
    ag.synchronize()
    with ag.trace() as t:
        for o in outs:                                  # 30 independent kernels: one row
            square[2, 32](x, o, 64)
    with caplog.at_level(logging.WARNING, logger="asyncgpu"):
        t.save_dag(str(tmp_path / "wide.png"))
    width, height = _png_size(tmp_path / "wide.png")
    assert width <= 8 * 110 and height <= 8 * 110      # (12 side by side: 26 inches unbounded)
    said = [r.getMessage() for r in caplog.records if "wide.png" in r.getMessage()]
    assert len(said) == 1 and "draws the first 12 of the trace's 30 nodes" in said[0]
    assert "t.to_dot()" in said[0]
    assert t.to_dot().count("[label=") == 30         # (the DOT has every node)


def test_a_trace_whose_pictures_fail_still_has_its_metrics_saved(sim, tmp_path, monkeypatch):
    from asyncgpu.observe import trace as trace_module

    ag = sim
    run = vec_program(ag)
    with ag.trace() as t:
        run()

    def fails(*args):
        raise MemoryError("a picture too large")
    monkeypatch.setattr(trace_module, "draw_timeline", fails)
    with pytest.raises(MemoryError):
        t.save(str(tmp_path), "vec")
    with open(tmp_path / "vec.metrics.json") as f:
        assert json.load(f)["CC"] == t.metrics()["CC"]


def test_exports(sim, tmp_path):
    ag = sim
    run = vec_program(ag)
    with ag.trace() as t:
        run()
    doc = t.chrome_trace()
    json.dumps(doc, allow_nan=False)
    names = {(e["pid"], e.get("tid")): e["args"]["name"] for e in doc["traceEvents"]
             if e["name"] == "thread_name"}
    assert sorted(names.values()) == ["host", "stream 0", "stream 1"]
    spans = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert sorted(e["name"] for e in spans if e["pid"] == 1) == [
        "prefetch", "prefetch", "prefetch", "reduce", "square", "square"]
    assert [e["name"] for e in spans if e["pid"] == 0] == ["sync: host-read"]
    flows = [e for e in doc["traceEvents"] if e["ph"] in "sf"]
    assert sorted(e["ph"] for e in flows) == ["f", "s"] and flows[0]["name"] == "RAW y"
    dot = t.to_dot()
    assert dot.startswith("digraph") and dot.count("->") == 3 and 'label="RAW y"' in dot
    assert '"#4e79a7"' in dot and '"#f28e2b"' in dot
    paths = t.save(str(tmp_path), "vec")
    for kind in ("timeline", "dag"):
        with open(paths[kind], "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    with open(paths["metrics"]) as f:
        saved = json.load(f)
    assert saved["logical_clock"] is True and saved["CC"] == t.metrics()["CC"]


def test_the_timeline_has_a_row_for_a_stream_that_only_copied(sim, tmp_path):
    from asyncgpu.observe.draw import timeline_tracks

    ag = sim
    with ag.configure(memory="explicit"):
        run = vec_program(ag)
        with ag.trace() as t:
            run()
        copied = {c.stream for c in t.copies}
        assert copied                           # (the inputs' copies to the device and back)
        assert set(timeline_tracks(t)) == {n.stream for n in t.kernels} | copied
        t.save(str(tmp_path), "vec")            # (the picture draws them)


def test_a_host_access_that_waits_for_two_readers_is_one_sync_of_the_trace_as_counted(sim):
    ag = sim
    import asyncgpu.cupy as acp

    a, b = ag.array(np.ones(8, np.float32)), ag.array(np.ones(8, np.float32))
    c, d = ag.empty_like(a), ag.empty_like(a)
    ag.synchronize()
    before = ag.statistics()
    with ag.trace() as t:
        acp.add(a, b, out=c)
        acp.multiply(a, b, out=d)               # another reader of a, on another stream
        a[0] = 2.0                              # one host write: it waits for both
    took = ag.statistics() - before
    writes = [s for s in t.syncs if s.reason == "host-write"]
    assert len(writes) == took.host_syncs["host-write"] == 1
    readers = {n.id for n in t.kernels}
    assert set(writes[0].waited) <= readers and writes[0].start_s <= writes[0].end_s


def test_tracing_leaves_the_runtime_as_it_was(sim):
    ag = sim
    from asyncgpu.runtime.current import current_runtime

    rt = current_runtime()
    backend, streams_backend, sites = rt.backend, rt.streams.backend, rt.want_sites
    run = vec_program(ag)
    run()             # the first run prefetches the inputs; the next two do not
    before = ag.statistics()
    run()
    mid = ag.statistics()
    with ag.trace():
        with ag.configure(execution="async", max_streams=8):   # reconfigured inside a trace
            run()
    after = ag.statistics()
    assert rt.backend is backend and rt.streams.backend is streams_backend
    assert rt.want_sites == sites and rt._instruments == [] and rt.stats.listener is None
    # the trace's timing events are not counted as the runtime's events
    for field in ("nodes", "events_recorded", "prefetches", "event_waits"):
        assert getattr(after, field) - getattr(mid, field) == getattr(mid, field) - getattr(
            before, field), field


def test_nested_traces_and_wrong_order(sim):
    ag = sim
    run = vec_program(ag)
    with ag.trace() as outer:
        run()
        with ag.trace() as inner:
            run()
    assert len(outer.kernels) == 6 and len(inner.kernels) == 3
    rt = current_runtime()
    plain = rt.backend
    a = ag.trace()
    run()
    b = ag.trace()
    a.stop()                    # (before b, as two threads' traces may end)
    run()
    b.stop()
    a.stop()                    # (again: nothing)
    assert rt.backend is plain and not rt._instruments     # (nothing left attached)
    assert len(a.kernels) == 3 and len(b.kernels) == 3
    c = ag.trace()
    d = ag.trace()
    d.stop()
    c.stop()
    assert rt.backend is plain and not rt._instruments


@pytest.mark.parametrize("inner_first", [True, False])
def test_nested_traces_both_record_a_recorded_functions_runs(sim, inner_first):
    """The capture went through the outer trace's timing layer (its events were captured:
    reading the outer trace raised RuntimeError), and a replay reached the inner trace only."""
    import asyncgpu.cupy as acp

    ag = sim

    @ag.graph
    def step(a):
        acp.add(a, 1.0, out=a)

    a = ag.zeros(32)
    outer = ag.trace()
    inner = ag.trace()
    for _ in range(3):
        step(a)                 # recorded, captured and launched, replayed
    first, second = (inner, outer) if inner_first else (outer, inner)
    first.stop()
    second.stop()
    assert a.tolist() == [3.0] * 32
    for t in (outer, inner):
        assert [(n.kind, n.name.rsplit(".", 1)[-1]) for n in t.kernels] == [
            ("call", "add"), ("graph", "step"), ("graph", "step")]
        assert all(n.end_s >= n.start_s >= 0 for n in t.kernels)


class Hooks(object):
    def __init__(self):
        self.calls = []

    def node_added(self, node):
        self.calls.append(("added", node.name))

    def edge_added(self, parent, child, reason, array):
        self.calls.append(("edge", parent.name, child.name, reason, array))

    def node_issued(self, node):
        self.calls.append(("issued", node.name))

    def synchronized(self, reason):
        self.calls.append(("sync", reason))


def test_instrument_hooks_in_order(sim):
    ag = sim
    run = vec_program(ag)
    with ag.instrument(Hooks()) as h:
        run()
    assert h.calls == [
        ("added", "square"), ("issued", "square"),
        ("added", "square"), ("issued", "square"),
        ("added", "reduce"), ("edge", "square", "reduce", "RAW", "x"),
        ("edge", "square", "reduce", "RAW", "y"), ("issued", "reduce"),
        ("sync", "host-read"),
        ("added", "float32[1]"), ("edge", "reduce", "float32[1]", "RAW", "float32[1]"),
        ("issued", "float32[1]"),
    ]


def test_the_base_instruments_hooks_exist_and_do_nothing(sim, caplog):
    """ag.Instrument provides every hook as a no-op: each returns None and leaves the object
    unchanged, and a subclass that overrides one hook observes a program without an error,
    receiving just that hook's calls."""
    ag = sim
    base = ag.Instrument()
    calls = {"node_added": (None,), "edge_added": (None, None, "RAW", "x"),
             "node_issued": (None,), "synchronized": ("host-read",),
             "regulation_changed": ("off", None, "")}
    for hook, args in calls.items():
        assert callable(getattr(base, hook)), hook
        assert getattr(base, hook)(*args) is None, hook
    assert vars(base) == {}

    class IssuedOnly(ag.Instrument):
        def __init__(self):
            self.issued = []

        def node_issued(self, node):
            self.issued.append(node.name)

    run = vec_program(ag)
    with ag.instrument(IssuedOnly()) as inst:
        assert run() == pytest.approx(sum(i * i - 1 for i in range(64)))
    assert inst.issued == ["square", "square", "reduce", "float32[1]"]
    assert "removing it" not in caplog.text


def test_a_failing_instrument_is_removed_and_logged(sim, caplog):
    ag = sim
    run = vec_program(ag)

    class Broken(ag.Instrument):
        def __init__(self):
            self.edges = 0
            self.issued = 0

        def edge_added(self, *args):
            self.edges += 1
            raise ValueError("boom")

        def node_issued(self, node):
            self.issued += 1

    def removals():
        return [r for r in caplog.records if "removing it" in r.getMessage()]

    with ag.instrument(Broken()) as broken:
        # the reduce has two RAW edges and the host read one: only the first reaches the hook
        assert run() == pytest.approx(sum(i * i - 1 for i in range(64)))
        assert broken.edges == 1
        # removed: none of its hooks is called again (the two squares were issued before)
        assert broken.issued == 2
        [record] = removals()
        assert "raised in edge_added" in record.getMessage()
        assert record.exc_info and isinstance(record.exc_info[1], ValueError)
        assert "boom" in caplog.text
        logged = len(caplog.records)
        # a second program in the same block: no call, no new record
        assert vec_program(ag)() == pytest.approx(sum(i * i - 1 for i in range(64)))
        assert (broken.edges, broken.issued) == (1, 2)
        assert len(caplog.records) == logged


def test_statistics_snapshot_fields(sim):
    ag = sim
    run = vec_program(ag)
    s0 = ag.statistics()
    run()
    s = ag.statistics()
    assert s.nodes - s0.nodes == 3 and s.edges["RAW"] - s0.edges["RAW"] == 2
    assert s.graphs_recorded == 0 and s.graphs_replayed == 0
    assert s.host_syncs["host-read"] - s0.host_syncs.get("host-read", 0) == 1
    d = s.as_dict()
    assert d["graphs_recorded"] == 0 and isinstance(d["edges"], dict)
    with pytest.raises(AttributeError):
        s.nodes = 0

def test_snapshots_across_a_new_backend_are_not_subtracted(sim):
    """configure(memory=...) makes the backend anew and its counts start at zero: a
    difference across it would be negative, so it is refused; after it, counts add up."""
    ag = sim
    square = make_square(ag)
    x, y = ag.ones(8, np.float32), ag.empty(8, np.float32)
    square[1, 8](x, y, 8)
    before = ag.statistics()
    with ag.configure(memory="explicit" if before.prefetches else "managed"):
        with pytest.raises(ValueError, match="before asyncgpu.configure made the backend anew"):
            ag.statistics() - before
        start = ag.statistics()
        square[1, 8](x, y, 8)
        assert (ag.statistics() - start).kernels == 1



@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=programs.strategies())
def test_traced_random_programs_equal_serial(steps):
    """Tracing adds records on the streams: results (and the checker) must not change."""
    import asyncgpu as ag

    init = programs.initial()
    with ag.configure(backend="sim", execution="sync", sim_seed=0, sim_strategy="eager"):
        expected = programs.run(ag, steps, init)
    with ag.configure(backend="sim", execution="async", sim_seed=3, sim_strategy="random"):
        with ag.trace() as t:
            got = programs.run(ag, steps, init)
        for k in t.kernels:
            assert k.start_s < k.end_s
    for a, b in zip(got[0] + got[1], expected[0] + expected[1]):
        assert a.tolist() == b.tolist()


def _traced_process(code: str, path) -> subprocess.CompletedProcess:
    """``code`` run by a Python of its own on the simulator with ``ASYNCGPU_TRACE=path``;
    it must succeed."""
    env = dict(os.environ, ASYNCGPU_TRACE=str(path), ASYNCGPU_BACKEND="sim",
               PYTHONPATH=os.pathsep.join([os.getcwd(), os.path.dirname(__file__)]))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    return out


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs a /proc file system")
def test_a_process_trace_the_file_system_refuses_is_one_line_at_exit():
    """A folder that exists but takes no new file (``/proc``, even for root): a traceback
    followed the line."""
    out = _traced_process("import asyncgpu as ag\n(ag.zeros(4) + 1).tolist()\n",
                          "/proc/asyncgpu-trace.json")
    assert "could not write the trace to" in out.stderr and "Traceback" not in out.stderr


def test_asyncgpu_trace_variable_writes_a_chrome_trace_at_exit(tmp_path, monkeypatch):
    monkeypatch.delenv("ASYNCGPU_MEMORY", raising=False)
    path = tmp_path / "proc.json"
    code = ("import numpy as np, asyncgpu as ag\n"
            "from test_example import make_square\n"
            "sq = make_square(ag); x = ag.array(np.ones(8, np.float32)); y = ag.empty_like(x)\n"
            "sq[1, 8](x, y, 8); print(float(y[0]))\n")
    _traced_process(code, path)
    doc = json.loads(path.read_text())
    spans = sorted((e["ts"], e["name"]) for e in doc["traceEvents"]
                   if e["ph"] == "X" and e["pid"] == 1)
    # the default (explicit) memory: x's copy to the device, the kernel, y's copy back
    assert [name for _, name in spans] == ["x to device", "square", "float32[8] to host"]


def test_a_process_trace_follows_a_new_backend_into_a_file_of_its_own(tmp_path, monkeypatch):
    """``ASYNCGPU_TRACE``: a configure that builds a new backend (``memory=``) ends the file
    and goes on in ``path.1``, where a trace block refuses it; a block still open at exit is
    ended, and the file written."""
    monkeypatch.delenv("ASYNCGPU_MEMORY", raising=False)
    path = tmp_path / "proc.json"
    code = ("import numpy as np, asyncgpu as ag\n"
            "from test_example import make_square\n"
            "sq = make_square(ag); x = ag.array(np.ones(8, np.float32)); y = ag.empty_like(x)\n"
            "sq[1, 8](x, y, 8)\n"
            "with ag.configure(memory='managed'):\n"
            "    sq[1, 8](y, x, 8); print(float(x[0]))\n"
            "t = ag.trace()\n"             # (left open: the process trace is below it)
            "sq[1, 8](x, y, 8); print(float(y[0]))\n")
    out = _traced_process(code, path)
    assert out.stdout.split() == ["1.0", "1.0"]
    kernels = []
    for name in ("proc.json", "proc.1.json", "proc.2.json"):
        doc = json.loads((tmp_path / name).read_text())
        kernels.append([e["name"] for e in doc["traceEvents"]
                        if e["ph"] == "X" and e["pid"] == 1 and e["name"] == "square"])
    assert kernels == [["square"], ["square"], ["square"]]


def test_a_switch_of_devices_inside_a_trace_block_is_refused_and_nothing_changes(sim):
    ag = sim
    run = vec_program(ag)
    with ag.trace() as t:
        run()
        before = ag.options()
        with pytest.raises(RuntimeError, match=r"configure\(devices='all'\) builds a new "
                                               "backend, which a trace in progress cannot"):
            ag.configure(devices="all", sim_devices=2)
        assert ag.options() == before
        run()
    assert [k.name for k in t.kernels] == ["square", "square", "reduce"] * 2


def test_long_traces_read_completed_events_as_they_go(sim, monkeypatch):
    import asyncgpu.observe.trace as T

    ag = sim
    monkeypatch.setattr(T, "_HARVEST", 4)
    run = vec_program(ag)
    with ag.trace() as t:
        for _ in range(4):
            run()
        assert len(t._events) < 4 * 3     # completed ones were read during the run
    kernels = t.kernels
    assert len(kernels) == 12 and all(k.start_s < k.end_s for k in kernels)
    for a, b in zip(kernels, kernels[1:]):
        if a.stream == b.stream:
            assert a.end_s <= b.start_s


def test_a_traces_host_times_count_from_its_start(sim):
    import time

    ag = sim
    run = vec_program(ag)
    before = time.perf_counter()
    with ag.trace() as t:
        between = time.perf_counter()
        run()
    assert before <= t.started <= between
    assert all(n.enqueue_s >= between - t.started for n in t.nodes)


def test_a_traces_busy_time_per_tenant_counts_each_tenants_own_device_work_once(sim):
    ag = sim
    square = make_square(ag)
    x = ag.array(np.arange(64, dtype=np.float32))
    y = ag.array(np.ones(64, dtype=np.float32))
    x1, y1 = ag.empty_like(x), ag.empty_like(y)
    ag.synchronize()
    with ag.trace() as t:
        with ag.tenant("busy-a"):
            square[2, 32](x, x1, 64)
            square[2, 32](y, y1, 64)        # (independent: may run beside the first)
        with ag.tenant("busy-b"):
            square[2, 32](x1, x, 64)        # (after a's first)
        ag.synchronize()
    busy = t.tenant_busy()
    assert set(busy) == {"busy-a", "busy-b"}        # (prefetches belong to no tenant)
    (a1, a2), (b,) = ([k for k in t.kernels if k.tenant == name] for name in ("busy-a", "busy-b"))
    together = max(0.0, min(a1.end_s, a2.end_s) - max(a1.start_s, a2.start_s))
    assert busy["busy-a"] == pytest.approx(
        (a1.end_s - a1.start_s) + (a2.end_s - a2.start_s) - together)
    assert busy["busy-b"] == pytest.approx(b.end_s - b.start_s)


def test_a_synchronizing_library_call_is_one_library_call_wait_in_the_trace_and_the_counts():
    """extract of two pending arrays waits for them: one wait, traced and counted as the
    call's (it was traced as host reads and counted as those and as a library-call)."""
    import asyncgpu as ag
    import asyncgpu.cupy as acp

    with ag.configure(backend="sim", sim_seed=0, sim_strategy="lazy"):
        a = acp.arange(10, dtype=acp.float32)
        ag.synchronize()
        m = a > 3                           # (pending: the lazy device has not run it)
        b = a * 2                           # (a second pending input)
        before = ag.statistics()
        with ag.trace() as t:
            assert acp.extract(m, b).tolist() == [8, 10, 12, 14, 16, 18]
        counted = dict((ag.statistics() - before).host_syncs)
    assert [s.reason for s in t.syncs] == ["library-call"]
    assert counted == {"library-call": 1}


def test_a_trace_started_twice_is_refused_and_still_stops(sim):
    """A second start() layered the trace over itself: stop() then looped for good, holding
    the runtime's lock."""
    ag = sim
    run = vec_program(ag)
    t = ag.trace()
    with pytest.raises(RuntimeError, match="starts once"):
        t.start()
    assert run() == pytest.approx(sum(i * i - 1 for i in range(64)))
    t.stop()
    run()
    assert len(t.kernels) == 3          # (the second run, after stop(), untraced)


def test_an_instrument_with_only_a_regulation_hook_is_taken(sim):
    class Watcher:
        def regulation_changed(self, state, plan, stage):
            pass

    with sim.instrument(Watcher()) as w:
        assert isinstance(w, Watcher)


def test_a_kernel_name_with_backslashes_and_quotes_is_quoted_in_the_dot_graph(sim):
    from asyncgpu.observe.export import to_dot
    from asyncgpu.observe.records import NodeRecord

    record = NodeRecord(1, "kernel", 'tile\\"x"\\', None, 0, 0, 0.0)
    line = [ln for ln in to_dot([record]).splitlines() if ln.startswith("  n1 ")][0]
    assert line.startswith('  n1 [label="tile\\\\\\"x\\"\\\\\\nstream 0"')
