"""The explicit memory model: where each allocation's current copy is, and the copies that move it.

The model
---------
With ``memory="explicit"`` an allocation is device memory plus a host mirror (pinned memory on
``cuda``, a separate byte array on ``sim``) allocated on first host use. Kernels, library calls,
replayed graphs and exported pointers use the device copy; host accesses use the mirror. The
allocation's ``location`` says which copy is current: ``HOST``, ``DEVICE``, ``BOTH``
(``HOST | DEVICE``), or ``0`` (never written: ``empty`` and fresh results; either copy will do).

Copies to the device are nodes of the DAG (kind ``"copy"``), issued through the same
``Runtime._issue`` as kernels, so dependencies, streams, events, traces, statistics, the checker
and fault recovery all see them. In the dependency tracker a host-to-device (H2D) copy is a
**write** of the allocation's bytes: later device readers depend on it (RAW); it depends on
unfinished device readers of those bytes (WAR), of which there are normally none because the
host write that made the host copy current already waited for them.

Copies to the host (D2H) are *fetches* (:meth:`ExplicitMemory.fetch`): a copy of the span into
the mirror, ordered on the device after the span's unfinished writers, which the host waits
for at once, under the runtime's lock, so no device writer can start meanwhile and none needs
to wait for it. A node would only put the scheduler's Python (stream choice, event, tracker,
retirement) between the writers and the host. Under a trace the fetch is a copy node again (a
*read*: after the writers, before later device writers), so the trace shows the transfer. So
are the *copies back* a replayed graph issues behind itself for what the host read after its
previous launch (:meth:`ExplicitMemory.read_back`): the allocation is booked BOTH with the node
as ``Allocation.copy_back``, which the host's next access waits for instead of fetching.

Transitions (:func:`device_use`, :func:`host_read`, :func:`host_write`)::

    event                               location   copy                               after
    device use that reads (or a write   HOST       H2D whole allocation, before it     BOTH, then
      not covering every byte)          other      none                                DEVICE if it writes
    device write-only of every byte     any        none                                DEVICE
    host read of [lo, hi)               DEVICE     fetch [lo, hi) after its writers    BOTH if whole
                                        other      none (waits for a copy back)        unchanged
    replay of a graph that learnt A     (A: DEVICE after the graph) D2H copy node of A BOTH
    host write of every byte            any        none                                HOST
    host write of part                  HOST, BOTH, 0  none                            HOST
                                        DEVICE     [fetch of the span first unless the DEVICE
                                                   write is dense] H2D of the span after

Precision: the location is kept per allocation; copies triggered by host accesses move only
the bytes accessed (the span ``[lo, hi)`` of the view), those triggered by device use move the
whole allocation. A partial host write of a DEVICE array keeps the rest of the array: the
written span goes to the device (a write that leaves holes in its span, such as ``x[::2] = v``,
fetches the span first so the holes carry the device's values back). Per-allocation flags
keep the launch path to one integer test per array; the cost is that a host read of part of a
device-current array leaves it DEVICE (a later read copies again).

Another library's memory, imported without a copy (``Allocation.fixed``), is DEVICE for good:
its own library may write it once the runtime is synchronized, so every host read fetches
(never booking the mirror current) and every host write is a host write of part (its span
goes to the device at once), and no replayed graph copies it back.

Example::

    x = ag.array(data)        # host write of every byte: HOST
    k[g, b](x, y)             # reads x: H2D copy node (x: BOTH), then k; y written: DEVICE
    y[3]                      # waits for k, fetches 8 bytes of y, reads the mirror
    y[0:4] = 1                # partial dense write of a DEVICE array: H2D copy of 32 bytes

Several devices
---------------
With a runtime over several devices (``devices``) each device has a copy of its own and the
location is a bit set (:mod:`asyncgpu.core.placement`: ``HOST``, then one bit per device
slot, ``DEVICE`` being slot 0's). A node placed on device ``d`` that needs an allocation's old
bytes gets a copy in of the whole allocation before it when ``d``'s copy is not current: from
another device holding it (a *peer copy*, a node on ``d``) or else from the host. A write makes
``d`` the only current copy; a read adds ``d``. A host read fetches from a device holding the
bytes; a partial host write of an allocation current only on devices sends the span to one
of them, which is then the only current copy. With one device every rule above is the
single-device table's.

This module is plain Python: the backends run the copies (``copy_launch``, ``fetch_to_host``).
"""

