"""``asyncgpu.configure`` on the GPU: an explicit-memory array used in a managed-memory block and
after it keeps its values, and its memory really is converted each way (device memory with a
pinned host mirror, then managed memory, then device memory again)."""

from __future__ import annotations

import numpy as np
import pytest

import asyncgpu as ag

pytestmark = pytest.mark.gpu

SRC = r'''
extern "C" __global__ void scale_add(float* x, float a, float b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = x[i] * a + b;
}
'''
N = 1 << 20


def memory_type(x):
    """CUDA's memory type of the array's device pointer (cudaMemoryTypeDevice: 2,
    cudaMemoryTypeManaged: 3)."""
    import cupy

    ptr = x._alloc.buffer.device_pointer()
    return int(cupy.cuda.runtime.pointerGetAttributes(ptr).type)


def test_an_explicit_array_goes_through_a_managed_block_and_back():
    k = ag.cuda_kernel(SRC, "scale_add")
    start = np.arange(N, dtype=np.float32) % 1000
    with ag.configure(backend="cuda", memory="explicit", execution="async"):
        x = ag.array(start)
        expect = start.copy()
        k[N // 256, 256](x, np.float32(2), np.float32(1), N)
        expect = expect * 2 + 1
        assert memory_type(x) == 2
        with ag.configure(memory="managed"):
            assert memory_type(x) == 3
            k[N // 256, 256](x, np.float32(0.5), np.float32(0), N)    # pending at the exit
            expect = expect * 0.5
            y = ag.array(start)                                      # made inside the block
            k[N // 256, 256](y, np.float32(1), np.float32(3), N)
        assert memory_type(x) == 2 and memory_type(y) == 2
        np.testing.assert_array_equal(x.numpy(), expect)
        k[N // 256, 256](x, np.float32(1), np.float32(-1), N)
        k[N // 256, 256](y, np.float32(2), np.float32(0), N)
        np.testing.assert_array_equal(x.numpy(), expect - 1)
        np.testing.assert_array_equal(y.numpy(), (start + 3) * 2)
        np.testing.assert_array_equal((x + y).numpy(), expect - 1 + (start + 3) * 2)


@pytest.mark.parametrize("cuda_first", [True, False])
def test_a_program_that_initialized_cuda_before_importing_asyncgpu_is_warned_of_the_queues(
        cuda_first):
    """CUDA reads CUDA_DEVICE_MAX_CONNECTIONS once, in cuInit: a CuPy array made before
    asyncgpu is imported leaves the process with 8 hardware queues, and the backend says so."""
    import os
    import pathlib
    import subprocess
    import sys

    early = "import cupy; cupy.zeros(1); " if cuda_first else ""
    code = (early + "import asyncgpu as ag\n"
            "with ag.configure(backend='cuda'):\n"
            "    assert ag.zeros(4).numpy().tolist() == [0.0] * 4\n")
    env = {k: v for k, v in os.environ.items() if k != "CUDA_DEVICE_MAX_CONNECTIONS"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, cwd=pathlib.Path(__file__).resolve().parents[2])
    assert done.returncode == 0, done.stderr
    warned = "CUDA was initialized before asyncgpu was imported" in done.stderr
    assert warned is cuda_first


def test_a_device_the_machine_lacks_is_a_device_error_naming_the_option_as_on_sim():
    import subprocess
    import sys

    code = ("import asyncgpu as ag\n"
            "try:\n"
            "    ag.zeros(1)\n"
            "except ag.DeviceError as e:\n"
            "    print('DeviceError:', e)\n")
    env = dict(__import__("os").environ, ASYNCGPU_DEVICE="63", ASYNCGPU_BACKEND="cuda")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert "DeviceError: device=63 (the option device, or ASYNCGPU_DEVICE): this machine " \
           "has" in out.stdout, out.stderr
