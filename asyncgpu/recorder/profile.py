"""Measuring a recording's launches for its schedule: memory/compute class, lane durations
and IOS stages.

The model
---------
The recorder's launch orders and lane budget (``asyncgpu.recorder.schedule``) need timings of
the launches they schedule, taken once, when the recording is captured:

* ``opara`` puts each launch in a *memory-bound* or *compute-bound* ready queue. The class is
  measured: the launch runs alone and its time ``t`` is compared with its roofline memory time
  ``bytes / peak bandwidth`` (``bytes``: every byte range it reads plus every one it writes)::

      memory   if bytes / peak >= MEMORY_FRACTION * t    (it moves data near the peak rate)
      compute  else, if t >= SMALL_S                      (long, and not explained by traffic)
      small    else                                       (latency-bound: too short to tell)

  ``small`` launches go in the memory queue, with the light elementwise work Opara's operator
  table puts there. Without a measurement (no timer, ``graph_measure=False``, or a failure)
  the class comes from :func:`heuristic_class` (bytes per thread and registers).
* the lane budget (``asyncgpu.recorder.schedule.lane_budget``) needs what each launch adds to
  its lane: :func:`launch_times` times it once alone and :data:`IN_A_ROW` times back to back.
* ``ios`` (``asyncgpu.recorder.ios``) measures every candidate stage it considers. As in IOS, a long
  recording is cut into consecutive parts of at most ``graph_ios_part`` launches, searched one
  after the other; recordings above ``graph_ios_max`` launches, or searches over budget, use
  the ``opara`` order instead (logged).

All take their times from the backend's *stage timer* (``backend.stage_timer(runtime,
launches)``, or None when the backend cannot time): ``timer.time(stage)`` gives the seconds one
run of a stage takes, its groups concurrently, each group's launches in order, and
``timer.peak_bandwidth`` the device's bytes per second. On ``cuda`` the launches run on scratch
copies of every allocation the recording writes, so measuring has no effect the program can
see; on ``sim`` a deterministic cost model answers. The timer is created for one capture
(:func:`asyncgpu.runtime.stage_timing.stage_timer`) and dropped after it.

Example::

    classify(40e-6, 100e6, 3e12)     # 33 us of traffic in 40 us: "memory"
    classify(40e-6, 1e3, 3e12)       # "compute"
    classify(2e-6, 1e3, 3e12)        # "small"

Plain Python: the backends do the timing.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from ..core.interference import heuristic_class, moved_bytes
from ..runtime.stage_timing import stage_timer
from . import ios as _ios

log = logging.getLogger("asyncgpu")

#: A launch whose roofline memory time is at least this fraction of its time is memory-bound.
MEMORY_FRACTION = 0.5
#: Launches shorter than this (seconds) and not memory-bound are latency-bound ("small").
SMALL_S = 5e-6
#: Most distinct stages the IOS search may time before it gives up (device time is bounded).
MAX_MEASURED_STAGES = 4096


def launch_bytes(launch: Any) -> int:
    """Bytes a launch touches: each array range once per direction (read, written)."""
    return moved_bytes(launch.arrays)


def launch_threads(launch: Any) -> tuple[int, int]:
    """(blocks, threads per block) of a launch ((0, 0) for a library call: unknown)."""
    lc = launch.launcher
    if lc is None:
        return 0, 0
    g, b = lc.grid3, lc.block3
    return g[0] * g[1] * g[2], b[0] * b[1] * b[2]


def classify(seconds: float, nbytes: int, peak_bandwidth: float) -> str:
    """``"memory"``, ``"compute"`` or ``"small"`` from a measured time (see the module)."""
    if seconds <= 0 or peak_bandwidth <= 0:
        return "small"
    if nbytes / peak_bandwidth >= MEMORY_FRACTION * seconds:
        return "memory"
    return "compute" if seconds >= SMALL_S else "small"



def launch_classes(rt: Any, be: Any, launches: Sequence[Any], timer: Any) -> list[str]:
    """Each launch's class: measured with ``timer`` when given, else :func:`heuristic_class`."""
    classes: list[str] = []
    attrs = getattr(be, "kernel_attributes", None)
    for i, launch in enumerate(launches):
        nbytes = launch_bytes(launch)
        cls = None
        if launch.launcher is None:     # a captured call: ufuncs and reductions stream memory
            classes.append("memory")
            continue
        if timer is not None:
            try:
                cls = classify(timer.time(((i,),)), nbytes, timer.peak_bandwidth)
            except Exception as exc:
                log.warning("asyncgpu: timing '%s' failed (%s); its class comes from its "
                            "attributes", launch.launcher.kernel.name, exc)
        if cls is None:
            blocks, threads = launch_threads(launch)
            a = attrs(launch.launcher.kernel) if attrs is not None else None
            cls = heuristic_class(nbytes, blocks * threads, a)
        classes.append(cls)
    return classes


