"""CuPy's public surface on the ``sim`` backend: which names exist and what runs for them.

A program that passes on ``sim`` must run on the GPU, so on ``sim`` ``asyncgpu.cupy`` follows
CuPy's namespace, not NumPy's: the names, the ``random.Generator`` methods and the signatures
come from ``asyncgpu/data/cupy_surface.json``, a description of CuPy written by
``tools/cupy_surface.py`` from an installed CuPy. NumPy only computes. On ``cuda`` none of
this is used: the runtime reads CuPy's own namespace.

For a CuPy function or ufunc the simulator runs, in this order:

1. NumPy's function of the same path;
2. NumPy's function for another CuPy name bound to the very same object (CuPy's ``trapz`` *is*
   its ``trapezoid``);
3. a CuPy function whose body only returns another CuPy function called with its own
   parameters (``product`` returns ``prod(a, axis, dtype, out, keepdims)``, ``msort``
   returns ``sort(a, axis=0)``): that call, with NumPy's function;
4. the replacement NumPy names in its message for a removed name (``round_``: "Use
   ``np.round`` instead");
5. :data:`_SAME_AS`: equivalences read off CuPy's implementation where no rule above shows
   them (``in1d``).

A name CuPy lacks raises the ``AttributeError`` the GPU gives; a CuPy name with no NumPy
counterpart raises :class:`NotOnSimulatorError` when it is looked up. Calls are bound to CuPy's
signature first, so a keyword CuPy refuses is refused on ``sim`` too, before anything is
enqueued.
"""

from __future__ import annotations

import ast
import functools
import inspect
import json
import re
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..core.errors import ArgumentError, NotOnSimulatorError

PATH = Path(__file__).parent.parent / "data" / "cupy_surface.json"     # (asyncgpu/data)
FORMAT = 1
_HINT = ("asyncgpu.cupy follows CuPy's namespace on every backend, so this program would fail "
         "on the GPU too")


@functools.lru_cache(maxsize=1)
def surface() -> dict[str, Any]:
    """The checked-in description of CuPy's public surface."""
    data = json.loads(PATH.read_text())
    if data.get("format") != FORMAT:
        raise RuntimeError(f"{PATH} has format {data.get('format')!r}, this asyncgpu reads "
                           f"{FORMAT}: regenerate it with tools/cupy_surface.py --write")
    return data


def _module_name(prefix: str) -> str:
    return "cupy" + ("." + prefix if prefix else "")


def lookup(prefix: str, name: str) -> dict[str, Any]:
    """The entry of CuPy's ``<prefix>.<name>``; the GPU's ``AttributeError`` if it has none."""
    entries = surface()["namespaces"].get(prefix)
    entry = None if entries is None else entries.get(name)
    if entry is None:
        raise AttributeError(f"module '{_module_name(prefix)}' has no attribute '{name}' "
                             f"({_HINT})", name=name)
    return entry


def unavailable(path: str, what: str = "") -> NotOnSimulatorError:
    return NotOnSimulatorError(
        f"asyncgpu.cupy.{path}: cupy.{path} exists on the GPU{what} but has no NumPy "
        "counterpart the sim backend could run, so it is not available on the simulator; "
        "run this part on the cuda backend or use a function both have"
    )


def _numpy(path: str) -> Any:
    obj: Any = np
    for part in path.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def _split(path: str) -> tuple[str, str]:
    prefix, _, name = path.rpartition(".")
    return prefix, name


def _in1d(ar1: Any, ar2: Any, assume_unique: bool = False, invert: bool = False) -> Any:
    # CuPy's in1d ravels both arrays and tests each element of the first for membership in
    # the second: NumPy's isin keeps the first array's shape, raveled it is the same answer
    return np.isin(ar1, ar2, assume_unique=assume_unique, invert=invert).ravel()


