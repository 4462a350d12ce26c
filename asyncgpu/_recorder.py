"""The recorder: repeated stretches of launches frozen into CUDA graphs and replayed.

The model
---------
A *recording* is one run of a recorded body (a function decorated with :func:`graph`, or the
body of ``with record():``). While it runs, kernel launches are validated and **deferred**: the
runtime's launch entry point hands them to the active :class:`Recording` instead of issuing
them. When the body ends, the deferred sequence is the *key*: for each launch the kernel, its
launch configuration, every array argument's allocation identity, byte range, shape, dtype and
strides, and every scalar value (so a different scalar, a rebound array or a different branch
of the body is a different key; a run that repeats the previous one's launches with the same
objects reuses its key, see :mod:`asyncgpu._recording_keys`). Then, per key, deterministically:

* first time seen: the launches are issued eagerly, one node each (as without the recorder);
* second time: the launches are captured into a graph (streams and launch order from
  :mod:`asyncgpu._graph_schedule`, ``Options.graph_streams``/``graph_order``), and the graph
  is launched; every later time the graph is launched again.

Once a run's segment repeated its previous run's launches, all of them and no more (the memo
is then *steady*), later runs end the segment at that memo's last launch instead of at the
host operation or the body's end (:meth:`Recording.repeated`): the graph starts while the
body's Python goes on. A body that launches more than its steady memo had splits there once,
and its memo stops being steady (:meth:`Recording.went_on`).

A launched graph is **one node** of the dynamic DAG whose accesses are the union of the
recorded reads and writes: it waits for the unfinished nodes it conflicts with and host access
to its arrays waits for it. Host-current inputs are copied in by the graph itself with explicit
memory (a key then has up to ``VARIANTS`` graphs, one per set of host-current inputs,
sharing one schedule) and prefetched on its stream before it with managed memory (prefetches
cannot be captured). Keys live in a per-runtime LRU cache of ``Options.graph_cache`` entries;
an evicted key's graphs are destroyed (after their last launch). A graph keeps every array it
touches alive as long as it exists.

Hazards, and what happens:

* host access (indexing, ``numpy()``), ``synchronize`` or ``free`` inside a recording raise
  :class:`RecordingError` naming the array; the launches recorded before it are issued
  eagerly (what the program would have done without the recorder) and recording ends;
* the user's own exception escapes unchanged, after the same eager issue;
* a library call (``asyncgpu.cupy``, ``Array`` operators) inside a recording is captured
  like a launch when it can be (elementwise ufuncs, reductions, ``matmul``: see
  :mod:`asyncgpu._graph_calls`; its result is the same array at every run); any other call
  makes the launches recorded so far issue eagerly, the call and the rest of the body run
  eagerly, and a warning names the call and why;
* outputs are the same arrays at every replay: the next replay overwrites them;
* recordings nest by inlining: a recorded function called inside a recording is part of it.

Example::

    @graph
    def step(x, y):
        k1[g, b](x, y); k2[g, b](y)
    step(x, y)      # recorded, issued eagerly (2 nodes)
    step(x, y)      # same key: captured, launched (1 node)
    step(x, y)      # launched (1 node)

What becomes of each finished segment (issued, captured, replayed) is
:mod:`asyncgpu._recording_finish`. This module is plain Python: the backend captures
(``begin_capture``/``end_capture``) and launches (``graph_launch``) the graphs.
"""

from __future__ import annotations

import functools
import itertools
import logging
import threading
import warnings
from collections import OrderedDict
from operator import is_
from typing import Any, Callable

from . import _compiled as compiled
from . import _graph_calls
from ._errors import RecordingError
from ._graph_capture import FrozenGraph
from ._graph_cache import VARIANTS, copy_key
from ._recording_finish import finish, issue_eagerly, replay_remembered
from ._recording_keys import Launch, LaunchMemo, RecordingKey, argument_key, same_arguments
from ._runtime import Runtime, current_runtime

log = logging.getLogger("asyncgpu")
_tokens = itertools.count(1)


