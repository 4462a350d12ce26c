"""Stream-choice policies: small, swappable, pure decision strategies.

GrCUDA splits the choice in two. A node without unfinished parents asks the *new-stream* policy;
a node with parents asks the *parent-stream* policy, which may decline (``None``) and fall back
to the new-stream policy.

* ``reuse``: the free stream (no unfinished work) that has been free longest; a new stream only
  when none is free and the pool is below ``max_streams``; otherwise the least recently used.
* ``always-new``: a stream that has never been used while below ``max_streams`` (GrCUDA creates
  one per node without bound; we cap it), then the least recently used.
* ``disjoint``: the first parent whose stream has not yet been handed to another child keeps its
  stream; later siblings get other streams, so they run concurrently.
* ``same-as-parent``: always the first parent's stream (siblings serialize).
* ``serial``: one stream for everything (``execution="sync"``).
* ``random``: stress mode (``ASYNCGPU_STRESS=1``): any stream, seeded; no parent policy.

Each policy only *decides*; :class:`asyncgpu.core.streams.StreamManager` obtains streams.
Every policy is a :class:`NewStreamPolicy` or a :class:`ParentStreamPolicy`: compiled
(``policies.pxd``), the stream manager calls ``pick`` as a C method.
"""

from __future__ import annotations

import random
from typing import Any, Protocol


class StreamPool(Protocol):
    """What a policy may ask of the stream manager."""

    def take_free(self) -> Any | None: ...
    def can_grow(self) -> bool: ...
    def grow(self) -> Any: ...
    def least_recently_used(self) -> Any: ...
    def first(self) -> Any: ...
    def own(self) -> list[Any]: ...


class NewStreamPolicy:
    """Chooses the stream of a node that inherits none: ``pick(pool)`` returns one of the
    pool's streams (possibly a new one)."""

    __slots__ = ()
    name = ""

    def pick(self, pool: StreamPool) -> Any:
        raise NotImplementedError


class ParentStreamPolicy:
    """Chooses whether a node runs on one of its unfinished parents' streams: ``pick(parents)``
    returns that stream, or None to ask the new-stream policy."""

    __slots__ = ()
    name = ""

    def pick(self, parents: list[Any]) -> Any | None:
        raise NotImplementedError


class Reuse(NewStreamPolicy):
    """New-stream policy ``reuse`` (FIFO over free streams)."""

    __slots__ = ()
    name = "reuse"

    def pick(self, pool: StreamPool) -> Any:
        free = pool.take_free()
        if free is not None:
            return free
        return pool.grow() if pool.can_grow() else pool.least_recently_used()


class AlwaysNew(NewStreamPolicy):
    """New-stream policy ``always-new`` (fresh streams up to the cap)."""

    __slots__ = ()
    name = "always-new"

    def pick(self, pool: StreamPool) -> Any:
        return pool.grow() if pool.can_grow() else pool.least_recently_used()


class Disjoint(ParentStreamPolicy):
    """Parent-stream policy ``disjoint``: one child per parent inherits its stream."""

    __slots__ = ()
    name = "disjoint"

    def pick(self, parents: list[Any]) -> Any | None:
        for p in parents:
            if not p.handed_off:
                p.handed_off = True
                return p.stream
        return None


class SameAsParent(ParentStreamPolicy):
    """Parent-stream policy ``same-as-parent``: every child runs on its first parent's stream."""

    __slots__ = ()
    name = "same-as-parent"

    def pick(self, parents: list[Any]) -> Any | None:
        return parents[0].stream


class Serial(NewStreamPolicy):
    """Everything on stream 0 (the ``sync`` execution policy and a debugging aid)."""

    __slots__ = ()
    name = "serial"

    def pick(self, pool: StreamPool) -> Any:
        return pool.first()


class RandomStream(NewStreamPolicy):
    """Stress mode: any stream of the pool, or a new one, at random (seeded).

    Correct for any choice (the runtime orders nodes by events, not by stream placement), so
    a wrong answer under this policy is a missing dependency that placement used to hide.
    """

    __slots__ = ("rng",)
    name = "random"

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def pick(self, pool: StreamPool) -> Any:
        idle = pool.take_free()       # (also keeps the pool's free list from growing)
        r = self.rng.random()
        own = pool.own()
        if pool.can_grow() and (r < 0.2 or not own):
            return pool.grow()
        if idle is not None and r < 0.4:
            return idle
        return self.rng.choice(own)


NEW_STREAM = {"reuse": Reuse, "always-new": AlwaysNew}
PARENT_STREAM = {"disjoint": Disjoint, "same-as-parent": SameAsParent}
