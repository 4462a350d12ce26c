"""The recorder on the sim backend: record, capture, replay; replays equal the serial execution,
compose with dynamic work and host access, and the happens-before checker sees inside them."""

from __future__ import annotations

import numpy as np
import pytest

from asyncgpu.core.errors import RaceError

from recorder_kernels import N, captured_graphs, kernels


@pytest.mark.parametrize("streams", ["opara", "nimble"])
@pytest.mark.parametrize("order", ["topological", "opara", "ios"])
@pytest.mark.parametrize("seed", range(2))
def test_graph_replays_equal_eager(streams, order, seed):
    import asyncgpu as ag

    with ag.configure(backend="sim", sim_seed=seed, graph_streams=streams, graph_order=order):
        scale, add, inc = kernels(ag)
        x0 = np.arange(N, dtype=np.float32)
        x = ag.array(x0)
        y, z, w = (ag.empty(N, np.float32) for _ in range(3))

        @ag.graph
        def step(x, y, z, w):
            scale[1, N](x, y, np.float32(2), N)      # y = 2x   } independent
            scale[1, N](x, z, np.float32(3), N)      # z = 3x   }
            add[1, N](y, z, w, N)                    # w = 5x
            inc[1, N](x, N)                          # x += 1 (WAR with both scales)

        outcomes = []
        before = ag.statistics()
        for i in range(5):
            x[...] = x0 * i                          # host write, ordered with the graph
            step(x, y, z, w)
            outcomes.append(step.outcome)
            np.testing.assert_array_equal(w.numpy(), 5 * x0 * i)
            np.testing.assert_array_equal(x.numpy(), x0 * i + 1)
        assert outcomes == ["recorded"] + ["replayed"] * 4
        after = ag.statistics()
        assert after.graphs_recorded - before.graphs_recorded == 1
        assert after.graphs_replayed - before.graphs_replayed == 4


def test_replay_is_one_node_and_composes_with_dynamic_work(sim):
    ag = sim
    scale, add, inc = kernels(ag)
    x = ag.array(np.ones(N, np.float32))
    y, z = ag.empty(N, np.float32), ag.empty(N, np.float32)

    @ag.graph
    def step():
        scale[1, N](x, y, np.float32(2), N)
        inc[1, N](y, N)

    step()
    step()
    nodes = ag.statistics().nodes
    for _ in range(3):
        inc[1, N](x, N)              # dynamic: the graph reads x after it (RAW)
        step()                       # one node
        add[1, N](y, y, z, N)        # dynamic: reads y after the graph writes it
    assert ag.statistics().nodes - nodes == 9
    np.testing.assert_array_equal(z.numpy(), 2 * (2 * 4 + 1) * np.ones(N, np.float32))


def test_a_recorded_method_gets_its_instance_and_each_instance_its_own_arrays(sim):
    ag = sim
    _, _, inc = kernels(ag)

    class Model:
        def __init__(self):
            self.y = ag.zeros(N, np.float32)

        @ag.graph
        def step(self, times):
            for _ in range(times):
                inc[1, N](self.y, N)

        @ag.graph(static=True)
        def once(self):
            inc[1, N](self.y, N)

    a, b = Model(), Model()
    for _ in range(3):
        a.step(2)
        b.step(1)
        a.once()
    assert Model.step.outcome == "replayed" and Model.once.outcome == "replayed"
    np.testing.assert_array_equal(a.y.numpy(), np.full(N, 9, np.float32))
    np.testing.assert_array_equal(b.y.numpy(), np.full(N, 3, np.float32))


@pytest.mark.parametrize("memory", ["explicit", "managed"])
def test_arrays_made_with_contents_inside_a_recorded_body_are_its_scratch(memory):
    import asyncgpu as ag

    with ag.configure(backend="sim", memory=memory, sim_strategy="random"):
        _, add, inc = kernels(ag)
        x = ag.array(np.arange(N, dtype=np.float32))

        @ag.graph
        def step(x):
            ones = ag.ones(N, np.float32)                   # filled, not a host write
            table = ag.array(np.full(N, 2, np.float32))
            out, total = ag.zeros_like(x), ag.empty_like(x)
            add[1, N](x, ones, out, N)
            add[1, N](out, table, total, N)
            inc[1, N](total, N)
            return total

        for _ in range(3):
            got = step(x)
            np.testing.assert_array_equal(got.numpy(), np.arange(N, dtype=np.float32) + 4)
        assert step.outcome == "recorded"       # (new arrays every call: never replayed)


