"""What ``asyncgpu.configure`` does to the runtime: options change, arrays stay usable.

The model
---------
There is one :class:`~asyncgpu.runtime.context.Runtime` per backend and device, and its options are
mutable. A change of options is one of three kinds (``asyncgpu.runtime.current.set_options``):

* **policies** (``execution``, ``dependency``, streams, ``prefetch``, the recorder's options,
  ...): the runtime finishes its pending work and applies them (``Runtime.reconfigure``).
  Arrays, recorded graphs and statistics are untouched.
* an option the backend object is **built from** (:data:`asyncgpu.core.config.BACKEND_BUILD`:
  ``memory``, the simulator's seed, strategy and tick, the checker, stress mode, the launch
  paths): after finishing the work, the same runtime gets a new backend
  (:func:`rebuild_backend`) and every live allocation moves to it. With the same memory model
  the buffers are adopted as they are (on ``cuda`` the new backend takes over the old one's
  memory pool, which owns them); a change of memory model converts each allocation's memory
  (:func:`_moved`): its current bytes (fetched from the device copy first if only that one is
  current) are written to a buffer of the new model from the host side, and the allocation is
  booked host-current there, so its next device use copies it in (explicit) or prefetches it
  (managed). Recorded graphs hold the old backend's graphs and buffers: they are destroyed,
  and graph functions record again on their next calls (a static graph function sees its graph
  destroyed and runs its body). Statistics start again with the new backend, as its streams
  and events do.
* **backend** or **device**: the runtime finishes its work and is *retired*
  (:func:`retire`); the next call makes a runtime for the new selection. Arrays and generators
  of the retired runtime are refused as arguments with a message that names the switch
  (:func:`foreign`); host reads of them still work.

A fault of the pending work is raised by ``configure`` before anything changes (the work has
finished; the runtime stays usable): ``asyncgpu.configure`` is a synchronization point.

Why one runtime per backend with mutable options, rather than a new runtime that adopts the old
one's arrays: every object holding "its" runtime (allocations, generators, the graph cache,
other threads between two calls) keeps holding the right one, so only the buffers under the
allocations have to move, and only when the backend object is rebuilt.

Finding the live allocations: the runtime keeps no registry of its allocations or of their
views (one more bookkeeping step on every allocation and every slice, for an event as rare as a
change of memory model); :func:`_live` walks the garbage collector's objects once per rebuild
instead (``asyncgpu.runtime.allocation.allocations_and_views``, compiled so that no other
thread runs while it holds every object), which also finds the views whose cached pointers and
host views must be dropped.

Example::

    x = ag.array(data)                       # explicit memory: device buffer + host mirror
    with ag.configure(memory="managed"):     # x's bytes move to managed memory
        k[g, b](x)
    x.numpy()                                # back in explicit memory, with k's result
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from ..core.config import BACKEND_BUILD, Options
from ..core.deps import Access
from ..core.statistics import Counters
from . import backend_registry
from .allocation import DEVICE, HOST, Allocation, allocations_and_views
from .memory import holder
from .array import Array
from .current import switched
from .interop import origin

log = logging.getLogger("asyncgpu")


def needs_rebuild(old: Options, new: Options) -> bool:
    """Whether going from ``old`` to ``new`` needs another backend object."""
    return any(getattr(old, name) != getattr(new, name) for name in BACKEND_BUILD)


def rebuild_backend(rt: Any, options: Options, prepare: Callable[[Any, Counters], Any]) -> Any:
    """Give ``rt`` (all work finished, lock held) the backend ``options`` ask for and move
    its live allocations there; returns what ``prepare(backend, stats)`` built over the new
    backend and its statistics (the runtime's streams and the rest, ``Runtime._build``), which
    is called before anything changes. On failure, of either, nothing has changed (the new
    buffers are freed, the new backend closed)."""
    if rt._host_busy:
        rt.settle_host_writes()     # (a large host write still copying into a mirror)
    old = rt.backend
    old_explicit = rt.options.memory == "explicit"
    convert = rt.options.memory != options.memory
    # (adopted buffers need nothing: only a conversion looks for the allocations)
    # (buffers of arrays dropped before: the old backend's; and their allocations, which the
    # walk would find, gone)
    rt._drain_releases()
    allocs, views = _live(rt) if convert else ([], [])
    if convert and old_explicit:
        _push_imports(rt, allocs)
    new = backend_registry.create(options)
    stats = Counters()              # (the new backend's streams and events count from zero)
    stats.listener = rt.stats.listener
    moved: list[tuple[Allocation, Any, int]] = []
    try:
        built = prepare(new, stats)
        if convert:
            for alloc in allocs:
                buffer, location = _moved(alloc, old, new, old_explicit)
                moved.append((alloc, buffer, location))
        else:
            _share_pool(old, new)
    except BaseException:
        for _, buffer, _ in moved:
            new.free(buffer)
        _close(new)
        raise
    if rt.graphs is not None:       # the old backend's graphs: destroyed, recorded again
        rt.graphs.clear()
        rt.graphs = None
    converted = set()
    renamed: dict[Any, Any] = {}
    faults = _faults(old)       # (before the old buffers are freed, which drops their marks)
    for alloc, buffer, location in moved:
        previous = alloc.buffer
        alloc.buffer, alloc.location = buffer, location
        renamed[getattr(previous, "uid", None)] = getattr(buffer, "uid", None)
        old.free(previous)
        converted.add(id(alloc))
    _carry_faults(new, faults, renamed)
    for alloc in allocs:
        alloc.copy_back = None      # (a finished node of the old backend)
    for view in views:
        if id(view._alloc) in converted:
            view._cache.clear()     # pointers, Numba/CuPy views and host views of the old buffer
    _close(old)
    rt.backend = new
    rt.stats = stats
    log.info("asyncgpu.configure: new %s backend (memory %s); %d arrays %s", new.name,
             options.memory, len(allocs), "converted" if convert else "adopted")
    return built


def _faults(backend: Any) -> dict[int, Any]:
    """The simulator's marks of what faulted work was to write (its reads raise until it is
    written again), by buffer; none from a backend that keeps none."""
    marks = getattr(_root(backend), "faulted_marks", None)
    return marks() if marks is not None else {}


def _carry_faults(new: Any, faults: dict[int, Any], renamed: dict[Any, Any]) -> None:
    """Give the new backend ``faults`` (:func:`_faults`), under the buffers' new names."""
    keep = getattr(_root(new), "mark_faulted", None)
    if faults and keep is not None:
        keep({renamed.get(uid, uid): fault for uid, fault in faults.items()})


