"""What the simulator computes where NumPy's result differs from CuPy's: :data:`AS_CUPY`.

The model
---------
On ``sim`` NumPy computes CuPy's functions (``asyncgpu.runtime.cupy_surface``). Where NumPy
gives another result than CuPy 14 on the GPU for the same call (checked there, call by call),
the simulator runs the function of :data:`AS_CUPY` instead, under the call's path
(``"linalg.inv"``; ``"ndarray.<name>"``: the method, its array first). Each one computes with
NumPy and then gives what CuPy gives: a value (an integer to a negative power is 0), a type
(CuPy's eigenvalues are complex, its ``sinc`` of int8 is float16), a wrapped index where NumPy
raises, NaN where NumPy's linear algebra raises and CuPy does not check, or CuPy's refusal
where NumPy accepts (a list of choices).

Invariant: an entry takes its arguments as CuPy's signature names and orders them (a method's
array first, under any name), so that the booking of a call's writes
(``asyncgpu.runtime.effects``) can read its ``out`` from the entry's own signature.

Example::

    AS_CUPY["power"](np.array([2], np.int8), -1)      # array([0], dtype=int8), as on the GPU
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable

import numpy as np

from ..core.errors import ArgumentError


def _complex(x: np.ndarray) -> np.ndarray:
    return x.astype(np.result_type(x.dtype, np.complex64), copy=False)


def _eig(a: Any) -> Any:
    result = np.linalg.eig(a)
    return _complex(result[0]), _complex(result[1])


def _plain(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` returning a plain tuple where NumPy's returns a named one (``QRResult``,
    ``EighResult``...): CuPy's ``.Q`` or ``.eigenvalues`` do not exist."""
    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        result = fn(*args, **kwargs)
        return tuple(result) if isinstance(result, tuple) else result
    return run


def _nan_like(result: Any) -> Any:
    """``result`` (an array, or a tuple of them) filled with NaN, its integers with -1."""
    if isinstance(result, tuple):
        return tuple(_nan_like(r) for r in result)
    result = np.asarray(result)
    return np.full_like(result, np.nan if result.dtype.kind in "fc" else -1)


