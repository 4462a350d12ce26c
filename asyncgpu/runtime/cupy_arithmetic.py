"""Elementwise arithmetic as CuPy's kernels compute it, where NumPy computes it otherwise.

The model
---------
The simulator computes CuPy's ufuncs with NumPy's (``asyncgpu.runtime.cupy_results``). These
are the ones whose results differ on the GPU, each computed with NumPy and then given as CuPy
gives it: an integer to a negative power is 0 (1 and +-1 for bases 1 and -1), the integer
reciprocal of 0 is 0; float ``//``, ``%`` and ``divmod`` are ``floor(x / y)`` and the fused
``x - floor(x / y) * y`` (:func:`fused_multiply_add`: CUDA's compiler fuses the multiply and the
subtraction); ``sinc``, ``i0`` and ``fix`` are ufuncs with CuPy's loops and ``sinc`` is exactly 0
at the integers; rounding to decimals scales half and single floats in double precision, and
rounds integers exactly.
:func:`into` writes a result into ``out=`` under the ufuncs' casting rule.

Invariant: each takes the arguments of CuPy's ufunc (``out=``, ``dtype=``, ``casting=``) and
gives what an H200 gave for the same call (``1.0 // 0.1`` is 10.0, NumPy's 9.0).

Example::

    ARITHMETIC["floor_divide"](np.array([1.0]), 0.1)      # array([10.]), as on the GPU
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np


def into(out: Any, result: np.ndarray, casting: str = "same_kind") -> Any:
    """``result``, written into ``out`` (an array or a one-array tuple) if given, under the
    ufuncs' output rule (``casting``): an int result is not written into a bool array."""
    if out is None:
        return result
    target = out[0] if isinstance(out, tuple) else out
    np.copyto(target, result, casting=casting)
    return target


def device_cast(x: Any, dtype: Any) -> Any:
    """``x.astype(dtype)`` as CUDA converts a float to an integer (CuPy's casts, checked on an
    H200 for NaN, infinities, out-of-range and negative values from every float to every
    integer type): toward zero, saturating at the type's bounds; an 8- or 16-bit integer is
    the 32-bit conversion's low bits (``300.7`` to ``int8`` is 44, ``inf`` is -1); NaN is 0,
    but for a double to a 32-bit integer (the lowest int32, or 2**31 unsigned) and for any
    float to a 64-bit one (the lowest int64, or 2**63 unsigned). NumPy leaves these
    undefined (x86 gives the lowest value). Other conversions are NumPy's. (A simulated
    Numba kernel's store converts one element as Numba's compile does, which differs for
    8-bit types and NaN: ``asyncgpu.backends.sim.elements.device_integer``.)"""
    x, dtype = np.asarray(x), np.dtype(dtype)
    if x.dtype.kind != "f" or dtype.kind not in "iu":
        return x.astype(dtype)
    wide = dtype if dtype.itemsize >= 4 else np.dtype(np.int32 if dtype.kind == "i" else
                                                      np.uint32)
    bounds = np.iinfo(wide)
    values = x.astype(np.float64)          # (exact for every float type)
    with np.errstate(invalid="ignore"):
        whole = np.trunc(values)
        nan = np.isnan(values)
        high = whole >= float(bounds.max)  # (2**63 - 1 rounds up to 2**63: still saturates)
        low = whole <= float(bounds.min)
        inside = ~(nan | high | low)
        out = np.zeros(x.shape, wide)
        out[inside] = whole[inside].astype(wide)
    out[high] = bounds.max
    out[low] = bounds.min
    if wide.itemsize == 8:
        out[nan] = bounds.min if wide.kind == "i" else 1 << 63
    elif x.dtype.itemsize == 8:
        out[nan] = bounds.min if wide.kind == "i" else 1 << 31
    return out if wide == dtype else out.astype(dtype)     # (the low bits)


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


def _reciprocal(x: Any, /, out: Any = None, **kwargs: Any) -> Any:
    """``1 / x``; computed in integers (``x`` an integer array and no other ``dtype=``), 0
    where ``x`` is 0, as CuPy computes it. (``x ** -1.0`` is this with ``dtype=float64``.)"""
    a = np.asarray(x)
    dtype = kwargs.get("dtype")
    loop = a.dtype if dtype is None else np.dtype(dtype)
    if loop.kind not in "iu" or not np.any(a == 0):
        return np.reciprocal(x, out=out, **kwargs)
    result = np.where(a == 0, 0, np.reciprocal(np.where(a == 0, 1, a))).astype(loop)
    return into(out, result, kwargs.get("casting", "same_kind"))


