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
objects reuses its key, see :mod:`asyncgpu.recorder.keys`). Then, per key, deterministically:

* first time seen: the launches are issued eagerly, one node each (as without the recorder);
* second time: the launches are captured into a graph (streams and launch order from
  :mod:`asyncgpu.recorder.schedule`, ``Options.graph_streams``/``graph_order``), and the graph
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
* another thread's ``free`` of an array a deferred launch uses raises :class:`RecordingError`
  there and frees nothing (:meth:`Recording.defers`): the launch, issued when the body ends,
  would fail then;
* a library call (``asyncgpu.cupy``, ``Array`` operators) inside a recording is captured
  like a launch when it can be (elementwise ufuncs, reductions: see
  :mod:`asyncgpu.recorder.calls`; its result is the same array at every run); any other call
  makes the launches recorded so far issue eagerly, the call and the rest of the body run
  eagerly, and a warning names the call and why;
* outputs are the same arrays at every replay: the next replay overwrites them;
* recordings nest by inlining: a recorded function called inside a recording is part of it;
* under a tenant that splits a kernel (``asyncgpu.tenant(split=...)``, or a regulation plan),
  its launch is deferred as its pieces (:class:`~asyncgpu.recorder.keys.Piece`), which the
  capture orders one after another; a memo made under other splits of its kernels is not
  remembered, so a change of plan keys the run anew (on several devices every run is keyed
  in full, pieces included, and the pieces go to one device's graph:
  :mod:`asyncgpu.recorder.devices`).

Example::

    @graph
    def step(x, y):
        k1[g, b](x, y); k2[g, b](y)
    step(x, y)      # recorded, issued eagerly (2 nodes)
    step(x, y)      # same key: captured, launched (1 node)
    step(x, y)      # launched (1 node)

