"""What a library call's results will be, worked out on ``sim`` before it runs.

The model
---------
On ``cuda`` CuPy gives a call's results their shapes and dtypes as it enqueues it. On ``sim``
nothing runs at call time, so :func:`infer` runs NumPy's function twice on *placeholders*
(arrays of the arguments' shapes, dtypes and layouts over stand-in buffers, one per
allocation, different values each time) and turns each array of the result into a
:class:`NewResult` (a fresh allocation) or a :class:`ViewResult` (a view of an argument's
allocation, as ``transpose`` or ``out=`` give). Results are cached by the call's signature
(:func:`call_key` of its arguments, the arrays' layouts).

Invariant: a call whose result cannot be known without its values raises
:class:`Synchronizing`: a data-dependent name, two placeholder runs giving different shapes,
a run that fails, or a result that is not an array, a number, a dtype or ``None``. The host
then waits for the call's inputs and runs it at once.

Example::

    meta = infer(call, np.sqrt)      # NewResult(shape=(4,), dtype=float64)
"""

from __future__ import annotations

import contextlib
import struct
import warnings
from typing import Any, Callable

import numpy as np

from ..core.errors import ArgumentError
from .allocation import dense_layout
from .call_args import Slot, fill
from .dtypes import UnsupportedDtype, long_double, native
from .zero_d import INDEXING, as_called, refuse_0d

# (``call`` below is a ``LibraryCall`` of asyncgpu.runtime.library, which imports this module)

#: Calls whose result is laid out by an ``order`` argument (``'K'``: as the input is), in CuPy
#: as in NumPy: on ``sim`` a fresh result keeps the dense layout NumPy gives it (Fortran order
#: for ``asfortranarray(x)``, ``x.copy(order='F')``, ``empty_like`` of a Fortran-ordered
#: array). Every other fresh result is C-contiguous, as CuPy allocates its results (a ufunc of
#: Fortran-ordered operands included, where NumPy would keep their order).
ORDERED = frozenset({
    "array", "asarray", "asanyarray", "asfortranarray", "copy", "empty_like", "zeros_like",
    "ones_like", "full_like", "empty", "zeros", "ones", "full", "eye", "require", "reshape",
    "ravel", "ndarray.copy", "ndarray.astype", "ndarray.reshape", "ndarray.ravel",
    "ndarray.flatten",
})


class NewResult:
    """A result leaf that needs a fresh allocation (``strides``: its layout, None for C)."""

    __slots__ = ("shape", "dtype", "strides")

    def __init__(self, shape: tuple[int, ...], dtype: np.dtype,
                 strides: tuple[int, ...] | None = None) -> None:
        self.shape, self.dtype, self.strides = shape, dtype, strides


class ViewResult:
    """A result leaf that is a view of argument ``index``'s allocation."""

    __slots__ = ("index", "shape", "dtype", "strides", "offset")

    def __init__(self, index: int, shape: tuple[int, ...], dtype: np.dtype,
                 strides: tuple[int, ...], offset: int) -> None:
        self.index, self.shape, self.dtype = index, shape, dtype
        self.strides, self.offset = strides, offset


class Synchronizing(Exception):
    """Raised by inference: the call must run at once (value-dependent result)."""


_SCALARS = (bool, int, float, complex, np.generic)
_meta_cache: dict[Any, Any] = {}
_META_CACHE_SIZE = 4096


def placeholders(call: Any, rng: np.random.Generator, zeros: bool
                 ) -> tuple[list[np.ndarray], dict[int, np.ndarray]]:
    """NumPy stand-ins with each argument's layout, one byte buffer per allocation."""
    buffers: dict[int, np.ndarray] = {}
    views = []
    for a in call.arrays:
        buf = buffers.get(a._alloc.id)
        if buf is None:
            buf = buffers[a._alloc.id] = np.zeros(max(a._alloc.nbytes, 1), np.uint8)
        if a.size == 0:
            view = np.empty(a.shape, a.dtype)
        else:
            view = np.ndarray(a.shape, a.dtype, buffer=buf, offset=a._offset, strides=a.strides)
        views.append(view)
    numbers = 0
    for a, view in zip(call.arrays, views):
        if a.size == 0:
            continue
        if a.ndim == 0:
            # A 0-d array may stand for a number (``arange(n)``, ``arange(2, n)``,
            # ``arange(m, n)``): values far apart and different for each such argument in the
            # two runs, so that a shape made from them differs between the runs and the call
            # synchronizes (as CuPy reads the number to the host). As an index (an integer
            # one gives a result of one shape) a number in range; a bool decides the shape
            if a.dtype.kind == "b":
                view[...] = not zeros
            elif call.name in INDEXING:
                view[...] = 0
            else:
                view[...] = 11 + 3 * numbers if zeros else 2 + numbers
                numbers += 1
            continue
        # (values for the bytes the view spans: an axis of stride 0, a broadcast, gets one
        # row, which the assignment repeats; ``broadcast_to(x, (10**7, 64))`` spans 64)
        shape = tuple(1 if st == 0 else n for n, st in zip(a.shape, a.strides))
        vals = rng.uniform(0.5, 1.5, shape)
        if zeros:
            vals[rng.random(shape) < 0.5] = 0
        if a.dtype.kind == "b":
            view[...] = vals > 0.75
        else:
            view[...] = vals.astype(a.dtype) if a.dtype.kind != "c" else vals + 0.25j
    return [as_called(view, call.name, i in call.written) for i, view in enumerate(views)], \
        buffers


