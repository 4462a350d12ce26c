"""Dependency tracking per allocation and byte range (pure Python).

The model
---------
An :class:`Access` says that a node reads or writes the byte interval ``[lo, hi)`` of one
allocation (its *base*: every view of an array resolves to the allocation it lives in, so two
views conflict exactly when their byte extents overlap). For each allocation the tracker keeps
the *live* accesses of unfinished nodes: the writes, and the reads since them.

* a read depends on every live write it overlaps (read-after-write, RAW);
* a write depends on every live write (WAW) and every live read (WAR) it overlaps;
* reads never depend on reads, so readers of the same data run concurrently (``with-const``).

After a node is issued its accesses are committed: a write removes the entries it covers (anyone
who later conflicts with them conflicts with the write, which is ordered after them); a read
replaces earlier reads *of the same stream* that it covers (stream order makes the later one
enough). Entries of finished nodes are dropped as they are met. So an allocation's entry list
stays bounded by (streams x distinct ranges), however long the program runs without a host sync.

Example::

    K1 writes x[0:64]       entries(x) = [W K1 0:64]
    K2 reads  x[0:64]       depends on K1 (RAW);       entries = [W K1, R K2]
    K3 reads  x[0:32]       depends on K1 (RAW), not on K2
    K4 writes x[0:64]       depends on K2, K3 (WAR) and K1 (WAW); K1 is dropped by the
                            redundant-edge filter because it is a parent of K2.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ._dag import RAW, WAR, WAW, Node


class Access:
    """One node's use of bytes ``[lo, hi)`` of an allocation (``write``: may modify).

    ``key`` identifies the allocation for dependency tracking (its id); ``alloc`` is the
    allocation object itself, which the runtime needs for prefetch and lifetime.
    """

    __slots__ = ("key", "alloc", "lo", "hi", "write", "label")

    def __init__(self, key: Any, alloc: Any, lo: int, hi: int, write: bool, label: str) -> None:
        self.key = key
        self.alloc = alloc
        self.lo = lo
        self.hi = hi
        self.write = write
        self.label = label  # the array's name in messages and edge labels

    def __repr__(self) -> str:
        return f"Access({self.label}, [{self.lo}, {self.hi}), {'w' if self.write else 'r'})"


class _Entry:
    __slots__ = ("lo", "hi", "node", "write")

    def __init__(self, lo: int, hi: int, node: Node, write: bool) -> None:
        self.lo, self.hi, self.node, self.write = lo, hi, node, write


class DependencyTracker:
    """Computes the parents of a new node and remembers live accesses per allocation.

    ``drop_raw``/``drop_war`` plant known bugs for mutation tests (see ``Options.test_bugs``).
    """

    def __init__(self, drop_raw: bool = False, drop_war: bool = False) -> None:
        self._live: dict[Any, list[_Entry]] = {}
        self._drop_raw = drop_raw
        self._drop_war = drop_war

    def conflicts(self, accesses: Iterable[Access]) -> dict[Node, list[tuple[str, str]]]:
        """Unfinished nodes the accesses conflict with -> [(reason, array label)], in issue order."""
        found: dict[Node, list[tuple[str, str]]] = {}
        for acc in accesses:
            entries = self._live.get(acc.key)
            if not entries:
                continue
            lo, hi, write = acc.lo, acc.hi, acc.write
            stale = False
            for e in entries:
                node = e.node
                if node.finished:
                    stale = True
                    continue
                if e.lo >= hi or lo >= e.hi:
                    continue
                if e.write:
                    reason = WAW if write else RAW
                    if reason == RAW and self._drop_raw:
                        continue
                elif write:
                    if self._drop_war:
                        continue
                    reason = WAR
                else:
                    continue
                reasons = found.get(node)
                if reasons is None:
                    found[node] = [(reason, acc.label)]
                else:
                    reasons.append((reason, acc.label))
            if stale:
                entries[:] = [e for e in entries if not e.node.finished]
        return found

    def commit(self, node: Node, accesses: Iterable[Access]) -> None:
        """Record ``node``'s accesses (after it has been given its stream and issued)."""
        stream = node.stream
        for acc in accesses:
            lo, hi = acc.lo, acc.hi
            if lo >= hi:
                continue
            entries = self._live.setdefault(acc.key, [])
            if acc.write:
                entries[:] = [e for e in entries if not (lo <= e.lo and e.hi <= hi)]
            elif stream is not None:
                entries[:] = [
                    e for e in entries
                    if e.write or e.node.stream is not stream or not (lo <= e.lo and e.hi <= hi)
                ]
            entries.append(_Entry(lo, hi, node, acc.write))

    def forget(self, key: Any) -> None:
        """Drop everything known about an allocation (it has been freed)."""
        self._live.pop(key, None)

    def live_entries(self, key: Any) -> int:
        """Number of live entries kept for an allocation (for tests of boundedness)."""
        return sum(1 for e in self._live.get(key, ()) if not e.node.finished)
