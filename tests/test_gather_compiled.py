"""The compiled gathering of a packed launch's values (``PackedTarget.numba_values`` and
``pointer_values`` in ``asyncgpu/csrc/gather.c``) against the Python one (``PythonGathering``):
the same flat values, or the same None (something not cached, or not what the target was
built for), on random arguments."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from asyncgpu.core import compiled as _compiled
from asyncgpu.runtime.kernel import ArrayArg
from asyncgpu.backends.cuda.kernels import PackedTarget, PythonGathering

pytestmark = pytest.mark.skipif(_compiled.speedups is None,
                                reason="asyncgpu._speedups is not built")

FIXTURE = [HealthCheck.function_scoped_fixture]     # (the sim runtime serves every example)
NUMBERS = [3, -(2**63), 2**63 - 1, 2**63, -(2**63) - 1, 2.5, True, np.float32(1), 1 + 1j]


class Plan:
    pass


class Launcher:
    grid3 = block3 = (1, 1, 1)
    shared = 0


def _target(key):
    class Backend:
        pass
    return PackedTarget(Backend(), key, Plan(), Launcher())


def _both(name, target, *args):
    compiled = getattr(type(target).__mro__[1], name)
    python = getattr(PythonGathering, name)
    assert compiled is not python
    return compiled(target, *args), python(target, *args)


arg = st.one_of(st.tuples(st.just("array"), st.sampled_from(["cached", "missing", "other"])),
                st.tuples(st.just("number"), st.sampled_from(range(len(NUMBERS)))))


@settings(max_examples=300, deadline=None, suppress_health_check=FIXTURE)
@given(args=st.lists(arg, max_size=5), key_shift=st.sampled_from([0, 0, 0, 1, -1]),
       mangle=st.booleans())
def test_numba_values_match(sim, args, key_shift, mangle):
    ag = sim
    values, key = [], []
    for kind, what in args:
        if kind == "array":
            a = ag.ones(4, np.float32)
            if what != "missing":
                a._cache["nbf"] = ("f4/1", (1, 2, 3, 4, 5, 16, 4))
            values.append(a)
            key.append("f4/1" if what != "other" else "f8/1")
        else:
            v = NUMBERS[what]
            values.append(v)
            t = type(v)
            key.append(t if t is not int or -(2**63) <= v <= 2**63 - 1 else "bigint")
    if key_shift > 0:
        key.append(int)
    elif key_shift < 0 and key:
        key.pop()
    if mangle and key:
        key[0] = float
    c, p = _both("numba_values", _target(key), values)
    assert c == p and type(c) is type(p)


@settings(max_examples=200, deadline=None, suppress_health_check=FIXTURE)
@given(cached=st.lists(st.booleans(), min_size=1, max_size=4), scalar=st.booleans())
def test_pointer_values_match(sim, cached, scalar):
    ag = sim
    values, arrays = [], []
    for i, has in enumerate(cached):
        a = ag.ones(4, np.float32)
        if has:
            a._cache["ptr"] = 4096 * (i + 1)
        values.append(a)
        arrays.append(ArrayArg(i, f"a{i}", a, True, True))
    if scalar:
        values.append(7)
    c, p = _both("pointer_values", _target(None), values, arrays)
    assert c == p and type(c) is type(p)