#: CuPy functions NumPy 2 dropped, equal to a NumPy expression that no rule of the module
#: docstring derives (checked against CuPy on the GPU by ``tools/cupy_surface.py --coverage``).
_SAME_AS: dict[str, Callable[..., Any]] = {"in1d": _in1d}
_REMOVED = re.compile(r"Use `np\.([\w.]+)` instead")


def _removed_replacement(path: str) -> Any:
    prefix, name = _split(path)
    mod = _numpy(prefix) if prefix else np
    try:
        getattr(mod, name)
    except AttributeError as exc:
        m = _REMOVED.search(str(exc))
        if m is not None:
            return _numpy(m.group(1))
    return None


def _delegated(entry: dict[str, Any], prefix: str) -> Any:
    spec = entry.get("delegates")
    if not spec:
        return None
    target = _numpy_function(f"{prefix}.{spec['to']}" if prefix else spec["to"], set())
    if target is None:
        return None
    try:     # the defaults CuPy passes on for arguments not given: literals only
        params = inspect.Signature([
            inspect.Parameter(p["name"], getattr(inspect.Parameter, p["kind"]),
                              default=ast.literal_eval(p["default"]) if "default" in p
                              else inspect.Parameter.empty)
            for p in entry["params"]
        ])
    except (ValueError, SyntaxError, TypeError):
        return None
    args, kwargs, const = spec["args"], spec["kwargs"], spec["const"]

    def call(*a: Any, **k: Any) -> Any:
        bound = params.bind(*a, **k)
        bound.apply_defaults()
        given = bound.arguments
        return target(*[given[n] for n in args],
                      **{key: given[n] for key, n in kwargs.items()}, **const)

    return call


def _numpy_function(path: str, seen: set[str]) -> Any:
    if path in seen:
        return None
    seen.add(path)
    prefix, name = _split(path)
    try:
        entry = lookup(prefix, name)
    except AttributeError:
        return None
    fn = _numpy(path)
    if callable(fn) and not isinstance(fn, type):
        return fn
    for other in entry.get("alias_of", ()):
        fn = _numpy_function(f"{prefix}.{other}" if prefix else other, seen)
        if fn is not None:
            return fn
    return _delegated(entry, prefix) or _removed_replacement(path) or _SAME_AS.get(path)


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
    return result if out is None else _into(out, result)


def _take_along_axis(a: Any, indices: Any, axis: Any) -> Any:
    """NumPy's ``take_along_axis`` with an index out of range wrapped around, as CuPy's (on the
    GPU, 14.2: index 5 of 3 elements takes element 2; NumPy raises)."""
    a = np.asarray(a)
    n = a.size if axis is None else a.shape[axis]
    indices = np.asarray(indices)
    return np.take_along_axis(a, np.mod(indices, n) if n else indices, axis)


def _put_along_axis(arr: Any, indices: Any, values: Any, axis: Any) -> None:
    """NumPy's ``put_along_axis`` with an index out of range wrapped around, as CuPy's (on the
    GPU, 14.2: index 5 of 3 elements writes element 2; NumPy raises)."""
    n = arr.size if axis is None else arr.shape[axis]
    indices = np.asarray(indices)
    np.put_along_axis(arr, np.mod(indices, n) if n else indices, values, axis)


def _wrapped(shape: tuple[int, ...], index: Any) -> Any:
    """``index`` with each integer array in it wrapped into its dimension's range, as CuPy's
    integer-array indexing wraps an index out of range (``a[cupy.array([5])]`` of 3 elements is
    element 2, on the GPU, 14.2; NumPy raises). Integers alone are checked as in NumPy."""
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
        if (isinstance(k, np.ndarray) and k.dtype.kind in "iu" and dim < len(shape)
                and shape[dim]):
            items[i] = np.mod(k, shape[dim])
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
        return _into(out, result.astype(np.int64))

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
    for v in (a_min, a_max):
        _int_bounds(v, [a])
    return np.clip(a, a_min, a_max, out=out, **kwargs)


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


def _into(out: Any, result: np.ndarray, casting: str = "same_kind") -> Any:
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
    return _into(out, result, kwargs.get("casting", "same_kind"))


