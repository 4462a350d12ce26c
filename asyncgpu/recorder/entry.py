"""The recorder's entry points: recorded functions (:func:`graph`) and blocks (:func:`record`).

The model
---------
A :class:`GraphFunction` or a :class:`Recorder` is the user's handle on one recorded body: a
*token* (the body's identity in the runtime's graph cache), a name for messages and the
``split`` choice. Each run enters a :class:`~asyncgpu.recorder.recording.Recording` on the current
runtime (``_Run._enter``; inside another recording of this thread the run is inlined into it)
and leaves it (``_Run._exit``: the last segment ended, which issues, captures or replays it,
and ``outcome`` set). What a recording defers, keys and replays is
:mod:`asyncgpu.recorder.recording`.
A ``static`` function also remembers, per argument key, the graph its capturing call launched
and what that call returned, and later calls with the same arguments launch the graph
without running the body.

Invariant: whatever a run does, its launches run exactly once (eagerly, or as graphs), and
the user's own exception is the one that escapes.

Example::

    @graph
    def step(x, y):
        k1[g, b](x, y); k2[g, b](y)
    for _ in range(3):
        step(x, y)      # recorded, then captured and launched, then launched
    with record():      # a block, told apart by its source line
        k1[g, b](x, y)
"""

from __future__ import annotations

import functools
import inspect
import itertools
import logging
import sys
import threading
import types
import weakref
from typing import Any, Callable

from ..core.errors import RecordingError
from ..core.tenants import DECLARED
from ..runtime import current
from ..runtime.allocation import explicit_frees
from ..runtime.checks import user_frame
from ..runtime.splits import splits_hold
from ..runtime.current import current_runtime
from ..runtime.frozen import FrozenGraph, copy_key
from ..runtime.recording_hook import recording_of, start_recording, stop_recording, this_thread
from .cache import VARIANTS, dropped
from .finish import issue_eagerly
from .keys import argument_key
from .recording import Recording

log = logging.getLogger("asyncgpu")
_tokens = itertools.count(1)
#: The tenants told that their recorded functions run unrecorded in a plan's partition.
_eager_in_partitions: set[str] = set()


def refuse_partitioned(rt: Any, name: str) -> bool:
    """Whether recorded function ``name`` runs unrecorded, its launches eager: where this
    thread's tenant runs on SMs a regulation plan gave it (a CUDA graph's kernels run on every
    SM, so a replay would leave the partition, and a plan never makes a working program fail;
    said once per tenant). RecordingError where the tenant asked for SMs of its own
    (``asyncgpu.tenant(..., sms=N)``)."""
    tenant = rt.tenants[getattr(rt._pins, "tenant", 0)]
    if tenant.partition is None:
        return False
    if tenant.sms is None:
        if tenant.name not in _eager_in_partitions:
            _eager_in_partitions.add(tenant.name)
            log.warning("asyncgpu: recorded function %r runs unrecorded in tenant %r, which a "
                        "regulation plan runs on SMs of its own (a CUDA graph's kernels run on "
                        "every SM); said once per tenant", name, tenant.name)
        return True
    raise RecordingError(
        f"recorded function {name!r} called in tenant {tenant.name!r}, which runs on SMs of "
        f"its own ({tenant.partition} SMs): a CUDA graph's kernels run on every SM, so its "
        "replays would leave the partition; call the function undecorated in this tenant, or "
        f"make the tenant without sms (it asked for {tenant.sms})")


