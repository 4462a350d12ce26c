"""The benchmark workloads (see /BENCHMARKS.md): one class per workload, same interface.

Each class: ``name``, ``two_d``, ``SIZES`` (per scale), ``expected_dag`` (kernels, edges and
streams of one ``run()`` under the default policies), ``__init__(ag, scale, seed)`` (allocates
and wraps the kernels), ``reset()`` (untimed: the host rewrites the streamed inputs and the
accumulators), ``reset_accumulators()`` (only the accumulators and state the kernels consume, for
``--inputs resident``), ``run(block, num_blocks)`` (timed; returns NumPy values),
``run_handopt(h, block, num_blocks)`` (the same on hand-chosen streams), ``reference()``,
``check(result)``, ``streamed_bytes()`` (bytes a streaming iteration moves to the device:
the transfer bound's numerator, see ``benchmarks/bounds.py``), and ``atomic_tolerance`` where float atomics make runs
differ slightly.
"""

from .bs import BlackScholes
from .dl import TwoTowerCNN
from .hits import Hits
from .img import Image
from .ml import Ensemble
from .vec import Vec

WORKLOADS = {
    "vec": Vec,
    "bs": BlackScholes,
    "img": Image,
    "ml": Ensemble,
    "hits": Hits,
    "dl": TwoTowerCNN,
}

__all__ = ["WORKLOADS", "BlackScholes", "Ensemble", "Hits", "Image", "TwoTowerCNN", "Vec"]
