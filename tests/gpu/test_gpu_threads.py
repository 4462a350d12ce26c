"""Several host threads submitting to one runtime on the GPU (reliability note F14): the same
linearizability checks as tests/test_threads.py, on real streams, with and without the
happens-before checker attached to the cuda backend's log."""

from __future__ import annotations

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


def test_threads_launching_at_once_do_not_hand_the_gil_over_at_every_launch():
    """Three threads launching kernels at once: a launch keeps the GIL (a release there hands
    it to a waiting thread, and the launching thread then waits for it back), so the threads
    give up the CPU far less often than threads making CuPy's raw launch, which releases it,
    in the same measurement (other load on the host raises both counts); ``asyncgpu bench
    overhead`` reports it."""
    import asyncgpu as ag
    from benchmarks import overhead

    with ag.configure(backend="cuda"):
        measured = overhead.threads(ag, launches=600, repeats=3)
    assert set(measured) == {"ag_launch", "cupy_raw_launch", "ag_launch_read"}
    ours = measured["ag_launch"]["switches_per_launch"]
    raw = measured["cupy_raw_launch"]["switches_per_launch"]
    # (a launch that released the GIL would switch at nearly every launch, as CuPy's does: 0.9
    # on an H200 host; under other load CuPy's count can fall near ours, and then only the
    # first check says anything)
    assert ours < 0.1
    assert raw < 0.2 or ours < 0.5 * raw
    assert all(v["one_thread_us"] > 0 and v["threads_us"] > 0 for v in measured.values())
