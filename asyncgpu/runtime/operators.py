"""NumPy-style operators and methods of :class:`asyncgpu.Array`, each one a library-call node.

``a + b``, ``a < b``, ``-a``, ``a @ b``, ``a += 1``, ``a.sum(axis=0)``, ``a.astype(np.float32)``,
``a.copy()`` ... return at once with new :class:`~asyncgpu.Array` results (in-place operators
write the left operand and return it). Reductions without an axis give 0-d arrays that stay
lazy until converted: ``float(x)``, ``int(x)``, ``bool(x)`` and ``x.item()`` wait for the
writers of that value only.

``x.put(...)`` and ``x.partition(...)`` write ``x`` (``asyncgpu.runtime.effects`` books them);
``x.ptp(...)`` is the function ``ptp`` (NumPy 2 arrays lack the method, CuPy's have it);
``copy.copy(x)`` and ``copy.deepcopy(x)`` are ``x.copy()``, a node giving an independent array.

Not here: indexing (``x[i]`` reads one element on the host, ``x[2:5]`` is a view, array
indices and masks are nodes: ``asyncgpu.runtime.indexing``), ``np.asarray(x)`` (a host copy),
``reshape``/``ravel``/``T``/``transpose`` (views; a ``reshape`` that needs a copy is a node).
Comparisons return arrays, so like NumPy and CuPy arrays, ``Array`` is not hashable.

Operands: :class:`~asyncgpu.Array` and scalars (Python or NumPy). A NumPy array operand is
refused with a clear error, as CuPy refuses implicit host-to-device copies.

On ``sim`` the methods' arguments are bound to CuPy's ``ndarray`` signatures first
(``asyncgpu/data/cupy_surface.json``), as the module functions' are: a keyword CuPy's method
lacks (``a.sum(where=m)``, ``a.max(initial=0)``) raises ``ArgumentError`` (a ``TypeError``)
before anything is enqueued, as the GPU refuses it. Calls with no keyword and a usual number of
positional arguments are not bound (the check costs them nothing); on ``cuda`` CuPy checks.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..core.errors import ArgumentError
from .cupy_refusals import refuse_numpy_0d
from .node_ops import ops

_SCALARS = (bool, int, float, complex, np.generic)


def _call(path: str, *args: Any, **kwargs: Any) -> Any:
    return ops.dispatch(path, args, kwargs)


class _Signature:
    """CuPy's signature of ``ndarray.<name>``, loaded at the first call that needs it.

    ``fewest``/``most``: the positional argument counts a call without keywords may have and
    not be bound (``most`` -1: not loaded yet, so the first call loads it)."""

    __slots__ = ("name", "fewest", "most", "check")

    def __init__(self, name: str) -> None:
        self.name = name
        self.fewest, self.most = 0, -1
        self.check: Any = None

    def _load(self) -> None:
        from . import cupy_surface

        entry = cupy_surface.surface()["ndarray"].get(self.name)
        if entry is None or entry.get("params") is None:
            self.fewest, self.most = 0, 1 << 30      # (no signature to check against)
            return
        params = entry["params"][1:]                  # (without self)
        positional = [p for p in params
                      if p["kind"] in ("POSITIONAL_ONLY", "POSITIONAL_OR_KEYWORD")]
        self.fewest = sum("default" not in p for p in positional)
        self.most = (1 << 30 if any(p["kind"] == "VAR_POSITIONAL" for p in params)
                     else len(positional))
        self.check = cupy_surface.checker(f"ndarray.{self.name}", entry, drop_self=True,
                                          label=f"asyncgpu.Array.{self.name}")

    def __call__(self, array: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Refuse, on ``sim``, the arguments CuPy's method refuses (``ArgumentError``)."""
        if self.most < 0:
            self._load()
        if (self.check is not None and array._alloc.runtime.backend.name != "cuda"
                and (kwargs or not self.fewest <= len(args) <= self.most)):
            self.check(args, kwargs)


def _method(method: str, path: str) -> Any:
    sig = _Signature(method)

    def meth(self: Any, *args: Any, **kwargs: Any) -> Any:
        if kwargs or not sig.fewest <= len(args) <= sig.most:
            sig(self, args, kwargs)
        return _call(path, self, *args, **kwargs)

    return meth


_ASTYPE = _Signature("astype")


def already(array: Any, dtype: Any, order: Any) -> bool:
    """Whether ``array`` is already of ``dtype`` (None: its own) and laid out as ``order``
    asks (``'K'`` or None: any layout; ``'A'``: C or Fortran order; ``'C'``, ``'F'``, either
    case), as CuPy's ``astype`` decides: what a ``copy=False`` conversion may return as it is
    (``'A'`` of a non-contiguous array is a C-ordered copy, as in CuPy, where NumPy's
    ``asarray`` keeps the view)."""
    if dtype is not None and np.dtype(dtype) != array.dtype:
        return False
    order = "K" if order is None else str(order).upper()
    flags = array.flags
    return (order == "K" or order == "A" and (flags.c_contiguous or flags.f_contiguous)
            or order == "C" and flags.c_contiguous or order == "F" and flags.f_contiguous)


