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

    Live entries are kept in two lists per allocation, writes and reads, so that a read (the
    common case for inputs shared by many kernels) scans only the writes.
    ``drop_raw``/``drop_war`` plant known bugs for mutation tests (see ``Options.test_bugs``).
    """

    def __init__(self, drop_raw: bool = False, drop_war: bool = False) -> None:
        self._live: dict[Any, tuple[list[_Entry], list[_Entry]]] = {}
        self._drop_raw = drop_raw
        self._drop_war = drop_war

    def conflicts(self, accesses: Iterable[Access]) -> dict[Node, list[tuple[str, str]]]:
        """Unfinished nodes the accesses conflict with -> [(reason, array label)], in issue order."""
        found: dict[Node, list[tuple[str, str]]] = {}
        for acc in accesses:
            live = self._live.get(acc.key)
            if live is None:
                continue
            writes, reads = live
            write = acc.write
            if write:
                if not self._drop_war:
                    self._scan(reads, acc, WAR, found)
                self._scan(writes, acc, WAW, found)
            elif not self._drop_raw:
                self._scan(writes, acc, RAW, found)
        return found

    @staticmethod
    def _scan(entries: list[_Entry], acc: Access, reason: str,
              found: dict[Node, list[tuple[str, str]]]) -> None:
        lo, hi = acc.lo, acc.hi
        stale = False
        for e in entries:
            node = e.node
            if node.finished:
                stale = True
            elif e.lo < hi and lo < e.hi:
                reasons = found.get(node)
                if reasons is None:
                    found[node] = [(reason, acc.label)]
                else:
                    reasons.append((reason, acc.label))
        if stale:
            entries[:] = [e for e in entries if not e.node.finished]

    def commit(self, node: Node, accesses: Iterable[Access]) -> None:
        """Record ``node``'s accesses (after it has been given its stream and issued)."""
        stream = node.stream
        for acc in accesses:
            lo, hi = acc.lo, acc.hi
            if lo >= hi:
                continue
            live = self._live.get(acc.key)
            if live is None:
                live = self._live[acc.key] = ([], [])
            writes, reads = live
            if acc.write:
                # everything the write covers is ordered before it (it depended on them)
                for entries in live:
                    if any(lo <= e.lo and e.hi <= hi for e in entries):
                        entries[:] = [e for e in entries if not (lo <= e.lo and e.hi <= hi)]
                writes.append(_Entry(lo, hi, node, True))
            else:
                # stream order: a later read of the same stream covers an earlier one
                if stream is not None and any(
                    e.node.stream is stream and lo <= e.lo and e.hi <= hi for e in reads
                ):
                    reads[:] = [e for e in reads
                                if e.node.stream is not stream or not (lo <= e.lo and e.hi <= hi)]
                reads.append(_Entry(lo, hi, node, False))

    def forget(self, key: Any) -> None:
        """Drop everything known about an allocation (it has been freed)."""
        self._live.pop(key, None)

    def live_entries(self, key: Any) -> int:
        """Number of live entries kept for an allocation (for tests of boundedness)."""
        live = self._live.get(key, ((), ()))
        return sum(1 for entries in live for e in entries if not e.node.finished)
