"""Tenants benchmark: workloads of the suite sharing one GPU, each a source of steps.

A *mix* is three workloads of the suite or INCEPTION (default: DL, IMG and ML); a workload's
*step* is one ``run`` of it (its launches and the host's read of its result) after a reset of
its accumulators. Each mode's first and last step of every workload are checked against the
reference after the mode's timed region. Modes, side by side in one run, each ``rounds``
rounds of one step of every workload (after every workload ran ``warmup`` steps alone):

* ``sequential``: one host thread runs the workloads' steps one after another;
* ``one stream each``: one thread per workload, each a tenant held to one stream
  (``asyncgpu.tenant(..., streams=1)``): model-level sharing, as one CUDA stream per model
  (this mode and ``tenants`` run one untimed round first, in which their tenants are made);
* ``threads``: one host thread per workload, no tenants: asyncgpu's scheduler alone;
* ``tenants``: one thread per workload, each its own tenant (``asyncgpu.tenant``: streams of
  its own), the first workload's with ``priority="high"``;
* ``one thread``: the same tenants, all issued by one host thread: each round issues every
  workload's launches (each in its tenant's scope), then reads their results, so the steps
  overlap on the device without host threads taking turns at the GIL (a workload whose step
  reads on the host between its launches, HITS, runs its whole step when issued);
* ``regulated``: the same tenants under ``asyncgpu.regulate(plan="search")``: untimed rounds
  run until the profile is taken and the plan searched (at most :data:`PROFILE_ROUNDS`), and
  until the high-priority tenant's latency under it was checked (at most
  :data:`CHECK_ROUNDS`, in blocks as long as the timed ones), then the timed rounds run with
  the plan, in force in this mode's turns only (``plan`` in the result: what it split and
  pointed, and the check's slowest measured step and latency alone, ms);
* ``regulated, one thread``: the same as ``regulated`` with every step issued as in ``one
  thread``, profile, search and check included (``plan_one_thread`` in the result): one
  thread that switches tenants, as a program without a thread per tenant is regulated;
* ``partitioned`` (with ``partitions=True``, ``--partitions``): one thread per workload, each
  a tenant on SMs of its own (``asyncgpu.tenant(..., sms=N)``: an equal share of the device,
  in whole groups), the first with priority high, so no tenant's blocks share a
  multiprocessor with another's.

The modes are timed taking turns: every mode is made ready first (the untimed rounds above),
then each mode's rounds run in ``turns`` blocks, one block of every mode per turn (the order
rotated each turn), so that a slow spell of the host lands on every mode alike rather than on
whichever ran then.

Reported per mode: the wall time of the whole mix (its median block's time per round, times
the rounds) and its speedup (the median over the turns of ``sequential``'s time over its own),
and per workload the step latency, host-measured from the step's start to its checked result,
p50 and p99; ``alone``: each workload's latency when it runs by itself (the reference a
high-priority tenant's p99 is held to). ``bound``: the longest workload's rounds by itself
(its median round, reset and step, times the rounds), which no mode can beat since a
workload's steps run one after another, and ``sequential``'s over it, the most any mode can
reach on this mix.

A workload of the mix may name its own scale: ``ml:small``.

With ``--balance`` a round is as many steps of each workload as take about as long alone as
one step of the longest (its median step alone over theirs, rounded; at least one), so that
every workload is about the same share of the mix and no one of them bounds it: with equal
rounds, a workload of 24 ms steps beside two of 5 ms is 70% of the mix, and no mode can run
the mix faster than 1.4x ``sequential``. With ``--no-priority`` no tenant has priority high:
regulation then serves the mix's speed alone (the largest slowdown), with no lead's latency
to hold.

Once every workload ran its warm-up steps (its kernels compiled, its arrays made), the objects
of the process are frozen out of Python's garbage collector (``gc.freeze``, undone at the end),
as a latency-bound service does after its warm-up: a full collection walks every tracked object
with the GIL held, 300 thousand of them once Numba and CuPy are loaded (up to 110 ms on the GPU
machine's host), and one landing in a timed step would stall every tenant's thread at once.

With ``--steps recorded`` every mode's steps replay each workload's launches recorded as a graph
(the suite's ``recorded_static``), which takes most of the host's work out of a step.

With ``--period P`` (:func:`measure_served`) the first workload is a *service*: its steps
arrive every ``P`` times its median step alone, each started at its arrival time (an open
loop: a late step does not delay the next arrival), while the others run steps back to back on
threads of their own. Modes, one after the other: ``threads`` (no tenants), ``tenants`` (the
service's tenant with priority high), ``regulated`` (the same tenants under
``asyncgpu.regulate(plan="search")``, served in untimed runs of 30 service steps until the
plan is searched and checked, at most :data:`SERVED_CHECK_RUNS`, then timed with the plan)
and ``exclusive`` (the service's tenant made with ``exclusive=True``: the others' launches
wait on the host while a service step is open, and keep one launch in flight; last, since a
tenant keeps its settings for the runtime's life, and the others keep one launch in flight
while it exists). Reported:
the service's step latency p50 and p99 and, per other workload, its steps per second and that
over its rate alone; the service's latency alone is taken at the same arrival rate, first
outside any tenant and, after the modes, in its exclusive tenant.

usage: ``asyncgpu bench tenants [--scale small] [--iterations ROUNDS] [--rounds TURNS]
[--workloads dl,img,ml:small] [--steps eager|recorded] [--period P] [--balance]
[--no-priority]``
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import statistics
import threading
import time
from collections.abc import Iterator
from typing import Any

from .harness import static_runner
from .inception import InceptionStep
from .workloads import WORKLOADS as SUITE

#: The workloads a mix can name: the suite's, and INCEPTION (a chain of small inception blocks,
#: the shape of a small-batch CNN; ``benchmarks.inception``).
WORKLOADS = {**SUITE, "inception": InceptionStep}

MIX = ("dl", "img", "ml")
MODES = ("sequential", "one stream each", "threads", "tenants", "one thread", "regulated",
         "regulated, one thread")
#: The most untimed rounds ``regulated`` runs for its profile and search, and then for the
#: check of the plan (``asyncgpu.regulate``): each tenant's steps alone (30 of the
#: high-priority tenant's, 9 of each other's), then up to seven stages, each of 30 measured
#: steps, with room for the steps a stage starts behind.
PROFILE_ROUNDS = 8
CHECK_ROUNDS = 320
#: With ``--period``, the most untimed runs of 30 service steps ``regulated`` takes for its
#: profile, search and check, served as the timed steps are.
SERVED_CHECK_RUNS = 11
#: ... each of this many service steps, as long as a stage of the check: the other workloads'
#: threads start and stop with each run, which a timed run of 60 steps does once.
CHECK_RUN = 30
#: The blocks each mode's timed rounds are split into on a GPU, the modes taking turns
#: (``asyncgpu bench tenants --rounds``): steps of a fraction of a millisecond, timed in one
#: stretch per mode, moved by a factor of two between runs on a busy host.
TURNS = 3


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class _Member:
    """One workload of the mix: its step, timed; its results checked after the timed region
    (the first and the last step's of each mode: a check is host work, often longer than the
    step, that would otherwise weigh on the mix's wall time and hold the other threads' GIL)."""

    def __init__(self, ag: Any, name: str, scale: str, block: int, num_blocks: int,
                 recorded: bool) -> None:
        self.name = name            # (``workload`` or ``workload:scale``)
        workload, _, own_scale = name.partition(":")
        self.wl = WORKLOADS[workload](ag, own_scale or scale)
        self.wl.reset()             # the inputs (a step resets only the accumulators)
        # (recorded: the launches as a static graph function, replayed, then the host read)
        self.run = static_runner(ag, self.wl) if recorded else self.wl.run
        self.block, self.num_blocks = block, num_blocks
        # the step's launches without its read, for ``one thread`` (None: a workload whose
        # step reads on the host between launches runs its whole step in ``begin``)
        self.device = (getattr(self.run, "device", None) if recorded
                       else getattr(self.wl, "run_device", None))
        #: steps of this workload in each round (``balance``: as many as take about as long
        #: alone as the longest workload's one step)
        self.repeats = 1
        self.latencies: list[float] = []
        self.results: list[Any] = []    # the first and the latest step's, to check
        self._started = 0.0
        self._result: Any = None

    def step(self, timed: bool) -> None:
        self.begin()
        self.end(timed)

    def begin(self) -> None:
        """The first half of a step: the reset and the launches (nothing waits for them)."""
        reset = getattr(self.wl, "reset_accumulators", None)    # (B&S keeps no state)
        if reset is not None:
            reset()
        self._started = time.perf_counter()
        if self.device is None:
            self._result = self.run(self.block, self.num_blocks)
        else:
            self.device(self.block, self.num_blocks)

    def end(self, timed: bool) -> None:
        """The second half: the host's read of the result; the step's latency is taken."""
        result = self.wl.read() if self.device is not None else self._result
        elapsed = time.perf_counter() - self._started
        self._result = None
        self.results[1:] = [result]
        if timed:
            self.latencies.append(elapsed)

    def check(self) -> None:
        """Check the kept results (host copies: later steps did not change them)."""
        for result in self.results:
            ok, why = self.wl.check(result)
            if not ok:
                raise AssertionError(f"tenants: {self.name} gave a wrong result: {why}")
        self.results = []

    def taken(self) -> list[float]:
        """Check the kept results; the step latencies taken since the last call."""
        self.check()
        latencies, self.latencies = self.latencies, []
        return latencies


def _threads(members: list[_Member], rounds: int, scopes: list[Any] | None) -> None:
    """Each member's steps on a thread of its own (inside its tenant scope, if given), its
    ``repeats`` steps a round."""
    errors: list[BaseException] = []
    start = threading.Barrier(len(members))

    def work(i: int) -> None:
        try:
            start.wait()
            for _ in range(rounds * members[i].repeats):
                if scopes is None:
                    members[i].step(True)
                else:
                    with scopes[i]:
                        members[i].step(True)
        except BaseException as exc:  # noqa: BLE001 - raised on the main thread below
            errors.append(exc)
            start.abort()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(members))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def _one_thread(members: list[_Member], rounds: int, scopes: list[Any]) -> None:
    """Every member's step issued by one thread, each in its tenant scope, before any of their
    results is read: the steps overlap on the device, and no thread waits for another's GIL.
    A round is as many such passes as the most ``repeats``, a member taking part in the first
    ``repeats`` of them."""
    passes = max(m.repeats for m in members)
    for _ in range(rounds):
        for p in range(passes):
            issued = [(m, scope) for m, scope in zip(members, scopes) if p < m.repeats]
            for m, scope in issued:
                with scope:     # (one step of the tenant: its launches, whose work it times)
                    m.begin()
            for m, _ in issued:
                m.end(True)


#: The regulated modes (each runs its rounds as :func:`_driver` says).
REGULATED = ("regulated", "regulated, one thread")


def _driver(mode: str) -> Any:
    """How regulated mode ``mode`` runs its rounds: on a thread per workload, or one thread."""
    return _one_thread if mode == "regulated, one thread" else _threads


def measure(ag: Any, scale: str = "small", rounds: int = 20, warmup: int = 2,
            mix: tuple[str, ...] = MIX, block: int = 256, num_blocks: int = 2,
            recorded: bool = False, check_rounds: int = CHECK_ROUNDS, turns: int = 1,
            partitions: bool = False, balance: bool = False, priority: bool = True
            ) -> dict[str, Any]:
    """Rows per mode: the mix's wall time (ms) and each workload's step latency p50 and p99
    (ms); ``alone``: each workload's latencies by itself. ``recorded``: each step replays the
    workload's launches recorded as a graph (``recorded_static`` of the suite) in every
    mode. ``check_rounds``: the most rounds ``regulated`` waits for its check (0 on the
    simulator, whose clock says nothing of latency). ``turns``: each mode's ``rounds`` are
    split into this many blocks, the modes taking turns block by block (see
    :func:`_measure`). ``partitions``: also the mode ``partitioned`` (eager steps only: a
    graph runs on every SM). ``balance``: a round is as many steps of each workload as take
    about as long alone as one step of the longest (``repeats`` in the result), so no workload
    is most of the mix. ``priority``: the first workload's tenants have priority high (else
    no tenant has)."""
    if partitions and recorded:
        raise ValueError("bench tenants: the partitioned mode runs eager steps only (a "
                         "recorded step's graph runs on every SM)")
    modes = MODES + (("partitioned",) if partitions else ())
    with _warm_members(ag, mix, scale, block, num_blocks, recorded, warmup) as members:
        return _measure(ag, members, scale, rounds, mix, recorded, check_rounds,
                        max(1, min(turns, rounds)), modes, balance, priority)


@contextlib.contextmanager
def _warm_members(ag: Any, mix: tuple[str, ...], scale: str, block: int, num_blocks: int,
                  recorded: bool, warmup: int) -> Iterator[list[_Member]]:
    """The mix's members after ``warmup`` steps each, the process's objects frozen out of the
    garbage collector meanwhile (see the module docstring)."""
    members = [_Member(ag, name, scale, block, num_blocks, recorded) for name in mix]
    for m in members:
        for _ in range(warmup):
            m.step(False)
    gc.collect()
    gc.freeze()
    try:
        yield members
    finally:
        gc.unfreeze()


def balanced(medians: list[float]) -> list[int]:
    """Steps of each workload in a round of ``--balance``, from its median step alone
    (``medians``): as many as take about as long as one step of the longest, at least one."""
    longest = max(medians)
    return [max(1, round(longest / m)) if m > 0 else 1 for m in medians]


def _blocks(rounds: int, turns: int) -> list[int]:
    """``rounds`` split into ``turns`` blocks as even as can be (the larger ones first)."""
    size, extra = divmod(rounds, turns)
    return [size + (i < extra) for i in range(turns)]


def _measure(ag: Any, members: list[_Member], scale: str, rounds: int, mix: tuple[str, ...],
             recorded: bool, check_rounds: int, turns: int, modes: tuple[str, ...] = MODES,
             balance: bool = False, priority: bool = True) -> dict[str, Any]:
    """:func:`measure` once the members are warm. Every mode is made ready first (its tenants'
    untimed round, ``regulated``'s profile, search and check); then the modes take turns,
    each running one block of its rounds per turn (the order rotated each turn), so that a
    slow spell of the host weighs on every mode alike. A mode's mix time is its median
    block's time per round times ``rounds`` (one turn: the one block's time), its speedup the
    median over the turns of ``sequential``'s block time over its own (per round)."""
    alone: dict[str, dict[str, float]] = {}
    medians = []
    for m in members:
        whole = []          # each timed step: the reset and the step (which ends on the host)
        for _ in range(rounds):
            t0 = time.perf_counter()
            m.step(True)
            whole.append(time.perf_counter() - t0)
        # (the median: one slow step, a collection or the like, says nothing of the mix)
        medians.append(statistics.median(whole))
        alone[m.name] = _summary(m.taken())
    if balance:
        for m, repeats in zip(members, balanced(medians)):
            m.repeats = repeats
    longest = max(rounds * m.repeats * median for m, median in zip(members, medians))

    def ranked(suffix: str, sms: int | None = None) -> list[Any]:
        return _ranked(ag, mix, suffix, sms=sms, priority=priority)

    scopes = {"tenants": ranked("tenant"), "regulated": ranked("regulated"),
              "one stream each": [ag.tenant(f"{name}-one-stream", streams=1) for name in mix],
              "one thread": ranked("one-thread"), "threads": None,
              "regulated, one thread": ranked("regulated-one")}
    if "partitioned" in modes:
        scopes["partitioned"] = ranked("partitioned", sms=_share(ag, len(mix)))

    held: dict[str, Any] = {}   # (each regulated mode's plan, once checked: in its turns only)

    def run(mode: str, rounds: int) -> None:
        """``rounds`` rounds of every member's step, as ``mode`` runs them."""
        if mode == "sequential":
            for _ in range(rounds):
                for m in members:
                    for _ in range(m.repeats):
                        m.step(True)
        elif mode == "one thread":
            _one_thread(members, rounds, scopes[mode])
        elif mode in REGULATED:
            plan = held.get(mode)
            if plan is not None:
                ag.regulate(plan=plan, tenants=[s.name for s in scopes[mode]])
            try:
                _driver(mode)(members, rounds, scopes[mode])
            finally:
                if plan is not None:
                    ag.regulate(plan="off")
        else:
            _threads(members, rounds, scopes[mode])

    plans: dict[str, Any] = {}
    # (every workload is warm: it ran alone first; ``partitioned``'s tenants are made before
    # the regulated modes check their plans: partitions last as long as the runtime, so those
    # SMs are theirs, and a regulation remedy finds none left for its own)
    for mode in sorted(modes, key=lambda m: m in REGULATED):
        if mode in REGULATED:
            plans[mode] = _regulate(ag, members, scopes[mode], check_rounds,
                                    _blocks(rounds, turns)[0], _driver(mode))
            # (set aside between its turns: an exclusive tenant of the plan would hold every
            # other mode's launches to one in flight; given again without its profile, it is
            # applied as it is, not checked again)
            found = ag.regulation().plan
            if found is not None:
                held[mode] = dataclasses.replace(found, profile=())
            ag.regulate(plan="off")
        elif scopes.get(mode) is not None:
            # (one untimed round: a tenant's first step makes its streams, as they are needed)
            run(mode, 1)
    ag.synchronize()
    for m in members:
        m.taken()
    per_round: dict[str, list[float]] = {mode: [] for mode in modes}   # each block's, seconds
    latencies: dict[str, dict[str, list[float]]] = {mode: {m.name: [] for m in members}
                                                    for mode in modes}
    for turn, block in enumerate(_blocks(rounds, turns)):
        # (the order rotated each turn, as the suite's rounds do: no mode always runs first)
        for mode in modes[turn % len(modes):] + modes[:turn % len(modes)]:
            ag.synchronize()
            t0 = time.perf_counter()
            run(mode, block)
            ag.synchronize()
            per_round[mode].append((time.perf_counter() - t0) / block)
            for m in members:
                latencies[mode][m.name] += m.taken()
    ag.regulate(plan="off")
    sequential = per_round["sequential"]
    rows = [{"mode": mode, "ms": statistics.median(per_round[mode]) * rounds * 1e3,
             "speedup": statistics.median(s / t for s, t in zip(sequential, per_round[mode])),
             "turn_round_ms": [t * 1e3 for t in per_round[mode]],
             "latency": {name: _summary(values) for name, values in latencies[mode].items()}}
            for mode in modes]
    seq_ms = rows[0]["ms"]
    return {"rows": rows, "alone": alone, "mix": list(mix), "scale": scale, "rounds": rounds,
            "turns": turns, "high_priority": mix[0] if priority else None,
            "repeats": {m.name: m.repeats for m in members}, "plan": plans.get("regulated"),
            "plan_one_thread": plans.get("regulated, one thread"), "recorded": recorded,
            "bound": {"ms": longest * 1e3, "speedup": seq_ms / (longest * 1e3)}}