def test_recording_a_coroutine_or_generator_function_is_refused_with_the_fix(sim):
    ag = sim

    async def serve(x):
        return x

    def batches(x):
        yield x

    for fn in (serve, batches):
        with pytest.raises(TypeError, match="is a coroutine or generator function, whose body "
                                            "runs after the call returns"):
            ag.graph(fn)


def test_record_context_manager_replays_from_the_second_iteration(sim):
    ag = sim
    scale, add, inc = kernels(ag)
    x = ag.zeros(N, np.float32)
    seen = []
    for _ in range(4):
        with ag.record() as rec:
            inc[1, N](x, N)
            inc[1, N](x, N)
        seen.append(rec.outcome)
    assert seen == ["recorded", "replayed", "replayed", "replayed"]
    np.testing.assert_array_equal(x.numpy(), np.full(N, 8, np.float32))


def test_graph_is_launched_once_per_call_not_per_kernel(sim):
    ag = sim
    scale, add, inc = kernels(ag)
    x = ag.zeros(N, np.float32)

    @ag.graph
    def many():
        for _ in range(10):
            inc[1, N](x, N)

    many()
    k = ag.statistics().kernels
    many()
    many()
    assert ag.statistics().kernels == k     # replays launch no individual kernels
    np.testing.assert_array_equal(x.numpy(), np.full(N, 30, np.float32))


def test_cache_is_bounded_and_destroys_evicted_graphs():
    import asyncgpu as ag
    from asyncgpu.runtime.current import current_runtime

    with ag.configure(backend="sim", sim_seed=1, graph_cache=2):
        scale, add, inc = kernels(ag)
        arrays = [ag.zeros(N, np.float32) for _ in range(3)]

        @ag.graph
        def bump(a):
            inc[1, N](a, N)

        for a in arrays:            # three keys, each captured on its second call
            bump(a)
            bump(a)
        cache = current_runtime().graphs
        assert len(cache.entries) == 2
        frozen = captured_graphs()
        assert len(frozen) == 2 and all(not f.graph.destroyed for f in frozen)
        bump(arrays[0])             # evicted: recorded again
        assert all(f.graph.destroyed for f in frozen[:1])
        assert bump.outcome == "recorded"
        for a in arrays:
            np.testing.assert_array_equal(a.numpy(), np.full(N, 3 if a is arrays[0] else 2))
        bump.clear()
        assert not cache.entries


def test_a_remembered_run_whose_graph_was_evicted_records_again():
    """A recorder whose memo outlives its key in the cache (another recorder's new keys
    evicted it) must not replay the destroyed graph: its next run is keyed and recorded."""
    import asyncgpu as ag

    with ag.configure(backend="sim", sim_seed=2, graph_cache=2):
        scale, add, inc = kernels(ag)
        x = ag.zeros(N, np.float32)
        others = [ag.zeros(N, np.float32) for _ in range(3)]

        @ag.graph
        def steady():
            inc[1, N](x, N)

        @ag.graph
        def changing(a):
            inc[1, N](a, N)

        steady()
        steady()
        steady()
        assert steady.outcome == "replayed"
        frozen = captured_graphs(steady)
        for a in others:            # a new key per call: the steady key is evicted
            changing(a)
        assert all(f.graph.destroyed for f in frozen)
        steady()
        assert steady.outcome == "recorded"
        steady()
        assert steady.outcome == "replayed"
        np.testing.assert_array_equal(x.numpy(), np.full(N, 5, np.float32))
        steady.clear()
        changing.clear()


