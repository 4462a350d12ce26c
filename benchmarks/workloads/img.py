"""IMG: image sharpening pipeline (three blurs, Sobel masks, min/max, contrast, unsharpen, combine).

DAG of one run (11 kernels, 12 edges, 4 streams; 2D kernels on 8x8 blocks)::

    blur_small [s0]          blur_large [s1]                 blur_unsharpen [s2]
        |                        |        \\                        |
    sobel_small [s0]         sobel_large [s1]  \\               unsharpen [s2]
        |                    /         \\         \\                 |
        |              maximum [s1]  minimum [s3]  \\               |
        |                    \\         /           \\              |
        |                    extend [s1]  ---------- combine(unsharp, blur_large, mask_large) [s2]
        |                                                         |
        +------------------------------------------ combine(image2, blur_small, mask_small) [s2]
                                                                  -> host reads 3 rows of image3

Edges: blur_s->sobel_s, blur_l->sobel_l, sobel_l->max, sobel_l->min, max->extend, min->extend,
blur_u->unsharpen, unsharpen->combine1, blur_l->combine1, extend->combine1, combine1->combine2,
sobel_s->combine2. blur_l->combine1 is implied by blur_l->sobel_l->max->extend->combine1; the
runtime's filter (a parent of another parent) keeps it, GrCUDA's transitive BFS would drop it.

Differences from the paper's Figure 6: unsharpen waits only for blur_unsharpen (the original left
its image argument unannotated, so it waited for all three blurs by write-after-read), the two
zero-length ``reset`` kernels are gone, and Sobel's input is const (combine reads the blurs
directly). Fixes: centred Gaussian filters (integer centre d // 2, not d / 2) and the minimum
starting at +inf (the original started at 0, so the minimum was always 0).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from .. import kernel_module
from ._common import block2d, compare_dict, grid2d, streamed_bytes, threads

K = kernel_module("img")

AMOUNT = np.float32(0.5)     # unsharpen strength


def gaussian_filter(d: int, sigma: float) -> np.ndarray:
    """d x d Gaussian weights centred at (d // 2, d // 2), summing to 1."""
    a = np.arange(d) - d // 2
    w = np.exp(-0.5 * (a[:, None] ** 2 + a[None, :] ** 2) / sigma ** 2)
    return w / w.sum()


def _correlate(img: np.ndarray, w: np.ndarray) -> np.ndarray:
    """sum_{a, b} w[a, b] img[i + a - r, j + b - r] with zero padding (float64)."""
    r = w.shape[0] // 2
    p = np.pad(img, r)
    rows, cols = img.shape
    out = np.zeros(img.shape)
    for a in range(w.shape[0]):
        for b in range(w.shape[1]):
            out += w[a, b] * p[a:a + rows, b:b + cols]
    return out


def _sobel(img: np.ndarray) -> np.ndarray:
    gx = _correlate(img, np.array([[-1, -2, -1], [0, 0, 0], [1, 2, 1]], np.float64))
    gy = _correlate(img, np.array([[-1, 0, 1], [-2, 0, 2], [-1, 0, 1]], np.float64))
    return np.sqrt(gx * gx + gy * gy)


class Image:
    name = "img"
    two_d = True
    SIZES = {"tiny": 24, "small": 400, "medium": 5_300, "large": 12_800}
    expected_dag = {"nodes": 11, "edges": 12, "streams": 4}
    #: Check tolerance relative to the largest pixel (float32 pipeline, contrast gain up to ~10).
    rtol = 1e-4

    def __init__(self, ag: Any, scale: str, seed: int = 0) -> None:
        self.n = n = self.SIZES[scale]
        rng = np.random.default_rng(seed)
        self._image0 = rng.random((n, n), dtype=np.float32)
        self.filters = [gaussian_filter(3, 1.0), gaussian_filter(5, 10.0), gaussian_filter(3, 5.0)]
        self.f_small, self.f_large, self.f_unsharpen = (
            ag.array(f.astype(np.float32)) for f in self.filters)
        names = ("image", "blur_small", "blur_large", "blur_unsharpen", "mask_small",
                 "mask_large", "image_unsharpen", "image2", "image3")
        for name in names:
            setattr(self, name, ag.empty((n, n), np.float32))
        self.flat = {name: getattr(self, name).ravel() for name in names}   # views for 1D kernels
        self.maximum = ag.empty(1, np.float32)
        self.minimum = ag.empty(1, np.float32)
        self.rows = sorted({0, n // 2, n - 1})
        A = K.ANNOTATIONS
        self.k_blur = ag.kernel(K.gaussian_blur, **A["gaussian_blur"])
        self.k_sobel = ag.kernel(K.sobel, **A["sobel"])
        self.k_max = ag.kernel(K.maximum, **A["maximum"])
        self.k_min = ag.kernel(K.minimum, **A["minimum"])
        self.k_extend = ag.kernel(K.extend, **A["extend"])
        self.k_unsharpen = ag.kernel(K.unsharpen, **A["unsharpen"])
        self.k_combine = ag.kernel(K.combine, **A["combine"])

    def streamed_bytes(self) -> int:
        """Bytes a streaming iteration must move to the device: the image and the min/max
        accumulators."""
        return streamed_bytes(self.image, self.maximum, self.minimum)

    def reset(self) -> None:
        self.image[...] = self._image0
        self.reset_accumulators()

    def reset_accumulators(self) -> None:
        self.maximum[...] = -np.inf
        self.minimum[...] = np.inf

    def read(self) -> dict[str, np.ndarray]:
        return {f"row{r}": np.asarray(self.image3[r:r + 1])[0] for r in self.rows}

    def run(self, block: Any, num_blocks: int) -> dict[str, np.ndarray]:
        self.run_device(block, num_blocks)
        return self.read()

    def run_device(self, block: Any, num_blocks: int) -> None:
        """The launches of ``run`` (no host access: what ``recorded_static`` replays)."""
        b1, b2, g2, n2 = threads(block), block2d(block), grid2d(num_blocks), self.n * self.n
        f = self.flat
        gx = g2[0]      # (the blurs' and Sobel's grid offset: whole launches, blocks 0 on)
        self.k_blur[g2, b2](self.image, self.blur_small, self.f_small, 0, gx)
        self.k_blur[g2, b2](self.image, self.blur_large, self.f_large, 0, gx)
        self.k_blur[g2, b2](self.image, self.blur_unsharpen, self.f_unsharpen, 0, gx)
        self.k_sobel[g2, b2](self.blur_small, self.mask_small, 0, gx)
        self.k_sobel[g2, b2](self.blur_large, self.mask_large, 0, gx)
        self.k_max[num_blocks, b1](f["mask_large"], self.maximum, n2)
        self.k_min[num_blocks, b1](f["mask_large"], self.minimum, n2)
        self.k_extend[num_blocks, b1](f["mask_large"], self.minimum, self.maximum, n2)
        self.k_unsharpen[num_blocks, b1](f["image"], f["blur_unsharpen"], f["image_unsharpen"],
                                         AMOUNT, n2)
        self.k_combine[num_blocks, b1](f["image_unsharpen"], f["blur_large"], f["mask_large"],
                                       f["image2"], n2)
        self.k_combine[num_blocks, b1](f["image2"], f["blur_small"], f["mask_small"],
                                       f["image3"], n2)

    def run_handopt(self, h: Any, block: Any, num_blocks: int) -> dict[str, np.ndarray]:
        """Four streams: small blur chain, large blur chain, unsharpen chain, and the minimum."""
        b1, b2, g2, n2 = threads(block), block2d(block), grid2d(num_blocks), self.n * self.n
        f = self.flat
        s0, s1, s2, s3 = (h.stream(i) for i in range(4))
        # one transfer of the image, which all three blurs read
        h.prefetch(self.image, s0)
        e_image = h.event()
        h.record(e_image, s0)
        h.prefetch(self.maximum, s1)
        h.wait(s1, e_image)
        h.wait(s2, e_image)
        h.prefetch(self.minimum, s3)
        gx = g2[0]
        h.launch(self.k_blur, g2, b2, s0, self.image, self.blur_small, self.f_small, 0, gx)
        h.launch(self.k_blur, g2, b2, s1, self.image, self.blur_large, self.f_large, 0, gx)
        h.launch(self.k_blur, g2, b2, s2, self.image, self.blur_unsharpen, self.f_unsharpen, 0,
                 gx)
        h.launch(self.k_sobel, g2, b2, s0, self.blur_small, self.mask_small, 0, gx)
        e_sobel_small = h.event()
        h.record(e_sobel_small, s0)
        h.launch(self.k_sobel, g2, b2, s1, self.blur_large, self.mask_large, 0, gx)
        e_sobel_large = h.event()
        h.record(e_sobel_large, s1)
        h.launch(self.k_unsharpen, num_blocks, b1, s2, f["image"], f["blur_unsharpen"],
                 f["image_unsharpen"], AMOUNT, n2)
        h.wait(s3, e_sobel_large)
        h.launch(self.k_min, num_blocks, b1, s3, f["mask_large"], self.minimum, n2)
        e_min = h.event()
        h.record(e_min, s3)
        h.launch(self.k_max, num_blocks, b1, s1, f["mask_large"], self.maximum, n2)
        h.wait(s1, e_min)
        h.launch(self.k_extend, num_blocks, b1, s1, f["mask_large"], self.minimum, self.maximum,
                 n2)
        e_extend = h.event()
        h.record(e_extend, s1)
        h.wait(s2, e_extend)
        h.launch(self.k_combine, num_blocks, b1, s2, f["image_unsharpen"], f["blur_large"],
                 f["mask_large"], f["image2"], n2)
        h.wait(s2, e_sobel_small)
        h.launch(self.k_combine, num_blocks, b1, s2, f["image2"], f["blur_small"],
                 f["mask_small"], f["image3"], n2)
        h.sync_stream(s2)
        return self.read()

    def reference(self) -> dict[str, np.ndarray]:
        return self._expected

    @functools.cached_property
    def _expected(self) -> dict[str, np.ndarray]:
        """Computed once: the inputs never change after __init__."""
        image = self._image0.astype(np.float64)
        small, large, unsharp = (_correlate(image, w) for w in self.filters)
        mask_small, mask_large = _sobel(small), _sobel(large)
        lo, hi = mask_large.min(), mask_large.max()
        mask_large = np.minimum(1.0, 5.0 * (mask_large - lo) / (hi - lo))
        a = float(AMOUNT)
        sharp = np.clip(image * (1 + a) - unsharp * a, 0.0, 1.0)
        image2 = sharp * mask_large + large * (1 - mask_large)
        image3 = image2 * mask_small + small * (1 - mask_small)
        return {f"row{r}": image3[r] for r in self.rows}

    def check(self, result: Any) -> tuple[bool, str]:
        return compare_dict(result, self._expected, self.rtol)