class PythonRecording:
    """``Recording.__init__``, ``end_segment``, ``_remember`` and ``repeated`` in Python: the
    reference for the compiled ones (``asyncgpu/csrc/recording.c``, ``asyncgpu._compiled``)."""

    __slots__ = ()
    runtime: Any
    token: Any
    name: str
    thread: int
    launches: list[Launch]
    failed: bool
    eager: bool
    split: bool
    segment: int
    calls: int
    outcomes: list[str]
    frozen: list[Any]
    memo: LaunchMemo | None
    previous: Any
    cut: LaunchMemo | None

    def __init__(self, runtime: Any, token: Any, name: str, split: bool) -> None:
        self.runtime = runtime
        self.token = token
        self.name = name
        self.thread = threading.get_ident()
        self.launches: list[Launch] = []
        self.failed = False         # a refused operation: not cached
        self.eager = False          # fell back to eager execution (a library call)
        self.split = split
        self.segment = 0
        self.calls = 0              # library calls deferred in this segment (their position)
        self.outcomes: list[str] = []
        self.frozen: list[Any] = []     # per segment: the FrozenGraph launched, or None
        #: the segment's previous run, and its launches (empty: nothing to remember)
        self.memo: LaunchMemo | None = None
        self.previous: Any = ()
        #: the steady memo whose segment ``repeated`` ended last, until a host operation
        #: (it was steady) or a launch not remembered (it was not) follows
        self.cut: LaunchMemo | None = None
        cache = runtime.graphs
        if cache is not None:
            self._remember(cache.memo.get((token, 0)))

    def end_segment(self, last: bool = False) -> None:
        """Finish the launches deferred so far (issue, capture or replay them); ``last``: the
        recording ends here (no next segment to remember). Without launches nothing ends: host
        steps in a row end one segment, not one each."""
        if not self.launches:
            return
        rt = self.runtime
        launches, self.launches = self.launches, []
        previous = self.previous
        memo = (self.memo if len(launches) == len(previous)
                and all(map(is_, launches, previous)) else None)   # every launch remembered
        if memo is not None:
            memo.steady = True
        token = (self.token, self.segment)
        rt.recording = None
        try:
            frozen = replay_remembered(rt, token, memo) if memo is not None else None
            if frozen is not None:
                outcome = "replayed"
            else:
                outcome, frozen = finish(rt, token, self.name, launches, memo)
        finally:
            if not last:
                rt.recording = self
        self.segment += 1
        self.calls = 0
        if not last:
            self._remember(rt.graphs.memo.get((self.token, self.segment)))
        self.outcomes.append(outcome)
        self.frozen.append(frozen)

    def repeated(self) -> None:
        """Every launch of the segment's previous run came again, in order (called on the
        last one by :meth:`remember` and by the compiled launcher, ``asyncgpu/csrc/launcher.c``):
        if that memo is steady, end the segment here, where the runs before ended it, so its
        graph starts while the body goes on. The host operation that ended those runs then
        finds nothing to end. A launch that is not remembered may come first instead: it
        starts the next segment (correct, since a segment may end anywhere; only later
        segments miss their memos once) and makes the memo unsteady (:meth:`went_on`)."""
        memo = self.memo
        if memo is None or not memo.steady:
            return
        rt = self.runtime
        with rt._lock:
            if rt.recording is self:
                self.end_segment()
                self.cut = memo

    def _remember(self, memo: LaunchMemo | None) -> None:
        """Match the next launches against ``memo``'s, the segment's previous run (none when
        an array of it was freed: the launches are then keyed in full)."""
        if memo is not None and memo.usable():
            self.memo = memo
            self.previous = memo.launches
        else:
            self.memo = None
            self.previous = ()


