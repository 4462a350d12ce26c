#!/usr/bin/env bash
# On the GPU machine (device tool): the small-scale suite and a host-read probe, run for an
# older tree (OLD, e.g. a `git archive` copied to the ignored .gpu_old/) and for this tree in
# alternating processes, so the host's changes of speed land on both; results under $OUT.
# usage: tools/gpu_ab_suite.sh OLD_TREE [pairs] [VAR=VALUE ...]
#   (one pair: old then new, then new then old; each VAR=VALUE is set for the old side only,
#   so `tools/gpu_ab_suite.sh . 2 ASYNCGPU_SINGLE_NODE_GRAPHS=0` compares one option in a tree)
set -u
OLD=$1; PAIRS=${2:-1}; shift; [ $# -gt 0 ] && shift; OLD_ENV=("$@")
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
SUITE=(all --scale small --block-sizes 256 --modes parallel,cudagraph,recorded,recorded_static
       --iterations 30 --warmup 3 --rounds 5 --no-bounds)
PROBE='
import json, statistics, time, numpy as np, asyncgpu as ag
from benchmarks import replay
inc = ag.cuda_kernel(replay.INC, "inc")
x = ag.zeros(32, np.float32)
def once(n):
    t0 = time.perf_counter()
    for _ in range(n):
        inc[1, 32](x, 32); float(x[0])
    return (time.perf_counter() - t0) / n * 1e6
once(200)
print(json.dumps({"launch_then_read_us": statistics.median(once(2000) for _ in range(7))}))
'
run() {   # run TREE NAME [VAR=VALUE ...]
  local tree=$1 name=$2; shift 2
  (cd "$tree" && env "$@" PYTHONPATH=. python3 -W ignore -c "$PROBE") > "$OUT/probe_$name.json" 2>&1
  (cd "$tree" && env "$@" PYTHONPATH=. python3 -W ignore -m asyncgpu bench "${SUITE[@]}" \
     --json "$OUT/small_$name.json") > "$OUT/small_$name.txt" 2>&1
  tail -3 "$OUT/probe_$name.json"
}
# (the device tool returns at most 8 files: the runs are folded into one at the end)
fold() {
  python3 - "$OUT" <<'PY'
import glob, json, math, os, sys
out = sys.argv[1]
runs = {}
for path in sorted(glob.glob(os.path.join(out, "small_*.json"))):
    name = os.path.basename(path)[6:-5]
    doc = json.load(open(path))
    probe = os.path.join(out, f"probe_{name}.json")
    try:
        doc["probe"] = json.loads(open(probe).read().strip().splitlines()[-1])
    except (OSError, ValueError, IndexError):
        doc["probe"] = None
    runs[name] = doc
    rows = doc["summary"]
    gm = math.exp(sum(math.log(r["recorded_vs_parallel"]) for r in rows) / len(rows))
    print(f"{name}: recorded vs parallel, geometric mean {gm:.3f}; probe {doc['probe']}")
json.dump(runs, open(os.path.join(out, "ab_suite.json"), "w"))
PY
  rm -f "$OUT"/small_*.json "$OUT"/small_*.txt "$OUT"/probe_*.json
}
here=$(pwd)
for tree in "$OLD" "$here"; do     # each tree's compiled launch path (an older tree's C twins)
  if [ -f "$tree/tools/build_speedups.py" ]; then (cd "$tree" && python3 tools/build_speedups.py > /dev/null)
  else (cd "$tree" && python3 setup.py -q build_ext --inplace > /dev/null); fi
done
for p in $(seq 1 "$PAIRS"); do
  if [ $((p % 2)) -eq 1 ]; then run "$OLD" "old$p" "${OLD_ENV[@]}"; run "$here" "new$p"
  else run "$here" "new$p"; run "$OLD" "old$p" "${OLD_ENV[@]}"; fi
done
fold
