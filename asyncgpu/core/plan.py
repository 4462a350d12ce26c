"""Regulation plans and the profiles they are searched on (``asyncgpu.core.regulation``).

The model
---------
A :class:`TenantProfile` is one step of a tenant as the search sees it: its launches in issue
order (:class:`Op`: time alone, share of the device's threads and bandwidth, whether it may be
split, the earlier launches it depends on). A :class:`PairProfile` is two launches of two
tenants timed alone and side by side. A :class:`Plan` is what the search returns and the
runtime applies (``asyncgpu.runtime.regulator``): per tenant, its split kernels and its
pointers, the tenants it makes exclusive (``asyncgpu.runtime.exclusive``), the SM
partitions it gives them (``asyncgpu.core.partitions``) and the tenants whose threads it
runs on one host core (``asyncgpu.runtime.host_core``), with the workload shape it was
searched for, the modelled :class:`Outcome` without and with it, the profiles and the pairs.
A plan round-trips through JSON (``save``/``load``).

Invariants: all are frozen; ``Plan.from_json(plan.to_json()) == plan``.

Example::

    plan = Plan({"a": {"big": 8}}, {"b": {"gemm": ("a", "conv")}})
    plan.tenant_settings("a")       # ({"big": 8}, None)
    Plan.from_json(plan.to_json()) == plan
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

#: The start of the name of a partition several tenants share (``Plan.partition``).
SHARED = "shared by "


@dataclass(frozen=True)
class Op:
    """One launch of a tenant's step: its kernel's name, its time alone (s), its share of the
    device's threads (0, 1], its share of the device's bandwidth [0, 1], whether it may be
    split (its kernel is element-wise, or declares a grid offset and has two blocks or more),
    the earlier launches of the step it depends on (indices), for a kernel split by its
    grid, ``grid``: its blocks over the blocks the device keeps resident (``occupancy``;
    above 1 the grid runs in waves), which a piece's time and share follow (0: split by
    rows, or a grid-stride kernel on its whole grid: a k-th of the time at the same share),
    and ``blocks``: the launch's blocks (0: a recorded step's graph, not a kernel)."""

    kernel: str
    seconds: float
    share: float
    bandwidth: float
    splittable: bool
    parents: tuple[int, ...]
    grid: float = 0.0
    blocks: int = 0

    def piece(self, k: int) -> tuple[float, float]:
        """The time alone (s) and share of the device of one of ``k`` pieces of this launch: a
        k-th of its blocks where it is split by its grid (time by waves: a piece of a grid
        that fits the device at once takes as long as the whole; share by blocks), else a
        k-th of its rows on the same grid (a k-th of the time, the same share). The launch
        itself where ``k`` is 1 or it cannot be split."""
        if k <= 1 or not self.splittable:
            return self.seconds, self.share
        if self.grid:
            return (self.seconds * max(1.0, self.grid / k) / max(1.0, self.grid),
                    min(self.share, self.grid / k))
        return self.seconds / k, self.share


@dataclass(frozen=True)
class TenantProfile:
    """One step of a tenant: its name, priority (``high`` or ``normal``), launches in issue
    order, and whether it runs on one stream (its launches then run in issue order)."""

    name: str
    priority: str
    ops: tuple[Op, ...]
    one_stream: bool = False


@dataclass(frozen=True)
class PairProfile:
    """Two launches of two tenants timed on the device alone and side by side, from the same
    start: ``tenant``'s launch of ``kernel`` took ``alone_s`` by itself and ended
    ``together_s`` after the start beside ``other``'s launch of ``other_kernel``, which took
    ``other_alone_s`` by itself and ended ``other_together_s`` after it. Each launch's own end,
    not only the pair's: a short launch slowed beside a long one can still end first, which the
    pair's end does not show."""

    tenant: str
    kernel: str
    other: str
    other_kernel: str
    alone_s: float
    other_alone_s: float
    together_s: float
    other_together_s: float


