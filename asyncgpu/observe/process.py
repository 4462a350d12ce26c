"""The whole-process trace that ``ASYNCGPU_TRACE=path`` asks for.

The model
---------
Every runtime made while the option is set is traced from its creation (the runtime's
``NEW_RUNTIME_HOOKS``) by a :class:`~asyncgpu.observe.trace.Trace` marked as the process's
(``process_path``), and the trace is written as Chrome/Perfetto JSON at exit. Unlike a
``with asyncgpu.trace()`` block, it follows a ``configure`` that builds its runtime a new
backend (``REBUILD_HOOKS``): its file ends there and the next trace, on the new backend,
writes ``path`` with ``.1`` before the extension (``.2`` and so on), as a second runtime's does.

Invariants: each file is written once; a trace block still open above the process trace at
exit is ended first, so the file is written whatever the program left open.

Example::

    ASYNCGPU_TRACE=run.json python3 program.py     # run.json (and run.1.json, ...) at exit
"""

from __future__ import annotations

import atexit
import logging
import os
from typing import Any

from ..runtime.context import NEW_RUNTIME_HOOKS, REBUILD_HOOKS
from .trace import Trace, _TracingBackend

log = logging.getLogger("asyncgpu")

_process_traces = 0


def trace_process(runtime: Any, path: str) -> Trace:
    """``ASYNCGPU_TRACE=path``: trace the runtime until exit, then write the Chrome JSON there.

    A second runtime in the same process (another backend), or the same runtime once
    ``configure`` built it a new backend, writes ``path`` with ``.1``, ``.2`` before the
    extension.
    """
    global _process_traces
    if _process_traces:
        root, ext = os.path.splitext(path)
        path = f"{root}.{_process_traces}{ext}"
    _process_traces += 1
    t = Trace(runtime)
    t.process_path = path
    t.start()
    atexit.register(_write_process_trace, t)
    return t


def _write_process_trace(t: Trace) -> None:
    """End process trace ``t`` and write its file (at exit, or as its backend is replaced);
    a trace block still open above it is ended first (at exit nothing reads it any more)."""
    if t.process_path is None:
        return                          # (written already)
    path, t.process_path = t.process_path, None
    try:
        rt = t._rt
        while t._active and rt.backend is not t._backend and isinstance(rt.backend,
                                                                          _TracingBackend):
            rt.backend._trace.stop()    # (blocks left open: the process trace is below)
        t.stop()
        t.save_chrome(path)
        log.info("asyncgpu: wrote the process trace to %s", path)
    except OSError as exc:      # (the file system's refusal: one line says it all)
        log.error("asyncgpu: could not write the trace to %s: %s", path, exc)
    except Exception:
        log.exception("asyncgpu: could not write the trace to %s", path)


def _trace_if_asked(runtime: Any) -> None:
    """``ASYNCGPU_TRACE``: every new runtime is traced until exit (:func:`trace_process`)."""
    if runtime.options.trace:
        trace_process(runtime, runtime.options.trace)


def _process_trace_steps_aside(runtime: Any) -> Any:
    """Before ``configure`` builds ``runtime`` a new backend: a process trace on top writes
    its file and a new one begins on the new backend (``path.1``, ...)."""
    backend = runtime.backend
    if not (isinstance(backend, _TracingBackend) and backend.process):
        return None
    _write_process_trace(backend._trace)
    return lambda: _trace_if_asked(runtime)


REBUILD_HOOKS.append(_process_trace_steps_aside)
NEW_RUNTIME_HOOKS.append(_trace_if_asked)
