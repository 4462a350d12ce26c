"""Known ordering bugs planted in the runtime for mutation tests (a contributor's tool).

The model
---------
A mutant is the production runtime with one piece of its ordering machinery taken out. While a
``with planted(...)`` block runs, it replaces a few methods of the runtime's classes; on exit the
originals are back. Every replacement calls the real method and bends its answer (it never has
an algorithm of its own), so what runs is the production code less exactly that piece:

``drop_raw``      ``DependencyTracker.conflicts`` without its read-after-write reasons: a read
                  does not wait for the writers before it
``drop_war``      the same without write-after-read: a write does not wait for the readers
``alias_blind``   accesses keyed by the array object instead of its allocation (kernel
                  arguments, library-call arguments, host accesses): two views of one
                  allocation never conflict, only the same array object with itself
``host_no_wait``  a host access does not wait for the device nodes it conflicts with (the
                  tracker answers nothing to ``HostAccess.begin_host_access``)
``eager_free``    a node lets go of its arrays (its accesses and keepalive) as soon as the
                  tracker has booked it, so an array the program drops is freed, and its
                  memory reused, while kernels using it are still in flight
``no_peer_copy``  several devices: a node needing an array current on another device gets no
                  copy from it, though the array is booked current on the node's device
``stale_location``  several devices: a write leaves the other devices' copies of what it
                  wrote booked current, so a later node there reads old bytes
``one_phase``     several devices: a recording's per-device graphs ignore the dependencies
                  between devices, so a graph may be launched before one it needs
``tenant_blind``  tenants: a node does not wait for its parents on another tenant's streams,
                  so a tenant may read what another is still writing
``pointer_blind`` tenants' pointers: a launch does not wait for the node its pointer names,
                  so where that node also writes what the launch reads, it reads too early

The test suite must fail with each of them planted, by a wrong value or a ``RaceError`` of the
happens-before checker (``tests/test_mutations.py``): a mutant that survives means a missing test.

Invariants: the classes are patched for the whole process while the block runs (every runtime,
every thread); blocks nest and may plant several mutants at once; leaving a block restores
exactly what was there when it began.

Methods of compiled classes cannot be replaced: the mutants need the launch path as plain Python
(an uncompiled install, or ``pytest --pure``), and :class:`planted` refuses where it is compiled
(``asyncgpu.core.compiled.is_compiled``). Tests that plant one carry ``@pytest.mark.pure``.

Example::

    from asyncgpu.testing.mutants import planted

    with planted("drop_raw"):
        run_program()           # must give a wrong value or raise RaceError
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, Self

from ..core.compiled import compiled_modules, is_compiled
from ..core.dag import RAW, WAR
from ..core.deps import DependencyTracker
from ..core.streams import StreamManager
from ..runtime.host_access import HostAccess
from ..runtime import kernel
from ..runtime.issue import Issuing
from ..runtime.library import LibraryCall
from ..recorder import devices
from ..runtime.memory import ExplicitMemory

#: One replacement: (class or module, name, the replacement made from what it replaces).
Patch = tuple[Any, str, Callable[[Any], Any]]


def _without(reason: str) -> list[Patch]:
    """The tracker's answers without ``reason`` (a node left with no reason is no parent)."""
    def make(conflicts: Any) -> Any:
        def conflicts_without(self: Any, accesses: Any) -> dict[Any, list[tuple[str, str]]]:
            found = {}
            for node, reasons in conflicts(self, accesses).items():
                kept = [r for r in reasons if r[0] != reason]
                if kept:
                    found[node] = kept
            return found
        return conflicts_without
    return [(DependencyTracker, "conflicts", make)]


def _drop_raw() -> list[Patch]:
    return _without(RAW)


def _drop_war() -> list[Patch]:
    return _without(WAR)


def _alias_blind() -> list[Patch]:
    def make_arg(array_arg: Any) -> Any:
        def blind_array_arg(index: int, param: str, array: Any, read: bool, write: bool) -> Any:
            arg = array_arg(index, param, array, read, write)
            arg.key = id(array)
            return arg
        return blind_array_arg

    def make_call(accesses: Any) -> Any:
        def call_accesses(self: Any) -> Any:
            out = accesses(self)
            # one access per distinct array argument, in the order of their first occurrence
            distinct = list({id(a): a for a in self.arrays})
            assert len(distinct) == len(out), (distinct, out)
            for acc, key in zip(out, distinct):
                acc.key = key
            return out
        return call_accesses

    def make_host(access: Any) -> Any:
        def _access(self: Any, array: Any, lo: int, hi: int, write: bool, label: str) -> Any:
            acc = access(self, array, lo, hi, write, label)
            acc.key = id(array)
            return acc
        return _access

    return [(kernel, "array_arg", make_arg), (LibraryCall, "accesses", make_call),
            (HostAccess, "_access", make_host)]


def _host_no_wait() -> list[Patch]:
    begin = HostAccess.begin_host_access.__code__

    def make(conflicts: Any) -> Any:
        def conflicts_unless_host(self: Any, accesses: Any) -> Any:
            if _caller() is begin:
                return {}
            return conflicts(self, accesses)
        return conflicts_unless_host
    return [(DependencyTracker, "conflicts", make)]


