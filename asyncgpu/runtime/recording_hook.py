"""What the runtime asks of a recording in progress: the hook the recorder fills.

The model
---------
While a function is recorded, ``Runtime.recording`` holds a :class:`RecordingHook` (the
recorder's ``Recording``, a subclass); otherwise it is None. The runtime defers to it at its
entry points: a launcher first offers the launch to :meth:`RecordingHook.remember` (the same
launch as the previous run's at this position, taken without the runtime's lock), then the
runtime offers it to :meth:`RecordingHook.kernel` (validated and deferred) before issuing it
itself; library calls and host operations go to ``library_call`` and ``refuse``.

Several threads may record at once, each its own function: with more than one recording in
progress, ``Runtime.recording`` is a :class:`Recordings`, which hands each call to the calling
thread's recording (other threads' launches are issued as usual). Recordings start and end
through :func:`start_recording` and :func:`stop_recording`, under the runtime's lock.

Invariants: a recording answers only its own ``thread``; the runtime layer imports nothing of
the recorder (the recorder sits above it), it only calls these methods.

The class is compiled with the launch path (``setup.py``), so a launch reaches the recording
through one C call rather than a Python attribute lookup and call.

Example::

    rt.recording = Recording(rt, token, "step", split=False)   # a RecordingHook
    k[1, 32](x, y)       # rt.recording.remember(launcher, (x, y)) or .kernel(...), not issued
"""

from __future__ import annotations

from typing import Any

try:
    import cython
except ImportError:     # run as Python, where Cython is not installed
    from threading import get_ident
else:
    if cython.compiled:     # the thread's number, without making an int object per launch
        from cython.cimports.cpython.pythread import PyThread_get_thread_ident as get_ident
    else:
        from threading import get_ident


def this_thread() -> int:
    """The calling thread's identifier (``threading.get_ident``), which a recording keeps as
    its ``thread``: compiled, a C call that makes no int object."""
    return get_ident()


class RecordingHook:
    """The recording of one thread, as the runtime sees it (subclassed by the recorder)."""

    __slots__ = ("thread",)

    def remember(self, launcher: Any, args: tuple[Any, ...]) -> bool:
        """Take the launch as the previous run's at this position, if it is the same; returns
        whether it was taken (the caller then does nothing more)."""
        raise NotImplementedError

    def kernel(self, launcher: Any, args: tuple[Any, ...], site: str | None) -> bool:
        """Defer the validated launch; returns whether it was deferred (False: issue it)."""
        raise NotImplementedError

    def library_call(self, call: Any, site: str | None) -> tuple[bool, Any]:
        """Defer a library call: ``(True, result)``, or ``(False, None)`` to run it now."""
        raise NotImplementedError

    def refuse(self, what: str, array: Any = None) -> None:
        """A host operation inside the recording: raise, or end the segment."""
        raise NotImplementedError

    def defers(self, alloc: Any) -> bool:
        """Whether a launch deferred so far (not yet issued) uses allocation ``alloc``."""
        raise NotImplementedError


#: The ``thread`` of a :class:`Recordings`: no thread's identifier is 0.
MANY = 0


class Recordings(RecordingHook):
    """The recordings of several threads at once: each call goes to the calling thread's own
    (``by_thread``), or is not the recording's (a launch issued as usual, a host operation
    allowed) where the thread records nothing."""

    __slots__ = ("by_thread",)

    def __init__(self, by_thread: dict[int, RecordingHook]) -> None:
        self.thread = MANY
        self.by_thread = by_thread

    def remember(self, launcher: Any, args: tuple[Any, ...]) -> bool:
        mine = self.by_thread.get(this_thread())
        return mine is not None and mine.remember(launcher, args)

    def kernel(self, launcher: Any, args: tuple[Any, ...], site: str | None) -> bool:
        mine = self.by_thread.get(this_thread())
        return mine is not None and mine.kernel(launcher, args, site)

    def library_call(self, call: Any, site: str | None) -> tuple[bool, Any]:
        mine = self.by_thread.get(this_thread())
        return (False, None) if mine is None else mine.library_call(call, site)

    def refuse(self, what: str, array: Any = None) -> None:
        mine = self.by_thread.get(this_thread())
        if mine is not None:
            mine.refuse(what, array)


def recording_of(rt: Any, thread: int) -> RecordingHook | None:
    """Thread ``thread``'s recording in progress on runtime ``rt``, or None."""
    current = rt.recording
    if current is None:
        return None
    if type(current) is Recordings:
        return current.by_thread.get(thread)
    return current if current.thread == thread else None


def deferring_elsewhere(rt: Any, alloc: Any) -> RecordingHook | None:
    """Another thread's recording in progress on ``rt`` with a deferred launch that uses
    allocation ``alloc``, or None (the lock held)."""
    current = rt.recording
    if current is None:
        return None
    mine = this_thread()
    for rec in (current.by_thread.values() if type(current) is Recordings else (current,)):
        if rec.thread != mine and rec.defers(alloc):
            return rec
    return None


def start_recording(rt: Any, recording: RecordingHook) -> None:
    """Make ``recording`` its thread's recording in progress (the runtime's lock held; the
    thread records nothing else)."""
    current = rt.recording
    if current is None:
        rt.recording = recording
    elif type(current) is Recordings:
        current.by_thread[recording.thread] = recording
    else:
        rt.recording = Recordings({current.thread: current, recording.thread: recording})


def stop_recording(rt: Any, recording: RecordingHook) -> None:
    """End ``recording`` as its thread's recording in progress, if it is (the lock held)."""
    current = rt.recording
    if current is recording:
        rt.recording = None
    elif type(current) is Recordings and current.by_thread.get(recording.thread) is recording:
        # (a new object each time: a thread that read the old one without the lock still
        # finds its own recording there)
        left = {t: r for t, r in current.by_thread.items() if r is not recording}
        rt.recording = (next(iter(left.values())) if len(left) == 1
                        else Recordings(left) if left else None)
