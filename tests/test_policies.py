"""Stream policies: what each one decides, on a fan-out and on independent work.

Fan-out::

    w (writes x) --> r1 (reads x), r2 (reads x), r3 (reads x)

Every policy must give results equal to serial (``test_properties``); these tests pin down what
distinguishes them.
"""

from __future__ import annotations

import numpy as np
import pytest

SRC_W = 'extern "C" __global__ void w(float* x) { x[threadIdx.x] = 1.0f; }'
SRC_R = 'extern "C" __global__ void r(const float* x, float* y) { y[threadIdx.x] = x[threadIdx.x]; }'


def fan_out(ag):
    from asyncgpu.runtime.current import current_runtime
    from benchmarks.harness import KernelRecorder

    w = ag.cuda_kernel(SRC_W, "w", sim=lambda x: x.__setitem__(slice(None), 1.0))
    r = ag.cuda_kernel(SRC_R, "r", sim=lambda x, y: y.__setitem__(slice(None), x))
    x = ag.zeros(4, np.float32)
    ys = [ag.zeros(4, np.float32) for _ in range(3)]
    rec = KernelRecorder()
    with current_runtime().instrument(rec):
        w[1, 4](x)
        for y in ys:
            r[1, 4](x, y)
    assert all(y.numpy().tolist() == [1.0] * 4 for y in ys)
    return [n.stream.index for n in rec.nodes]


@pytest.mark.parametrize("policy,expected", [
    ({"parent_stream": "disjoint"}, lambda s: s[1] == s[0] and len(set(s[1:])) == 3),
    ({"parent_stream": "same-as-parent"}, lambda s: len(set(s)) == 1),
    ({"execution": "sync"}, lambda s: len(set(s)) == 1),
    ({"dependency": "no-const"}, lambda s: len(set(s)) == 1),   # readers now conflict: a chain
])
def test_fan_out_streams(policy, expected):
    import asyncgpu as ag

    with ag.configure(backend="sim", sim_seed=2, **policy):
        streams = fan_out(ag)
    assert expected(streams), streams


def test_reuse_hands_back_free_streams_and_always_new_does_not():
    import asyncgpu as ag
    from asyncgpu.runtime.current import current_runtime

    for policy, grows in (("reuse", False), ("always-new", True)):
        with ag.configure(backend="sim", sim_seed=4, new_stream=policy):
            w = ag.cuda_kernel(SRC_W, "w", sim=lambda x: x.__setitem__(slice(None), 1.0))
            xs = [ag.zeros(4, np.float32) for _ in range(3)]
            for x in xs:
                w[1, 4](x)
            ag.synchronize()
            before = len(current_runtime().streams.streams)
            for x in xs:
                w[1, 4](x)
            after = len(current_runtime().streams.streams)
        assert (after > before) == grows, (policy, before, after)


def test_max_streams_caps_the_pool():
    import asyncgpu as ag
    from asyncgpu.runtime.current import current_runtime

    with ag.configure(backend="sim", sim_seed=4, max_streams=3):
        w = ag.cuda_kernel(SRC_W, "w", sim=lambda x: x.__setitem__(slice(None), 1.0))
        xs = [ag.zeros(4, np.float32) for _ in range(10)]
        for x in xs:
            w[1, 4](x)
        assert len(current_runtime().streams.streams) == 3
        assert all(x.numpy().tolist() == [1.0] * 4 for x in xs)
