"""Several GPUs in one runtime: results equal serial, work lands on every device, copies
between devices are peer copies. Needs a host with at least two GPUs."""

from __future__ import annotations

import random

import numpy as np
import programs
import pytest
from numba import cuda

pytestmark = pytest.mark.gpu


def _gpus() -> int:
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount()
    except Exception:       # no CuPy, no driver or no GPU: none to count
        return 0


needs_two = pytest.mark.skipif(_gpus() < 2, reason="needs two GPUs")


@pytest.fixture
def gpus():
    import asyncgpu as ag

    with ag.configure(backend="cuda", devices="all", device_policy="round-robin"):
        yield ag
        ag.synchronize()


def twice(x, y, n):
    i = cuda.grid(1)
    if i < n:
        y[i] = 2.0 * x[i] + 1.0


CUDA_TWICE = r"""extern "C" __global__ void twice_c(const double* x, double* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0 * x[i] + 1.0;
}"""


@needs_two
def test_chunks_run_on_every_gpu_and_sum_right(gpus):
    ag = gpus
    kernel = ag.kernel(const=["x"], out=["y"])(twice)
    host_x = np.arange(1 << 20, dtype=np.float64)
    parts = [ag.array(chunk) for chunk in np.array_split(host_x, 8)]
    outs = [ag.empty_like(p) for p in parts]
    for p, o in zip(parts, outs):
        kernel[(p.shape[0] + 255) // 256, 256](p, o, p.shape[0])
    total = sum(float(o.sum()) for o in outs)
    assert total == pytest.approx(float((2.0 * host_x + 1.0).sum()), rel=1e-12)
    placed = dict(ag.statistics().placed)
    assert set(placed) == set(range(_gpus()))


@needs_two
@pytest.mark.parametrize("memory", ["explicit", "managed"])
def test_a_trace_times_every_node_on_every_gpu(memory):
    import asyncgpu as ag

    with ag.configure(backend="cuda", devices="all", device_policy="round-robin",
                      memory=memory):
        kernel = ag.kernel(const=["x"], out=["y"])(twice)
        parts = [ag.array(np.full(1 << 16, c, np.float64)) for c in range(8)]
        outs = [ag.empty_like(p) for p in parts]
        with ag.trace() as t:
            for p, o in zip(parts, outs):
                kernel[256, 256](p, o, p.shape[0])
            got = [float(o[0]) for o in outs]
        assert got == [2.0 * c + 1.0 for c in range(8)]
        kernels = [n for n in t.device_nodes if n.kind == "kernel"]
        assert len(kernels) == 8
        # (each GPU's times from its own origin, taken when the trace began)
        assert all(0 <= n.start_s <= n.end_s < 10 for n in t.device_nodes)
        assert all(0 <= p.start_s <= p.end_s < 10 for p in t.prefetches)
        assert len({n.stream for n in kernels}) >= 2


@needs_two
def test_a_peer_copy_carries_the_bytes_between_gpus(gpus):
    ag = gpus
    numba_k = ag.kernel(const=["x"], out=["y"])(twice)
    c_k = ag.cuda_kernel(CUDA_TWICE, "twice_c")
    x = ag.array(np.arange(4096, dtype=np.float64))
    y = ag.empty_like(x)
    z = ag.empty_like(x)
    with ag.device(0):
        numba_k[16, 256](x, y, 4096)
    with ag.device(1):
        c_k[16, 256](y, z, 4096)                # y only on GPU 0: a peer copy to GPU 1
    assert z.numpy().tolist() == (4.0 * np.arange(4096) + 3.0).tolist()
    stats = ag.statistics()
    assert stats.copies_peer == 1 and stats.bytes_peer == 4096 * 8


@needs_two
def test_library_calls_run_on_the_gpu_of_their_data(gpus):
    ag = gpus
    import asyncgpu.cupy as acp

    with ag.device(1):
        a = ag.array(np.linspace(0.0, 1.0, 1 << 16))
        b = acp.sqrt(a) * 2.0               # placed where a is: GPU 1
    c = b.sum()
    assert float(c) == pytest.approx(float((2.0 * np.sqrt(np.linspace(0.0, 1.0, 1 << 16)))
                                          .sum()), rel=1e-12)
    placed = dict(ag.statistics().placed)
    assert set(placed) == {1}


def _random_programs_equal_serial(seeds: int, **options) -> None:
    """Random programs on every GPU with ``options`` equal the serial run on the simulator
    (the programs are exact: the kernels are compiled without fused multiply-adds)."""
    import asyncgpu as ag

    init = programs.initial()
    for seed in range(seeds):
        steps = programs.random_program(random.Random(seed), 16)
        e_reads, e_final = programs.run_serial(ag, programs.run, steps, init)
        with ag.configure(backend="cuda", devices="all", **options):
            reads, final = programs.run(ag, steps, init)
            if options.get("memory") == "managed":
                assert ag.statistics().prefetches > 0
        assert [r.tolist() for r in reads] == [r.tolist() for r in e_reads], (options, seed)
        assert [f.tolist() for f in final] == [f.tolist() for f in e_final], (options, seed)


@needs_two
@pytest.mark.parametrize("policy", ["round-robin", "stream-aware", "min-transfer-size",
                                    "min-min", "min-max"])
def test_random_programs_equal_serial_on_every_gpu(policy):
    _random_programs_equal_serial(12, device_policy=policy)


@needs_two
def test_random_programs_with_managed_memory_equal_serial_on_every_gpu():
    _random_programs_equal_serial(12, memory="managed", device_policy="round-robin")


@needs_two
def test_the_checker_follows_every_gpu():
    _random_programs_equal_serial(6, debug_hb=True)


@needs_two
def test_random_programs_under_stress_equal_serial_on_every_gpu():
    # stress mode's spins delay nodes on each GPU against the other GPUs' work, so a missing
    # cross-device event would show as a wrong answer; the checker follows every GPU
    import asyncgpu as ag
    from asyncgpu.runtime.current import current_runtime

    init = programs.initial()
    delays = 0
    for seed in range(10):
        steps = programs.random_program(random.Random(500 + seed), 16)
        e_reads, e_final = programs.run_serial(ag, programs.run, steps, init)
        with ag.configure(backend="cuda", devices="all", device_policy="round-robin",
                          stress=True, stress_seed=seed, debug_hb=True):
            reads, final = programs.run(ag, steps, init)
            delays += current_runtime().backend.delays
            assert len(ag.statistics().placed) > 1
        assert [r.tolist() for r in reads] == [r.tolist() for r in e_reads], seed
        assert [f.tolist() for f in final] == [f.tolist() for f in e_final], seed
    assert delays > 0


@needs_two
def test_a_gpu_the_host_lacks_is_refused_and_nothing_changes():
    import asyncgpu as ag

    with ag.configure(backend="cuda"):
        x = ag.array(np.ones(8))
        with pytest.raises(ag.DeviceError, match=f"device {_gpus()}"):
            ag.configure(devices=[0, _gpus()])
        assert ag.options().devices == 1
        assert x.numpy().tolist() == [1.0] * 8


@needs_two
def test_the_programs_current_gpu_is_left_as_it_was(gpus):
    import cupy

    ag = gpus
    kernel = ag.kernel(const=["x"], out=["y"])(twice)
    xs = [ag.array(np.ones(1024)) for _ in range(4)]
    ys = [ag.empty_like(x) for x in xs]
    before = cupy.cuda.runtime.getDevice()
    for x, y in zip(xs, ys):
        kernel[4, 256](x, y, 1024)          # placed on every GPU in turn
    assert sum(float(y.sum()) for y in ys) == 4 * 1024 * 3.0
    assert cupy.cuda.runtime.getDevice() == before


@needs_two
def test_a_recorded_step_is_replayed_as_one_graph_per_gpu_and_stays_right(gpus):
    from test_multi_device import recorded_spread

    count = _gpus()
    outcomes = recorded_spread(gpus, count, 1 << 16, 256)
    assert outcomes == [("recorded", 0)] + [("replayed", count + 1)] * 3
    assert gpus.statistics().copies_peer >= 4


@needs_two
@pytest.mark.parametrize("policy", ["round-robin", "min-transfer-size"])
def test_recorded_random_programs_equal_serial_on_every_gpu(policy):
    import asyncgpu as ag
    from test_recorder import _run_rounds

    init = programs.initial()
    for seed in range(8):
        body = [s for s in programs.random_program(random.Random(seed), 10)
                if isinstance(s, programs.Launch)]
        expected = programs.run_serial(
            ag, lambda ag, body, init: _run_rounds(ag, body, [], init, 4, False), body, init)
        with ag.configure(backend="cuda", devices="all", device_policy=policy):
            reads, final, outcomes = _run_rounds(ag, body, [], init, 4, True)
        assert outcomes == ["recorded", "replayed", "replayed", "replayed"], seed
        assert [a.tolist() for a in reads + final] == [
            a.tolist() for a in expected[0] + expected[1]], (policy, seed)


def bump(x, n):
    i = cuda.grid(1)
    if i < n:
        x[i] += 1.0


@needs_two
@pytest.mark.parametrize("memory", ["explicit", "managed"])
def test_a_cupy_array_on_the_second_gpu_is_read_everywhere_and_written_in_place(memory):
    import cupy

    import asyncgpu as ag

    with cupy.cuda.Device(1):
        c = cupy.arange(1 << 16, dtype=cupy.float64)
    with ag.configure(backend="cuda", devices="all", memory=memory):
        a = ag.asarray(c)                           # CuPy's memory on GPU 1, no copy
        read = ag.kernel(const=["x"], out=["y"])(twice)
        write = ag.kernel()(bump)
        n = c.shape[0]
        outs = []
        for d in range(2):
            with ag.device(d):
                outs.append(ag.empty(n, np.float64))
                read[n // 256, 256](a, outs[d], n)
        write[n // 256, 256](a, n)                  # runs on GPU 1, in CuPy's memory
        expected = 2.0 * np.arange(n) + 1.0
        for out in outs:
            np.testing.assert_array_equal(out.numpy(), expected)
        ag.synchronize()
        np.testing.assert_array_equal(cupy.asnumpy(c), np.arange(n) + 1.0)
        assert ag.statistics().placed[1] >= 2       # the read pinned there, and the write
        with cupy.cuda.Device(1):
            back = cupy.asarray(a)                  # exported from its own GPU: CuPy's memory
        assert (back.device.id, back.data.ptr) == (1, c.data.ptr)
        elsewhere = cupy.asarray(a)                 # CuPy's rule: a copy on its current GPU
        assert elsewhere.device.id == 0 and elsewhere.data.ptr != c.data.ptr
        np.testing.assert_array_equal(cupy.asnumpy(elsewhere), np.arange(n) + 1.0)
        with ag.device(1):
            own = ag.empty(n, np.float64)
            read[n // 256, 256](a, own, n)
        with cupy.cuda.Device(1):
            mine = cupy.asarray(own)                # exported from the GPU that holds it
        assert mine.device.id == 1
        np.testing.assert_array_equal(cupy.asnumpy(mine), 2.0 * (np.arange(n) + 1.0) + 1.0)


EXIT_CHILD = r'''
from numba import cuda

import asyncgpu as ag

def made(k):     # a distinct kernel (and numba library) per k
    src = "def step_%d(x, n):\n    i = cuda.grid(1)\n    if i < n:\n        x[i] += %d\n" % (k, k)
    scope = {"cuda": cuda}
    exec(src, scope)
    return scope["step_%d" % k]

with ag.configure(backend="cuda", devices="all", device_policy="round-robin"):
    xs = [ag.zeros(1024) for _ in range(4)]
    kernels = [ag.kernel(made(k)) for k in range(1, 15)]
    for kern in kernels:
        for x in xs:
            kern[4, 256](x, 1024)
    total = sum(float(x.sum()) for x in xs)
    assert total == 4 * 1024 * sum(range(1, 15)), total
    assert len(ag.statistics().placed) >= 2, ag.statistics().placed
print("done", flush=True)
'''


@needs_two
def test_a_program_whose_kernels_ran_on_every_gpu_exits_cleanly():
    # numba shares a kernel's library between devices of one compute capability; its exit
    # finalizers must not free it twice (the process aborted after its last line)
    import os
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    proc = subprocess.run([sys.executable, "-c", EXIT_CHILD], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=root), timeout=300)
    assert proc.stdout.strip() == "done", proc.stderr[-2000:]
    assert proc.returncode == 0, proc.stderr[-2000:]