def test_dropped_edge_in_the_schedule_is_caught(sim, monkeypatch):
    """A broken stream schedule (a cross-stream wait dropped) raises RaceError at capture."""
    ag = sim
    from asyncgpu.recorder import schedule as _graph_schedule

    scale, add, inc = kernels(ag)
    x = ag.array(np.ones(N, np.float32))
    y, z, w = (ag.empty(N, np.float32) for _ in range(3))

    def step():
        scale[1, N](x, y, np.float32(2), N)
        scale[1, N](x, z, np.float32(3), N)
        add[1, N](y, z, w, N)

    monkeypatch.setattr(_graph_schedule, "cross_waits",
                        lambda preds, lanes, order: [[] for _ in preds])
    g = ag.graph(step)
    g()
    with pytest.raises(RaceError):
        g()


# -- random programs: recorded functions called repeatedly, host writes between calls --------
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import programs  # noqa: E402


def _run_rounds(ag, body, writes, init, rounds, recorded):
    """Call ``body`` (a list of launches) ``rounds`` times, host writes and reads between."""
    allocs = [ag.array(init[i]) for i in range(3)]
    views = programs.views(allocs)

    def step():
        for launch in body:
            programs.launch(ag, launch, views)

    fn = ag.graph(step) if recorded else step
    reads, outcomes = [], []
    for r in range(rounds):
        for w in writes:
            views[w.operand][...] = w.value + r
        fn()
        outcomes.append(getattr(fn, "outcome", None))
        if r == 2:      # dynamic work between replays: ordered with the graphs both ways
            launch = body[0]
            programs.launch(ag, launch, views, c=launch.c + 1)
        if r % 2:
            reads.append(np.asarray(views[body[-1].args[0][0]]))
    final = [a.numpy() for a in allocs]
    return reads, final, outcomes


def _launches():
    operand = st.sampled_from(sorted(programs.OPERANDS))
    arg = st.tuples(operand, st.sampled_from(programs.MODES))
    return st.builds(programs.Launch,
                     st.lists(arg, min_size=1, max_size=3).map(tuple).filter(programs.valid_launch),
                     st.integers(1, 1000).map(float))


@pytest.mark.parametrize("strategy,streams,order,dependency", [
    ("random", "opara", "topological", "with-const"), ("pct", "nimble", "opara", "with-const"),
    ("reverse", "opara", "opara", "with-const"), ("starve", "nimble", "topological", "no-const"),
    ("random", "opara", "ios", "with-const"), ("starve", "nimble", "ios", "no-const"),
])
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=st.lists(_launches(), min_size=1, max_size=8),
       writes=st.lists(st.builds(programs.HostWrite, st.sampled_from(sorted(programs.OPERANDS)),
                                 st.integers(-50, 50).map(float)), max_size=2))
def test_recorded_random_programs_equal_serial(strategy, streams, order, dependency, body,
                                              writes):
    import asyncgpu as ag

    init = programs.initial()
    with ag.configure(backend="sim", execution="sync", sim_seed=0, sim_strategy="eager"):
        reads0, final0, _ = _run_rounds(ag, body, writes, init, 4, recorded=False)
    with ag.configure(backend="sim", sim_seed=3, sim_strategy=strategy, graph_streams=streams,
                      graph_order=order, dependency=dependency):
        reads, final, outcomes = _run_rounds(ag, body, writes, init, 4, recorded=True)
    assert outcomes == ["recorded", "replayed", "replayed", "replayed"]
    for a, b in zip(reads + final, reads0 + final0):
        assert a.tolist() == b.tolist()


def test_traces_show_replayed_graphs_as_nodes(sim):
    ag = sim
    scale, add, inc = kernels(ag)
    x = ag.zeros(N, np.float32)

    @ag.graph
    def f():
        inc[1, N](x, N)
        inc[1, N](x, N)

    with ag.trace() as t:               # the capture inside the trace bypasses its timing
        for _ in range(3):
            f()
        assert float(x[0]) == 6.0
    graphs = [n for n in t.nodes if n.kind == "graph"]
    assert len(graphs) == 2 and all(n.name.endswith(".f") for n in graphs)
    assert all(n.stream is not None and n.end_s >= n.start_s for n in graphs)
    assert graphs[1].parents and graphs[1].parents[0][1] == "WAW"


