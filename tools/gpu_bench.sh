#!/usr/bin/env bash
# GPU tests and one scale of the suite (device tool); logs and JSON under $OUT.
# usage: tools/gpu_bench.sh SCALE [more bench args]
set -u
export PYTHONPATH=.${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
scale=$1; shift
if [ "${SKIP_TESTS:-0}" != 1 ]; then
  python3 -m pytest -m gpu -q -p no:cacheprovider --timeout 300 2>&1 | tail -3
fi
python3 -W ignore -m asyncgpu bench all --scale "$scale" --json "$OUT/bench_$scale.json" \
  --plot "$OUT/bench_$scale.png" "$@" 2>&1 | tee "$OUT/bench_$scale.txt"
