#!/usr/bin/env bash
# One GPU session (device tool): machine info, GPU tests, micro-benchmarks; everything under $OUT.
# usage: tools/gpu_session.sh [bench args...]   (extra args: one more `asyncgpu bench` run)
set -u
export PYTHONPATH=.${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
python3 setup.py -q build_ext --inplace 2>&1 | tee "$OUT/build.log"   # the compiled launch path (Cython)
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  python3 -c "import cupy, numba, numpy; print('cupy', cupy.__version__, 'numba', numba.__version__, 'numpy', numpy.__version__)"
} > "$OUT/machine.txt" 2>&1
python3 -m pytest -m gpu -q -p no:cacheprovider --timeout 300 -W ignore 2>&1 | tee "$OUT/pytest_gpu.log" | tail -25
python3 -W ignore -m asyncgpu bench overlap --json "$OUT/overlap.json" 2>&1 | tail -3
python3 -W ignore -m asyncgpu bench overhead --json "$OUT/overhead.json" 2>&1 | tee "$OUT/overhead.txt" | tail -60
if [ $# -gt 0 ]; then
  python3 -W ignore -m asyncgpu bench "$@" 2>&1 | tee "$OUT/bench.txt"
fi
