"""Kernels split by their grid (``grid_offset=("first", "total")``) on the simulator: a tenant's
or a regulation plan's split launches consecutive block ranges one after another, each with
``first`` raised by its first block, and the result equals the whole launch's and NumPy's; bad
declarations and bad ``first``/``total`` arguments are refused by name before anything is
enqueued."""

from __future__ import annotations

import numpy as np
import programs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from numba import cuda, float64

import asyncgpu as ag
from asyncgpu.testing.regulation import profiled_as

ROWS, COLS = 37, 6
N = 1000
THREADS = 8


# -- the kernels: none of them element-wise -------------------------------------------------------
def rows(x, y, first, total):
    """A grid-stride loop over rows: block b of the grid does rows b, b + total, ... (each row
    also reads the row above it: not element-wise along axis 0)."""
    for r in range(cuda.blockIdx.x + first, x.shape[0], total):
        for c in range(cuda.threadIdx.x, x.shape[1], cuda.blockDim.x):
            above = x[r - 1, c] if r > 0 else 0.0
            y[r, c] = 2.0 * x[r, c] + above + r


def rows_numpy(x):
    above = np.vstack([np.zeros((1, x.shape[1])), x[:-1]])
    return 2.0 * x + above + np.arange(x.shape[0])[:, None]


def block_sums(x, out, n, first, total):
    """A reduction into per-block outputs: block b sums the elements of the chunks b,
    b + total, ... of ``blockDim.x`` elements (a grid-stride loop), into ``out[b]``."""
    partial = cuda.shared.array(THREADS, float64)
    b = cuda.blockIdx.x + first
    t = cuda.threadIdx.x
    acc = 0.0
    for i in range(b * cuda.blockDim.x + t, n, total * cuda.blockDim.x):
        acc += x[i]
    partial[t] = acc
    cuda.syncthreads()
    if t == 0:
        s = 0.0
        for j in range(cuda.blockDim.x):
            s += partial[j]
        out[b] = s