class Recording(*compiled.bases("RecordingBase", PythonRecording)):
    """The recording in progress on one runtime (``runtime.recording``) for one thread.

    With ``split`` a host operation or a library call ends the current *segment* (its
    launches are issued, captured or replayed like a whole recording, keyed by the segment's
    position) and recording goes on after it, instead of raising.
    """

    __slots__ = ("runtime", "token", "name", "thread", "launches", "failed", "eager", "split",
                 "segment", "calls", "outcomes", "frozen", "memo", "previous", "cut")

    # -- hooks the runtime calls (under its lock) -------------------------------------------
    def kernel(self, launcher: Any, args: tuple[Any, ...], site: str | None) -> bool:
        """Defer one launch, validated and keyed in full (the launcher has already tried
        :meth:`remember`); False when the launch is another thread's (issue it normally)."""
        if threading.get_ident() != self.thread:
            return False
        arrays, values = launcher.kernel.bind(self.runtime, args, site)
        if self.cut is not None:
            self.went_on()
        self.launches.append(Launch(launcher, args, arrays, values, site))
        return True

    def remember(self, launcher: Any, args: tuple[Any, ...]) -> bool:
        """Defer the launch as the previous run's launch at this position (validated and
        keyed then) when it is the same launcher with the same arguments; False if not."""
        launches = self.launches
        previous = self.previous
        position = len(launches)
        if position < len(previous):
            same = previous[position]
            if same.launcher is launcher:
                old = same.args
                # the common case, in C: the very same objects (live: LaunchMemo.usable)
                if (len(old) == len(args) and all(map(is_, old, args))) \
                        or same_arguments(old, args):
                    launches.append(same)
                    if position + 1 == len(previous) and all(map(is_, launches, previous)):
                        self.repeated()
                    return True
        return False

    def went_on(self) -> None:
        """A launch not remembered right after :meth:`repeated` ended a segment: the body did
        not stop where its memo did, so that memo's next run waits for the host operation."""
        self.cut.steady = False
        self.cut = None

    def refuse(self, what: str, array: Any = None) -> None:
        """A host operation inside the recording: raise, or end the segment (``split``).
        ``what`` names it (followed by the ``array``'s description, if given)."""
        if threading.get_ident() != self.thread:
            return
        self.cut = None                 # (the segment did end where its memo did)
        if self.split:
            self.end_segment()
            return
        self.failed = True
        if array is not None:
            what = f"{what}array {array.describe()}"
        raise RecordingError(
            f"{what} inside the recording of '{self.name}': recorded launches run only when "
            "the recording ends, so the host cannot see their results here; move the host "
            "access out of the recorded function (record the device part only), or record "
            "with split=True to make each host operation end a segment"
        )

    def library_call(self, call: Any, site: str | None) -> tuple[bool, Any]:
        """A library call: deferred like a launch when it can be captured (returns True and
        its result); otherwise issue what was deferred and run the rest of the body eagerly
        (or end the segment, with ``split``) and return False."""
        if threading.get_ident() != self.thread:
            return False, None
        if self.cut is not None:
            self.went_on()
        launch, result, reason = _graph_calls.defer(self, call, site)
        if launch is not None:
            self.launches.append(launch)
            self.calls += 1
            return True, result
        if self.split:
            self.end_segment()
            return False, None
        rt = self.runtime
        rt.recording = None
        self.eager = True
        warnings.warn(
            f"asyncgpu: library call '{call.name}' inside the recording of '{self.name}' "
            f"cannot be captured into a CUDA graph ({reason}); this run of it executes "
            "eagerly (record only the kernel launches and capturable calls, or record with "
            "split=True)", stacklevel=5)
        issue_eagerly(rt, self.launches)
        self.launches = []
        return False, None


compiled.register(Recording, PythonRecording, ("__init__", "end_segment", "_remember",
                                               "repeated"))


# -- the public entry points ------------------------------------------------------------------
class _Run:
    """Entering and leaving one recording (shared by :class:`Recorder` and :func:`graph`)."""

    def __init__(self, token: Any, name: str, split: bool) -> None:
        self.token = token
        self.name = name
        self.split = split
        #: What the last run did: "recorded" (issued eagerly, key remembered), "replayed"
        #: (captured now or before, launched as one graph), "eager" (a library call or capture
        #: failure made it run eagerly), "inline" (part of an enclosing recording), "empty";
        #: with ``split``, "+"-joined per segment (e.g. "replayed+replayed").
        self.outcome: str | None = None

    def _enter(self) -> Recording | None:
        """Start recording; None when nested in a recording of this thread (inlined)."""
        rt = current_runtime()
        with rt._lock:
            cur = rt.recording
            if cur is not None and cur.thread == threading.get_ident():
                return None             # nested: part of the enclosing recording
            if cur is not None:
                raise RecordingError(
                    f"cannot record '{self.name}': thread {cur.thread} is recording "
                    f"'{cur.name}' on this runtime (record from one thread at a time)")
            rec = rt.recording = Recording(rt, self.token, self.name, self.split)
            return rec

    def _exit(self, rec: Recording | None, failed: bool) -> Recording | None:
        """End the recording; returns it when it ended normally (its segments' outcomes)."""
        if rec is None:
            self.outcome = "inline"
            return None
        rt = rec.runtime
        with rt._lock:
            if rt.recording is rec:
                rt.recording = None
            if not (failed or rec.failed or rec.eager):
                rec.end_segment(last=True)
                outcomes = rec.outcomes
                self.outcome = (outcomes[0] if len(outcomes) == 1
                                else "+".join(outcomes) or "empty")
                return rec
        if failed or rec.failed:
            self.outcome = "eager"
            try:
                issue_eagerly(rt, rec.launches)
            except Exception:
                # the exception already escaping is the one the user must see
                log.exception("asyncgpu: issuing the launches of the failed recording of '%s'",
                              rec.name)
            return None
        issue_eagerly(rt, rec.launches)     # (a library call made the run eager)
        self.outcome = "eager"
        return None

    def clear(self) -> None:
        """Destroy this recorder's graphs (waits for their last launches) and forget its keys."""
        rt = current_runtime()
        with rt._lock:
            if rt.graphs is not None:
                rt.graphs.clear(self.token)


class Recorder(_Run):
    """``with asyncgpu.record():`` (see :func:`record`)."""

    def __init__(self, token: Any, name: str, split: bool) -> None:
        super().__init__(token, name, split)
        self._open: list[Recording | None] = []

    def __enter__(self) -> Recorder:
        self._open.append(self._enter())
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self._exit(self._open.pop(), exc is not None)


