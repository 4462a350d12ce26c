"""tools/soak.py on sim: a short soak gives no mismatch and no checker report, with bounded
nodes, events, streams and pool memory; a planted bug makes it report."""

from __future__ import annotations

import os
import sys

import pytest

from asyncgpu.testing.mutants import planted

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "tools"))
from soak import main, soak  # noqa: E402


@pytest.mark.parametrize("strategy", ["random", "starve"])
def test_soak_on_sim_matches_the_oracle_with_bounded_resources(strategy):
    report = soak("sim", launches=2000, check_every=100, seed=1, sim_strategy=strategy)
    counts, peaks = report["counts"], report["peaks"]
    assert counts["launches"] >= 2000
    assert counts["mismatches"] == 0 and counts["checker_reports"] == 0, report["first_errors"]
    assert counts["checks"] >= 20 and counts["library_calls"] > 0 and counts["temporaries"] > 0
    assert counts["host_writes"] + counts["host_reads"] > 0
    assert peaks["streams_created"] <= 32                  # max_streams
    assert peaks["events_created"] <= 400                  # recycled, not one per launch
    assert peaks["inflight_nodes"] <= 200
    assert peaks["pool_bytes"] <= 64 * 1024                 # temporaries are reused


@pytest.mark.pure
def test_soak_reports_a_planted_bug():
    with planted("drop_war"):
        report = soak("sim", launches=600, check_every=50, seed=2)
    assert report["counts"]["mismatches"] + report["counts"]["checker_reports"] > 0


def test_soak_command_line(tmp_path, capsys):
    out = tmp_path / "soak.json"
    assert main(["--backend", "sim", "--launches", "300", "--check-every", "50",
                 "--json", str(out)]) == 0
    assert '"mismatches": 0' in out.read_text()
