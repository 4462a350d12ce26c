"""Physical bounds of a workload: how fast could the timed region possibly be?

Two lower bounds, both measured on the machine that runs the benchmark, in the same run:

* **transfer bound**: the bytes the timed region must move from the host (the workload's
  ``streamed_bytes()``: arrays its reset rewrites and its kernels then read) over the
  host-to-device bandwidth of the mechanism the runtime uses, managed-memory prefetch,
  measured by :func:`h2d_bandwidth` (prefetch a large host-touched managed buffer, time it with
  CUDA events), or with ``memory="explicit"`` pinned copies (:func:`pinned_bandwidth`). For
  VEC and B&S the harness also times a pinned copy of exactly the streamed bytes in the same
  run (:func:`pinned_copy_times`), the tighter bound for those two.
  Not applicable on ``sim`` (no physical transfer).
* **compute bound**: the critical path of the DAG (:func:`critical_path`), each kernel weighted
  by its device time measured in ``serial`` mode (CUDA timing events of a traced serial
  iteration: each kernel runs alone, so the times carry no contention), the DAG's edges and host
  synchronizations taken from a traced ``parallel`` iteration of the same program.

The larger one bounds the timed region from below; ``parallel / bound`` says how far from it
asyncgpu is. Both ignore launch overhead, so small scales sit far above them.

Critical-path model: nodes in host issue order; a node starts once its parents have finished
and the host has reached it (host clock); a host synchronization (a host read or write, a
synchronize) moves the host clock to the finish of what it waited for; the path length is
the time the last node finishes. Example::

    a(2) -> c(1), b(3) -> c       critical_path = max(2, 3) + 1 = 4
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from typing import Any

#: A step of the critical-path model: ("node", id, seconds, parent ids) or
#: ("barrier", waited ids or None for all).
Step = tuple


def critical_path(steps: Iterable[Step]) -> float:
    """Length of the longest chain of the DAG given as steps in host order (see the module)."""
    finish: dict[int, float] = {}
    host = 0.0
    for step in steps:
        if step[0] == "node":
            _, nid, seconds, parents = step
            start = max([host, *(finish[p] for p in parents if p in finish)])
            finish[nid] = start + seconds
        elif step[0] == "barrier":
            waited = step[1]
            ends = finish.values() if waited is None else [finish[w] for w in waited
                                                            if w in finish]
            host = max([host, *ends])
        else:
            raise ValueError(f"unknown critical-path step {step[0]!r}")
    return max([host, *finish.values()])


def steps_from_traces(parallel: Any, serial: Any) -> list[Step]:
    """Critical-path steps: the DAG and host waits of ``parallel``, kernel times of ``serial``.

    Both traces must be of the same program (same kernels in the same order). Copy nodes
    (explicit memory) are edges of the DAG but weigh nothing here: moving bytes is the
    transfer bound's part, as prefetches are in the managed model.
    """
    par, ser = parallel.kernels, serial.kernels     # the computing nodes, copies left out
    if [k.name for k in par] != [k.name for k in ser]:
        raise ValueError("the serial and parallel traces issued different kernels: "
                         f"{[k.name for k in ser]} vs {[k.name for k in par]}")
    seconds = {p.id: s.end_s - s.start_s for p, s in zip(par, ser)}
    items: list[tuple[int, Step]] = []
    for n in parallel.nodes:
        parents = [p for p, _, _ in n.parents]
        if n.stream is None:
            items.append((n.order, ("barrier", parents)))
        else:
            cost = 0.0 if n.kind == "copy" else seconds[n.id]
            items.append((n.order, ("node", n.id, cost, parents)))
    for s in parallel.syncs:
        items.append((s.order, ("barrier", s.waited)))
    items.sort(key=lambda it: it[0])
    return [step for _, step in items]


def compute_bound(parallel: Any, serial: Any) -> float:
    """Critical path (seconds, or logical time on sim) of ``parallel``'s DAG, serial timings."""
    return critical_path(steps_from_traces(parallel, serial))


