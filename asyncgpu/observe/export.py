"""Text exports of a trace: Chrome/Perfetto JSON and Graphviz DOT (see ``asyncgpu.observe.trace``).

:func:`chrome_trace` gives a host track and one track per stream, cross-stream edges as flow
arrows, regulation's changes as instants across every track; :func:`to_dot` gives the DAG
with streams as colours and edges labelled with their reason and array. Both read only the
trace's records.
"""

from __future__ import annotations

from typing import Any

from .records import PALETTE, edge_labels, finite


def chrome_trace(trace: Any) -> dict[str, Any]:
    """``trace`` as Chrome/Perfetto JSON: a host track and one track per stream.

    Open it at https://ui.perfetto.dev or chrome://tracing. Edges are flow arrows.
    """
    nodes, prefetches = trace.nodes, trace.prefetches
    dev = ("sim device (logical clock: 1 step = 1 us)" if trace.logical_clock
           else f"{trace.backend_name} device")
    ev: list[dict[str, Any]] = [
        {"ph": "M", "pid": 0, "name": "process_name", "args": {"name": "host"}},
        {"ph": "M", "pid": 1, "name": "process_name", "args": {"name": dev}},
        {"ph": "M", "pid": 0, "tid": 0, "name": "thread_name", "args": {"name": "host"}},
    ]
    for track in sorted({n.stream for n in nodes if n.stream is not None}
                        | {p.stream for p in prefetches}):
        ev.append({"ph": "M", "pid": 1, "tid": track, "name": "thread_name",
                   "args": {"name": f"stream {track}"}})
    us = 1e6
    by_id = {n.id: n for n in nodes}
    for n in nodes:
        args = {"site": n.site, "tenant": n.tenant,
                "parents": [f"{r} {a} <- node {p}" for p, r, a in n.parents]}
        ev.append({"ph": "i", "pid": 0, "tid": 0, "s": "t", "ts": n.enqueue_s * us,
                   "name": f"{'launch' if n.stream is not None else n.kind} {n.name}",
                   "args": args})
        if n.stream is None:
            continue
        ev.append({"ph": "X", "pid": 1, "tid": n.stream, "ts": n.start_s * us,
                   "dur": max(n.end_s - n.start_s, 0.0) * us, "name": n.name,
                   "cat": n.kind, "args": dict(args, node=n.id)})
        for k, (pid, reason, array) in enumerate(n.parents):
            p = by_id.get(pid)
            if p is None or p.stream is None or p.stream == n.stream:
                continue
            flow = n.id * 1000 + k
            ev.append({"ph": "s", "pid": 1, "tid": p.stream, "ts": p.end_s * us, "id": flow,
                       "name": f"{reason} {array}", "cat": "edge"})
            ev.append({"ph": "f", "bp": "e", "pid": 1, "tid": n.stream,
                       "ts": n.start_s * us, "id": flow, "name": f"{reason} {array}",
                       "cat": "edge"})
    for p in prefetches:
        ev.append({"ph": "X", "pid": 1, "tid": p.stream, "ts": p.start_s * us,
                   "dur": max(p.end_s - p.start_s, 0.0) * us, "name": "prefetch",
                   "cat": "transfer", "args": {"bytes": p.nbytes, "before_node": p.node}})
    for s in trace.syncs:
        ev.append({"ph": "X", "pid": 0, "tid": 0, "ts": s.start_s * us,
                   "dur": (s.end_s - s.start_s) * us, "name": f"sync: {s.reason}",
                   "cat": "sync", "args": {"waited": s.waited}})
    for r in trace.regulation:
        # (a global instant: a line across every track from which the plan is in force)
        ev.append({"ph": "i", "pid": 0, "tid": 0, "s": "g", "ts": r.time_s * us,
                   "name": f"regulation: {r.state}" + (f", check {r.stage}" if r.stage else ""),
                   "cat": "regulation",
                   "args": {"plan": r.plan or "the tenants' own settings", "stage": r.stage}})
    return {"traceEvents": ev, "displayTimeUnit": "ms",
            "otherData": {"backend": trace.backend_name, "metrics": finite(trace.metrics())}}


def to_dot(nodes: list[Any]) -> str:
    """The DAG of ``nodes`` (trace records) as Graphviz DOT: streams as colours, edges labelled
    with reason and array."""
    shown = {n.id for n in nodes}
    lines = ["digraph asyncgpu {", "  node [style=filled, fontname=Helvetica];"]
    for n in nodes:
        if n.stream is None:
            color, extra, shape = "#dddddd", "", ", shape=box"
        else:
            color, extra, shape = PALETTE[n.stream % len(PALETTE)], f"\\nstream {n.stream}", ""
        label = _quoted(n.name if n.stream is not None else f"{n.kind} {n.name}")
        lines.append(f'  n{n.id} [label="{label}{extra}", fillcolor="{color}"{shape}];')
        for pid, labels in edge_labels(n).items():
            if pid in shown:
                label = "\\n".join(_quoted(text) for text in labels)
                lines.append(f'  n{pid} -> n{n.id} [label="{label}"];')
    lines.append("}")
    return "\n".join(lines) + "\n"


def _quoted(text: str) -> str:
    """``text`` inside a DOT string: its backslashes and quotes escaped (a kernel's ``name=``
    may hold either)."""
    return text.replace("\\", "\\\\").replace('"', '\\"')
