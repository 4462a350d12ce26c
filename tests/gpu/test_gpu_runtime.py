"""The core runtime on a real GPU: results equal serial, independent kernels overlap."""

from __future__ import annotations

import random

import numpy as np
import pytest

import programs
from benchmarks.overlap import calibrate, spin_kernel
from test_example import run_vec

pytestmark = pytest.mark.gpu

@pytest.fixture
def gpu():
    import asyncgpu as ag

    with ag.configure(backend="cuda", execution="async"):
        yield ag
        ag.synchronize()


def test_vec_example_on_gpu(gpu):
    value, expected, rec = run_vec(gpu, n=1 << 20)
    assert value == pytest.approx(expected, rel=1e-3)
    kernels = rec.kernels()
    assert kernels[0].stream is not kernels[1].stream
    assert kernels[2].stream is kernels[0].stream


@pytest.mark.parametrize("execution", ["async", "sync"])
def test_random_programs_equal_serial_on_gpu(execution):
    import asyncgpu as ag

    init = programs.initial()
    for seed in range(40):
        steps = programs.random_program(random.Random(seed), 16)
        # the reference is the CPU simulator run serially, not a case under test (the
        # programs are exact: the kernels are compiled without fused multiply-adds)
        e_reads, e_final = programs.run_serial(ag, programs.run, steps, init)
        with ag.configure(backend="cuda", execution=execution):
            reads, final = programs.run(ag, steps, init)
        assert [r.tolist() for r in reads] == [r.tolist() for r in e_reads], seed
        assert [f.tolist() for f in final] == [f.tolist() for f in e_final], seed


class Nodes:
    """Every node the runtime adds (with its edges) and every host block, in order: what each
    host access waited for is the structure of the DAG, not a duration
    (``benchmarks/overlap.py`` measures the times)."""

    def __init__(self) -> None:
        self.nodes = []
        self.syncs = []

    def node_added(self, node) -> None:
        self.nodes.append(node)

    def synchronized(self, reason) -> None:
        self.syncs.append(reason)

    def named(self, name):
        return [n for n in self.nodes if n.name == name]

    def mark(self):
        return len(self.nodes), len(self.syncs)

    def since(self, mark):
        """(device nodes added, host blocks) since ``mark``."""
        nodes, syncs = mark
        return [n for n in self.nodes[nodes:] if n.stream is not None], self.syncs[syncs:]


def ancestors(node):
    """The nodes ``node`` is ordered after, directly or through others (copies, say)."""
    seen, todo = [], [p for p, _, _ in node.edges]
    while todo:
        n = todo.pop()
        if all(n is not s for s in seen):
            seen.append(n)
            todo.extend(p for p, _, _ in n.edges)
    return seen


def _spin_cycles(ag, spin, out):
    """A spin of a few milliseconds (four calibration runs adding 4 to ``out[0]``), so that the
    kernels under test are still running when the host moves on (the assertions below hold at
    any duration)."""
    return calibrate(ag, spin, out, 5e-3)


def test_two_independent_kernels_share_no_stream_or_edge_in_async_mode_only():
    import asyncgpu as ag

    for execution in ("async", "sync"):
        with ag.configure(backend="cuda", execution=execution):
            spin = spin_kernel(ag)
            a, b = ag.zeros(1, np.float32), ag.zeros(1, np.float32)
            cycles = _spin_cycles(ag, spin, ag.zeros(1, np.float32))
            with ag.instrument(Nodes()) as log:
                spin[1, 32](a, cycles)
                spin[1, 32](b, cycles)
            first, second = log.named(spin.name)
            assert all(n is not first for n in ancestors(second))   # independent
            if execution == "async":
                assert first.stream.index != second.stream.index    # free to run side by side
                assert log.syncs == []                  # the host never waited
            else:
                # the host waited behind every node it issued, the first spin included
                assert log.syncs == ["sync-mode"] * len(log.nodes)
            assert a[0] == 1.0 and b[0] == 1.0
            ag.synchronize()


