"""``asyncgpu.tenant``: issuing work as a named tenant, a step at a time; ``asyncgpu.regulate``:
how the tenants share the device.

A :class:`TenantScope` is what ``asyncgpu.tenant(name, priority=...)`` returns: a context
manager (``with``: the block's work is the tenant's, and the block is one step of it) and a
decorator (each call of the function is a step). Scopes nest and may be entered by several
threads at once; leaving one restores the tenant the thread had before. The runtime keeps the
tenants, their streams and statistics (``asyncgpu.core.tenants``, ``Runtime.tenant_index``),
and their regulation (``asyncgpu.runtime.regulator``, set up by :func:`regulate`).

Example::

    with ag.tenant("detector", priority="high"):
        detect[grid, block](frames, boxes)
    ag.tenants()["detector"].steps      # 1
"""

from __future__ import annotations

import functools
import inspect
import threading
from collections.abc import Callable
from typing import Any

from ..core.partitions import GRAIN
from ..core.plan import SHARED, Plan, after_problem, both_problem, split_problem
from ..core.tenants import PRIORITIES, TenantStatistics
from ..core.errors import RecordingError
from .current import current_runtime
from .recording_hook import recording_of, this_thread
from .regulator import Regulation, Regulator


#: Per thread (``scopes``): the scopes it entered and has not left, with their runtimes, tenant
#: numbers and steps, in the order entered. A thread issues for the latest one still open (on
#: its runtime), else for the default tenant: blocks leave in reverse order, except a block in a
#: generator, which may be left after a block entered later. One list for all scopes, so a
#: scope keeps little per-thread state and costs little to make (its ``_open``: where to find
#: its blocks still open, for one left in another thread).
_entered = threading.local()


