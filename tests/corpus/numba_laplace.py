"""The 1-D heat equation (Laplace's operator, explicit time steps), ported from numba-cuda's docs.

Origin: repository ``NVIDIA/numba-cuda``, the documentation's "1D Heat Equation" example
(``numba_cuda/numba/cuda/tests/doc_examples/test_laplace.py``: ``solve_heat_equation`` and its
set-up). The original runs every time step inside one cooperative launch, separated by a
grid-wide ``grid.sync()``; asyncgpu launches are not cooperative, so each time step is one
launch and the launch boundary is the grid-wide synchronization (the DAG orders step ``n + 1``
after step ``n``, which writes what it reads). The plotting is left out.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

import asyncgpu as ag  # asyncgpu: the runtime

# (points, time steps); the original has 1001 points and 10000 steps
SIZES = {"sim": (33, 16), "gpu": (1001, 10_000)}
# The reference does the same float64 operations in the same order: exact on sim; the GPU may
# contract a multiply and an add into an FMA.
TOLERANCE = {"sim": {"rtol": 0.0, "atol": 0.0}, "gpu": {"rtol": 1e-10, "atol": 1e-9}}


# asyncgpu: scheduled; each launch reads data and writes next_data (one time step: the loop
# over the steps and the choice of buffers move to the host, see the module docstring)
@ag.kernel(const=["data"])
@cuda.jit
def solve_heat_equation(data, next_data, k):
    i = cuda.grid(1)

    # Don't continue if our index is outside the domain
    if i >= len(data):
        return

    # Get the current temperature associated with this point
    curr_temp = data[i]

    # Apply formula from finite difference equation
    if i == 0:
        # Left wall is held at T = 0
        next_temp = curr_temp + k * (data[i + 1] - (2 * curr_temp))
    elif i == len(data) - 1:
        # Right wall is held at T = 0
        next_temp = curr_temp + k * (data[i - 1] - (2 * curr_temp))
    else:
        # Interior points are a weighted average of their neighbors
        next_temp = curr_temp + k * (
            data[i - 1] - (2 * curr_temp) + data[i + 1]
        )

    # Write new value to the next buffer
    next_data[i] = next_temp


def run(size):
    # Use an odd problem size.
    # This is so there can be an element truly in the "middle" for symmetry.
    size, niter = size  # asyncgpu: the size and the steps are parameters
    data = np.zeros(size)

    # Middle element is made very hot
    data[size // 2] = 10000  # asyncgpu: the middle of any odd size (500 of 1001)
    buf_0 = ag.array(data)  # asyncgpu: ag.array for cuda.to_device

    # This extra array is used for synchronization purposes
    buf_1 = ag.empty_like(buf_0)  # asyncgpu: ag.empty_like for cuda.device_array_like

    # asyncgpu: the time loop of the kernel, one launch a step (forall(len(data)) as an
    # explicit configuration)
    for step in range(niter):
        # Select the buffer from the previous timestep
        if (step % 2) == 0:
            src, dst = buf_0, buf_1
        else:
            src, dst = buf_1, buf_0
        solve_heat_equation[(size + 63) // 64, 64](src, dst, 0.25)

    results = buf_1.get()  # asyncgpu: get() for copy_to_host
    # Integral over the domain should be equal to its initial value (the original's check,
    # while the heat has not reached the walls)
    return {"buf_0": buf_0.get(), "buf_1": results, "total": results.sum()}


def reference(size, got=None):
    size, niter = size
    data = np.zeros(size)
    data[size // 2] = 10000
    bufs = [data, np.full(size, np.nan)]
    k = 0.25
    for step in range(niter):
        cur, nxt = bufs[step % 2], bufs[1 - step % 2]
        nxt[0] = cur[0] + k * (cur[1] - (2 * cur[0]))
        nxt[-1] = cur[-1] + k * (cur[-2] - (2 * cur[-1]))
        nxt[1:-1] = cur[1:-1] + k * (cur[:-2] - (2 * cur[1:-1]) + cur[2:])
    return {"buf_0": bufs[0], "buf_1": bufs[1], "total": 10000.0}