def _long_result(call: Any, dtype: np.dtype) -> None:
    raise UnsupportedDtype(f"{call.describe()}: its result has dtype {dtype} (NumPy's long "
                           "double), which CUDA and CuPy lack; pass float64 or complex128 values")


def classify(call: Any, result: Any, views: list[np.ndarray],
             buffers: dict[int, np.ndarray], placeholder: bool = True) -> Any:
    """The result's structure with each array leaf turned into a New/ViewResult.

    Other leaves are returned as they are; from a placeholder run only those that cannot depend
    on the values (``None``, dtypes, types) are, any other one makes the call synchronizing.
    """
    if result is None or isinstance(result, (np.dtype, type)):
        return result
    if isinstance(result, tuple):
        items = [classify(call, r, views, buffers, placeholder) for r in result]
        return type(result)(*items) if hasattr(result, "_fields") else tuple(items)
    if isinstance(result, list):
        return [classify(call, r, views, buffers, placeholder) for r in result]
    if isinstance(result, _SCALARS):
        dtype = np.asarray(result).dtype
        if long_double(dtype):
            _long_result(call, dtype)
        return NewResult((), dtype)
    if isinstance(result, np.ndarray):
        if result.dtype.hasobject or result.dtype.kind not in "biufc":
            raise UnsupportedDtype(f"{call.describe()}: its result has dtype {result.dtype}, "
                                   "which asyncgpu arrays cannot hold")
        if long_double(result.dtype):
            _long_result(call, result.dtype)
        if not result.dtype.isnative:
            # (host data of the other byte order, ``frombuffer(b, ">f4")``: converted to the
            # device's, as CuPy's ``asarray`` of NumPy's result converts it; no other call is
            # let ask for that order)
            return NewResult(result.shape, native(result.dtype))
        if result.size:
            addr = result.__array_interface__["data"][0]
            for i, a in enumerate(call.arrays):
                buf = buffers[a._alloc.id]
                base = buf.__array_interface__["data"][0]
                if base <= addr < base + buf.nbytes and np.shares_memory(result, buf):
                    return ViewResult(i, result.shape, result.dtype, result.strides, addr - base)
        if (call.name in ORDERED and result.size and not result.flags.c_contiguous
                and dense_layout(result.shape, result.strides, result.itemsize)):
            return NewResult(result.shape, result.dtype, result.strides)
        return NewResult(result.shape, result.dtype)
    if placeholder:
        raise Synchronizing      # a string or object computed from placeholder values
    return result


def _shapes(meta: Any) -> Any:
    if isinstance(meta, (NewResult, ViewResult)):
        return (meta.shape, meta.dtype.str)
    if isinstance(meta, (tuple, list)):
        return tuple(_shapes(m) for m in meta)
    return None


def float_bits(v: float | complex) -> bytes:
    """A Python float's or complex's bytes: its exact value, NaN sign and payload included
    (``hex()`` and ``repr()`` print -NaN and NaN alike)."""
    if isinstance(v, complex):
        return struct.pack("<dd", v.real, v.imag)
    return struct.pack("<d", v)


def call_key(obj: Any) -> Any:
    """A hashable description of an argument, with types (``2`` and ``2.0`` differ)."""
    if isinstance(obj, Slot):
        return ("slot", obj.index)
    if type(obj) in (list, tuple):
        return (type(obj).__name__,) + tuple(call_key(o) for o in obj)
    if type(obj) is dict:
        return ("dict",) + tuple((k, call_key(v)) for k, v in sorted(obj.items()))
    # (floats by their exact bits: 0.0 == -0.0, yet copysign or 1 / x tell them apart, and
    # hex() prints -NaN and NaN alike)
    if type(obj) is float:
        return ("float", float_bits(obj))
    if type(obj) is complex:
        return ("complex", float_bits(obj))
    if isinstance(obj, (np.floating, np.complexfloating)):
        return (type(obj).__qualname__, obj.tobytes())
    return (type(obj).__qualname__, obj)


def _signature(call: Any) -> Any:
    groups: dict[int, int] = {}
    arrays = tuple(
        (a.shape, a.dtype.str, a.strides, a._offset, a._alloc.nbytes,
         groups.setdefault(a._alloc.id, len(groups)))
        for a in call.arrays
    )
    key = (call.name, call_key(call.args), call_key(call.kwargs), arrays,
           tuple(sorted(call.written)))
    try:
        hash(key)
    except TypeError:
        return None
    return key


@contextlib.contextmanager
def quiet() -> Any:
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        yield


def infer(call: Any, fn: Callable[..., Any]) -> Any:
    """Result metadata from placeholder runs (sim); raises :class:`Synchronizing`."""
    refuse_0d(call)
    if call.data_dependent():
        raise Synchronizing
    key = None if call.state else _signature(call)
    if key is not None and key in _meta_cache:
        return _meta_cache[key]
    rng = np.random.default_rng(12345)
    metas = []
    for zeros in (False, True):
        try:
            views, buffers = placeholders(call, rng, zeros)
        except MemoryError:     # (no room to try it on stand-ins: the call runs at once)
            raise Synchronizing from None
        f = call.inference() if call.inference is not None else fn  # state must not advance
        try:
            with quiet():
                result = f(*fill(call.args, views), **fill(call.kwargs, views))
        except ArgumentError:
            raise
        except Exception:
            raise Synchronizing from None
        metas.append(classify(call, result, views, buffers))
    if _shapes(metas[0]) != _shapes(metas[1]):
        raise Synchronizing
    if key is not None:
        if len(_meta_cache) >= _META_CACHE_SIZE:
            _meta_cache.clear()      # rare: programs repeat a few signatures
        _meta_cache[key] = metas[0]
    return metas[0]
