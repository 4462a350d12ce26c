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

from .dag import RAW, WAR, WAW, Node


class Access:
    """One node's use of bytes ``[lo, hi)`` of an allocation (``write``: may modify).

    ``key`` identifies the allocation for dependency tracking (its id); ``alloc`` is the
    allocation object itself, which the runtime needs for prefetch and lifetime. ``read``: the
    old contents may be read (False only for a write-only kernel argument; a write that may
    also read is the conservative default).
    """

    __slots__ = ("key", "alloc", "lo", "hi", "write", "label", "read")

    def __init__(self, key: Any, alloc: Any, lo: int, hi: int, write: bool, label: str,
                 read: bool = True) -> None:
        self.key = key
        self.alloc = alloc
        self.lo = lo
        self.hi = hi
        self.write = write
        self.label = label  # the array's name in messages and edge labels
        self.read = read

    def __repr__(self) -> str:
        return f"Access({self.label}, [{self.lo}, {self.hi}), {'w' if self.write else 'r'})"


def access(key: Any, alloc: Any, lo: int, hi: int, write: bool, label: str | None) -> Access:
    """``Access(key, alloc, lo, hi, write, label)``, an access that may read."""
    # (a constructor function, not __init__: compiled, it sets the fields without parsing a
    # call's arguments, once per host access)
    self = Access.__new__(Access)
    self.key = key
    self.alloc = alloc
    self.lo = lo
    self.hi = hi
    self.write = write
    self.label = label
    self.read = True
    return self


class _Live:
    """The live accesses of one allocation: writes, and reads by stream.

    Entries are ``(lo, hi, node)`` tuples. Reads are kept per stream because a read replaces
    the earlier reads of its own stream that it covers (stream order makes the later one enough),
    so that replacement looks at one stream's few entries, not at every reader's.
    """

    __slots__ = ("writes", "reads")

    def __init__(self) -> None:
        self.writes: list[tuple[int, int, Node]] = []
        self.reads: dict[Any, list[tuple[int, int, Node]]] = {}


def _add(found: dict[Node, list[tuple[str, str]]], node: Node, reason: str, label: str) -> None:
    reasons = found.get(node)
    if reasons is None:
        found[node] = [(reason, label)]
    else:
        reasons.append((reason, label))


def _scan(entries: list[tuple[int, int, Node]], lo: int, hi: int, reason: str, label: str,
          found: dict[Node, list[tuple[str, str]]]) -> None:
    stale = False
    for elo, ehi, node in entries:
        if node.finished:
            stale = True
        elif elo < hi and lo < ehi:
            _add(found, node, reason, label)
    if stale:
        entries[:] = [e for e in entries if not e[2].finished]


def _scan_reads(reads: dict[Any, list[tuple[int, int, Node]]], lo: int, hi: int, label: str,
                found: dict[Node, list[tuple[str, str]]]) -> None:
    stale = None
    for stream, entries in reads.items():
        alive = False
        for elo, ehi, node in entries:
            if node.finished:
                continue
            alive = True
            if elo < hi and lo < ehi:
                _add(found, node, WAR, label)
        if not alive:
            if stale is None:
                stale = [stream]
            else:
                stale.append(stream)
    if stale:
        for stream in stale:
            del reads[stream]


