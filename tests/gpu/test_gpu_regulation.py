"""Regulation on the GPU: the profile times each kernel alone on the device, the high-priority
tenant's steps are measured alone, the searched plan splits the long element-wise kernel of a
normal tenant beside a short high-priority one, and the regulated steps give the unregulated
results; two tenants' launches are timed side by side on scratch copies of what they write."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda
from test_regulation import add_one, square

import asyncgpu as ag

pytestmark = pytest.mark.gpu


def regulated(step, tenants):
    """Run ``step`` once, regulate ``tenants`` and step until the profile's plan is in force;
    the regulation's state then."""
    step()
    ag.regulate(plan="search", tenants=tenants)
    for _ in range(6):
        step()
        ag.synchronize()
        if ag.regulation().state == "regulated":
            break
    state = ag.regulation()
    assert state.state == "regulated"
    return state


@pytest.mark.parametrize("memory", ["explicit", "managed"])
def test_a_regulated_mix_profiles_on_the_device_and_gives_the_same_results(memory):
    with ag.configure(backend="cuda", memory=memory):
        big = ag.kernel(const=["x"], out=["y"], elementwise="n")(square)
        small = ag.kernel(const=["x"], out=["y"])(add_one)
        n = 1 << 26                                     # 512 MiB each way: about a millisecond
        host = np.random.default_rng(0).random(n)
        x, y = ag.array(host), ag.empty(n)
        u, v = ag.array(np.ones(1024)), ag.empty(1024)
        low = ag.tenant(f"gpu-low-{memory}")
        high = ag.tenant(f"gpu-high-{memory}", priority="high")

        def step():
            with low:
                big[132 * 8, 256](x, y, n)
            with high:
                small[4, 256](u, v, 1024)

        state = regulated(step, [low.name, high.name])
        profile = {p.name: p for p in state.plan.profile}
        (long_op,) = profile[low.name].ops
        (short_op,) = profile[high.name].ops
        assert long_op.seconds > 20 * short_op.seconds > 0     # timed on the device
        assert long_op.splittable and long_op.share == 1.0
        # first the high tenant's steps alone (its latency alone measured), then the plan
        assert state.checking == "alone" and state.plan.exclusive == (high.name,)
        for _ in range(60):
            if ag.regulation().checking != "alone":
                break
            step()
            ag.synchronize()
        state = ag.regulation()
        assert state.checking == "plan"
        assert state.plan.splits.get(low.name, {}).get("square", 1) > 1
        for _ in range(3):
            step()
        assert np.array_equal(y.numpy(), host * host)
        assert np.array_equal(v.numpy(), np.full(1024, 2.0))
        ag.regulate(plan="off")


def accumulate(x, y, n):
    for i in range(cuda.grid(1), n, cuda.gridsize(1)):
        y[i] += x[i]


@pytest.mark.parametrize("memory", ["explicit", "managed"])
def test_launches_are_profiled_in_pairs_on_the_device_without_touching_the_programs_arrays(
        memory):
    with ag.configure(backend="cuda", memory=memory):
        big = ag.kernel(const=["x"], out=["y"], elementwise="n")(square)
        acc = ag.kernel(const=["x"])(accumulate)
        n = 1 << 24                         # 128 MiB each way: a fraction of a millisecond
        host = (np.arange(n) % 7).astype(np.float64)
        x, y, z = ag.array(host), ag.empty(n), ag.zeros(n)
        first = ag.tenant(f"gpu-pair-a-{memory}")
        second = ag.tenant(f"gpu-pair-b-{memory}")
        steps = 0

        def step():     # (half the multiprocessors each: modelled side by side)
            nonlocal steps
            with first:
                big[66, 256](x, y, n)
            with second:
                acc[66, 256](x, z, n)
            steps += 1

        state = regulated(step, [first.name, second.name])
        (pair,) = state.plan.pairs
        assert {pair.kernel, pair.other_kernel} == {"square", "accumulate"}
        assert pair.alone_s > 0 and pair.other_alone_s > 0
        # (each launch's own end, from the pair's start: not before it could end alone, less
        # the timer's noise)
        assert pair.together_s > 0.8 * pair.alone_s
        assert pair.other_together_s > 0.8 * pair.other_alone_s
        step()
        # the timed launches ran on scratch copies: the accumulator saw each step once
        assert np.array_equal(z.numpy(), steps * host)
        assert np.array_equal(y.numpy(), host * host)
        ag.regulate(plan="off")
