"""Draw each workload's DAG (one traced run, tiny scale, sim backend) as a PNG.

usage: PYTHONPATH=. python3 tools/draw_dags.py docs/img
The drawing is ``asyncgpu.observe.draw.draw_dag`` (streams as colours, edges labelled RAW/WAR/WAW
and the array); ``asyncgpu trace NAME --out DIR`` draws the same picture plus a timeline.
"""

from __future__ import annotations

import os
import sys

import asyncgpu as ag
from asyncgpu.observe.draw import draw_dag
from benchmarks.workloads import WORKLOADS


def main() -> None:
    out = sys.argv[1] if len(sys.argv) > 1 else "docs/img"
    os.makedirs(out, exist_ok=True)
    for name, cls in WORKLOADS.items():
        with ag.configure(backend="sim", sim_seed=0, sim_strategy="random"):
            wl = cls(ag, "tiny")
            wl.reset()
            ag.synchronize()
            with ag.trace() as t:
                wl.run((8, 8) if getattr(cls, "two_d", False) else 32, 2)
            kernels = t.kernels
        if name == "hits":      # one iteration is enough to see the cross-synchronization
            kernels = kernels[:6]
        draw_dag(kernels, os.path.join(out, f"dag_{name}.png"), name)


if __name__ == "__main__":
    main()
