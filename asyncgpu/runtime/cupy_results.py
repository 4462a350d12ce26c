"""What the simulator computes where NumPy's result differs from CuPy's: :data:`AS_CUPY`.

The model
---------
On ``sim`` NumPy computes CuPy's functions (``asyncgpu.runtime.cupy_surface``). Where NumPy
gives another result than CuPy 14 on the GPU for the same call (checked there, call by call),
the simulator runs the function of :data:`AS_CUPY` instead, under the call's path
(``"linalg.inv"``; ``"ndarray.<name>"``: the method, its array first). Each one computes with
NumPy and then gives what CuPy gives: a value, a type (CuPy's eigenvalues are complex), a
wrapped index where NumPy raises, NaN where NumPy's linear algebra raises and CuPy does not
check, or CuPy's refusal where NumPy accepts (a list of choices). The elementwise arithmetic
(:mod:`asyncgpu.runtime.cupy_arithmetic`) and the reductions and statistics
(:mod:`asyncgpu.runtime.cupy_statistics`) have modules of their own, whose tables are part of
:data:`AS_CUPY`; what CuPy refuses at the call is :mod:`asyncgpu.runtime.cupy_refusals`.

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

from .cupy_arithmetic import ARITHMETIC, device_cast, into
from .cupy_refusals import scatter_kind
from .cupy_statistics import STATISTICS


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


def _arg_over(x: Any, name: str, axis: Any, keepdims: bool) -> Any:
    """CuPy's ``argmax``/``argmin`` (``name``) over ``axis``: a tuple of axes is reduced
    together, the index counting through them flattened in the tuple's order (its reduction
    kernel's; NumPy takes one axis)."""
    x = np.asarray(x)
    if not isinstance(axis, tuple):
        return getattr(x, name)(axis=axis, keepdims=keepdims)
    for ax in axis:
        if not -x.ndim <= ax < x.ndim:
            raise np.exceptions.AxisError(ax, x.ndim)
    axes = [ax % x.ndim for ax in axis]
    if len(set(axes)) != len(axes):
        raise ValueError("duplicate value in 'axis'")
    kept = x.ndim - len(axes)
    moved = np.moveaxis(x, axes, list(range(kept, x.ndim)))
    result = getattr(moved.reshape(moved.shape[:kept] + (-1,)), name)(axis=-1)
    return np.expand_dims(result, sorted(axes)) if keepdims else result


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
                      _stored(values, arr.dtype), axis)


def _stored(values: Any, dtype: Any) -> Any:
    """``values`` as CuPy's ``put``, ``put_along_axis`` and ``fill_diagonal`` store them in an
    array of ``dtype``: an array's floats into an integer array converted as the GPU converts
    (:func:`device_cast`; the kernel casts each element), an array otherwise as given; a
    number or a list converted on the host first, as CuPy converts it (``core.array(values,
    dtype=...)``, NumPy's conversion: NaN raises ``ValueError``, a value out of the type's
    range ``OverflowError``)."""
    if not isinstance(values, np.ndarray):
        return np.array(values, dtype=dtype)
    if values.dtype.kind == "f" and np.dtype(dtype).kind in "iu":
        return device_cast(values, dtype)
    return values


def _place(arr: Any, mask: Any, vals: Any) -> None:
    """CuPy's ``place`` (cupy/_indexing/insert.py): the values made an array and put at the
    mask's true positions by ``arr.put``, whose kernel casts each (:func:`device_cast`), where
    NumPy's ``place`` refuses a cast that is not safe (float values into an integer array)."""
    np.place(arr, mask, device_cast(np.asarray(vals), arr.dtype))


def _putmask(a: Any, mask: Any, values: Any) -> None:
    """CuPy's ``putmask`` (cupy/_indexing/insert.py): the array, the mask and the values are
    device arrays (the values a number too), else ``TypeError``; NumPy's takes lists."""
    for name, v in (("a", a), ("mask", mask)):
        if not isinstance(v, np.ndarray):
            raise TypeError(f"`{name}` should be of type cupy.ndarray (CuPy's putmask): pass "
                            "asyncgpu.asarray(...)")
    if not (np.isscalar(values) or isinstance(values, np.ndarray)):
        raise TypeError("`values` should be of type cupy.ndarray (CuPy's putmask takes an "
                        "array or a number): pass asyncgpu.asarray(...)")
    np.putmask(a, mask, values)


