"""The benchmark suite at the tiny scale on the sim backend: checks pass in every mode, and each
workload's DAG has the expected shape (nodes, edges, streams)."""

from __future__ import annotations

import pytest

from benchmarks import harness
from benchmarks.workloads import WORKLOADS


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_workload_passes_in_every_mode(name):
    import asyncgpu as ag

    with ag.configure(backend="sim", sim_seed=11, sim_strategy="random"):
        results = harness.bench_workload(ag, WORKLOADS[name], "tiny", harness.MODES, [32], 2,
                                         warmup=0, iterations=1, inputs="streaming")
        results += harness.bench_workload(ag, WORKLOADS[name], "tiny", ("parallel",), [32], 2,
                                          warmup=0, iterations=1, inputs="resident")
    bad = [(r.mode, r.inputs, r.message) for r in results if not r.ok]
    assert not bad


#: The workloads run under managed memory too: between them every way the workloads touch
#: memory from the host (whole-array rewrites, a scalar read, reads of row and prefix slices of
#: 2D and 1D arrays, host writes to scalars between the launches of one run, and with it
#: several graphs per cudagraph run and a workload's own static runner), views (IMG's flat
#: views for its 1D kernels), 1D and 2D launches and from 2 to 10 streams. ML and DL add no
#: other kind of access (whole-array and scalar reads, 2D and 3D arrays written whole) and
#: were the costliest on the simulator after HITS; the default model runs them above.
MANAGED_WORKLOADS = ("vec", "bs", "img", "hits")


@pytest.mark.slow
@pytest.mark.parametrize("name", MANAGED_WORKLOADS)
def test_workload_passes_in_every_mode_with_managed_memory(name):
    """The other memory model (explicit is the default, which the test above runs)."""
    import asyncgpu as ag

    with ag.configure(backend="sim", sim_seed=12, sim_strategy="random", memory="managed"):
        results = harness.bench_workload(ag, WORKLOADS[name], "tiny", harness.MODES, [32], 2,
                                         warmup=0, iterations=1, inputs="streaming")
    bad = [(r.mode, r.inputs, r.message) for r in results if not r.ok]
    assert not bad


@pytest.mark.usefixtures("managed_memory")      # the paper's DAGs: no copy nodes
@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_workload_dag_shape(name):
    import asyncgpu as ag

    cls = WORKLOADS[name]
    nodes = harness.record_run(ag, cls, seed=5)
    edges = {(p.id, n.id) for n in nodes for p, _, _ in n.edges}
    streams = {n.stream.index for n in nodes}
    expected = cls.expected_dag
    assert len(nodes) == expected["nodes"]
    assert len(edges) == expected["edges"]
    assert len(streams) == expected["streams"]


#: Graphs per run in the cudagraph mode: one per stretch of device work between host syncs.
GRAPHS = {"vec": 1, "bs": 1, "img": 1, "ml": 1, "hits": 5, "dl": 1}


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_cudagraph_captures_every_kernel_of_handopt(name):
    import asyncgpu as ag
    from asyncgpu.runtime.current import current_runtime

    from benchmarks.cudagraph import GraphHand

    cls = WORKLOADS[name]
    with ag.configure(backend="sim", sim_seed=3, sim_strategy="random"):
        wl = cls(ag, "tiny")
        hand = GraphHand(current_runtime())
        block = (8, 8) if cls.two_d else 32
        hand.capture(wl.run_handopt, block, 2)
        assert len(hand.graphs) == GRAPHS[name]
        assert sum(g.kernels for g in hand.graphs) == cls.expected_dag["nodes"]
        # every segment's branches wait for their own prefetches through external waits
        assert all(any(kind == "xwait" for kind, _, _ in g.ops) for g in hand.graphs)
        hand.release()


def test_cudagraph_replay_refuses_a_changed_schedule():
    import asyncgpu as ag
    from asyncgpu.core.errors import CaptureError
    from asyncgpu.runtime.current import current_runtime

    from benchmarks.cudagraph import GraphHand
    from benchmarks.workloads import Vec

    with ag.configure(backend="sim", sim_seed=3, sim_strategy="random"):
        wl = Vec(ag, "tiny")
        wl.reset()
        hand = GraphHand(current_runtime())
        hand.capture(wl.run_handopt, 32, 2)
        with pytest.raises(CaptureError, match="differs from the one captured"):
            hand.replay(wl.run_handopt, 64, 2)
        ag.synchronize()
        wl.reset()
        ag.synchronize()
        ok, message = wl.check(hand.replay(wl.run_handopt, 32, 2))
        assert ok, message
        hand.release()