#: Launches in a row that :func:`launch_times` compares with one.
IN_A_ROW = 4


def launch_times(launches: Sequence[Any], timer: Any) -> list[float] | None:
    """What each launch adds to its lane: the seconds of :data:`IN_A_ROW` of it back to back on
    one stream less one of it, per extra launch (a launch timed alone also counts the device
    starting its kernel, 1-2 us that a lane overlaps with the launch before); None when one of
    them cannot be timed (a captured library call, no timer, a failure: logged)."""
    if timer is None or any(launch.launcher is None for launch in launches):
        return None
    try:
        out = []
        for i in range(len(launches)):
            one = timer.time(((i,),))
            row = timer.time(((i,) * IN_A_ROW,))
            out.append(max(0.0, (row - one) / (IN_A_ROW - 1)))
        return out
    except Exception as exc:
        log.warning("asyncgpu: timing the launches failed (%s); the graph keeps its lanes", exc)
        return None


def ios_stages(rt: Any, be: Any, launches: Sequence[Any], preds: Sequence[Sequence[int]],
               name: str) -> list[_ios.Stage] | None:
    """IOS's stages for a recording, or None (logged) when it is too large or not measurable."""
    opts = rt.options
    n = len(launches)
    if any(launch.launcher is None for launch in launches):
        log.info("asyncgpu: '%s' captures library calls, which the stage timer cannot run on "
                 "scratch copies: the opara order is used instead of ios", name)
        return None
    if n > opts.graph_ios_max:
        log.info("asyncgpu: '%s' has %d launches, more than graph_ios_max=%d: the IOS search "
                 "is skipped and the opara order used", name, n, opts.graph_ios_max)
        return None
    with stage_timer(rt, be, launches) as timer:
        if timer is None:
            log.info("asyncgpu: the launches of '%s' cannot be timed on this backend (or "
                     "graph_measure is off): the opara order is used instead of ios", name)
            return None
        count = [0]

        def latency(stage: _ios.Stage) -> float:
            count[0] += 1
            if count[0] > MAX_MEASURED_STAGES:
                raise _ios.SearchTooLarge(f"more than {MAX_MEASURED_STAGES} stages to time")
            return timer.time(stage)

        try:
            stages = []
            for part in _ios.parts(len(launches), opts.graph_ios_part):
                stages += _ios.ios_schedule_part(preds, part, latency, opts.graph_ios_group,
                                                 opts.graph_ios_groups)
        except _ios.SearchTooLarge as exc:
            log.info("asyncgpu: the IOS search for '%s' (%d launches) is too large (%s): the "
                     "opara order is used", name, n, exc)
            return None
        except Exception as exc:
            log.warning("asyncgpu: timing the stages of '%s' failed (%s): the opara order is "
                        "used", name, exc)
            return None
    log.debug("asyncgpu: IOS schedule of '%s': %d stages after timing %d", name, len(stages),
              count[0])
    return stages
