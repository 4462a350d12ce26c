"""GPU kernels of the benchmark workloads (plain Numba ``@cuda.jit``; no asyncgpu here).

One module per workload (``vec``, ``bs``, ``img``, ``ml``, ``hits``, ``dl``; ``linalg`` for
the row-partitioned matrix-vector product and CG), each with an
``ANNOTATIONS`` dict: per kernel, the parameters it only reads (``const``) and those it only writes,
every element and never reading (``out``); any other array parameter is read-write. ``blockops``
holds the shared-memory block reductions (no warp intrinsics, so the kernels run in Numba's CUDA
simulator too).
"""

from . import bs, dl, hits, img, linalg, ml, vec

__all__ = ["bs", "dl", "hits", "img", "linalg", "ml", "vec"]