@pytest.mark.parametrize("memory", ["managed", "explicit"])
@pytest.mark.parametrize("name", ["vec", "img"])
def test_cudagraph_with_joined_prefetches_instead_of_external_waits(name, memory):
    import asyncgpu as ag
    from asyncgpu.runtime.current import current_runtime

    from benchmarks.cudagraph import GraphHand

    cls = WORKLOADS[name]
    with ag.configure(backend="sim", sim_seed=5, sim_strategy="random", memory=memory):
        wl = cls(ag, "tiny")
        hand = GraphHand(current_runtime(), external_waits=False)
        block = (8, 8) if cls.two_d else 32
        hand.capture(wl.run_handopt, block, 2)
        assert not any(kind == "xwait" for g in hand.graphs for kind, _, _ in g.ops)
        for _ in range(2):
            wl.reset()
            ag.synchronize()
            ok, message = wl.check(hand.replay(wl.run_handopt, block, 2))
            assert ok, message
        hand.release()


def test_bench_both_memory_models_side_by_side(capsys):
    from asyncgpu.__main__ import main

    assert main(["bench", "vec", "--memory", "both", "--modes", "serial,parallel",
                 "--iterations", "1", "--warmup", "0"]) == 0
    out = capsys.readouterr().out
    assert "managed" in out and "explicit" in out
    assert "explicit vs managed" not in out      # simulator times: no speed comparison


@pytest.mark.parametrize("inputs", ["streaming", "resident"])
def test_rounds_interleave_the_modes_and_keep_every_iteration(inputs, monkeypatch):
    """``rounds`` splits each mode's timed iterations into blocks taken in turn (the order
    rotated each round); every mode still gets all its iterations and passes its checks."""
    import asyncgpu as ag

    blocks = []
    real = harness.ModeRun.iterations

    def spy(self, count, warmup=0):
        blocks.append((self.mode, count))
        return real(self, count, warmup)

    monkeypatch.setattr(harness.ModeRun, "iterations", spy)
    modes = ("serial", "parallel", "cudagraph", "recorded_static")
    with ag.configure(backend="sim", sim_seed=3, sim_strategy="eager"):
        results = harness.bench_workload(ag, WORKLOADS["vec"], "tiny", modes, [32], 2,
                                         warmup=0, iterations=5, inputs=inputs, rounds=3)
    assert [(r.mode, r.ok, len(r.times_s)) for r in results] == [(m, True, 5) for m in modes]
    assert [m for m, _ in blocks] == [*modes, *modes[1:], modes[0], *modes[2:], *modes[:2]]
    assert [n for _, n in blocks] == [2] * 4 + [2] * 4 + [1] * 4


def test_a_mode_that_fails_in_a_round_fails_alone(monkeypatch):
    import asyncgpu as ag

    real = harness.ModeRun._once

    def flaky(self):
        if self.mode == "parallel":
            raise RuntimeError("injected")
        return real(self)

    monkeypatch.setattr(harness.ModeRun, "_once", flaky)
    with ag.configure(backend="sim", sim_seed=3, sim_strategy="eager"):
        results = harness.bench_workload(ag, WORKLOADS["vec"], "tiny", ("serial", "parallel",
                                         "handopt"), [32], 2, warmup=0, iterations=2,
                                         inputs="streaming", rounds=2)
    assert [(r.mode, r.ok) for r in results] == [("serial", True), ("parallel", False),
                                                 ("handopt", True)]
    assert "injected" in results[1].message


def test_a_block_the_kernel_cannot_run_is_skipped_not_failed(monkeypatch, capsys):
    """On a GPU a kernel whose registers do not fit a 1024-thread block is refused before
    enqueue (``BlockTooLargeError``): the suite reports that cell SKIP with the reason and
    still exits 0; any other error stays a FAIL."""
    import asyncgpu as ag
    from asyncgpu.__main__ import main

    real = harness.ModeRun._once

    def refuse_1024(self):
        if self.block == 1024:
            raise ag.BlockTooLargeError("kernel 'k': a block of 1024 threads is more than "
                                        "this kernel can run; at most 512 threads per block")
        return real(self)

    monkeypatch.setattr(harness.ModeRun, "_once", refuse_1024)
    assert main(["bench", "vec", "--scale", "tiny", "--block-sizes", "32,1024", "--modes",
                 "serial,parallel", "--iterations", "1", "--warmup", "0", "--no-bounds"]) == 0
    out = capsys.readouterr().out
    assert "SKIP vec block 1024: serial: BlockTooLargeError" in out
    assert "PASS" in out and "FAIL" not in out

    def broken(self):
        raise RuntimeError("injected")

    monkeypatch.setattr(harness.ModeRun, "_once", broken)
    assert main(["bench", "vec", "--scale", "tiny", "--block-sizes", "32", "--modes",
                 "serial", "--iterations", "1", "--warmup", "0", "--no-bounds"]) == 1