def _searchsorted(a: Any, v: Any, side: str = "left", sorter: Any = None) -> Any:
    if type(v) in (list, tuple):
        raise NotImplementedError("Only python scalars or ndarrays are supported as v (CuPy's "
                                  "searchsorted): pass asyncgpu.asarray(v)")
    return np.searchsorted(a, v, side=side, sorter=sorter)


def _reciprocal(x: Any, /, out: Any = None, **kwargs: Any) -> Any:
    """``1 / x``; for integers 0 where ``x`` is 0, as CuPy computes it."""
    a = np.asarray(x)
    if a.dtype.kind not in "iu" or not np.any(a == 0):
        return np.reciprocal(x, out=out, **kwargs)
    result = np.where(a == 0, 0, np.reciprocal(np.where(a == 0, 1, a))).astype(a.dtype)
    return _into(out, result, kwargs.get("casting", "same_kind"))


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


class _Loops:
    """A one-input ufunc of CuPy that NumPy has as a plain function (``sinc``, ``i0``, ``fix``):
    NumPy's function computes it, in the first of CuPy's ``loops`` the input casts to
    safely (or in ``dtype``), with CuPy's ``out=``, ``casting=`` and ``dtype=``."""

    nin, nout = 1, 1

    def __init__(self, fn: Callable[..., Any], loops: str) -> None:
        self._fn, self._loops = fn, [np.dtype(c) for c in loops]
        self.__name__ = self.__qualname__ = fn.__name__
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
        # (computed in double precision: CuPy's sinc is sinpi(x) / (pi x), exact at integers
        # in half precision too, where NumPy's sin(pi x) / (pi x) in half is 3e-4 off)
        work = a.astype(loop, casting=casting)
        if loop.kind in "fc":
            work = work.astype(np.promote_types(loop, np.float64))
        result = np.asarray(self._fn(work)).astype(loop)
        return _into(out, result, casting)


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
    "argsort": lambda a, axis=-1, kind=None: np.argsort(a, axis=axis, kind="stable"),
    "ndarray.argsort": lambda x, axis=-1, kind=None: x.argsort(axis=axis, kind="stable"),
    "where": _where,
    "clip": _clip,
    "dot": _dot,
    "choose": _choose,
    "power": _Ufunc(np.power, _power),
    "reciprocal": _Ufunc(np.reciprocal, _reciprocal),
    "sinc": _Loops(np.sinc, "efdFD"),
    "i0": _Loops(np.i0, "efd"),
    "fix": _Loops(np.fix, "?bBhHiIlLqQefd"),
    "ndarray.astype": _astype,
    # (the methods as their functions; take and put wrap an index out of range around)
    "ndarray.clip": lambda x, min=None, max=None, out=None: _clip(x, min, max, out=out),
    "ndarray.dot": lambda x, b, out=None: _dot(x, b, out),
    # (NumPy's method takes every positional argument for a choice: out by position was one)
    "ndarray.choose": _choose,
    # (the methods whose arguments NumPy's take otherwise: by other positions, or by position
    # alone, as CuPy's signatures have them)
    "ndarray.argmax": lambda x, axis=None, out=None, dtype=None, keepdims=False: _arg_into(
        x.argmax(axis=axis, keepdims=keepdims), out, dtype),
    "ndarray.argmin": lambda x, axis=None, out=None, dtype=None, keepdims=False: _arg_into(
        x.argmin(axis=axis, keepdims=keepdims), out, dtype),
    "ndarray.all": lambda x, axis=None, out=None, keepdims=False: x.all(
        axis=axis, out=out, keepdims=keepdims),
    "ndarray.any": lambda x, axis=None, out=None, keepdims=False: x.any(
        axis=axis, out=out, keepdims=keepdims),
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


