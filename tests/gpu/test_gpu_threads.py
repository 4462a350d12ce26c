"""Several host threads submitting to one runtime on the GPU (reliability note F14): the same
linearizability checks as tests/test_threads.py, on real streams, with and without the
happens-before checker attached to the cuda backend's log."""

from __future__ import annotations

import time

import numpy as np
import pytest

from thread_programs import run_threads

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("debug_hb", [False, True])
@pytest.mark.parametrize("seed", range(3))
def test_threads_submitting_dependent_work_linearize_on_gpu(seed, debug_hb):
    import asyncgpu as ag

    with ag.configure(backend="cuda", execution="async", debug_hb=debug_hb):
        run_threads(ag, threads=4, rounds=50, seed=seed)
        ag.synchronize()


LAUNCHES = 2000
SPIN_UNTIL = r"""
extern "C" __global__ void spin_until(unsigned long long flag_address, float* seen,
                                      long long max_cycles) {
    volatile int* flag = (volatile int*)flag_address;
    long long start = clock64();
    while (*flag == 0 && clock64() - start < max_cycles) {}
    seen[0] = *flag != 0 ? 1.0f : 0.0f;
}
"""
SET_AT = r"""
extern "C" __global__ void set_at(unsigned long long address) {
    *(volatile int*)address = 1;
}
"""


@pytest.mark.parametrize("wait", ["read", "numpy", "synchronize"])
def test_a_thread_waiting_for_its_result_lets_another_thread_launch_on_gpu(wait):
    """One thread's kernel runs until another thread's kernel sets a flag (or about ten seconds
    pass); the first thread waits for its result on the host meanwhile. The flag goes by
    address, so the runtime sees no dependency between the two: the second launch can only
    happen while the first thread waits if the wait does not hold the runtime."""
    import threading
    import time

    import cupy
    import numpy as np

    import asyncgpu as ag

    flag = cupy.zeros(1, np.int32)          # (the program's own memory, outside asyncgpu)
    with ag.configure(backend="cuda"):
        spin = ag.cuda_kernel(SPIN_UNTIL, "spin_until")
        set_at = ag.cuda_kernel(SET_AT, "set_at")
        seen = ag.zeros(1, np.float32)
        done = cupy.ones(1, np.int32)
        spin[1, 1](done.data.ptr, seen, 0)  # (both compiled and loaded before the race)
        set_at[1, 1](done.data.ptr)
        seen[0] = 0.0
        ag.synchronize()
        results = []

        def first():
            spin[1, 1](flag.data.ptr, seen, 20_000_000_000)   # (about 10 s at most)
            if wait == "read":
                results.append(float(seen[0]))
            elif wait == "numpy":
                results.append(float(seen.numpy()[0]))
            else:
                ag.synchronize()
                results.append(float(seen[0]))

        waiting = threading.Thread(target=first)
        waiting.start()
        time.sleep(0.3)                     # (the first thread is waiting by now)
        set_at[1, 1](flag.data.ptr)
        waiting.join()
        assert results == [1.0]             # the flag was set while the first thread waited


def test_a_launch_keeps_the_gil():
    """A launch keeps the GIL: a release there hands it to a waiting thread, and the launching
    thread then waits to get it back (a context switch each way). With the interpreter's switch
    interval longer than the test, a thread waiting for the GIL can only run where a launch
    releases it, so it counts the releases, however loaded the host is."""
    import sys
    import threading

    import asyncgpu as ag
    from benchmarks import overhead

    with ag.configure(backend="cuda"):
        k = ag.cuda_kernel(overhead._c_source(3), "k3")     # (the overhead benchmark's)
        a, b, c = (ag.ones(32, np.float32) for _ in range(3))
        k[1, 32](a, b, c)                   # (compiled and loaded before counting)
        ag.synchronize()
        ran, stop, started = [0], threading.Event(), threading.Event()

        def waiter():
            started.set()
            while not stop.is_set():
                ran[0] += 1
                time.sleep(0)               # (hands the GIL straight back)

        interval = sys.getswitchinterval()
        sys.setswitchinterval(100.0)
        try:
            thread = threading.Thread(target=waiter)
            thread.start()
            started.wait()
            before = ran[0]
            for _ in range(LAUNCHES):
                k[1, 32](a, b, c)
            during = ran[0] - before
            stop.set()
            thread.join()
        finally:
            sys.setswitchinterval(interval)
        ag.synchronize()
    assert during < 0.05 * LAUNCHES, f"the waiting thread ran {during} times in {LAUNCHES} launches"


def test_bench_overhead_reports_threads_launching_at_once():
    """``asyncgpu bench overhead``'s threads case: host us per launch with three threads and
    with one, and context switches per launch, for asyncgpu's launch, CuPy's raw launch (which
    releases the GIL) and launches followed by a read."""
    import asyncgpu as ag
    from benchmarks import overhead

    with ag.configure(backend="cuda"):
        measured = overhead.threads(ag, launches=60, repeats=1)
    assert set(measured) == {"ag_launch", "cupy_raw_launch", "ag_launch_read"}
    assert all(v["one_thread_us"] > 0 and v["threads_us"] > 0 for v in measured.values())
