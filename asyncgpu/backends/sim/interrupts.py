"""Ctrl-C and the simulated device: a step of the device is never torn by an interrupt.

The model
---------
The simulated device runs its kernels and events in the host thread that steps it, so a
``KeyboardInterrupt`` landing in the middle of a step would lose or tear a kernel's writes, or
lose an operation taken from its queue, where a real device finishes a kernel whatever the
host's threads receive. :func:`uninterrupted` runs one step with SIGINT held back and acts on
it as the step ends.

Invariant: the step's operation takes effect whole, and an interrupt that arrived during it is
raised (or acted on as the program's handler says) right after it.

Example::

    uninterrupted(backend._advance, "end", stream)
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from typing import Any


def uninterrupted(step: Any, *args: Any) -> Any:
    """Run ``step(*args)``, a step of the simulated device, with SIGINT held back until it is
    over.

    A real device finishes a kernel whatever the host's threads receive, and never drops an
    operation it has taken from a queue; the simulated one runs them in the host thread that
    happens to step it, so a ``KeyboardInterrupt`` landing there would lose or tear a kernel's
    writes, or lose an operation taken from its queue before it took effect, a fault of the
    simulation that the runtime cannot see (tests/interrupts.py sends SIGINT at random
    moments). Python raises ``KeyboardInterrupt`` in the main thread only, whichever of the
    process's threads the signal reaches (NumPy's BLAS starts threads of its own), so in the
    main thread the step runs with a handler that notes the signal, and the handler before it
    is called as the step ends: Ctrl-C then lands just after the step, as it would on a
    device. The handler before it is read before the ``try`` and the other put in place inside
    it, so an interrupt raised as the step begins finds the device as it was."""
    if threading.current_thread() is not _MAIN:
        return step(*args)
    before = signal.getsignal(signal.SIGINT)
    if before is _note_interrupt or before is None:     # (nested, or not set from Python)
        return step(*args)
    try:
        signal.signal(signal.SIGINT, _note_interrupt)
        return step(*args)
    finally:
        signal.signal(signal.SIGINT, before)
        if noted:
            noted.clear()
            _deliver(before)


#: SIGINTs the main thread received during a step (:func:`uninterrupted`).
noted: list[Any] = []
_MAIN = threading.main_thread()


def _note_interrupt(signum: int, frame: Any) -> None:
    noted.append(frame)


def _deliver(handler: Any) -> None:
    """Act on a SIGINT held back during a step as ``handler``, the program's, would have."""
    if handler is signal.SIG_IGN:
        return
    if handler is signal.SIG_DFL:
        os.kill(os.getpid(), signal.SIGINT)     # (the default action, now in place again)
        return
    handler(signal.SIGINT, sys._getframe(1))
