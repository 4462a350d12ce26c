"""What becomes of a finished recording (segment): issued eagerly, captured, or replayed.

The model
---------
:func:`finish` takes one segment's deferred launches and its key (``asyncgpu.recorder.keys``)
and decides, per key, from the runtime's graph cache (``asyncgpu.recorder.cache``): a key seen
for the first time is marked seen and its launches are issued eagerly; a seen key is captured
into a graph (``asyncgpu.recorder.capture``) for the set of inputs that are host-current now, and
the graph is launched as one node; a key with a graph for those inputs launches it again; a key
whose capture failed is issued eagerly for good. It also keeps each segment's previous run (the
memo), so a run made only of remembered launches reuses the key, and the graph its previous run
replayed (:func:`replay_remembered`) while that is what the cache would choose.

Invariant: whatever ``finish`` returns, the launches ran exactly once, as one graph launch or
one node each, so a recording never changes what the program computes.

Example::

    outcome, frozen = finish(rt, (token, 0), "step", launches)   # "recorded", None
    outcome, frozen = finish(rt, (token, 0), "step", launches)   # "replayed", FrozenGraph

Plain Python: the backend captures and launches. Cython compiles it (``finish.pxd`` types
:func:`replay_remembered`, the end of every replayed segment).
"""

from __future__ import annotations

import warnings
from typing import Any

from ..core.errors import CaptureError
from ..runtime.splits import split_settings
from ..runtime.frozen import copy_key, graph_inputs
from ..runtime.memory import host_current
from .cache import Placed, Variants, graph_cache
from .capture import capture
from .devices import capture_groups, issue_placed
from .keys import Launch, LaunchMemo, RecordingKey

_SEEN = "seen"                  # a key seen once: next time it is captured
_EAGER = "eager"                # a key whose capture failed: always issued eagerly


def replay_remembered(rt: Any, token: Any, memo: LaunchMemo) -> Any:
    """The common end of a segment that repeated its previous run (``memo``) launch for
    launch: launch again the graph that run replayed, if that is what :func:`finish` would
    choose (the memo and its key's cache entry are still current and hold that graph, and the
    host-current inputs are the ones it copies in). Returns the :class:`FrozenGraph`, or None
    (then :func:`finish` decides). The lookups it spares are the cost of a replay whose body
    ran: the key is the memo's, known equal."""
    replayed = memo.replayed
    key = memo.key
    if replayed is None or key.parts[0] != rt.graph_config:
        return None
    variants, frozen = replayed
    cache = rt.graphs
    if cache is None:
        return None
    memos = cache.memo
    if memos.get(token) is not memo or frozen.graph.destroyed:
        return None
    entries = cache.entries
    if entries.get(key) is not variants:
        return None
    if rt.memory is not None and frozen.host_current(rt) != frozen.copy_in:
        return None             # another variant (or a new capture) is due
    memos[token] = memos.pop(token)      # (the most recently used: see GraphCache)
    entries[key] = entries.pop(key)
    if len(variants) > 1:
        variants.move_to_end(copy_key(frozen.copy_in))
    rt.launch_graph(frozen)
    return frozen


def finish(rt: Any, token: Any, name: str, launches: list[Launch],
           memo: LaunchMemo | None = None) -> tuple[str, Any]:
    """Issue, capture or replay a recording's launches; returns what was done, and the
    :class:`FrozenGraph` launched (None when the launches were issued eagerly). ``memo``: the
    segment's previous run, when every launch is its remembered one (so the key is its key)
    and :func:`replay_remembered` did not apply. Both run under the runtime's lock, as every
    recording hook does (``Recording.end_segment``)."""
    if rt.placement is not None:
        return _finish_placed(rt, token, name, launches)
    config = rt.graph_config
    cache = graph_cache(rt)
    memos = cache.memo
    if memo is not None and memo.key.parts[0] == config and memos.get(token) is memo:
        memos[token] = memos.pop(token)     # the same launches as the memo's: keep it
        key = memo.key
    else:
        key = RecordingKey(token, (config, tuple([l.key for l in launches])))
        memos.pop(token, None)
        memo = memos[token] = LaunchMemo(launches, key)
        if rt._tenanted:
            memo.splits = split_settings(rt, launches)
        if len(memos) > rt.options.graph_cache:
            del memos[next(iter(memos))]    # (it keeps the last run's arrays alive)
    entry = cache.get(key)
    if entry is None:
        cache.put(key, _SEEN)
    elif entry is not _EAGER:
        variants = entry if isinstance(entry, Variants) else None
        copy_in = () if rt.memory is None else (
            variants.latest().host_current(rt) if variants
            else host_current(graph_inputs(launches)[0]))
        frozen = variants.use(copy_in) if variants is not None else None
        if frozen is None:
            try:
                frozen = capture(rt, cache, name, launches, copy_in,
                                 variants.plan() if variants else None)
            except CaptureError as exc:
                _warn_eager(name, exc)
                cache.put(key, _EAGER)
                entry = _EAGER
            except BaseException:
                # (a Ctrl-C during the capture, which it ended: nothing was captured or ran, and
                # the launches were taken from the recording; they run once all the same)
                issue_eagerly(rt, launches)
                raise
            else:
                if not isinstance(entry, Variants):
                    entry = Variants()
                    cache.put(key, entry)
                entry.add(rt, frozen)
        if frozen is not None:
            rt.launch_graph(frozen)
            memo.replayed = (entry, frozen)
            return "replayed", frozen
    issue_eagerly(rt, launches)
    return ("eager" if entry is _EAGER else "recorded"), None


def _finish_placed(rt: Any, token: Any, name: str, launches: list[Any]) -> tuple[str, Any]:
    """:func:`finish` on several devices (``asyncgpu.recorder.devices``): the first run is
    placed launch by launch and its devices kept; the next is captured, one graph per device
    and phase; later runs launch those graphs (a pointer naming the recording then waits for
    them all: ``Runtime.launched_together``). The launches are keyed with their pins."""
    cache = graph_cache(rt)
    key = RecordingKey(token, (rt.graph_config,
                               tuple([(l.key, l.pin) for l in launches])))
    entry = cache.get(key)
    if entry is None:
        cache.put(key, Placed(issue_placed(rt, launches)))
        return "recorded", None
    if isinstance(entry, Placed):
        if entry.graphs is None:
            try:
                entry.graphs = capture_groups(rt, cache, name, launches, entry.slots)
            except CaptureError as exc:
                _warn_eager(name, exc, 6)
                cache.put(key, _EAGER)
                issue_eagerly(rt, launches)
                return "eager", None
        for frozen in entry.graphs:
            rt.launch_graph(frozen)
        rt.launched_together(entry.graphs)
        return "replayed", None
    issue_eagerly(rt, launches)
    return "eager", None


def _warn_eager(name: str, exc: CaptureError, stacklevel: int = 5) -> None:
    warnings.warn(f"asyncgpu: the recording of '{name}' could not be captured "
                  f"into a CUDA graph ({exc}); it runs eagerly", stacklevel=stacklevel)


def issue_eagerly(rt: Any, launches: list[Any]) -> None:
    for launch in launches:
        launch.issue(rt)
