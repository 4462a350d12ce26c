"""Regulation on the GPU: the profile times each kernel alone on the device, the high-priority
tenant's steps are measured alone, the searched plan splits the long element-wise kernel of a
normal tenant beside a short high-priority one, and the regulated steps give the unregulated
results."""

from __future__ import annotations

import numpy as np
import pytest
from test_regulation import add_one, square

import asyncgpu as ag

pytestmark = pytest.mark.gpu


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

        step()
        ag.regulate(plan="search", tenants=[low.name, high.name])
        for _ in range(6):
            step()
            ag.synchronize()
            if ag.regulation().state == "regulated":
                break
        state = ag.regulation()
        assert state.state == "regulated"
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
