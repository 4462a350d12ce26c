"""Markdown tables (and a Figure-7 style plot) from `asyncgpu bench --json` files.

usage: python3 tools/report.py [--plot PNG] [--run KEY] RESULT.json [RESULT.json ...]

Prints one table of medians and ratios (with the physical bounds) and, where the run traced
iterations (--metrics), one table of overlap metrics; several files are merged (e.g. a suite run
split over several device calls). A file that holds several runs under keys (``{"1": run,
"2": run}``, as ``docs/data/h100_small.json`` does) is read for the run ``--run`` names, or for
every run when it names none.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.harness import Result, geomean, plot  # noqa: E402

MODES = ("serial", "parallel", "handopt", "cudagraph", "recorded", "recorded_static")


def _ms(v: float | None) -> str:
    return "n/a" if v is None else f"{v * 1e3:.2f}"


def _x(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.2f}"


def _runs(doc: dict, run: str | None, name: str) -> list[dict]:
    """The bench results in ``doc``: itself, or the runs it holds under keys."""
    if "summary" in doc:
        return [doc]
    if run is not None:
        if run not in doc:
            raise SystemExit(f"{name} has no run {run!r}; it has {sorted(doc)}")
        return [doc[run]]
    return [doc[k] for k in sorted(doc)]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("files", nargs="+")
    p.add_argument("--plot", default=None)
    p.add_argument("--run", default=None, help="the run to read from a file of several runs")
    args = p.parse_args()
    rows, results = [], []
    for f in args.files:
        for doc in _runs(json.loads(Path(f).read_text()), args.run, f):
            rows += doc["summary"]
            for r in doc["results"]:
                results.append(Result(r["workload"], r["scale"], r["inputs"], r["block"],
                                      r["num_blocks"], r["mode"], r["ok"], r["message"],
                                      r["times_s"]))
    print("| workload | block | " + " | ".join(f"{m} ms" for m in MODES)
          + " | parallel/serial | parallel/handopt | transfer bound ms | compute bound ms"
          " | parallel/bound | check |")
    print("|---" * (len(MODES) + 8) + "|")
    for r in rows:
        b = r.get("bounds") or {}
        print(f"| {r['workload']} | {r['block']} | "
              + " | ".join(_ms(r.get(m)) for m in MODES)
              + f" | {_x(r.get('speedup'))} | {_x(r.get('vs_handopt'))} | "
              f"{_ms(b.get('transfer_bound_s'))} | {_ms(b.get('compute_bound_s'))} | "
              f"{_x(b.get('parallel_over_bound'))} | {'PASS' if r['ok'] else 'FAIL'} |")
    print(f"\ngeometric mean parallel/serial: {geomean([r.get('speedup') for r in rows]):.3f}")
    if any(r.get("metrics") for r in rows):
        print("\n| workload | block | mode | CT | TC | CC | TOT |\n|---|---|---|---|---|---|---|")
        for r in rows:
            for mode, m in (r.get("metrics") or {}).items():
                print(f"| {r['workload']} | {r['block']} | {mode} | "
                      + " | ".join(f"{m[k]:.2f}" for k in ("CT", "TC", "CC", "TOT")) + " |")
    if args.plot:
        plot(args.plot, results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
