"""The user-facing example of DESIGN section 1 on the sim backend."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

REDUCE_SRC = r'''
extern "C" __global__
void reduce(const float* x, const float* y, float* z, int n) {
    // one atomic per thread: fine for a test
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(z, x[i] - y[i]);
}
'''


def reduce_twin(x, y, z, n):
    z[0] += np.float32(np.sum(x[:n].astype(np.float64) - y[:n].astype(np.float64)))


def make_square(ag):
    @ag.kernel(const=["x"])
    @cuda.jit
    def square(x, y, n):
        i = cuda.grid(1)
        if i < n:
            y[i] = x[i] * x[i]
    return square


class Recorder:
    """An instrument that keeps every issued node."""

    def __init__(self):
        self.nodes = []

    def node_issued(self, node):
        self.nodes.append(node)

    def kernels(self):
        return [n for n in self.nodes if n.kind == "kernel"]


def run_vec(ag, n=64):
    from asyncgpu.runtime.current import current_runtime

    square = make_square(ag)
    reduce = ag.cuda_kernel(REDUCE_SRC, "reduce", sim=reduce_twin)
    rng = np.random.default_rng(1)
    xh = rng.random(n).astype(np.float32)
    yh = rng.random(n).astype(np.float32)
    x, y = ag.array(xh), ag.array(yh)
    x1, y1 = ag.empty_like(x), ag.empty_like(y)
    res = ag.zeros(1, np.float32)
    rec = Recorder()
    with current_runtime().instrument(rec):
        blocks = (n + 31) // 32
        square[blocks, 32](x, x1, n)
        square[blocks, 32](y, y1, n)
        reduce[blocks, 32](x1, y1, res, n)
        value = res[0]
    expected = np.sum(xh.astype(np.float64) ** 2 - yh.astype(np.float64) ** 2)
    return value, expected, rec


@pytest.mark.parametrize("strategy", ["random", "reverse", "starve", "pct", "lazy", "eager"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_vec_example_gives_the_serial_answer_under_every_strategy(strategy, seed):
    import asyncgpu as ag

    with ag.configure(backend="sim", sim_seed=seed, sim_strategy=strategy):
        value, expected, _ = run_vec(ag)
    assert value == pytest.approx(expected, rel=1e-5)


def test_vec_example_dag_two_streams_one_event_wait(managed_memory, sim):
    ag = sim
    before = ag.statistics()
    value, expected, rec = run_vec(ag)
    after = ag.statistics()
    k = rec.kernels()
    assert [n.name for n in k] == ["square", "square", "reduce"]
    assert k[0].stream is not k[1].stream                      # independent: two streams
    assert k[2].stream is k[0].stream                          # first parent hands its stream on
    assert {(p.id, r) for p, r, _ in k[2].edges} == {(k[0].id, "RAW"), (k[1].id, "RAW")}
    assert after.event_waits - before.event_waits == 1         # reduce waits for square(y) only
    assert after.edges["RAW"] - before.edges["RAW"] == 2
    assert after.host_syncs.get("host-read", 0) - before.host_syncs.get("host-read", 0) == 1


@pytest.mark.usefixtures("managed_memory")
def test_sync_execution_uses_one_stream_and_waits_after_every_node():
    import asyncgpu as ag

    with ag.configure(backend="sim", sim_seed=3, execution="sync"):
        before = ag.statistics()
        value, expected, rec = run_vec(ag)
        after = ag.statistics()
    assert value == pytest.approx(expected, rel=1e-5)
    assert len({n.stream.index for n in rec.kernels()}) == 1
    assert after.host_syncs["sync-mode"] - before.host_syncs.get("sync-mode", 0) == 3


def test_const_write_is_reported_with_the_argument_name(sim):
    ag = sim

    @ag.kernel(const=["x", "y"])
    @cuda.jit
    def bad(x, y):
        i = cuda.grid(1)
        if i < x.size:
            y[i] = x[i]

    x, y = ag.ones(8, np.float32), ag.zeros(8, np.float32)
    bad[1, 8](x, y)
    # y is only read (as declared), so reading it does not wait; errors of queued work are
    # reported at the next synchronization, as CUDA reports kernel faults
    with pytest.raises(ag.AnnotationViolation, match=r"kernel 'bad' .*wrote argument 1 'y'"):
        ag.synchronize()
    # the failed kernel's writes were discarded: y holds what a GPU would not have left, so
    # reading it faults until it is written again; x, only read, is as it was; the runtime
    # stays usable
    with pytest.raises(ag.KernelFault, match="to be written by work that faulted"):
        y.numpy()
    assert x.numpy().tolist() == [1.0] * 8
    y[...] = 2.0
    assert y.numpy().tolist() == [2.0] * 8


def test_an_out_array_a_plain_twin_reads_is_poison(sim):
    """A Numba kernel's reads of an ``out`` argument are caught (``AnnotationViolation``); a
    CUDA C kernel's plain-function twin gets NumPy arrays, whose reads are not watched: it
    reads the poison, so the result shows it."""
    ag = sim

    def twin(y, n):
        y[:n] += 1.0        # reads y although it is declared write-only

    k = ag.cuda_kernel('extern "C" __global__ void acc(float* y, int n) {}', "acc", sim=twin,
                       out=["y"])
    y = ag.zeros(4, np.float32)
    k[1, 4](y, 4)
    assert np.isnan(y.numpy()).all()


def test_cuda_c_kernel_without_twin_is_refused_on_sim_before_enqueue(sim):
    ag = sim
    k = ag.cuda_kernel(REDUCE_SRC, "reduce")
    x = ag.zeros(4, np.float32)
    before = ag.statistics()
    with pytest.raises(ag.AsyncGPUError, match="needs? a Python twin|give it a Python twin"):
        k[1, 4](x, x, x, 4)
    assert ag.statistics().nodes == before.nodes