def test_host_read_blocks_only_on_its_producer(gpu):
    ag = gpu
    spin = spin_kernel(ag)
    slow, other = ag.zeros(1, np.float32), ag.array(np.arange(4, dtype=np.float32))
    cycles = _spin_cycles(ag, spin, slow)
    with ag.instrument(Nodes()) as log:
        spin[1, 32](slow, cycles)
        mark = log.mark()
        assert other.numpy().tolist() == [0, 1, 2, 3]
        assert log.since(mark) == ([], [])         # the unrelated read issued and waited nothing
        mark = log.mark()
        assert slow[0] == 5.0      # four calibration runs and this one
        issued, syncs = log.since(mark)
    (spun,) = log.named(spin.name)
    assert syncs == ["host-read"]
    assert all(any(n is spun for n in ancestors(copy)) for copy in issued)


def test_a_host_read_that_fetches_waits_only_for_its_writer(gpu):
    """The read's bytes are on the device only (a kernel wrote them): the host fetches them
    once that kernel is done, while a long kernel on another stream keeps running. The
    allocation is small and has no other writer, so the first read fetches all of it and the
    second needs no copy."""
    import recorder_kernels

    ag = gpu
    spin = spin_kernel(ag)
    _, _, inc = recorder_kernels.kernels(ag)
    n = recorder_kernels.N
    slow = ag.zeros(1, np.float32)
    other = ag.array(np.arange(n, dtype=np.float32))
    cycles = _spin_cycles(ag, spin, slow)
    before = ag.statistics().copies_to_host
    with ag.instrument(Nodes()) as log:
        spin[1, 32](slow, cycles)
        inc[1, n](other, n)                        # other: current on the device only
        mark = log.mark()
        assert other[3] == 4.0
        (fetch,), syncs = log.since(mark)          # one copy to the host, one wait
        mark = log.mark()
        assert other[n - 1] == n
        assert log.since(mark) == ([], [])         # the first read fetched it all
        assert ag.statistics().copies_to_host - before == 1
        assert slow[0] == 5.0
    (spun,) = log.named(spin.name)
    (incremented,) = log.named(inc.name)
    assert spun.stream.index != incremented.stream.index
    assert syncs == ["host-read"]
    waited = ancestors(fetch)
    assert any(n is incremented for n in waited)
    assert all(n is not spun for n in waited)      # the fetch is not ordered after the spin


def test_dropped_array_is_not_reused_while_a_kernel_uses_it(gpu):
    ag = gpu
    spin = spin_kernel(ag)
    cycles = calibrate(ag, spin, ag.zeros(1, np.float32), 20e-3)
    victim = ag.zeros(1024, np.float32)
    spin[1, 32](victim, cycles)
    ptr = victim._alloc.buffer.ptr
    del victim
    fresh = ag.zeros(1024, np.float32)
    assert fresh._alloc.buffer.ptr != ptr
    ag.synchronize()


def test_cupy_rawkernel_and_plain_function_kernels(gpu):
    import cupy
    from numba import cuda

    ag = gpu
    raw = cupy.RawKernel(r'''
    extern "C" __global__ void twice(const float* x, float* y, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) y[i] = 2.0f * x[i];
    }''', "twice")
    twice = ag.kernel(raw)

    @ag.kernel(const=["y"])
    def plus_one(y, z):
        i = cuda.grid(1)
        if i < z.size:
            z[i] = y[i] + 1

    x = ag.array(np.arange(1000, dtype=np.float32))
    y, z = ag.empty_like(x), ag.empty_like(x)
    twice[4, 256](x, y, 1000)
    plus_one[4, 256](y, z)
    assert z.numpy().tolist() == (2 * np.arange(1000, dtype=np.float32) + 1).tolist()
    with pytest.raises(ag.ArgumentError, match="expected a float32 array"):
        twice[4, 256](ag.zeros(1000, np.float64), y, 1000)


@pytest.mark.parametrize("memory", ["explicit", "managed"])
def test_refuses_more_memory_than_the_gpu_has(gpu, memory):
    ag = gpu
    with ag.configure(memory=memory):
        kind = "device" if memory == "explicit" else "managed"
        with pytest.raises(ag.OutOfMemoryError, match=f"cannot allocate .* MiB of {kind} memory"):
            ag.empty((1 << 40,), np.float32)
        assert ag.zeros(4, np.float32).numpy().tolist() == [0.0] * 4


