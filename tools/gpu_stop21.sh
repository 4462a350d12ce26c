#!/usr/bin/env bash
# Stop 21's GPU session (device tool): GPU tests, three overhead runs, replay, INCEPTION, and the
# small suite with single_node_graphs on and off in alternating processes; results under $OUT.
set -u
export PYTHONPATH=.${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
python3 tools/build_speedups.py > /dev/null 2>&1 || echo "build_speedups failed"
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -m pytest -m gpu -q -p no:cacheprovider -W ignore 2>&1 | tail -3; } > "$OUT/gpu_tests.txt"
cat "$OUT/gpu_tests.txt"
for i in 1 2 3; do
  python3 -W ignore -m asyncgpu bench overhead --json "$OUT/overhead_$i.json" 2>&1 \
    | grep -E "ratios: (cuda_c|no_lanes)|flat: ratio|numba_independent_3args " | head -6
done
python3 -W ignore -m asyncgpu bench replay --json "$OUT/replay.json" 2>&1 | tail -12
python3 -W ignore -m asyncgpu bench inception --scale small --json "$OUT/inception.json" 2>&1 | tail -8
bash tools/gpu_ab_suite.sh . "${PAIRS:-2}" ASYNCGPU_SINGLE_NODE_GRAPHS=0 2>&1 | tail -4
