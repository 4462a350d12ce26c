"""Property: for random (signature, arguments) pairs, valid pairs launch and give the serial
answer; invalid ones raise before anything is enqueued, leaving queues, DAG and arrays as they
were, and the runtime usable."""

from __future__ import annotations

import warnings

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import asyncgpu as ag
from test_bad_input import runtime_state

POINTEES = {"float": np.float32, "double": np.float64, "int": np.int32}
SCALARS = {"int": np.int32, "unsigned int": np.uint32, "float": np.float32, "double": np.float64}
N = 4


def source(params):
    decls = ", ".join(
        (f"{'const ' if p['const'] else ''}{p['ctype']}* p{i}" if p["ptr"] else f"{p['ctype']} p{i}")
        for i, p in enumerate(params))
    return f'extern "C" __global__ void k({decls}) {{ }}\n'


def make_twin(params):
    def twin(*args):
        total = sum(float(a) for a, p in zip(args, params) if not p["ptr"])
        for a, p in zip(args, params):
            if p["ptr"] and not p["const"]:
                a += a.dtype.type(1 + int(total) % 3)
    return twin


param = st.one_of(
    st.builds(lambda c, k: {"ptr": True, "ctype": c, "const": k},
              st.sampled_from(sorted(POINTEES)), st.booleans()),
    st.builds(lambda c: {"ptr": False, "ctype": c, "const": False},
              st.sampled_from(sorted(SCALARS))),
)

# corruption name -> applies to pointers?
BAD_POINTER = ["wrong dtype", "scalar", "numpy", "strided", "freed", "none", "list"]
BAD_SCALAR = ["array", "none", "out of range", "fraction", "string", "complex"]


def argument(ag, p, bad, rng):
    if p["ptr"]:
        dt = POINTEES[p["ctype"]]
        if bad is None:
            return ag.array(np.arange(N, dtype=dt) + int(rng.integers(0, 5)))
        if bad == "wrong dtype":
            return ag.zeros(N, np.int64 if dt != np.int64 else np.float32)
        if bad == "scalar":
            return 1.0
        if bad == "numpy":
            return np.zeros(N, dt)
        if bad == "strided":
            return ag.zeros(2 * N, dt)[::2]
        if bad == "freed":
            a = ag.zeros(N, dt)
            a.free()
            return a
        return None if bad == "none" else [0] * N
    dt = SCALARS[p["ctype"]]
    if bad is None:
        return int(rng.integers(0, 9)) if dt in (np.int32, np.uint32) else float(rng.integers(0, 9))
    if bad == "array":
        return ag.zeros(N, np.float32)
    if bad == "none":
        return None
    if bad == "out of range":
        return -1 if dt == np.uint32 else (2**40 if dt == np.int32 else "x")
    if bad == "fraction":
        return 2.5 if dt in (np.int32, np.uint32) else "2.5"
    if bad == "string":
        return "3"
    return 1j


@st.composite
def cases(draw):
    params = draw(st.lists(param, min_size=1, max_size=4))
    bad = [None] * len(params)
    if draw(st.booleans()):
        i = draw(st.integers(0, len(params) - 1))
        bad[i] = draw(st.sampled_from(BAD_POINTER if params[i]["ptr"] else BAD_SCALAR))
    count_change = draw(st.sampled_from([0, 0, 0, 0, -1, 1]))
    return params, bad, count_change, draw(st.integers(0, 2**16))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_random_signatures_and_arguments(case):
    params, bad, count_change, seed = case
    rng = np.random.default_rng(seed)
    with ag.configure(backend="sim", sim_seed=seed, sim_strategy="lazy", execution="async"):
        k = ag.cuda_kernel(source(params), "k", sim=make_twin(params))
        args = [argument(ag, p, b, rng) for p, b in zip(params, bad)]
        if count_change < 0:
            args = args[:-1]
        elif count_change > 0:
            args = args + [1]
        arrays = [a for a in args if isinstance(a, ag.Array) and not a._alloc.freed]
        host = [a.numpy().copy() for a in arrays]
        valid = all(b is None for b in bad) and count_change == 0
        before = runtime_state(ag)
        if valid:
            k[1, N](*args)
            expect = [h.copy() for h in host]
            make_twin(params)(*[expect[[id(b) for b in arrays].index(id(a))] if isinstance(a, ag.Array) else
                                SCALARS[p["ctype"]](a) for a, p in zip(args, params)])
            for a, e in zip(arrays, expect):
                np.testing.assert_array_equal(a.numpy(), e)
            assert ag.statistics().kernels == before[1] + 1
        else:
            try:
                k[1, N](*args)
            except ag.AsyncGPUError as exc:
                assert "kernel 'k'" in str(exc)
            else:
                raise AssertionError(f"launch with {bad}, count {count_change:+d} was accepted")
            assert runtime_state(ag) == before
            for a, h in zip(arrays, host):
                np.testing.assert_array_equal(a.numpy(), h)
            good = [argument(ag, p, None, rng) for p in params]
            k[1, N](*good)                       # the runtime is still usable
            ag.synchronize()