def _sign(x: Any, /, out: Any = None, **kwargs: Any) -> Any:
    """CuPy's ``sign``: of booleans in int8, its first loop a bool casts to (NumPy refuses)."""
    a = np.asarray(x)
    if a.dtype == np.bool_ and kwargs.get("dtype") is None:
        x = a.astype(np.int8)
    return np.sign(x, out=out, **kwargs)


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


def _c_divide(a: Any, b: Any) -> Any:
    """``a / b`` of 64-bit integers as C divides them: toward zero (NumPy's ``//`` floors)."""
    q = a // b
    return np.where((q < 0) & (q * b != a), q + 1, q)


def _round_integers(x: np.ndarray, decimals: int) -> np.ndarray:
    """CuPy's integers rounded to ``decimals`` < 0, its exact kernel (``cupy_round_neg_uint``,
    cupy/_core/core.pyx) step by step: with ``p = 10**(-decimals - 1)`` in wrapping 64-bit
    arithmetic, ``q = x / p / 100`` (unsigned for uint64), the remainder ``x - q*p*100`` as a
    32-bit ``int``, its last digit rounded half to even in single precision
    (``__float2ll_rn(r / (p * 10.0f))``), and ``(q*100 + that*10) * p`` stored in ``x``'s type.
    NumPy rounds through float64, which loses the digits of a value above 2**53."""
    shift = int(np.array(-decimals, np.int64))        # (CuPy's long long: OverflowError)
    p = np.array(pow(10, shift - 1, 1 << 64), np.uint64).view(np.int64)[()]
    with np.errstate(all="ignore"):
        if x.dtype == np.uint64:
            q = (x // p.astype(np.uint64) // np.uint64(100)).view(np.int64)
            v = x.view(np.int64)
        else:
            v = x.astype(np.int64)
            q = _c_divide(_c_divide(v, p), np.int64(100))
        r = (v - q * p * 100).astype(np.int32)
        last = np.rint(r.astype(np.float32) / (p.astype(np.float32) * np.float32(10)))
        result = (q * 100 + last.astype(np.int64) * 10) * p
    return np.asarray(result).astype(x.dtype)


def _round(a: Any, decimals: int = 0, out: Any = None) -> Any:
    """CuPy's rounding to ``decimals``: a half or single float (or complex) value scaled in
    double precision (``rint(x * 10**d) / 10**d``), where NumPy scales in the value's own
    precision (float32 0.35 to one decimal: 0.3 on the GPU, 0.4 in NumPy); integers to tens
    and beyond exactly (:func:`_round_integers`)."""
    x = np.asarray(a)
    if decimals < 0 and x.dtype.kind in "iu":
        return into(out, _round_integers(x, decimals))
    if decimals == 0 or x.dtype not in (np.float16, np.float32, np.complex64):
        return np.round(a, decimals, out=out)
    wide = x.astype(np.complex128 if x.dtype.kind == "c" else np.float64)
    return into(out, np.round(wide, decimals).astype(x.dtype))


#: The elementwise functions the simulator runs as CuPy computes them, by call path.
ARITHMETIC: dict[str, Callable[..., Any]] = {
    "around": _round,
    "round": _round,
    "power": _Ufunc(np.power, _power),
    "floor_divide": _Ufunc(np.floor_divide, _floor_divide),
    "remainder": _Ufunc(np.remainder, _remainder),
    "mod": _Ufunc(np.remainder, _remainder),
    "divmod": _Ufunc(np.divmod, _divmod),
    "reciprocal": _Ufunc(np.reciprocal, _reciprocal),
    "sign": _Ufunc(np.sign, _sign),
    "sinc": _Loops(_sinc, "efdFD", "sinc"),
    "i0": _Loops(np.i0, "efd"),
    "fix": _Loops(np.fix, "?bBhHiIlLqQefd"),
    "ndarray.round": lambda x, decimals=0, out=None: _round(x, decimals, out),
}
