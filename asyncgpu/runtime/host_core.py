"""One host core for tenants on threads of their own, where that measured faster.

The model
---------
Tenants on host threads of their own share one interpreter lock. Where their steps are mostly
host work (launches of a fraction of a millisecond, reads of their results), the lock passes
from thread to thread many times a step, and with the threads on different cores each pass
wakes a thread on another core, which then runs the runtime's code with its caches cold: on
the GPU machine, three such tenants on threads ran at 0.35-0.75 of the speed of their steps
one after another, and at 0.85-1.05 with the whole process held to one core. A regulation
plan whose ``one_core`` names such tenants (``asyncgpu.core.plan.Plan``; the measured check's
remedy where their steps ran slower side by side than one after another) runs their threads
on one core (the one the first of those threads runs on): the first step of one of them
under the plan moves its thread onto the core, where it stays until the plan is set aside
(``release``: another plan, ``regulate(plan="off")``, a profile again, the runtime retired
for another device or backend), and the interpreter lock passes between threads of one core,
whose caches keep the runtime's state. (Moving a thread only for the length of each of its
steps measured no better than not moving it: between steps the threads met on other cores.)

Invariants: every thread moved and still alive gets its cores back when the plan is set aside,
and none moves after (a step that found the plan's core as the plan was set aside stays put);
a thread is moved once, and not at all where the program keeps it off that core; where the
operating system refuses (no ``sched_setaffinity``, or a core the process may not use), the
threads run where they are and the refusal is logged once.

Example::

    core = OneCore(frozenset({1, 2}))
    core.enter()                    # a step of tenant 1 begins: its thread stays on its core
    ...                             # its launches, its reads, its later steps
    core.release()                  # the plan is set aside: the thread's cores are back
"""

from __future__ import annotations

import logging
import os
import threading

log = logging.getLogger("asyncgpu")


def supported() -> bool:
    """Whether this platform lets a thread choose its cores (Linux does)."""
    return hasattr(os, "sched_setaffinity") and hasattr(os, "sched_getaffinity")


def current_core() -> int:
    """The core the calling thread runs on now (Linux: ``/proc/thread-self/stat``), else the
    lowest of those it may use. The threads' core is the one the first of them runs on: the
    scheduler put it where the host had room, where the lowest core often serves the host's
    interrupts."""
    try:
        with open("/proc/thread-self/stat", "rb") as f:
            # (after the command's name, in parentheses, the fields run from the third; the
            # processor is the 39th)
            return int(f.read().rsplit(b")", 1)[1].split()[36])
    except (OSError, ValueError, IndexError):
        return min(os.sched_getaffinity(0))


class OneCore:
    """One runtime's core for the threads of the tenants ``members`` (by number) (see the
    module docstring): ``cpu`` (the core the first thread moved ran on: :func:`current_core`;
    -1 before); the threads seen, each with the cores it had (``moved``; None: left where the
    program keeps it); whether the operating system refused a move (``refused``: from then on
    no thread moves); whether the plan was set aside (``released``: no thread moves after)."""

    __slots__ = ("_lock", "cpu", "members", "moved", "refused", "released")

    def __init__(self, members: frozenset[int]) -> None:
        self.members = members
        self.cpu = -1               # (the core the first thread moved ran on)
        self.moved: dict[int, tuple[threading.Thread, set[int] | None]] = {}
        self.refused = False
        self.released = False
        self._lock = threading.Lock()

    def enter(self) -> None:
        """A step of a member begins: its thread moves onto the core, if it is not there yet
        (it stays until :meth:`release`)."""
        if self.refused or threading.get_native_id() in self.moved:
            return
        with self._lock:        # (threads' first steps may come at once: one core for all)
            if self.released:
                # (the step found the plan's core before the plan was set aside: a thread
                # moved now would keep the core for good)
                return
            try:
                before = os.sched_getaffinity(0)
                if self.cpu < 0:
                    self.cpu = current_core()
                # (a thread the program keeps off that core stays where it is: its choice)
                kept = before if self.cpu in before else None
                if kept is not None:
                    os.sched_setaffinity(0, (self.cpu,))
            except OSError as exc:
                self.refused = True
                log.info("asyncgpu: the tenants' threads could not be moved onto core %d (%s); "
                         "they run where they are", self.cpu, exc)
                return
            # (threads that ended hold nothing: forgotten, so a long-lived plan does not grow)
            moved = {tid: seen for tid, seen in self.moved.items() if seen[0].is_alive()}
            moved[threading.get_native_id()] = (threading.current_thread(), kept)
            self.moved = moved

    def release(self) -> None:
        """The plan is over: every thread moved that is still alive gets its cores back."""
        with self._lock:
            moved, self.moved = self.moved, {}
            self.released = True
        for tid, (thread, before) in moved.items():
            if before is not None and thread.is_alive():
                try:
                    os.sched_setaffinity(tid, before)
                except OSError:     # (it ended meanwhile)
                    pass


__all__ = ["OneCore", "current_core", "supported"]