def _eager_free() -> list[Patch]:
    def make(commit: Any) -> Any:
        def commit_and_let_go(self: Any, node: Any, accesses: Any) -> None:
            commit(self, node, accesses)
            node.keepalive = None
            node.accesses = []
        return commit_and_let_go
    return [(DependencyTracker, "commit", make)]


def _no_peer_copy() -> list[Patch]:
    def make(copy: Any) -> Any:
        def copy_unless_peer(self: Any, alloc: Any, lo: int, hi: int, to_device: bool,
                             label: str, device: int = 0, peer: int = -1) -> Any:
            if peer >= 0:
                return None
            return copy(self, alloc, lo, hi, to_device, label, device, peer)
        return copy_unless_peer
    return [(ExplicitMemory, "copy", make)]


def _stale_location() -> list[Patch]:
    def make(issue: Any) -> Any:
        def issue_keeping_copies(self: Any, node: Any, *args: Any) -> None:
            before = [(acc.alloc, acc.alloc.location) for acc in node.accesses if acc.write]
            issue(self, node, *args)
            for alloc, location in before:
                alloc.location |= location & ~1       # (the devices' bits, not the host's)
        return issue_keeping_copies
    return [(Issuing, "_issue", make)]


def _one_phase() -> list[Patch]:
    def make(groups: Any) -> Any:
        def groups_in_one_phase(preds: Any, slots: Any, firsts: Any = None) -> Any:
            return groups([[p for p in ps if slots[p] == slots[i]] for i, ps in enumerate(preds)],
                          slots, firsts)
        return groups_in_one_phase
    return [(devices, "device_groups", make)]


def _tenant_blind() -> list[Patch]:
    def make(wait: Any) -> Any:
        def wait_for_own_tenant(self: Any, node: Any, parents: Any) -> None:
            pool = node.stream.pool
            mine = [p for p in parents if p.stream is None or p.stream.pool // self.devices
                    == pool // self.devices]
            if mine:
                wait(self, node, mine)
        return wait_for_own_tenant
    return [(StreamManager, "wait_for_parents", make)]


def _pointer_blind() -> list[Patch]:
    def make(issue_after: Any) -> Any:
        def issue_without_the_pointer(self: Any, node: Any, previous: Any, reason: str) -> None:
            if reason != "pointer":
                issue_after(self, node, previous, reason)
                return
            if self.memory is not None:
                self.memory.before_device(node.accesses, node.device)
            found = self.deps.conflicts(node.accesses)
            for p in previous:
                found.pop(p, None)          # (its wait, with whatever data it carried)
            self._issue(node, None, found)
        return issue_without_the_pointer
    return [(Issuing, "issue_after", make)]


#: Mutant name -> its replacements.
MUTANTS: dict[str, Callable[[], list[Patch]]] = {
    "drop_raw": _drop_raw,
    "drop_war": _drop_war,
    "alias_blind": _alias_blind,
    "host_no_wait": _host_no_wait,
    "eager_free": _eager_free,
    "no_peer_copy": _no_peer_copy,
    "stale_location": _stale_location,
    "one_phase": _one_phase,
    "tenant_blind": _tenant_blind,
    "pointer_blind": _pointer_blind,
}


def _caller() -> Any:
    """The code of the first caller outside this module of the replacement calling this."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_globals is globals():
        frame = frame.f_back
    return frame.f_code if frame is not None else None


_MISSING = object()


class planted:
    """``with planted("drop_raw", ...)``: the named mutants (:data:`MUTANTS`) are in the runtime
    inside the block. Unknown names raise ``ValueError`` at once; entering where the launch path
    is compiled raises ``RuntimeError``."""

    def __init__(self, *names: str) -> None:
        unknown = sorted(set(names) - set(MUTANTS))
        if unknown:
            raise ValueError(f"unknown mutant(s) {unknown}; known: {sorted(MUTANTS)}")
        self.names = tuple(dict.fromkeys(names))
        self._undo: list[tuple[Any, str, Any]] | None = None

    def __repr__(self) -> str:
        return f"planted({', '.join(map(repr, self.names))})"

    def __enter__(self) -> Self:
        if self._undo is not None:
            raise RuntimeError(f"{self!r} is already planted")
        patches = [p for name in self.names for p in MUTANTS[name]()]
        compiled = sorted({getattr(owner, "__module__", None) or owner.__name__
                           for owner, _, _ in patches} & set(compiled_modules()))
        if patches and (is_compiled() or compiled):
            raise RuntimeError(
                f"cannot plant {', '.join(self.names)}: the launch path is compiled "
                f"({', '.join(compiled or ['asyncgpu.core.deps'])}), and methods of compiled "
                "classes cannot be replaced. Mutants need the plain Python modules: an "
                "uncompiled install, or pytest --pure")
        self._undo = []
        try:
            for owner, attr, make in patches:
                self._undo.append((owner, attr, owner.__dict__.get(attr, _MISSING)))
                setattr(owner, attr, make(getattr(owner, attr)))
        except BaseException:
            self._restore()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._restore()

    def _restore(self) -> None:
        undo, self._undo = self._undo or [], None
        for owner, attr, before in reversed(undo):
            if before is _MISSING:
                delattr(owner, attr)
            else:
                setattr(owner, attr, before)