def block_sums_numpy(x, blocks):
    out = np.zeros(blocks)
    for i, v in enumerate(x):
        out[(i // THREADS) % blocks] += v
    return out


def firsts(out, first, total):
    """Each block writes the ``first`` its launch was given (the piece it belongs to)."""
    if cuda.threadIdx.x == 0:
        out[cuda.blockIdx.x + first] = first + 1000 * total


ROWS_C = r"""
extern "C" __global__ void rows_c(const double* x, double* y, int nrows, int ncols,
                                  int first, int total) {
    for (int r = blockIdx.x + first; r < nrows; r += total)
        for (int c = threadIdx.x; c < ncols; c += blockDim.x)
            y[r * ncols + c] = 2.0 * x[r * ncols + c] + (r > 0 ? x[(r - 1) * ncols + c] : 0.0)
                               + r;
}
"""


def rows_twin(x, y, nrows, ncols, first, total):
    """The Numba twin of ``rows_c`` (the sim backend runs it block by block on the grid)."""
    for r in range(cuda.blockIdx.x + first, nrows, total):
        for c in range(cuda.threadIdx.x, ncols, cuda.blockDim.x):
            above = x[(r - 1) * ncols + c] if r > 0 else 0.0
            y[r * ncols + c] = 2.0 * x[r * ncols + c] + above + r


class Case:
    """One kernel with its inputs: ``launch(blocks)`` launches it whole on ``blocks`` blocks
    (first 0, total ``blocks``), ``result()`` reads its output, ``expected(blocks)`` is
    NumPy's."""

    def __init__(self, kind):
        rng = np.random.default_rng(7)
        self.kind = kind
        if kind == "block_sums":
            self.k = ag.kernel(const=["x"], out=["out"],
                               grid_offset=("first", "total"))(block_sums)
            self.host = rng.integers(-8, 8, N).astype(np.float64)
            self.x = ag.array(self.host)
            self.y = None
        else:
            self.host = rng.integers(-8, 8, (ROWS, COLS)).astype(np.float64)
            if kind == "rows":
                self.x = ag.array(self.host)
                self.k = ag.kernel(const=["x"], out=["y"], grid_offset=("first", "total"))(rows)
            else:               # (pointers: the rows flattened)
                self.x = ag.array(self.host.reshape(-1))
                self.k = ag.cuda_kernel(ROWS_C, "rows_c", sim=cuda.jit(rows_twin),
                                        grid_offset=("first", "total"))
            self.y = ag.empty_like(self.x)

    @property
    def name(self):
        return self.k.name

    def launch(self, blocks):
        if self.kind == "block_sums":
            self.y = ag.empty(blocks)
            self.k[blocks, THREADS](self.x, self.y, N, 0, blocks)
        elif self.kind == "rows":
            self.k[blocks, THREADS](self.x, self.y, 0, blocks)
        else:
            self.k[blocks, THREADS](self.x, self.y, ROWS, COLS, 0, blocks)

    def result(self):
        out = self.y.numpy().copy()
        return out.reshape(self.host.shape) if self.kind == "rows_c" else out

    def expected(self, blocks):
        if self.kind == "block_sums":
            return block_sums_numpy(self.host, blocks)
        return rows_numpy(self.host)


KINDS = ["rows", "block_sums", "rows_c"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("memory", ["explicit", "managed"])
@pytest.mark.parametrize("strategy", ["random", "reverse", "starve"])
def test_a_grid_offset_kernel_split_by_a_tenant_equals_the_whole_launch_and_numpy(
        kind, memory, strategy):
    with ag.configure(backend="sim", memory=memory, sim_strategy=strategy, sim_seed=3):
        case = Case(kind)
        blocks = 7                                  # pieces of 3, 2 and 2 blocks
        case.launch(blocks)
        whole = case.result()
        with ag.tenant(f"grid-{kind}-{memory}-{strategy}", split={case.name: 3}):
            case.launch(blocks)
        split = case.result()
        np.testing.assert_array_equal(split, whole)
        np.testing.assert_array_equal(split, case.expected(blocks))
        assert ag.tenants()[f"grid-{kind}-{memory}-{strategy}"].kernels == 3


def test_the_pieces_are_consecutive_block_ranges_in_order_on_one_stream():
    with ag.configure(backend="sim", sim_strategy="random", sim_seed=1):
        k = ag.kernel(out=["out"], grid_offset=("first", "total"))(firsts)
        out = ag.empty(7)
        with ag.instrument(programs.Edges()) as seen, \
                ag.tenant("grid-pieces", split={"firsts": 3}):
            k[7, 4](out, 0, 7)
        # blocks 0-2, 3-4, 5-6: each block saw its piece's first, and every piece the total
        assert out.numpy().tolist() == [7000.0] * 3 + [7003.0] * 2 + [7005.0] * 2
        pieces = [(n, reasons) for n, reasons in seen.kernels if n.name == "firsts"]
        assert [r.count("split") for _, r in pieces] == [0, 1, 1]      # each after the last
        assert len({n.stream.index for n, _ in pieces}) == 1


def test_more_pieces_than_blocks_give_one_block_each_and_one_block_runs_whole():
    with ag.configure(backend="sim", sim_seed=1):
        k = ag.kernel(out=["out"], grid_offset=("first", "total"))(firsts)
        out = ag.empty(3)
        one = ag.empty(1)
        with ag.instrument(programs.Edges()) as seen, \
                ag.tenant("grid-few-blocks", split={"firsts": 8}):
            k[3, 4](out, 0, 3)
            k[1, 4](one, 0, 1)
        assert out.numpy().tolist() == [3000.0, 3001.0, 3002.0]
        assert one.numpy().tolist() == [1000.0]
        assert [r.count("split") for _, r in seen.kernels] == [0, 1, 1, 0]


def test_a_whole_launch_passes_first_and_total_as_given():
    with ag.configure(backend="sim", sim_seed=1):
        k = ag.kernel(grid_offset=("first", "total"))(firsts)     # (writes part of out)
        out = ag.array(np.zeros(6))
        k[2, 4](out, 3, 6)                  # blocks 3 and 4 of a grid of 6, by the caller
        assert out.numpy().tolist() == [0.0, 0.0, 0.0, 6003.0, 6003.0, 0.0]


def test_the_first_piece_waits_for_the_tenants_pointer_and_the_rest_for_it():
    with ag.configure(backend="sim", sim_strategy="starve", sim_seed=2):
        case = Case("rows")
        other = ag.kernel(out=["out"], grid_offset=("first", "total"))(firsts)
        side = ag.empty(4)
        with ag.instrument(programs.Edges(from_kernels=True)) as seen:
            with ag.tenant("grid-pointed-at"):
                other[4, 4](side, 0, 4)
            with ag.tenant("grid-pointing", split={"rows": 2},
                           after={"*": ("grid-pointed-at", "*")}):
                case.launch(6)
        reasons = [r for n, r in seen.kernels if n.name == "rows"]
        assert [(r.count("pointer"), r.count("split")) for r in reasons] == [(1, 0), (0, 1)]
        np.testing.assert_array_equal(case.result(), rows_numpy(case.host))


def test_a_split_grid_offset_kernel_is_ordered_with_other_work_on_its_arrays():
    """Each piece has the whole launch's accesses: a reader of the output waits for every
    piece, and the pieces wait for the writer of the input."""
    with ag.configure(backend="sim", sim_strategy="reverse", sim_seed=4):
        case = Case("rows")
        double = ag.kernel(const=["x"], out=["y"], name="staging",
                           grid_offset=("first", "total"))(rows)
        staged = ag.empty_like(case.x)
        with ag.tenant("grid-ordered", split={"rows": 3}):
            double[5, THREADS](case.x, staged, 0, 5)        # (another name: whole)
            case.k[5, THREADS](staged, case.y, 0, 5)
            again = ag.empty_like(case.x)
            double[5, THREADS](case.y, again, 0, 5)
        assert np.array_equal(again.numpy(), rows_numpy(rows_numpy(rows_numpy(case.host))))


# -- grid-stride kernels: pieces on the whole grid -------------------------------------------------
def smooth(x, y, n, first, total):
    """A grid-stride loop over elements, each also reading the one before it (not
    element-wise): the same answer on a grid of any size."""
    start = (cuda.blockIdx.x + first) * cuda.blockDim.x + cuda.threadIdx.x
    for i in range(start, n, total * cuda.blockDim.x):
        y[i] = 2.0 * x[i] + (x[i - 1] if i > 0 else 0.0)


def smooth_numpy(x):
    return 2.0 * x + np.concatenate([[0.0], x[:-1]])


@pytest.mark.parametrize("blocks,pieces", [(1, 3), (4, 3), (7, 8)])
@pytest.mark.parametrize("strategy", ["random", "starve"])
def test_a_grid_stride_kernel_split_by_a_tenant_runs_every_piece_on_its_whole_grid(
        blocks, pieces, strategy):
    """Cut by block ranges, a launch whose grid the device holds at once would give pieces as
    long as the whole launch; a grid-stride kernel's pieces each run the whole grid over a
    part of the work, even a grid of one block, and give the whole launch's answer."""
    with ag.configure(backend="sim", sim_strategy=strategy, sim_seed=3):
        k = ag.kernel(const=["x"], out=["y"], grid_offset=("first", "total"),
                      grid_stride=True)(smooth)
        host = np.random.default_rng(5).integers(-8, 8, N).astype(np.float64)
        x, y = ag.array(host), ag.empty(N)
        name = f"stride-{blocks}-{pieces}-{strategy}"
        with ag.instrument(programs.Edges()) as seen, \
                ag.tenant(name, split={"smooth": pieces}):
            k[blocks, THREADS](x, y, N, 0, blocks)
        np.testing.assert_array_equal(y.numpy(), smooth_numpy(host))
        assert ag.tenants()[name].kernels == pieces
        assert [r.count("split") for _, r in seen.kernels] == [0] + [1] * (pieces - 1)


def test_a_grid_stride_pieces_are_parts_of_a_grid_as_many_times_larger():
    with ag.configure(backend="sim", sim_seed=1):
        k = ag.kernel(out=["out"], grid_offset=("first", "total"), grid_stride=True)(firsts)
        out = ag.empty(6)
        with ag.tenant("stride-firsts", split={"firsts": 3}):
            k[2, 4](out, 0, 2)
        # piece i: the launch's 2 blocks as blocks 2i and 2i + 1 of a grid of 6
        assert out.numpy().tolist() == [6000.0, 6000.0, 6002.0, 6002.0, 6004.0, 6004.0]


@pytest.mark.parametrize("int_type,pieces", [(np.int8, 6), (np.uint8, 12), (np.int16, 8)])
def test_a_grid_stride_launch_given_narrow_ints_is_cut_in_as_many_pieces_as_they_can_number(
        int_type, pieces):
    """total as an int8 cannot say a grid of 8 x 20 blocks: the launch is cut in as many
    pieces as the type numbers (6 x 20 <= 127; uint8 12 x 20 <= 255), or runs whole, and
    gives the whole launch's answer."""
    def smooth_narrow(x, y, n, first, total):
        # (smooth's loop with the index math in 64 bits)
        step = np.int64(total) * cuda.blockDim.x
        start = (cuda.blockIdx.x + np.int64(first)) * cuda.blockDim.x + cuda.threadIdx.x
        for i in range(start, n, step):
            y[i] = 2.0 * x[i] + (x[i - 1] if i > 0 else 0.0)

    with ag.configure(backend="sim", sim_seed=1):
        k = ag.kernel(const=["x"], out=["y"], grid_offset=("first", "total"),
                      grid_stride=True)(smooth_narrow)
        host = np.arange(N, dtype=np.float64)
        x, y = ag.array(host), ag.empty(N)
        name = f"stride-narrow-{np.dtype(int_type).name}"
        with ag.tenant(name, split={"smooth_narrow": 8 if int_type is not np.uint8 else 16}):
            k[20, THREADS](x, y, N, int_type(0), int_type(20))
        np.testing.assert_array_equal(y.numpy(), smooth_numpy(host))
        assert ag.tenants()[name].kernels == pieces


def test_a_grid_stride_launch_that_is_itself_a_part_of_a_grid_is_cut_by_its_blocks():
    with ag.configure(backend="sim", sim_seed=1):
        k = ag.kernel(grid_offset=("first", "total"), grid_stride=True)(firsts)
        out = ag.array(np.zeros(6))
        with ag.tenant("stride-part", split={"firsts": 2}):
            k[2, 4](out, 3, 6)              # blocks 3 and 4 of a grid of 6, by the caller
        assert out.numpy().tolist() == [0.0, 0.0, 0.0, 6003.0, 6004.0, 0.0]


def test_a_grid_stride_launch_is_profiled_for_the_regulation_as_cut_by_its_work():
    """Its pieces each take a part of the time on the whole grid, whatever its waves (the
    model's ``grid`` 0), and a launch of one block can be split."""
    with ag.configure(backend="sim", sim_seed=2):
        k = ag.kernel(const=["x"], out=["y"], grid_offset=("first", "total"),
                      grid_stride=True)(smooth)
        x, y = ag.array(np.ones(N)), ag.empty(N)
        t = ag.tenant("stride-profiled")
        with t:
            k[1, THREADS](x, y, N, 0, 1)
        ag.regulate(plan="search", tenants=[t.name])
        with profiled_as({"smooth": 2e-3}, {"smooth": 0.1}, {"smooth": 0.05}):
            for _ in range(2):
                with t:
                    k[1, THREADS](x, y, N, 0, 1)
            ag.synchronize()
            state = ag.regulation()
        assert state.state == "regulated"
        op = state.plan.profile[0].ops[0]
        assert op.splittable and op.grid == 0.0
        assert op.piece(4) == pytest.approx((op.seconds / 4, op.share))
        ag.regulate(plan="off")


# -- bad declarations and arguments ---------------------------------------------------------------
TYPED = r"""
extern "C" __global__ void typed(double* y, int n, float scale, const double* x, int first,
                                 int total) {}
"""


def _numba(**kwargs):
    return ag.kernel(const=["x"], out=["y"], **kwargs)(rows)


def _typed(**kwargs):
    return ag.cuda_kernel(TYPED, "typed", **kwargs)


@pytest.mark.parametrize("make,kwargs,match", [
    (_numba, {"grid_offset": "first"},
     r"kernel 'rows': grid_offset must name two integer parameters.*got 'first'"),
    (_numba, {"grid_offset": ("first",)}, "grid_offset must name two integer parameters"),
    (_numba, {"grid_offset": ("first", "first")}, "names one parameter twice"),
    (_numba, {"grid_offset": ("first", "count")},
     (r"'count' \(the grid's block count\), which is no parameter; parameters are x, y, "
      "first, total")),
    (_numba, {"grid_offset": ("x", "total")},
     "grid_offset names 'x'.*annotated const/out, so it is an array"),
    (_typed, {"grid_offset": ("first", "scale")},
     r"'scale' must be an integer scalar parameter \(the grid's block count\); it is 'float'"),
    (_typed, {"grid_offset": ("x", "total")}, "'x' must be an integer scalar parameter"),
    (_typed, {"grid_offset": ("first", "total"), "elementwise": "n"},
     "elementwise= and grid_offset= both declare how its launches split"),
    (_typed, {"grid_offset": ("first", "total"), "sim": lambda *a: None},
     "its sim= twin is a plain function.*give a @cuda.jit twin"),
    (_numba, {"grid_stride": True},
     r"kernel 'rows': grid_stride=True declares how pieces of its grid run, which needs "
     r"grid_offset=\('first', 'total'\)"),
    (_typed, {"grid_offset": ("first", "total"), "grid_stride": "yes"},
     "kernel 'typed': grid_stride must be True or False; got 'yes'"),
])
def test_a_bad_grid_offset_declaration_is_refused_by_name(make, kwargs, match):
    with pytest.raises(ag.SignatureError, match=match):
        make(**kwargs)


@pytest.mark.parametrize("args,match", [
    ((0, 5), (r"argument 3 'total': grid_offset declares it the whole grid's block count, but "
              r"it is 5 where the launch has 4 blocks in x")),
    ((2, 5), r"argument 2 'first': the launch would be blocks 2 to 5 of a grid of 5"),
    ((-1, 4), r"argument 2 'first': the launch would be blocks -1 to 2"),
    ((0.0, 4), r"argument 2 'first': grid_offset declares it a block number, but it is 0.0"),
])
def test_a_split_launch_whose_first_or_total_cannot_describe_its_grid_is_refused_before_enqueue(
        args, match):
    with ag.configure(backend="sim", sim_seed=2):
        case = Case("rows")
        before = ag.statistics().kernels
        with ag.tenant("grid-bad-args", split={"rows": 2}):
            with pytest.raises(ag.ArgumentError, match=r"kernel 'rows'.*" + match):
                case.k[4, THREADS](case.x, case.y, *args)
            assert ag.statistics().kernels == before        # nothing was enqueued
            case.launch(4)                                  # and the runtime is fine
        np.testing.assert_array_equal(case.result(), rows_numpy(case.host))


# -- the regulation -------------------------------------------------------------------------------
def add_one(x, y, n):
    for i in range(cuda.grid(1), n, cuda.gridsize(1)):
        y[i] = x[i] + 1.0


def test_a_regulation_search_splits_a_long_grid_offset_kernel_beside_a_high_priority_tenant():
    with ag.configure(backend="sim", sim_seed=2):
        case = Case("rows")
        small = ag.kernel(const=["x"], out=["y"])(add_one)
        u, v = ag.array(np.ones(64)), ag.empty(64)
        low, high = ag.tenant("grid-low"), ag.tenant("grid-high", priority="high")

        def step():
            with low:
                case.launch(16)
            with high:
                small[1, 32](u, v, 64)

        step()
        ag.regulate(plan="search", tenants=[low.name, high.name])
        # (rows fills the device in 16 waves: each piece of it does too, for less time)
        with profiled_as({"rows": 2e-3, "add_one": 1e-4}, {"rows": 1.0, "add_one": 0.1},
                         {"rows": 16.0}):
            for _ in range(2):
                step()
            ag.synchronize()
            state = ag.regulation()
        assert state.state == "regulated"
        profile = {p.name: p for p in state.plan.profile}
        assert profile["grid-low"].ops[0].splittable
        assert not profile["grid-high"].ops[0].splittable
        assert (profile["grid-low"].ops[0].grid, profile["grid-high"].ops[0].grid) == (16.0, 0.0)
        assert state.plan.splits == {"grid-low": {"rows": 8}}
        with ag.instrument(programs.Edges()) as seen:
            step()
        pieces = [r for n, r in seen.kernels if n.name == "rows"]
        assert [r.count("split") for r in pieces] == [0] + [1] * 7
        ag.synchronize()
        np.testing.assert_array_equal(case.result(), rows_numpy(case.host))
        assert v.numpy().tolist() == [2.0] * 64
        ag.regulate(plan="off")


def test_a_grid_offset_launch_of_one_block_is_not_splittable_for_the_regulation():
    with ag.configure(backend="sim", sim_seed=2):
        case = Case("rows")
        t = ag.tenant("grid-one-block")
        with t:
            case.launch(1)
        ag.regulate(plan="search", tenants=[t.name])
        for _ in range(2):
            with t:
                case.launch(1)
        ag.synchronize()
        state = ag.regulation()
        assert state.state == "regulated"
        assert not state.plan.profile[0].ops[0].splittable
        ag.regulate(plan="off")


# -- random chains of split and whole launches ----------------------------------------------------
@st.composite
def chains(draw):
    """Launches of ``rows`` (cut by its blocks, or as a grid-stride kernel on its whole grid)
    and ``block_sums`` over three shared buffers: (kernel, source, destination, blocks, pieces
    or 1 for whole)."""
    out = []
    for _ in range(draw(st.integers(1, 6))):
        src = draw(st.integers(0, 2))
        dst = draw(st.sampled_from([b for b in range(3) if b != src]))
        out.append((draw(st.sampled_from(["rows", "rows_stride", "block_sums"])), src, dst,
                    draw(st.integers(1, 9)), draw(st.sampled_from([1, 2, 3, 8]))))
    return out


def _run_chain(chain, split):
    rng = np.random.default_rng(11)
    bufs = [ag.array(rng.integers(-4, 4, (ROWS, COLS)).astype(np.float64)) for _ in range(3)]
    ks = {"rows": ag.kernel(const=["x"], out=["y"], grid_offset=("first", "total"))(rows),
          "rows_stride": ag.kernel(const=["x"], out=["y"], grid_offset=("first", "total"),
                                   grid_stride=True, name="rows_stride")(rows),
          "block_sums": ag.kernel(const=["x"], grid_offset=("first", "total"))(block_sums)}
    for i, (name, src, dst, blocks, pieces) in enumerate(chain):
        scope = ag.tenant(f"chain-{i % 2}-{split}-{name}-{pieces}",
                          split={name: pieces} if split and pieces > 1 else None)
        with scope:
            if name != "block_sums":
                ks[name][blocks, THREADS](bufs[src], bufs[dst], 0, blocks)
            else:       # (the sums go into the destination's first row; it is read-write)
                ks[name][blocks, THREADS](bufs[src].reshape(-1), bufs[dst].reshape(-1),
                                          ROWS * COLS, 0, blocks)
    return [b.numpy() for b in bufs]


@pytest.mark.parametrize("strategy", ["random", "starve"])
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chain=chains())
def test_random_chains_of_split_grid_offset_launches_equal_serial(strategy, chain):
    with ag.configure(backend="sim", execution="sync", sim_seed=0, sim_strategy="eager"):
        expected = _run_chain(chain, split=False)
    with ag.configure(backend="sim", execution="async", sim_seed=3, sim_strategy=strategy):
        got = _run_chain(chain, split=True)
    for a, b in zip(got, expected):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("kind", KINDS)
def test_a_recorded_grid_offset_kernel_split_by_a_tenant_replays_its_pieces_in_order(kind):
    from recorder_kernels import captured_graphs
    from test_recorder_splits import unordered_pieces

    with ag.configure(backend="sim", sim_strategy="random", sim_seed=5):
        case = Case(kind)
        blocks = 7
        case.launch(blocks)
        whole = case.result()

        @ag.graph
        def step():
            if case.kind == "block_sums":        # (into the same output: launch() makes one)
                case.k[blocks, THREADS](case.x, case.y, N, 0, blocks)
            else:
                case.launch(blocks)

        outcomes = []
        for _ in range(3):
            with ag.tenant(f"rec-grid-{kind}", split={case.name: 3}):
                step()
            outcomes.append(step.outcome)
            np.testing.assert_array_equal(case.result(), whole)
        assert outcomes == ["recorded", "replayed", "replayed"]
        (frozen,) = captured_graphs(step)
        assert [n.name for n in frozen.graph.nodes].count(case.name) == 3
        assert unordered_pieces(frozen) == []


@pytest.mark.parametrize("workload,split,kernels", [     # (the simulator runs a thread per
    ("img", {"gaussian_blur": 2, "sobel": 2}, 3 * 2 + 2 * 2 + 6),   # thread of every piece)
    ("dl", {"conv2d": 2, "mean_pool": 2}, 4 * 2 + 2 * 2 + 2),
])
def test_the_workloads_2d_kernels_split_by_a_tenant_give_the_workloads_answer(
        workload, split, kernels):
    """IMG's blurs and Sobel filters and DL's convolutions and pools declare a grid offset and
    a grid-stride loop: cut into pieces, each on the whole 4 x 2 grid as a part of one twice
    as wide, each piece numbers its values as that grid would, so the step's answer is the
    whole step's, value for value."""
    from benchmarks.workloads import WORKLOADS

    with ag.configure(backend="sim", sim_strategy="random", sim_seed=5):
        wl = WORKLOADS[workload](ag, "tiny")
        wl.reset()
        whole = wl.run(32, 8)
        name = f"{workload}-split"
        with ag.tenant(name, split=split):
            wl.reset()
            got = wl.run(32, 8)
        if isinstance(whole, dict):
            assert whole.keys() == got.keys()
            for key in whole:
                np.testing.assert_array_equal(got[key], whole[key])
        else:
            np.testing.assert_array_equal(got, whole)
        assert ag.tenants()[name].kernels == kernels


def test_an_array_given_for_a_grid_offset_parameter_is_refused_at_the_launch(sim):
    """An untyped Numba kernel took it and ran (the same mistake with ``elementwise=`` was
    refused at the launch)."""
    ag = sim

    @ag.kernel(grid_offset=("first", "total"))
    @cuda.jit
    def fill_one(x, first, total):
        i = cuda.grid(1)
        if i < x.shape[0]:
            x[i] = 1.0

    x = ag.zeros(8)
    with pytest.raises(ag.ArgumentError, match=r"argument 1 'first': grid_offset declares it a "
                                               r"block number, an integer, but it is an array"):
        fill_one[1, 8](x, ag.zeros(1), 1)
    fill_one[1, 8](x, 0, 1)
    assert x.tolist() == [1.0] * 8
