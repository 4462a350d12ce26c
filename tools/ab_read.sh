#!/usr/bin/env bash
# A/B of host reads after a launch, on the GPU machine: OLD tree against this one, in alternating
# fresh processes (ROUNDS pairs); prints per-round us and the medians of the per-round ratios.
# usage: tools/ab_read.sh OLD_TREE [rounds]
set -u
OLD=$1; ROUNDS=${2:-10}
PROBE='
import json, statistics, time, numpy as np, asyncgpu as ag
from benchmarks import replay
inc = ag.cuda_kernel(replay.INC, "inc")
x = ag.zeros(32, np.float32)
def one(n):
    t0 = time.perf_counter()
    for _ in range(n):
        inc[1, 32](x, 32); float(x[0])
    return (time.perf_counter() - t0) / n * 1e6
def eight(n):
    t0 = time.perf_counter()
    for _ in range(n):
        inc[1, 32](x, 32)
        for i in range(8): float(x[i])
    return (time.perf_counter() - t0) / n * 1e6
one(200); eight(100)
print(json.dumps({"one": statistics.median(one(1000) for _ in range(5)),
                  "eight": statistics.median(eight(500) for _ in range(5))}))
'
here=$(pwd)
for r in $(seq 1 "$ROUNDS"); do
  if [ $((r % 2)) -eq 1 ]; then order="$OLD $here"; else order="$here $OLD"; fi
  for tree in $order; do
    name=new; [ "$tree" = "$OLD" ] && name=old
    echo "$r $name $(cd "$tree" && PYTHONPATH=. python3 -W ignore -c "$PROBE" | tail -1)"
  done
done | python3 -c '
import sys, json, statistics
rows = {}
for line in sys.stdin:
    r, name, js = line.split(" ", 2)
    rows.setdefault(r, {})[name] = json.loads(js)
    print(line.strip())
for k in ("one", "eight"):
    ratios = [v["new"][k] / v["old"][k] for v in rows.values() if "new" in v and "old" in v]
    print(k, "new/old median", round(statistics.median(ratios), 3), "rounds", [round(x, 2) for x in ratios])
'