def h2d_bandwidth(runtime: Any, nbytes: int = 1 << 28, repeats: int = 5) -> float | None:
    """Host-to-device bandwidth of managed-memory prefetch (bytes/s, median); None on sim.

    Each repeat writes the whole buffer from the host (so its pages live on the host), then
    times ``cudaMemPrefetchAsync`` of it on a stream of its own with timing events.
    """
    be = runtime.backend
    while hasattr(be, "inner"):
        be = be.inner
    if be.name != "cuda":
        return None
    if getattr(be, "explicit", False):
        raise ValueError("h2d_bandwidth times the prefetch of managed memory, and this runtime "
                         "uses explicit memory: configure memory='managed' around it, or "
                         "measure pinned copies with pinned_bandwidth")
    buf = be.alloc(nbytes)
    try:
        stream = be.create_stream()
        e0, e1 = be.timing_event(), be.timing_event()
        rates = []
        for i in range(repeats):
            buf.host[:] = i + 1
            be.record(e0, stream)
            be.prefetch(buf, stream)
            be.record(e1, stream)
            be.host_wait(e1)
            rates.append(nbytes / be.elapsed_s(e0, e1))
    finally:
        be.synchronize()
        be.free(buf)
    return statistics.median(rates)


def pinned_copy_times(runtime: Any, nbytes: int, repeats: int = 5) -> list[float] | None:
    """Seconds of ``repeats`` host-to-device copies of ``nbytes`` from pinned host memory into
    device memory (``cudaMemcpyAsync`` on a stream of its own, CUDA timing events); None on sim.

    The reference of the explicit memory model: the fastest way the bytes can reach the device.
    """
    be = runtime.backend
    while hasattr(be, "inner"):
        be = be.inner
    if be.name != "cuda" or nbytes <= 0:
        return None
    import cupy
    import numpy as np

    dev = cupy.empty(nbytes, np.uint8)
    pinned = cupy.cuda.alloc_pinned_memory(nbytes)
    host = np.frombuffer(pinned, np.uint8, nbytes)
    host[:] = 1
    rt = cupy.cuda.runtime
    stream = cupy.cuda.Stream(non_blocking=True)
    e0, e1 = be.timing_event(), be.timing_event()
    times = []
    try:
        for _ in range(repeats):
            e0.record(stream)
            rt.memcpyAsync(dev.data.ptr, host.ctypes.data, nbytes, rt.memcpyHostToDevice,
                           stream.ptr)
            e1.record(stream)
            e1.synchronize()
            times.append(be.elapsed_s(e0, e1))
    finally:
        stream.synchronize()
        del dev, host, pinned
    return times


def pinned_bandwidth(runtime: Any, nbytes: int = 1 << 28, repeats: int = 5) -> float | None:
    """Host-to-device bandwidth of pinned copies (bytes/s, median); None on sim."""
    times = pinned_copy_times(runtime, nbytes, repeats)
    return None if not times else nbytes / statistics.median(times)


def bounds(streamed_bytes: int, bandwidth: float | None, parallel: Any, serial: Any,
           parallel_s: float | None) -> dict[str, Any]:
    """The bounds of one workload and block size, as reported in the JSON and the table."""
    logical = getattr(serial, "logical_clock", False)
    path = compute_bound(parallel, serial)
    out: dict[str, Any] = {
        "streamed_bytes": streamed_bytes,
        "h2d_bytes_per_s": bandwidth,
        "transfer_bound_s": streamed_bytes / bandwidth if bandwidth else None,
        "compute_bound_s": None if logical else path,
    }
    if logical:
        out["compute_bound_logical_us"] = path * 1e6
    known = [v for v in (out["transfer_bound_s"], out["compute_bound_s"]) if v is not None]
    out["bound_s"] = max(known) if known else None
    out["parallel_over_bound"] = (parallel_s / out["bound_s"]
                                  if parallel_s and out["bound_s"] else None)
    return out
