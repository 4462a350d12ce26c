"""Calls into asyncgpu from a finalizer the garbage collector runs.

The model
---------
The collector runs finalizers (``__del__``, ``weakref.finalize`` callbacks) in whichever thread
allocates when a collection is due, and that may be a thread in the middle of an asyncgpu call:

* the thread holding the runtime's lock, inside its bookkeeping or inside the simulator's step
  (which runs kernels, and so allocates): the lock is re-entrant, and a call made there would
  run on half-done state (the simulator's queues mid-step, a lock that ``configure`` takes for
  abandoned and releases);
* a thread the lock's holder waits for: the ``sim`` backend runs a Numba kernel's CUDA threads
  on threads of its own (``asyncgpu.backends.sim.numba_sim``), which :func:`mark_waited_thread`
  marks; a call made there would wait for the lock forever.

The runtime follows collections (:func:`watch`: ``gc.callbacks``). During one, a call from the
collecting thread that would take the runtime's lock while that thread holds it, or from a
marked thread, is refused with ``RuntimeError`` before it does anything (:class:`GuardedLock`,
the ``sim`` runtime's lock; ``asyncgpu.configure`` checks for itself), and ``Array.free()`` is
deferred: the array is unusable at once, its memory given back at the runtime's next entry
point, after the work using it (:func:`in_finalizer`).

Example::

    class Buffer:
        def __del__(self):
            self.arr.free()      # from the collector: deferred, never a hang
"""

from __future__ import annotations

import gc
import threading
from _thread import RLock as _RLock
from typing import Any

#: The thread the collector runs in now (its ``threading.get_ident()``), 0 between collections.
_collector = 0
_watching = False
_waited = threading.local()
_get_ident = threading.get_ident
_acquire = _RLock.acquire


def _phase(phase: str, info: Any) -> None:
    global _collector
    _collector = _get_ident() if phase == "start" else 0


def watch() -> None:
    """Follow the collector's collections (once a process)."""
    global _watching
    if not _watching:
        _watching = True
        gc.callbacks.append(_phase)


def in_finalizer() -> bool:
    """Whether this thread is running the collector's finalizers now."""
    return _collector != 0 and _collector == _get_ident()


def mark_waited_thread() -> None:
    """Mark this thread as one the runtime's lock holder may wait for (a simulator thread):
    a finalizer the collector runs here may not call into asyncgpu."""
    _waited.on = True


def refused(where: str) -> RuntimeError:
    """The error of a call into asyncgpu that a finalizer made where it cannot run."""
    return RuntimeError(
        f"an asyncgpu call was made from a finalizer (__del__ or weakref.finalize) that the "
        f"garbage collector ran {where}; nothing was done. Make the call after the collection "
        "(from the finalizer, put the object somewhere the program looks at later); an "
        "array's free() in a finalizer is deferred to the runtime's next call")


def reentry(lock: Any) -> RuntimeError | None:
    """The refusal for a finalizer taking ``lock`` (a runtime's) in this thread now, or None."""
    if _collector == 0 or _collector != _get_ident():
        return None
    if getattr(_waited, "on", False):
        return refused("on a simulator thread, which the runtime is waiting for: it would "
                       "wait forever")
    if lock._is_owned():
        return refused("inside another asyncgpu call of the same thread, which it would "
                       "disrupt")
    return None


class GuardedLock(_RLock):
    """A runtime's re-entrant lock that refuses a finalizer where taking it would disrupt the
    call it interrupted or wait forever (:func:`reentry`). The runtime of a backend that runs
    the program's code inside its calls (``sim``: kernels, twins) uses it, and so does the
    exclusive tenants' gate (``runtime/exclusive``), for the hold it gives back at an interrupt."""

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if _collector:
            error = reentry(self)
            if error is not None:
                raise error
        held = self._recursion_count()
        try:
            return _acquire(self, blocking, timeout)
        except BaseException:
            # (a signal's handler raising as the acquire returned, Ctrl-C's KeyboardInterrupt,
            # runs in this frame, before the caller's try: the hold this call took is given
            # back, or the lock would stay held, and every other thread wait, for good)
            if self._recursion_count() > held:
                self.release()
            raise

    __enter__ = acquire
