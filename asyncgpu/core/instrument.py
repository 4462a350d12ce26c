"""The instrument interface: hooks a tool receives as the runtime builds and runs the DAG.

Register any object with :func:`asyncgpu.instrument` (a context manager); the runtime calls the
hooks it defines, under its lock, in the host's order. Subclassing :class:`Instrument` is
optional: it only documents the hooks and provides no-op defaults. With no instrument registered
the runtime pays one truth test per node; with one, each node is also given its labelled edges.

A hook that raises is logged and its instrument removed, so a broken tool cannot break the
program it observes. Hooks must not call back into asyncgpu (the runtime's lock is held).

Example::

    class Count(ag.Instrument):
        def __init__(self): self.raw = 0
        def edge_added(self, parent, child, reason, array):
            self.raw += reason == "RAW"

    with ag.instrument(Count()) as c:
        ...
    print(c.raw)
"""

from __future__ import annotations

from typing import Any


class Instrument:
    """Base class of instruments (optional; any object with some of these methods works).

    The node objects passed are the runtime's own: read ``id``, ``kind`` (``"kernel"``,
    ``"host-read"``, ``"host-write"``), ``name``, ``site``, ``stream`` (``.index``; None for host
    accesses), ``edges`` ([(parent, reason, array)]); do not keep them beyond the call if memory
    matters (a node pins its arrays until it finishes).
    """

    def node_added(self, node: Any) -> None:
        """A node entered the DAG (its dependencies, stream and edges are known)."""

    def edge_added(self, parent: Any, child: Any, reason: str, array: str) -> None:
        """``child`` depends on ``parent`` for ``reason`` (RAW, WAR or WAW) on ``array``."""

    def node_issued(self, node: Any) -> None:
        """The node was enqueued on its stream (host accesses: performed after their waits)."""

    def synchronized(self, reason: str) -> None:
        """The host blocked for ``reason`` (``host-read``, ``host-write``, ``synchronize``,
        ``sync-mode``, ``free``)."""

    def regulation_changed(self, state: str, plan: Any, stage: str) -> None:
        """Regulation (``asyncgpu.regulate``) changed: its ``state`` (``off``, ``profiling``,
        ``regulated``), the plan in force (an ``asyncgpu.Plan``; None: the tenants' own
        settings) or the stage of the plan's check under way (``""``: none)."""
