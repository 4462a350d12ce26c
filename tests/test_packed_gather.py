"""Gathering a packed launch's values (``PackedTarget.numba_values`` and ``pointer_values``):
the flat values the parameter buffer is packed from, or None when an array's cached values are
missing or a value is not what the target was built for (the launch then takes the general
path, so a target never packs values of another layout)."""

from __future__ import annotations

import numpy as np
import pytest

from asyncgpu.backends.cuda.kernels import PackedTarget
from asyncgpu.backends.cuda.packed import PackedPlan
from asyncgpu.runtime.kernel import array_arg

#: a Numba array's cached ABI fields (``Array._cache["nbf"]``): (type token, flat fields)
FIELDS = ("f4/1", (1, 2, 3, 4, 5, 16, 4))


class Kernel:
    name = "k"


class Launcher:
    grid3 = block3 = (1, 1, 1)
    shared = 0
    kernel = Kernel


def target(key):
    from asyncgpu.backends.cuda.backend import cache_keys

    class Backend:
        pass
    Backend.cache_keys = cache_keys(0)
    return PackedTarget(Backend(), key, PackedPlan(1, "q", (), None), Launcher())


def cached(ag, fields=FIELDS):
    a = ag.ones(4, np.float32)
    if fields is not None:
        a._cache["nbf"] = fields
    return a


def test_numba_values_flatten_array_fields_and_numbers(sim):
    ag = sim
    a, b = cached(ag), cached(ag, ("f8/1", (7, 8)))
    values = [a, 3, 2.5, b, True, np.float32(1)]
    key = ["f4/1", int, float, "f8/1", bool, np.float32]
    flat = target(key).numba_values(values)
    assert flat == (1, 2, 3, 4, 5, 16, 4, 3, 2.5, 7, 8, True, np.float32(1))
    assert type(flat) is tuple and type(flat[-1]) is np.float32
    assert target([]).numba_values([]) == ()


@pytest.mark.parametrize("case", ["missing fields", "other array type", "other number type",
                                  "one value more", "one value fewer", "int beyond 64 bits",
                                  "not a list"])
def test_numba_values_refuse_what_the_target_was_not_built_for(sim, case):
    ag = sim
    values, key = [cached(ag), 3], ["f4/1", int]
    if case == "missing fields":
        values[0] = cached(ag, None)
    elif case == "other array type":
        key[0] = "f8/1"
    elif case == "other number type":
        values[1] = 3.0
    elif case == "one value more":
        values.append(4)
    elif case == "one value fewer":
        key.append(int)
    elif case == "int beyond 64 bits":
        values[1] = 2**63
    else:
        values = tuple(values)
    assert target(key).numba_values(values) is None


def test_ints_at_the_edges_of_64_bits_are_ints_and_beyond_them_are_big(sim):
    """An int of int64 is an int, one up to 2**64 a uint64 (as Numba types it), any other
    big: a uint64 plan never packs 2**64 (struct.error) nor a negative beyond int64."""
    for v in (-(2**63), 2**63 - 1):
        assert target([int]).numba_values([v]) == (v,)
    for v in (2**63, 2**64 - 1):
        assert target([int]).numba_values([v]) is None
        assert target(["uint64"]).numba_values([v]) == (v,)
    for v in (2**64, -(2**63) - 1):
        assert target(["uint64"]).numba_values([v]) is None
        assert target(["bigint"]).numba_values([v]) == (v,)


def test_pointer_values_put_each_arrays_device_pointer_in_its_place(sim):
    ag = sim
    a = [ag.ones(4, np.float32) for _ in range(3)]
    for i, x in enumerate(a):
        x._cache["ptr"] = 4096 * (i + 1)
    values = [a[0], 7, a[1], a[2]]
    arrays = [array_arg(i, f"a{i}", values[i], True, True) for i in (0, 2, 3)]
    assert target(None).pointer_values(values, arrays) == (4096, 7, 8192, 12288)
    del a[1]._cache["ptr"]
    assert target(None).pointer_values(values, arrays) is None


def test_tuples_and_records_compile_by_what_numba_types_them():
    """A tuple's launch key is its items' (length, nesting, types), a record's its dtype:
    with ``type(v)`` alone, ``(1.0, 2.0)`` and ``(1, 2, 3)`` shared one compiled kernel, and
    Numba's launch flattened the second as the first one's types."""
    from asyncgpu.backends.cuda.kernels import _value_key

    f8 = np.array([(1.0, 2.0)], dtype=[("a", "f8"), ("b", "f8")])
    i8 = f8.view([("a", "i8"), ("b", "i8")])
    same = [((1.0, 2.0), (3.0, 4.0)), ((1, (2, 3.0)), (4, (5, 6.0))), (f8[0], f8.copy()[0]),
            ((2**63,), (2**63 + 1,))]
    for a, b in same:
        assert _value_key(a) == _value_key(b)
    other = [(1.0, 2.0), (1.0, 2.0, 3.0), (1, 2), (np.float32(1), 2.0), ((1.0, 2.0), 3.0),
             f8[0], i8[0], (2**63,), (2**64,)]
    keys = [_value_key(v) for v in other]
    assert len(set(keys)) == len(keys)
    assert _value_key(3) is int and _value_key(2**63) == "uint64"
