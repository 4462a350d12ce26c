#!/usr/bin/env bash
# Stop 21's GPU session (device tool): the GPU tests, RUNS overhead runs, replay, INCEPTION, the
# small suite with single_node_graphs on and off in alternating processes (PAIRS pairs), and
# with HOST_ROUNDS > 0 the host-time A/B of the same option (tools/ab_host.py); under $OUT.
# usage: [RUNS=3] [PAIRS=2] [HOST_ROUNDS=0] [FIRST=1] tools/gpu_stop21.sh
set -u
export PYTHONPATH=.${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
OFF=ASYNCGPU_SINGLE_NODE_GRAPHS=0
python3 tools/build_speedups.py > /dev/null 2>&1 || echo "build_speedups failed"
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -m pytest -m gpu -q -p no:cacheprovider -W ignore 2>&1 | tail -3; } > "$OUT/gpu_tests.txt"
cat "$OUT/gpu_tests.txt"
first=${FIRST:-1}
for i in $(seq "$first" $((first + ${RUNS:-3} - 1))); do
  python3 -W ignore -m asyncgpu bench overhead --json "$OUT/overhead_$i.json" 2>&1 \
    | grep -E "ratios: (cuda_c|no_lanes)|flat: ratio|numba_independent_3args " | head -6
done
if [ "${PAIRS:-2}" -gt 0 ]; then
  python3 -W ignore -m asyncgpu bench replay --json "$OUT/replay.json" 2>&1 | tail -12
  python3 -W ignore -m asyncgpu bench inception --scale small --json "$OUT/inception.json" 2>&1 \
    | tail -8
  bash tools/gpu_ab_suite.sh . "${PAIRS:-2}" "$OFF" 2>&1 | tail -4
fi
if [ "${HOST_ROUNDS:-0}" -gt 0 ]; then
  python3 -W ignore tools/ab_host.py . "$HOST_ROUNDS" all "$OFF" > "$OUT/ab_lanes.json"
  python3 - "$OUT/ab_lanes.json" <<'PY'
import json, sys
for k, v in json.load(open(sys.argv[1]))["summary"].items():
    print(k, {a: round(b, 3) if isinstance(b, float) else b for a, b in v.items()})
PY
fi