def _ravel(a: Any, order: str = "C") -> Any:
    """CuPy's ``ravel``: the array reshaped to one dimension, a view wherever a reshape can
    be one (NumPy's ravel copies a strided array: ``x[::-2]``); ``'F'`` the transpose's,
    ``'A'`` ``'F'`` for an array Fortran- but not C-contiguous; ``'K'`` is not implemented."""
    if order in ("K", "k"):
        raise NotImplementedError("ravel with order='K' not yet implemented (CuPy's ravel)")
    if order in ("A", "a"):
        flags = a.flags
        order = "F" if flags.f_contiguous and not flags.c_contiguous else "C"
    if order in ("F", "f"):
        a = a.T
    elif order not in ("C", "c"):
        raise ValueError(f"order must be one of 'C', 'F', 'A', or 'K' (got {order!r})")
    return np.reshape(a, -1)


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


def _compress(condition: Any, a: Any, axis: Any = None, out: Any = None) -> Any:
    """CuPy's ``compress``: ``a`` taken at the condition's nonzero positions, which may pass
    the axis' end (its length is not checked: they wrap around, as :func:`_take`'s)."""
    if np.isscalar(condition):
        raise ValueError("condition must be a 1-d array")
    if not isinstance(condition, np.ndarray):
        condition = np.array(condition, dtype=int)
        if condition.ndim != 1:
            raise ValueError("condition must be a 1-d array")
    return np.take(a, np.nonzero(condition)[0], axis, out, "wrap")


def _scatter(ufunc: np.ufunc) -> Callable[..., Any]:
    """CuPy's ``ufunc.at`` (``_scatter_op``), by its index (:func:`scatter_kind`): with an index
    array, its scatter kernels compute in the array's dtype, the values converted to it first
    (numbers and lists on the host, ``numpy.array(b, dtype=a.dtype)``, raising where NumPy's
    conversion raises; an array on the device, :func:`device_cast`), and an index array's
    values out of range wrap around, as ``a[idx] = v`` wraps them; with integers and slices
    alone, the ufunc writes into the view they select, under its casting rule (a float into an
    integer array is refused). NumPy's ``at`` computes in the operands' common type and casts
    the results back unsafely."""
    def at(a: Any, indices: Any, b: Any = None) -> None:
        if scatter_kind(indices) == "view":
            items = list(indices) if type(indices) is tuple else [indices]
            if not any(k is Ellipsis for k in items):
                items.append(Ellipsis)          # (a view, 0-d included, not an element)
            view = a[tuple(items)]
            ufunc(view, b, out=view)
            return
        if b is not None:
            b = device_cast(b, a.dtype) if isinstance(b, np.ndarray) else np.array(b, a.dtype)
        ufunc.at(a, _wrapped(a.shape, indices), b)
    at.__name__ = f"{ufunc.__name__}.at"
    return at


def _diag(v: Any, k: int = 0) -> Any:
    """CuPy's ``diag``: of a 2-D array, a copy of its diagonal (``cupy.array(v.diagonal(k))``;
    NumPy's is a view, which a later write to either array would change)."""
    if np.ndim(v) == 2:
        return np.array(np.diagonal(v, k))
    return np.diag(v, k)


def _meshgrid(*xi: Any, **kwargs: Any) -> Any:
    """CuPy's ``meshgrid`` (cupy/_creation/ranges.py): its keywords and 1-D device arrays
    checked, and of one array (or none) the arrays themselves, not copies (NumPy copies)."""
    indexing = kwargs.pop("indexing", "xy")
    copy = bool(kwargs.pop("copy", True))
    sparse = bool(kwargs.pop("sparse", False))
    if kwargs:
        raise TypeError(f"meshgrid() got an unexpected keyword argument '{next(iter(kwargs))}'")
    if indexing not in ("xy", "ij"):
        raise ValueError("Valid values for `indexing` are 'xy' and 'ij'.")
    for x in xi:
        if x.ndim != 1:
            raise ValueError("input has to be 1d")
        if not isinstance(x, np.ndarray):
            raise ValueError("input has to be cupy.ndarray")
    if len(xi) <= 1:
        return tuple(xi)
    return tuple(np.meshgrid(*xi, copy=copy, sparse=sparse, indexing=indexing))


