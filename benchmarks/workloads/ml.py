"""ML: ensemble of a categorical Naive Bayes and a Ridge Regression classifier.

DAG of one run (10 kernels, 10 edges, 2 streams)::

    rr_1(X -> Z) [s0]                  nb_1(X, W -> R1) [s1]      (X is const: both start at once)
        |                                   |
    rr_2(Z -> R2) [s0]                 nb_2(R1 -> amax) [s1]
        |                                   |
    rr_3(R2 += b) [s0]                 nb_3(R1, amax -> lse) [s1]
        |                                   |
    softmax(R2) [s0]                   nb_4(R1, lse) [s1]    (also nb_1 -> nb_4, see below)
        |                                   |
        |                              softmax(R1) [s1]
         \\___________________________________|
                                       argmax(R1, R2 -> labels) [s1]   -> host reads the labels

Edges: rr_1->rr_2, rr_2->rr_3, rr_3->softmax2, nb_1->nb_2, nb_2->nb_3, nb_1->nb_4, nb_3->nb_4,
nb_4->softmax1, softmax1->argmax, softmax2->argmax. nb_1->nb_4 (write after write of R1) is
redundant: the runtime keeps, per stream, only the latest reader of R1 (nb_3 covers nb_2), so its
filter no longer sees that nb_1 is a parent of another parent; it costs nothing (same stream).

Same two-branch shape as the paper's Figure 6: the ridge branch (with the one-thread-per-feature
``rr_1``) is the longer one. Fixes: ``rr_1`` reads X row-major like every other kernel (the original
indexed it feature-major), softmax subtracts the row maximum, and the reference computes the
log-sum-exp per row (the original reduced over the whole matrix).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from .. import kernel_module
from ._common import streamed_bytes, threads

K = kernel_module("ml")

FEATURES, CLASSES = 200, 10
assert CLASSES <= K.CLASSES_MAX, "kernels.ml.softmax holds a row of scores in registers"


def _softmax(a: np.ndarray) -> np.ndarray:
    e = np.exp(a - a.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


class Ensemble:
    name = "ml"
    two_d = False
    #: tiny: fewer rows than one UNROLL batch of rr_1 (the simulator runs it per thread in
    #: Python); test_benchmarks.py covers full batches and the tail of rr_1 on their own. 8 rows
    #: keep the 80 (row, class) scores of nb_1 and rr_2 more than the tests' 2 blocks of 32
    #: threads (their grid-stride loops turn) for a third of the simulator time of 24 rows.
    SIZES = {"tiny": 8, "small": 2_000, "medium": 600_000, "large": 4_000_000}
    expected_dag = {"nodes": 10, "edges": 10, "streams": 2}
    #: Labels must equal the reference's wherever the reference's top two summed probabilities
    #: differ by more than this (float32 on the GPU can break near-ties either way).
    margin = 1e-3

    def __init__(self, ag: Any, scale: str, seed: int = 0) -> None:
        self.n = n = self.SIZES[scale]
        self._x, self._nb_w, self._prior, self._coef, self._intercept = model(n, seed)
        self._r1_0 = np.tile(self._prior, (n, 1))
        self.x = ag.array(self._x)
        self.nb_w = ag.array(self._nb_w)
        self.coef = ag.array(self._coef)
        self.intercept = ag.array(self._intercept)
        self.z = ag.empty((n, FEATURES), np.float32)
        self.r1 = ag.empty((n, CLASSES), np.float32)
        self.r2 = ag.empty((n, CLASSES), np.float32)
        self.amax = ag.empty(n, np.float32)
        self.lse = ag.empty(n, np.float32)
        self.labels = ag.empty(n, np.int32)
        for name in ("rr_1", "rr_2", "rr_3", "nb_1", "nb_2", "nb_3", "nb_4", "softmax", "argmax"):
            setattr(self, "k_" + name, ag.kernel(getattr(K, name), **K.ANNOTATIONS[name]))

    def streamed_bytes(self) -> int:
        """Bytes a streaming iteration must move to the device:
        the score matrices the reset rewrites (the inputs stay resident)."""
        return streamed_bytes(self.r1, self.r2)

    def reset(self) -> None:
        self.reset_accumulators()

    def reset_accumulators(self) -> None:
        """The score matrices: R1 starts at the class log prior, R2 at 0 (kernels add to them)."""
        self.r1[...] = self._r1_0
        self.r2[...] = 0

    def read(self) -> np.ndarray:
        return self.labels.numpy()

    def run(self, block: Any, num_blocks: int) -> np.ndarray:
        self.run_device(block, num_blocks)
        return self.read()

    def run_device(self, block: Any, num_blocks: int) -> None:
        """The launches of ``run`` (no host access: what ``recorded_static`` replays)."""
        g, b = num_blocks, threads(block)
        self.k_rr_1[g, b](self.x, self.z)
        self.k_nb_1[g, b](self.x, self.nb_w, self.r1)
        self.k_rr_2[g, b](self.z, self.coef, self.r2)
        self.k_nb_2[g, b](self.r1, self.amax)
        self.k_nb_3[g, b](self.r1, self.amax, self.lse)
        self.k_rr_3[g, b](self.r2, self.intercept)
        self.k_nb_4[g, b](self.r1, self.lse)
        self.k_softmax[g, b](self.r1)
        self.k_softmax[g, b](self.r2)
        self.k_argmax[g, b](self.r1, self.r2, self.labels)

    def run_handopt(self, h: Any, block: Any, num_blocks: int) -> np.ndarray:
        """Ridge chain on s0, Naive Bayes chain on s1; argmax joins on s0 (the longer branch)."""
        g, b = num_blocks, threads(block)
        s0, s1 = h.stream(0), h.stream(1)
        h.prefetch(self.r2, s0)
        h.prefetch(self.r1, s1)
        h.launch(self.k_rr_1, g, b, s0, self.x, self.z)
        h.launch(self.k_nb_1, g, b, s1, self.x, self.nb_w, self.r1)
        h.launch(self.k_rr_2, g, b, s0, self.z, self.coef, self.r2)
        h.launch(self.k_nb_2, g, b, s1, self.r1, self.amax)
        h.launch(self.k_nb_3, g, b, s1, self.r1, self.amax, self.lse)
        h.launch(self.k_rr_3, g, b, s0, self.r2, self.intercept)
        h.launch(self.k_nb_4, g, b, s1, self.r1, self.lse)
        h.launch(self.k_softmax, g, b, s1, self.r1)
        h.launch(self.k_softmax, g, b, s0, self.r2)
        e = h.event()
        h.record(e, s1)
        h.wait(s0, e)
        h.launch(self.k_argmax, g, b, s0, self.r1, self.r2, self.labels)
        h.sync_stream(s0)
        return self.labels.numpy()

    @functools.cached_property
    def _scores(self) -> np.ndarray:
        """Reference summed class probabilities (float64; computed once, inputs are fixed)."""
        return ensemble_scores(self._x, self._nb_w, self._prior, self._coef, self._intercept)

    def reference(self) -> np.ndarray:
        return np.argmax(self._scores, axis=1).astype(np.int32)

    def check(self, result: Any) -> tuple[bool, str]:
        return check_labels(self._scores, result, self.margin)


def model(n: int, seed: int = 0) -> tuple[np.ndarray, ...]:
    """The workload's inputs: (X, Naive Bayes log weights, log prior, ridge coefficients,
    intercept), ``n`` rows."""
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 10, (n, FEATURES), dtype=np.int32)
    p = rng.random((CLASSES, FEATURES)) + 0.1
    nb_w = np.log(p / p.sum(axis=1, keepdims=True)).astype(np.float32)
    prior = rng.random(CLASSES) + 0.5
    prior = np.log(prior / prior.sum()).astype(np.float32)
    coef = rng.normal(0.0, 0.1, (CLASSES, FEATURES)).astype(np.float32)
    intercept = rng.normal(0.0, 0.1, CLASSES).astype(np.float32)
    return x, nb_w, prior, coef, intercept


def ensemble_scores(x: np.ndarray, nb_w: np.ndarray, prior: np.ndarray, coef: np.ndarray,
                    intercept: np.ndarray) -> np.ndarray:
    """The two classifiers' summed class probabilities per row, in float64."""
    x = x.astype(np.float64)
    nb = x @ nb_w.T.astype(np.float64) + prior
    amax = nb.max(axis=1, keepdims=True)
    lse = np.log(np.exp(nb - amax).sum(axis=1, keepdims=True)) + amax
    p_nb = _softmax(np.exp(nb - lse))
    z = (x - x.mean(axis=0)) / np.where(x.std(axis=0) > 0, x.std(axis=0), 1.0)
    p_rr = _softmax(z @ coef.T.astype(np.float64) + intercept)
    return p_nb + p_rr


def check_labels(scores: np.ndarray, result: Any, margin: float) -> tuple[bool, str]:
    """Labels equal the reference's argmax wherever its top two scores differ by more than
    ``margin`` (float32 on the GPU can break near-ties either way)."""
    top2 = np.sort(scores, axis=1)[:, -2:]
    clear = (top2[:, 1] - top2[:, 0]) > margin
    got = np.asarray(result)
    if got.shape != (scores.shape[0],):
        return False, f"labels shape {got.shape} != ({scores.shape[0]},)"
    wrong = got != np.argmax(scores, axis=1)
    bad = int(np.count_nonzero(wrong & clear))
    return bad == 0, (f"{bad} wrong labels of {int(clear.sum())} with margin > {margin:g}; "
                      f"{int(np.count_nonzero(wrong & ~clear))} differ among "
                      f"{int((~clear).sum())} near-ties")
