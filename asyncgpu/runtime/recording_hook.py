"""What the runtime asks of a recording in progress: the hook the recorder fills.

The model
---------
While a function is recorded, ``Runtime.recording`` holds a :class:`RecordingHook` (the
recorder's ``Recording``, a subclass); otherwise it is None. The runtime defers to it at its
entry points: a launcher first offers the launch to :meth:`RecordingHook.remember` (the same
launch as the previous run's at this position, taken without the runtime's lock), then the
runtime offers it to :meth:`RecordingHook.kernel` (validated and deferred) before issuing it
itself; library calls and host operations go to ``library_call`` and ``refuse``.

Invariants: only the recording's own ``thread`` is answered by ``remember``; the runtime layer
imports nothing of the recorder (the recorder sits above it), it only calls these methods.

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
