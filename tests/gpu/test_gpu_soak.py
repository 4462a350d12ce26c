"""A short soak on the GPU (tools/soak.py): no mismatch, no checker report, bounded resources.
The full one (a million launches) is run by hand; see docs/reliability.md."""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "tools"))
from soak import soak  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("stress", [False, True])
def test_short_soak_on_gpu(stress):
    extra = {"stress": True, "stress_seed": 3} if stress else {}
    report = soak("cuda", launches=20_000 if not stress else 3_000, check_every=500, seed=3,
                  hb=True, **extra)
    counts, peaks = report["counts"], report["peaks"]
    assert counts["mismatches"] == 0 and counts["checker_reports"] == 0, report["first_errors"]
    assert peaks["streams_created"] <= 32
    assert peaks["events_created"] <= 2000
    assert peaks["pool_bytes"] <= 64 << 20