def _astype(self: Any, *args: Any, **kwargs: Any) -> Any:
    if kwargs or not _ASTYPE.fewest <= len(args) <= _ASTYPE.most:
        _ASTYPE(self, args, kwargs)
    if kwargs and not kwargs.get("copy", True) or len(args) >= 5 and not args[4]:
        # ``copy=False`` where no conversion is needed: the array itself, as in CuPy
        named = dict(zip(("dtype", "order"), args))
        named.update(kwargs)
        dtype = named.get("dtype")
        if dtype is not None and already(self, dtype, named.get("order", "K")):
            return self
    return _call("ndarray.astype", self, *args, **kwargs)


def _operand(other: Any) -> bool:
    # (every asyncgpu Array is an ArrayOperators: this module is below the array module)
    return isinstance(other, (ArrayOperators, np.ndarray) + _SCALARS)


def _binary(ufunc: str) -> tuple[Any, Any, Any]:
    def op(self: Any, other: Any) -> Any:
        if not _operand(other):
            return NotImplemented
        refuse_numpy_0d(ufunc, other)
        return _call(ufunc, self, other)

    def rop(self: Any, other: Any) -> Any:
        if not _operand(other):
            return NotImplemented
        refuse_numpy_0d(ufunc, other)
        return _call(ufunc, other, self)

    def iop(self: Any, other: Any) -> Any:
        if not _operand(other):
            return NotImplemented
        refuse_numpy_0d(ufunc, other)
        _call(ufunc, self, other, out=self)
        return self

    return op, rop, iop


def _compare(ufunc: str) -> Any:
    """A comparison as CuPy's ``__richcmp__`` makes it: a 0-d NumPy array compares as its
    value; ``==`` and ``!=`` with ``None`` or an object that compares by identity give an
    array of ``False`` (``True``), an array node of the operand's shape."""
    def op(self: Any, other: Any) -> Any:
        if type(other) is np.ndarray and other.ndim == 0:
            other = other.item()
        if ufunc in ("equal", "not_equal") and (
                other is None or not _operand(other) and type(other).__eq__ is object.__eq__):
            return _call("full", self.shape, ufunc == "not_equal", np.bool_)
        if not _operand(other):
            if isinstance(other, (str, bytes, list, tuple)):
                raise ArgumentError(f"{ufunc}: Unsupported type {type(other)} (CuPy compares "
                                    "arrays and scalars: pass asyncgpu.asarray(x))")
            return NotImplemented
        return _call(ufunc, self, other)

    return op


#: ``x ** y`` for the exponents CuPy's ``__pow__`` computes with another function (its
#: fast paths, which give other answers at the edges: ``-inf ** 0.5`` is NaN as ``sqrt``
#: gives it, where ``power`` gives inf).
_POWERS = {(int, 2): "square", (float, 0.5): "sqrt", (float, 2.0): "square",
           (float, -1.0): "reciprocal"}


def _pow(self: Any, other: Any, modulo: Any = None) -> Any:
    """``x ** y`` as CuPy's ``__pow__`` (``modulo`` ignored, as CuPy and NumPy ignore it)."""
    if not _operand(other):
        return NotImplemented
    fast = _POWERS.get((type(other), other)) if type(other) in (int, float) else None
    if fast is not None:
        if self.dtype.kind not in ("ifc" if type(other) is int else "fc"):
            return _call(fast, self, dtype=np.result_type(self.dtype, other))
        return _call(fast, self)
    refuse_numpy_0d("power", other)
    return _call("power", self, other)


_BINARY = {
    "add": "add", "sub": "subtract", "mul": "multiply", "truediv": "true_divide",
    "floordiv": "floor_divide", "mod": "remainder", "pow": "power", "and": "bitwise_and",
    "or": "bitwise_or", "xor": "bitwise_xor", "lshift": "left_shift", "rshift": "right_shift",
}
_COMPARE = {"lt": "less", "le": "less_equal", "eq": "equal", "ne": "not_equal",
            "gt": "greater", "ge": "greater_equal"}
_UNARY = {"neg": "negative", "pos": "positive", "abs": "absolute", "invert": "invert"}
#: Methods that are nodes: ``x.name(...)`` runs ``x.name(...)`` of the backend's array type.
METHODS = (
    "sum", "prod", "mean", "var", "std", "max", "min", "argmax", "argmin", "all", "any",
    "cumsum", "cumprod", "trace", "round", "clip", "conj", "conjugate", "dot", "take",
    "repeat", "diagonal", "squeeze", "flatten", "argsort", "searchsorted", "swapaxes", "astype",
    "copy", "nonzero", "fill", "sort", "put", "partition", "argpartition", "compress", "choose",
)


