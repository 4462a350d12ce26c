"""Tenants on the real ``cuda`` backend over the stand-in CuPy (``tools/fakecupy``): where
cuda-python cannot load a driver, a tenant still gets its streams (at the default priority
range) and its steps are measured."""

from __future__ import annotations

from stand_in import run

PROGRAM = """
import numpy as np
import asyncgpu as ag
from asyncgpu.runtime.current import current_runtime
from benchmarks import replay

with ag.configure(backend="cuda"):
    inc = ag.cuda_kernel(replay.INC, "inc")
    x = ag.zeros(32, np.float32)
    for _ in range(3):
        with ag.tenant("detector", priority="high"):
            inc[1, 32](x, 32)
        with ag.tenant("ranker"):
            inc[1, 32](x, 32)
    ag.synchronize()
    stats = ag.tenants()
    rt = current_runtime()
    levels = {t.name: t.stream_priority for t in rt.tenants}
    print(stats["detector"].steps, len(stats["detector"].latencies_s), stats["ranker"].steps,
          levels["detector"], levels["ranker"], float(x[0]))
"""


def test_tenants_run_and_are_measured_where_the_driver_gives_no_priority_range():
    steps, measured, ranker_steps, high, normal, value = run(PROGRAM).split()
    assert (int(steps), int(measured), int(ranker_steps)) == (3, 3, 3)
    # (the range every device since Kepler has: 0 the least urgent, -1 the most)
    assert (int(high), int(normal)) == (-1, 0)
    assert float(value) == 0.0      # (the stand-in's kernels do nothing)