@pytest.mark.parametrize("order", ["topological", "opara", "ios"])
@pytest.mark.parametrize("limit", [1, 2, 3])
def test_graph_max_streams_folds_lanes_and_keeps_results(order, limit):
    import asyncgpu as ag

    with ag.configure(backend="sim", sim_seed=limit, graph_order=order,
                      graph_max_streams=limit):
        scale, add, inc = kernels(ag)
        xs = [ag.array(np.full(N, i, np.float32)) for i in range(6)]
        ys = [ag.empty(N, np.float32) for _ in range(6)]
        z = ag.empty(N, np.float32)

        @ag.graph
        def wide():
            for x, y in zip(xs, ys):
                scale[1, N](x, y, np.float32(2), N)       # six independent launches
            add[1, N](ys[0], ys[5], z, N)

        for i in range(3):
            xs[0][...] = i
            wide()
            np.testing.assert_array_equal(z.numpy(), np.full(N, 2 * i + 10, np.float32))
        assert wide.outcome == "replayed"
        frozen = captured_graphs()
        assert max(f.graph.lanes for f in frozen) <= limit + 1     # + the copy lane


def test_graph_max_streams_is_validated():
    from asyncgpu.core.config import Options

    with pytest.raises(ValueError, match="graph_max_streams"):
        Options(graph_max_streams=-1)


def _lanes_of_ten(ag, threads=256):
    """The streams of the captured graph of ten independent ``scale`` launches of ``threads``
    threads each (results checked), and the outputs."""
    scale, _, _ = kernels(ag)
    xs = [ag.array(np.full(N, i, np.float32)) for i in range(10)]
    ys = [ag.empty(N, np.float32) for _ in range(10)]

    @ag.graph
    def wide():
        for x, y in zip(xs, ys):
            scale[threads // 256, 256](x, y, np.float32(2), N)

    for _ in range(3):
        wide()
    (count,) = {f.lanes for f in captured_graphs(wide)}    # (all variants)
    wide.clear()
    return count, wide.outcome, ys


@pytest.mark.parametrize("order", ["topological", "opara"])
def test_short_independent_launches_are_folded_to_the_lane_budget(order):
    import asyncgpu as ag

    def lanes_of_ten(threads, cost):
        with ag.configure(backend="sim", graph_order=order, graph_lane_cost_us=cost):
            count, outcome, ys = _lanes_of_ten(ag, threads)
            assert outcome == "replayed"
            for i, y in enumerate(ys):
                np.testing.assert_array_equal(y.numpy(), np.full(N, 2 * i, np.float32))
            return count

    # the simulator's cost model: a small launch takes about 2 us, so at 1 us per lane five
    # lanes (5 + 4 us) beat ten (10 + 2 us); launches of 2**26 threads (134 us each) keep ten
    assert lanes_of_ten(256, 1.0) == 5
    assert lanes_of_ten(256, 0.0) == 10
    assert lanes_of_ten(1 << 26, 1.0) == 10


def test_graph_lane_cost_is_validated_and_read_from_the_environment():
    from asyncgpu.core.config import Options, options_from_env

    for bad in (-1.0, float("inf"), "1", True):
        with pytest.raises(ValueError, match="graph_lane_cost_us"):
            Options(graph_lane_cost_us=bad)
    assert Options().graph_lane_cost_us is None             # measured on the GPU
    env = "ASYNCGPU_GRAPH_LANE_COST_US"
    assert options_from_env({env: "auto"}).graph_lane_cost_us is None
    assert options_from_env({env: "2.5"}).graph_lane_cost_us == 2.5
    with pytest.raises(ValueError):
        options_from_env({env: "fast"})


def test_the_lane_cost_is_measured_by_the_backend_when_not_set():
    """``graph_lane_cost_us=None`` asks the backend (``lane_cost_s``, measured once on the GPU):
    a backend that says lanes are free keeps all ten; one that says they are dear folds
    further than the 1 us default's five."""
    import asyncgpu as ag
    from asyncgpu.recorder import capture as _graph_capture
    from asyncgpu.runtime.current import current_runtime

    def lanes_with(cost_s):
        with ag.configure(backend="sim", graph_lane_cost_us=None):
            be = _graph_capture._capture_backend(current_runtime().backend)
            be.inner.lane_cost_s = lambda: cost_s
            try:
                return _lanes_of_ten(ag)[0]
            finally:
                del be.inner.lane_cost_s

    assert lanes_with(0.0) == 10
    assert lanes_with(4e-6) < 5


def _run_script(tmp_path, name, text):
    """``text`` run as the script ``name`` by a Python of its own on ``sim``."""
    import os
    import subprocess
    import sys

    script = tmp_path / name
    script.write_text(text)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ, PYTHONPATH=root,
                                                ASYNCGPU_BACKEND="sim"))