def _regulate(ag: Any, members: list[_Member], scopes: list[Any], check_rounds: int,
              block: int, drive: Any) -> dict[str, Any]:
    """Profile and search the regulated tenants' plan in untimed rounds, then check it in
    untimed blocks of ``block`` rounds, as the timed rounds run: each thread runs its block's
    steps back to back (checked one round at a time, the lead's step would run beside one
    step of each other workload, all started together, which the timed rounds never do, and
    a remedy measured so can lose in them). What it chose, and what the profile saw (per
    tenant: launches, their summed time alone, mean share). ``drive``: how the mode runs its
    rounds (``_threads`` or ``_one_thread``), here too."""
    drive(members, 1, scopes)           # (the tenants exist once they ran a step)
    ag.regulate(plan="search", tenants=[s.name for s in scopes])
    for _ in range(PROFILE_ROUNDS):
        drive(members, 1, scopes)
        ag.synchronize()
        if ag.regulation().state == "regulated":
            break
    checked = 0                         # (the high-priority tenant's checks under the plan)
    while checked < check_rounds and ag.regulation().checking:
        drive(members, block, scopes)
        checked += block
    ag.synchronize()
    for m in members:
        m.taken()
    return _plan_summary(ag, f"{PROFILE_ROUNDS} rounds")