def _arange(start: Any, stop: Any = None, step: Any = 1, dtype: Any = None) -> Any:
    """CuPy's ``arange``: float64 if a bound or the step is a float, else an integer type; its
    length ``ceil((stop - start) / step)`` worked out first, so that a complex bound and an
    infinite range are refused as there (``TypeError``, ``OverflowError``)."""
    if dtype is None:
        kinds = [v.dtype.kind if isinstance(v, (np.ndarray, np.generic)) else
                 np.dtype(type(v)).kind for v in (start, stop, step)]
        dtype = float if "f" in kinds else int
    lo, hi = (0, start) if stop is None else (start, stop)
    step = 1 if step is None else step
    int(np.ceil((hi - lo) / step))
    return np.arange(lo, hi, step, dtype=dtype)


def _linspace(start: Any, stop: Any, num: int = 50, endpoint: bool = True,
              retstep: bool = False, dtype: Any = None, axis: int = 0) -> Any:
    """CuPy's ``linspace``: between two numbers it computes in double precision, so a
    complex one is refused (``TypeError``, as ``float()`` refuses it there)."""
    if not isinstance(start, np.ndarray) and not isinstance(stop, np.ndarray) and num >= 0:
        float(start), float(stop)
    return np.linspace(start, stop, num, endpoint, retstep, dtype, axis)


def _getitem(self: Any, index: Any) -> Any:
    return self[_wrapped(self.shape, index)]


def _setitem(self: Any, index: Any, value: Any) -> None:
    if isinstance(value, np.ndarray):
        value = device_cast(value, self.dtype)
        if value.size == 1 and value.ndim:
            # (CuPy's copy broadcasts one element to any target, one element included; NumPy 2
            # refuses a[0] = array([5]))
            value = value.reshape(())
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


def _searchsorted(a: Any, v: Any, side: str = "left", sorter: Any = None) -> Any:
    if type(v) in (list, tuple) or isinstance(v, np.generic):
        raise NotImplementedError("Only python scalars or ndarrays are supported as v (CuPy's "
                                  "searchsorted): pass asyncgpu.asarray(v), or a Python number")
    side = "right" if side == "right" else "left"      # (CuPy's: anything else is left)
    if sorter is not None and np.size(a):
        # (CuPy's: the data taken in sorter's order, an index out of range wrapped around)
        sorter = np.asarray(sorter)
        if sorter.dtype.kind not in "iu":
            raise TypeError("sorter must be of integer type")
        if sorter.size != np.size(a):
            raise ValueError("sorter.size must equal a.size")
        a, sorter = np.take(a, sorter, mode="wrap"), None
    return np.searchsorted(a, v, side=side, sorter=sorter)


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


def _astype(x: Any, dtype: Any, order: str = "K", casting: Any = None, subok: Any = None,
            copy: bool = True) -> Any:
    if casting is not None or subok is not None:
        raise TypeError(f"{'casting' if casting is not None else 'subok'} is not supported yet "
                        "(CuPy's astype)")
    with np.errstate(invalid="ignore"):     # (NaN to an integer: device_cast's answer)
        result = x.astype(dtype, order=order, copy=copy)
    if x.dtype.kind == "f" and result.dtype.kind in "iu":
        result[...] = device_cast(x, dtype)     # (NumPy's layout, the GPU's values)
    return result


