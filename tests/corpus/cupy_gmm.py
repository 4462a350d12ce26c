"""A Gaussian mixture fitted by expectation-maximization, ported from CuPy's examples.

Origin: repository ``cupy/cupy``, ``examples/gmm/gmm.py`` (``estimate_gaussian_parameters``,
``estimate_log_prob``, ``e_step``, ``m_step``, ``train_gmm``, ``predict``; the data as in
``examples/gmm/gmm_train.py``: two Gaussian clouds drawn on the host). The plotting function
``draw`` is left out (it needs matplotlib and writes a file).
"""

from __future__ import annotations

import logging

import numpy as np

import asyncgpu.cupy as acp  # asyncgpu: the scheduled CuPy namespace replaces ``import cupy``

log = logging.getLogger(__name__)

SIZES = {"sim": 400, "gpu": 500_000}     # points per cloud
# The reference writes the log-density as a sum of squared distances instead of the expanded
# dot products: equal up to rounding. The labels and the iteration count are compared exactly.
TOLERANCE = {"sim": {"rtol": 1e-10, "atol": 1e-12, "pred": {"rtol": 0.0, "atol": 0.0},
                     "n_iter": {"rtol": 0.0, "atol": 0.0}},
             # cuBLAS and CuPy's reductions sum in another order than NumPy
             "gpu": {"rtol": 1e-7, "atol": 1e-9, "pred": {"rtol": 0.0, "atol": 0.0},
                     "n_iter": {"rtol": 0.0, "atol": 1.0}}}


def estimate_gaussian_parameters(X, xp, resp):
    nk = xp.sum(resp, axis=0)
    means = xp.dot(resp.T, X) / nk[:, None]
    avg_X2 = xp.dot(resp.T, X * X) / nk[:, None]
    avg_X_means = means * xp.dot(resp.T, X) / nk[:, None]
    covariances = avg_X2 - 2 * avg_X_means + means ** 2
    return nk / len(X), means, covariances


def estimate_log_prob(X, xp, inv_cov, means):
    n_features = X.shape[1]
    log_det = xp.sum(xp.log(inv_cov), axis=1)
    precisions = inv_cov ** 2
    log_prob = xp.sum((means ** 2 * precisions), 1) - \
        2 * xp.dot(X, (means * precisions).T) + xp.dot(X ** 2, precisions.T)
    return -0.5 * (n_features * xp.log(2 * np.pi) + log_prob) + log_det


def e_step(X, xp, inv_cov, means, weights):
    weighted_log_prob = estimate_log_prob(X, xp, inv_cov, means) + \
        xp.log(weights)
    log_prob_norm = xp.log(xp.sum(xp.exp(weighted_log_prob), axis=1))
    log_resp = weighted_log_prob - log_prob_norm[:, None]
    return xp.mean(log_prob_norm), log_resp


def m_step(X, xp, log_resp):
    weights, means, covariances = \
        estimate_gaussian_parameters(X, xp, xp.exp(log_resp))
    inv_cov = 1 / xp.sqrt(covariances)
    return weights, means, covariances, inv_cov


