"""The compiled ``Kernel.bind`` (``asyncgpu/csrc/binding.c``) against the Python one
(``asyncgpu.runtime.kernel.PythonBinding``): random argument lists, good and bad, for a typed CUDA C
kernel and an untyped Numba kernel give the same array arguments and values, or the same
error."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from asyncgpu.core import compiled as _compiled
from asyncgpu.runtime.kernel import PythonBinding
from asyncgpu.runtime.current import current_runtime

pytestmark = pytest.mark.skipif(_compiled.speedups is None,
                                reason="asyncgpu._speedups is not built")

TYPED = """extern "C" __global__ void k(const float* x, float* y, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i];
}"""

CHOICES = ["f32", "f32_2", "f64", "strided", "freed", "numpy", "int", "big_int", "neg_int",
           "float", "nan", "np_f32", "np_i64", "bool", "complex", "str", "none", "f32_view",
           "foreign"]


def _make(ag, what, freed, foreign):
    if what == "f32":
        return ag.ones(8, np.float32)
    if what == "f32_2":
        return ag.zeros((2, 4), np.float32)
    if what == "f64":
        return ag.ones(8, np.float64)
    if what == "strided":
        return ag.ones(16, np.float32)[::2]
    if what == "f32_view":
        return ag.ones(16, np.float32)[4:12]
    if what == "freed":
        return freed
    if what == "foreign":
        return foreign
    return {"numpy": np.ones(8, np.float32), "int": 7, "big_int": 1 << 40, "neg_int": -3,
            "float": 2.5, "nan": float("nan"), "np_f32": np.float32(1.5),
            "np_i64": np.int64(3), "bool": True, "complex": 1 + 2j, "str": "x",
            "none": None}[what]


def _outcome(bind, kernel, rt, args):
    try:
        arrays, values = bind(kernel, rt, args, "site.py:1")
    except Exception as exc:  # noqa: BLE001 (any error: the one a user would see)
        return ("error", type(exc), str(exc))
    fields = [(a.index, a.param, a.array is args[a.index], a.read, a.write, a.key, a.alloc,
               a.lo, a.hi, a.label, type(a)) for a in arrays]
    return ("ok", fields, [(type(v), repr(v), v is args[i]) for i, v in enumerate(values)])


@settings(max_examples=1000, deadline=None)
@given(typed=st.booleans(),
       picks=st.lists(st.sampled_from(CHOICES), min_size=3, max_size=5).map(tuple)
       | st.permutations(CHOICES).map(lambda c: tuple(c[:4])))
def test_compiled_bind_matches_python(typed, picks):
    import asyncgpu as ag

    with ag.configure(backend="sim", sim_seed=0):
        if typed:
            k = ag.cuda_kernel(TYPED, "k", sim=lambda x, y, a, n: None)
        else:
            @ag.kernel(const=["x"])
            def k(x, y, a, n):
                pass
        freed = ag.ones(8, np.float32)
        freed.free()
        with ag.configure(device=1):
            foreign = ag.ones(8, np.float32)    # another runtime's array (retired on exit)
        args = tuple(_make(ag, p, freed, foreign) for p in picks)
        rt = current_runtime()
        compiled_bind = type(k).__mro__[1].bind
        assert compiled_bind is not PythonBinding.bind
        assert _outcome(compiled_bind, k, rt, args) == _outcome(PythonBinding.bind, k, rt, args)
