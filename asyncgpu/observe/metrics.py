"""Overlap metrics of a timeline, as defined by the GrCUDA paper (Parravicini et al., §V-F).

The model
---------
A timeline is two lists of half-open device intervals ``(start, end)``: *computations*
(kernels) and *transfers* (host-to-device prefetches). The paper's four metrics are fractions
of total time, each in ``[0, 1]``:

``CT``  computation overlapped by transfer: the part of each kernel's interval covered by the
        union of all transfers, summed over kernels, over the total kernel time;
``TC``  transfer overlapped by computation: the same with the roles swapped;
``CC``  computation overlapped by other computation: the part of each kernel covered by the
        union of the *other* kernels, over the total kernel time;
``TOT`` any overlap: the part of every interval (kernel or transfer) covered by the union of
        all the other intervals, over the total time of all intervals. "If a computation or
        transfer overlaps more than one other, the overlap is counted once" is what taking the
        union gives.

Invariants (tested): every metric is in ``[0, 1]``; shifting or uniformly scaling all
intervals changes nothing; a serial timeline (no two intervals overlap) gives all zeros;
``TOT`` is at least the time-weighted mean ``(C * max(CT, CC) + T * TC) / (C + T)`` where ``C``
and ``T`` are the total kernel and transfer times (it is *not* at least each metric: a short
kernel fully covered by a long transfer has ``CT = 1`` but a small ``TOT``).

Example::

    overlap([(0, 4)], [(2, 6)])    # kernel 0-4, transfer 2-6: 2 units in common
    -> {"CT": 0.5, "TC": 0.5, "CC": 0.0, "TOT": 0.5}

Empty denominators give ``nan`` (no kernel: CT and CC are undefined). Plain Python, no NumPy;
one sweep over the sorted endpoints, so a whole-process trace is cheap.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

Interval = tuple[float, float]
METRICS = ("CT", "TC", "CC", "TOT")


def union(intervals: Iterable[Interval]) -> list[Interval]:
    """The union of intervals as sorted, disjoint intervals (empty ones dropped)."""
    out: list[Interval] = []
    for lo, hi in sorted(i for i in intervals if i[1] > i[0]):
        if out and lo <= out[-1][1]:
            if hi > out[-1][1]:
                out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))
    return out


def covered(interval: Interval, disjoint: Sequence[Interval]) -> float:
    """Length of ``interval`` covered by sorted disjoint intervals."""
    lo, hi = interval
    total = 0.0
    for a, b in disjoint:
        if b <= lo:
            continue
        if a >= hi:
            break
        total += min(b, hi) - max(a, lo)
    return total


def _length(intervals: Iterable[Interval]) -> float:
    return sum(max(0.0, hi - lo) for lo, hi in intervals)


def _ratio(num: float, den: float) -> float:
    # sums of many small products can round a hair above 1
    return min(1.0, num / den) if den > 0 else math.nan


def overlap(computations: Iterable[Interval], transfers: Iterable[Interval]) -> dict[str, float]:
    """``{"CT", "TC", "CC", "TOT"}`` of a timeline (see the module docstring).

    Parameters
    ----------
    computations, transfers:
        ``(start, end)`` pairs in any unit (the same for both); order does not matter.
    """
    comp = [(float(a), float(b)) for a, b in computations if b > a]
    xfer = [(float(a), float(b)) for a, b in transfers if b > a]
    # One sweep over the endpoints: between two consecutive endpoints the numbers of running
    # kernels (nc) and transfers (nt) are constant, and e.g. the kernel time covered by some
    # transfer grows by nc * dt wherever nt >= 1. O(n log n), so whole-process traces are fine.
    points = sorted([(a, 0, 1) for a, _ in comp] + [(b, 0, -1) for _, b in comp]
                    + [(a, 1, 1) for a, _ in xfer] + [(b, 1, -1) for _, b in xfer])
    ct = tc = cc = tot = 0.0
    nc = nt = 0
    last = points[0][0] if points else 0.0
    for t, kind, delta in points:
        dt = t - last
        if dt > 0:
            if nt and nc:
                ct += nc * dt
                tc += nt * dt
            if nc >= 2:
                cc += nc * dt
            if nc + nt >= 2:
                tot += (nc + nt) * dt
            last = t
        if kind == 0:
            nc += delta
        else:
            nt += delta
    c_total, t_total = _length(comp), _length(xfer)
    return {
        "CT": _ratio(ct, c_total),
        "TC": _ratio(tc, t_total),
        "CC": _ratio(cc, c_total),
        "TOT": _ratio(tot, c_total + t_total),
    }