class ArrayOperators:
    """The operator and method half of :class:`asyncgpu.Array` (mixed in; no state)."""

    __slots__ = ()
    __hash__ = None  # type: ignore[assignment]   # comparisons return arrays

    def __matmul__(self, other: Any) -> Any:
        return _call("matmul", self, other) if _operand(other) else NotImplemented

    def __rmatmul__(self, other: Any) -> Any:
        return _call("matmul", other, self) if _operand(other) else NotImplemented

    def __imatmul__(self, other: Any) -> Any:
        """``a @= b`` in place, as in NumPy: the product (a node) copied into ``a`` (another
        node: a product written over its own operand would read what it overwrote), which
        keeps its shape and dtype; ValueError (nothing enqueued) where it cannot."""
        if not _operand(other):
            return NotImplemented
        left: Any = self            # (an Array: this class is its operator half)
        a, b = left.shape, np.shape(other)
        problem = None
        if len(a) < 1 or len(b) < 2:
            problem = "needs the left operand of 1 dimension or more and the right of 2 or more"
        elif b[-2:] != (a[-1], a[-1]):
            problem = (f"keeps the left operand's shape, so the right one must be square "
                       f"matrices of its last dimension ({a[-1]} by {a[-1]})")
        else:
            try:
                batch = np.broadcast_shapes(a[:-2], b[:-2])
            except ValueError:
                batch = None
            if batch != a[:-2]:
                problem = "keeps the left operand's shape, which the right one's stack would change"
        if problem is None:
            dtype = np.result_type(left.dtype, other.dtype)
            if not np.can_cast(dtype, left.dtype, "same_kind"):
                problem = (f"would write a {dtype} product into the left operand's {left.dtype} "
                           "(same-kind casting)")
        if problem is not None:
            raise ValueError(f"a @= b with shapes {a} and {b}: in-place matrix multiplication "
                             f"{problem}; write a = a @ b for a new array")
        _call("copyto", self, _call("matmul", self, other), casting="same_kind")
        return self

    def __divmod__(self, other: Any) -> Any:
        return _call("divmod", self, other) if _operand(other) else NotImplemented

    def __rdivmod__(self, other: Any) -> Any:
        return _call("divmod", other, self) if _operand(other) else NotImplemented

    def ptp(self, *args: Any, **kwargs: Any) -> Any:
        """Peak to peak (``max - min``), the function ``ptp`` as a node (CuPy's arguments:
        ``axis``, ``out``, ``keepdims``)."""
        if kwargs or not _PTP.fewest <= len(args) <= _PTP.most:
            _PTP(self, args, kwargs)
        return _call("ptp", self, *args, **kwargs)

    def __copy__(self) -> Any:
        return _call("ndarray.copy", self)

    def __deepcopy__(self, memo: Any) -> Any:
        return _call("ndarray.copy", self)


def _install() -> None:
    for short, ufunc in _BINARY.items():
        op, rop, iop = _binary(ufunc)
        for name, fn in ((f"__{short}__", op), (f"__r{short}__", rop), (f"__i{short}__", iop)):
            fn.__name__ = fn.__qualname__ = name
            fn.__doc__ = f"``{ufunc}`` as a node" + (" (in place)" if name[2] == "i" else "")
            setattr(ArrayOperators, name, fn)
    for short, ufunc in _COMPARE.items():
        op = _compare(ufunc)
        op.__name__ = op.__qualname__ = f"__{short}__"
        setattr(ArrayOperators, f"__{short}__", op)
    _pow.__name__ = _pow.__qualname__ = "__pow__"
    _pow.__doc__ = "``power`` as a node (``square``, ``sqrt``, ``reciprocal`` for CuPy's exponents)"
    ArrayOperators.__pow__ = _pow       # type: ignore[method-assign]
    for short, ufunc in _UNARY.items():
        def un(self: Any, _u: str = ufunc) -> Any:
            return _call(_u, self)
        un.__name__ = un.__qualname__ = f"__{short}__"
        setattr(ArrayOperators, f"__{short}__", un)
    for method in METHODS:
        meth = _astype if method == "astype" else _method(method, f"ndarray.{method}")
        meth.__name__ = meth.__qualname__ = method
        meth.__doc__ = (f"``ndarray.{method}`` as a node (CuPy's arguments); array results "
                        "are asyncgpu arrays.")
        if method == "astype":
            meth.__doc__ += " With ``copy=False`` and no conversion needed, the array itself."
        setattr(ArrayOperators, method, meth)


_PTP = _Signature("ptp")
_install()
