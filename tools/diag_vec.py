"""Where one recorded VEC iteration's host time goes: split recording, static graph, plain graph.

Each iteration calls one of three ways of replaying VEC's graph and reads the result:
``split`` (``graph(wl.run, split=True)``, the benchmark's ``recorded`` mode), ``static+read``
(``graph(wl.run_device, static=True)`` then ``wl.read()``, ``recorded_static``) and
``plain+read`` (``graph(wl.run_device)`` then ``wl.read()``), and the benchmark's hand-captured
``cudagraph`` baseline for scale. Timestamps around the steps
(entering the recording, the body, ending the segment, ``replay_remembered``,
``Runtime.launch_graph``, leaving) give the median microseconds of each step; the wrappers add
a little time of their own, so compare the three ways with each other, not with the benchmark.

Before each iteration (``MODE``):
  reset   the benchmark's own: the host rewrites the inputs, then synchronize (the default)
  sync    synchronize only (the inputs stay on the device: the graph copies nothing in)
  flush   synchronize, then copy 8 MiB on the host, touching nothing of asyncgpu's: the
          caches are as cold as after ``reset``, the graph the same as with ``sync``

usage: PYTHONPATH=. python3 tools/diag_vec.py [scale] [MODE] [--inside]   (on the GPU machine)
       (--inside: also the steps of ``launch_graph``: ``_issue``, the backend's graph launch,
       the stream bookkeeping, the tracker's commit)
"""

from __future__ import annotations

import statistics
import sys
import time
from collections import Counter
from typing import Any

import numpy as np

import asyncgpu as ag
from asyncgpu import _graph_function, _recorder
from asyncgpu._runtime import Runtime, current_runtime
from benchmarks.workloads import WORKLOADS

ITERATIONS = 300
marks: list[tuple[str, float]] = []


def timed(owner: Any, attr: str, label: str) -> None:
    """Wrap ``owner.attr`` so that each call appends (label+"0", t) and (label+"1", t)."""
    real = getattr(owner, attr)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        marks.append((label + "0", time.perf_counter()))
        try:
            return real(*args, **kwargs)
        finally:
            marks.append((label + "1", time.perf_counter()))

    setattr(owner, attr, wrapper)


def main() -> None:
    scale = sys.argv[1] if len(sys.argv) > 1 else "small"
    mode = sys.argv[2] if len(sys.argv) > 2 and not sys.argv[2].startswith("-") else "reset"
    wl = WORKLOADS["vec"](ag, scale)
    rt = current_runtime()
    blocks = 4 * rt.backend.sm_count if rt.backend.name == "cuda" else 2
    timed(_graph_function._Run, "_enter", "enter")
    timed(_graph_function._Run, "_exit", "exit")
    timed(_recorder.Recording, "end_segment", "segment")
    timed(_recorder, "replay_remembered", "replay")
    timed(Runtime, "launch_graph", "launch")
    timed(wl, "run_device", "body")
    if "--inside" in sys.argv:      # the steps of launch_graph too
        from asyncgpu._deps import DependencyTracker
        from asyncgpu._streams import StreamManager
        timed(Runtime, "_issue", "issue")
        timed(type(rt.backend), "graph_launch", "cuda")
        timed(StreamManager, "issued", "issued")
        timed(DependencyTracker, "commit", "commit")
    split = ag.graph(wl.run, split=True)
    static = ag.graph(wl.run_device, static=True)
    plain = ag.graph(wl.run_device)

    def static_read(b: Any, nb: int) -> float:
        static(b, nb)
        return wl.read()

    def plain_read(b: Any, nb: int) -> float:
        plain(b, nb)
        return wl.read()

    ways = {"split": split, "static+read": static_read, "plain+read": plain_read}
    if rt.backend.name == "cuda":   # the hand-captured baseline, for scale
        from benchmarks import harness
        from benchmarks.cudagraph import GraphHand
        hand = harness.ModeRun(ag, wl, "cudagraph", 256, blocks, "streaming", GraphHand(rt))
        ways["cudagraph"] = lambda b, nb: hand._once()
    for way in ways.values():          # record, capture, replay once
        for _ in range(3):
            wl.reset()
            ag.synchronize()
            way(256, blocks)
    junk = np.ones(1 << 20, np.float32)
    junk2 = np.empty_like(junk)
    totals: dict[str, list[float]] = {name: [] for name in ways}
    steps: dict[str, list[list[tuple[str, float]]]] = {name: [] for name in ways}
    for _ in range(ITERATIONS):
        for name, way in ways.items():
            if mode == "reset":
                wl.reset()
            ag.synchronize()
            if mode == "flush":
                junk2[...] = junk
                junk2[...] = junk
            marks.clear()
            t0 = time.perf_counter()
            way(256, blocks)
            t1 = time.perf_counter()
            totals[name].append((t1 - t0) * 1e6)
            seq = [("start", t0), *marks, ("end", t1)]
            steps[name].append([(seq[i + 1][0], (seq[i + 1][1] - seq[i][1]) * 1e6)
                                for i in range(len(seq) - 1)])
    print(f"vec {scale}, before each iteration: {mode}; median us")
    for name in ways:
        shapes = Counter(tuple(label for label, _ in s) for s in steps[name])
        shape = list(shapes.most_common(1)[0][0])     # (a call that recorded or captured differs)
        same = [s for s in steps[name] if [label for label, _ in s] == shape]
        parts = ", ".join(f"{label} {statistics.median(s[i][1] for s in same):.1f}"
                          for i, label in enumerate(shape))
        print(f"{name:12s} total {statistics.median(totals[name]):7.1f}; up to each mark: {parts}")


if __name__ == "__main__":
    main()