What becomes of each finished segment (issued, captured, replayed) is
:mod:`asyncgpu.recorder.finish`; the entry points (:func:`~asyncgpu.recorder.entry.graph`,
:func:`~asyncgpu.recorder.entry.record`) are :mod:`asyncgpu.recorder.entry`. This module is
plain Python: the backend captures (``begin_capture``/``end_capture``) and launches
(``graph_launch``) the graphs. Cython compiles it (``recording.pxd``: :class:`Recording` a C
type, :meth:`Recording.remember` typed), so a remembered launch costs a few pointer
comparisons.
"""

from __future__ import annotations

import warnings
from typing import Any

from ..core.errors import RecordingError
from ..runtime.allocation import explicit_frees
from ..runtime.chunks import axis_length
from ..runtime.splits import splits_hold
from ..runtime.recording_hook import (RecordingHook, recording_of, start_recording,
                                       stop_recording, this_thread)
from . import calls as _graph_calls
from .finish import finish, issue_eagerly, replay_remembered
from .keys import Launch, LaunchMemo, same_arguments, split_launch


class Recording(RecordingHook):
    """The recording in progress on one runtime (``runtime.recording``) for one thread.

    With ``split`` a host operation or a library call ends the current *segment* (its
    launches are issued, captured or replayed like a whole recording, keyed by the segment's
    position) and recording goes on after it, instead of raising.
    """

    __slots__ = ("runtime", "token", "name", "launches", "failed", "eager", "split",
                 "segment", "calls", "outcomes", "frozen", "memo", "previous", "cut", "keyed",
                 "placed", "frees")

    def __init__(self, runtime: Any, token: Any, name: str, split: bool) -> None:
        self.runtime = runtime
        self.token = token
        self.name = name
        self.thread = this_thread()
        self.launches: list[Launch] = []
        self.failed = False         # a refused operation: not cached
        self.eager = False          # fell back to eager execution (a library call)
        self.split = split
        #: several devices: each launch keeps the device pinned when it was recorded, and is
        #: keyed anew (a remembered launch would carry its old pin; a split launch's pieces
        #: are in the key, so another split setting is another key)
        self.placed = runtime.placement is not None
        self.segment = 0
        self.calls = 0              # library calls deferred in this segment (their position)
        self.outcomes: list[str] = []
        self.frozen: list[Any] = []     # per segment: the FrozenGraph launched, or None
        #: the segment's previous run, and its launches (empty: nothing to remember)
        self.memo: LaunchMemo | None = None
        self.previous: list[Any] = []
        #: the count of explicit frees when ``memo`` was taken: a launch remembered after a free
        #: is bound in full instead, so that a freed array is refused as an eager launch
        #: refuses it (a host step of a split recording may free one between segments)
        self.frees = 0
        #: a launch of this segment was keyed in full (not its previous run's, taken by
        #: :meth:`remember`): so the segment's launches are not the memo's. (While none was,
        #: each launch is the memo's at its position, so no identity walk is needed.)
        self.keyed = False
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
        # every launch remembered, as many as before: the memo's launches and key
        memo = (self.memo if not self.keyed and len(launches) == len(self.previous)
                else None)
        self.keyed = False
        if memo is not None:
            memo.steady = True
        token = (self.token, self.segment)
        stop_recording(rt, self)        # (the segment's launches are issued, not deferred)
        tenanted = rt._tenanted
        if tenanted:
            # (the segment's graph is the tenant's of its last launch, whose block may have
            # ended: the body's, or the tenant's ``with`` inside the body)
            pins = rt._pins
            outer = getattr(pins, "tenant", 0)
            pins.tenant = launches[-1].tenant
        try:
            frozen = replay_remembered(rt, token, memo) if memo is not None else None
            if frozen is not None:
                outcome = "replayed"
            else:
                outcome, frozen = finish(rt, token, self.name, launches, memo)
        finally:
            if tenanted:
                pins.tenant = outer
            if not last:
                start_recording(rt, self)
        self.segment += 1
        self.calls = 0
        if not last:
            self._remember(rt.graphs.memo.get((self.token, self.segment)))
        self.outcomes.append(outcome)
        self.frozen.append(frozen)

    def repeated(self) -> None:
        """Every launch of the segment's previous run came again, in order (called by
        :meth:`remember` on the last one): if that memo is steady, end the segment here, where
        the runs before ended it, so its graph starts while the body goes on. The host
        operation that ended those runs then finds nothing to end. A launch that is not
        remembered may come first instead: it starts the next segment (correct, since a
        segment may end anywhere; only later segments miss their memos once) and makes the
        memo unsteady (:meth:`went_on`)."""
        memo = self.memo
        if memo is None or not memo.steady:
            return
        rt = self.runtime
        rt._acquire()     # (not ``with``: see ``_Run._enter``)
        try:
            if recording_of(rt, self.thread) is self:
                self.end_segment()
                self.cut = memo
        finally:
            rt._release()

    def _remember(self, memo: LaunchMemo | None) -> None:
        """Match the next launches against ``memo``'s, the segment's previous run (none when
        an array of it was freed, or when it was made under other tenant splits, which may cut
        its launches otherwise: the launches are then keyed in full)."""
        if (memo is not None and memo.usable()
                and (not self.runtime._tenanted or splits_hold(self.runtime, memo.splits))):
            self.memo = memo
            self.previous = memo.launches
            self.frees = explicit_frees()
        else:
            self.memo = None
            self.previous = []

    # -- hooks the runtime calls (under its lock) -------------------------------------------
    def kernel(self, launcher: Any, args: tuple[Any, ...], site: str | None) -> bool:
        """Defer one launch, validated and keyed in full (the launcher has already tried
        :meth:`remember`); False when the launch is another thread's (issue it normally)."""
        if this_thread() != self.thread:
            return False
        rt = self.runtime
        kernel = launcher.kernel
        arrays, values = kernel.bind(rt, args, site)
        # Refused here as an eager launch would be, at its call: a launch deferred past a bad
        # one would run although the body stopped there (or be lost at the block's end).
        if kernel.elementwise:
            axis_length(kernel, arrays, values, site)
        rt.backend.kernel_launch(kernel, launcher, arrays, values, site)
        if self.cut is not None:
            self.went_on()
        if rt._tenanted:
            # (a tenant's split, its own or a plan's, is recorded as the pieces, in order; on
            # several devices each keeps the pin, as the whole launch would)
            pieces = split_launch(rt, launcher, args, arrays, values, site)
            if pieces is not None:
                pin = self.runtime.pinned() if self.placed else -1
                for piece in pieces:
                    piece.tenant = getattr(rt._pins, "tenant", 0)
                    piece.pin = pin
                self.launches.extend(pieces)
                self.keyed = True
                return True
        launch = Launch(launcher, args, arrays, values, site)
        if self.placed:
            launch.pin = self.runtime.pinned()
        if rt._tenanted:
            launch.tenant = getattr(rt._pins, "tenant", 0)
        self.launches.append(launch)
        self.keyed = True
        return True

    def remember(self, launcher: Any, args: tuple[Any, ...]) -> bool:
        """Defer the launch as the previous run's launch at this position (validated and
        keyed then) when it is the same launcher with the same arguments; False if not."""
        if self.placed:
            return False
        launches = self.launches
        previous = self.previous
        position = len(launches)
        if position >= len(previous) or explicit_frees() != self.frees:
            return False
        item = previous[position]
        if type(item) is not Launch:
            return False                # (a library call's place)
        same = item
        if same.launcher is not launcher:
            return False
        old = same.args
        n = len(old)
        if n != len(args):
            return False
        for i in range(n):
            # the common case: the very same objects (live: LaunchMemo.usable)
            if old[i] is not args[i]:
                if not same_arguments(old, args):
                    return False
                break
        if self.runtime._tenanted:
            same.tenant = getattr(self.runtime._pins, "tenant", 0)    # (this run's block's)
        launches.append(same)
        if position + 1 == len(previous) and not self.keyed:
            self.repeated()
        return True

    def went_on(self) -> None:
        """A launch not remembered right after :meth:`repeated` ended a segment: the body did
        not stop where its memo did, so that memo's next run waits for the host operation."""
        self.cut.steady = False
        self.cut = None

    def refuse(self, what: str, array: Any = None) -> None:
        """A host operation inside the recording: raise, or end the segment (``split``).
        ``what`` names it (followed by the ``array``'s description, if given)."""
        if this_thread() != self.thread:
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

    def defers(self, alloc: Any) -> bool:
        """Whether a launch deferred so far (not yet issued) uses allocation ``alloc`` (asked
        by another thread's ``free``, under the runtime's lock)."""
        for launch in self.launches:
            for access in launch.arrays:
                if access.alloc is alloc:
                    return True
        return False

    def library_call(self, call: Any, site: str | None) -> tuple[bool, Any]:
        """A library call: deferred like a launch when it can be captured (returns True and
        its result); otherwise issue what was deferred and run the rest of the body eagerly
        (or end the segment, with ``split``) and return False."""
        if this_thread() != self.thread:
            return False, None
        if self.cut is not None:
            self.went_on()
        launch, result, reason = _graph_calls.defer(self, call, site)
        if launch is not None:
            if self.placed:
                launch.pin = self.runtime.pinned()
            if self.runtime._tenanted:
                launch.tenant = getattr(self.runtime._pins, "tenant", 0)
            self.launches.append(launch)
            self.keyed = True
            self.calls += 1
            return True, result
        if self.split:
            self.end_segment()
            return False, None
        rt = self.runtime
        stop_recording(rt, self)
        self.eager = True
        warnings.warn(
            f"asyncgpu: library call '{call.name}' inside the recording of '{self.name}' "
            f"cannot be captured into a CUDA graph ({reason}); this run of it executes "
            "eagerly (record only the kernel launches and capturable calls, or record with "
            "split=True)", stacklevel=5)
        issue_eagerly(rt, self.launches)
        self.launches = []
        return False, None
