"""Device faults and driver refusals on the GPU (reliability note F10, F11).

A kernel that faults (illegal address, trap) kills the CUDA context for the whole process, so
those tests run in a freshly spawned interpreter (never fork after CUDA init). A launch the
driver refuses (static plus dynamic shared memory over the per-block limit) is not sticky and
runs in this process: it must raise and leave the DAG as it was.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CHILD = textwrap.dedent(r'''
    import numpy as np
    import asyncgpu as ag

    SRC = r"""
    extern "C" __global__ void inc(float* x, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) x[i] += 1.0f;
    }
    extern "C" __global__ void oob_store(float* x, int n) {
        if (threadIdx.x == 0) { float* p = (float*)0x10; p[0] = x[0]; }
    }
    extern "C" __global__ void trap_now(float* x, int n) {
        if (threadIdx.x == 0) asm("trap;");
    }
    """
    inc = ag.cuda_kernel(SRC, "inc")
    bad = ag.cuda_kernel(SRC, "%(kernel)s")
    x = ag.zeros(1024, np.float32)
    inc[4, 256](x, 1024)
    print("BEFORE", float(x[0]), flush=True)
    inc[4, 256](x, 1024)
    bad[1, 32](x, 1024)
    for what, call in [("sync", ag.synchronize), ("read", lambda: x.numpy()),
                       ("launch", lambda: (inc[4, 256](x, 1024), ag.synchronize())),
                       ("alloc", lambda: ag.zeros(8)), ("again", ag.synchronize)]:
        try:
            call()
            print(what, "NO ERROR", flush=True)
        except ag.KernelFault as exc:
            print(what, "KernelFault", str(exc).replace("\n", " "), flush=True)
        except Exception as exc:
            print(what, "OTHER", type(exc).__name__, exc, flush=True)
''')


@pytest.mark.parametrize("kernel", ["oob_store", "trap_now"])
def test_device_fault_raises_one_clear_error_naming_the_launch(kernel):
    env = dict(os.environ, ASYNCGPU_BACKEND="cuda", PYTHONPATH=ROOT)
    proc = subprocess.run([sys.executable, "-c", CHILD % {"kernel": kernel}], env=env,
                          capture_output=True, text=True, timeout=180)
    out = proc.stdout
    assert "BEFORE 1.0" in out, proc.stderr[-3000:]
    lines = {ln.split()[0]: ln for ln in out.splitlines() if ln.split()}
    for what in ("sync", "read", "launch", "alloc", "again"):
        assert "KernelFault" in lines.get(what, ""), (what, out, proc.stderr[-3000:])
        assert f"kernel '{kernel}'" in lines[what], lines[what]
        assert "restart" in lines[what]
    assert "OTHER" not in out and "NO ERROR" not in out, out


REFUSED = r'''
extern "C" __global__ void big_shared(float* x, int n) {
    __shared__ float tile[10240];                   // 40 KiB static shared memory
    extern __shared__ float dyn[];
    int i = threadIdx.x;
    tile[i] = x[i];
    dyn[i] = tile[i];
    __syncthreads();
    if (i < n) x[i] = dyn[i] + 1.0f;
}
extern "C" __global__ void inc(float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += 1.0f;
}
'''


def test_launch_refused_by_the_driver_leaves_the_dag_unchanged():
    import asyncgpu as ag

    with ag.configure(backend="cuda", execution="async"):
        big = ag.cuda_kernel(REFUSED, "big_shared")
        inc = ag.cuda_kernel(REFUSED, "inc")
        x = ag.zeros(256, np.float32)
        y = ag.zeros(256, np.float32)
        inc[1, 256](x, 256)               # pending writers on two streams
        inc[1, 256](y, 256)
        before = ag.statistics().nodes
        with pytest.raises(ag.LaunchError, match=r"kernel 'big_shared'.*driver refused"):
            big[1, 256, 16 * 1024](x, 256)   # 40 KiB static + 16 KiB dynamic > 48 KiB
        assert ag.statistics().nodes == before
        inc[1, 256](x, 256)
        inc[1, 256](y, 256)
        assert x.numpy().tolist() == [2.0] * 256
        assert y.numpy().tolist() == [2.0] * 256
        big[1, 256, 1024](x, 256)         # within the limit: runs
        assert x.numpy().tolist() == [3.0] * 256
        ag.synchronize()


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.parametrize("seed", range(5))
def test_sigint_during_submission_on_gpu(seed):
    import asyncgpu as ag
    from interrupts import interrupted_chain

    with ag.configure(backend="cuda", execution="async", debug_hb=bool(seed % 2)):
        interrupted_chain(ag, seed, max_delay_s=0.3)


def test_compile_error_names_the_kernel_with_the_log_and_enqueues_nothing():
    import asyncgpu as ag

    with ag.configure(backend="cuda", execution="async"):
        inc = ag.cuda_kernel(REFUSED, "inc")
        x = ag.zeros(256, np.float32)
        inc[1, 256](x, 256)
        bad = ag.cuda_kernel('extern "C" __global__ void broken(float* x, int n) { x[0] = ; }',
                             "broken")
        before = ag.statistics().nodes
        with pytest.raises(ag.CompileError, match=r"kernel 'broken' failed to compile:(.|\n)*error"):
            bad[1, 32](x, 256)
        assert ag.statistics().nodes == before
        inc[1, 256](x, 256)
        assert x.numpy().tolist() == [2.0] * 256
