"""A shared-memory sum reduction, ported from numba-cuda's docs.

Origin: repository ``NVIDIA/numba-cuda``, the documentation's "Shared Memory Reduction"
example (``numba_cuda/numba/cuda/tests/doc_examples/test_reduction.py``: ``array_sum`` on
``np.arange(1024)`` in one block). The kernel writes its sum into ``data[0]``, in place.
"""

from __future__ import annotations

import numpy as np
from numba import cuda
from numba.cuda.types import int32

import asyncgpu as ag  # asyncgpu: the runtime

SIZES = {"sim": 128, "gpu": 1024}      # elements, one thread each, in one block
TOLERANCE = {"sim": {"rtol": 0.0, "atol": 0.0}, "gpu": {"rtol": 0.0, "atol": 0.0}}


def _array_sum(nelem):
    # asyncgpu: the kernel is made for a given size (the original's shared array takes its
    # length from the global ``nelem``, a compile-time constant)
    @ag.kernel  # asyncgpu: scheduled; data is read and written
    @cuda.jit
    def array_sum(data):
        tid = cuda.threadIdx.x
        size = len(data)
        if tid < size:
            i = cuda.grid(1)

            # Declare an array in shared memory
            shr = cuda.shared.array(nelem, int32)
            shr[tid] = data[i]

            # Ensure writes to shared memory are visible
            # to all threads before reducing
            cuda.syncthreads()

            s = 1
            while s < cuda.blockDim.x:
                if tid % (2 * s) == 0:
                    # Stride by `s` and add
                    shr[tid] += shr[tid + s]
                s *= 2
                cuda.syncthreads()

            # After the loop, the zeroth  element contains the sum
            if tid == 0:
                data[tid] = shr[tid]

    return array_sum


def run(nelem):
    # generate data
    a = ag.array(np.arange(nelem))  # asyncgpu: ag.array for cuda.to_device
    array_sum = _array_sum(nelem)
    array_sum[1, nelem](a)
    # the host reads one element (a[0]), as the original prints it
    return {"a0": a[0], "rest": a[1:].get()}


def reference(nelem, got=None):
    return {"a0": sum(np.arange(nelem)), "rest": np.arange(nelem)[1:]}