class _Run:
    """Entering and leaving one recording (shared by :class:`Recorder` and :func:`graph`)."""

    __slots__ = ("name", "outcome", "split", "token")

    def __init__(self, token: Any, name: str, split: bool) -> None:
        self.token = token
        self.name = name
        DECLARED.add(name)      # (what a tenant's after= may name)
        self.split = split
        #: What the last run did: "recorded" (issued eagerly, key remembered), "replayed"
        #: (captured now or before, launched as one graph), "eager" (a library call, an
        #: exception or a refused host operation made it run eagerly), "inline" (part of an
        #: enclosing recording), "empty"; "+"-joined per segment (e.g. "replayed+replayed"
        #: with ``split``; "replayed" too when a steady body's graph launched at its last
        #: launch and the body raised after it; "replayed+eager" when a library call ran
        #: eagerly after that launch).
        self.outcome: str | None = None

    def _enter(self) -> Recording | None:
        """Start recording; None when nested in a recording of this thread (inlined)."""
        rt = current._runtime or current_runtime()
        # (the runtime lock's bound acquire and release rather than ``with``: compiled, a with
        # statement looks up and binds the lock's __enter__ and __exit__ at each run, which a
        # replay pays up to three times)
        if rt.gate is None:
            rt._acquire()
        else:
            rt.gate.enter()     # (an exclusive tenant's gate: takes the lock when free)
        rec = None
        try:
            try:
                if rt._tenanted and refuse_partitioned(rt, self.name):
                    return None             # (run unrecorded: see refuse_partitioned)
                if rt._host_busy:
                    rt.settle_host_writes()     # (the recording's decisions read locations)
                if recording_of(rt, this_thread()) is not None:
                    return None             # nested: part of the enclosing recording
                # (other threads may be recording their own functions meanwhile)
                rec = Recording(rt, self.token, self.name, self.split)
                start_recording(rt, rec)
                return rec
            finally:
                rt._release()
        except BaseException:
            # (a Ctrl-C after the recording started, at the release, say: the caller never
            # gets it to end, and this thread's later launches would go into it for good)
            if rec is not None:
                self._recover(rec)
            raise

    def _exit(self, rec: Recording | None, failed: bool) -> Recording | None:
        """End the recording; returns it when it ended normally (its segments' outcomes)."""
        if rec is None:
            self.outcome = "inline"
            return None
        try:
            return self._end(rec, failed)
        except BaseException:
            # (a Ctrl-C before the recording stopped or its launches were taken, at the lock's
            # acquire, say: it ends now as a failed run's, or this thread's later launches
            # would be deferred into it for good)
            self._recover(rec)
            raise

    def _end(self, rec: Recording, failed: bool) -> Recording | None:
        """:meth:`_exit` of a run that recorded."""
        rt = rec.runtime
        rt._acquire()     # (not ``with``: see _enter)
        try:
            if rt._host_busy:
                rt.settle_host_writes()
            stop_recording(rt, rec)
            if not (failed or rec.failed or rec.eager):
                rec.end_segment(True)      # (positional: a C call when compiled)
                outcomes = rec.outcomes
                self.outcome = (outcomes[0] if len(outcomes) == 1
                                else "+".join(outcomes) or "empty")
                return rec
        finally:
            rt._release()
        # (segments that ended before, at a host operation of a split body or where a steady
        # body's launches ended, were recorded or replayed as such: a graph launched shows)
        outcomes = rec.outcomes
        # (taken before they are issued: a run interrupted meanwhile issues none twice)
        launches, rec.launches = rec.launches, []
        if failed or rec.failed:
            self.outcome = "+".join(outcomes if outcomes and not launches
                                    else outcomes + ["eager"])
            self._issue_failed(rec, launches)
            return None
        issue_eagerly(rt, launches)     # (a library call made the run eager)
        self.outcome = "+".join(outcomes + ["eager"])
        return None

    def _recover(self, rec: Recording) -> None:
        """An exception escaped a run where its recording may still be open or its launches
        not taken (a Ctrl-C): end it as a failed run's, its launches issued eagerly. Nothing
        where it ended already."""
        rt = rec.runtime
        rt._acquire()
        try:
            ended = recording_of(rt, rec.thread) is not rec and not rec.launches
            stop_recording(rt, rec)
            launches, rec.launches = rec.launches, []
        finally:
            rt._release()
        if not ended:
            self.outcome = "+".join(rec.outcomes + ["eager"])
            self._issue_failed(rec, launches)

    @staticmethod
    def _issue_failed(rec: Recording, launches: list[Any]) -> None:
        """Issue the launches of a failed run's recording ``rec`` eagerly."""
        try:
            issue_eagerly(rec.runtime, launches)
        except Exception:
            # the exception already escaping is the one the user must see
            log.exception("asyncgpu: issuing the launches of the failed recording of '%s'",
                          rec.name)

    def clear(self) -> None:
        """Destroy this recorder's graphs (waits for their last launches) and forget its keys."""
        rt = current_runtime()
        with rt._lock:
            if rt.graphs is not None:
                rt.graphs.clear(self.token)


class _Blocks(list):
    """The ``record()`` blocks one thread entered and has not left, as (recorder, recording)
    pairs, kept in the thread's local storage (``_threads.blocks``). Python drops that storage
    when the thread ends, while its identifier is still its own (``threading.get_ident``
    gives it to a later thread once it has ended): a block left open then (a generator holding
    one, never closed) ends here, its launches issued eagerly, so that no later thread with the
    same identifier inherits the recording and its launches run once."""

    __slots__ = ("thread",)

    def __del__(self) -> None:
        try:
            if not self or sys.is_finalizing():
                return
        except Exception:   # (at interpreter shutdown the module's globals may be gone)
            return
        for recorder, rec in reversed(self):
            recorder._abandon(self.thread, rec)


