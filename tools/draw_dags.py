"""Draw each workload's DAG (one run, tiny scale, sim backend) as a PNG: streams as colours.

usage: PYTHONPATH=. python3 tools/draw_dags.py docs/img
Nodes are placed by depth (longest path from a root); edges are labelled RAW/WAR/WAW.
"""

from __future__ import annotations

import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import asyncgpu as ag  # noqa: E402
from benchmarks.harness import record_run  # noqa: E402
from benchmarks.workloads import WORKLOADS  # noqa: E402

COLORS = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1",
          "#ff9da7", "#9c755f", "#bab0ac"]


def draw(name: str, nodes: list, path: str) -> None:
    ids = {n.id: n for n in nodes}
    depth: dict[int, int] = {}
    for n in nodes:  # issue order is a topological order
        depth[n.id] = 1 + max((depth[p.id] for p, _, _ in n.edges if p.id in ids), default=-1)
    levels: dict[int, list] = {}
    for n in nodes:
        levels.setdefault(depth[n.id], []).append(n)
    pos = {}
    for d, row in levels.items():
        for i, n in enumerate(row):
            pos[n.id] = (i - (len(row) - 1) / 2, -d)
    width = max(len(r) for r in levels.values())
    fig, ax = plt.subplots(figsize=(max(4, 2.2 * width), max(3, 0.9 * len(levels) + 1)))
    for n in nodes:
        for p, reason, label in n.edges:
            if p.id in pos:
                (x0, y0), (x1, y1) = pos[p.id], pos[n.id]
                ax.annotate("", (x1, y1 + 0.18), (x0, y0 - 0.18),
                            arrowprops=dict(arrowstyle="->", color="#555555"))
                ax.text((x0 + x1) / 2, (y0 + y1) / 2, f"{reason} {label}", fontsize=6,
                        color="#555555", ha="center")
    streams = sorted({n.stream.index for n in nodes})
    for n in nodes:
        x, y = pos[n.id]
        ax.text(x, y, n.name, ha="center", va="center", fontsize=8,
                bbox=dict(boxstyle="round", fc=COLORS[streams.index(n.stream.index) % 10],
                          ec="black", alpha=0.9))
    ax.set_xlim(-width / 2 - 0.5, width / 2 + 0.5)
    ax.set_ylim(-len(levels), 0.6)
    ax.axis("off")
    ax.set_title(f"{name}: {len(nodes)} kernels, {len(streams)} streams (colours)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    out = sys.argv[1] if len(sys.argv) > 1 else "docs/img"
    os.makedirs(out, exist_ok=True)
    for name in WORKLOADS:
        nodes = record_run(ag, WORKLOADS[name])
        if name == "hits":      # one iteration is enough to see the cross-synchronization
            nodes = nodes[:6]
        draw(name, nodes, os.path.join(out, f"dag_{name}.png"))


if __name__ == "__main__":
    main()
