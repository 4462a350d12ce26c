"""What CuPy refuses at a call where NumPy takes it, refused on ``sim`` as CuPy refuses it.

The model
---------
The simulator computes CuPy's functions with NumPy's, which convert what CuPy's read as
arrays: a list, tuple or Python number where CuPy calls a method of an array or takes a Cython
``ndarray`` (:data:`ARRAY_ARGUMENTS`), a list or a 0-d NumPy array among a ufunc's operands,
ufunc methods CuPy lacks or takes otherwise (:data:`UFUNC_METHODS`). Each is refused before
anything is enqueued, with the exception class CuPy's code raises (``asyncgpu.cupy`` calls
:func:`refuse_sequences` and :func:`check_ufunc_method`; the array operators
:func:`refuse_numpy_0d`).

Invariant: a call refused here fails on the GPU too, with the same class (checked call by call
against raw CuPy 14.2 on an H200).

Example::

    refuse_sequences("isin", (x, [1, 2]), False)      # AttributeError, as CuPy's in1d raises
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..core.errors import ArgumentError


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


def _leaves(seq: Any) -> list[Any]:
    return [v for s in seq for v in (_leaves(s) if type(s) in (list, tuple) else [s])]


def scatter_kind(indices: Any) -> str:
    """Which of CuPy's scatters a ``ufunc.at`` (or an assignment) of ``indices`` runs
    (cupy/_core/_routines_indexing.pyx, ``_scatter_op``): ``"view"`` for integers, slices,
    ``None`` and ``...`` alone (the ufunc writes into the view they select), ``"mask"`` for one
    boolean array (a list of booleans, a bool) among them, ``"integers"`` for any other index
    array (its scatter kernels, each for a few dtypes). A list is an array, as CuPy converts
    it: of booleans alone a mask, empty an integer one."""
    items = list(indices) if type(indices) is tuple else [indices]
    kinds = []
    for s in items:
        if s is None or s is Ellipsis or isinstance(s, slice):
            continue
        if isinstance(s, (bool, np.bool_)):
            kinds.append("b")
        elif type(s) in (list, tuple):
            leaves = _leaves(s)
            kinds.append("b" if leaves and all(isinstance(v, (bool, np.bool_)) for v in leaves)
                         else "i")
        elif np.isscalar(s) or not hasattr(s, "dtype"):
            continue                    # (an integer: a view)
        else:
            kinds.append(s.dtype.kind)
    if not kinds:
        return "view"
    return "mask" if kinds == ["b"] else "integers"


def check_ufunc_method(ufunc: str, method: str, args: tuple[Any, ...],
                       kwargs: dict[str, Any]) -> None:
    """Refuse, as CuPy does at the call, a ufunc method CuPy lacks for ``ufunc``, a keyword its
    method lacks (``initial``, ``where``), or an ``at`` by index arrays on an array of a dtype
    its scatter kernel lacks (NumPy runs them all, so the call ran on ``sim``). CuPy checks
    the dtype there alone: by integers and slices, or by one mask, any dtype is taken
    (:func:`scatter_kind`)."""
    known = UFUNC_METHODS.get(method)
    if known is None:
        return
    ufuncs, params = known
    if ufunc not in ufuncs:
        raise NotImplementedError(f"`cupy_{ufunc}.{method}` is not supported yet (CuPy "
                                  f"implements {method} for {', '.join(sorted(ufuncs))})")
    odd = [k for k in kwargs if k not in params[len(args):]]
    if odd or len(args) > len(params):
        raise ArgumentError(f"{ufunc}.{method}() got an unexpected argument "
                            f"{odd[0] if odd else 'by position'!r} (CuPy's {method} takes "
                            f"{', '.join(params)})")
    given = dict(zip(params, args), **kwargs)
    if method == "at" and scatter_kind(given.get("indices")) == "integers":
        dtype = getattr(given.get("a"), "dtype", None)
        allowed = _AT_DTYPES[ufunc].split()
        if dtype is not None and dtype.name not in allowed:
            raise TypeError(f"cupy.{ufunc}.at only supports {', '.join(allowed)} as data type")