@dataclass(frozen=True)
class Outcome:
    """A modelled run of every tenant's step, started together: the makespan (s), each
    tenant's step latency (s), the residue (the idle share of the device's threads over the
    makespan), each high-priority tenant's worst latency over the step starts
    :func:`evaluate` tries, and the search's objective for it, its *score* (the largest of the
    tenants' slowdowns, latency over latency alone, plus the high-priority tenants' lateness
    weighted; 0 where not evaluated)."""

    makespan_s: float
    latency_s: dict[str, float]
    residue: float
    worst_s: dict[str, float] = field(default_factory=dict)
    score: float = 0.0


def split_problem(split: Any) -> str | None:
    """What is wrong with a tenant's ``split`` (kernel name -> pieces, at least 2); None: it
    is right. Shared by ``asyncgpu.tenant`` and :meth:`Plan.check`."""
    if isinstance(split, dict) and all(isinstance(k, str) and type(v) is int and v >= 2
                                       for k, v in split.items()):
        return None
    return (f"split must map kernel names to a number of pieces of at least 2, e.g. "
            f"{{'square': 4}}; got {split!r}")


def after_problem(after: Any) -> str | None:
    """What is wrong with a tenant's ``after`` (kernel name -> the (tenant, kernel) its
    launches wait for); None: it is right."""
    if isinstance(after, dict) and all(
            isinstance(k, str) and isinstance(v, tuple) and len(v) == 2
            and all(isinstance(part, str) and part for part in v) for k, v in after.items()):
        return None
    return (f"after must map a kernel name to the (tenant, kernel) its launches wait for, "
            f"e.g. {{'gemm': ('detector', 'conv')}}; got {after!r}")


def both_problem(split: dict[str, int] | None, after: Any) -> str | None:
    """A kernel both split and held after another tenant's (a tenant gives it one of the two);
    None: none is."""
    both = sorted(set(after or ()) & set(split or ()))
    if both:
        return (f"kernel {both[0]!r} is both split and after another tenant's kernel; give it "
                "one of the two")
    return None


