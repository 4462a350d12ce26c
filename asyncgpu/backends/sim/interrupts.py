"""Signals and the simulated device: a step of the device is never torn by a signal's handler.

The model
---------
The simulated device runs its kernels and events in the host thread that steps it, so an
exception a signal handler raises in the middle of a step (Ctrl-C's ``KeyboardInterrupt``, a
timeout's exception from ``SIGALRM``, ``SystemExit`` from a ``SIGTERM`` handler) would lose or
tear a kernel's writes, or lose an operation taken from its queue, where a real device finishes
a kernel whatever the host's threads receive. :func:`uninterrupted` runs one step with the
program's signal handlers held back and calls them as the step ends.

Invariant: the step's operation takes effect whole, and a signal that arrived during it is
acted on, as the program's handler says, right after it.

Example::

    uninterrupted(backend._advance, "end", stream)
"""

from __future__ import annotations

import signal
import sys
import threading
from typing import Any


def uninterrupted(step: Any, *args: Any) -> Any:
    """Run ``step(*args)``, a step of the simulated device, with the program's signal handlers
    held back until it is over.

    A real device finishes a kernel whatever the host's threads receive, and never drops an
    operation it has taken from a queue; the simulated one runs them in the host thread that
    happens to step it, so an exception a handler raises there would lose or tear a kernel's
    writes, or lose an operation taken from its queue before it took effect, a fault of the
    simulation that the runtime cannot see (tests/interrupts.py sends SIGINT at random
    moments). Python runs handlers in the main thread only, whichever of the process's
    threads the signal reaches (NumPy's BLAS starts threads of its own), so in the main thread
    the step runs with a handler that notes the signal in place of each handler set from
    Python (:data:`HELD`), and those are called as the step ends: the signal then lands just
    after the step, as it would on a device. The handlers are read before the ``try`` and the
    others put in place inside it, so a signal acted on as the step begins finds the device as
    it was. A signal left to the system's action (``SIG_DFL``: the process ends, ``SIG_IGN``)
    is not held: no Python code runs for it."""
    if threading.current_thread() is not _MAIN:
        return step(*args)
    held = [(signum, before) for signum in HELD
            for before in (_signals.getsignal(signum),)
            if callable(before) and before is not _note]
    if not held:            # (none set from Python, or nested: ours are in place)
        return step(*args)
    try:
        for signum, _ in held:
            _signals.signal(signum, _note)
        return step(*args)
    finally:
        for signum, before in held:
            _signals.signal(signum, before)
        if noted:
            arrived = noted[:]
            noted.clear()
            handlers = dict(held)
            for signum in arrived:
                handlers[signum](signum, sys._getframe(0))


#: The signals whose Python handlers a step holds back: those a program sets handlers for
#: (Ctrl-C, timeouts, termination, its own).
HELD = tuple(getattr(signal, name) for name in (
    "SIGINT", "SIGTERM", "SIGALRM", "SIGVTALRM", "SIGPROF", "SIGHUP", "SIGUSR1", "SIGUSR2",
    "SIGQUIT", "SIGCHLD", "SIGWINCH", "SIGPIPE", "SIGXCPU") if hasattr(signal, name))
#: The signal module's C half where there is one: a step of the simulated device reads every
#: handler of :data:`HELD` and swaps those set from Python, and ``signal``'s wrappers, which
#: turn numbers into enums, made that 38 us a step where these take 3.5 (Python 3.11).
try:
    import _signal as _signals
except ImportError:         # (a Python without it)
    _signals = signal

#: Signals the main thread received during a step (:func:`uninterrupted`), in order.
noted: list[int] = []
_MAIN = threading.main_thread()


def _note(signum: int, frame: Any) -> None:
    noted.append(signum)
