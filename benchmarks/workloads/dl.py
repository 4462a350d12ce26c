"""DL: a two-tower CNN (conv 3x3/2 + ReLU, 8 channels; mean pool 5x5/5; conv 3x3/2 + ReLU,
16 channels) whose concatenated features go through one dense unit (``NETWORKS``: the tiny scale
has a narrower network).

DAG of one run (8 kernels, 7 edges, 2 streams; 2D kernels on 8x8 blocks)::

    conv1(x -> x1) [s0]          conv1(y -> y1) [s1]
        |                            |
    pool(x1 -> x11) [s0]         pool(y1 -> y11) [s1]
        |                            |
    conv2(x11 -> x2) [s0]        conv2(y11 -> y2) [s1]
            \\                      /
             concat(x2, y2 -> z) [s0]
                     |
             dot(z, dense -> res) [s0]            -> host reads res[0]

Same DAG as the paper's Figure 6 (the original left the convolutions' inputs unannotated, which
changed nothing: nothing else reads them). Convolutions are "valid" (no padding): an N x N image
gives (N - 3) // 2 + 1 after conv1, that divided by the pooling window (rounded down) after
pooling, then (P - 3) // 2 + 1.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import kernel_module
from ._common import SumOfTerms, block2d, grid2d, threads

K = kernel_module("dl")

STRIDE = 2
#: Per scale: (conv1 channels, conv2 channels, pooling window). The GPU scales run the paper's
#: network. The tiny scale is what the simulator runs, thread by thread in Python, where the
#: paper's network needs a 52 x 52 image for a 2 x 2 output of conv2, and conv1's 5,000 outputs
#: per tower were most of a run: a 2 x 2 pooling window reaches the same 5 x 5 pooled map (so the
#: same 2 x 2 output) from a 21 x 21 image, and with 6 and 8 channels a run is a seventh of the
#: multiply-adds (a quarter of the simulator's time). Every layer still has several input and
#: output channels, and every spatial kernel but conv2 more outputs than the threads of 2 blocks
#: of 8 x 8 (its grid-stride loop turns).
NETWORKS = {"tiny": (6, 8, 2), "small": (8, 16, 5), "medium": (8, 16, 5), "large": (8, 16, 5)}


def shapes(n: int, pool: int) -> tuple[int, int, int]:
    """Spatial sizes after conv1, pooling (window ``pool``) and conv2 for an n x n input."""
    h1 = (n - K.K) // STRIDE + 1
    hp = h1 // pool
    return h1, hp, (hp - K.K) // STRIDE + 1


def _conv(x: np.ndarray, w: np.ndarray, cout: int) -> np.ndarray:
    """Reference convolution (float64): x (H, W, Cin), w flat [m][a][b][l] -> ReLU output."""
    cin = x.shape[2]
    w4 = w.astype(np.float64).reshape(cout, K.K, K.K, cin)
    ho, wo = (x.shape[0] - K.K) // STRIDE + 1, (x.shape[1] - K.K) // STRIDE + 1
    out = np.zeros((ho, wo, cout))
    for a in range(K.K):
        for b in range(K.K):
            patch = x[a:a + STRIDE * (ho - 1) + 1:STRIDE, b:b + STRIDE * (wo - 1) + 1:STRIDE, :]
            out += patch @ w4[:, a, b, :].T
    return np.maximum(out, 0.0)


def _pool(x: np.ndarray, pool: int) -> np.ndarray:
    hp, wp = x.shape[0] // pool, x.shape[1] // pool
    t = x[:hp * pool, :wp * pool].reshape(hp, pool, wp, pool, x.shape[2])
    return t.mean(axis=(1, 3))


class TwoTowerCNN(SumOfTerms):
    name = "dl"
    two_d = True
    SIZES = {"tiny": 21, "small": 400, "medium": 6_400, "large": 16_000}
    expected_dag = {"nodes": 8, "edges": 7, "streams": 2}
    #: The dot product ends in float atomics: runs agree within this.
    atomic_tolerance = 1e-6
    #: Check tolerance relative to sum |z_i w_i| (float32 network, float32 atomics).
    rtol = 1e-4

    def __init__(self, ag: Any, scale: str, seed: int = 0) -> None:
        self.n = n = self.SIZES[scale]
        self.c1, self.c2, self.pool = c1, c2, pool = NETWORKS[scale]
        h1, hp, h2 = shapes(n, pool)
        if h2 < 1:
            raise ValueError(f"image size {n} is too small for the network")
        rng = np.random.default_rng(seed)
        self._x0 = rng.random((n, n, 1), dtype=np.float32)
        self._y0 = rng.random((n, n, 1), dtype=np.float32)
        self._w1 = [rng.uniform(-1, 1, c1 * K.K * K.K).astype(np.float32) for _ in range(2)]
        self._w2 = [rng.uniform(-1, 1, c2 * K.K * K.K * c1).astype(np.float32) for _ in range(2)]
        nz = 2 * h2 * h2 * c2
        self._dense = (rng.uniform(-1, 1, nz) / nz).astype(np.float32)
        self.x, self.y = ag.empty((n, n, 1), np.float32), ag.empty((n, n, 1), np.float32)
        self.w1 = [ag.array(w) for w in self._w1]
        self.w2 = [ag.array(w) for w in self._w2]
        self.x1, self.y1 = (ag.empty((h1, h1, c1), np.float32) for _ in range(2))
        self.x11, self.y11 = (ag.empty((hp, hp, c1), np.float32) for _ in range(2))
        self.x2, self.y2 = (ag.empty((h2, h2, c2), np.float32) for _ in range(2))
        self.z = ag.empty(nz, np.float32)
        self.dense = ag.array(self._dense)
        self.res = ag.zeros(1, np.float32)
        A = K.ANNOTATIONS
        self.k_conv = ag.kernel(K.conv2d, **A["conv2d"])
        self.k_pool = ag.kernel(K.mean_pool, **A["mean_pool"])
        self.k_concat = ag.kernel(K.concat, **A["concat"])
        self.k_dot = ag.kernel(K.dot, **A["dot"])

    def run_device(self, block: Any, num_blocks: int) -> None:
        """The launches of ``run`` (no host access: what ``recorded_static`` replays)."""
        b1, b2, g2 = threads(block), block2d(block), grid2d(num_blocks)
        gx = g2[0]      # (the 2D kernels' grid offset: whole launches, blocks 0 on)
        # the towers interleaved, so both inputs start moving at once
        self.k_conv[g2, b2](self.x, self.w1[0], self.x1, STRIDE, 0, gx)
        self.k_conv[g2, b2](self.y, self.w1[1], self.y1, STRIDE, 0, gx)
        self.k_pool[g2, b2](self.x1, self.x11, self.pool, 0, gx)
        self.k_pool[g2, b2](self.y1, self.y11, self.pool, 0, gx)
        self.k_conv[g2, b2](self.x11, self.w2[0], self.x2, STRIDE, 0, gx)
        self.k_conv[g2, b2](self.y11, self.w2[1], self.y2, STRIDE, 0, gx)
        self.k_concat[num_blocks, b1](self.x2, self.y2, self.z)
        self.k_dot[num_blocks, b1](self.z, self.dense, self.res, self.z.size)

    def run_handopt(self, h: Any, block: Any, num_blocks: int) -> float:
        """Tower x on s0, tower y on s1; s0 waits for s1, then concat and dot."""
        b1, b2, g2 = threads(block), block2d(block), grid2d(num_blocks)
        s0, s1 = h.stream(0), h.stream(1)
        h.prefetch(self.x, s0)
        h.prefetch(self.res, s0)
        h.prefetch(self.y, s1)
        gx = g2[0]
        for s, img, t1, t11, t2, i in ((s0, self.x, self.x1, self.x11, self.x2, 0),
                                       (s1, self.y, self.y1, self.y11, self.y2, 1)):
            h.launch(self.k_conv, g2, b2, s, img, self.w1[i], t1, STRIDE, 0, gx)
            h.launch(self.k_pool, g2, b2, s, t1, t11, self.pool, 0, gx)
            h.launch(self.k_conv, g2, b2, s, t11, self.w2[i], t2, STRIDE, 0, gx)
        e = h.event()
        h.record(e, s1)
        h.wait(s0, e)
        h.launch(self.k_concat, num_blocks, b1, s0, self.x2, self.y2, self.z)
        h.launch(self.k_dot, num_blocks, b1, s0, self.z, self.dense, self.res, self.z.size)
        h.sync_stream(s0)
        return float(self.res[0])

    def _terms(self) -> np.ndarray:
        feats = []
        for img, w1, w2 in zip((self._x0, self._y0), self._w1, self._w2):
            t = _conv(_pool(_conv(img.astype(np.float64), w1, self.c1), self.pool), w2, self.c2)
            feats.append(t.ravel())
        return np.concatenate(feats) * self._dense.astype(np.float64)