@dataclass(frozen=True)
class Plan:
    """A regulation plan (see the module docstring): per tenant name, its split kernels and
    its pointers; the tenants whose steps it makes exclusive (``exclusive``, names: the
    measured check's last remedy for a late high-priority tenant); the workload ``shape`` it
    was searched for (per tenant, its step's launches: kernel, grid, block), and the modelled
    outcome without it (``before``) and with it (``after_outcome``), how many plans the search
    modelled and how long it took; ``partitions``: per tenant name, the SMs of its partition
    (``asyncgpu.core.partitions``: the measured check's remedy for a late high-priority tenant
    whose launches use few blocks), a partition of its own unless the tenant is one of
    ``shared``, whose tenants share one partition (of the SMs each's entry names);
    ``one_core``: the tenants whose threads run on one host core
    (``asyncgpu.runtime.host_core``: the measured check's remedy where their steps ran slower
    side by side than one after another).

    ``profile`` holds the profiles it was searched on (each tenant's launches, their times
    alone and shares: what the search saw), and ``pairs`` the launches of two tenants timed
    side by side (:class:`PairProfile`), which the search's model follows where they slow each
    other more than it predicts. ``save(path)`` writes it as JSON and
    ``Plan.load(path)`` reads it back, so a plan searched once can be given to
    ``asyncgpu.regulate(plan=...)`` in a later process."""

    splits: dict[str, dict[str, int]] = field(default_factory=dict)
    after: dict[str, dict[str, tuple[str, str]]] = field(default_factory=dict)
    shape: tuple[Any, ...] = ()
    before: Outcome | None = None
    after_outcome: Outcome | None = None
    modelled: int = 0
    search_s: float = 0.0
    profile: tuple[TenantProfile, ...] = ()
    exclusive: tuple[str, ...] = ()
    pairs: tuple[PairProfile, ...] = ()
    partitions: dict[str, int] = field(default_factory=dict)
    shared: tuple[str, ...] = ()
    one_core: tuple[str, ...] = ()

    def partition(self, name: str) -> tuple[str, int] | None:
        """Tenant ``name``'s partition under this plan: its name (the tenant's own, or, for
        the tenants of ``shared``, one name they have in common) and its SMs; None: any SM."""
        sms = self.partitions.get(name)
        if sms is None:
            return None
        return (SHARED + ", ".join(self.shared) if name in self.shared else name), sms

    def check(self) -> None:
        """ValueError naming what is wrong where a plan's settings are not what
        ``asyncgpu.tenant`` accepts (a plan made by hand or edited in its JSON file): splits of
        at least 2 pieces, pointers to a (tenant, kernel), tuples of names, partitions of at
        least one SM, and profiles, pairs and outcomes of the types and ranges the search
        writes. Names of tenants the runtime does not know are allowed (they take effect once
        such a tenant runs)."""
        def names(field_name: str, value: Any) -> None:
            if not (isinstance(value, tuple) and all(isinstance(n, str) for n in value)):
                raise ValueError(f"asyncgpu.Plan: {field_name} must be a tuple of tenant names, "
                                 f"e.g. ('detector',); got {value!r}")

        for field_name, table in (("splits", self.splits), ("after", self.after),
                                  ("partitions", self.partitions)):
            if not (isinstance(table, dict) and all(isinstance(t, str) for t in table)):
                raise ValueError(f"asyncgpu.Plan: {field_name} must map tenant names to their "
                                 f"settings; got {table!r}")
        for tenant, split in self.splits.items():
            problem = split_problem(split)
            if problem is None:
                problem = both_problem(split, self.after.get(tenant))
            if problem is not None:
                raise ValueError(f"asyncgpu.Plan: tenant {tenant!r}'s {problem}")
        for tenant, after in self.after.items():
            problem = after_problem(after)
            if problem is not None:
                raise ValueError(f"asyncgpu.Plan: tenant {tenant!r}'s {problem}")
        for tenant, sms in self.partitions.items():
            if type(sms) is not int or sms < 1:
                raise ValueError(f"asyncgpu.Plan: tenant {tenant!r}'s partition must be a "
                                 f"positive int (its SMs); got {sms!r}")
        names("exclusive", self.exclusive)
        names("shared", self.shared)
        names("one_core", self.one_core)
        unshared = [n for n in self.shared if n not in self.partitions]
        if unshared:
            raise ValueError(f"asyncgpu.Plan: tenant {unshared[0]!r} is in shared but has no "
                             "entry in partitions (the SMs the shared partition has)")
        sizes = {self.partitions[n] for n in self.shared}
        if len(sizes) > 1:
            raise ValueError(f"asyncgpu.Plan: the tenants in shared share one partition, so "
                             f"partitions must give each the same SMs; got "
                             f"{ {n: self.partitions[n] for n in self.shared} }")
        if not (isinstance(self.shape, tuple) and all(
                isinstance(entry, tuple) and len(entry) == 2 and isinstance(entry[0], str)
                and isinstance(entry[1], tuple) for entry in self.shape)):
            raise ValueError(f"asyncgpu.Plan: shape must be a tuple of (tenant name, its "
                             f"step's launches) pairs, as the search writes it; got "
                             f"{self.shape!r} (delete it to run the plan on steps of any "
                             "shape)")
        if "default" in self.named():
            raise ValueError("asyncgpu.Plan: 'default' (the work outside any tenant) cannot be "
                             "regulated; name the tenants whose work the plan changes")
        odd = sorted(n for n in self.named() if not n or n.startswith(SHARED))
        if odd:
            raise ValueError(f"asyncgpu.Plan: {odd[0]!r} is no tenant's name (asyncgpu.tenant "
                             f"refuses an empty one, and one beginning with {SHARED!r}, the "
                             "names of the partitions tenants share)")
        self._check_measured()

    def _check_measured(self) -> None:
        """ValueError naming the field where the profiles, pairs or outcomes hold values of
        other types than the search writes (a plan edited by hand): the runtime computes
        with them when it applies the plan."""
        def fail(where: str, what: str, value: Any) -> None:
            raise ValueError(f"asyncgpu.Plan: {where} must be {what}; got {value!r} (delete "
                             "profile, pairs and the outcomes to run the plan as given)")

        def seconds(where: str, value: Any) -> None:
            if not _real(value) or not 0 <= value < float("inf"):
                fail(where, "a finite number of seconds >= 0", value)

        if not (isinstance(self.profile, tuple)
                and all(isinstance(p, TenantProfile) for p in self.profile)):
            fail("profile", "a tuple of TenantProfile", self.profile)
        for p in self.profile:
            at = f"profile {p.name!r}"
            if not isinstance(p.name, str):
                fail("a profile's name", "a tenant's name (str)", p.name)
            if p.priority not in ("high", "normal"):
                fail(f"{at}: priority", "'high' or 'normal'", p.priority)
            if not isinstance(p.one_stream, bool):
                fail(f"{at}: one_stream", "True or False", p.one_stream)
            if not (isinstance(p.ops, tuple) and all(isinstance(o, Op) for o in p.ops)):
                fail(f"{at}: ops", "a tuple of Op", p.ops)
            for i, o in enumerate(p.ops):
                where = f"{at}, launch {i}"
                if not isinstance(o.kernel, str):
                    fail(f"{where}: kernel", "a kernel's name (str)", o.kernel)
                seconds(f"{where}: seconds", o.seconds)
                if not _real(o.share) or not 0 < o.share <= 1:
                    fail(f"{where}: share", "a share of the device in (0, 1]", o.share)
                if not _real(o.bandwidth) or not 0 <= o.bandwidth <= 1:
                    fail(f"{where}: bandwidth", "a share of the bandwidth in [0, 1]",
                         o.bandwidth)
                if not isinstance(o.splittable, bool):
                    fail(f"{where}: splittable", "True or False", o.splittable)
                if not (isinstance(o.parents, tuple)
                        and all(type(j) is int and 0 <= j < i for j in o.parents)):
                    fail(f"{where}: parents", "a tuple of earlier launches' indices",
                         o.parents)
                if not _real(o.grid) or not 0 <= o.grid < float("inf"):
                    fail(f"{where}: grid", "a finite number >= 0", o.grid)
                if type(o.blocks) is not int or o.blocks < 0:
                    fail(f"{where}: blocks", "an int >= 0", o.blocks)
        if not (isinstance(self.pairs, tuple)
                and all(isinstance(p, PairProfile) for p in self.pairs)):
            fail("pairs", "a tuple of PairProfile", self.pairs)
        for p in self.pairs:
            where = f"the pair of {p.tenant!r} and {p.other!r}"
            if not all(isinstance(n, str) for n in (p.tenant, p.kernel, p.other,
                                                    p.other_kernel)):
                fail(f"{where}: its tenants and kernels", "names (str)",
                     (p.tenant, p.kernel, p.other, p.other_kernel))
            for name in ("alone_s", "other_alone_s", "together_s", "other_together_s"):
                seconds(f"{where}: {name}", getattr(p, name))
        for name in ("before", "after_outcome"):
            o = getattr(self, name)
            if o is None:
                continue
            if not isinstance(o, Outcome):
                fail(name, "an Outcome or None", o)
            seconds(f"{name}: makespan_s", o.makespan_s)
            for table in ("latency_s", "worst_s"):
                value = getattr(o, table)
                if not (isinstance(value, dict) and all(isinstance(t, str) for t in value)):
                    fail(f"{name}: {table}", "a table of tenant names to seconds", value)
                for t, v in value.items():
                    seconds(f"{name}: {table}[{t!r}]", v)
            for field_name in ("residue", "score"):
                if not _real(getattr(o, field_name)):
                    fail(f"{name}: {field_name}", "a number", getattr(o, field_name))
        if type(self.modelled) is not int or self.modelled < 0:
            fail("modelled", "an int >= 0", self.modelled)
        seconds("search_s", self.search_s)

    def named(self) -> set[str]:
        """The tenants this plan gives a setting."""
        return (set(self.splits) | set(self.after) | set(self.exclusive)
                | set(self.partitions) | set(self.one_core))

    def tenant_settings(self, name: str) -> tuple[dict[str, int] | None,
                                                  dict[str, tuple[str, str]] | None]:
        """Tenant ``name``'s splits and pointers under this plan (None: none)."""
        return self.splits.get(name) or None, self.after.get(name) or None

    def launch_times(self) -> dict[tuple[str, str], float]:
        """Each profiled launch's time alone in seconds, by tenant name and kernel (or recorded
        function) name: the longest of a name's launches in the tenant's step, as the plan
        launches it (one piece's, where the plan splits it: :meth:`Op.piece`)."""
        times: dict[tuple[str, str], float] = {}
        for profile in self.profile:
            cut = self.splits.get(profile.name, {})
            for op in profile.ops:
                key = (profile.name, op.kernel)
                seconds = op.piece(cut.get(op.kernel, 1))[0]
                times[key] = max(times.get(key, 0.0), seconds)
        return times

    def describe(self) -> str:
        """One line: the plan's splits and pointers, and its modelled gain."""
        parts = [f"{t}: {k} in {n}" for t, ks in sorted(self.splits.items())
                 for k, n in sorted(ks.items())]
        parts += [f"{t}: {k} after {o}.{j}" for t, ks in sorted(self.after.items())
                  for k, (o, j) in sorted(ks.items())]
        parts += [f"{t}: exclusive" for t in self.exclusive]
        parts += [f"{t}: on {n} SMs of its own" for t, n in sorted(self.partitions.items())
                  if t not in self.shared]
        if self.shared:
            parts.append(f"{', '.join(self.shared)}: on {self.partitions[self.shared[0]]} SMs "
                         "they share")
        if self.one_core:
            parts.append(f"{', '.join(self.one_core)}: threads on one host core")
        gain = ""
        before, after = self.before, self.after_outcome
        if before is not None and after is not None:
            # (the search's objective; the makespan for a plan made without it)
            gain = (f" (modelled score {before.score:.2f} -> {after.score:.2f})"
                    if before.score and after.score else
                    f" (modelled makespan {before.makespan_s * 1e3:.3f} -> "
                    f"{after.makespan_s * 1e3:.3f} ms)")
        return ("; ".join(parts) or "no splits, pointers or exclusive tenants") + gain

    def to_json(self) -> str:
        def outcome(o: Outcome | None) -> Any:
            return None if o is None else {"makespan_s": o.makespan_s,
                                            "latency_s": o.latency_s, "residue": o.residue,
                                            "worst_s": o.worst_s, "score": o.score}
        return json.dumps({"splits": self.splits,
                           "after": {t: {k: list(v) for k, v in ks.items()}
                                     for t, ks in self.after.items()},
                           "shape": _lists(self.shape), "before": outcome(self.before),
                           "after_outcome": outcome(self.after_outcome),
                           "modelled": self.modelled, "search_s": self.search_s,
                           "profile": [{"name": p.name, "priority": p.priority,
                                        "one_stream": p.one_stream,
                                        "ops": [[o.kernel, o.seconds, o.share, o.bandwidth,
                                                 o.splittable, list(o.parents), o.grid,
                                                 o.blocks]
                                                for o in p.ops]} for p in self.profile],
                           "exclusive": list(self.exclusive),
                           "pairs": [[p.tenant, p.kernel, p.other, p.other_kernel, p.alone_s,
                                      p.other_alone_s, p.together_s, p.other_together_s]
                                     for p in self.pairs],
                           "partitions": self.partitions, "shared": list(self.shared),
                           "one_core": list(self.one_core)},
                          indent=1)

    @classmethod
    def from_json(cls, text: str) -> Plan:
        """The plan :meth:`to_json` wrote; ValueError naming what is wrong where the text is
        not one (a plan edited by hand): a key it does not write is refused, no value is
        converted to fit, and the settings must pass :meth:`check`."""
        try:
            d = json.loads(text)
        except ValueError as exc:
            raise ValueError(f"asyncgpu.Plan: not a plan's JSON: {exc}") from None
        if not isinstance(d, dict):
            raise ValueError(f"asyncgpu.Plan: a plan's JSON is an object; got {d!r}")
        # (a key misspelt by hand, "exlusive", would otherwise leave its setting out unseen)
        unknown = [key for key in d if key not in _JSON_KEYS]
        if unknown:
            raise ValueError(f"asyncgpu.Plan: unknown key {unknown[0]!r} in a plan's JSON; "
                             f"its keys are {', '.join(_JSON_KEYS)}")

        def table(name: str) -> dict[str, Any]:
            value = d.get(name, {})
            if not (isinstance(value, dict)
                    and all(isinstance(v, dict) for v in value.values())):
                raise ValueError(f"asyncgpu.Plan: {name} must map tenant names to objects; "
                                 f"got {value!r}")
            return value

        def names(name: str) -> Any:
            value = d.get(name, [])
            return tuple(value) if isinstance(value, list) else value

        def known(where: str, value: Any, keys: tuple[str, ...]) -> Any:
            # (nested keys too: a misspelt "one_stram" would otherwise read as its default)
            if isinstance(value, dict):
                odd = [key for key in value if key not in keys]
                if odd:
                    raise ValueError(f"asyncgpu.Plan: unknown key {odd[0]!r} in {where} of a "
                                     f"plan's JSON; its keys are {', '.join(keys)}")
            return value

        def outcome(o: Any) -> Outcome | None:
            if o is None:
                return None
            known("an outcome", o, _OUTCOME_KEYS)
            return Outcome(o["makespan_s"], o["latency_s"], o["residue"], o.get("worst_s", {}),
                           o.get("score", 0.0))

        def ops(p: dict[str, Any]) -> tuple[Op, ...]:
            known("a profile", p, _PROFILE_KEYS)
            for o in p["ops"]:
                if not isinstance(o, list) or not 6 <= len(o) <= 8:
                    raise ValueError(f"asyncgpu.Plan: a launch of profile {p['name']!r} must be "
                                     "a list of 6 to 8 fields (kernel, seconds, share, "
                                     "bandwidth, splittable, parents, grid, blocks); got "
                                     f"{o!r}")
            return tuple(Op(o[0], o[1], o[2], o[3], o[4], tuple(o[5]), *o[6:8])
                         for o in p["ops"])
        splits = dict(table("splits"))
        after = {t: {k: tuple(v) if isinstance(v, list) else v for k, v in ks.items()}
                 for t, ks in table("after").items()}
        partitions = d.get("partitions", {})
        if not isinstance(partitions, dict):
            raise ValueError(f"asyncgpu.Plan: partitions must map tenant names to their SMs; "
                             f"got {partitions!r}")
        try:
            plan = cls(
                splits, after, _tuples(d.get("shape", [])),
                outcome(d.get("before")), outcome(d.get("after_outcome")),
                d.get("modelled", 0), d.get("search_s", 0.0),
                tuple(TenantProfile(p["name"], p["priority"], ops(p), p["one_stream"])
                      for p in d.get("profile", [])),
                names("exclusive"), tuple(PairProfile(*p) for p in d.get("pairs", [])),
                dict(partitions), names("shared"), names("one_core"))
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            if str(exc).startswith("asyncgpu.Plan:"):
                raise                   # (said already, naming the field)
            raise ValueError(f"asyncgpu.Plan: its profile, pairs or outcomes are not as "
                             f"to_json writes them ({type(exc).__name__}: {exc}); delete "
                             "those fields to run the plan as given") from None
        plan.check()
        return plan

    def save(self, path: str) -> None:
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.to_json())

    @classmethod
    def load(cls, path: str) -> Plan:
        with open(path, encoding="utf-8") as f:
            return cls.from_json(f.read())


#: The keys of a plan's JSON object (:meth:`Plan.to_json`), each optional in what
#: :meth:`Plan.from_json` reads.
_JSON_KEYS = ("splits", "after", "shape", "before", "after_outcome", "modelled", "search_s",
              "profile", "exclusive", "pairs", "partitions", "shared", "one_core")
#: ... of each of its profiles, and of its outcomes.
_PROFILE_KEYS = ("name", "priority", "one_stream", "ops")
_OUTCOME_KEYS = ("makespan_s", "latency_s", "residue", "worst_s", "score")


def _real(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and x == x


def _lists(x: Any) -> Any:
    return [_lists(v) for v in x] if isinstance(x, (tuple, list)) else x


def _tuples(x: Any) -> Any:
    return tuple(_tuples(v) for v in x) if isinstance(x, list) else x
