#!/usr/bin/env bash
# Stop 21's second GPU batch: three more overhead runs, and single_node_graphs on against off
# in alternating processes (tools/ab_host.py: eager launches, replays, launch-then-read).
set -u
export PYTHONPATH=.${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
python3 tools/build_speedups.py > /dev/null 2>&1 || echo "build_speedups failed"
for i in 4 5 6; do
  python3 -W ignore -m asyncgpu bench overhead --json "$OUT/overhead_$i.json" 2>&1 \
    | grep -E "ratios: (cuda_c|no_lanes)|flat: ratio|numba_independent_3args " | head -6
done
python3 -W ignore tools/ab_host.py . 6 all ASYNCGPU_SINGLE_NODE_GRAPHS=0 > "$OUT/ab_lanes.json"
python3 - "$OUT/ab_lanes.json" <<'PY'
import json, sys
for k, v in json.load(open(sys.argv[1]))["summary"].items():
    print(k, {a: round(b, 3) if isinstance(b, float) else b for a, b in v.items()})
PY