def train_gmm(X, max_iter, tol, seed=0):  # asyncgpu: the generator's seed is a parameter
    xp = acp.get_array_module(X)  # asyncgpu: acp for cupy
    lower_bound = -np.inf  # asyncgpu: np.infty is gone from NumPy 2
    converged = False
    weights = xp.array([0.5, 0.5], dtype=np.float32)
    # asyncgpu: CuPy's module-level random functions share a hidden global state, which
    # asyncgpu cannot order: the draws come from an explicit generator, and CuPy's Generator
    # has no ``normal``, so normal(loc, scale) is written as loc + scale * standard_normal
    rng = xp.random.default_rng(seed)
    mean1 = 3 + xp.array([1, 2]) * rng.standard_normal(size=2)  # asyncgpu: see above
    mean2 = -3 + xp.array([2, 1]) * rng.standard_normal(size=2)  # asyncgpu: see above
    means = xp.stack((mean1, mean2))
    covariances = rng.random((2, 2))  # asyncgpu: rand(2, 2) of the generator
    initial = (means.get(), covariances.get())  # asyncgpu: the draws, for the reference
    inv_cov = 1 / xp.sqrt(covariances)

    for n_iter in range(max_iter):  # asyncgpu: range for six.moves.range
        prev_lower_bound = lower_bound
        log_prob_norm, log_resp = e_step(X, xp, inv_cov, means, weights)
        weights, means, covariances, inv_cov = m_step(X, xp, log_resp)
        lower_bound = log_prob_norm
        change = lower_bound - prev_lower_bound
        if abs(change) < tol:
            converged = True
            break

    if not converged:
        msg = 'Failed to converge. Try different init parameters' \
              'or increase max_iter, tol or check for degenerate data.'
        log.warning(msg)  # asyncgpu: logged, not printed

    # asyncgpu: also the iterations run and the initial draws, for the comparison
    return inv_cov, means, weights, covariances, n_iter, initial


def predict(X, inv_cov, means, weights):
    xp = acp.get_array_module(X)  # asyncgpu: acp for cupy
    log_prob = estimate_log_prob(X, xp, inv_cov, means)
    return (log_prob + xp.log(weights)).argmax(axis=1)


def _data(num):
    # gmm_train.py's training set: two clouds of ``num`` points each
    rng = np.random.default_rng(7)
    mean1, mean2 = np.array([3.0, 3.0]), np.array([-3.0, -3.0])
    cov = np.array([[1.0, 0.0], [0.0, 1.0]])
    X_train = np.r_[rng.multivariate_normal(mean1, cov, num),
                    rng.multivariate_normal(mean2, cov, num)].astype(np.float32)
    return X_train


def run(num):
    X = acp.asarray(_data(num))
    inv_cov, means, weights, covariances, n_iter, initial = train_gmm(X, max_iter=30, tol=1e-4)
    pred = predict(X, inv_cov, means, weights)
    return {"means": means.get(), "covariances": covariances.get(), "weights": weights.get(),
            "pred": pred.get(), "n_iter": n_iter, "initial_means": initial[0],
            "initial_covariances": initial[1]}


def reference(num, got):
    # EM for a diagonal two-component mixture in NumPy, from the run's initial draws (the
    # values of the device generator differ between backends)
    X = _data(num).astype(np.float64)
    Xf = _data(num)
    means, cov = got["initial_means"], got["initial_covariances"]
    weights = np.array([0.5, 0.5], dtype=np.float32)
    prev = -np.inf
    n_iter = 0

    def log_prob_of(X, inv_cov, means):
        prec = inv_cov ** 2
        quad = ((X[:, None, :] - means[None, :, :]) ** 2 * prec[None]).sum(axis=2)
        return -0.5 * (X.shape[1] * np.log(2 * np.pi) + quad) + np.log(inv_cov).sum(axis=1)

    inv_cov = 1 / np.sqrt(cov)
    for n_iter in range(30):
        wlp = log_prob_of(Xf, inv_cov, means) + np.log(weights)
        norm = np.log(np.exp(wlp).sum(axis=1))
        resp = np.exp(wlp - norm[:, None])
        nk = resp.sum(axis=0)
        means = resp.T @ Xf / nk[:, None]
        cov = resp.T @ (Xf * Xf) / nk[:, None] - means ** 2
        weights = nk / len(X)
        inv_cov = 1 / np.sqrt(cov)
        lower = norm.mean()
        if abs(lower - prev) < 1e-4:
            break
        prev = lower
    pred = (log_prob_of(Xf, inv_cov, means) + np.log(weights)).argmax(axis=1)
    return {"means": means, "covariances": cov, "weights": weights, "pred": pred,
            "n_iter": n_iter}
