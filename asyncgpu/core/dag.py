"""Nodes of the dynamic DAG, and the filter that keeps their edges few.

The model
---------
Every piece of work the runtime schedules is a :class:`Node`: a kernel launch (later: a library
call, a copy, a replayed graph) or a host access. A device node lives on one stream, has a
per-stream sequence number and one completion event; its ``parents`` are the unfinished nodes it
must wait for, each edge labelled with its reason (RAW, WAR, WAW) and the array.

A node is *finished* once the host knows its work is complete: after a host wait on its event
(or on a later node of the same stream, or on a descendant), after a device-wide synchronize, or
when polling its event says so; ``asyncgpu.core.streams.StreamManager.finished`` retires it.
Finished nodes never become parents again, give their event back to the pool, drop their
parents (so history is not kept alive) and release the arrays they kept alive, which is what
makes it safe to recycle memory.

Invariants
----------
* Stream FIFO: within ``stream.inflight`` sequence numbers increase; when a node is finished,
  every earlier node of its stream is finished too (CUDA runs a stream in order).
* Ancestors: when a node is finished, all its ancestors are finished (it waited on their events).
* Every edge goes from an earlier node to a later one, so the DAG is acyclic by construction.

Example::

    A(x: write) -> B(x: read) -> C(x: write)      edges A->B (RAW x), B->C (WAR x)
    host waits on C  =>  C, B and A are finished (ancestors), so is everything before C on its stream.

This module is plain Python: no CuPy or Numba.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Iterable
from typing import Any


RAW, WAR, WAW = "RAW", "WAR", "WAW"

_CREATED = operator.attrgetter("id")

_ids = itertools.count(1)
EMPTY: Any = ()      # shared empty default: nodes without parents or recorded edges are common


class Node:
    """One unit of scheduled work (created by the runtime; there is no public constructor)."""

    __slots__ = (
        "id", "kind", "name", "site", "stream", "seq", "event", "parents", "edges",
        "accesses", "keepalive", "finished", "handed_off", "launch", "device", "tenant",
    )

    def label(self) -> str:
        """``kernel 'square' at prog.py:12`` (used in messages and traces)."""
        where = f" at {self.site}" if self.site else ""
        if self.kind in ("kernel", "call", "graph"):
            return f"{self.kind} '{self.name}'{where}"
        return f"{self.kind} of '{self.name}'{where}"

    def __repr__(self) -> str:
        state = "finished" if self.finished else "pending"
        stream = getattr(self.stream, "index", None)
        return f"<Node {self.id} {self.label()} stream={stream} {state}>"

    def __init__(self, kind: str, name: str, site: str | None, accesses: list[Any]) -> None:
        self.id = next(_ids)
        self.kind = kind            # "kernel", "host-read", "host-write", ...
        self.name = name
        self.site = site            # "file.py:12" of the user's call, when known
        self.accesses = accesses    # [Access]
        self.stream: Any = None     # StreamState for device nodes
        self.seq = -1
        self.event: Any = None
        self.parents: list[Node] = EMPTY        # replaced, never mutated in place
        self.edges: list[tuple[Node, str, str]] = EMPTY   # (parent, reason, array label)
        self.keepalive: Any = None  # allocations pinned until the node is finished
        self.finished = False
        self.handed_off = False     # its stream was inherited by a child (disjoint policy)
        self.launch: Any = None     # backend-specific launch object
        self.device = 0
        self.tenant = 0             # the tenant that issued it (0: the default one)


def reduce_parents(candidates: Iterable[Node]) -> list[Node]:
    """GrCUDA's redundant-edge filter: drop a candidate that is a parent of another candidate.

    If N depends on F and on F's child G, the edge F -> N is implied by F -> G -> N.
    """
    cands = list(candidates)
    count = len(cands)
    if count < 2:
        return cands
    cands.sort(key=_CREATED)   # creation order: the policies pick the earliest parent first
    if count == 2:
        # (the common case of two, without the set; both directions are checked, since a copy
        # node made for a launch is issued before the launch's own, older node)
        first, second = cands[0], cands[1]
        if first in second.parents:
            return [second]
        if second in first.parents:
            return [first]
        return cands
    implied = set()
    for c in cands:
        implied.update(c.parents)
    return [c for c in cands if c not in implied]
