"""What a trace records: nodes, prefetches, host synchronizations and regulation's changes,
and their labels.

Plain data, shared by the tracer (``asyncgpu.observe.trace``) that fills it and the exports
(``asyncgpu.observe.export``) and pictures (``asyncgpu.observe.draw``) that read it. Times are
seconds since the trace started (device times on ``sim`` are logical).
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: Colours of streams 0, 1, ... in DOT output and pictures.
PALETTE = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
           "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac")


@dataclass
class NodeRecord:
    """One traced node. Times in seconds since the trace started (device times: see module)."""

    id: int
    kind: str                      # "kernel", "call", "graph", "copy", "host-read", "host-write"
    name: str
    site: str | None
    stream: int | None             # trace track of the stream; None for host nodes
    order: int                     # position in the host's issue order
    enqueue_s: float
    parents: list[tuple[int, str, str]] = field(default_factory=list)  # (id, reason, array)
    start_s: float | None = None
    end_s: float | None = None
    tenant: str = "default"        # the tenant that issued it (``asyncgpu.tenant``)


@dataclass
class PrefetchRecord:
    """One host-to-device prefetch, enqueued before the kernel ``node`` on its stream."""

    stream: int
    nbytes: int
    order: int
    enqueue_s: float
    node: int | None = None
    start_s: float | None = None
    end_s: float | None = None


@dataclass
class SyncRecord:
    """The host blocked from ``start_s`` to ``end_s`` (host clock) for ``reason``.

    ``waited``: ids of the nodes waited for, or None for a device-wide synchronize.
    """

    reason: str
    order: int
    start_s: float
    end_s: float
    waited: list[int] | None


@dataclass
class RegulationRecord:
    """Regulation (``asyncgpu.regulate``) changed at ``time_s`` (host clock): its ``state``
    (``off``, ``profiling``, ``regulated``), the plan in force (``Plan.describe()``; ``""``:
    the tenants' own settings) and the stage of the plan's check under way (``""``: none)."""

    order: int
    time_s: float
    state: str
    plan: str
    stage: str


def edge_labels(node: NodeRecord) -> dict[int, list[str]]:
    """``node``'s edges grouped by parent: parent id -> ["RAW x", "WAR y", ...]."""
    out: dict[int, list[str]] = {}
    for pid, reason, array in node.parents:
        label = f"{reason} {array}"
        labels = out.setdefault(pid, [])
        if label not in labels:
            labels.append(label)
    return out


def finite(metrics: dict[str, float]) -> dict[str, float | None]:
    """NaN (an undefined metric) as None: browsers' JSON parsers reject NaN."""
    return {k: (None if v != v else v) for k, v in metrics.items()}
