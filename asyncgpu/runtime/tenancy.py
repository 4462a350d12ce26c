"""``asyncgpu.tenant``: issuing work as a named tenant, a step at a time.

A :class:`TenantScope` is what ``asyncgpu.tenant(name, priority=...)`` returns: a context
manager (``with``: the block's work is the tenant's, and the block is one step of it) and a
decorator (each call of the function is a step). Scopes nest and may be entered by several
threads at once; leaving one restores the tenant the thread had before. The runtime keeps the
tenants, their streams and statistics (``asyncgpu.core.tenants``, ``Runtime.tenant_index``).

Example::

    with ag.tenant("detector", priority="high"):
        detect[grid, block](frames, boxes)
    ag.tenants()["detector"].steps      # 1
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

from ..core.tenants import PRIORITIES, TenantStatistics
from .current import current_runtime


class TenantScope:
    """The work issued inside is tenant ``name``'s (see the module docstring)."""

    def __init__(self, name: str, priority: str = "normal", streams: int | None = None,
                 split: dict[str, int] | None = None,
                 after: dict[str, tuple[str, str]] | None = None) -> None:
        if not isinstance(name, str) or not name or name == "default":
            raise ValueError(f"asyncgpu.tenant: the name must be a non-empty string other than "
                             f"'default' (the tenant of work outside any); got {name!r}")
        if priority not in PRIORITIES:
            raise ValueError(f"asyncgpu.tenant({name!r}): priority must be one of "
                             f"{', '.join(PRIORITIES)}; got {priority!r}")
        if streams is not None and (type(streams) is not int or streams < 1):
            raise ValueError(f"asyncgpu.tenant({name!r}): streams must be a positive int (the "
                             f"most streams the tenant uses per device) or None; got "
                             f"{streams!r}")
        if split is not None and not (
                isinstance(split, dict) and all(isinstance(k, str) and type(v) is int and v >= 2
                                                for k, v in split.items())):
            raise ValueError(f"asyncgpu.tenant({name!r}): split must map kernel names to a "
                             f"number of pieces of at least 2, e.g. {{'square': 4}}; got "
                             f"{split!r}")
        if after is not None and not (
                isinstance(after, dict) and all(
                    isinstance(k, str) and isinstance(v, tuple) and len(v) == 2
                    and all(isinstance(part, str) and part for part in v)
                    for k, v in after.items())):
            raise ValueError(f"asyncgpu.tenant({name!r}): after must map a kernel name to the "
                             f"(tenant, kernel) its launches wait for, e.g. "
                             f"{{'gemm': ('detector', 'conv')}}; got {after!r}")
        both = sorted(set(after or ()) & set(split or ()))
        if both:
            raise ValueError(f"asyncgpu.tenant({name!r}): kernel {both[0]!r} is both split and "
                             "after another tenant's kernel; give it one of the two")
        self.name = name
        self.priority = priority
        self.streams = streams
        self.split = dict(split) if split else None
        self.after = dict(after) if after else None
        self._local = threading.local()     # per thread: the scopes entered, innermost last

    def __repr__(self) -> str:
        return (f"asyncgpu.tenant({self.name!r}, priority={self.priority!r}, "
                f"streams={self.streams!r}, split={self.split!r}, after={self.after!r})")

    def __enter__(self) -> TenantScope:
        rt = current_runtime()
        index = rt.tenant_index(self.name, self.priority, self.streams, self.split,
                                self.after)
        pins = rt._pins
        previous = getattr(pins, "tenant", 0)
        begun = rt.begin_step(index)
        pins.tenant = index
        stack = getattr(self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = []
        stack.append((rt, previous, index, begun))
        return self

    def __exit__(self, *exc: object) -> None:
        rt, previous, index, begun = self._local.stack.pop()
        rt._pins.tenant = previous
        if rt.retired is None:      # (a configure inside the block replaced the runtime)
            rt.end_step(index, begun)

    def __call__(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def step(*args: Any, **kwargs: Any) -> Any:
            with self:
                return fn(*args, **kwargs)
        return step


def tenant(name: str, priority: str = "normal", streams: int | None = None,
           split: dict[str, int] | None = None,
           after: dict[str, tuple[str, str]] | None = None) -> TenantScope:
    """``with asyncgpu.tenant("detector", priority="high"):`` the kernels, library calls and
    copies this thread issues in the block are tenant ``name``'s: they run on the tenant's own
    streams, created with its priority (``"high"``: the device's most urgent stream priority;
    ``"normal"``: its default), at most ``streams`` of them per device (None: the runtime's
    ``max_streams``; 1: the tenant's work runs in issue order on one stream of its own), and
    count in its statistics. ``split={"square": 4}`` runs the tenant's launches of the
    element-wise kernel ``square`` (``elementwise=`` at decoration) as 4 pieces in order, so
    that other tenants' kernels can start between them (on a runtime of one device; recorded
    launches run whole). ``after={"gemm": ("detector", "conv")}`` makes each of the tenant's
    launches of ``gemm`` wait for tenant ``detector``'s latest launch of ``conv``, if that has
    not finished (GACER's synchronization pointer, chosen by the user: the two do not run side
    by side; an edge of reason ``pointer``; a recorded function's replay waits for the
    pointers of every kernel in it, and is named by its recording's name). The block is one
    *step* of the tenant, whose latency (from the block's start to the completion of its work)
    ``tenants()`` reports. Also a decorator: each call is a step. Data shared with other
    tenants is ordered as always.

    Raises
    ------
    ValueError
        An empty name, an unknown priority, a stream count below 1, a bad ``split`` or
        ``after`` (or a kernel in both), or a tenant already made with other settings (raised
        when the block is entered).
    ArgumentError
        A launch of a kernel the tenant splits that is not declared element-wise (nothing is
        enqueued).
    """
    return TenantScope(name, priority, streams, split, after)


def tenants() -> dict[str, TenantStatistics]:
    """Each tenant's statistics by name (``"default"``: the work outside any tenant): the
    kernels, library calls, copies and graph launches it issued, its steps and the latencies
    of those whose work has completed (``asyncgpu.synchronize()`` first to have them all)."""
    return current_runtime().tenant_statistics()
