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

Empty denominators give ``nan`` (no kernel: CT and CC are undefined). Plain Python, no NumPy.
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


def _covered_by_others(items: Sequence[Interval], others: Sequence[Interval] = ()) -> float:
    """Sum over ``items`` of the part covered by the union of the *other* items and ``others``.

    A sweep: for item i, the union of everything except i. Done per item with the item left
    out, which is quadratic; timelines have at most a few thousand intervals.
    """
    total = 0.0
    for i, iv in enumerate(items):
        rest = union([*items[:i], *items[i + 1:], *others])
        total += covered(iv, rest)
    return total


def _length(intervals: Iterable[Interval]) -> float:
    return sum(max(0.0, hi - lo) for lo, hi in intervals)


def _ratio(num: float, den: float) -> float:
    return num / den if den > 0 else math.nan


def overlap(computations: Iterable[Interval], transfers: Iterable[Interval]) -> dict[str, float]:
    """``{"CT", "TC", "CC", "TOT"}`` of a timeline (see the module docstring).

    Parameters
    ----------
    computations, transfers:
        ``(start, end)`` pairs in any unit (the same for both); order does not matter.
    """
    comp = [(float(a), float(b)) for a, b in computations if b > a]
    xfer = [(float(a), float(b)) for a, b in transfers if b > a]
    c_total, t_total = _length(comp), _length(xfer)
    t_union, c_union = union(xfer), union(comp)
    ct = sum(covered(c, t_union) for c in comp)
    tc = sum(covered(t, c_union) for t in xfer)
    cc = _covered_by_others(comp)
    tot = _covered_by_others(comp + xfer)
    return {
        "CT": _ratio(ct, c_total),
        "TC": _ratio(tc, t_total),
        "CC": _ratio(cc, c_total),
        "TOT": _ratio(tot, c_total + t_total),
    }
