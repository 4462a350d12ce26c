"""The conjugate gradient method, ported from CuPy's examples.

Origin: repository ``cupy/cupy``, ``examples/cg/cg.py`` (``fit``, and the problem set up in
``run``: a random symmetric positive definite matrix ``A @ A.T`` of integers and a right-hand
side ``b = A @ x_ans``). The timer and the argument parser are left out.
"""

from __future__ import annotations

import logging

import numpy as np

import asyncgpu.cupy as acp  # asyncgpu: the scheduled CuPy namespace replaces ``import cupy``

log = logging.getLogger(__name__)

SIZES = {"sim": 24, "gpu": 2000}
# The sim run repeats NumPy's arithmetic exactly; on a GPU cuBLAS sums in another order, so the
# iterates differ by rounding, and both must still solve the system (the original's check).
TOLERANCE = {"sim": {"rtol": 0.0, "atol": 0.0, "error": {"rtol": 0.0, "atol": 1e-3}},
             "gpu": {"rtol": 1e-6, "atol": 1e-6, "iterations": {"rtol": 0.1, "atol": 2.0},
                     "error": {"rtol": 0.0, "atol": 1e-3}}}


def fit(A, b, tol, max_iter):
    # Note that this function works even tensors 'A' and 'b' are NumPy or CuPy
    # arrays.
    xp = acp.get_array_module(A)  # asyncgpu: acp for cupy
    x = xp.zeros_like(b, dtype=np.float64)
    r0 = b - xp.dot(A, x)
    p = r0
    for i in range(max_iter):
        a = xp.inner(r0, r0) / xp.inner(p, xp.dot(A, p))
        x += a * p
        r1 = r0 - a * xp.dot(A, p)
        if xp.linalg.norm(r1) < tol:
            return x, i  # asyncgpu: also the iterations, for the comparison
        b = xp.inner(r1, r1) / xp.inner(r0, r0)
        p = r1 + b * p
        r0 = r1
    log.warning('Failed to converge. Increase max-iter or tol.')  # asyncgpu: logged
    return x, max_iter  # asyncgpu: also the iterations


def _problem(N):
    # Create the large symmetric matrix 'A' (the original's run, with a seeded generator).
    rng = np.random.default_rng(2000)
    A = rng.integers(-50, 50, size=(N, N))
    A = (A @ A.T).astype(np.float64)
    x_ans = rng.integers(-50, 50, size=N).astype(np.float64)
    b = np.dot(A, x_ans)
    return A, b, x_ans


def run(N, tol=0.1, max_iter=5000):
    A, b, x_ans = _problem(N)
    A_gpu = acp.asarray(A)
    b_gpu = acp.asarray(b)
    x_gpu, iterations = fit(A_gpu, b_gpu, tol, max_iter)
    x = acp.asnumpy(x_gpu)
    return {"x": x, "iterations": iterations, "error": np.linalg.norm(x - x_ans)}


def reference(N, got=None, tol=0.1, max_iter=5000):
    # the same iteration in NumPy (the original's CPU run)
    A, b, x_ans = _problem(N)
    x = np.zeros_like(b)
    r0 = b - A @ x
    p = r0
    for i in range(max_iter):
        a = np.inner(r0, r0) / np.inner(p, A @ p)
        x += a * p
        r1 = r0 - a * (A @ p)
        if np.linalg.norm(r1) < tol:
            break
        p = r1 + np.inner(r1, r1) / np.inner(r0, r0) * p
        r0 = r1
    return {"x": x, "iterations": i, "error": 0.0}