#: Every C scalar type the quick conversion of plain numbers covers (Kernel.bind, plain_scalar).
ALL_SCALARS = ["char", "signed char", "unsigned char", "short", "unsigned short", "int",
               "unsigned int", "long long", "unsigned long long", "float", "double"]
#: Each integer type's bounds, one either side, and the special floats.
EDGES = sorted({b + d for bits in (8, 16, 32, 64)
                for b in (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1, 2**bits - 1)
                for d in (-1, 0, 1)}) + [0.5, -0.0, float("inf"), float("-inf"), float("nan"),
                                         3.4028235e38, 3.5e38, 1e308, True, False]


def _bind_and_convert(ctype, values):
    """(what Kernel.bind passes, what convert_scalar returns) for each value, as (type, bytes)
    or the error's type name; a warning either emits is raised, so it shows as its name."""
    from asyncgpu.runtime.checks import convert_scalar
    from asyncgpu.runtime.current import current_runtime

    with ag.configure(backend="sim", sim_seed=0), warnings.catch_warnings():
        warnings.simplefilter("error")
        k = ag.cuda_kernel(f'extern "C" __global__ void k(float* y, {ctype} v) {{ }}', "k",
                           sim=lambda y, v: None)
        y = ag.zeros(1, np.float32)

        def outcome(fn):
            try:
                v = fn()
            except Exception as exc:                   # noqa: BLE001 - compared below
                return type(exc).__name__
            return (type(v), v.tobytes())

        return [(outcome(lambda: k.bind(current_runtime(), (y, v), None)[1][1]),
                 outcome(lambda: convert_scalar(v, k.params[1], lambda: "k"))) for v in values]


def test_plain_numbers_at_the_edges_bind_as_the_general_conversion_does():
    """A plain Python number for a typed scalar parameter: the launch path's quick conversion
    gives the same value and type as ``convert_scalar``, or the same error, at every integer
    type's bounds and for the special floats."""
    for ctype in ALL_SCALARS:
        for value, (got, want) in zip(EDGES, _bind_and_convert(ctype, EDGES)):
            assert got == want, (ctype, value)
            assert "Warning" not in str(got), (ctype, value, got)


def test_a_real_beyond_a_float_parameters_range_passes_as_infinity_without_a_warning():
    """C's conversion gives an infinity of the value's sign; the launch path and the general
    conversion both pass that, and neither warns (a warning's count would follow the data)."""
    top = float(np.finfo(np.float32).max)
    values = [1e39, -1e300, 10**40, -(10**40), float("inf")]
    for value, (got, want) in zip(values, _bind_and_convert("float", values)):
        inf = np.float32(np.inf if value > 0 else -np.inf)
        assert got == want == (np.float32, inf.tobytes()), (value, got, want)
    # the largest finite float32 stays finite
    assert _bind_and_convert("float", [top]) == [((np.float32, np.float32(top).tobytes()),) * 2]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ctype=st.sampled_from(ALL_SCALARS),
       value=st.one_of(st.integers(-(2**70), 2**70), st.integers(-300, 300),
                       st.floats(allow_nan=True, allow_infinity=True), st.floats(width=32)))
def test_plain_numbers_bind_as_the_general_conversion_does(ctype, value):
    """The same for random numbers."""
    got, want = _bind_and_convert(ctype, [value])[0]
    assert got == want
    assert "Warning" not in str(got), got