from __future__ import annotations

from typing import Any

from ..core.dag import RAW, WAW, Node
from ..core.deps import Access
from ..core.placement import device_bit
from .allocation import DEVICE, HOST
from .checks import user_site

BOTH = HOST | DEVICE


def holder(location: int) -> int:
    """The lowest device slot holding a current copy in ``location`` (-1: none)."""
    devices = location & ~HOST
    return (devices & -devices).bit_length() - 2 if devices else -1

#: A partial host read of a device-current allocation of at most this many bytes fetches the
#: whole allocation (``HostAccess.begin_host_access``, when that waits for no more writers):
#: 512 KiB more take about 10 us at the 50-55 GB/s an H100 host measures, less than the second
#: round trip they save (a launch and a fetching read of one element: 17-25 us there), so a
#: loop that reads a few elements of a mid-sized result pays one round trip, not one each.
WHOLE_FETCH_BYTES = 512 << 10
#: At most this many allocations a replayed graph copies back to the host behind itself.
READ_BACK_MAX = 16


def device_use(location: int, reads: bool, writes: bool, covers: bool, bit: int = DEVICE
               ) -> tuple[bool, int]:
    """A kernel, call or graph on the device of location bit ``bit`` uses an allocation:
    (copy a current copy in first?, location after).

    ``reads``: the old contents may be read; ``covers``: the use writes every byte of the
    allocation (only then may a write-only use skip the copy: otherwise bytes it leaves alone
    would lose their current values).
    """
    copy_in = location != 0 and not location & bit and (reads or not covers)
    after = location | bit if copy_in else location
    if writes:
        after = bit
    return copy_in, after


def host_read(location: int, whole: bool) -> tuple[bool, int]:
    """The host reads (part of) an allocation: (copy the span out first?, location after)."""
    if location and not location & HOST:
        return True, location | HOST if whole else location
    return False, location


def host_write(location: int, whole: bool, dense: bool) -> tuple[bool, bool, int]:
    """The host writes (part of) an allocation: (fetch the span first?, copy the span in after?,
    location after). A span copied in goes to the lowest device holding the allocation, which
    is then its only current copy.

    ``whole``: every byte of the allocation is written; ``dense``: every byte of the span is.
    """
    if whole:
        return False, False, HOST
    if location and not location & HOST:
        return not dense, True, location & -location
    return False, False, HOST


def overwrites(acc: Any) -> bool:
    """Whether a device use (an ``ArrayArg``) writes every byte of its allocation without
    reading the old ones, so no copy in is needed before it (``device_use`` with ``covers``)."""
    if acc.read or not acc.write:
        return False
    return acc.lo == 0 and acc.hi == acc.alloc.nbytes and acc.array.is_c_contiguous


def host_current(allocs: Any) -> tuple[Any, ...]:
    """The allocations among ``allocs`` (each once, in order) whose current copy is only on the
    host: what a device use must copy in first. A captured graph copies these in itself
    (``asyncgpu.recorder.capture``), so the set chooses which of a key's graphs runs."""
    return tuple([a for a in allocs if a.location == HOST and a.nbytes])