_threads = threading.local()
#: What a run's recording is before ``_enter`` returned it (None: inlined, no recording).
_OUTSIDE = object()


class Recorder(_Run):
    """``with asyncgpu.record():`` (see :func:`record`)."""

    __slots__ = ("_open",)

    def __init__(self, token: Any, name: str, split: bool) -> None:
        super().__init__(token, name, split)
        #: per thread: the recordings its blocks opened and have not closed, innermost last (a
        #: recording belongs to the thread that entered it; one recorder may serve several)
        self._open: dict[int, list[Recording | None]] = {}

    def __enter__(self) -> Recorder:
        rec = _OUTSIDE     # (see GraphFunction.__call__)
        thread = this_thread()
        try:
            rec = self._enter()
            blocks = getattr(_threads, "blocks", None)
            if blocks is None:
                blocks = _threads.blocks = _Blocks()
                blocks.thread = thread
            blocks.append((self, rec))
            self._open.setdefault(thread, []).append(rec)
        except BaseException:
            # (a Ctrl-C once the recording started: Python calls no __exit__ for a block whose
            # __enter__ raised, so it ends here, or this thread would record into it for good)
            if rec is not _OUTSIDE:
                self._forget(thread, rec)
                if rec is not None:
                    self._recover(rec)
            raise
        return self

    def _forget(self, thread: int, rec: Recording | None) -> None:
        """Drop the latest of this recorder's blocks of thread ``thread`` (this one) that
        opened ``rec``, where its entries are still kept."""
        opened = self._open.get(thread)
        if opened:
            for i in range(len(opened) - 1, -1, -1):
                if opened[i] is rec:
                    del opened[i]
                    break
            if not opened:
                del self._open[thread]
        blocks = getattr(_threads, "blocks", None) or ()
        for i in range(len(blocks) - 1, -1, -1):
            if blocks[i][0] is self and blocks[i][1] is rec:
                del blocks[i]
                break

    def _abandon(self, thread: int, rec: Recording | None) -> None:
        """Thread ``thread`` ended inside this block (``_Blocks``): end the recording, if it is
        still open, issuing its launches eagerly."""
        opened = self._open.get(thread)
        mine = [i for i, r in enumerate(opened or ()) if r is rec]
        if not mine:
            return          # (left already, by another thread: see __exit__)
        del opened[mine[-1]]
        if not opened:
            del self._open[thread]
        if rec is not None:
            log.warning("asyncgpu: a thread ended inside the block of asyncgpu.record(%r), which "
                        "it never left; its recorded launches are issued now (a recording's "
                        "block must be left by the thread that entered it)", self.name)
            self._exit(rec, True)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(f"asyncgpu.record({self.name!r}) is a context manager (`with "
                        "asyncgpu.record(): ...`), not a decorator; to record a function, "
                        "decorate it with @asyncgpu.graph")

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        rec = _OUTSIDE     # (this block's recording, once looked up)
        try:
            thread = this_thread()
            opened = self._open.get(thread)
            if not opened:
                self._left_elsewhere()
            rec = opened[-1]
            self._forget(thread, rec)
            self._exit(rec, exc is not None)
        except BaseException:
            # (a Ctrl-C before the block's recording ended: it ends here, or this thread would
            # record into it for good. One as __exit__ begins, where Python checks for one as
            # any function begins, leaves the block open whatever __exit__ is written to do)
            if rec is _OUTSIDE:         # (not looked up yet: this thread's latest block)
                thread = this_thread()
                opened = self._open.get(thread)
                if opened:
                    rec = opened[-1]
                    self._forget(thread, rec)
            if rec is not _OUTSIDE and rec is not None:
                self._recover(rec)
            raise

    def _left_elsewhere(self) -> None:
        """Raise for a block left in a thread that did not enter it: a generator holding the
        block, resumed or closed in another thread. The recording ends, its launches issued
        eagerly, so that the thread that entered it can go on; the error says why."""
        others = [t for t, o in self._open.items() if o]
        ended = ""
        if others:
            entered = others[-1]
            opened = self._open[entered]
            rec = opened.pop()
            if not opened:
                del self._open[entered]
            if rec is not None:
                self._exit(rec, True)
                ended = "; the recording ended, its launches issued eagerly"
        raise RuntimeError(
            f"asyncgpu.record({self.name!r}) is left in a thread that did not enter it: a "
            "recording belongs to the thread that entered it (no yield or await inside "
            f"its block; a generator holding one must be closed in that thread){ended}")


