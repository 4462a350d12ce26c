"""Timing launches on the device: the backend's stage timer, prepared for a runtime.

The model
---------
A backend that can time launches has ``stage_timer(runtime, launches)`` (``backends.cuda.timing``
on the GPU, a cost model on ``sim``): ``timer.time(stage)`` runs a *stage*, groups of indices
into ``launches`` (each group in order on a stream of its own, the groups side by side), and
returns the seconds one run took, on scratch copies of what the launches write, so the program
sees no effect. A launch is anything with ``launcher``, ``args``, ``arrays`` (its bound array
arguments) and ``site``: a recording's deferred launch, or a :class:`TimedLaunch` the regulation
keeps of a profiled one. Two users: the recorder's schedules (each launch's class, the lanes'
budget, IOS's stages) and the regulation's pairs (two tenants' launches alone and side by side).

Invariants: timing never fails the caller (a timer that cannot be made is None, logged); the
explicit memory model makes the launches' arrays current on the device first, so the timed
launches read the program's data; the timer lets go of its scratch copies on exit.

Example::

    with stage_timer(rt, rt.backend, launches) as timer:
        if timer is not None:
            together = timer.time([[0], [1]])       # launches 0 and 1 side by side
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Sequence
from typing import Any

log = logging.getLogger("asyncgpu")


class TimedLaunch:
    """A kernel launch kept to be timed again: its launcher, arguments as given, bound array
    arguments and call site."""

    __slots__ = ("args", "arrays", "launcher", "site")

    def __init__(self, launcher: Any, args: tuple[Any, ...], arrays: Sequence[Any],
                 site: str | None) -> None:
        self.launcher, self.args, self.arrays, self.site = launcher, args, arrays, site


@contextlib.contextmanager
def stage_timer(rt: Any, be: Any, launches: Sequence[Any], measure: bool | None = None
                ) -> Iterator[Any]:
    """The backend's stage timer for ``launches``, or None when the backend cannot time or
    measuring is off (``measure``; default: the ``graph_measure`` option)."""
    make = getattr(be, "stage_timer", None)
    timer = None
    if measure is None:
        measure = rt.options.graph_measure
    if measure and make is not None:
        if rt.memory is not None:
            # explicit memory: the timed launches (and the scratch copies of what they write)
            # read the device copies, which must hold the program's data (an index array
            # still on the host would send a gather out of bounds)
            rt.memory.make_device_current([a for launch in launches
                                           for a in getattr(launch, "arrays", ())])
        try:
            timer = make(rt, launches)
        except Exception as exc:   # (timing only tunes a schedule or a plan: never fail)
            log.warning("asyncgpu: could not prepare the launches for timing (%s); going on "
                        "without measurements", exc)
            timer = None
    try:
        yield timer
    finally:
        if timer is not None:
            timer.close()


__all__ = ["TimedLaunch", "stage_timer"]
