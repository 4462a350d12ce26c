"""A write-only (``out``) argument that is a strided view: the simulator marks only the view's
elements undefined before the kernel runs, never the bytes between them, which belong to
other arrays or views (a GPU kernel writes exactly the elements it is given)."""

from __future__ import annotations

import numpy as np
from numba import cuda

import asyncgpu as ag


@ag.kernel(out=["y"])
@cuda.jit
def fill(y, n):
    i = cuda.grid(1)
    if i < n:
        y[i] = 7.0


def test_a_strided_write_only_view_leaves_the_elements_between_alone(sim):
    a = sim.array(np.arange(8, dtype=np.float32))
    fill[1, 4](a[::2], 4)
    np.testing.assert_array_equal(a.numpy(), [7, 1, 7, 3, 7, 5, 7, 7])


def test_a_write_only_column_leaves_the_other_columns_alone(sim):
    m = sim.array(np.arange(12, dtype=np.float32).reshape(4, 3))
    fill[1, 4](m[:, 1], 4)
    expected = np.arange(12, dtype=np.float32).reshape(4, 3)
    expected[:, 1] = 7
    np.testing.assert_array_equal(m.numpy(), expected)