def _live(rt: Any) -> tuple[list[Allocation], list[Array]]:
    """The live allocations of ``rt`` and every array view of any allocation (one walk)."""
    allocs: list[Allocation] = []
    views: list[Array] = []
    for obj in allocations_and_views():
        kind = type(obj)
        if issubclass(kind, Allocation):
            if obj.runtime is rt and obj.buffer is not None and not obj.freed:
                allocs.append(obj)
        elif issubclass(kind, Array) and getattr(obj, "_alloc", None) is not None:
            views.append(obj)       # (not one whose making was interrupted before its fields)
    return allocs, views


def _moved(alloc: Allocation, old: Any, new: Any, old_explicit: bool) -> tuple[Any, int]:
    """A buffer of ``new`` holding ``alloc``'s current bytes, and its location there.

    Through the host: the explicit model's current copy is the host mirror unless only the
    device copy is (then it is fetched first); managed memory is coherent once the work has
    finished. The bytes are written to the new buffer's host side (managed memory itself, or
    the explicit model's mirror), so the allocation is host-current there. A never-written
    allocation (location 0) stays so: there are no bytes to carry.
    """
    buffer = alloc.buffer
    imported = origin(alloc)
    if imported is not None:
        # The producer's memory stays the array's memory (the producer shares it): the new
        # model's buffer is built over it; its bytes are current there (_push_imports).
        return new.foreign_buffer(*imported), DEVICE << imported[5] if alloc.location else 0
    target = new.alloc(alloc.nbytes)
    if alloc.location == 0 or alloc.nbytes == 0:
        return target, 0
    try:
        slot = holder(alloc.location)
        if old_explicit and not alloc.location & HOST and slot >= 0:
            old.fetch_to_host(buffer, 0, alloc.nbytes, "asyncgpu.configure", [], slot)
        target.host[:] = buffer.host
    except BaseException:
        new.free(target)
        raise
    return target, HOST


def _push_imports(rt: Any, allocs: list[Allocation]) -> None:
    """Explicit memory: imported allocations whose host mirror holds the newest bytes get
    them copied to the producer's memory first (copy nodes, then a wait), since the new
    model's buffer is that memory alone."""
    stale = [a for a in allocs if a.location == HOST and origin(a) is not None]
    if stale:
        rt.memory.before_device([Access(a.id, a, 0, a.nbytes, False, "asyncgpu.configure")
                                 for a in stale])
        rt.synchronize()


def _root(backend: Any) -> Any:
    """The backend under the checker and stress wrappers."""
    while getattr(backend, "inner", None) is not None:
        backend = backend.inner
    return backend


def _share_pool(old: Any, new: Any) -> None:
    """Same memory model: the new backend allocates from, and frees to, the old one's pool,
    which owns the adopted buffers' memory (a CuPy pool that goes away takes its blocks)."""
    pool = getattr(_root(old), "pool", None)
    if pool is not None:
        _root(new).pool = pool


def _close(backend: Any) -> None:
    close = getattr(backend, "close", None)
    if close is not None:
        close()


def retire(rt: Any, new: Options) -> None:
    """``rt`` (all work finished) is no longer selected: close its backend, destroy its
    graphs, end its regulation, and remember which switch retired it, for :func:`foreign`."""
    rt.retired = switched(rt.options, new)
    if rt.graphs is not None:
        rt.graphs.clear()       # a static graph function must not replay them elsewhere
        rt.graphs = None
    if rt.regulator is not None:
        with rt._lock:          # (its plan's SM partitions and host core are given back)
            rt.regulator.stop()
    rt.close()