def _unchecked(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` (a NumPy solver) giving NaNs where NumPy raises ``LinAlgError`` for a singular or
    indefinite matrix, or an SVD that does not converge (NaN among the values): CuPy does not
    check one unless asked (``cupyx.errstate(linalg='raise')``), and gives non-finite values.
    A matrix of the wrong shape is refused as CuPy refuses it."""
    signature = inspect.signature(fn)

    @functools.wraps(fn)      # (its signature NumPy's: CuPy's keywords are put in place)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except np.linalg.LinAlgError as exc:
            if not any(text in str(exc) for text in _UNCHECKED):
                raise
        bound = signature.bind(*args, **kwargs)     # (the matrix first, given by keyword too)
        args, kwargs = bound.args, bound.kwargs
        a = np.asarray(args[0])
        if a.ndim > 2 and not kwargs and all(np.ndim(b) <= a.ndim for b in args[1:]):
            # a batch: only the matrices NumPy refuses are NaN, each solved alone (CuPy's
            # batched solvers spoil only the failing ones)
            others = [np.broadcast_to(b, a.shape[:-2] + np.shape(b)[np.ndim(b) - 2:])
                      if np.ndim(b) == a.ndim else b for b in args[1:]]
            parts = [run(a[i], *[b[i] if np.ndim(b) == a.ndim else b for b in others])
                     for i in range(a.shape[0])]
            return np.stack(parts)
        identity = np.broadcast_to(np.eye(a.shape[-1], dtype=a.dtype), a.shape)
        return _nan_like(fn(identity, *args[1:], **kwargs))     # (its shape and dtype)
    return run


#: What NumPy's linear algebra raises for where CuPy's gives non-finite values.
_UNCHECKED = ("ingular", "positive definite", "did not converge")


def _arg_into(result: Any, out: Any, dtype: Any) -> Any:
    """An ``argmax``'s indices as ``dtype`` (CuPy's method takes one), written into ``out`` if
    given."""
    result = np.asarray(result)
    if dtype is not None:
        result = result.astype(dtype)
    return result if out is None else into(out, result)


def _around(indices: Any, n: int) -> Any:
    """Integer ``indices`` into ``n`` elements, one out of range wrapped around as CuPy wraps
    it (index 5 of 3 elements is element 2, on the GPU, 14.2; NumPy raises); an empty axis has
    no range to wrap into."""
    return np.mod(indices, n) if n else np.asarray(indices)


def _take_along_axis(a: Any, indices: Any, axis: Any) -> Any:
    """NumPy's ``take_along_axis`` with an index out of range wrapped around, as CuPy's."""
    a = np.asarray(a)
    return np.take_along_axis(a, _around(indices, a.size if axis is None else a.shape[axis]),
                              axis)


def _put_along_axis(arr: Any, indices: Any, values: Any, axis: Any) -> None:
    """NumPy's ``put_along_axis`` with an index out of range wrapped around, as CuPy's."""
    np.put_along_axis(arr, _around(indices, arr.size if axis is None else arr.shape[axis]),
                      values, axis)


def _wrapped(shape: tuple[int, ...], index: Any) -> Any:
    """``index`` with each integer array in it wrapped into its dimension's range, as CuPy's
    integer-array indexing wraps an index out of range (:func:`_around`). Integers alone are
    checked as in NumPy."""
    items = list(index) if type(index) is tuple else [index]
    for i, k in enumerate(items):
        if type(k) is list and all(type(v) in (int, bool) for v in k) and k:
            items[i] = np.asarray(k)            # (a list of numbers: an array, as in CuPy)
    spans = [0 if k is None else None if k is Ellipsis
             else k.ndim if isinstance(k, np.ndarray) and k.dtype.kind == "b" else 1
             for k in items]
    dim = 0
    for i, (k, span) in enumerate(zip(items, spans)):
        if span is None:                        # (the dimensions the others leave)
            dim += len(shape) - sum(s for s in spans if s is not None)
            continue
        if isinstance(k, np.ndarray) and k.dtype.kind in "iu" and dim < len(shape):
            items[i] = _around(k, shape[dim])
        dim += span
    return tuple(items) if type(index) is tuple else items[0]


def _getitem(self: Any, index: Any) -> Any:
    return self[_wrapped(self.shape, index)]


def _setitem(self: Any, index: Any, value: Any) -> None:
    self[_wrapped(self.shape, index)] = value


def _nan_arg(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``nanargmax``/``nanargmin`` as CuPy's: -1 for a slice of NaNs alone (NumPy raises), and
    int64 indices only (a ``dtype`` of another type is refused, as the GPU refuses it)."""
    name = fn.__name__

    def run(a: Any, axis: Any = None, dtype: Any = None, out: Any = None,
            keepdims: bool = False) -> Any:
        if dtype is not None and np.dtype(dtype) != np.int64:
            raise TypeError(f"Wrong type ({np.dtype(dtype).type}) of arguments for cupy_{name} "
                            f"(CuPy's {name} gives int64 indices only)")
        a = np.asarray(a)
        gone = np.isnan(a).all(axis=axis, keepdims=True)       # (slices of NaNs alone)
        result = np.asarray(fn(np.where(gone, 0, a) if gone.any() else a, axis,
                               keepdims=keepdims))
        if gone.any():
            result = np.where(gone.reshape(result.shape), -1, result)
        return into(out, result.astype(np.int64))

    run.__name__ = run.__qualname__ = name
    return run


def _int_bounds(value: Any, arrays: list[Any]) -> None:
    """OverflowError, as CuPy raises, for a Python int ``value`` that the integer dtype the
    ``arrays`` give cannot hold (NumPy wraps it in ``where`` and ``clip``)."""
    if type(value) is not int:
        return
    dtypes = [np.asarray(a).dtype for a in arrays if isinstance(a, (np.ndarray, np.generic))]
    if not dtypes:
        return
    dtype = np.result_type(*dtypes)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        if not info.min <= value <= info.max:
            raise OverflowError(f"Python integer {value} out of bounds for {dtype}")


def _where(condition: Any, *xy: Any) -> Any:
    for v in xy:
        _int_bounds(v, list(xy))
    return np.where(condition, *xy)


def _clip(a: Any, a_min: Any = None, a_max: Any = None, out: Any = None, **kwargs: Any) -> Any:
    """CuPy's ``clip``: no complex loop (``TypeError``), and with both bounds its kernel's
    order of tests, ``max if min > max else min if x < min else max if x > max else x``, in
    which a NaN bound is ignored (NumPy's answer is NaN)."""
    for v in (a_min, a_max):
        _int_bounds(v, [a])
    x = np.asarray(a)
    if x.dtype.kind == "c":
        raise TypeError(f"Wrong type ({x.dtype}, ...) of arguments for cupy_clip (CuPy clips "
                        "booleans, integers and floats)")
    result = np.clip(a, a_min, a_max, **kwargs)
    if a_min is None or a_max is None or np.asarray(result).dtype.kind != "f":
        return into(out, result, kwargs.get("casting", "same_kind")) if out is not None \
            else result
    lo, hi = np.asarray(a_min), np.asarray(a_max)
    kernel = np.where(lo > hi, hi, np.where(x < lo, lo, np.where(x > hi, hi, x)))
    return into(out, np.asarray(kernel).astype(np.asarray(result).dtype),
                kwargs.get("casting", "same_kind"))


def _dot(a: Any, b: Any, out: Any = None) -> Any:
    for name, v in (("a", a), ("b", b)):
        if not isinstance(v, np.ndarray):
            raise TypeError(f"Argument '{name}' has incorrect type (expected cupy.ndarray, got "
                            f"{type(v).__name__}): cupy.dot multiplies arrays; use a * b for a "
                            "scalar")
    return np.dot(a, b, out=out)


def _choose(a: Any, choices: Any, out: Any = None, mode: str = "raise") -> Any:
    if not isinstance(choices, np.ndarray):
        raise AttributeError(f"'{type(choices).__name__}' object has no attribute 'shape' "
                             "(cupy.choose takes its choices as one array: stack them first)")
    return np.choose(a, choices, out=out, mode=mode)


def into(out: Any, result: np.ndarray, casting: str = "same_kind") -> Any:
    """``result``, written into ``out`` (an array or a one-array tuple) if given, under the
    ufuncs' output rule (``casting``): an int result is not written into a bool array."""
    if out is None:
        return result
    target = out[0] if isinstance(out, tuple) else out
    np.copyto(target, result, casting=casting)
    return target


def _power(x1: Any, x2: Any, /, out: Any = None, **kwargs: Any) -> Any:
    """``x1 ** x2`` as CuPy computes it for integers: a negative exponent gives 0, 1 for a base
    of 1, and +-1 for a base of -1 (NumPy refuses it)."""
    dtype = np.result_type(x1, x2) if not kwargs.get("dtype") else np.dtype(kwargs["dtype"])
    if dtype.kind not in "iu" or not np.any(np.asarray(x2) < 0):
        return np.power(x1, x2, out=out, **kwargs)
    if type(x2) is int:
        np.asarray(x2, dtype)       # (a Python int the operands' type cannot hold: OverflowError)
    base, exp = np.asarray(x1), np.asarray(x2)
    negative = exp < 0
    result = np.power(base, np.where(negative, 0, exp), **kwargs)
    odd = (exp % 2).astype(bool)
    small = np.where(base == 1, 1, np.where(base == -1, np.where(odd, -1, 1), 0))
    result = np.where(negative, small, result).astype(dtype)   # (the operands' dtype: NEP 50)
    return into(out, result, kwargs.get("casting", "same_kind"))


def fused_multiply_add(a: Any, b: Any, c: Any) -> Any:
    """``a * b + c`` rounded once, as the GPU computes it (CUDA's compiler fuses a multiply and
    an add; ``cuda.fma``): in double precision for single and half floats, whose product is
    exact there; for doubles with the product's and the sum's rounding errors recovered
    (Dekker's split, Knuth's TwoSum) and added back, exact but where the two errors' own sum
    rounds (far below what the device's rounding shows)."""
    a, b, c = np.asarray(a), np.asarray(b), np.asarray(c)
    dtype = np.result_type(a, b, c)
    with np.errstate(all="ignore"):
        if dtype != np.float64:
            wide = (a.astype(np.float64) * b.astype(np.float64) + c.astype(np.float64))
            return wide.astype(dtype)[()]
        product = a * b

        def split(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            t = 134217729.0 * v                     # (2**27 + 1)
            high = t - (t - v)
            return high, v - high

        ah, al = split(a)
        bh, bl = split(b)
        error = ((ah * bh - product) + ah * bl + al * bh) + al * bl
        total = product + c                     # (and its rounding error: Knuth's TwoSum)
        back = total - product
        rounding = (product - (total - back)) + (c - back)
        fused = total + (rounding + error)
        return np.where(np.isfinite(error) & np.isfinite(rounding), fused, total)[()]


def _floor_quotient(x1: Any, x2: Any, kwargs: dict[str, Any]
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """For float operands, CuPy's floor division: ``floor(x1 / x2)`` in the operands' float
    type (NumPy divides otherwise: 1.0 // 0.1 is 9.0 there, 10.0 on the GPU), with the operands
    cast to it; None for other types, which NumPy computes as CuPy does."""
    if kwargs:
        return None
    dtype = np.result_type(x1, x2)
    if dtype.kind != "f" or isinstance(x1, (int, float)) and isinstance(x2, (int, float)):
        return None
    x, y = np.asarray(x1).astype(dtype), np.asarray(x2).astype(dtype)
    # (half floats compute in single precision on the GPU)
    work = np.float32 if dtype == np.float16 else dtype
    with np.errstate(all="ignore"):
        q = np.floor(x.astype(work) / y.astype(work))
    return x, y, q


def _floor_divide(x1: Any, x2: Any, /, out: Any = None, **kwargs: Any) -> Any:
    """``x1 // x2`` as CuPy computes it: for floats ``floor(x1 / x2)``."""
    found = _floor_quotient(x1, x2, kwargs)
    if found is None:
        return np.floor_divide(x1, x2, out=out, **kwargs)
    x, _, q = found
    return into(out, q.astype(x.dtype))


def _remainder(x1: Any, x2: Any, /, out: Any = None, **kwargs: Any) -> Any:
    """``x1 % x2`` as CuPy computes it: for floats ``x1 - floor(x1 / x2) * x2``, fused
    (:func:`fused_multiply_add`)."""
    found = _floor_quotient(x1, x2, kwargs)
    if found is None:
        return np.remainder(x1, x2, out=out, **kwargs)
    x, y, q = found
    work = q.dtype
    with np.errstate(all="ignore"):
        r = fused_multiply_add(-q, y.astype(work), x.astype(work))
    return into(out, r.astype(x.dtype))


def _divmod(x1: Any, x2: Any, /, *outs: Any, **kwargs: Any) -> Any:
    """``divmod(x1, x2)`` as CuPy computes it: its floor division and remainder."""
    out = kwargs.pop("out", None) or (tuple(outs) if outs else None)
    found = _floor_quotient(x1, x2, kwargs)
    if found is None:
        return np.divmod(x1, x2, out=out, **kwargs) if out is not None else \
            np.divmod(x1, x2, **kwargs)
    x, y, q = found
    with np.errstate(all="ignore"):
        r = fused_multiply_add(-q, y.astype(q.dtype), x.astype(q.dtype))
    q, r = q.astype(x.dtype), r.astype(x.dtype)
    if out is None:
        return q, r
    return into(out[0], q), into(out[1], r)


def _searchsorted(a: Any, v: Any, side: str = "left", sorter: Any = None) -> Any:
    if type(v) in (list, tuple) or isinstance(v, np.generic):
        raise NotImplementedError("Only python scalars or ndarrays are supported as v (CuPy's "
                                  "searchsorted): pass asyncgpu.asarray(v), or a Python number")
    return np.searchsorted(a, v, side=side, sorter=sorter)


def _reciprocal(x: Any, /, out: Any = None, **kwargs: Any) -> Any:
    """``1 / x``; for integers 0 where ``x`` is 0, as CuPy computes it."""
    a = np.asarray(x)
    if a.dtype.kind not in "iu" or not np.any(a == 0):
        return np.reciprocal(x, out=out, **kwargs)
    result = np.where(a == 0, 0, np.reciprocal(np.where(a == 0, 1, a))).astype(a.dtype)
    return into(out, result, kwargs.get("casting", "same_kind"))


def _stable(kind: Any) -> None:
    """CuPy's sorts are stable and take no other ``kind`` (NumPy's quicksort, heapsort...)."""
    if kind is not None and kind != "stable":
        raise ValueError(f"kind can only be None or 'stable' (CuPy's sorts); got {kind!r}")


def _sort(a: Any, axis: Any = -1, kind: Any = None) -> Any:
    _stable(kind)
    return np.sort(a, axis=axis, kind="stable")


def _argsort(a: Any, axis: Any = -1, kind: Any = None) -> Any:
    _stable(kind)
    return np.argsort(a, axis=axis, kind="stable")


def _contiguous(self: Any, name: str) -> None:
    if not self.flags.c_contiguous:
        raise NotImplementedError(f"Sorting non-contiguous array is not supported (CuPy's "
                                  f"ndarray.{name}): sort a copy, then assign it back")


def _sort_in_place(self: Any, axis: Any = -1, kind: Any = None) -> None:
    _contiguous(self, "sort")
    _stable(kind)
    self.sort(axis=axis, kind="stable")


def _partition_in_place(self: Any, kth: Any, axis: Any = -1) -> None:
    _contiguous(self, "partition")
    self.partition(kth, axis=axis)


def _lexsort(keys: Any) -> Any:
    """CuPy's ``lexsort`` takes one array of keys (rows), of at most 2 dimensions."""
    if not isinstance(keys, np.ndarray):
        raise AttributeError(f"'{type(keys).__name__}' object has no attribute 'ndim' (CuPy's "
                             "lexsort takes its keys as one 2-D array: stack them first)")
    if keys.ndim > 2:
        raise NotImplementedError("Keys with the rank of three or more is not supported in "
                                  "lexsort (CuPy's)")
    return np.lexsort(keys)


def _histogram(x: Any, bins: Any = 10, range: Any = None, density: bool = False,
               weights: Any = None) -> Any:
    """NumPy's ``histogram`` with CuPy's checks and counts: bins by a rule's name and complex
    data are refused, weights must be an array, and weighted counts are int64, float64 or
    complex128 whatever the weights' width (CuPy accumulates in those)."""
    if isinstance(bins, str):
        raise NotImplementedError("only integer and array bins are implemented (CuPy's "
                                  "histogram)")
    if np.asarray(x).dtype.kind == "c":
        raise NotImplementedError("complex number is not supported (CuPy's histogram)")
    if weights is not None:
        if not isinstance(weights, np.ndarray):
            raise ValueError("weights must be a cupy.ndarray (CuPy's histogram): pass "
                             "asyncgpu.asarray(weights)")
        kind = weights.dtype.kind
        weights = weights.astype(np.int64 if kind in "bui" else
                                 np.complex128 if kind == "c" else np.float64)
    return np.histogram(x, bins, range=range, density=density, weights=weights)


def _bincount(x: Any, weights: Any = None, minlength: Any = None) -> Any:
    return np.bincount(x, weights, 0 if minlength is None else minlength)


def _kron(a: Any, b: Any) -> Any:
    """A number's Kronecker product is CuPy's ``multiply``: the number is a weak scalar."""
    if not isinstance(a, np.ndarray) or not isinstance(b, np.ndarray):
        return np.multiply(a, b)
    return np.kron(a, b)


#: CuPy functions that read an argument as an array (a method or attribute of it, or a
#: parameter its Cython types as ``ndarray``) and fail on a list, a tuple or a Python number
#: there, where NumPy converts it: the exception class CuPy's code raises, and the positions
#: (``full`` takes a number to fill with, and fails on a sequence: :data:`SEQUENCES_ONLY`).
#: From CuPy 14.2's source (``a.sum(...)`` in cupy/_math/sumprod.py, ``check_array`` in
#: cupy/_logic/truth.py, ``cpdef ... (_ndarray_base a, ...)`` in cupy/_core).
ARRAY_ARGUMENTS: dict[str, tuple[type, tuple[int, ...]]] = {
    **{f"fft.{n}": (TypeError, (0,)) for n in (
        "fft", "ifft", "fft2", "ifft2", "fftn", "ifftn", "rfft", "irfft", "rfft2", "irfft2",
        "rfftn", "irfftn", "hfft", "ihfft")},
    **{n: (AttributeError, (0,)) for n in (
        "unique", "bincount", "where", "sum", "prod", "mean", "var", "std", "nanmean",
        "nanvar", "nanstd", "nanmedian", "argmax", "argmin", "nanargmax", "nanargmin", "amax",
        "amin", "max", "min", "ptp", "clip", "reshape", "ravel", "transpose", "swapaxes",
        "squeeze", "repeat", "flip", "fliplr", "flipud", "roll", "rot90", "zeros_like",
        "ones_like", "full_like", "empty_like")},
    "searchsorted": (NotImplementedError, (0,)),
    **{n: (AttributeError, (0, 1)) for n in ("isin", "in1d", "array_equal")},
    "full": (AttributeError, (1,)),
    **{n: (TypeError, (0,)) for n in (
        "nonzero", "argwhere", "flatnonzero", "count_nonzero", "all", "any", "median",
        "nansum", "nanprod", "cumsum", "cumprod", "nancumsum", "nancumprod", "broadcast_to",
        "expand_dims", "moveaxis", "array_split")},
}
SEQUENCES_ONLY = frozenset({"full"})


def refuse_numpy_0d(where: str, value: Any) -> None:
    """CuPy's ufuncs and operators refuse a NumPy array, 0-d included ("Unsupported type"):
    a 0-d one is refused here, before anything is enqueued (one of more dimensions is refused
    by any call)."""
    if type(value) is np.ndarray and value.ndim == 0:
        raise ArgumentError(f"{where}: Unsupported type {type(value)} (a 0-d NumPy array; "
                            "CuPy's ufuncs take arrays and scalars: pass x.item() or "
                            "asyncgpu.asarray(x))")


def refuse_sequences(path: str, args: tuple[Any, ...], ufunc: bool) -> None:
    """Refuse, as CuPy does, a list, tuple or 0-d NumPy array among a ufunc's operands (one of
    more dimensions is refused by any call), or a list, tuple or Python number where
    :data:`ARRAY_ARGUMENTS` says (NumPy takes them as arrays, so the call ran on ``sim``)."""
    if ufunc:
        for a in args:
            if type(a) in (list, tuple):
                raise TypeError(f"asyncgpu.cupy.{path}: Unsupported type {type(a)} (CuPy's "
                                "ufuncs take arrays and scalars; pass asyncgpu.asarray(...) "
                                "for host data)")
            refuse_numpy_0d(f"asyncgpu.cupy.{path}", a)
        return
    refused = ARRAY_ARGUMENTS.get(path)
    if refused is None:
        return
    exc, positions = refused
    host = (list, tuple) if path in SEQUENCES_ONLY else (list, tuple, int, float, complex, bool)
    for i in positions:
        if i < len(args) and type(args[i]) in host:
            kind = type(args[i]).__name__
            raise exc(f"asyncgpu.cupy.{path}: got {'an' if kind[0] in 'aeiou' else 'a'} "
                      f"{kind} as argument {i + 1} where CuPy takes an array, and fails on it "
                      "on the GPU; pass asyncgpu.asarray(...) for host data")


#: The ufunc methods CuPy 14.2 implements, by method: the ufuncs that have it (its
#: cupy/_core/_kernel.pyx: ``reduce`` and ``accumulate`` are ``sum``/``prod`` and
#: ``cumsum``/``cumprod``, ``reduceat`` is ``add``'s alone, ``at`` the ufuncs with a scatter
#: kernel), and their parameters; every other raises NotImplementedError at the call.
UFUNC_METHODS: dict[str, tuple[frozenset[str], tuple[str, ...]]] = {
    "reduce": (frozenset({"add", "multiply"}), ("array", "axis", "dtype", "out", "keepdims")),
    "accumulate": (frozenset({"add", "multiply"}), ("array", "axis", "dtype", "out")),
    "reduceat": (frozenset({"add"}), ("array", "indices", "axis", "dtype", "out")),
    "at": (frozenset({"add", "subtract", "maximum", "minimum", "bitwise_and", "bitwise_or",
                      "bitwise_xor"}), ("a", "indices", "b")),
}
#: ``at``'s array dtypes, by ufunc (cupy/_core/_routines_indexing.pyx's scatter kernels).
_AT_DTYPES = {
    "add": "int32 int64 float16 float32 float64 uint32 uint64",
    "subtract": "int32 uint32",
    "maximum": "int32 int64 float32 float64 uint32 uint64",
    "minimum": "int32 int64 float32 float64 uint32 uint64",
    "bitwise_and": "int32 int64 uint32 uint64",
    "bitwise_or": "int32 int64 uint32 uint64",
    "bitwise_xor": "int32 int64 uint32 uint64",
}


def check_ufunc_method(ufunc: str, method: str, args: tuple[Any, ...],
                       kwargs: dict[str, Any]) -> None:
    """Refuse, as CuPy does at the call, a ufunc method CuPy lacks for ``ufunc``, a keyword its
    method lacks (``initial``, ``where``), or an ``at`` on an array of a dtype its scatter
    kernel lacks (NumPy runs them all, so the call ran on ``sim``)."""
    known = UFUNC_METHODS.get(method)
    if known is None:
        return
    ufuncs, params = known
    if ufunc not in ufuncs:
        raise NotImplementedError(f"`cupy_{ufunc}.{method}` is not supported yet (CuPy "
                                  f"implements {method} for {', '.join(sorted(ufuncs))})")
    odd = [k for k in kwargs if k not in params[len(args):]]
    if odd or len(args) > len(params):
        raise TypeError(f"{ufunc}.{method}() got an unexpected argument "
                        f"{odd[0] if odd else 'by position'!r} (CuPy's {method} takes "
                        f"{', '.join(params)})")
    if method == "at" and args:
        dtype = getattr(args[0], "dtype", None)
        allowed = _AT_DTYPES[ufunc].split()
        if dtype is not None and dtype.name not in allowed:
            raise TypeError(f"cupy.{ufunc}.at only supports {', '.join(allowed)} as data type")


class _Ufunc:
    """NumPy's ufunc ``ufunc`` called as ``call`` computes it (CuPy's result), its methods and
    attributes NumPy's (``reduce``, ``nin``...)."""

    def __init__(self, ufunc: np.ufunc, call: Callable[..., Any]) -> None:
        self._ufunc, self._call = ufunc, call
        self.__name__ = ufunc.__name__

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._call(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ufunc, name)


def _sinc(x: Any) -> Any:
    """CuPy's sinc: 1 within 1e-9 of 0; of a real value sinpi(x) / (pi x), +0 at the integers
    (NumPy's sin(pi x) / (pi x) is 4e-17 off at 2); of a complex one, sin(pi x) / (pi x)."""
    x = np.asarray(x)
    with np.errstate(divide="ignore", invalid="ignore"):
        if x.dtype.kind == "c":
            ratio = np.sin(np.pi * x) / (np.pi * x)
        else:
            whole = np.isfinite(x) & (x == np.round(x))
            sinpi = np.where(whole, np.copysign(0.0, x), np.sin(np.pi * x))
            ratio = sinpi / (np.pi * x)
    return np.where(np.abs(x) > 1e-9, ratio, 1).astype(x.dtype)


class _Loops:
    """A one-input ufunc of CuPy that NumPy has as a plain function (``sinc``, ``i0``, ``fix``):
    NumPy's function computes it, in the first of CuPy's ``loops`` the input casts to
    safely (or in ``dtype``), with CuPy's ``out=``, ``casting=`` and ``dtype=``."""

    nin, nout = 1, 1

    def __init__(self, fn: Callable[..., Any], loops: str, name: str = "") -> None:
        self._fn, self._loops = fn, [np.dtype(c) for c in loops]
        self.__name__ = self.__qualname__ = name or fn.__name__
        self.__doc__ = fn.__doc__

    def __call__(self, x: Any, /, out: Any = None, *, casting: str = "same_kind",
                 dtype: Any = None) -> Any:
        a = np.asarray(x)
        loop = np.dtype(dtype) if dtype is not None else next(
            (t for t in self._loops if np.can_cast(a.dtype, t)), None)
        if loop is None or loop not in self._loops:     # (a dtype equals None: float64)
            raise TypeError(f"Wrong type ({a.dtype},) of arguments for cupy_{self.__name__} "
                            f"(CuPy's {self.__name__} computes in "
                            f"{', '.join(str(t) for t in self._loops)})")
        # (computed in double precision, then rounded: as CuPy's computes it in half, NumPy's
        # half would be 3e-4 off)
        work = a.astype(loop, casting=casting)
        if loop.kind in "fc":
            work = work.astype(np.promote_types(loop, np.float64))
        result = np.asarray(self._fn(work)).astype(loop)
        return into(out, result, casting)


def _round(a: Any, decimals: int = 0, out: Any = None) -> Any:
    """CuPy's rounding to ``decimals``: a half or single float (or complex) value scaled in
    double precision (``rint(x * 10**d) / 10**d``), where NumPy scales in the value's own
    precision (float32 0.35 to one decimal: 0.3 on the GPU, 0.4 in NumPy)."""
    x = np.asarray(a)
    if decimals == 0 or x.dtype not in (np.float16, np.float32, np.complex64):
        return np.round(a, decimals, out=out)
    wide = x.astype(np.complex128 if x.dtype.kind == "c" else np.float64)
    return into(out, np.round(wide, decimals).astype(x.dtype))


def _axes(axis: Any, ndim: int) -> tuple[int, ...]:
    """A reduction's axes as a tuple: all for None, one for an int, any sequence's (CuPy's
    reductions take a list too, where NumPy's refuse it)."""
    if axis is None:
        return tuple(range(ndim))
    return (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)


def _half_in_single(fn: Callable[..., Any]) -> Callable[..., Any]:
    """CuPy's ``sum``, ``prod`` and ``mean`` (and the NaN-skipping sum and product) of half
    floats, or into half floats (``dtype=float16``): each value as a half, accumulated in
    single precision, the result rounded to half. NumPy accumulates halves in half precision
    along a strided axis (4,096 ones summed down a column: 2,048)."""
    def call(a: Any, axis: Any = None, dtype: Any = None, out: Any = None,
             keepdims: bool = False) -> Any:
        x = np.asarray(a)
        if isinstance(axis, list):      # (CuPy's reductions take any sequence of axes)
            axis = tuple(axis)
        into_half = np.dtype(dtype) == np.float16 if dtype is not None \
            else x.dtype == np.float16
        if not into_half:
            return fn(a, axis=axis, dtype=dtype, out=out, keepdims=keepdims)
        single = fn(x.astype(np.float16).astype(np.float32), axis=axis, dtype=np.float32,
                    keepdims=keepdims)
        return into(out, np.asarray(single).astype(np.float16), "unsafe")

    call.__name__ = call.__qualname__ = fn.__name__
    return call


def _sequence_axis(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` taking a list of axes as a tuple, as CuPy's reductions do (NumPy's refuse one)."""
    @functools.wraps(fn)
    def call(a: Any, *args: Any, **kwargs: Any) -> Any:
        if "axis" in kwargs and isinstance(kwargs["axis"], list):
            kwargs["axis"] = tuple(kwargs["axis"])
        elif args and isinstance(args[0], list):
            args = (tuple(args[0]),) + args[1:]
        return fn(a, *args, **kwargs)
    return call


def _var(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: int = 0,
         keepdims: bool = False) -> Any:
    """CuPy's ``var``: the mean taken in the input's own type (with ``dtype`` given, an
    integer input's mean is truncated to an integer, as CuPy's ``mean`` into an integer type
    does), the squared deviations summed in half, single or else double precision as
    ``dtype`` (or the input) asks (``dtype=int64`` gives float64); NaN where ``ddof`` leaves
    no degree of freedom (NumPy: inf)."""
    x = np.asarray(a)
    if isinstance(axis, list):      # (CuPy's _var wraps it in a tuple and indexes a shape)
        raise TypeError("tuple indices must be integers or slices, not list (CuPy's var and "
                        "std take an int or a tuple of axes)")
    axes = _axes(axis, x.ndim)
    if dtype is None:
        mean_dt = np.dtype(np.float64) if x.dtype.kind in "biu" else x.dtype
        out_dt = mean_dt if mean_dt.kind != "c" else np.dtype(mean_dt.char.lower())
    else:
        mean_dt, out_dt = x.dtype, np.dtype(dtype)
    items = 1
    for ax in axes:
        items *= x.shape[ax]            # (CuPy's IndexError for an axis out of range)
    div = max(items - ddof, 0)
    alpha = 1.0 / div if div else float("nan")
    with np.errstate(all="ignore"):
        mean = np.mean(x, axis=axes, dtype=np.float64 if mean_dt.kind in "biu" else mean_dt,
                       keepdims=True).astype(mean_dt)
        deviation = x - mean
        if deviation.dtype.kind == "c":
            squares = deviation.real ** 2 + deviation.imag ** 2
        else:
            squares = deviation * deviation
        # (CuPy's kernels give half, single or else double precision, whatever dtype says)
        kernel = out_dt if out_dt in (np.float16, np.float32) else np.dtype(np.float64)
        work = np.float32 if kernel == np.float16 else kernel
        result = (np.sum(squares, axis=axes, dtype=work, keepdims=keepdims)
                  * np.asarray(alpha, work)).astype(kernel)
    return into(out, result, "unsafe")


def _nanvar(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: int = 0,
            keepdims: bool = False) -> Any:
    """CuPy's ``nanvar``: of integers its ``var``; of floats each non-NaN square deviation from
    the NaN-skipping mean divided by ``max(count - ddof, 0)`` (so, without a degree of freedom,
    inf, or NaN where a deviation is 0 or the slice holds a NaN; NumPy's answer is NaN) and
    summed in the input's type whatever ``dtype`` says; of complex values in their real type."""
    x = np.asarray(a)
    if x.dtype.kind in "biu":
        return _var(a, axis, dtype, out, ddof, keepdims)
    axes = _axes(axis, x.ndim)
    with np.errstate(all="ignore"):
        missing = np.isnan(x)
        count = np.sum(~missing, axis=axes, keepdims=True)
        mean = np.nansum(x, axis=axes, dtype=dtype, keepdims=True) / count
        alpha = np.maximum(count - ddof, 0)
        deviation = x - mean
        squares = (deviation.real ** 2 + deviation.imag ** 2 if deviation.dtype.kind == "c"
                   else deviation * deviation)
        terms = np.where(missing, 0, squares) / alpha
        kind = x.dtype if x.dtype.kind != "c" else np.dtype(x.dtype.char.lower())
        result = np.sum(terms, axis=axes, keepdims=keepdims).astype(kind)
    return into(out, result, "unsafe")


def _nanstd(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: int = 0,
            keepdims: bool = False) -> Any:
    """CuPy's ``nanstd``: the square root of its :func:`_nanvar`, in ``dtype`` if given."""
    variance = _nanvar(a, axis, dtype, None, ddof, keepdims)
    with np.errstate(invalid="ignore"):
        return np.sqrt(variance, out=out, dtype=dtype, casting="unsafe")


def _std(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: int = 0,
         keepdims: bool = False) -> Any:
    """CuPy's ``std``: the square root of its :func:`_var`."""
    variance = _var(a, axis, dtype, None, ddof, keepdims)
    with np.errstate(invalid="ignore"):
        return np.sqrt(variance, out=out, dtype=dtype, casting="unsafe")


#: The quantile methods CuPy 14.2 has (cupy/_statistics/order.py); NumPy's others raise there.
_QUANTILE_METHODS = ("linear", "lower", "higher", "midpoint", "nearest")
_QUANTILE_NAMES = {False: "Quantiles", True: "Percentiles"}


def _quantile(a: Any, q: Any, axis: Any = None, out: Any = None,
              overwrite_input: bool = False, method: str = "linear",
              keepdims: bool = False, *, interpolation: Any = None,
              percent: bool = False) -> Any:
    """CuPy's ``quantile``: the data sorted along the axes (NaN last), then taken at
    ``q * (n - 1)`` and interpolated between the two values around it, from the lower one
    below half way and from the upper one above it. NaN is not propagated (NumPy's answer is
    NaN for any slice holding one): only a value interpolated next to a NaN is NaN."""
    if interpolation is not None:
        method = interpolation
    if method not in _QUANTILE_METHODS:
        raise ValueError(f"'{method}' method is not yet supported. Please use any other "
                         "method. (CuPy's quantile takes "
                         f"{', '.join(_QUANTILE_METHODS)})")
    x = np.asarray(a)
    qs = np.asarray(q)
    # (CuPy's check: one q in range on each side)
    if not (np.count_nonzero(0.0 <= qs) and np.count_nonzero(qs <= 1.0)):
        raise ValueError(f"{_QUANTILE_NAMES[percent]} must be in the range "
                         f"[0, {100 if percent else 1}]")
    dtype = np.result_type(x, qs)
    zerod = qs.ndim == 0
    qs = qs.reshape(-1)
    axes = tuple(range(x.ndim)) if axis is None else \
        tuple(ax % x.ndim for ax in ((axis,) if isinstance(axis, int) else axis))
    keep = [d for d in range(x.ndim) if d not in axes]
    data = np.sort(np.transpose(x, keep + list(axes)).reshape(
        [x.shape[d] for d in keep] + [-1]), axis=-1)
    n = data.shape[-1]
    at = qs * (n - 1.0)
    with np.errstate(all="ignore"):
        if method in ("lower", "higher", "nearest"):
            rounding = {"lower": np.floor, "higher": np.ceil, "nearest": np.around}[method]
            result = np.take(data, rounding(at).astype(np.int64), axis=-1)
        else:
            if method == "midpoint":
                at = 0.5 * (np.floor(at) + np.ceil(at))
            below = np.floor(at).astype(np.int64)
            above = np.minimum(below + 1, n - 1)
            weight = (at - below).astype(dtype)
            low, high = np.take(data, below, axis=-1), np.take(data, above, axis=-1)
            diff = high - low
            result = np.where(weight < 0.5, low + diff * weight,
                              high - diff * (1 - weight)).astype(dtype)
    result = np.moveaxis(result, -1, 0)
    if zerod:
        result = result[0]
    if keepdims:
        shape = [1 if d in axes else x.shape[d] for d in range(x.ndim)]
        result = result.reshape(([] if zerod else [len(qs)]) + shape)
    return into(out, np.array(result, dtype=result.dtype, order="C"), "unsafe")


def _percentile(a: Any, q: Any, axis: Any = None, out: Any = None,
                overwrite_input: bool = False, method: str = "linear",
                keepdims: bool = False, *, interpolation: Any = None) -> Any:
    """CuPy's ``percentile``: :func:`_quantile` of ``q / 100``."""
    qs = np.asarray(q) if isinstance(q, (tuple, list)) else q
    return _quantile(a, qs / 100, axis, out, overwrite_input, method, keepdims,
                     interpolation=interpolation, percent=True)


def _astype(x: Any, dtype: Any, order: str = "K", casting: Any = None, subok: Any = None,
            copy: bool = True) -> Any:
    if casting is not None or subok is not None:
        raise TypeError(f"{'casting' if casting is not None else 'subok'} is not supported yet "
                        "(CuPy's astype)")
    return x.astype(dtype, order=order, copy=copy)


#: NumPy functions whose results differ from CuPy's, as CuPy gives them (the simulator runs
#: these instead; checked against CuPy 14 on the GPU): CuPy's eigenvalues are complex whatever
#: the values, NumPy's real where they all are; CuPy's solvers give NaNs for a singular matrix
#: where NumPy raises; CuPy's linalg results are plain tuples, its sorts stable, an integer to
#: a negative power 0 (or +-1), the integer reciprocal of 0 0; CuPy refuses an out of range
#: Python int in where and clip, a scalar in dot, a list of choices, a list to searchsorted,
#: and astype's casting; its take and put, its gathers and scatters and ravel_multi_index by
#: default wrap indices out of range around.
#: ``ndarray.<name>``: the method.
AS_CUPY: dict[str, Callable[..., Any]] = {
    "linalg.eig": _eig,
    "linalg.eigvals": lambda a: _complex(np.linalg.eigvals(a)),
    "linalg.inv": _unchecked(np.linalg.inv),
    "linalg.solve": _unchecked(np.linalg.solve),
    "linalg.cholesky": _unchecked(np.linalg.cholesky),
    "linalg.eigh": _plain(np.linalg.eigh),
    "linalg.qr": _plain(np.linalg.qr),
    "linalg.slogdet": _plain(np.linalg.slogdet),
    "linalg.svd": _unchecked(_plain(np.linalg.svd)),
    "linalg.pinv": _unchecked(np.linalg.pinv),
    "linalg.matrix_power": _unchecked(np.linalg.matrix_power),
    "linalg.tensorinv": _unchecked(np.linalg.tensorinv),
    "linalg.norm": _unchecked(np.linalg.norm),
    "linalg.cond": _unchecked(np.linalg.cond),
    "nanargmax": _nan_arg(np.nanargmax),
    "nanargmin": _nan_arg(np.nanargmin),
    # (CuPy sorts stably whatever kind says)
    "sort": _sort,
    "argsort": _argsort,
    "ndarray.argsort": lambda x, axis=-1, kind=None: _argsort(x, axis, kind),
    "ndarray.sort": _sort_in_place,
    "ndarray.partition": _partition_in_place,
    "lexsort": _lexsort,
    "histogram": _histogram,
    "bincount": _bincount,
    "kron": _kron,
    # (CuPy's are sorted, as unique's; NumPy 2's come in hash order)
    "unique_values": lambda x: np.unique(x),
    "where": _where,
    "clip": _clip,
    "sum": _half_in_single(np.sum),
    "prod": _half_in_single(np.prod),
    "nansum": _half_in_single(np.nansum),
    "nanprod": _half_in_single(np.nanprod),
    "mean": _half_in_single(np.mean),
    "var": _var,
    "std": _std,
    "nanvar": _nanvar,
    "nanstd": _nanstd,
    "quantile": _quantile,
    "percentile": _percentile,
    "ndarray.sum": _half_in_single(np.sum),
    "ndarray.prod": _half_in_single(np.prod),
    "ndarray.mean": _half_in_single(np.mean),
    "ndarray.var": _var,
    "ndarray.std": _std,
    "around": _round,
    "round": _round,
    "dot": _dot,
    "choose": _choose,
    "power": _Ufunc(np.power, _power),
    "floor_divide": _Ufunc(np.floor_divide, _floor_divide),
    "remainder": _Ufunc(np.remainder, _remainder),
    "mod": _Ufunc(np.remainder, _remainder),
    "divmod": _Ufunc(np.divmod, _divmod),
    "reciprocal": _Ufunc(np.reciprocal, _reciprocal),
    "sinc": _Loops(_sinc, "efdFD", "sinc"),
    "i0": _Loops(np.i0, "efd"),
    "fix": _Loops(np.fix, "?bBhHiIlLqQefd"),
    "ndarray.astype": _astype,
    # (the methods as their functions; take and put wrap an index out of range around)
    "ndarray.clip": lambda x, min=None, max=None, out=None: _clip(x, min, max, out=out),
    "ndarray.round": lambda x, decimals=0, out=None: _round(x, decimals, out),
    "ndarray.dot": lambda x, b, out=None: _dot(x, b, out),
    # (NumPy's method takes every positional argument for a choice: out by position was one)
    "ndarray.choose": _choose,
    # (the methods whose arguments NumPy's take otherwise: by other positions, or by position
    # alone, as CuPy's signatures have them)
    "ndarray.argmax": lambda x, axis=None, out=None, dtype=None, keepdims=False: _arg_into(
        x.argmax(axis=axis, keepdims=keepdims), out, dtype),
    "ndarray.argmin": lambda x, axis=None, out=None, dtype=None, keepdims=False: _arg_into(
        x.argmin(axis=axis, keepdims=keepdims), out, dtype),
    "ndarray.all": _sequence_axis(lambda x, axis=None, out=None, keepdims=False: x.all(
        axis=axis, out=out, keepdims=keepdims)),
    "ndarray.any": _sequence_axis(lambda x, axis=None, out=None, keepdims=False: x.any(
        axis=axis, out=out, keepdims=keepdims)),
    # (CuPy's reductions take a list of axes)
    **{name: _sequence_axis(getattr(np, name)) for name in (
        "amax", "amin", "max", "min", "all", "any", "nanmean", "median", "nanmax",
        "nanmin")},
    "ptp": _sequence_axis(np.ptp),
    "ndarray.fill": lambda x, value: x.fill(value),
    "ndarray.swapaxes": lambda x, axis1, axis2: x.swapaxes(axis1, axis2),
    "searchsorted": _searchsorted,
    "ndarray.searchsorted": _searchsorted,
    "take": lambda a, indices, axis=None, out=None: np.take(a, indices, axis, out, "wrap"),
    "take_along_axis": _take_along_axis,
    "put_along_axis": _put_along_axis,
    "ndarray.__getitem__": _getitem,
    "ndarray.__setitem__": _setitem,
    # (CuPy's mode wraps by default, NumPy's raises)
    "ravel_multi_index": lambda multi_index, dims, mode="wrap", order="C": np.ravel_multi_index(
        multi_index, dims, mode=mode, order=order),
    "ndarray.take": lambda x, indices, axis=None, out=None: np.take(x, indices, axis, out,
                                                                    "wrap"),
    "put": lambda a, ind, v, mode="wrap": np.put(a, ind, v, mode),
    "ndarray.put": lambda x, indices, values, mode="wrap": np.put(x, indices, values, mode),
}
