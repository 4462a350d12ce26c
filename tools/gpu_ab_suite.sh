#!/usr/bin/env bash
# On the GPU machine (device tool): the small-scale suite and a host-read probe, run for an
# older tree (OLD, e.g. a `git archive` copied to the ignored .gpu_old/) and for this tree in
# alternating processes, so the host's changes of speed land on both; results under $OUT.
# usage: tools/gpu_ab_suite.sh OLD_TREE [pairs]        (one pair: old then new, then new then old)
set -u
OLD=$1; PAIRS=${2:-1}
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
run() {   # run TREE NAME
  (cd "$1" && PYTHONPATH=. python3 -W ignore -c "$PROBE") > "$OUT/probe_$2.json" 2>&1
  (cd "$1" && PYTHONPATH=. python3 -W ignore -m asyncgpu bench "${SUITE[@]}" \
     --json "$OUT/small_$2.json") > "$OUT/small_$2.txt" 2>&1
  tail -3 "$OUT/probe_$2.json"
}
here=$(pwd)
for p in $(seq 1 "$PAIRS"); do
  if [ $((p % 2)) -eq 1 ]; then run "$OLD" "old$p"; run "$here" "new$p"
  else run "$here" "new$p"; run "$OLD" "old$p"; fi
done
