"""Every view a kernel or a library call is given is booked over the bytes it spans: a strided,
reversed or transposed view's reads and writes reach past its ``nbytes``, and an access
booked short would let work on the bytes it leaves out run beside it. The happens-before
checker verifies the order of the accesses the runtime books, so this is checked against the
views themselves: structurally (the booked range equals the view's extent, computed by NumPy
on the element indices) and by programs whose writer and reader meet only in those bytes."""

from __future__ import annotations

import random

import numpy as np
import pytest
from numba import cuda

import asyncgpu as ag
import asyncgpu.cupy as acp
import programs


@ag.kernel(const=["x"])
@cuda.jit
def _reads(x):
    pass


@ag.kernel(const=["x"])
@cuda.jit
def _triple(x, y):
    i = cuda.grid(1)
    if i < y.size:
        y[i] = 3 * x[i]


class _Booked(ag.Instrument):
    def __init__(self) -> None:
        self.accesses: list[list[tuple[int, int]]] = []

    def node_added(self, node) -> None:
        self.accesses.append([(a.lo, a.hi) for a in node.accesses])


def test_kernels_and_library_calls_book_a_view_over_the_bytes_it_spans(sim):
    rnd = random.Random(5)
    allocs = [ag.array(np.zeros(programs.SIZE)) for _ in range(3)]
    booked = _Booked()
    with ag.instrument(booked):
        for _ in range(150):
            op = programs.draw_operand(rnd.randint, contiguous=False)
            view = op.of(allocs[op.alloc])
            for call in (lambda: _reads[1, 1](view), lambda: acp.multiply(view, 1.0)):
                booked.accesses.clear()
                call()
                assert booked.accesses[-1][0] == op.extent, op


@pytest.mark.parametrize("strategy", ["random", "reverse", "starve", "lazy"])
@pytest.mark.parametrize("reader", ["kernel", "library call"])
def test_a_strided_view_is_read_after_a_write_of_the_bytes_past_its_nbytes(strategy, reader):
    """``x[::2]`` of 16 elements spans bytes [0, 120), though its nbytes is 64: a write of
    ``x[8:]`` (bytes [64, 128)) must come before it on the device."""
    for seed in range(3):
        with ag.configure(backend="sim", sim_seed=seed, sim_strategy=strategy):
            x = ag.array(np.arange(16, dtype=np.float64))
            acp.add(x[8:], ag.array(np.full(8, 100.0)), out=x[8:])
            if reader == "kernel":
                y = ag.zeros(8, np.float64)
                _triple[1, 8](x[::2], y)
            else:
                y = x[::2] * 3
            expected = 3 * (np.arange(16.0) + np.r_[np.zeros(8), np.full(8, 100.0)])[::2]
            assert y.numpy().tolist() == expected.tolist()
