"""Profiling in pairs: two tenants' launches timed alone and side by side on the device.

The model
---------
GACER profiles operators alone and in pairs. The regulator (``asyncgpu.runtime.regulator``)
profiles every launch of the tenants' steps alone; then :func:`time_pairs` takes the kernels
of two tenants that the device model (``asyncgpu.core.device_model``) runs side by side
under the tenants' own settings, and times each pair's first launches in the profiled steps
with the backend's stage timer (``asyncgpu.runtime.stage_timing``): each launch alone, then
the two from one start, each launch's own end (a short launch slowed beside a long one still
ends first, which the pair's end would hide). The timer runs them on scratch copies of what
they write, so the program sees no effect. The result, a
:class:`~asyncgpu.core.plan.PairProfile` per pair, is what the model's ``pair_slowdowns``
fits.

Invariants: timing never fails the regulation (a failure is logged and the pairs timed so far
are kept); the longest pairs are timed first, within :data:`MOST_PAIRS` and
:data:`PAIR_BUDGET_S`.

Example::

    pairs = time_pairs(rt, profiles, [ops_a, ops_b], given)    # under the runtime's lock
"""

from __future__ import annotations

import logging
import time
from typing import Any

from ..core.device_model import side_by_side
from ..core.plan import PairProfile, TenantProfile
from .stage_timing import stage_timer

log = logging.getLogger("asyncgpu")

#: At most this many pairs, for at most this long (seconds of the host's clock), each pair's
#: shorter launch at least this long alone (seconds).
MOST_PAIRS = 48
PAIR_BUDGET_S = 2.0
PAIR_LEAST_S = 20e-6


def time_pairs(rt: Any, profiles: tuple[TenantProfile, ...], steps: list[list[Any]],
               given: dict[str, tuple[Any, Any]], stand_in: Any = None
               ) -> tuple[PairProfile, ...]:
    """Profile in pairs: the kernels of two tenants that run side by side in the model of
    the tenants' own settings, each pair's first launches in the profiled ``steps`` (one
    per profile: the regulator's rows of a step's launches, each ending with its
    ``TimedLaunch``, or None for a graph), timed alone and side by side on the device, each
    launch's end (the backend's stage timer: on scratch copies of what they write). Longest
    pairs first, at most :data:`MOST_PAIRS`, for at most :data:`PAIR_BUDGET_S`; pairs whose
    shorter launch takes under :data:`PAIR_LEAST_S` are left out (their side-by-side time is
    mostly the launches' own latency). None on several devices, or when the backend cannot time.
    ``stand_in`` (a test's, ``asyncgpu.testing.regulation``): a pair's times from its kernels'
    names and the times measured."""
    if len(profiles) < 2 or rt.placement is not None:
        return ()
    first: dict[tuple[str, str], tuple[Any, float]] = {}
    for profile, ops in zip(profiles, steps):
        for op, row in zip(profile.ops, ops):
            if row[-1] is not None:
                first.setdefault((profile.name, op.kernel), (row[-1], op.seconds))
    chosen: dict[tuple[str, str, str, str], float] = {}
    splits = {name: own[0] or {} for name, own in given.items()}
    after = {name: own[1] or {} for name, own in given.items()}
    for t1, k1, t2, k2 in side_by_side(profiles, splits, after):
        a, b = (profiles[t1].name, k1), (profiles[t2].name, k2)
        if a < b and a in first and b in first:
            shorter = min(first[a][1], first[b][1])
            if shorter >= PAIR_LEAST_S:
                chosen[a + b] = shorter
    order = sorted(chosen, key=lambda k: -chosen[k])[:MOST_PAIRS]
    if not order:
        return ()
    launches: list[Any] = []
    number: dict[tuple[str, str], int] = {}
    for key in order:
        for name in (key[:2], key[2:]):
            if name not in number:
                number[name] = len(launches)
                launches.append(first[name][0])
    pairs = []
    began = time.perf_counter()
    with stage_timer(rt, rt.backend, launches, measure=True) as timer:
        if timer is None:
            return ()
        try:
            alone = [timer.time([[v]]) for v in range(len(launches))]
            for key in order:
                if time.perf_counter() - began > PAIR_BUDGET_S:
                    break
                v, w = number[key[:2]], number[key[2:]]
                times = (alone[v], alone[w], *timer.time_groups([[v], [w]]))
                if stand_in is not None:
                    times = stand_in(key[1], key[3], *times)
                pairs.append(PairProfile(*key, *times))
        except Exception as exc:  # noqa: BLE001 - pairs only refine the model
            log.warning("asyncgpu: regulation could not time launches side by side (%s); "
                        "the plan is searched with %d pairs", exc, len(pairs))
    log.info("asyncgpu: regulation profiled %d pairs of launches side by side in %.3f s "
             "(each launch's end side by side over its time alone): %s",
             len(pairs), time.perf_counter() - began,
             ", ".join(f"{p.kernel} {p.together_s / max(p.alone_s, 1e-9):.2f}x beside "
                       f"{p.other_kernel} "
                       f"{p.other_together_s / max(p.other_alone_s, 1e-9):.2f}x"
                       for p in pairs))
    return tuple(pairs)


__all__ = ["MOST_PAIRS", "PAIR_BUDGET_S", "PAIR_LEAST_S", "time_pairs"]