def _plan_summary(ag: Any, after: str) -> dict[str, Any]:
    """What regulation chose and what its profile saw (per tenant: launches, their summed
    time alone, mean share); ``after``: how long it was given, for a missing plan."""
    state = ag.regulation()
    if state.plan is None:
        return {"plan": f"no plan after {after} ({state.state})"}
    plan = state.plan
    # (``checking``: the check's stage still under way as the timed rounds begin, "" if none;
    # ``measured``: each stage's score, the largest of the tenants' slowdowns and more;
    # ``pace``: each stage's, the tenants' work a second in seconds of their steps alone;
    # ``alone_ms``: each tenant's latency alone those slowdowns are over (measured, else
    # modelled);
    # ``modelled_score``: the search's objective for the tenants' own settings and for the
    # plan, as the model saw them; ``pairs``: the launches profiled side by side, in ms: each
    # alone, then each one's end side by side)
    return {"plan": plan.describe(), "checking": state.checking, "search_s": plan.search_s,
            "modelled_score": [o.score if o is not None else None
                               for o in (plan.before, plan.after_outcome)],
            "pairs": [[p.kernel, p.other_kernel, p.alone_s * 1e3, p.other_alone_s * 1e3,
                       p.together_s * 1e3, p.other_together_s * 1e3] for p in plan.pairs],
            "modelled": plan.modelled,
            "checked_ms": {name: [v * 1e3 for v in pair] for name, pair in state.checked.items()},
            "measured": dict(state.measured), "pace": dict(state.pace),
            "alone_ms": {name: v * 1e3 for name, v in state.alone.items()},
            "profile": {p.name: {"launches": len(p.ops),
                                 "alone_ms": sum(o.seconds for o in p.ops) * 1e3,
                                 "mean_share": statistics.fmean(o.share for o in p.ops)}
                        for p in plan.profile}}