class DependencyTracker:
    """Computes the parents of a new node and remembers live accesses per allocation.

    A read (the common case for inputs shared by many kernels) scans only the writes.
    """

    __slots__ = ("_live", "version")

    def __init__(self) -> None:
        self._live: dict[Any, _Live] = {}
        #: Bumped by every commit and forget: while it stands still the live accesses are
        #: those the last commit left (dropping finished entries does not count: it changes
        #: no answer). See :meth:`self_conflicts`.
        self.version = 0

    def self_conflicts(self, accesses: list[Access]) -> list[tuple[str, str]]:
        """Why a node with ``accesses`` depends on an unfinished earlier node with the very same
        accesses: [(reason, array label)], empty when both only read.

        When it is not empty and nothing was committed after the earlier node (:attr:`version`
        unchanged), the earlier node is the only parent the new one needs: every other live
        access the new one conflicts with, the earlier one conflicted with too, so it is
        ordered before the earlier one already (a graph replayed again, ``Runtime.launch_graph``).
        """
        probe = DependencyTracker()
        earlier = Node("probe", "probe", None, accesses)
        probe.commit(earlier, accesses)
        return probe.conflicts(accesses).get(earlier, [])

    def writes_beyond(self, key: Any, known: Any) -> bool:
        """Whether an unfinished node not in ``known`` writes any byte of the allocation
        (``HostAccess`` fetches a small allocation whole only when none does)."""
        live = self._live.get(key)
        if live is not None:
            for _, _, node in live.writes:
                if not node.finished and node not in known:
                    return True
        return False

    def forget(self, key: Any) -> None:
        """Drop everything known about an allocation (it has been freed)."""
        self.version += 1
        self._live.pop(key, None)

    def live_entries(self, key: Any) -> int:
        """Number of live entries kept for an allocation (for tests of boundedness)."""
        live = self._live.get(key)
        if live is None:
            return 0
        entries = live.writes + [e for es in live.reads.values() for e in es]
        return sum(1 for e in entries if not e[2].finished)

    def conflicts(self, accesses: Iterable[Access]) -> dict[Node, list[tuple[str, str]]]:
        """Unfinished nodes the accesses conflict with -> [(reason, array label)], in the order the
        accesses meet them (``reduce_parents`` sorts the parents by issue order)."""
        found: dict[Node, list[tuple[str, str]]] = {}
        live_map = self._live
        for acc in accesses:
            live = live_map.get(acc.key)
            if live is None:
                continue
            lo, hi = acc.lo, acc.hi
            if acc.write:
                if live.reads:
                    _scan_reads(live.reads, lo, hi, acc.label, found)
                reason = WAW
            else:
                reason = RAW
            writes = live.writes
            if len(writes) == 1:
                # the common case (one live writer, say the previous launch of the same graph
                # or kernel), without the general scan's calls
                elo, ehi, node = writes[0]
                if node.finished:
                    writes.clear()
                elif elo < hi and lo < ehi:
                    reasons = found.get(node)
                    if reasons is None:
                        found[node] = [(reason, acc.label)]
                    else:
                        reasons.append((reason, acc.label))
            elif writes:
                _scan(writes, lo, hi, reason, acc.label, found)
        return found


    def commit(self, node: Node, accesses: Iterable[Access]) -> None:
        """Record ``node``'s accesses (after it has been given its stream and issued)."""
        # (an entry's bounds are read into ``elo``/``ehi`` before comparing: compiled, they
        # are then C integers, where comparing an entry's item with ``lo`` boxes ``lo``)
        stream = node.stream
        live_map = self._live
        self.version += 1
        for acc in accesses:
            lo, hi = acc.lo, acc.hi
            if lo >= hi:
                continue
            live = live_map.get(acc.key)
            if live is None:
                live = live_map[acc.key] = _Live()
            if acc.write:
                # everything the write covers is ordered before it (it depended on them)
                writes = live.writes
                if len(writes) == 1:
                    e = writes[0]
                    elo, ehi = e[0], e[1]
                    if lo <= elo and ehi <= hi:
                        writes[0] = (lo, hi, node)
                    else:
                        writes.append((lo, hi, node))
                else:
                    if writes:
                        writes[:] = [e for e in writes if not (lo <= e[0] and e[1] <= hi)]
                    writes.append((lo, hi, node))
                reads = live.reads
                if reads:
                    for s, entries in list(reads.items()):
                        if len(entries) == 1:       # (the common case, without a new list)
                            e = entries[0]
                            elo, ehi = e[0], e[1]
                            if lo <= elo and ehi <= hi:
                                del reads[s]
                            continue
                        kept = [e for e in entries if not (lo <= e[0] and e[1] <= hi)]
                        if kept:
                            reads[s] = kept
                        else:
                            del reads[s]
            else:
                mine = live.reads.get(stream)
                if mine is None:
                    live.reads[stream] = [(lo, hi, node)]
                elif len(mine) == 1:
                    # the common case: this stream's one earlier read of the array
                    e = mine[0]
                    elo, ehi = e[0], e[1]
                    if (lo <= elo and ehi <= hi) or e[2].finished:
                        mine[0] = (lo, hi, node)
                    else:
                        mine.append((lo, hi, node))
                else:
                    # stream order: a later read of the same stream covers an earlier one
                    mine[:] = [e for e in mine
                               if not (lo <= e[0] and e[1] <= hi) and not e[2].finished]
                    mine.append((lo, hi, node))
