"""The ``sim`` backend's stage timer: a deterministic cost model of an H100-like device.

The recorder times launches to schedule a graph (``asyncgpu.recorder.profile``); the simulator
cannot measure anything meaningful, so it answers from a model that depends only on the
launches (the same recording always gets the same schedule, and tests can predict it):

* a launch alone takes ``LATENCY_S + max(bytes / BANDWIDTH, threads * THREAD_S)``: its memory
  traffic at the peak rate, or its threads at a fixed cost each, whichever is longer (so a
  kernel that launches many threads over few bytes is compute-bound);
* it occupies ``min(1, threads / DEVICE_THREADS)`` of the device while it runs;
* a stage takes ``STAGE_S + max(longest group, sum of time x occupancy)``: groups overlap,
  but not beyond the device's capacity (a group ends at its own time, stretched by as much
  as the longest).

Nothing runs: the timer never touches the arrays.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

BANDWIDTH = 3.0e12          # bytes/s
THREAD_S = 2.0e-12          # seconds of work per launched thread
LATENCY_S = 2.0e-6          # a kernel's fixed cost
STAGE_S = 1.0e-6            # the barrier ending a stage
DEVICE_THREADS = 132 * 2048


class SimStageTimer:
    """``time(stage)``: the modelled seconds of one stage (see the module docstring)."""

    peak_bandwidth = BANDWIDTH

    def __init__(self, launches: Sequence[Any]) -> None:
        from ...recorder.profile import launch_bytes, launch_threads

        self._cost: list[tuple[float, float]] = []
        for launch in launches:
            blocks, per_block = launch_threads(launch)
            threads = blocks * per_block
            t = LATENCY_S + max(launch_bytes(launch) / BANDWIDTH, threads * THREAD_S)
            self._cost.append((t, min(1.0, threads / DEVICE_THREADS)))

    def time(self, stage: Sequence[Sequence[int]]) -> float:
        return max(self.time_groups(stage))

    def time_groups(self, stage: Sequence[Sequence[int]]) -> list[float]:
        """Each group's end: its own launches' times, stretched as the whole stage is when
        the groups together ask for more than the device."""
        own = [sum(self._cost[v][0] for v in group) for group in stage]
        area = sum(self._cost[v][0] * self._cost[v][1] for group in stage for v in group)
        stretch = max(1.0, area / max(own))
        return [STAGE_S + t * stretch for t in own]

    def close(self) -> None:
        pass