@pytest.mark.parametrize("blocks, threads", [(1, 64), (2, 64), (2, 8), (1, 20)])
def test_ml_standardization_covers_full_batches_the_tail_and_constant_columns(sim, blocks,
                                                                              threads):
    """``rr_1`` sums rows in int32 batches of ``UNROLL`` with unsigned indices: the rows after
    the last full batch, a feature past the first warp (or past the grid's threads, with one
    block), and a constant column (standard deviation 0, divided by 1) must all come out as
    NumPy's population standardization, with blocks of fewer threads than a warp too."""
    import numpy as np

    from kernels import ml as K

    ag = sim
    n, f = 2 * K.UNROLL + 5, 40
    x = np.random.default_rng(3).integers(0, 10, (n, f), dtype=np.int32)
    x[:, 7] = 4
    mean, std = x.mean(axis=0), x.std(axis=0)
    want = (x - mean) / np.where(std > 0, std, 1.0)
    rr_1 = ag.kernel(K.rr_1, **K.ANNOTATIONS["rr_1"])
    z = ag.empty((n, f), np.float32)
    rr_1[blocks, threads](ag.array(x), z)
    np.testing.assert_allclose(z.numpy(), want, rtol=0, atol=1e-5)



def test_ml_kernels_declared_element_wise_give_the_same_scores_in_chunks_and_pieces(
        chunk_always):
    """ML's row kernels are declared element-wise (``nb_1`` and ``rr_2`` read their weights
    whole, ``broadcast``): a launch cut in chunks (its score matrices current on the host) or
    in a tenant's pieces must compute exactly what the whole launch does."""
    import numpy as np

    import asyncgpu as ag
    from kernels import ml as K

    splittable = [n for n, a in K.ANNOTATIONS.items() if a.get("elementwise")]
    assert {"nb_1", "rr_2", "softmax", "argmax"} <= set(splittable)

    def scores(copy_chunks, split=None):
        with ag.configure(backend="sim", sim_seed=4, sim_strategy="random",
                          copy_chunks=copy_chunks):
            ml = WORKLOADS["ml"](ag, "tiny")
            ml.reset()
            before = ag.statistics().kernels
            with ag.tenant(f"ml-{copy_chunks}-{bool(split)}", split=split):
                labels = ml.run(32, 2)
            launches = ag.statistics().kernels - before
            return ml.r1.numpy(), ml.r2.numpy(), np.asarray(labels), launches

    whole = scores(1)
    for got in (scores(4), scores(1, dict.fromkeys(splittable, 3))):
        for a, b in zip(got[:3], whole[:3]):
            np.testing.assert_array_equal(a, b)
        assert got[3] > whole[3] == 10             # (cut: more launches than ML's ten)


class SideWork:
    """A workload whose host read depends on part of its device work only: ``run`` squares x
    into x1 and y into y1 on another stream, and reads x1 alone (as a read of one chunk of a
    chunked array does not wait for the other chunks)."""

    name = "side"
    two_d = False

    def __init__(self, ag, scale, seed=0):
        import numpy as np

        from benchmarks import kernel_module

        K = kernel_module("vec")
        self.n = 64
        self.x, self.y, self.x1, self.y1 = (ag.empty(self.n, np.float32) for _ in range(4))
        self.k_square = ag.kernel(K.square, **K.ANNOTATIONS["square"])

    def reset(self):
        self.x[...] = 3.0
        self.y[...] = 2.0

    def run_device(self, block, num_blocks):
        self.k_square[num_blocks, block](self.x, self.x1, self.n)
        for _ in range(3):
            self.k_square[num_blocks, block](self.y, self.y1, self.n)

    def read(self):
        return float(self.x1[0])

    def run(self, block, num_blocks):
        self.run_device(block, num_blocks)
        return self.read()

    def run_handopt(self, h, block, num_blocks):
        s0, s1 = h.stream(0), h.stream(1)
        h.prefetch(self.x, s0)
        h.prefetch(self.y, s1)
        h.launch(self.k_square, num_blocks, block, s0, self.x, self.x1, self.n)
        for _ in range(3):
            h.launch(self.k_square, num_blocks, block, s1, self.y, self.y1, self.n)
        h.sync()
        return float(self.x1[0])

    def check(self, result):
        return result == 9.0, f"x1[0] = {result}"


