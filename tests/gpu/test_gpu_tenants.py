"""Tenants on the GPU: each tenant's streams carry its CUDA priority, results stay right when
tenants share data, and steps are timed on the device's clock."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

import asyncgpu as ag
from asyncgpu.runtime.current import current_runtime

pytestmark = pytest.mark.gpu


def twice(x, y, n):
    i = cuda.grid(1)
    if i < n:
        y[i] = 2.0 * x[i] + 1.0


def test_tenants_streams_carry_their_priority_and_shared_data_stays_ordered():
    with ag.configure(backend="cuda"):
        k = ag.kernel(const=["x"], out=["y"])(twice)
        n = 1 << 20
        x = ag.array(np.ones(n))
        y, z = ag.empty_like(x), ag.empty_like(x)
        for _ in range(5):
            with ag.tenant("gpu-detector", priority="high"):
                k[n // 256, 256](x, y, n)
            with ag.tenant("gpu-ranker"):
                k[n // 256, 256](y, z, n)          # reads the detector's output
        assert float(z.sum()) == 7.0 * n
        rt = current_runtime()
        least, greatest = rt.backend.stream_priorities()
        assert greatest < least                    # the device has priorities to give
        high = rt.tenant_index("gpu-detector", "high")
        normal = rt.tenant_index("gpu-ranker", "normal")
        priorities = {s.pool: s.handle.priority for s in rt.streams.streams}
        assert (priorities[high], priorities[normal]) == (greatest, least)
        ag.synchronize()
        stats = ag.tenants()
        assert (stats["gpu-detector"].steps, stats["gpu-detector"].pending) == (5, 0)
        assert all(0 < t < 1.0 for t in stats["gpu-ranker"].latencies_s)
