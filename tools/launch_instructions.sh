#!/usr/bin/env bash
# Instructions per eager launch inside Runtime.launch_kernel (callgrind), for the overhead
# benchmark's independent and cross-stream 3-array CUDA C loops, on the real cuda backend over
# the stand-in CuPy (tools/fakecupy): a count that does not drift with the host's speed.
# usage: tools/launch_instructions.sh [python]     (needs valgrind; about a minute per loop)
set -eu
PY=${1:-$(python3 -c 'import sys; print(sys.executable)')}
cd "$(dirname "$0")/.."
DRIVER='
import sys
sys.path[:0] = ["tools", "tools/fakecupy"]
import host_paths
import asyncgpu as ag
from benchmarks import overhead
host_paths.stand_in_runtime()
k3 = ag.cuda_kernel(overhead._c_source(3), "k3")
loop = overhead._ag_cases(ag, k3, 3)[sys.argv[1]]
loop(3000)
loop(2000)
'
for loop in independent cross_stream; do
  out=$(mktemp)
  PYTHONPATH=. valgrind --tool=callgrind --callgrind-out-file="$out" \
    --toggle-collect=runtime_launch_kernel "$PY" -c "$DRIVER" "$loop" > /dev/null 2>&1
  total=$(callgrind_annotate "$out" | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
  launches=$([ "$loop" = independent ] && echo 5000 || echo 10000)   # (two per cross iteration)
  echo "$loop: $((total / launches)) instructions per launch"
  rm -f "$out"
done
