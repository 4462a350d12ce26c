"""Reductions and statistics as CuPy's kernels compute them, where NumPy's differ.

The model
---------
The simulator computes CuPy's reductions with NumPy's (``asyncgpu.runtime.cupy_results``).
These give CuPy's results where NumPy's differ, as CuPy 14.2's source computes them: half
floats summed, multiplied and averaged in single precision; ``var`` and ``std`` with the mean in
the input's own type and a result of half, single or double precision; ``nanvar`` and
``nanstd`` in the input's type, divided by ``max(count - ddof, 0)``; ``quantile`` and
``percentile`` interpolating the sorted data without propagating NaN; and a list of axes taken
as a tuple, as CuPy's reductions take any sequence (its ``var`` and ``std`` refuse one).

Invariant: each takes the arguments of CuPy's function (its ``out=``, ``dtype=``,
``keepdims=``) and gives what an H200 gave for the same call.

Example::

    STATISTICS["quantile"](np.array([1.0, np.nan, 3.0]), 0.25)     # 2.0 (NumPy's: nan)
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import numpy as np

from .cupy_arithmetic import into


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
        # (summed in the kernel's own type, half included: a half variance of large values
        # overflows to inf as on the GPU; scaled by a single-precision alpha below double)
        scale = np.float64 if kernel == np.float64 else np.float32
        result = (np.sum(squares, axis=axes, dtype=kernel, keepdims=keepdims)
                  * np.asarray(alpha, scale)).astype(kernel)
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
    # (CuPy's type: of the data with q as given, a Python number weak as in NumPy 2; a list
    # or tuple an array first)
    dtype = np.result_type(x, qs if isinstance(q, (list, tuple)) else q)
    if qs.ndim > 1:
        raise ValueError(f"Expected q to have a dimension of 1. Actual: {qs.ndim} != 1")
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


#: The reductions and statistics the simulator runs as CuPy computes them, by call path.
STATISTICS: dict[str, Callable[..., Any]] = {
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
    "ndarray.all": _sequence_axis(lambda x, axis=None, out=None, keepdims=False: x.all(
        axis=axis, out=out, keepdims=keepdims)),
    "ndarray.any": _sequence_axis(lambda x, axis=None, out=None, keepdims=False: x.any(
        axis=axis, out=out, keepdims=keepdims)),
    # (CuPy's reductions take a list of axes)
    **{name: _sequence_axis(getattr(np, name)) for name in (
        "amax", "amin", "max", "min", "all", "any", "nanmean", "median", "nanmax",
        "nanmin")},
    "ptp": _sequence_axis(np.ptp),
}
