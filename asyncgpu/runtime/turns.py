"""Turns: the regulated tenants' steps one at a time, in the order they began.

The model
---------
Where the tenants' steps are issued by several host threads and each step is mostly host work
(short kernels: the launches, the reads), running them side by side makes every step slower
than running them one after another: the threads take turns at the interpreter's lock and at
the runtime's many times per step. A regulation plan with ``turns`` (``asyncgpu.regulate``
chooses it only where it measured faster) makes such steps take turns instead: a step of a
regulated tenant waits until no other thread's step is open, and steps waiting are let in
first come, first served, so that no tenant's thread, finishing a step and starting its
next, takes the turn again ahead of the others; but a high-priority tenant's step goes ahead
of every waiting normal one (its latency is then at most one step of another tenant more
than alone).

Invariants: at most one thread holds the turn; a thread that holds it may open more steps
(nested scopes) without waiting; the turn passes straight to the longest-waiting thread when
its holder's last open step ends, or is free; a wait ends after ``timeout`` seconds without
the turn (:data:`WAIT_S` for a step: one that waits for another thread's step could never
get it), and
:meth:`Turns.open` lets every waiting thread in without it (turns given up).

Example::

    turns = Turns()
    if turns.take(2.0):         # a step begins
        ...                     # its work
        turns.give()            # it ends: the next waiting thread's step begins
"""

from __future__ import annotations

import collections
import threading

#: A step that waited this long (s) for its turn goes on without it, and turns are given up (a
#: step that waits for another tenant's step could never get it).
WAIT_S = 2.0


class _Waiter:
    """A thread waiting for the turn: woken with the turn (``granted``) or without it."""

    __slots__ = ("granted", "thread", "urgent", "woken")

    def __init__(self, thread: int, urgent: bool) -> None:
        self.thread = thread
        self.urgent = urgent
        self.granted = False
        self.woken = threading.Event()


class Turns:
    """One thread's steps at a time, first come, first served (see the module docstring)."""

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._holder: int | None = None
        self._depth = 0
        self._waiting: collections.deque[_Waiter] = collections.deque()

    def take(self, timeout: float, urgent: bool = False) -> bool:
        """Wait for the turn (at once if free or this thread holds it; ``urgent``: ahead of
        every waiting thread that is not); False if ``timeout`` seconds passed, or turns were
        given up (:meth:`open`), without it."""
        me = threading.get_ident()
        with self._mutex:
            if self._holder is None or self._holder == me:
                self._holder = me
                self._depth += 1
                return True
            waiter = _Waiter(me, urgent)
            if urgent:
                ahead = sum(1 for w in self._waiting if w.urgent)
                self._waiting.insert(ahead, waiter)
            else:
                self._waiting.append(waiter)
        waiter.woken.wait(timeout)
        with self._mutex:
            if waiter.granted:
                return True
            if not waiter.woken.is_set():
                self._waiting.remove(waiter)
            return False

    def give(self) -> None:
        """One step of the holding thread ends; after its last, the turn passes on."""
        with self._mutex:
            self._depth -= 1
            if self._depth:
                return
            self._holder = None
            if self._waiting:
                waiter = self._waiting.popleft()
                self._holder, self._depth, waiter.granted = waiter.thread, 1, True
                waiter.woken.set()

    def open(self) -> None:
        """Turns are given up: every waiting thread goes on without the turn (the holder
        still gives it back when its steps end)."""
        with self._mutex:
            while self._waiting:
                self._waiting.popleft().woken.set()

    @property
    def waiting(self) -> int:
        """How many threads wait for the turn now."""
        return len(self._waiting)


__all__ = ["WAIT_S", "Turns"]