class TenantScope:
    """The work issued inside is tenant ``name``'s (see the module docstring)."""

    def __init__(self, name: str, priority: str = "normal", streams: int | None = None,
                 split: dict[str, int] | None = None,
                 after: dict[str, tuple[str, str]] | None = None,
                 exclusive: bool = False, sms: int | None = None) -> None:
        if (not isinstance(name, str) or not name or name == "default"
                or name.startswith(SHARED)):
            raise ValueError(f"asyncgpu.tenant: the name must be a non-empty string other than "
                             f"'default' (the tenant of work outside any) and not beginning "
                             f"with {SHARED!r} (the SM partitions a regulation plan's tenants "
                             f"share); got {name!r}")
        if priority not in PRIORITIES:
            raise ValueError(f"asyncgpu.tenant({name!r}): priority must be one of "
                             f"{', '.join(PRIORITIES)}; got {priority!r}")
        if streams is not None and (type(streams) is not int or streams < 1):
            raise ValueError(f"asyncgpu.tenant({name!r}): streams must be a positive int (the "
                             f"most streams the tenant uses per device) or None; got "
                             f"{streams!r}")
        for problem in (split_problem(split) if split is not None else None,
                        after_problem(after) if after is not None else None,
                        both_problem(split, after)):
            if problem is not None:
                raise ValueError(f"asyncgpu.tenant({name!r}): {problem}")
        if type(exclusive) is not bool:
            raise ValueError(f"asyncgpu.tenant({name!r}): exclusive must be True or False; got "
                             f"{exclusive!r}")
        if sms is not None and (type(sms) is not int or sms < 1):
            raise ValueError(f"asyncgpu.tenant({name!r}): sms must be a positive int (the SMs "
                             f"of a partition of its own on each device) or None; got {sms!r}")
        self.name = name
        self.priority = priority
        self.streams = streams
        self.split = dict(split) if split else None
        self.after = dict(after) if after else None
        self.exclusive = exclusive
        self.sms = sms
        #: its blocks entered and not left, as (entry, the thread's ``scopes``, its ``_pins``'
        #: dictionary, its identifier): a block a generator holds, left in another thread,
        #: is ended for the thread that entered it (__exit__)
        self._open: list[tuple[Any, list[Any], dict[str, Any], int]] = []
        #: the runtime this scope's tenant was last found on, and its number there
        self._made: tuple[Any, int] | None = None

    def __repr__(self) -> str:
        return (f"asyncgpu.tenant({self.name!r}, priority={self.priority!r}, "
                f"streams={self.streams!r}, split={self.split!r}, after={self.after!r}, "
                f"exclusive={self.exclusive!r}, sms={self.sms!r})")

    def __enter__(self) -> TenantScope:
        rt = current_runtime()
        made = self._made
        if made is not None and made[0] is rt:
            index = made[1]     # (a tenant keeps its number and settings on its runtime)
        else:
            index = rt.tenant_index(self.name, self.priority, self.streams, self.split,
                                    self.after, self.exclusive, self.sms)
            self._made = (rt, index)
        if self.sms is not None and recording_of(rt, this_thread()) is not None:
            # (as a recorded function called in such a tenant is: see recorder.entry; a
            # regulation plan's partition is not the program's, and refuses nothing)
            raise RecordingError(
                f"asyncgpu.tenant({self.name!r}) entered inside a recording: the tenant runs "
                f"on SMs of its own (sms={self.sms}), and a CUDA graph's kernels run on every "
                "SM, so the replays would leave the partition; enter the tenant outside the "
                "recorded function and call it undecorated there, or make the tenant without "
                "sms")
        entered = getattr(_entered, "scopes", None)
        if entered is None:
            entered = _entered.scopes = []
        depth = len(entered)
        previous = getattr(rt._pins, "tenant", 0)
        out: list[Any] = []
        try:
            rt.begin_step(index, out)
            entry = (self, rt, index, out[0])
            entered.append(entry)
            rt._pins.tenant = index
            self._open.append((entry, entered, rt._pins.__dict__, this_thread()))
            return self
        except BaseException:
            # (an interrupt on the way in: nothing of the entry is left, the step is ended)
            del entered[depth:]
            rt._pins.tenant = previous
            if out:
                rt.end_step(index, out[0], True)
            raise

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: object) -> None:
        entered = getattr(_entered, "scopes", None) or []
        i = len(entered) - 1
        while i >= 0 and entered[i][0] is not self:   # (the last one, unless a generator's)
            i -= 1
        if i < 0:
            # (a generator holding the block, resumed or closed in another thread: the step
            # ends, and the thread that entered it issues for its tenant before the block
            # again, its exclusive step closed; the error says why)
            ended = ""
            if self._open:
                entry, entered, pins, thread = self._open.pop()
                i = next((j for j, e in enumerate(entered) if e is entry), -1)
                if i >= 0:
                    self._leave(entered, i, pins, thread, exc_type is not None)
                    ended = ("; its step ended, and that thread issues for the tenant it had "
                             "before the block")
            raise RuntimeError(
                f"asyncgpu.tenant({self.name!r}) is left in a thread that did not enter it: a "
                "tenant's block belongs to the thread that entered it (no yield or await "
                f"inside it; a generator holding one must be closed in that thread){ended}")
        entry = entered[i]
        for j in range(len(self._open) - 1, -1, -1):
            if self._open[j][0] is entry:
                del self._open[j]
                break
        self._leave(entered, i, entry[1]._pins.__dict__, None, exc_type is not None)

    @staticmethod
    def _leave(entered: list[Any], i: int, pins: dict[str, Any], thread: int | None,
               failed: bool) -> None:
        """End the block ``entered[i]`` of a thread (``thread``, None: this one), whose
        ``scopes`` are ``entered`` and whose ``_pins`` dictionary is ``pins`` (the thread issues
        for the latest block it has left open on the runtime, else for the default tenant)."""
        _, rt, index, begun = entered[i]
        try:
            if rt.retired is None:      # (a configure inside the block replaced the runtime)
                rt.end_step(index, begun, failed, thread)
        finally:
            del entered[i]
            pins["tenant"] = next((e[2] for e in reversed(entered) if e[1] is rt), 0)

    def __call__(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        if (inspect.iscoroutinefunction(fn) or inspect.isgeneratorfunction(fn)
                or inspect.isasyncgenfunction(fn)):
            # (calling one only makes the coroutine or generator: its body runs later,
            # outside the scope, and its launches would be another tenant's)
            kind = "generator" if inspect.isgeneratorfunction(fn) else "coroutine"
            raise TypeError(f"asyncgpu.tenant({self.name!r}) decorates a plain function; "
                            f"{getattr(fn, '__qualname__', fn)!r} is a {kind} function, whose "
                            "body runs after the call returns, outside the tenant; put `with "
                            "asyncgpu.tenant(...):` around its launches inside the body "
                            "instead (with no await or yield inside the block: the scope "
                            "belongs to the thread)")

        @functools.wraps(fn)
        def step(*args: Any, **kwargs: Any) -> Any:
            with self:
                return fn(*args, **kwargs)
        return step


def tenant(name: str, priority: str = "normal", streams: int | None = None,
           split: dict[str, int] | None = None,
           after: dict[str, tuple[str, str]] | None = None,
           exclusive: bool = False, sms: int | None = None) -> TenantScope:
    """``with asyncgpu.tenant("detector", priority="high"):`` the kernels, library calls and
    copies this thread issues in the block are tenant ``name``'s: they run on the tenant's own
    streams, created with its priority (``"high"``: the device's most urgent stream priority;
    ``"normal"``: its default), at most ``streams`` of them per device (None: the runtime's
    ``max_streams``; 1: the tenant's work runs in issue order on one stream of its own), and
    count in its statistics. ``split={"square": 4}`` runs the tenant's launches of the
    splittable kernel ``square`` as 4 pieces in order (an element-wise kernel, ``elementwise=``
    at decoration: over 4 parts of its arrays' rows; a kernel with ``grid_offset=``: over 4
    consecutive block ranges of its grid), so that other tenants' kernels can start between
    them (a recording records the pieces, in order, on the device the launch is placed on).
    ``after={"gemm": ("detector", "conv")}`` makes each of the tenant's launches of ``gemm``
    wait for tenant ``detector``'s latest launch of ``conv``, if that has
    not finished (GACER's synchronization pointer, chosen by the user: the two do not run side
    by side; an edge of reason ``pointer``; a recorded function's replay waits for the
    pointers of every kernel in it, and is named by its recording's name, which on several
    devices names all its graphs; ``"*"`` names the latest launch, on several devices the
    latest on each device). The block is one
    *step* of the tenant, whose latency (from the block's start to the completion of its work)
    ``tenants()`` reports. Also a decorator: each call is a step. Data shared with other
    tenants is ordered as always.

    ``exclusive=True`` keeps the tenant's steps apart from the other tenants' work, for a
    latency-critical tenant whose steps come now and then (a service answering requests):
    while one of its steps is open and until the work it issued has completed, other
    threads' launches wait on the host before anything is enqueued, and while it keeps
    running steps (until it has begun none for four of its periods), each other tenant keeps
    at most one launch in flight, so a step begins beside at most one launch per other tenant
    (CUDA's priorities alone do not stop resident blocks from slowing it). The others'
    throughput is what the exclusive tenant's steps leave; a tenant that issues steps back
    to back would leave them nothing (see :mod:`asyncgpu.runtime.exclusive`).

    ``sms=40`` gives the tenant a partition of 40 SMs of its own on each device (a CUDA green
    context; rounded up to whole groups of 8 SMs), disjoint from every other tenant's partition:
    its kernels run there and nowhere else, so another tenant's resident blocks never slow
    them, nor theirs the other's. Work outside any partition (the default tenant, tenants
    without ``sms``) may run on any SM: give every tenant that shares the device a partition
    to keep them all apart. While any tenant has a partition, kernels launch without the
    one-node graph lanes (a CUDA graph runs on every SM), and a recorded function cannot be
    replayed in a partitioned tenant (see :mod:`asyncgpu.core.partitions`).

    Raises
    ------
    ValueError
        An empty name, ``"default"`` or one beginning with ``"shared by "`` (the names of the work
        outside any tenant and of a plan's shared SM partitions), an unknown priority, a stream
        count below 1, a bad ``split`` or ``after`` (or a kernel in both), an ``exclusive``
        other than a bool, an ``sms`` other than a positive int, or (raised when the block is
        entered) a tenant already made with other settings, or more SMs than the device has
        outside other tenants' partitions.
    ArgumentError
        A launch of a kernel the tenant splits that is declared neither element-wise nor with
        a grid offset, or whose arguments break that declaration's contract (nothing is
        enqueued).
    TypeError
        The scope used as a decorator of a coroutine or generator function (its body runs
        after the call returns, outside the scope).
    """
    return TenantScope(name, priority, streams, split, after, exclusive, sms)


def tenants() -> dict[str, TenantStatistics]:
    """Each tenant's statistics by name (``"default"``: the work outside any tenant, from the
    first tenant's making on; ``asyncgpu.statistics()`` counts all): the kernels, library
    calls, copies and graph launches it issued, its steps and the latencies of those whose
    work has completed (``asyncgpu.synchronize()`` first to have them all)."""
    return current_runtime().tenant_statistics()


def regulate(plan: Any = "search", tenants: Any = None, steps: int = 2,
             budget_s: float = 0.2, host_core: bool = True) -> None:
    """Regulate how the tenants share the device (GACER's concurrency regulation).

    ``plan="search"``: the next ``steps`` steps of each tenant in ``tenants`` (names; None:
    every tenant that has run a step) are profiled, each kernel alone on the device; then a
    plan of splits (splittable kernels launched in pieces) and pointers (a kernel of one
    tenant waiting for a kernel of another) is searched on a model of the device, within
    ``budget_s`` seconds, and the tenants run with it. The plan is then measured on the device
    against the tenants' own settings; where the tenants' steps ran slower side by side than
    they would one after another (steps of mostly host work, whose threads pass the
    interpreter lock from core to core), their threads are moved onto one host core
    (``Plan.one_core``) and kept there where that measured faster, until the plan is set
    aside (``host_core=False``: never; the threads stay on the cores they run on, and a given
    plan's ``one_core`` is not applied); while a high-priority tenant's steps stay over 1.2x its
    latency alone, remedies are measured in turn and each kept only where it helps it without
    costing the others more (as the search's objective weighs them): the others' long
    splittable launches in pieces, the others waiting for its launches, it on SMs of its own
    and the others on the rest, which they share (as ``sms=`` would keep them apart: where its
    launches use at most half the device), and its steps made exclusive (as
    ``exclusive=True`` would). A plan found for the same workload shape
    is reused without a search, and a step of another shape sets the plan aside and profiles
    again. ``plan=`` a :class:`~asyncgpu.Plan` (``asyncgpu.regulation().plan``, or
    ``Plan.load(path)``): run with it, the tenants it names that are not made yet each from
    its making on. ``plan="off"``: the tenants' own settings again.

    The plan is a tenant's splits, pointers, partition, exclusive setting and host core
    (``asyncgpu.tenant``), added to those the tenant was given, so results are those of the
    unregulated program; traces show its pieces (edges of reason ``split``), its pointers
    (``pointer``) and the profiled launches' order (``profile``). ``asyncgpu.regulation()``
    says where it stands.

    Raises
    ------
    ValueError
        An unknown ``plan``, a :class:`~asyncgpu.Plan` whose settings ``asyncgpu.tenant``
        would refuse (:meth:`~asyncgpu.Plan.check`) or whose SM partitions the device cannot
        hold (more SMs than it has outside the tenants' own), ``steps`` below 1, a negative
        ``budget_s``, a ``host_core`` that is not a bool, ``tenants`` that are not names, a
        tenant name the runtime does not know (nor a given plan names), or no tenant to
        regulate (none has run a step yet, and no given plan names one). A refused call leaves
        the regulation in force as it was.
    """
    if not (isinstance(plan, Plan) or plan in ("search", "off")):
        raise ValueError(f"asyncgpu.regulate: plan must be 'search', 'off' or an "
                         f"asyncgpu.Plan; got {plan!r}")
    if isinstance(plan, Plan):
        plan.check()
    if type(steps) is not int or steps < 1:
        raise ValueError(f"asyncgpu.regulate: steps must be a positive int (the steps of each "
                         f"tenant profiled); got {steps!r}")
    if (not isinstance(budget_s, (int, float)) or isinstance(budget_s, bool)
            or not 0 <= budget_s < float("inf")):
        raise ValueError(f"asyncgpu.regulate: budget_s must be a finite number of seconds >= "
                         f"0; got {budget_s!r}")
    if not isinstance(host_core, bool):
        raise ValueError(f"asyncgpu.regulate: host_core must be True or False (whether the "
                         f"tenants' threads may be moved onto one host core); got "
                         f"{host_core!r}")
    if tenants is not None and not isinstance(tenants, str):
        try:
            tenants = list(tenants)
        except TypeError:
            raise ValueError(f"asyncgpu.regulate: tenants must be a tenant's name or names (an "
                             f"iterable of str), or None for every tenant that has run a step; "
                             f"got {tenants!r}") from None
        odd = [n for n in tenants if not isinstance(n, str)]
        if odd:
            raise ValueError(f"asyncgpu.regulate: tenants must be names (str); got {odd[0]!r}")
    rt = current_runtime()
    with rt._lock:
        # (everything is checked before the regulation in force is stopped: a refused call
        # changes nothing)
        if plan == "off" and tenants is not None:
            raise ValueError("asyncgpu.regulate(plan='off') sets every tenant's regulation "
                             "aside; it takes no tenants= (drop it)")
        chosen = [] if plan == "off" else _regulated(rt, plan, tenants)
        if isinstance(plan, Plan) and plan.partitions:
            _refuse_partitions(rt, plan)
        old = rt.regulator
        book = None
        if old is not None:
            old.stop()
            book = old.book
        if plan == "off":
            return
        regulator = Regulator(rt, chosen, steps, float(budget_s), book, host_core)
        rt.regulator = regulator
        if isinstance(plan, Plan):
            regulator.apply(plan)


def _regulated(rt: Any, plan: Any, tenants: list[str] | str | None) -> list[int]:
    """The indices of the tenants ``regulate`` is asked to regulate (ValueError: a name the
    runtime does not know, or none to regulate)."""
    known = {t.name: t.index for t in rt.tenants[1:]}
    # (a given plan may name tenants not made yet: each is regulated as it is made)
    named = plan.named() if isinstance(plan, Plan) else set()
    if tenants is None:
        chosen = [t.index for t in rt.tenants[1:] if t.steps]
        if named:
            chosen = [known[n] for n in sorted(named) if n in known]
            if not chosen:
                return []
    else:
        names = [tenants] if isinstance(tenants, str) else tenants
        missing = [n for n in names if n not in known and n not in named]
        if missing:
            raise ValueError(f"asyncgpu.regulate: no tenant named {missing[0]!r}; the "
                             f"runtime's tenants are {sorted(known) or 'none'} (a tenant "
                             "exists once asyncgpu.tenant(name) was entered)")
        chosen = sorted({known[n] for n in names if n in known})
        if not chosen and names and all(n in named for n in names):
            return []
    if not chosen:
        raise ValueError("asyncgpu.regulate: no tenant to regulate; run a step of each "
                         "tenant first (with asyncgpu.tenant(name): ...), or name them "
                         "with tenants=")
    return chosen


def _refuse_partitions(rt: Any, plan: Plan) -> None:
    """ValueError where ``plan``'s SM partitions cannot be made on the runtime's devices (as
    ``asyncgpu.tenant(..., sms=)`` refuses them): a backend without partitions, or more SMs,
    in whole groups, than the device has outside the tenants' own partitions."""
    backend = rt.backend
    if getattr(backend, "reserve_sms", None) is None:
        raise ValueError(f"asyncgpu.regulate: the plan gives tenants SM partitions, and the "
                         f"{backend.name} backend has none; run it without them: "
                         "dataclasses.replace(plan, partitions={}, shared=())")
    sizes = dict(plan.partition(name) for name in plan.partitions)
    need = sum(-(-sms // GRAIN) * GRAIN for sms in sizes.values())
    own = sum(-(-t.sms // GRAIN) * GRAIN for t in rt.tenants if t.sms is not None)
    have = backend.partitionable_sms() - own
    if need > have:
        raise ValueError(f"asyncgpu.regulate: the plan's SM partitions need {need} SMs in whole "
                         f"groups of {GRAIN} ({plan.describe()}), and the device has {have} "
                         "outside the tenants' own partitions; give them fewer")


def regulation() -> Regulation:
    """Where regulation stands: its state, the plan in force, the tenants whose profiled steps
    are awaited, and the plans stored (see :class:`Regulation`)."""
    rt = current_runtime()
    with rt._lock:
        if rt.regulator is None:
            return Regulation("off")
        return rt.regulator.status()
