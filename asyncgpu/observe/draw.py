"""Pictures of traces through matplotlib (imported lazily; no Graphviz or system packages).

:func:`draw_dag` lays the DAG out by depth (longest path from a root, so every edge points
down), one row per depth, nodes coloured by stream and edges labelled with reason and array (the
GrCUDA paper's Figure 6). :func:`draw_timeline` draws a host row and one row per stream:
kernels as coloured bars, prefetches hatched, host synchronizations on the host row.
"""

from __future__ import annotations

import logging
from typing import Any

from .records import PALETTE, edge_labels

log = logging.getLogger("asyncgpu")

#: :func:`draw_dag` draws at most this many nodes, the first issued (a picture of more is
#: unreadable, and costs matplotlib minutes and gigabytes: 2,500 side by side made a
#: 600,000-pixel-wide PNG), in a picture of at most ``DAG_INCHES`` a side (at 110 dpi).
DAG_NODES = 100
DAG_INCHES = 40


#: What to install for the pictures (matplotlib is not among the package's own needs).
NEEDS = ("the trace's pictures need matplotlib: pip install 'asyncgpu[bench]' (or "
         "matplotlib)")


def can_draw() -> bool:
    """Whether matplotlib can be imported (the pictures can be drawn)."""
    import importlib.util

    return importlib.util.find_spec("matplotlib") is not None


def _pyplot() -> Any:
    if not can_draw():
        raise ImportError(NEEDS)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def depths(nodes: list[Any]) -> dict[int, int]:
    """Depth of each node (``id``, ``parents`` as (id, ...)): 1 + deepest shown parent."""
    depth: dict[int, int] = {}
    for n in nodes:  # issue order is a topological order
        depth[n.id] = 1 + max((depth[p[0]] for p in n.parents if p[0] in depth), default=-1)
    return depth


def draw_dag(nodes: list[Any], path: str, title: str = "") -> None:
    """Save a PNG of the DAG of trace records (``Trace.kernels`` or ``Trace.nodes``): of the
    first :data:`DAG_NODES` of them, issue order being topological, with one logged line and
    the title saying so when there are more."""
    plt = _pyplot()
    total = len(nodes)
    if total > DAG_NODES:
        nodes = nodes[:DAG_NODES]
        log.warning("asyncgpu: %s draws the first %d of the trace's %d nodes; to see another "
                    "part, trace only that part (a shorter asyncgpu.trace() block), or lay out "
                    "the whole DAG from the trace's DOT (t.to_dot()) with Graphviz",
                    path, DAG_NODES, total)
    depth = depths(nodes)
    levels: dict[int, list[Any]] = {}
    for n in nodes:
        levels.setdefault(depth[n.id], []).append(n)
    pos = {}
    for d, row in levels.items():
        for i, n in enumerate(row):
            pos[n.id] = (i - (len(row) - 1) / 2, -d)
    width = max((len(r) for r in levels.values()), default=1)
    fig, ax = plt.subplots(figsize=(min(max(4, 2.2 * width), DAG_INCHES),
                                    min(max(3, 0.9 * len(levels) + 1), DAG_INCHES)))
    for n in nodes:
        for pid, labels in edge_labels(n).items():
            if pid in pos:
                (x0, y0), (x1, y1) = pos[pid], pos[n.id]
                ax.annotate("", (x1, y1 + 0.18), (x0, y0 - 0.18),
                            arrowprops=dict(arrowstyle="->", color="#555555"))
                ax.text((x0 + x1) / 2, (y0 + y1) / 2, "\n".join(labels), fontsize=6,
                        color="#555555", ha="center", va="center")
    streams = sorted({n.stream for n in nodes if n.stream is not None})
    for n in nodes:
        x, y = pos[n.id]
        color = "#dddddd" if n.stream is None else PALETTE[streams.index(n.stream) % len(PALETTE)]
        ax.text(x, y, n.name, ha="center", va="center", fontsize=8,
                bbox=dict(boxstyle="round", fc=color, ec="black", alpha=0.9))
    ax.set_xlim(-width / 2 - 0.5, width / 2 + 0.5)
    ax.set_ylim(-max(len(levels), 1), 0.6)
    ax.axis("off")
    head = f"{title}: " if title else ""
    shown = f"the first {len(nodes)} of {total}" if total > len(nodes) else f"{total}"
    ax.set_title(f"{head}{shown} nodes, {len(streams)} streams (colours)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def timeline_tracks(trace: Any) -> list[int]:
    """The streams a timeline of ``trace`` has a row for: every one that ran a kernel, a
    library call, a graph, a copy or a prefetch."""
    return sorted({n.stream for n in trace.kernels} | {n.stream for n in trace.copies}
                  | {p.stream for p in trace.prefetches})


def draw_timeline(trace: Any, path: str, title: str = "") -> None:
    """Save a PNG timeline of a :class:`asyncgpu.Trace`: host row, then one row per stream."""
    plt = _pyplot()
    kernels, prefetches, syncs = trace.kernels, trace.prefetches, trace.syncs
    tracks = timeline_tracks(trace)
    row = {t: i + 1 for i, t in enumerate(tracks)}
    fig, ax = plt.subplots(figsize=(10, 1.2 + 0.5 * (len(tracks) + 1)))
    for n in kernels:
        color = PALETTE[n.stream % len(PALETTE)]
        ax.barh(row[n.stream], n.end_s - n.start_s, left=n.start_s, height=0.6, color=color,
                edgecolor="black", linewidth=0.4)
        ax.text((n.start_s + n.end_s) / 2, row[n.stream], n.name, ha="center", va="center",
                fontsize=6, clip_on=True)
    for c in trace.copies:          # (explicit memory's transfers, which CT and TC measure)
        ax.barh(row[c.stream], c.end_s - c.start_s, left=c.start_s, height=0.45, color="white",
                edgecolor="#333333", hatch="....", linewidth=0.4)
        ax.text((c.start_s + c.end_s) / 2, row[c.stream], c.name, ha="center", va="center",
                fontsize=5, clip_on=True)
    for p in prefetches:
        ax.barh(row[p.stream], p.end_s - p.start_s, left=p.start_s, height=0.3, color="white",
                edgecolor="#333333", hatch="////", linewidth=0.4)
    # On sim the device clock is logical and the host clock physical: do not mix them.
    for s in [] if trace.logical_clock else syncs:
        ax.barh(0, s.end_s - s.start_s, left=s.start_s, height=0.5, color="#bbbbbb",
                edgecolor="black", linewidth=0.4)
    for n in [] if trace.logical_clock else kernels:
        ax.plot([n.enqueue_s], [0], marker="|", color="black", markersize=6)
    ax.set_yticks(range(len(tracks) + 1), ["host"] + [f"stream {t}" for t in tracks])
    ax.invert_yaxis()
    unit = "logical time (sim steps, 1 step = 1 us)" if trace.logical_clock else "seconds"
    ax.set_xlabel(f"{unit} since the trace started; dotted: copy; hatched: prefetch; "
                  "grey: host waits")
    m = trace.metrics()
    ax.set_title((f"{title}: " if title else "")
                 + ", ".join(f"{k}={v:.2f}" for k, v in m.items()), fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
