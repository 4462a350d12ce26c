"""The process-wide runtime: the one module-level calls use, and the options in force.

The model
---------
``asyncgpu.configure`` selects options; the first call that needs a runtime makes one for them
(:func:`current_runtime`), one per backend and device. A change of options reconfigures that
runtime in place, or, for another backend or device, retires it (:func:`set_options`; the model
is ``asyncgpu.runtime.switch``'s), and objects of a retired runtime are refused with a message
naming the switch (:func:`foreign`).

This module sits at the bottom of the runtime layer: arrays, kernels and library calls find
the runtime they run on here without importing the runtime's class, which the execution
context (``asyncgpu.runtime.context``) installs (:func:`install`). ``Launcher.__call__`` reads
``_runtime`` directly (one attribute, no call) on every launch.

Invariants: ``_runtime`` is None or a runtime made for ``_options``' backend and device;
it changes only under ``_global_lock``. A fork takes both locks first (:func:`_before_fork`),
so a child begins between calls, its locks free.

Example::

    rt = current_runtime()          # made on first use, from the environment's options
    set_options(current_options().replace(execution="sync"))   # reconfigured in place
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
from typing import Any

from ..core.config import Options, options_from_env
from ..core.errors import AnnotationViolation, KernelFault
from . import backend_registry
from .finalizers import in_finalizer, refused, reentry

log = logging.getLogger("asyncgpu")

_runtime: Any = None
_options: Options | None = None
_global_lock = threading.RLock()    # (re-entrant: a finalizer inside configure is refused)
_runtime_type: Any = None        # asyncgpu.runtime.context.Runtime, once installed
_exit_check_registered = False


def install(runtime_type: Any) -> None:
    """The class :func:`current_runtime` makes runtimes of (``asyncgpu.runtime.context``)."""
    global _runtime_type
    _runtime_type = runtime_type


def current_options() -> Options:
    """The options in force (read from the environment the first time)."""
    global _options
    if _options is None:
        _options = options_from_env()
    return _options


def current_runtime() -> Any:
    """The runtime that module-level calls use, created on first use."""
    global _runtime
    rt = _runtime
    if rt is not None:
        return rt
    with _global_lock:
        if _runtime is None:
            _runtime = _runtime_type(current_options())
            if not _exit_check_registered:
                _register_exit_check()
        return _runtime


#: How long the exit's check waits for another thread to leave the runtime's lock.
EXIT_LOCK_WAIT_S = 2.0


def _register_exit_check() -> None:
    global _exit_check_registered
    _exit_check_registered = True
    atexit.register(_faults_at_exit)


def _faults_at_exit() -> None:
    """A program that ends without waiting for its last work would never hear of that work's
    faults: finish it at exit and log them (an exception raised here would reach nobody)."""
    rt = _runtime
    if rt is None or rt.recording is not None:
        return      # (a recording: its launches were never issued)
    # Threads still running (daemons) take the lock between their calls: wait for a turn,
    # then hold it, so that they issue nothing more while the work in flight is finished.
    if not rt._lock.acquire(timeout=EXIT_LOCK_WAIT_S):
        if rt.streams.inflight:
            log.warning("the work in flight at exit was not checked for faults: another "
                        "thread stayed inside an asyncgpu call for %.0f s", EXIT_LOCK_WAIT_S)
        return
    try:
        rt.synchronize()
    except (KernelFault, AnnotationViolation) as fault:
        log.error("faults no synchronization reported before the program ended: %s", fault)
    except Exception:
        log.warning("could not finish the pending work at exit", exc_info=True)
    finally:
        rt._lock.release()


#: How long a fork waits for another thread's asyncgpu call to end, so that the child starts
#: with the runtime between calls (its only thread is the one that forked).
FORK_LOCK_WAIT_S = 5.0
#: The locks the forking thread holds across the fork (the process's, then the runtime's).
_held_across_fork: list[Any] = []


def _before_fork() -> None:
    """``os.fork`` in this thread: take the process's and the runtime's locks first, waiting
    for a call another thread is inside, so that the child does not begin with a lock held
    by a thread it does not have (its first call would wait for good)."""
    rt = _runtime
    for lock in (_global_lock, rt._lock if rt is not None else None):
        if lock is not None and lock.acquire(timeout=FORK_LOCK_WAIT_S):
            _held_across_fork.append(lock)


def _after_fork_in_parent() -> None:
    while _held_across_fork:
        _held_across_fork.pop().release()


def _after_fork_in_child() -> None:
    """In the child: its locks free (each held by the thread that forked, or, past the wait,
    by a thread the child does not have, whose call it then begins in the middle of: said)."""
    rt = _runtime
    locks = [_global_lock] + ([rt._lock] if rt is not None else [])
    if len(_held_across_fork) < len(locks):
        log.warning("asyncgpu: this process was forked while another thread stayed inside an "
                    "asyncgpu call for %.0f s; the child's runtime may be in the middle of that "
                    "call (fork between calls, or start the child with multiprocessing's "
                    "'spawn')", FORK_LOCK_WAIT_S)
    _held_across_fork.clear()
    for lock in locks:
        lock._at_fork_reinit()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent,
                        after_in_child=_after_fork_in_child)


def _take_back_abandoned_lock(rt: Any) -> None:
    """``configure`` runs between calls, never inside one, so a runtime lock this thread holds
    here was abandoned: an exception (Ctrl-C) landed where Python cannot release a ``with``
    block's lock, between the block's last line and its exit. Other threads would wait for it
    forever, so it is released here. A finalizer the collector runs inside a call of this
    thread finds the lock held too, in use: it is refused (``asyncgpu.runtime.finalizers``)."""
    lock = rt._lock
    error = reentry(lock)
    if error is not None:       # (a finalizer inside a call of this thread: the lock is in use)
        raise error
    if lock._is_owned():
        lock._release_save()        # (every level of the reentrant lock at once)
        log.warning("asyncgpu.configure released the runtime's lock, which an interrupted "
                    "call had left held")


def traced_by_user(rt: Any) -> bool:
    """Whether a ``with asyncgpu.trace()`` block is in progress on ``rt`` (its wrapper is the
    backend; a process trace, ``ASYNCGPU_TRACE``, follows a new backend and is not one)."""
    backend = rt.backend
    return getattr(backend, "traced", None) is not None and not getattr(backend, "process", False)


def refuse_while_traced(rt: Any, change: str) -> None:
    """RuntimeError, before anything changes, where a trace block is in progress on ``rt``:
    it wraps the backend and reads its clock, so it cannot span ``change``."""
    if traced_by_user(rt):
        raise RuntimeError(
            f"asyncgpu.configure({change}) builds a new backend, which a trace in progress "
            "cannot follow; end the 'with asyncgpu.trace()' block first, or change these "
            "options outside it")


def set_options(new: Options) -> None:
    """Switch options: same backend and device -> the runtime is reconfigured (its arrays
    stay usable); another backend or device -> the runtime is retired, the next call makes
    one for the new selection (``asyncgpu.runtime.switch``). If the pending work faulted, the
    fault is raised and nothing changes (the work has finished: a second call switches)."""
    global _runtime, _options
    if in_finalizer() and _global_lock._is_owned():
        raise refused("inside asyncgpu.configure, which it would disrupt")
    with _global_lock:
        old = _runtime
        if old is not None:
            _take_back_abandoned_lock(old)
            if describe(new) == describe(old.options):
                old.reconfigure(new)
            else:
                refuse_while_traced(old, "{}={!r}".format(
                    *(("backend", new.backend) if describe(new)[0] != describe(old.options)[0]
                      else ("devices", new.devices))))
                old.synchronize()
                old.retire(new)
                _runtime = None
        _options = new


def describe(options: Options) -> tuple[str, str]:
    """(backend name, devices) of a selection: what a runtime is one per."""
    devices = options.devices
    if devices == 1:
        where = f"device {options.device}"
    else:
        where = f"devices {devices}"
        if backend_registry.resolve(options) == "sim":
            where += f" of {options.sim_devices}"
    return backend_registry.resolve(options), where


def foreign(rt: Any) -> str:
    """Why an array or generator of runtime ``rt`` cannot be used with the current one: the end
    of a message that begins with the object's name."""
    retired = getattr(rt, "retired", None)
    if retired is None:
        return ("belongs to another runtime than the one asyncgpu.configure selects now; "
                "create it again")
    # (what the runtime is on now, not what retired it: configure may have switched again)
    made, now = switched(rt.options, current_options())
    if made == now:
        return (f"was created on {made} before asyncgpu.configure switched away and back "
                "(a new runtime); create it again")
    return f"was created on {made}; asyncgpu.configure switched to {now}; create it again"


def switched(old: Options, new: Options) -> tuple[str, str]:
    """How a switch from options ``old`` to ``new`` is named: ("backend 'sim'", "'cuda'") or
    ("device 0", "device 1")."""
    name, where = describe(old)
    to_name, to_where = describe(new)
    if name != to_name:
        return f"backend '{name}'", f"'{to_name}'"
    return where, to_where
