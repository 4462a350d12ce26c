"""The ``cuda`` backend over several devices, run over the stand-in CuPy (``tools/fakecupy``):
its routing, the device it leaves current, and the happens-before checker over it. The
results of kernels are the GPU tests' (tests/gpu/test_gpu_multi_device.py)."""

from __future__ import annotations

from stand_in import run

PROGRAM = """
import numpy as np
import cupy
import asyncgpu as ag
from benchmarks import replay

with ag.configure(backend="cuda", devices=2, debug_hb={debug_hb}):
    inc = ag.cuda_kernel(replay.INC, "inc")
    xs = []
    for c in range(4):
        with ag.device(c % 2):
            xs.append(ag.zeros(1024, np.float32))
    cupy.cuda.runtime.setDevice(3)          # the program's own CuPy device
    for i in range(16):
        inc[1, 32](xs[i % 4], 32)
        assert cupy.cuda.runtime.getDevice() == 3, i
    float(xs[1][0])
    assert cupy.cuda.runtime.getDevice() == 3
    ag.synchronize()
    print(sorted(ag.statistics().placed.items()))
"""


def test_launches_on_several_gpus_leave_the_programs_device_current():
    assert run(PROGRAM.format(debug_hb=False)).split("\n")[-2] == "[(0, 8), (1, 8)]"


def test_the_checker_follows_launches_on_several_gpus():
    assert run(PROGRAM.format(debug_hb=True)).split("\n")[-2] == "[(0, 8), (1, 8)]"