def _converting(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``asarray``/``array`` of a device array to another dtype, converted as the GPU
    converts (:func:`device_cast`)."""
    def convert(a: Any, dtype: Any = None, *args: Any, **kwargs: Any) -> Any:
        if dtype is not None and isinstance(a, np.ndarray) and a.dtype.kind == "f" \
                and np.dtype(dtype).kind in "iu":
            a = device_cast(a, dtype)
        return fn(a, dtype, *args, **kwargs)
    return convert


def _copyto(dst: Any, src: Any, casting: str = "same_kind", where: Any = True) -> None:
    """CuPy's ``copyto``: an array, or a float (``1e10``, ``np.float32(3e9)``) into an integer
    array, converted on the device (:func:`device_cast`), after the casting rule is checked on
    the host (``numpy.copyto`` into a 0-d array, as CuPy checks a number)."""
    if isinstance(src, np.ndarray) and np.can_cast(src.dtype, dst.dtype, casting):
        src = device_cast(src, dst.dtype)
    elif isinstance(src, (float, np.floating)) and np.dtype(dst.dtype).kind in "iu":
        with np.errstate(invalid="ignore"):
            np.copyto(np.empty((), dst.dtype), src, casting=casting)
        src = device_cast(np.asarray(src), dst.dtype)
    np.copyto(dst, src, casting=casting, where=where)


def _full(shape: Any, fill_value: Any, dtype: Any = None, order: str = "C") -> Any:
    """CuPy's ``full``: an empty array ``copyto``'d with the value (:func:`_copyto`, unsafe: a
    float into an integer array converted as the GPU converts it)."""
    if dtype is None:
        dtype = np.array(fill_value).dtype
    a = np.empty(shape, dtype, order=order)
    _copyto(a, fill_value, casting="unsafe")
    return a


def _full_like(a: Any, fill_value: Any, dtype: Any = None, order: str = "K", subok: Any = None,
               shape: Any = None) -> Any:
    """CuPy's ``full_like``: as :func:`_full`, of ``a``'s shape, dtype and layout."""
    kwargs = {} if subok is None else {"subok": subok}
    result = np.empty_like(a, dtype=dtype, order=order, shape=shape, **kwargs)
    _copyto(result, fill_value, casting="unsafe")
    return result


#: NumPy functions whose results differ from CuPy's, as CuPy gives them (the simulator runs
#: these instead; checked against CuPy 14 on the GPU): CuPy's eigenvalues are complex whatever
#: the values, NumPy's real where they all are; CuPy's solvers give NaNs for a singular matrix
#: where NumPy raises; CuPy's linalg results are plain tuples, its sorts stable, an integer to
#: a negative power 0 (or +-1), the integer reciprocal of 0 0; CuPy refuses an out of range
#: Python int in where and clip, a scalar in dot, a list of choices, a list to searchsorted,
#: and astype's casting; its take and put, its gathers and scatters and ravel_multi_index by
#: default wrap indices out of range around; its diag of a matrix is a copy.
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
    "unique_values": lambda x: np.unique(x, equal_nan=False),
    "where": _where,
    "clip": _clip,
    "dot": _dot,
    "choose": _choose,
    "ndarray.astype": _astype,
    "asarray": _converting(np.asarray),
    "array": _converting(np.array),
    "asanyarray": _converting(np.asanyarray),
    "ascontiguousarray": _converting(np.ascontiguousarray),
    "copyto": _copyto,
    "full": _full,
    "full_like": _full_like,
    # (the methods as their functions; take and put wrap an index out of range around)
    "ndarray.clip": lambda x, min=None, max=None, out=None: _clip(x, min, max, out=out),
    "ndarray.dot": lambda x, b, out=None: _dot(x, b, out),
    # (NumPy's method takes every positional argument for a choice: out by position was one)
    "ndarray.choose": _choose,
    # (the methods whose arguments NumPy's take otherwise: by other positions, or by position
    # alone, as CuPy's signatures have them)
    "ndarray.argmax": lambda x, axis=None, out=None, dtype=None, keepdims=False: _arg_into(
        _arg_over(x, "argmax", axis, keepdims), out, dtype),
    "ndarray.argmin": lambda x, axis=None, out=None, dtype=None, keepdims=False: _arg_into(
        _arg_over(x, "argmin", axis, keepdims), out, dtype),
    "argmax": lambda a, axis=None, dtype=None, out=None, keepdims=False: _arg_into(
        _arg_over(a, "argmax", axis, keepdims), out, dtype),
    "argmin": lambda a, axis=None, dtype=None, out=None, keepdims=False: _arg_into(
        _arg_over(a, "argmin", axis, keepdims), out, dtype),
    "ndarray.fill": lambda x, value: x.fill(value),
    **ARITHMETIC,
    **STATISTICS,
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
    "place": _place,
    "putmask": _putmask,
    "put": lambda a, ind, v, mode="wrap": np.put(a, ind, _stored(v, a.dtype), mode),
    "fill_diagonal": lambda a, val, wrap=False: np.fill_diagonal(a, _stored(val, a.dtype),
                                                                 wrap),
    # (the function is the method, as in CuPy: a view wherever one can be)
    "ravel": _ravel,
    "ndarray.ravel": _ravel,
    "compress": _compress,
    "arange": _arange,
    "diag": _diag,
    "meshgrid": _meshgrid,
    "linspace": _linspace,
    "ndarray.compress": lambda x, condition, axis=None, out=None: _compress(condition, x, axis,
                                                                            out),
    **{f"{name}.at": _scatter(getattr(np, name)) for name in (
        "add", "subtract", "maximum", "minimum", "bitwise_and", "bitwise_or", "bitwise_xor")},
    "ndarray.put": lambda x, indices, values, mode="wrap": np.put(
        x, indices, _stored(values, x.dtype), mode),
}