@pytest.fixture
def most_of_the_memory():
    """The tests that fill most of the GPU's memory take turns (pytest-xdist's workers share
    one GPU), each sizing its arrays by the GPU's whole memory, after this process's CuPy pool
    gave back what earlier tests left in it (blocks it holds serve allocations unrefused)."""
    import fcntl
    import tempfile

    import cupy

    with open(f"{tempfile.gettempdir()}/asyncgpu-gpu-memory.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        cupy.get_default_memory_pool().free_all_blocks()
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


STEP = r'''
extern "C" __global__ void set_first(double* t, double v) { t[0] = v; }
extern "C" __global__ void head(const double* t, double* out, int i) { out[i] = t[0]; }
'''


@pytest.mark.parametrize("memory", ["explicit", "managed"])
def test_a_loop_dropping_a_large_temporary_each_step_fits_where_its_serial_run_fits(
        gpu, memory, most_of_the_memory):
    """Each step's temporary (a fifth of the GPU's memory) is dropped with its kernels still
    pending: an allocation the GPU refuses waits for them and reuses what they held."""
    import cupy

    ag = gpu
    with ag.configure(memory=memory):
        n = int(cupy.cuda.runtime.memGetInfo()[1] * 0.2) // 8
        set_first = ag.cuda_kernel(STEP, "set_first")
        head = ag.cuda_kernel(STEP, "head")
        out = ag.zeros(8)
        before = ag.statistics().host_syncs.get("allocation", 0)
        for i in range(8):
            t = ag.empty(n)
            set_first[1, 1](t, float(i))
            head[1, 1](t, out, i)
            del t
        assert out.numpy().tolist() == [float(i) for i in range(8)]
        if memory == "explicit":    # (managed memory untouched takes no device memory yet)
            assert ag.statistics().host_syncs.get("allocation", 0) > before


def test_a_recorded_function_making_a_large_temporary_each_call_fits(gpu, most_of_the_memory):
    """The temporaries of earlier calls are held by their issued kernels: an allocation inside
    the recorded body the GPU refuses waits for those and reuses their memory."""
    import cupy

    ag = gpu
    with ag.configure(memory="explicit"):
        n = int(cupy.cuda.runtime.memGetInfo()[1] * 0.2) // 8
        set_first = ag.cuda_kernel(STEP, "set_first")
        head = ag.cuda_kernel(STEP, "head")
        out = ag.zeros(8)

        @ag.graph
        def step(i):
            t = ag.empty(n)
            set_first[1, 1](t, float(i))
            head[1, 1](t, out, i)

        before = ag.statistics().host_syncs.get("allocation", 0)
        for i in range(8):
            step(i)
        assert out.numpy().tolist() == [float(i) for i in range(8)]
        assert ag.statistics().host_syncs.get("allocation", 0) > before
        # (its graphs hold the last temporary, a fifth of the GPU: let go of them here, not in
        # a later test of this process that moves every live array to another memory model)
        step.clear()


def test_compile_error_carries_the_log(gpu):
    ag = gpu
    k = ag.cuda_kernel('extern "C" __global__ void broken(float* x) { x[0] = undefined_name; }',
                       "broken")
    with pytest.raises(ag.CompileError, match="undefined_name"):
        k[1, 1](ag.zeros(1, np.float32))


def test_block_too_large_for_the_kernels_registers_is_refused_before_enqueue(gpu):
    ag = gpu
    # many live doubles: the compiler needs more than 64 registers per thread
    body = "".join(f"double v{i} = x[(i + {i}) % n] * {i + 1}.0;\n" for i in range(48))
    total = " + ".join(f"v{i} * v{(i * 7) % 48}" for i in range(48))
    src = (f'extern "C" __global__ void heavy(const double* x, '
           f"double* y, int n) {{\nint i = blockIdx.x * blockDim.x + threadIdx.x;\n{body}"
           f"if (i < n) y[i] = {total};\n}}\n")
    k = ag.cuda_kernel(src, "heavy", options=("-maxrregcount=255",))
    x, y = ag.ones(1024, np.float64), ag.zeros(1024, np.float64)
    raw_limit = None
    try:
        k[1, 1024](x, y, 1024)
    except ag.BlockTooLargeError as exc:        # (an ArgumentValueError)
        assert isinstance(exc, ag.ArgumentValueError)
        raw_limit = str(exc)
    if raw_limit is None:
        pytest.skip("the compiler fit this kernel into 1024 threads; nothing to refuse")
    assert "registers per thread" in raw_limit
    before = ag.statistics()
    k[1, 64](x, y, 1024)
    assert ag.statistics().kernels == before.kernels + 1
    assert y[0] != 0