class PythonGraphCall:
    """``GraphFunction.__call__`` in Python: the reference for the compiled one, which does
    the plain (not static) call's common case itself (``asyncgpu/csrc/recording.c``)."""

    fn: Callable[..., Any]
    static: bool
    _static: OrderedDict[Any, dict[tuple[int, ...], tuple[FrozenGraph, Any]]]
    _enter: Any
    _exit: Any
    _replay_static: Any

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        akey = argument_key(args, kwargs) if self.static else None
        if akey is not None:
            hits = self._static.get(akey)
            if hits is not None:
                done, result = self._replay_static(hits)
                if done:
                    return result
        rec = self._enter()
        try:
            result = self.fn(*args, **kwargs)
        except BaseException:
            self._exit(rec, True)
            raise
        last = self._exit(rec, False)
        if (akey is not None and last is not None and last.outcomes == ["replayed"]
                and last.frozen[0] is not None):
            frozen = last.frozen[0]
            hits = self._static.setdefault(akey, {})
            hits[copy_key(frozen.copy_in)] = (frozen, result)
            if len(hits) > VARIANTS:         # (as the cache's variants: oldest first)
                del hits[next(iter(hits))]
            if len(self._static) > _STATIC_KEYS:
                self._static.popitem(last=False)
        return result


class GraphFunction(*compiled.bases("GraphCallBase", PythonGraphCall), _Run):
    """A function whose launches are recorded and replayed as CUDA graphs (see :func:`graph`)."""

    def __init__(self, fn: Callable[..., Any], split: bool = False, static: bool = False) -> None:
        if static and split:
            raise ValueError("asyncgpu.graph: static=True replays one graph per call without "
                             "running the body, so it cannot split the body at host operations")
        super().__init__(next(_tokens), getattr(fn, "__qualname__", repr(fn)), split)
        self.fn = fn
        self.static = static
        #: static: argument key -> {allocations copied in: (FrozenGraph, what the capturing
        #: call returned)} (explicit memory: one graph per set of host-current inputs)
        self._static: OrderedDict[Any, dict[tuple[int, ...], tuple[FrozenGraph, Any]]] = \
            OrderedDict()
        functools.update_wrapper(self, fn)

    def _replay_static(self, hits: dict[tuple[int, ...], tuple[FrozenGraph, Any]]
                       ) -> tuple[bool, Any]:
        """Launch the cached graph for the inputs' locations without running the body;
        (False, None) if there is none or it cannot be launched now."""
        rt = current_runtime()
        with rt._lock:
            if rt.recording is not None:
                return False, None      # nested in a recording
            hit = next(iter(hits.values()))
            if rt.memory is not None:
                # (every variant has the same inputs; asking the one that copies nothing in,
                # settled in the steady state, spares the walk over them)
                hit = hits.get(copy_key(hits.get((), hit)[0].host_current(rt)))
                if hit is None:
                    return False, None  # other inputs are host-current: record that case
            frozen = hit[0]
            if frozen.graph.destroyed:
                return False, None      # evicted from the cache
            rt.launch_graph(frozen)
        self.outcome = "replayed"
        return True, hit[1]

    def clear(self) -> None:
        self._static.clear()
        super().clear()

    def __repr__(self) -> str:
        return f"<asyncgpu.graph {self.name}>"


compiled.register(GraphFunction, PythonGraphCall, ("__call__",))

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
    if fn is None:
        return lambda f: GraphFunction(f, split, static)
    return GraphFunction(fn, split, static)


def record(name: str | None = None, *, split: bool = False) -> Recorder:
    """``with asyncgpu.record():`` the block's launches are recorded and replayed as a graph.

    The same rules as :func:`graph`. Blocks are told apart by ``name``, or else by the source
    line of the ``record()`` call, so a ``with record():`` inside a loop replays from its
    second iteration on. The object bound by ``as`` has ``outcome`` and ``clear()``.
    """
    import sys

    if name is None:
        frame = sys._getframe(1)
        site: tuple[str, int] = (frame.f_code.co_filename, frame.f_lineno)
        label = f"record at {site[0].rsplit('/', 1)[-1]}:{site[1]}"
    else:
        site, label = ("name", name), name    # type: ignore[assignment]
    with _sites_lock:
        token = _sites.get(site)
        if token is None:
            token = _sites[site] = next(_tokens)
    return Recorder(token, label, split)


compiled.configure("configure_recording", Recording, LaunchMemo, RecordingKey, FrozenGraph,
                   Runtime, Launch, globals(), replay_remembered,
                   PythonGraphCall.__call__, GraphFunction._replay_static)
