"""On a GPU: library calls book what CuPy's functions write (``asyncgpu.runtime.effects`` over
CuPy)."""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.gpu


@pytest.fixture
def gpu():
    import asyncgpu as ag

    with ag.configure(backend="cuda", execution="async"):
        yield ag
        ag.synchronize()


def _written(path, args, kwargs=None):
    from asyncgpu.runtime import effects as _effects

    kwargs = kwargs or {}
    return set(_effects.effects("cuda", path, args, kwargs).places(args, kwargs))


def test_cupy_objects_give_the_same_writes_as_numpy(gpu):
    """The rule reads CuPy's ufuncs and signatures (or NumPy's where CuPy hides one)."""
    assert _written("multiply", ("a", 3.0, "c")) == {"c"}
    assert _written("divmod", ("a", "b", "q", "r")) == {"q", "r"}
    assert _written("clip", ("a", 0.0, 1.0, "c")) == {"c"}
    assert _written("sum", ("a", 0, None, "c")) == {"c"}
    assert _written("dot", ("a", "b", "c")) == {"c"}
    assert _written("add.at", ("a", "i", 1.0)) == {"a"}
    assert _written("copyto", ("d", "s")) == {"d"}
    assert _written("put_along_axis", ("m", "i", "v", 1)) == {"m"}
    assert _written("ndarray.sort", ("x",)) == {"x"}
    assert _written("sqrt", ("a",)) == set()
    assert _written("linalg.solve", ("a", "b")) == set()
    assert _written("ndarray.sum", ("a",)) == set()
    assert _written("scatter_add", ("a", "s", "v")) == {"a", "s", "v"}   # CuPy only


def test_positional_output_is_written_and_read_back(gpu):
    import asyncgpu.cupy as acp

    h = np.arange(1 << 16, dtype=np.float32)
    a, c = gpu.array(h), gpu.zeros(h.size, np.float32)
    acp.multiply(a, 3.0, c)
    d = c + 1.0                       # ordered after the write of c
    np.testing.assert_array_equal(d.numpy(), h * 3.0 + 1.0)
    np.testing.assert_array_equal(c.numpy(), h * 3.0)


def test_put_along_axis_writes_its_array(gpu):
    import asyncgpu.cupy as acp

    h = np.arange(12.0).reshape(3, 4)
    idx = np.array([[3], [0], [2]])
    vals = np.array([[-1.0], [-2.0], [-3.0]])
    m = gpu.array(h)
    acp.put_along_axis(m, gpu.array(idx), gpu.array(vals), 1)
    want = h.copy()
    np.put_along_axis(want, idx, vals, 1)
    np.testing.assert_array_equal(m.numpy(), want)