def test_a_program_that_recorded_a_kernel_exits_quietly(tmp_path):
    """The arrays a recording keeps are freed as the interpreter shuts down, when the
    package's globals are gone: their compiled finalizers' errors were printed through a
    torn-down sys.excepthook ("Error in sys.excepthook")."""
    done = _run_script(tmp_path, "quiet.py", (
        "import numpy as np, asyncgpu as ag\n"
        "from numba import cuda\n"
        "@ag.kernel()\n"
        "@cuda.jit\n"
        "def inc(x, n):\n"
        "    i = cuda.grid(1)\n"
        "    if i < n:\n"
        "        x[i] += 1\n"
        "x = ag.array(np.zeros(64, np.float32))\n"
        "with ag.record():\n"
        "    inc[1, 64](x, 64)\n"
        "print(x[0])\n"))
    assert done.returncode == 0 and done.stdout == "1.0\n", done.stderr
    assert "Error in sys.excepthook" not in done.stderr, done.stderr


def test_a_record_block_at_a_scripts_top_level_is_keyed_and_named_by_its_line(tmp_path):
    # (compiled, record() has no frame of its own: the caller's line must still be found)
    done = _run_script(tmp_path, "top.py", (
        "import numpy as np, asyncgpu as ag\n"
        "x = ag.zeros(4, np.float32)\n"
        "for i in range(3):\n"
        "    with ag.record() as rec:\n"
        "        y = x + 1\n"
        "    print(rec.outcome)\n"
        "try:\n"
        "    with ag.record():\n"
        "        x[0] = 1\n"
        "except ag.RecordingError as exc:\n"
        "    print(exc)\n"))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[:3] == ["recorded", "replayed", "replayed"]
    assert "record at top.py:8" in lines[3]


def test_ctrl_c_as_a_recorded_functions_capture_begins_leaves_no_capture_open(sim, monkeypatch):
    """A Ctrl-C landing as the capture of a recorded function's graph had begun left the stream
    capture open: every later synchronize, at exit too, raised CaptureError. Now the capture is
    ended, the call's launches run eagerly, and later work and reads go on."""
    from asyncgpu.runtime.current import current_runtime

    ag = sim
    _, _, inc = kernels(ag)
    x = ag.zeros(N, np.float32)

    @ag.graph
    def step(x):
        inc[1, N](x, N)

    step(x)                                 # recorded: the next call captures
    backend = current_runtime().backend.inner
    begin = backend.begin_capture

    def interrupted(stream):
        monkeypatch.setattr(backend, "begin_capture", begin)
        begin(stream)
        raise KeyboardInterrupt             # (as the call returns: the capture is open)

    monkeypatch.setattr(backend, "begin_capture", interrupted)
    with pytest.raises(KeyboardInterrupt):
        step(x)
    ag.synchronize()
    np.testing.assert_array_equal(x.numpy(), np.full(N, 2, np.float32))
    step(x)
    np.testing.assert_array_equal((ag.ones(3) * 2).numpy(), np.full(3, 2.0))
    ag.synchronize()
    np.testing.assert_array_equal(x.numpy(), np.full(N, 3, np.float32))


