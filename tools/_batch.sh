#!/usr/bin/env bash
# Temporary: this session's GPU batch (deleted after use). usage: tools/_batch.sh 1|2
set -u
export PYTHONPATH=. PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B="python3 -W ignore -m asyncgpu bench"
if [ "$1" = 1 ]; then
  python3 -m pytest -m gpu -q -p no:cacheprovider --timeout 300 -W ignore > "$OUT/pytest_gpu.log" 2>&1
  tail -3 "$OUT/pytest_gpu.log"
  $B replay --json "$OUT/replay.json" > "$OUT/replay.txt" 2>&1
  $B replay --json "$OUT/replay2.json" > "$OUT/replay2.txt" 2>&1
  ASYNCGPU_GRAPH_LANE_COST_US=0 $B replay --json "$OUT/replay_nobudget.json" > "$OUT/replay_nobudget.txt" 2>&1
  $B inception --scale small --json "$OUT/inception.json" > "$OUT/inception.txt" 2>&1
else
  $B all --scale small --block-sizes 256 --modes parallel,cudagraph,recorded,recorded_static \
    --iterations 30 --warmup 3 --rounds 5 --json "$OUT/small.json" > "$OUT/small.txt" 2>&1
  $B overhead --json "$OUT/overhead.json" > "$OUT/overhead.txt" 2>&1
fi
case "$1" in 1|2) (cd "$OUT" && tar czf results.tgz *.json *.txt *.log 2>/dev/null);; esac
if [ "$1" = 3 ]; then
  $B all --scale small --block-sizes 256 --modes parallel,cudagraph,recorded,recorded_static \
    --iterations 30 --warmup 3 --rounds 5 --inputs resident --json "$OUT/small_resident.json" > "$OUT/small_resident.txt" 2>&1
  $B all --scale small --block-sizes 256 --modes parallel,cudagraph,recorded,recorded_static \
    --iterations 30 --warmup 3 --rounds 5 --json "$OUT/small2.json" > "$OUT/small2.txt" 2>&1
  $B all --scale medium --block-sizes 256 --modes parallel,cudagraph,recorded,recorded_static \
    --iterations 10 --warmup 2 --rounds 2 --json "$OUT/medium.json" > "$OUT/medium.txt" 2>&1
  (cd "$OUT" && tar czf results3.tgz small_resident.* small2.* medium.*)
fi
if [ "$1" = 4 ]; then
  python3 -m pytest -m gpu -q -p no:cacheprovider --timeout 300 -W ignore > "$OUT/pytest_gpu4.log" 2>&1
  tail -1 "$OUT/pytest_gpu4.log"
  $B replay --json "$OUT/replay4a.json" > /dev/null 2>&1
  $B replay --json "$OUT/replay4b.json" > /dev/null 2>&1
  $B all --scale small --block-sizes 256 --modes parallel,cudagraph,recorded,recorded_static \
    --iterations 30 --warmup 3 --rounds 5 --json "$OUT/small4.json" > "$OUT/small4.txt" 2>&1
  $B all --scale small --block-sizes 256 --modes parallel,cudagraph,recorded,recorded_static \
    --iterations 30 --warmup 3 --rounds 5 --inputs resident --json "$OUT/small4_resident.json" > "$OUT/small4_resident.txt" 2>&1
  $B overhead --json "$OUT/overhead4.json" > "$OUT/overhead4.txt" 2>&1
  (cd "$OUT" && tar czf results4.tgz pytest_gpu4.log replay4* small4* overhead4*)
fi
if [ "$1" = 5 ]; then
  python3 -m pytest -m gpu -q -p no:cacheprovider --timeout 300 -W ignore > "$OUT/pytest_gpu5.log" 2>&1
  tail -1 "$OUT/pytest_gpu5.log"
  $B replay --json "$OUT/replay5.json" > /dev/null 2>&1
  $B inception --scale small --json "$OUT/inception5.json" > /dev/null 2>&1
  $B all --scale small --block-sizes 256 --modes parallel,cudagraph,recorded,recorded_static \
    --iterations 30 --warmup 3 --rounds 5 --json "$OUT/small5.json" > "$OUT/small5.txt" 2>&1
  python3 -W ignore -m asyncgpu bench > "$OUT/main_job.txt" 2>&1; echo "main job rc=$?"
  (cd "$OUT" && tar czf results5.tgz pytest_gpu5.log replay5* inception5* small5* main_job.txt)
fi