@pytest.mark.parametrize("memory", ["explicit", "managed"])
def test_a_timed_iteration_ends_with_its_device_work_complete(memory, monkeypatch):
    """Every mode's timed region ends once the iteration's device work is done, not as soon as
    the host has its values while work they do not depend on is still queued (that work would
    be paid inside the next iteration's untimed reset, and a mode could be timed below the
    bounds). The ``lazy`` strategy runs only what the host waits for (and a random choice of
    other enabled steps), so work left out of the timing stays queued."""
    import asyncgpu as ag
    from asyncgpu.runtime.current import current_runtime

    def queued():
        be = current_runtime().backend
        be = getattr(be, "inner", be)
        return [op.label for s in be.streams for op in s.ops]

    ends = []
    timing = [None]
    clock = harness._clock

    def watch():
        if timing[0] is not None:           # the end of a timed region
            ends.append((timing[0], queued()))
            timing[0] = None
        else:
            timing[0] = mode[0]
        return clock()

    mode = [None]
    real = harness.ModeRun.iterations

    def iterations(self, count, warmup=0):
        mode[0] = self.mode
        return real(self, count, warmup)

    monkeypatch.setattr(harness, "_clock", watch)
    monkeypatch.setattr(harness.ModeRun, "iterations", iterations)
    with ag.configure(backend="sim", sim_seed=4, sim_strategy="lazy", memory=memory):
        results = harness.bench_workload(ag, SideWork, "tiny", harness.MODES, [32], 2,
                                         warmup=1, iterations=2, inputs="streaming")
    assert [(r.mode, r.ok) for r in results] == [(m, True) for m in harness.MODES]
    assert [m for m, _ in ends] == [m for m in harness.MODES for _ in range(3)]
    assert [(m, left) for m, left in ends if left] == []


@pytest.mark.slow
def test_the_multigpu_benchmark_checks_every_run_on_virtual_devices():
    import asyncgpu as ag
    from benchmarks import multigpu

    with ag.configure(backend="sim"):
        result = multigpu.measure(ag, [1, 2], "tiny", iterations=1, warmup=0, on_gpu=False,
                                  workloads=("bs", "vec"))
    rows = result["rows"]
    assert {(r["workload"], r["inputs"], r["devices"]) for r in rows} == {
        (w, i, d) for w in ("bs", "vec") for i in ("resident", "streaming") for d in (1, 2)}
    two = [r for r in rows if r["devices"] == 2]
    assert all(set(r["placed"]) == {0, 1} for r in two)      # both devices got work
    assert {r["policy"] for r in result["policies"]} == {
        "round-robin", "stream-aware", "min-transfer-size", "min-min", "min-max"}
    # the chunks' arrays are made on their devices: the default policy needs no peer copy
    assert all(r["copies_peer"] == 0 for r in two if r["workload"] == "vec")


def test_the_row_partitioned_multigpu_workloads_are_right_on_virtual_devices():
    import asyncgpu as ag
    from benchmarks import multigpu

    with ag.configure(backend="sim"):
        result = multigpu.measure(ag, [2], "tiny", iterations=1, warmup=0, on_gpu=False,
                                  policies=False, workloads=("ml", "mv", "cg"))
    rows = {(r["workload"], r["devices"]): r for r in result["rows"]}
    assert set(rows) == {(w, 2) for w in ("ml", "mv", "cg")}
    assert all(set(rows[w, 2]["placed"]) == {0, 1} for w in ("ml", "mv", "cg"))
    # mv: x goes to the second device once; cg: the direction's parts every iteration
    assert rows["mv", 2]["copies_peer"] == 1
    assert rows["cg", 2]["copies_peer"] > 3 * multigpu.multigpu_work.CG_PARTS
    assert rows["ml", 2]["copies_peer"] > 0     # the column sums meet on one device
