"""Warp functions in Numba kernels on ``sim``: shuffles, votes, matches and ``syncwarp`` give
what the GPU gives (tests/warp_kernels.py holds the kernels and their answers, which
tests/gpu/test_gpu_warps.py checks on the GPU); what the GPU leaves undefined is a fault naming
the lane."""

from __future__ import annotations

import re

import numpy as np
import pytest
from numba import cuda

import warp_kernels

FULL = 0xFFFFFFFF


@pytest.mark.parametrize("seed", [0, 1])
def test_warp_shuffles_votes_and_matches_compute_what_the_gpu_computes(sim, seed):
    for name, (got, want) in warp_kernels.run(seed).items():
        np.testing.assert_array_equal(got, want, err_msg=name)


@pytest.mark.parametrize("strategy", ["reverse", "starve", "pct"])
def test_warp_functions_give_the_same_answers_in_any_order_the_simulator_takes(strategy):
    import asyncgpu as ag

    with ag.configure(backend="sim", sim_seed=3, sim_strategy=strategy):
        for name, (got, want) in warp_kernels.run(2).items():
            np.testing.assert_array_equal(got, want, err_msg=name)


def _fault_of(ag, kernel, block, *arrays):
    kernel[1, block](*arrays)
    with pytest.raises(ag.KernelFault) as info:
        ag.synchronize()
    return str(info.value)


def test_a_shuffle_from_a_lane_past_the_blocks_end_is_a_fault_naming_the_lane(sim):
    ag = sim

    @ag.kernel(out=["y"])
    @cuda.jit
    def down(y):
        i = cuda.grid(1)
        y[i] = cuda.shfl_down_sync(FULL, i, 8)

    message = _fault_of(ag, down, 20, ag.empty(20, np.int64))    # (lanes 20-31 do not exist)
    assert re.search(r"shfl_down_sync: lane 1\d reads lane 2\d, which is not in the call",
                     message), message
    assert "undefined on the GPU" in message
    y = ag.zeros(32, np.int64)                  # the runtime goes on
    down[1, 32](y)
    assert y.get().tolist() == [min(i + 8, 31) if i < 24 else i for i in range(32)]


def test_a_mask_that_leaves_the_calling_lane_out_is_a_fault(sim):
    ag = sim

    @ag.kernel(out=["y"])
    @cuda.jit
    def left_out(y):
        i = cuda.grid(1)
        y[i] = cuda.shfl_sync(0x0000FFFF, i, 0)

    message = _fault_of(ag, left_out, 32, ag.empty(32, np.int64))
    assert "leaves the lane out" in message and "mask 0x0000ffff" in message


def test_a_lane_that_returned_before_a_shuffle_is_not_waited_for_and_not_read(sim):
    """Lanes that return early leave the round (the rest do not wait for them forever); a
    shuffle that reads one is a fault, where the GPU gives an undefined value."""
    ag = sim

    @ag.kernel(out=["y"])
    @cuda.jit
    def early(y, n):
        i = cuda.grid(1)
        if i >= n:
            return
        y[i] = cuda.shfl_xor_sync(FULL, i, 1) + cuda.ballot_sync(FULL, True)

    y = ag.zeros(32, np.int64)
    early[1, 32](y, 32)
    assert y.get().tolist() == [(i ^ 1) - 1 for i in range(32)]     # (a full ballot: -1)
    message = _fault_of(ag, early, 32, ag.zeros(32, np.int64), 31)
    assert "reads lane 31" in message and "returned" in message


def test_lanes_of_one_mask_making_different_calls_is_a_fault(sim):
    ag = sim

    @ag.kernel(out=["y"])
    @cuda.jit
    def mixed(y):
        i = cuda.grid(1)
        if i % 2:
            y[i] = cuda.ballot_sync(FULL, True)
        else:
            y[i] = cuda.shfl_sync(FULL, i, 0)

    message = _fault_of(ag, mixed, 32, ag.empty(32, np.int64))
    assert "every lane of the mask must make the same call" in message


def test_threads_waiting_for_each_other_at_a_barrier_and_in_a_shuffle_fail_instead_of_hanging(
        sim):
    """Half a warp at cuda.syncthreads(), the other half in a shuffle of the whole warp: the
    GPU hangs; the simulator says where each waits, and the runtime goes on."""
    ag = sim

    @ag.kernel(out=["y"])
    @cuda.jit
    def split_up(y):
        i = cuda.grid(1)
        if i < 16:
            cuda.syncthreads()
            y[i] = 0
        else:
            y[i] = cuda.shfl_sync(FULL, i, 0)

    message = _fault_of(ag, split_up, 32, ag.empty(32, np.int64))
    assert "wait for each other: 16 at cuda.syncthreads(), 16 in cuda.shfl_sync" in message
    assert "on the GPU this hangs" in message


def test_lanes_waiting_in_two_rounds_that_need_each_other_fail_instead_of_hanging(sim):
    ag = sim

    @ag.kernel(out=["y"])
    @cuda.jit
    def crossed(y):
        i = cuda.grid(1)
        if i == 5:
            y[i] = cuda.shfl_sync(0x3F, i, 0)       # (waits for lanes 0-4)
        else:
            y[i] = cuda.shfl_sync(FULL, i, 0)       # (waits for lane 5)

    message = _fault_of(ag, crossed, 32, ag.empty(32, np.int64))
    assert "wait for each other: 32 in" in message and "mask 0x0000003f: 1 of 6 lanes" in message


def test_a_shuffle_of_a_value_numba_cannot_shuffle_is_a_fault(sim):
    """Numba's shuffles compile for int32, int64, float32 and float64 only: a complex value
    is refused on the GPU, and on sim."""
    ag = sim

    @ag.kernel(out=["y"])
    @cuda.jit
    def complex_shuffle(y):
        i = cuda.grid(1)
        y[i] = cuda.shfl_sync(FULL, 1j * i, 0).imag

    message = _fault_of(ag, complex_shuffle, 32, ag.empty(32, np.float64))
    assert "shuffles 32- and 64-bit integers and floats" in message
