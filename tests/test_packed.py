"""The packed parameter buffers of the cuda backend, checked against C's struct layout on the CPU.

CUDA lays kernel parameters out like the fields of a C struct (each at its natural alignment);
``ctypes.Structure`` follows the same rules, so it is the oracle here.
"""

from __future__ import annotations

import ctypes
import struct
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from numba.core import types

from asyncgpu.runtime.signature import Param
from asyncgpu.backends.cuda.calls import CudaCalls
from asyncgpu.backends.cuda.packed import cuda_c_plan, numba_array_fields, numba_plan


class FakeDriver(CudaCalls):
    """Stands in for the backend's CUDA calls: keeps the kernels it was asked to launch, and
    the parameter buffer's bytes as the launch saw them."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []
        self.buffers: list[bytes] = []
        self.plan = None

    def launch_kernel(self, *args) -> None:
        self.calls.append(args)
        if self.plan is not None:
            self.buffers.append(ctypes.string_at(self.plan.buf_ptr, self.plan.size.value))


def _buffer(plan) -> bytes:
    return ctypes.string_at(ctypes.addressof(plan.buf), plan.size.value)


def _c_struct(fields: list[tuple[str, object]], values: list) -> bytes:
    """The C layout of the parameters, up to the end of the last one (no tail padding)."""
    cls = type("Params", (ctypes.Structure,), {"_fields_": fields})
    last = getattr(cls, fields[-1][0])
    return bytes(cls(*values))[: last.offset + last.size]


def test_cuda_c_parameters_follow_c_struct_layout():
    params = (
        Param("p", True, np.dtype(np.float32), True, "const float*"),
        Param("c", False, np.dtype(np.int8), False, "char"),
        Param("d", False, np.dtype(np.float64), False, "double"),
        Param("s", False, np.dtype(np.int16), False, "short"),
        Param("f", False, np.dtype(np.float32), False, "float"),
        Param("u", False, np.dtype(np.uint64), False, "unsigned long long"),
        Param("q", True, np.dtype(np.int32), False, "int*"),
        Param("b", False, np.dtype(np.bool_), False, "bool"),
        Param("i", False, np.dtype(np.int32), False, "int"),
    )
    driver = FakeDriver()
    plan = cuda_c_plan(0xABC, params, driver)
    values = (0x7F0000001000, np.int8(-5), 2.5, np.int16(-300), np.float32(1.5),
              np.uint64(2**63 + 7), 0x7F0000002000, np.bool_(True), np.int32(-9))
    plan.launch(values, (3, 2, 1), (128, 1, 1), 64, 0x55)
    expected = _c_struct(
        [("p", ctypes.c_uint64), ("c", ctypes.c_int8), ("d", ctypes.c_double),
         ("s", ctypes.c_int16), ("f", ctypes.c_float), ("u", ctypes.c_uint64),
         ("q", ctypes.c_uint64), ("b", ctypes.c_bool), ("i", ctypes.c_int32)],
        [0x7F0000001000, -5, 2.5, -300, 1.5, 2**63 + 7, 0x7F0000002000, True, -9],
    )
    assert _buffer(plan) == expected
    (handle, gx, gy, gz, bx, by, bz, shared, stream, extra), = driver.calls
    assert (handle, gx, gy, gz, bx, by, bz, shared, stream, extra) == (
        0xABC, 3, 2, 1, 128, 1, 1, 64, 0x55, plan.extra_ptr)
    markers = (ctypes.c_void_p * 5).from_address(extra)
    assert markers[0] == 1 and markers[1] == ctypes.addressof(plan.buf)
    assert markers[2] == 2 and ctypes.c_size_t.from_address(markers[3]).value == len(expected)
    assert markers[4] is None


def test_parameter_buffer_ends_at_the_last_parameter():
    params = (Param("p", True, np.dtype(np.float64), True, "const double*"),
              Param("n", False, np.dtype(np.int32), False, "int"))
    plan = cuda_c_plan(1, params, FakeDriver())
    assert plan.size.value == 12      # not sizeof(struct {double*; int;}) == 16


def test_cuda_c_complex_parameter_is_two_floats():
    params = (Param("z", False, np.dtype(np.complex64), False, "cuFloatComplex"),
              Param("n", False, np.dtype(np.int32), False, "int"))
    plan = cuda_c_plan(1, params, FakeDriver())
    plan.launch((np.complex64(1.5 - 2j), 7), (1, 1, 1), (1, 1, 1), 0, 0)
    assert _buffer(plan) == _c_struct(
        [("re", ctypes.c_float), ("im", ctypes.c_float), ("n", ctypes.c_int32)], [1.5, -2.0, 7])


def _fake_compiled(argument_types):
    cufunc = SimpleNamespace(handle=0x1234)
    return SimpleNamespace(argument_types=argument_types, debug=False, cooperative=False,
                           extensions=[],
                           _codelibrary=SimpleNamespace(get_cufunc=lambda: cufunc))


def test_numba_arrays_are_flattened_as_numba_passes_them():
    compiled = _fake_compiled([types.Array(types.float32, 2, "C"), types.int32,
                               types.float64, types.complex128, types.uint16])
    plan = numba_plan(compiled, FakeDriver())
    assert plan.handle == 0x1234
    array = SimpleNamespace(shape=(4, 5), strides=(20, 4), dtype=np.dtype(np.float32))
    fields = numba_array_fields(array, 0x7000)
    assert fields == (0, 0, 20, 4, 0x7000, 4, 5, 20, 4)
    plan.launch((*fields, -3, 0.25, 1 + 2j, 9), (1, 1, 1), (1, 1, 1), 0, 0)
    expected = _c_struct(
        [(f"a{i}", ctypes.c_int64) for i in range(9)]
        + [("i", ctypes.c_int32), ("d", ctypes.c_double), ("re", ctypes.c_double),
           ("im", ctypes.c_double), ("u", ctypes.c_uint16)],
        [*fields, -3, 0.25, 1.0, 2.0, 9],
    )
    assert _buffer(plan) == expected


def test_numba_argument_kinds_without_a_packed_layout_keep_numbas_launch():
    for ty in (types.boolean, types.float16, types.UniTuple(types.int32, 2)):
        assert numba_plan(_fake_compiled([types.int32, ty]), FakeDriver()) is None
    debug = _fake_compiled([types.int32])
    debug.debug = True
    assert numba_plan(debug, FakeDriver()) is None


def test_runtime_only_overhead_benchmark_runs_without_a_gpu():
    from benchmarks.overhead import runtime_only

    out = runtime_only(launches=400, repeats=2)
    assert set(out) == {"independent", "cross_stream_pair"}
    for v in out.values():
        assert 0 < v["p10_us"] <= v["median_us"] <= v["p90_us"]


def test_the_cuda_floor_is_the_sum_of_one_cross_stream_launchs_calls():
    from benchmarks.overhead import cuda_floor

    def c(us):
        return {"median_us": us}
    components = {"packed_cuLaunchKernel": c(5.0), "event_record": c(0.5),
                  "stream_wait_event": c(0.75), "event_query": c(0.25)}
    floor = cuda_floor(components, raw_us=6.0)
    assert floor == {"cuda_calls_cross_stream_us": 6.5, "python_budget_at_2x_raw_us": 5.5}


# -- the compiled launch packs the buffer itself: the same bytes, or struct's own error --------
_CODES = {"b": (-(1 << 7), (1 << 7) - 1), "B": (0, (1 << 8) - 1), "h": (-(1 << 15), (1 << 15) - 1),
          "H": (0, (1 << 16) - 1), "i": (-(1 << 31), (1 << 31) - 1), "I": (0, (1 << 32) - 1),
          "q": (-(1 << 63), (1 << 63) - 1), "Q": (0, (1 << 64) - 1)}


def _packed_call(fmt: str, values: tuple) -> bytes:
    """Launch ``values`` through a PackedLaunch of a plan of ``fmt``; the buffer's bytes as
    the driver saw them."""
    from asyncgpu.backends.cuda.backend import cache_keys
    from asyncgpu.backends.cuda.kernels import PackedTarget, packed_launch
    from asyncgpu.backends.cuda.packed import PackedPlan

    driver = FakeDriver()
    plan = driver.plan = PackedPlan(0xABC, fmt, (), driver)
    owner = type("Backend", (), {"cache_keys": cache_keys(0)})()   # (stands for the backend)
    target = PackedTarget(owner, None, plan,
                          SimpleNamespace(grid3=(1, 1, 1), block3=(32, 1, 1), shared=0,
                                          kernel=SimpleNamespace(name="k")))
    packed_launch(target, values)(SimpleNamespace(ptr=0x55))
    return driver.buffers[0]


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])   # (it only switches)
@given(st.data())
def test_the_launch_packs_what_struct_packs(data):
    fmt = data.draw(st.text(alphabet="bBhHiIqQfd", min_size=1, max_size=12))
    values = []
    for code in fmt:
        if code in "fd":
            v = data.draw(st.floats(width=32 if code == "f" else 64))
        else:
            v = data.draw(st.integers(*_CODES[code]))
        if data.draw(st.booleans()):     # as a NumPy scalar of the code's own type
            v = np.dtype(code).type(v)
        values.append(v)
    got = _packed_call(fmt, tuple(values))
    assert got == struct.pack("@" + fmt, *values)


@pytest.mark.parametrize(("fmt", "value"), [
    ("i", 1 << 31), ("B", -1), ("Q", -1), ("q", 1 << 63), ("h", 1 << 40), ("f", "x"),
    ("q", 2.5), ("d", None),
])
def test_a_value_struct_refuses_is_an_argument_error_with_structs_reason(fmt, value):
    """(Numba kernels given a signature: a number beyond its parameter's compiled type.)"""
    import asyncgpu as ag

    with pytest.raises(struct.error) as expected:
        struct.pack("@" + fmt, value)
    with pytest.raises(ag.ArgumentError, match="kernel 'k': an argument does not fit") as got:
        _packed_call(fmt, (value,))
    assert f"({expected.value})" in str(got.value)


@pytest.mark.parametrize(("fmt", "value"), [
    ("q", np.int64(-7)), ("f", 3), ("d", np.float64(0.1)), ("f", 1e300), ("I", True),
])
def test_values_of_other_types_pack_as_struct_packs_them(fmt, value):
    try:
        expected = struct.pack("@" + fmt, value)
    except (struct.error, OverflowError) as exc:
        with pytest.raises(type(exc)):
            _packed_call(fmt, (value,))
    else:
        assert _packed_call(fmt, (value,)) == expected