@functools.lru_cache(maxsize=None)
def numpy_function(path: str) -> Callable[..., Any]:
    """What the simulator runs for CuPy's function or ufunc ``path`` (see the module docstring);
    :class:`NotOnSimulatorError` when nothing does, ``AttributeError`` when CuPy has no such
    name."""
    prefix, name = _split(path)
    entry = lookup(prefix, name)
    fn = AS_CUPY.get(path) or _numpy_function(path, set())
    if fn is None:
        raise unavailable(path)
    return as_cupy_signature(fn, entry)


@functools.lru_cache(maxsize=None)
def sim_function(path: str) -> Callable[..., Any] | None:
    """What the simulator calls for the call ``path`` (``"ndarray.<name>"``: the method, called
    with the array first): :func:`numpy_function`'s, read as CuPy's signature reads its
    arguments; None where that is NumPy's own function or method of the same path, called as it
    is (a method without an :data:`AS_CUPY` entry, a path CuPy lacks: an internal call's)."""
    if path.startswith("ndarray."):
        return AS_CUPY.get(path)
    try:
        return numpy_function(path)
    except (AttributeError, NotOnSimulatorError):
        return None


#: CuPy's parameter names NumPy's functions call otherwise (where their positions differ).
_RENAMED = {"interpolation": "method"}


