"""Numba kernels calling the warp functions (shuffles, votes, matches, ``syncwarp``), and what
each must compute, in NumPy: run by tests/test_warps.py on ``sim`` and by
tests/gpu/test_gpu_warps.py on the GPU, so that both give the same answers."""

from __future__ import annotations

import numpy as np
from numba import cuda

import asyncgpu as ag

FULL = 0xFFFFFFFF
BLOCK = 64
GRID = 2
N = BLOCK * GRID


@ag.kernel(const=["x"], out=["sums", "totals", "scans", "fifth"])
@cuda.jit
def shuffles(x, sums, totals, scans, fifth):
    i = cuda.grid(1)
    lane = cuda.laneid
    v = x[i]
    down = v
    k = 16
    while k > 0:
        down += cuda.shfl_down_sync(FULL, down, k)
        k //= 2
    if lane == 0:
        sums[i // 32] = down
    every = v
    k = 1
    while k < 32:
        every += cuda.shfl_xor_sync(FULL, every, k)
        k *= 2
    totals[i] = every
    scan = v
    k = 1
    while k < 32:
        up = cuda.shfl_up_sync(FULL, scan, k)
        if lane >= k:
            scan += up
        k *= 2
    scans[i] = scan
    fifth[i] = cuda.shfl_sync(FULL, v, 5)


@ag.kernel(const=["x", "keys"], out=["ballots", "votes", "matches", "lower"])
@cuda.jit
def votes(x, keys, ballots, votes, matches, lower):
    i = cuda.grid(1)
    positive = x[i] > 0
    ballots[i] = cuda.ballot_sync(FULL, positive)
    votes[i, 0] = 1 if cuda.all_sync(FULL, positive) else 0
    votes[i, 1] = 1 if cuda.any_sync(FULL, positive) else 0
    votes[i, 2] = 1 if cuda.eq_sync(FULL, positive) else 0
    matches[i, 0] = cuda.match_any_sync(FULL, keys[i])
    same_mask, same = cuda.match_all_sync(FULL, keys[i] // 100)
    matches[i, 1] = same_mask
    matches[i, 2] = 1 if same else 0
    lower[i] = cuda.lanemask_lt()


@ag.kernel(const=["x"], out=["halves", "mirrored"])
@cuda.jit
def half_warps(x, halves, mirrored):
    i = cuda.grid(1)
    lane = cuda.laneid
    v = x[i]
    # (each half of the warp its own collective, at the same time)
    mask = 0x0000FFFF if lane < 16 else 0xFFFF0000
    k = 1
    while k < 16:
        v += cuda.shfl_xor_sync(mask, v, k)
        k *= 2
    halves[i] = v
    seen = cuda.shared.array(BLOCK, np.float32)
    t = cuda.threadIdx.x
    seen[t] = x[i]
    cuda.syncwarp(FULL)
    mirrored[i] = seen[t - lane + 31 - lane]


@ag.kernel(out=["active"])
@cuda.jit
def partial_warp(active):
    """Launched with 48 threads a block: the second warp has 16 lanes."""
    i = cuda.grid(1)
    active[i] = cuda.activemask()


def inputs(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.integers(-3, 8, N).astype(np.float32)          # (exact sums in float32)
    keys = rng.integers(0, 3, N).astype(np.int32) + 100 * (np.arange(N) // 32 % 2)
    keys[-5:] += 100                # (the last warp's hundreds differ: match_all is false)
    return x, keys


def expected_shuffles(x: np.ndarray) -> tuple[np.ndarray, ...]:
    warps = x.reshape(-1, 32)
    sums = warps.sum(axis=1)
    totals = np.repeat(sums, 32)
    scans = np.cumsum(warps, axis=1).ravel()
    fifth = np.repeat(warps[:, 5], 32)
    return sums, totals, scans, fifth


def expected_votes(x: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, ...]:
    positive = (x > 0).reshape(-1, 32)
    bits = 1 << np.arange(32, dtype=np.int64)
    ballot = (positive * bits).sum(axis=1)
    votes = np.stack([positive.all(axis=1), positive.any(axis=1),
                      positive.all(axis=1) | ~positive.any(axis=1)], axis=1).astype(np.int64)
    k = keys.reshape(-1, 32)
    match_any = np.array([[(bits * (row == v)).sum() for v in row] for row in k]).ravel()
    hundreds = k // 100
    same = (hundreds == hundreds[:, :1]).all(axis=1)
    match_all = np.stack([np.repeat(np.where(same, FULL, 0), 32), np.repeat(same, 32)], axis=1)
    lower = np.tile((1 << np.arange(32, dtype=np.int64)) - 1, len(k))
    # (Numba types a ballot's and a match's mask int32: a full warp's is -1)
    signed = lambda m: np.asarray(m, np.int64).astype(np.uint32).view(np.int32)  # noqa: E731
    match_all[:, 0] = signed(match_all[:, 0])
    return (signed(np.repeat(ballot, 32)), np.repeat(votes, 32, axis=0),
            np.column_stack([signed(match_any), match_all]), lower)


def expected_half_warps(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    halves = np.repeat(x.reshape(-1, 16).sum(axis=1), 16)
    mirrored = x.reshape(-1, 32)[:, ::-1].ravel()
    return halves, mirrored


def run(seed: int = 0) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Every kernel on the current backend: name -> (got, expected)."""
    x_host, keys_host = inputs(seed)
    x, keys = ag.array(x_host), ag.array(keys_host)
    sums, totals = ag.empty(N // 32, np.float32), ag.empty(N, np.float32)
    scans, fifth = ag.empty(N, np.float32), ag.empty(N, np.float32)
    shuffles[GRID, BLOCK](x, sums, totals, scans, fifth)
    ballots, vote = ag.empty(N, np.int64), ag.empty((N, 3), np.int64)
    matches, lower = ag.empty((N, 3), np.int64), ag.empty(N, np.int64)
    votes[GRID, BLOCK](x, keys, ballots, vote, matches, lower)
    halves, mirrored = ag.empty(N, np.float32), ag.empty(N, np.float32)
    half_warps[GRID, BLOCK](x, halves, mirrored)
    active = ag.empty(GRID * 48, np.int64)
    partial_warp[GRID, 48](active)
    got = {"sums": sums, "totals": totals, "scans": scans, "fifth": fifth, "ballots": ballots,
           "votes": vote, "matches": matches, "lanemask_lt": lower, "halves": halves,
           "mirrored": mirrored, "activemask": active}
    want = dict(zip(("sums", "totals", "scans", "fifth"), expected_shuffles(x_host)))
    want.update(zip(("ballots", "votes", "matches", "lanemask_lt"),
                    expected_votes(x_host, keys_host)))
    want.update(zip(("halves", "mirrored"), expected_half_warps(x_host)))
    want["activemask"] = np.tile(np.repeat([FULL, 0xFFFF], [32, 16]), GRID)
    return {name: (got[name].get(), want[name]) for name in got}