class ExplicitMemory:
    """The runtime's side of the explicit model: applies the transitions, issues the copies.

    Called under the runtime's lock: :meth:`before_device` from ``Runtime._issue`` before the
    node's own dependencies are computed (so the copy becomes its parent), the host hooks from
    ``Runtime.host_access``.
    """

    __slots__ = ("copying_in", "host_busy", "runtime")

    def __init__(self, runtime: Any) -> None:
        self.runtime = runtime
        #: the runtime's large host writes copying without the lock (``Issuing._host_busy``,
        #: the same dict: read at every node, so held here rather than looked up on the runtime)
        self.host_busy: dict[int, Any] = runtime._host_busy
        #: device slot -> the latest copy issued to it from the host, as (its stream, its
        #: sequence number there, its event, its bytes): whether a launch is cut in chunks
        #: (``asyncgpu.runtime.chunks.link_busy``)
        self.copying_in: dict[int, tuple[Any, int, Any, int]] = {}

    def copy(self, alloc: Any, lo: int, hi: int, to_device: bool, label: str,
             device: int = 0, peer: int = -1, after: Any = None) -> Node:
        """Issue one copy node of bytes ``[lo, hi)`` of ``alloc``: to device ``device`` from the
        host (H2D) or, with ``peer`` >= 0, from device ``peer`` (both writes), or from device
        ``device`` to the host (D2H: a read). The node runs on ``device``; with ``after`` (a
        node), after that one too (an edge of reason ``split``: a chunked launch's copies of
        one array, in order)."""
        rt = self.runtime
        if self.host_busy:
            rt.settle_host_write(alloc)     # (a large host write still copying into its mirror)
        launch = rt.backend.copy_launch(alloc.buffer, lo, hi, to_device, device,
                                        peer if peer >= 0 else None)
        if peer >= 0:
            name = f"{label} to {rt.device_name(device)} from {rt.device_name(peer)}"
        else:
            name = f"{label} to {'device' if to_device else 'host'}"
            if device:
                name += f" ({rt.device_name(device)})"
        # (traced: the user's line the copy is made for, as a kernel's site)
        node = Node("copy", name, user_site() if rt._instruments else None,
                    [Access(alloc.id, alloc, lo, hi, to_device, label)])
        node.launch = launch
        node.device = device
        stats = rt.stats
        if to_device:
            stats.copies_to_device += 1
            stats.bytes_to_device += hi - lo
            if peer >= 0:
                stats.copies_peer += 1
                stats.bytes_peer += hi - lo
        else:
            stats.copies_to_host += 1
            stats.bytes_to_host += hi - lo
        location = alloc.location
        if after is None:
            found = None
            if peer >= 0:
                # (booked as a write of the allocation, as it makes ``device``'s copy current,
                # but what it waits for in the live writers is their bytes, which it reads on
                # ``peer``: those edges are RAW, as a copy to the host's)
                found = rt.deps.conflicts(node.accesses)
                for reasons in found.values():
                    reasons[:] = [(RAW if why == WAW else why, what) for why, what in reasons]
            rt._issue(node, None, found)
        else:
            rt.issue_after(node, (after,), "split")
        if to_device and peer < 0 and node.stream is not None:
            # (its stream and place there, not the node: a node keeps its allocations alive)
            self.copying_in[device] = (node.stream, node.seq, node.event, hi - lo)
        alloc.location = location     # (_issue books a write as DEVICE: the caller decides)
        return node

    def make_device_current(self, accesses: list[Any], device: int = 0) -> None:
        """Copy in, to device ``device``, the allocations current elsewhere (another device,
        else the host) whose old bytes ``accesses`` need. A large host write still copying into
        one of them ends first: its end books where the current bytes are."""
        if self.host_busy:
            rt = self.runtime
            for acc in accesses:
                rt.settle_host_write(acc.alloc)
        bit = device_bit(device)
        for acc in accesses:
            alloc = acc.alloc
            location = alloc.location
            if location and not location & bit and alloc.nbytes and not overwrites(acc):
                self.copy(alloc, 0, alloc.nbytes, True, acc.label, device, holder(location))
                alloc.location = location | bit

    def before_placed_graph(self, frozen: Any, accesses: list[Any], device: int) -> None:
        """Several devices: a graph (``accesses``: its node's) that copies nothing in itself
        runs on device ``device``. Copy in there what it may read that is current elsewhere
        (not what its first use overwrites whole), then book what it writes current there
        only, as :meth:`before_device` does for a kernel."""
        skip = frozen.overwritten
        self.make_device_current([a for a in accesses if a.alloc not in skip] if skip
                                 else accesses, device)
        bit = device_bit(device)
        for alloc in frozen.written:
            alloc.location = bit

    @staticmethod
    def graph_not_launched(booked: tuple[Any, ...]) -> None:
        """The graph never ran: the host copies are the current ones again."""
        for alloc in booked:
            alloc.location = HOST

    def read_back(self, frozen: Any) -> None:
        """After a graph's launch (``Runtime.launch_graph``, under the lock): copy back to the
        host, behind it on the device, the allocations the host fetched whole after its last
        launch (``learn_read_back``), and book each current on both sides with its copy as
        ``Allocation.copy_back``, which the host's next access waits for instead of fetching.

        An allocation whose previous copy back the host never consumed (no host access since,
        or a device writer made it DEVICE again and the host fetched that) is dropped: the
        list keeps only what the host keeps reading. A dropped copy back still in flight
        stays ``Allocation.copy_back``: every host access of the allocation is ordered after
        it (a fetch into the mirror it writes, of whatever bytes, included). The copies are
        D2H copy nodes, reads of the device copy, so a later device writer waits for them as for any reader, and the
        graph's next launch finds them in the tracker (its shortcut for a repeated launch
        does not apply: they were committed after it). Booking allocations BOTH is a change
        of location as a host access makes one, so it moves ``Runtime.host_epoch`` on too.
        """
        rt = self.runtime
        keep = []
        for alloc, label in frozen.read_back:
            previous = alloc.copy_back
            if previous is not None:
                # never consumed: dropped from the list. Still in flight, it stays the
                # allocation's copy back, which the host's next access is ordered after: it
                # writes the whole mirror, and that access may fetch bytes of it the graph
                # does not touch (so no device writer of theirs is behind the copy)
                if previous.finished:
                    alloc.copy_back = None
                continue
            if alloc.freed or alloc.location != DEVICE:
                continue
            keep.append((alloc, label))
            node = self.copy(alloc, 0, alloc.nbytes, False, label)
            alloc.location = BOTH
            alloc.copy_back = node
        frozen.read_back = tuple(keep)
        frozen.replay_version = rt.deps.version
        if keep:
            # what a graph writes is no longer DEVICE: a graph launched again before the next
            # host access must not skip its bookkeeping (``FrozenGraph.settled``)
            rt.host_epoch += 1

    def learn_read_back(self, alloc: Any, label: str) -> None:
        """The host fetches all of ``alloc``: if the graph launched last wrote it and nothing
        was committed since (so what the host reads is that graph's result), that graph
        copies it back at its next launches (:meth:`read_back`)."""
        rt = self.runtime
        frozen = rt.last_replay() if rt.last_replay is not None else None
        if (frozen is None or alloc.fixed or frozen.replay_version != rt.deps.version
                or len(frozen.read_back) >= READ_BACK_MAX
                or not any(a is alloc for a in frozen.written)
                or any(a is alloc for a, _ in frozen.read_back)):
            return
        frozen.read_back += ((alloc, label),)

    def before_export(self, array: Any, device: int = 0) -> None:
        """Another library gets the pointer of device ``device``'s copy: bring it current, and
        assume the consumer may write it (no other copy is known to be current)."""
        alloc = array._alloc
        if self.host_busy:
            self.runtime.settle_host_write(alloc)
        location = alloc.location
        bit = device_bit(device)
        if location and not location & bit and alloc.nbytes:
            self.copy(alloc, 0, alloc.nbytes, True, array.describe(), device, holder(location))
        if alloc.nbytes:
            alloc.location = bit

    def before_host(self, array: Any, lo: int, hi: int, write: bool, dense: bool) -> bool:
        """Whether the host access must fetch its span from the device first (:meth:`fetch`,
        after what :meth:`host_waits` returns).

        Interrupt safety: a DEVICE allocation stays DEVICE until the write's span has been
        copied in (``after_host``), so an interrupted host write of it is simply lost, as if
        it had not happened; any other allocation is booked HOST before the write.
        """
        alloc = array._alloc
        location = alloc.location
        on_devices = location and not location & HOST
        if write and not on_devices:
            # The mirror is current before the write and after it: HOST is true from now on,
            # so an interrupt between the write and ``after_host`` cannot leave BOTH behind
            # with only the host copy changed.
            alloc.location = HOST
            return False
        if not on_devices or lo >= hi:
            return False
        whole = dense and lo == 0 and hi == alloc.nbytes and not alloc.fixed
        return (host_write(location, whole, dense)[0] if write
                else host_read(location, whole)[0])

    def host_waits(self, write: bool, fetch: bool, found: dict[Node, Any]) -> dict[Node, Any]:
        """What a host access must wait for, out of the tracker's ``found``.

        A write keeps every conflict: the host-to-device copies still reading the mirror may
        hide behind later kernels in the tracker (a write that covers an entry replaces it),
        so waiting for those kernels is what orders the write after the copies. A read that
        fetches its span waits for the span's device writers (``found`` holds only those for a
        read). A read of a current mirror waits for nothing: nothing unfinished writes the
        mirror, so a read of data kernels only read never blocks, as in managed memory.
        """
        return found if write or fetch else {}

    def fetch(self, array: Any, lo: int, hi: int, after: list[Node], label: str) -> None:
        """Copy ``[lo, hi)`` of the device copy to the mirror now, once the nodes ``after``
        (the span's unfinished writers, the latest of each stream) have finished, and retire
        them: the backend orders the copy after their events on the device and waits for the
        copy alone, one round trip to the device. The runtime's lock is held throughout, so
        no device writer can start meanwhile and none needs to wait for the copy. (Cheaper than
        a copy node for what the host waits on at once anyway; a trace still gets one: see
        ``Runtime.host_access``.) ``label``: the array, for messages."""
        rt = self.runtime
        alloc = array._alloc
        rt.backend.fetch_to_host(alloc.buffer, lo, hi, label, [n.event for n in after],
                                 holder(alloc.location))
        if after:
            streams = rt.streams
            streams.retire(after)
        stats = rt.stats
        stats.copies_to_host += 1
        stats.bytes_to_host += hi - lo

    def after_host(self, array: Any, lo: int, hi: int, write: bool, dense: bool) -> None:
        """Book the access's effect on the location; a partial write of a DEVICE allocation
        sends the written span to the device, as does any write of another library's memory
        (``Allocation.fixed``), which no host read makes current on the host either."""
        alloc = array._alloc
        # (another library's memory is the current copy whenever the runtime is synchronized:
        # a read leaves the mirror stale-able, a write goes through at once, so that what
        # the other library writes after a synchronize is read, and never overwritten)
        whole = lo == 0 and hi == alloc.nbytes and not alloc.fixed
        if not write:
            alloc.location = host_read(alloc.location, whole)[1]
            return
        _, copy_in, after = host_write(alloc.location, whole and dense, dense)
        if copy_in and lo < hi:
            self.copy(alloc, lo, hi, True, array.describe(), holder(after))
        alloc.location = after

    def before_device(self, accesses: list[Any], device: int = 0) -> None:
        """Copy in, to device ``device``, every allocation the node needs that is current
        elsewhere, before the node's waits.

        Written allocations whose copy on ``device`` is current (copied in, or never
        written) are booked current there only here, before the launch rather than at its
        commit: that is true whether or not the launch then happens, so an exception or
        interrupt in between cannot leave a stale copy marked current. One the launch
        overwrites whole, current elsewhere (no copy came in), stays booked where it is until
        the launch is enqueued (``Issuing._issue`` books it then): a launch that does not
        happen (refused by the driver, interrupted before it) loses none of its bytes.
        """
        self.make_device_current(accesses, device)
        bit = device_bit(device)
        for acc in accesses:     # (a second pass: another argument may read the same array)
            alloc = acc.alloc
            if acc.write and alloc.nbytes:
                location = alloc.location
                if location & bit or not location:
                    alloc.location = bit

    def before_graph(self, frozen: Any) -> tuple[Any, ...]:
        """A replayed graph copies its ``copy_in`` allocations in itself: book them current on
        both sides before the issue, so no copy node is made for them; host-current ones it
        overwrites whole need no copy at all. What it writes is then booked ``DEVICE``, before
        the launch as :meth:`before_device` books a kernel's. Returns what was booked from
        ``HOST``.

        This is all of a graph's location bookkeeping: the caller launches the variant whose
        ``copy_in`` is exactly its host-current inputs, so nothing it reads is left on the
        host only and every allocation it touches is current on the device afterwards.
        """
        booked = frozen.copy_in
        if frozen.overwritten:
            booked += tuple(a for a in frozen.overwritten if a.location == HOST)
        for alloc in booked:
            alloc.location = BOTH
        for alloc in frozen.written:
            alloc.location = DEVICE
        return booked

    def after_graph(self, frozen: Any) -> None:
        """The graph's copies are writes (the issue booked them ``DEVICE``): those no kernel
        writes are current on both sides."""
        for alloc in frozen.copy_only:
            alloc.location = BOTH
        stats = self.runtime.stats      # type: ignore[attr-defined]
        stats.copies_to_device += len(frozen.copy_in)
        stats.bytes_to_device += frozen.copy_bytes