def as_cupy_signature(fn: Callable[..., Any], entry: dict[str, Any],
                      drop_self: bool = False) -> Callable[..., Any]:
    """``fn`` (NumPy's) called as CuPy's signature in ``entry`` reads its arguments: where the
    two differ in names or order (``flip(a=)``, ``argmax(a, axis, dtype)``, ``histogram2d``'s
    ``weights`` by position), each argument goes to NumPy's parameter of CuPy's name, or of
    its position; a ``dtype`` or ``out`` NumPy's lacks converts or stores the result. ``fn``
    itself where the two agree, or where either cannot be read. ``drop_self``: ``entry`` is a
    method's, ``fn`` bound (a generator's ``uniform(low, high, size, dtype)``)."""
    if entry.get("kind") not in ("function", "method") or entry.get("params") is None:
        return fn
    try:
        theirs = inspect.signature(fn)
    except (TypeError, ValueError):
        return fn
    mine = _signature(entry, drop_self)
    cupy = list(mine.parameters)
    numpy = list(theirs.parameters.values())
    names = [p.name for p in numpy]
    variadic = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    positional_only = inspect.Parameter.POSITIONAL_ONLY
    ordered = (positional_only, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    if (any(p.kind in variadic for p in numpy + list(mine.parameters.values()))
            or (cupy == names[:len(cupy)] and not any(
                p.kind is positional_only and mine.parameters[p.name].kind is not positional_only
                for p in numpy[:len(cupy)]))):
        return fn
    to: dict[str, str | None] = {}
    for i, name in enumerate(cupy):
        if name in names:
            to[name] = name
        elif _RENAMED.get(name) in names:
            to[name] = _RENAMED[name]
        elif name in ("dtype", "out"):
            to[name] = None         # (applied to the result)
        elif i < len(names) and names[i] not in cupy:
            to[name] = names[i]
        else:
            return fn               # (no place for it: NumPy's own refusal stands)

    def run(*args: Any, **kwargs: Any) -> Any:
        given = mine.bind(*args, **kwargs).arguments
        call = {to[name]: value for name, value in given.items() if to[name] is not None}
        # (by position as far as NumPy's order allows: its C methods take no keywords, though
        # their signatures name them)
        positional = []
        for p in numpy:
            if p.kind not in ordered or p.name not in call:
                break
            positional.append(call.pop(p.name))
        result = fn(*positional, **call)
        if to.get("dtype", "dtype") is None and given.get("dtype") is not None:
            result = np.asarray(result).astype(given["dtype"])
        if to.get("out", "out") is None and given.get("out") is not None:
            result = _into(given["out"], np.asarray(result))
        return result

    # (what the call writes is read from this signature: an out= in CuPy's place is booked)
    run.__signature__ = mine      # type: ignore[attr-defined]
    return run


def sim_value(prefix: str, name: str, entry: dict[str, Any]) -> Any:
    """A constant, type or object of CuPy on ``sim`` (NumPy's own object where CuPy's is)."""
    path = f"{prefix}.{name}" if prefix else name
    if entry["kind"] == "constant":
        text = entry["value"]
        if text in ("inf", "-inf", "nan"):
            return float(text)
        return ast.literal_eval(text)
    where = entry.get("same_object")
    obj = _numpy(where[len("numpy."):]) if where else None
    if obj is None:
        raise unavailable(path, f" (a {entry['kind']} of CuPy's own)")
    return obj


_DEFAULT = object()     # a stand-in default: binding needs to know only that there is one


def _default(p: dict[str, Any]) -> Any:
    """A parameter's default: the literal CuPy's signature shows (the booking of writes reads
    a flag's, ``overwrite_input=False``), or a stand-in where it is no literal."""
    if "default" not in p:
        return inspect.Parameter.empty
    try:
        return ast.literal_eval(p["default"])
    except (ValueError, SyntaxError, TypeError):
        return _DEFAULT


def _signature(entry: dict[str, Any], drop_self: bool = False) -> inspect.Signature:
    params = entry["params"][1:] if drop_self else entry["params"]
    return inspect.Signature([
        inspect.Parameter(p["name"], getattr(inspect.Parameter, p["kind"]), default=_default(p))
        for p in params
    ])


def _text(name: str, entry: dict[str, Any], drop_self: bool = False) -> str:
    params = entry["params"][1:] if drop_self else entry["params"]
    parts, star = [], False
    for i, p in enumerate(params):
        kind = p["kind"]
        if kind == "KEYWORD_ONLY" and not star:
            parts.append("*")
            star = True
        prefix = {"VAR_POSITIONAL": "*", "VAR_KEYWORD": "**"}.get(kind, "")
        star = star or kind == "VAR_POSITIONAL"
        parts.append(prefix + p["name"] + (f"={p['default']}" if "default" in p else ""))
        if kind == "POSITIONAL_ONLY" and (i + 1 == len(params)
                                          or params[i + 1]["kind"] != "POSITIONAL_ONLY"):
            parts.append("/")
    return f"{name}({', '.join(parts)})"


def checker(path: str, entry: dict[str, Any], drop_self: bool = False,
            label: str | None = None
            ) -> Callable[[tuple[Any, ...], dict[str, Any]], None] | None:
    """A function refusing, with :class:`ArgumentError`, the arguments CuPy's signature for
    ``path`` refuses; None where CuPy's signature was not readable. Its messages name the
    call ``label`` (by default ``asyncgpu.cupy.<path>``)."""
    if entry.get("params") is None:
        return None
    sig = _signature(entry, drop_self)
    where = label or f"asyncgpu.cupy.{path}"

    def check(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        try:
            sig.bind(*args, **kwargs)
        except TypeError as exc:
            raise ArgumentError(
                f"{where}: {exc}; CuPy's signature is "
                f"{_text(path, entry, drop_self)} and the GPU refuses this call too"
            ) from None

    return check


def generator_method(name: str) -> dict[str, Any]:
    """The entry of ``cupy.random.Generator.<name>``; the GPU's ``AttributeError`` if none."""
    entry = surface()["generator_methods"].get(name)
    if entry is None or entry["kind"] != "method":
        raise AttributeError(
            f"'Generator' object has no attribute '{name}' (cupy.random.Generator has no "
            f"method '{name}'; {_HINT}; its methods: "
            f"{', '.join(sorted(surface()['generator_methods']))})", name=name)
    return entry


def ufunc_attribute(path: str, name: str) -> None:
    """Raise the GPU's ``AttributeError`` unless CuPy's ufuncs have an attribute ``name``."""
    if name not in surface()["ufunc_attributes"]:
        raise AttributeError(f"'cupy._core._kernel.ufunc' object has no attribute '{name}' "
                             f"(asyncgpu.cupy.{path}.{name}; {_HINT})", name=name)