#: The recorder's entry points, the runtime lock's acquire and the recording hook: where a
#: Ctrl-C may land during a recorded call (the recording itself is entered and left there).
_ENTRY_MODULES = ("recorder/entry", "runtime/finalizers", "runtime/recording_hook")


def _ctrl_c_at(at, files):
    """A profile function raising KeyboardInterrupt at the ``at``-th place in ``files`` where
    Python delivers a Ctrl-C: as a function begins and after each call of C code. Its
    ``where`` names the place it raised at; ``seen`` counts the places (``at`` None: only
    count)."""
    def profile(frame, event, arg):
        if (event == "call" or event == "c_return") and frame.f_code.co_filename in files:
            profile.seen += 1
            if profile.seen == at:
                profile.where = (event, frame.f_code.co_name, frame.f_lineno)
                raise KeyboardInterrupt
    profile.seen, profile.where = 0, None
    return profile


def _interrupted_recorded_call(form, calls, at):
    """Run the recorded call ``calls`` times, then once more with a Ctrl-C at its ``at``-th
    place (see :func:`_ctrl_c_at`); check the runtime, and return the profile function."""
    import gc
    import os
    import sys

    import asyncgpu as ag
    from asyncgpu.runtime.current import current_runtime
    from asyncgpu.recorder.entry import Recorder
    from asyncgpu.runtime.recording_hook import recording_of, this_thread

    package = os.path.dirname(ag.__file__)
    files = {os.path.join(package, m + ".py") for m in _ENTRY_MODULES}
    with ag.configure(backend="sim", sim_seed=at or 0):
        _, _, inc = kernels(ag)
        x = ag.zeros(N, np.float32)

        @ag.graph
        def step(x):
            inc[1, N](x, N)

        recorder = ag.record("interrupted block")

        def block():
            with recorder:
                inc[1, N](x, N)

        call = step if form == "graph" else block
        args = (x,) if form == "graph" else ()
        for _ in range(calls):
            call(*args)
        profile = _ctrl_c_at(at, files)
        gc.disable()        # (a collection's callbacks would shift the places between runs)
        sys.setprofile(profile)
        try:
            call(*args)
        except KeyboardInterrupt:
            pass
        finally:
            sys.setprofile(None)
            gc.enable()
        if at is None:
            return profile
        where = (calls, profile.where)
        if where[1] == ("call", "__exit__", Recorder.__exit__.__code__.co_firstlineno):
            # (as __exit__ began: the block is still entered, as any block is whose __exit__
            # Python's check for a Ctrl-C interrupted; leaving it again ends it)
            recorder.__exit__(None, None, None)
        rt = current_runtime()
        assert not rt._lock._is_owned(), where
        assert recording_of(rt, this_thread()) is None, where
        ag.synchronize()
        got = x.numpy()[0]
        assert got in (calls, calls + 1), where      # (the call happened, or it did not)
        inc[1, N](x, N)                              # (issued, not deferred into a recording)
        call(*args)
        ag.synchronize()
        np.testing.assert_array_equal(x.numpy(), np.full(N, got + 2), err_msg=str(where))
        return profile


@pytest.mark.pure
@pytest.mark.parametrize("form", ["graph", "record"])
def test_a_ctrl_c_anywhere_in_a_recorded_call_leaves_no_recording_open(form):
    """A Ctrl-C landing at the runtime lock's acquire as a recorded call ended (before the
    recording stopped), or as its recording had started (before the caller's ``try``), left
    the thread recording for good: its later launches were deferred into the orphaned
    recording, and every synchronize raised RecordingError. Now, wherever it lands, the
    recording ends (its launches issued eagerly, as on any failure) and later work goes on.
    (As ``__exit__`` of a ``record()`` block begins, the block is still entered: Python calls
    it once, and checks for a Ctrl-C as any function begins.)"""
    for calls in range(3):          # recorded, captured, replayed
        points = _interrupted_recorded_call(form, calls, None).seen
        assert points > 10, points
        for at in range(1, points + 1):
            _interrupted_recorded_call(form, calls, at)