class GraphFunction(_Run):
    """A function whose launches are recorded and replayed as CUDA graphs (see :func:`graph`).
    Its instance dictionary holds what ``functools.update_wrapper`` copies from ``fn``."""

    __slots__ = ("__dict__", "__weakref__", "_static", "fn", "static")

    def __init__(self, fn: Callable[..., Any], split: bool = False, static: bool = False) -> None:
        if (inspect.iscoroutinefunction(fn) or inspect.isgeneratorfunction(fn)
                or inspect.isasyncgenfunction(fn)):
            # (calling one only makes the coroutine or generator: its launches come later,
            # outside the recording)
            raise TypeError(f"asyncgpu.graph records a plain function; "
                            f"{getattr(fn, '__qualname__', fn)!r} is a coroutine or generator "
                            "function, whose body runs after the call returns; record the "
                            "launches in a plain function it calls, or with asyncgpu.record() "
                            "around them")
        if static and split:
            raise ValueError("asyncgpu.graph: static=True replays one graph per call without "
                             "running the body, so it cannot split the body at host operations")
        super().__init__(next(_tokens), getattr(fn, "__qualname__", repr(fn)), split)
        self.fn = fn
        self.static = static
        # (dropped, its graphs go too: they keep every array they touch alive)
        weakref.finalize(self, dropped, self.token).atexit = False
        #: static: argument key -> {allocations copied in: (FrozenGraph, what the capturing
        #: call returned)} (explicit memory: one graph per set of host-current inputs)
        self._static: dict[Any, dict[tuple[int, ...], tuple[FrozenGraph, Any]]] = {}
        functools.update_wrapper(self, fn)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Run the body in a recording of its own (or inlined in this thread's); a ``static``
        function whose graph for these arguments can launch now launches it instead."""
        akey = argument_key(args, kwargs) if self.static else None
        if akey is not None:
            hits = self._static.get(akey)
            if hits:                    # (empty once its graphs were all destroyed)
                done, result = self._replay_static(hits)
                if done:
                    return result
        rec = _OUTSIDE     # (assigned as _enter returns: inside the try, so no gap between)
        try:
            rec = self._enter()
            result = self.fn(*args, **kwargs)
        except BaseException:
            if rec is not _OUTSIDE:
                self._exit(rec, True)
            raise
        try:
            last = self._exit(rec, False)
        except BaseException:
            if rec is not None:     # (a Ctrl-C as _exit began, before its own try)
                self._recover(rec)
            raise
        if (akey is not None and last is not None and last.outcomes == ["replayed"]
                and last.frozen[0] is not None):
            frozen = last.frozen[0]
            hits = self._static.setdefault(akey, {})
            hits[copy_key(frozen.copy_in)] = (frozen, result, last.runtime.graph_config)
            if len(hits) > VARIANTS:         # (as the cache's variants: oldest first)
                del hits[next(iter(hits))]
            if len(self._static) > _STATIC_KEYS:   # (the oldest added first)
                del self._static[next(iter(self._static))]
        return result

    def _replay_static(self, hits: dict[tuple[int, ...], tuple[FrozenGraph, Any]]
                       ) -> tuple[bool, Any]:
        """Launch the cached graph for the inputs' locations without running the body;
        (False, None) if there is none or it cannot be launched now."""
        rt = current._runtime or current_runtime()
        if rt.gate is None:
            rt._acquire()     # (not ``with``: see _Run._enter)
        else:
            rt.gate.enter(self.name)    # (the name: a replay may be looked ahead)
        try:
            if rt._tenanted and refuse_partitioned(rt, self.name):
                return False, None      # (the body runs unrecorded)
            if rt._host_busy:
                rt.settle_host_writes()
            if recording_of(rt, this_thread()) is not None:
                return False, None      # nested in this thread's recording
            for hit in hits.values():   # (the first: a loop over a dict's values compiles
                break                   # to a C walk, next(iter(...)) to method calls)
            if hit[0].graph.destroyed:
                # (a configure() or the graph cache destroyed it: the variants that can no
                # longer launch are dropped, or the first would stay a dead one and every
                # call would run the body, its new graph never found)
                for dead in [k for k, h in hits.items() if h[0].graph.destroyed]:
                    del hits[dead]
                if not hits:
                    return False, None
                for hit in hits.values():
                    break
            if rt.memory is not None:
                # (every variant has the same inputs; asking the one that copies nothing in,
                # settled in the steady state, spares the walk over them)
                hit = hits.get(copy_key(hits.get((), hit)[0].host_current(rt)))
                if hit is None:
                    return False, None  # other inputs are host-current: record that case
            frozen = hit[0]
            if frozen.graph.destroyed:
                return False, None      # evicted from the cache
            if hit[2] != rt.graph_config:
                return False, None      # scheduled under other graph options: recorded anew
            if frozen.graph.frees != explicit_frees():
                for acc in frozen.accesses:
                    if acc.alloc.freed:
                        return False, None  # an array it uses was freed: the body names it
            if rt._tenanted and not splits_hold(rt, frozen.splits):
                return False, None      # captured under other splits: the body cuts anew
            rt.launch_graph(frozen)
        finally:
            rt._release()
        self.outcome = "replayed"
        return True, hit[1]

    def __get__(self, instance: Any, owner: Any) -> Any:
        """A method's recorded function, bound to ``instance`` as a function would be: the
        instance is the body's first argument (one recording for all instances; the instance
        is no argument a static call can key, so a static method runs its body at each call,
        its launches replayed as a function's without ``static``)."""
        return self if instance is None else types.MethodType(self, instance)

    def clear(self) -> None:
        self._static.clear()
        super().clear()

    def __repr__(self) -> str:
        return f"<asyncgpu.graph {self.name}>"


#: Argument keys a static graph function remembers (least recently added dropped first).
_STATIC_KEYS = 64


_sites: dict[tuple[str, int], Any] = {}
_sites_lock = threading.Lock()


def graph(fn: Callable[..., Any] | None = None, *, split: bool = False,
          static: bool = False) -> Any:
    """Decorator: record the kernel launches of ``fn`` and replay them as a CUDA graph.

    Each call runs ``fn`` with its launches deferred; the sequence (kernels, launch
    configurations, arrays, scalars) is the key. A key's first call issues the launches
    eagerly; its second call captures them into a graph and launches it; later calls launch
    the graph, as one node of the dynamic DAG. ``fn`` must not touch array contents on the
    host (that raises :class:`asyncgpu.RecordingError`); library calls make the call run
    eagerly, with a warning. With ``split=True`` (``@graph(split=True)``) each host
    operation or library call instead ends a *segment*, recorded and replayed on its own, so a
    loop with host steps in the middle becomes one graph per stretch between them.
    ``fn.clear()`` destroys its graphs; ``fn.outcome`` says what the last call did.

    With ``static=True`` the body stops running once it has been captured: a later call whose
    arguments are the same (the same arrays by allocation, extent, shape and dtype; numbers by
    exact value) launches the graph at once and returns what the capturing call returned.
    That is the cheapest replay (one graph launch per call, no per-kernel work), and it is
    only correct for a body whose launches depend on nothing but its arguments: a global
    scalar, a closure variable or an array the body reaches without taking it as an argument
    is frozen at capture. Arguments of other types make the call run the body as usual.
    """
    for option, value in (("split", split), ("static", static)):
        if type(value) is not bool:
            raise TypeError(f"asyncgpu.graph: {option} must be True or False; got {value!r}")
    if fn is None:
        return lambda f: GraphFunction(_function(f), split, static)
    return GraphFunction(_function(fn), split, static)


def _function(fn: Any) -> Callable[..., Any]:
    """``fn``, if :func:`graph` can record it (TypeError with the decorator's forms if not)."""
    if not callable(fn):
        raise TypeError(f"asyncgpu.graph decorates a function (@asyncgpu.graph, or "
                        f"@asyncgpu.graph(split=..., static=...) with keywords); got {fn!r}")
    return fn


def record(name: str | None = None, *, split: bool = False) -> Recorder:
    """``with asyncgpu.record():`` the block's launches are recorded and replayed as a graph.

    The same rules as :func:`graph`. Blocks are told apart by ``name``, or else by the source
    line of the ``record()`` call, so a ``with record():`` inside a loop replays from its
    second iteration on. The object bound by ``as`` has ``outcome`` and ``clear()``.
    """
    if name is not None and not isinstance(name, str):
        raise TypeError(f"asyncgpu.record: name must be a str or None; got {name!r} (record() "
                        "is used as `with asyncgpu.record():`; to record a function, decorate "
                        "it with @asyncgpu.graph)")
    if type(split) is not bool:
        raise TypeError(f"asyncgpu.record: split must be True or False; got {split!r}")
    if name is None:
        frame = user_frame()
        site: tuple[str, int] = ((frame.f_code.co_filename, frame.f_lineno) if frame is not None
                                 else ("<unknown>", 0))
        label = f"record at {site[0].rsplit('/', 1)[-1]}:{site[1]}"
    else:
        site, label = ("name", name), name    # type: ignore[assignment]
    with _sites_lock:
        token = _sites.get(site)
        if token is None:
            token = _sites[site] = next(_tokens)
    return Recorder(token, label, split)

