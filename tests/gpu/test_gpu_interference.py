"""The interference rule on the GPU: heavy launches that meet are tried side by side and in
sequence, timed on the device, judged, and whatever the verdict results equal the serial
run's."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

import asyncgpu as ag
from asyncgpu.runtime.current import current_runtime

pytestmark = pytest.mark.gpu


def accumulate(x, y, n):
    for i in range(cuda.grid(1), n, cuda.gridsize(1)):
        y[i] += x[i]


def gather(idx, x, y, n):
    for i in range(cuda.grid(1), n, cuda.gridsize(1)):
        y[i] += x[idx[i]]


@pytest.mark.parametrize("memory", ["explicit", "managed"])
def test_heavy_launches_are_tried_and_judged_and_each_adds_exactly_once(memory):
    n = 8 << 20                                  # 64 MiB read and written by each launch
    rng = np.random.default_rng(1)
    with ag.configure(backend="cuda", memory=memory):
        add = ag.kernel(const=["x"])(accumulate)
        pick = ag.kernel(const=["idx", "x"])(gather)
        idx = ag.array(rng.integers(0, n, n).astype(np.int32))
        x = ag.array(np.ones(n, np.float32))
        ys = [ag.zeros(n, np.float32) for _ in range(2)]
        for i in range(8):
            add[1024, 256](x, ys[0], n)
            pick[1024, 256](idx, x, ys[1], n)   # independent of the first: side by side?
            if i % 2:
                ag.synchronize()    # (a trial's launches complete; a side-by-side run that
                                    # did not overlap is run again at the next meeting)
        rule = current_runtime().interference
        assert rule is not None and rule.verdicts     # the pair was tried and judged
        np.testing.assert_array_equal(ys[0].numpy(), np.full(n, 8.0, np.float32))
        np.testing.assert_array_equal(ys[1].numpy(), np.full(n, 8.0, np.float32))
