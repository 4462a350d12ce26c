"""What becomes of a finished recording (segment): issued eagerly, captured, or replayed.

The model
---------
:func:`finish` takes one segment's deferred launches and its key (``asyncgpu._recording_keys``)
and decides, per key, from the runtime's graph cache (``asyncgpu._graph_cache``): a key seen
for the first time is marked seen and its launches are issued eagerly; a seen key is captured
into a graph (``asyncgpu._graph_capture``) for the set of inputs that are host-current now, and
the graph is launched as one node; a key with a graph for those inputs launches it again; a key
whose capture failed is issued eagerly for good. It also keeps each segment's previous run (the
memo), so a run made only of remembered launches reuses the key, and the graph its previous run
replayed (:func:`_replay_again`) while that is what the cache would choose.

Invariant: whatever ``finish`` returns, the launches ran exactly once, as one graph launch or
one node each, so a recording never changes what the program computes.

Example::

    outcome, frozen = finish(rt, (token, 0), "step", launches)   # "recorded", None
    outcome, frozen = finish(rt, (token, 0), "step", launches)   # "replayed", FrozenGraph

Plain Python: the backend captures and launches.
"""

from __future__ import annotations

import warnings
from typing import Any

from ._errors import CaptureError
from ._graph_cache import GraphCache, Variants, copy_key, graph_cache
from ._graph_capture import capture, graph_inputs
from ._memory import host_current
from ._recording_keys import Launch, LaunchMemo, RecordingKey

_SEEN = "seen"                  # a key seen once: next time it is captured
_EAGER = "eager"                # a key whose capture failed: always issued eagerly


def finish(rt: Any, token: Any, name: str, launches: list[Launch],
           key: RecordingKey | None = None) -> tuple[str, Any]:
    """Issue, capture or replay a recording's launches; returns what was done, and the
    :class:`FrozenGraph` launched (None when the launches were issued eagerly). ``key``: the
    key of the previous run, when every launch is the remembered one (``LaunchMemo``)."""
    opts = rt.options
    config = (opts.graph_streams, opts.graph_order, opts.graph_max_streams,
              opts.graph_lane_cost_us)
    remembered = key is not None and key.parts[0] == config
    if not remembered:
        key = RecordingKey(token, (config, tuple(l.key for l in launches)))
    with rt._lock:
        cache = graph_cache(rt)
        memo = cache.memo
        previous = memo.get(token)
        if remembered and previous is not None and previous.key is key:
            memo.move_to_end(token)     # the same launches as the memo's: keep it
            if _replay_again(rt, cache, previous):
                return "replayed", previous.replayed[1]
        else:
            memo[token] = LaunchMemo(launches, key)
            memo.move_to_end(token)
            if len(memo) > opts.graph_cache:
                memo.popitem(last=False)    # (it keeps the last run's arrays alive)
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
                    warnings.warn(f"asyncgpu: the recording of '{name}' could not be captured "
                                  f"into a CUDA graph ({exc}); it runs eagerly", stacklevel=4)
                    cache.put(key, _EAGER)
                    entry = _EAGER
                else:
                    if not isinstance(entry, Variants):
                        entry = Variants()
                        cache.put(key, entry)
                    entry.add(rt, frozen)
            if frozen is not None:
                rt.launch_graph(frozen)
                memo[token].replayed = (entry, frozen)
                return "replayed", frozen
    issue_eagerly(rt, launches)
    return ("eager" if entry is _EAGER else "recorded"), None


def _replay_again(rt: Any, cache: GraphCache, memo: LaunchMemo) -> bool:
    """Launch the graph the memo's previous run replayed, if that is what :func:`finish` would
    choose again: the key's entry is still the same :class:`Variants` holding that graph, and
    the host-current inputs are the ones it copies in. (The lookups it spares are the cost of
    a replay whose body ran: the key is the memo's, known equal.)"""
    replayed = memo.replayed
    if replayed is None:
        return False
    variants, frozen = replayed
    if frozen.graph.destroyed or cache.entries.get(memo.key) is not variants:
        return False
    if rt.memory is not None and frozen.host_current(rt) != frozen.copy_in:
        return False                # another variant (or a new capture) is due
    cache.entries.move_to_end(memo.key)
    if len(variants) > 1:
        variants.move_to_end(copy_key(frozen.copy_in))
    rt.launch_graph(frozen)
    return True


def issue_eagerly(rt: Any, launches: list[Any]) -> None:
    for launch in launches:
        launch.issue(rt)