def _ranked(ag: Any, mix: tuple[str, ...], suffix: str, exclusive: bool = False,
            sms: int | None = None, priority: bool = True) -> list[Any]:
    """A tenant per workload, named ``workload-suffix``, the first one's with priority high if
    ``priority`` (and ``exclusive``), each on ``sms`` SMs of its own if given."""
    return [ag.tenant(f"{name}-{suffix}", priority="high" if priority and i == 0 else "normal",
                      exclusive=exclusive and i == 0, sms=sms)
            for i, name in enumerate(mix)]


def _share(ag: Any, tenants: int) -> int:
    """An equal share of the device's SMs for each of ``tenants`` partitions, in whole groups
    (``asyncgpu.core.partitions.GRAIN``)."""
    from asyncgpu.core.partitions import GRAIN
    from asyncgpu.runtime.current import current_runtime
    sms = getattr(current_runtime().backend, "sm_count", 132)
    return max(GRAIN, sms // tenants // GRAIN * GRAIN)


def _summary(latencies: list[float]) -> dict[str, float]:
    return {"p50_ms": _quantile(latencies, 0.5) * 1e3, "p99_ms": _quantile(latencies, 0.99) * 1e3,
            "mean_ms": statistics.fmean(latencies) * 1e3}


#: ``measure_served``'s modes, in the order they run (``exclusive`` last: see the docstring)
SERVED_MODES = ("threads", "tenants", "regulated", "exclusive")


def measure_served(ag: Any, scale: str = "small", steps: int = 40, warmup: int = 2,
                   mix: tuple[str, ...] = MIX, period: float = 2.0, block: int = 256,
                   num_blocks: int = 2, recorded: bool = False) -> dict[str, Any]:
    """The first workload of ``mix`` as a service whose ``steps`` steps arrive every
    ``period`` times its median step alone, the others running steps back to back (see the
    module docstring). Per mode: the service's latency summary, and each other workload's
    steps per second and its fraction of its rate alone."""
    with _warm_members(ag, mix, scale, block, num_blocks, recorded, warmup) as members:
        return _measure_served(ag, members, mix, steps, period)


def _measure_served(ag: Any, members: list[_Member], mix: tuple[str, ...], steps: int,
                    period: float) -> dict[str, Any]:
    service, others = members[0], members[1:]
    rates = {}
    for m in members:
        whole = []
        for _ in range(max(5, min(steps, 20))):
            t0 = time.perf_counter()
            m.step(True)
            whole.append(time.perf_counter() - t0)
        rates[m.name] = 1.0 / statistics.median(whole)
        m.taken()
    interval = period / rates[service.name]

    def serve(scope: Any, count: int = steps) -> None:
        """The service's ``count`` steps, each at its arrival time (in ``scope``, if given)."""
        start = time.perf_counter()
        for i in range(count):
            delay = start + i * interval - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            if scope is None:
                service.step(True)
            else:
                with scope:
                    service.step(True)

    def run(scopes: list[Any] | None, count: int = steps) -> dict[str, Any]:
        stop = threading.Event()
        done = [0] * len(others)
        errors: list[BaseException] = []

        def loop(i: int) -> None:
            try:
                while not stop.is_set():
                    if scopes is None:
                        others[i].step(False)
                    else:
                        with scopes[i + 1]:
                            others[i].step(False)
                    done[i] += 1
            except BaseException as exc:  # noqa: BLE001 - raised on the main thread below
                errors.append(exc)

        threads = [threading.Thread(target=loop, args=(i,)) for i in range(len(others))]
        for t in threads:
            t.start()
        t0 = time.perf_counter()
        try:
            serve(None if scopes is None else scopes[0], count)
        finally:
            elapsed = time.perf_counter() - t0
            stop.set()
            for t in threads:
                t.join()
        if errors:
            raise errors[0]
        ag.synchronize()
        for m in others:
            m.taken()
        return {"service": _summary(service.taken()),
                "others": {m.name: {"steps_per_s": n / elapsed,
                                    "of_alone": n / elapsed / rates[m.name]}
                           for m, n in zip(others, done)}}

    alone = {}
    serve(None)
    alone["alone"] = _summary(service.taken())
    rows = {}
    for mode in SERVED_MODES:
        scopes = None if mode == "threads" else _ranked(
            ag, mix, "served-" + mode, exclusive=mode == "exclusive")
        if scopes is not None:
            # (one untimed step each: a tenant's first step makes its streams)
            for m, scope in zip(members, scopes):
                with scope:
                    m.step(False)
            ag.synchronize()
        plan = None
        if mode == "regulated":
            ag.regulate(plan="search", tenants=[s.name for s in scopes])
            for _ in range(SERVED_CHECK_RUNS):
                state = ag.regulation()
                if state.state == "regulated" and not state.checking:
                    break
                run(scopes, CHECK_RUN)
            plan = _plan_summary(ag, f"{SERVED_CHECK_RUNS} runs")
        rows[mode] = run(scopes)
        if plan is not None:
            rows[mode]["plan"] = plan
            ag.regulate(plan="off")
    serve(scopes[0])            # (alone again, in the exclusive tenant: never held)
    alone["alone, exclusive"] = _summary(service.taken())
    return {"mix": list(mix), "service": mix[0], "period": period, "interval_ms":
            interval * 1e3, "steps": steps, "alone": alone, "rows": rows,
            "rates_alone": rates}


__all__ = ["MIX", "MODES", "SERVED_MODES", "WORKLOADS", "balanced", "measure", "measure_served"]
