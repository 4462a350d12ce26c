"""SM partitions: a tenant's kernels on multiprocessors of its own.

The model
---------
CUDA's stream priorities choose which waiting block starts next, but blocks already resident
share a multiprocessor whatever their priority: a launch that arrives while another tenant's
blocks hold the SMs runs slower for as long as they stay. A *partition* keeps them apart: a
tenant made with ``asyncgpu.tenant(name, sms=N)`` holds SMs of its own on each device (a CUDA
green context), disjoint from every other tenant's partition, for as long as the runtime
lives (or, for a partition a regulation plan made, until the plan drops it: ``release``), and
its kernels run there and nowhere else. A regulation plan may also put several tenants in
one partition they share (``Plan.shared``): their blocks may slow each other there, never a
tenant's outside it. A partition is known by its *owner*, the tenant's name or the shared
partition's. Work outside any partition (the default tenant, tenants without ``sms``) may
still run on any SM, so isolation needs every tenant that shares the device to have one.

A device's SMs are handed out in *groups* (:data:`GRAIN` SMs each: the granularity at which
CUDA splits them on compute capability 9.0); a partition of ``N`` SMs takes the first free
groups that hold ``N`` (``N`` rounded up to whole groups).

Invariants: no group is in two partitions; a reservation that does not fit changes nothing;
a tenant's partition, once made, stays the same until it is released, and its groups are then
free again.

Example::

    ledger = SmLedger([8] * 16)         # 128 SMs in 16 groups
    ledger.reserve("dl", 36)            # groups 0-4: 40 SMs
    ledger.free_sms()                   # 88
    ledger.release("dl")                # 128 free again
"""

from __future__ import annotations

#: SMs per group of a partition (CUDA's split granularity on compute capability 9.0).
GRAIN = 8


class SmLedger:
    """One device's SM groups and the partitions that hold them (see the module docstring)."""

    __slots__ = ("_free", "groups", "owners")

    def __init__(self, groups: list[int]) -> None:
        #: SMs of each group
        self.groups = list(groups)
        #: per partition's owner (a tenant's name): its groups
        self.owners: dict[str, list[int]] = {}
        self._free = list(range(len(self.groups)))

    def free_sms(self) -> int:
        """SMs not in any partition."""
        return sum(self.groups[g] for g in self._free)

    def fits(self, owner: str, sms: int) -> bool:
        """Whether ``owner`` has a partition already or ``sms`` more SMs are free."""
        return owner in self.owners or self.free_sms() >= sms

    def reserve(self, owner: str, sms: int) -> list[int]:
        """The groups of ``owner``'s partition of at least ``sms`` SMs (made now from the
        first free groups unless it exists); ValueError, naming the tenant and what is free,
        if they do not hold ``sms``."""
        if owner in self.owners:
            return self.owners[owner]
        taken: list[int] = []
        got = 0
        for g in self._free:
            if got >= sms:
                break
            taken.append(g)
            got += self.groups[g]
        if got < sms:
            raise ValueError(
                f"asyncgpu.tenant({owner!r}, sms={sms}): the device has "
                f"{sum(self.groups)} SMs that can be partitioned (in groups of {GRAIN}) and "
                f"{self.free_sms()} of them are not in another tenant's partition; ask for at "
                f"most {self.free_sms()}, or give the other tenants fewer")
        self._free = [g for g in self._free if g not in taken]
        self.owners[owner] = taken
        return taken

    def sms_of(self, owner: str) -> int:
        """SMs in ``owner``'s partition (0 if it has none)."""
        return sum(self.groups[g] for g in self.owners.get(owner, ()))

    def release(self, owner: str) -> None:
        """``owner``'s partition's groups are free again (nothing if it has none)."""
        taken = self.owners.pop(owner, None)
        if taken:
            self._free = sorted(self._free + taken)


def reserve_on_each(ledgers: list[SmLedger], owner: str, sms: int) -> int:
    """``owner``'s partition of at least ``sms`` SMs in every one of ``ledgers`` (one per
    device), all or nothing: ValueError from the first that cannot hold it, and none
    changed; the fewest SMs it holds in one."""
    for ledger in ledgers:
        if not ledger.fits(owner, sms):
            ledger.reserve(owner, sms)      # (raises, naming what is free)
    for ledger in ledgers:
        ledger.reserve(owner, sms)
    return min(ledger.sms_of(owner) for ledger in ledgers)


__all__ = ["GRAIN", "SmLedger", "reserve_on_each"]
