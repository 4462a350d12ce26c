"""The GrCUDA paper's overlap metrics (CT, TC, CC, TOT) on hand-built timelines."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from asyncgpu.observe.metrics import covered, overlap, union


def test_union_merges_touching_and_nested_intervals():
    assert union([(5, 6), (0, 2), (1, 3), (3, 4), (7, 7)]) == [(0, 4), (5, 6)]
    assert covered((1, 10), [(0, 2), (5, 6), (9, 12)]) == 1 + 1 + 1


def test_kernel_half_covered_by_a_transfer():
    m = overlap([(0, 4)], [(2, 6)])
    assert m == {"CT": 0.5, "TC": 0.5, "CC": 0.0, "TOT": 0.5}


def test_serial_timeline_has_no_overlap():
    m = overlap([(0, 1), (1, 3), (5, 6)], [(3, 5), (6, 8)])
    assert m == {"CT": 0.0, "TC": 0.0, "CC": 0.0, "TOT": 0.0}


def test_two_identical_kernels_overlap_fully():
    m = overlap([(0, 2), (0, 2)], [])
    assert m["CC"] == 1.0 and m["TOT"] == 1.0
    assert math.isnan(m["CT"]) is False and m["CT"] == 0.0
    assert math.isnan(m["TC"])          # no transfer: undefined, not zero


def test_overlap_with_several_others_is_counted_once():
    # kernel A 0-10 overlaps B 2-6 and C 4-8: A's covered part is the union 2-8 (6 units),
    # B is covered 4 units by A (and 2 by C, inside A's), C is covered 4 units.
    m = overlap([(0, 10), (2, 6), (4, 8)], [])
    assert m["CC"] == pytest.approx((6 + 4 + 4) / (10 + 4 + 4))


def test_ml_like_timeline_from_figure_10():
    # transfer 0-4 on one stream; kernel K1 1-3 (covered 2 by the transfer), kernel K2 2-6
    # (covered 2 by the transfer, 1 by K1).
    m = overlap([(1, 3), (2, 6)], [(0, 4)])
    assert m["CT"] == pytest.approx((2 + 2) / (2 + 4))
    assert m["TC"] == pytest.approx(3 / 4)                 # transfer 1-4 covered by K1 u K2
    assert m["CC"] == pytest.approx((1 + 1) / (2 + 4))     # K1 and K2 share 2-3
    # TOT: K1 covered 2 (all of it), K2 covered 2-4 (2), transfer covered 1-4 (3)
    assert m["TOT"] == pytest.approx((2 + 2 + 3) / (2 + 4 + 4))


def test_tot_is_not_at_least_each_metric():
    # a short kernel fully inside a long transfer: CT = 1 but most time is not overlapped
    m = overlap([(4, 5)], [(0, 100)])
    assert m["CT"] == 1.0
    assert m["TOT"] == pytest.approx(2 / 101)


def reference(comp, xfer):
    """The paper's definitions, interval by interval (quadratic; independent of the sweep)."""
    def covered_by(items, others_of):
        return sum(covered(iv, union(others_of(i))) for i, iv in enumerate(items))

    c = [iv for iv in comp if iv[1] > iv[0]]
    t = [iv for iv in xfer if iv[1] > iv[0]]
    everything = c + t
    c_len, t_len = sum(b - a for a, b in c), sum(b - a for a, b in t)
    ratio = lambda x, d: x / d if d else math.nan  # noqa: E731
    return {
        "CT": ratio(covered_by(c, lambda i: t), c_len),
        "TC": ratio(covered_by(t, lambda i: c), t_len),
        "CC": ratio(covered_by(c, lambda i: c[:i] + c[i + 1:]), c_len),
        "TOT": ratio(covered_by(everything, lambda i: everything[:i] + everything[i + 1:]),
                     c_len + t_len),
    }


intervals = st.lists(
    st.tuples(st.integers(0, 50), st.integers(1, 20)).map(lambda t: (t[0], t[0] + t[1])),
    max_size=8)


@settings(max_examples=150, deadline=None)
@given(comp=intervals, xfer=intervals, shift=st.integers(-1000, 1000),
       factor=st.sampled_from([0.5, 2, 1000]))
def test_metric_properties(comp, xfer, shift, factor):
    m = overlap(comp, xfer)
    ref = reference(comp, xfer)
    for k, v in m.items():
        assert (math.isnan(v) and math.isnan(ref[k])) or v == pytest.approx(ref[k]), k
        assert math.isnan(v) or -1e-12 <= v <= 1 + 1e-12, (k, v)
    moved = overlap([(a + shift, b + shift) for a, b in comp],
                    [(a + shift, b + shift) for a, b in xfer])
    scaled = overlap([(a * factor, b * factor) for a, b in comp],
                     [(a * factor, b * factor) for a, b in xfer])
    for k in m:
        for other in (moved, scaled):
            assert (math.isnan(m[k]) and math.isnan(other[k])) or other[k] == pytest.approx(m[k])
    c = sum(b - a for a, b in comp)
    t = sum(b - a for a, b in xfer)
    if c and t:
        weighted = (c * max(m["CT"], m["CC"]) + t * m["TC"]) / (c + t)
        assert m["TOT"] >= weighted - 1e-9
    if c:
        # CT and CC each count part of the kernels' time; TOT counts it at most once
        assert m["TOT"] * (c + t) >= c * max(m["CT"], m["CC"]) - 1e-9
