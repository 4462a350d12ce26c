"""Library calls (CuPy on ``cuda``, NumPy on ``sim``) as nodes of the DAG.

The model
---------
A :class:`LibraryCall` is one call of an array-library function: its name (``"sqrt"``,
``"linalg.solve"``), a resolver that picks the function for the backend (``cupy.sqrt`` or
``numpy.sqrt``), and the arguments with every :class:`~asyncgpu.Array` found in them (anywhere in
positional or keyword arguments, also inside lists, tuples and dicts) replaced by a slot.

* The arrays of the arguments the call writes are *writes*, every other array argument is a
  *read*: positional and keyword outputs, in-place targets (``copyto``, ``put``, ``ndarray.sort``,
  a generator's ``shuffle``, ...), and every array argument of a call not known to be pure, as
  :mod:`asyncgpu.runtime.effects` derives them from the function; non-array arguments pass through
  unchanged.
* The result's arrays are *writes* of fresh allocations owned by the runtime. A result that is a
  view of an argument (``transpose``, ``reshape``, ``squeeze``, ``out=``) is returned as a view of
  the same allocation, as CuPy does.
* The call goes through the same pipeline as a kernel launch (``Runtime.launch_call`` shares
  ``_issue``): dependencies, stream, prefetch, event waits, enqueue, record, commit.

The result's shape and dtype must be known when the node is issued. On ``cuda`` CuPy computes them
at call time (the call itself is enqueued on the node's stream). On ``sim`` nothing runs at call
time, so they are inferred by running the NumPy function on *placeholder* data of the same shapes,
dtypes and layout (cached per signature). A call whose result shape depends on the values
(:data:`DATA_DEPENDENT` names, or a placeholder run that gives different shapes for different
data, or one that fails) is *synchronizing* on ``sim``: the host waits for its inputs and runs it
at once. On ``cuda`` CuPy itself copies the size to the host on the node's stream, so such calls
block the host there too.

Example::

    c = acp.sqrt(a) + b        # node sqrt(a: read) -> result r1; node add(r1, b) -> result c
    acp.multiply(c, 2, out=c)  # node multiply(c: read+write)
    acp.multiply(a, 2, c)      # the same, its output passed positionally: c is a write

This module is backend-neutral: it imports neither CuPy nor Numba.
"""

from __future__ import annotations

import contextlib
import warnings
from typing import Any, Callable

import numpy as np

from ..core.deps import Access
from ..core.errors import ArgumentError, call_failed
from . import array_modules
from .allocation import dense_layout
from .array import Array, host_array, new_array
from .checks import check_usable
from .cupy_surface import sim_function
from .dtypes import UnsupportedDtype, long_double
from .zero_d import INDEXING, as_called, refuse_0d
from .current import current_runtime
from .effects import effects
from .kernel import array_arg
from .node_ops import ops

#: Functions whose result shape depends on array values (synchronizing on ``sim``).
DATA_DEPENDENT = frozenset({
    "nonzero", "flatnonzero", "argwhere", "unique", "unique_values", "unique_counts",
    "unique_inverse", "unique_all", "extract", "compress", "bincount", "trim_zeros", "repeat",
    "histogram", "histogram_bin_edges", "ndarray.nonzero", "ndarray.repeat", "ndarray.compress",
    # (sets: their length; a least-squares fit's residuals: the rank; trimmed polynomial
    # coefficients: the trailing zeros; roots and real_if_close: the dtype too)
    "intersect1d", "setdiff1d", "setxor1d", "union1d", "lstsq", "trimseq", "trimcoef", "poly",
    "roots", "real_if_close",
    # (the indices deleted: their number once repeats are dropped)
    "delete",
})
#: Calls that check their indices in ``mode="raise"``: the position of ``mode`` among the
#: positional arguments (the array first) and its default, CuPy's.
RAISING = {"choose": (3, "raise"), "put": (3, "wrap"), "ravel_multi_index": (2, "wrap")}
#: Calls that always read their indices to the host to check them (CuPy synchronizes).
CHECKING = frozenset({"unravel_index"})
#: Calls that check their quantiles' range (``q``, second).
QUANTILES = frozenset({"percentile", "quantile", "nanpercentile", "nanquantile"})
#: Data-dependent with one argument only (``where(c)`` is ``nonzero(c)``).
DATA_DEPENDENT_ALONE = frozenset({"where"})
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


def _raises(mode: Any) -> bool:
    """Whether a ``mode`` (one, or one per index: ``ravel_multi_index``) raises."""
    return mode == "raise" or type(mode) in (tuple, list) and "raise" in mode


class _Slot:
    """Where an :class:`Array` stood in the arguments."""

    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index

    def __eq__(self, other: object) -> bool:     # signatures of calls are compared and hashed
        return isinstance(other, _Slot) and other.index == self.index

    def __hash__(self) -> int:
        return hash(("slot", self.index))


def split(obj: Any, arrays: list[Array], where: str) -> Any:
    """``obj`` with every Array replaced by a :class:`_Slot` (appended to ``arrays``)."""
    if isinstance(obj, Array):
        arrays.append(obj)
        return _Slot(len(arrays) - 1)
    if type(obj) in (list, tuple):
        return type(obj)(split(o, arrays, where) for o in obj)
    if type(obj) is dict:
        return {k: split(v, arrays, where) for k, v in obj.items()}
    if type(obj) is int and not -2**63 <= obj < 2**64:
        raise OverflowError(f"{where}: Python int {obj} too large to convert to C long (CuPy "
                            "passes Python ints to the device as 64-bit integers)")
    if isinstance(obj, np.ndarray) and obj.ndim > 0:
        raise ArgumentError(
            f"{where}: got a NumPy array {obj.dtype.name}{list(obj.shape)} where the device needs "
            "an asyncgpu.Array (CuPy refuses implicit host-to-device copies too); pass "
            "asyncgpu.asarray(x) instead"
        )
    if (hasattr(obj, "__cuda_array_interface__") or hasattr(obj, "copy_to_host")) \
            and not isinstance(obj, type):
        raise ArgumentError(
            f"{where}: got a {type(obj).__module__.split('.')[0]}.{type(obj).__name__}, whose "
            "producer asyncgpu cannot order against; import it with asyncgpu.asarray(x) first"
        )
    return obj


def _slots(template: Any, into: set[int]) -> None:
    """Add the index of every :class:`_Slot` inside ``template`` to ``into``."""
    if isinstance(template, _Slot):
        into.add(template.index)
    elif type(template) in (list, tuple):
        for o in template:
            _slots(o, into)
    elif type(template) is dict:
        for o in template.values():
            _slots(o, into)


def fill(template: Any, values: list[Any]) -> Any:
    """The inverse of :func:`split`: slots replaced by ``values[slot.index]``."""
    if isinstance(template, _Slot):
        return values[template.index]
    if type(template) in (list, tuple):
        return type(template)(fill(o, values) for o in template)
    if type(template) is dict:
        return {k: fill(v, values) for k, v in template.items()}
    return template


class LibraryCall:
    """One call of a library function, with its array arguments found and classified."""

    def __init__(self, name: str, resolve: Callable[[str], Callable[..., Any]],
                 args: tuple[Any, ...], kwargs: dict[str, Any],
                 state: Array | None = None, backend: str | None = None) -> None:
        self.name = name
        self.resolve = resolve          # backend name -> the function to call
        self.arrays: list[Array] = []
        where = f"call '{name}'"
        self.args = split(tuple(args), self.arrays, where)
        self.kwargs = split(dict(kwargs), self.arrays, where)
        if backend is None:
            backend = current_runtime().backend.name
        self.written = self._written(backend)
        if state is not None:            # a generator's state: serializes its draws
            self.arrays.append(state)
            self.written.add(len(self.arrays) - 1)
        self.state = state is not None
        self.inference: Callable[[], Any] | None = None   # the function on a copy of the state
        self.results: Any = None        # set when the call is issued
        self.error: BaseException | None = None   # a call that failed at enqueue (cuda)

    def _written(self, backend: str) -> set[int]:
        """The slots of the arrays inside the arguments the call writes (``asyncgpu.runtime.effects``).
        ``assumed``: every array is booked written because what the call writes is unknown."""
        written: set[int] = set()
        found = effects(backend, self.name, self.args, self.kwargs)
        self.assumed = found.everything
        for value in found.places(self.args, self.kwargs):
            _slots(value, written)
        return written

    def describe(self) -> str:
        return f"call '{self.name}'"

    def data_dependent(self) -> bool:
        """Whether the result's shape depends on the values (:data:`DATA_DEPENDENT`): such a
        call blocks the host until its inputs are computed (on ``cuda`` CuPy copies the size
        to the host inside the call; on ``sim`` it runs at once)."""
        name = self.name.rsplit(".", 1)[-1]
        return (self.name in DATA_DEPENDENT or name in DATA_DEPENDENT
                or (name in DATA_DEPENDENT_ALONE and len(self.args) + len(self.kwargs) == 1)
                # (a fit's residuals: as many as the rank allows, as lstsq's)
                or (name == "polyfit" and bool(self.kwargs.get(
                    "full", self.args[4] if len(self.args) > 4 else False)))
                # (an index out of range is refused at the call: CuPy reads the indices to
                # the host to check them)
                or name in CHECKING
                or (name in RAISING and _raises(self._mode(RAISING[name])))
                # (a device array of quantiles: CuPy reads it to check its range)
                or (name in QUANTILES and isinstance(
                    self.kwargs.get("q", self.args[1] if len(self.args) > 1 else None), _Slot)))

    def _mode(self, at: tuple[int, str]) -> Any:
        """The ``mode`` argument (its position in the call, or the default)."""
        position, default = at
        if "mode" in self.kwargs:
            return self.kwargs["mode"]
        return self.args[position] if len(self.args) > position else default

    def validate(self, runtime: Any) -> None:
        """Refuse freed arrays and arrays of another runtime, before anything is enqueued."""
        for i, a in enumerate(self.arrays):
            check_usable(a, runtime, f"{self.describe()}: array argument {i} ({a.describe()})")

    def accesses(self) -> list[Access]:
        """One access per distinct array argument (a write if any occurrence is written)."""
        seen: dict[int, int] = {}
        out: list[Access] = []
        for i, a in enumerate(self.arrays):
            write = i in self.written
            j = seen.get(id(a))
            if j is not None:
                out[j].write = out[j].write or write
                continue
            seen[id(a)] = len(out)
            alloc = a._alloc
            if (write and i == 0 and self.name == "ndarray.fill" and a._lo == 0
                    and a._hi == alloc.nbytes
                    and (a.is_c_contiguous or dense_layout(a.shape, a.strides, a.itemsize))):
                # a fill of every byte reads none: the explicit model copies nothing in
                # before it (``memory.overwrites``), where it would copy stale bytes over
                out.append(array_arg(i, a.describe(), a, False, True))
                continue
            out.append(Access(alloc.id, alloc, a._lo, a._hi, write, a.describe()))
        return out


# -- result metadata on the sim backend ------------------------------------------------------
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


def placeholders(call: LibraryCall, rng: np.random.Generator, zeros: bool
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
        vals = rng.uniform(0.5, 1.5, a.shape)
        if zeros:
            vals[rng.random(a.shape) < 0.5] = 0
        if a.dtype.kind == "b":
            view[...] = vals > 0.75
        else:
            view[...] = vals.astype(a.dtype) if a.dtype.kind != "c" else vals + 0.25j
    return [as_called(view, call.name, i in call.written) for i, view in enumerate(views)], \
        buffers


def _long_result(call: Any, dtype: np.dtype) -> None:
    raise UnsupportedDtype(f"{call.describe()}: its result has dtype {dtype} (NumPy's long "
                           "double), which CUDA and CuPy lack; pass float64 or complex128 values")


def classify(call: LibraryCall, result: Any, views: list[np.ndarray],
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


def _key(obj: Any) -> Any:
    """A hashable description of an argument, with types (``2`` and ``2.0`` differ)."""
    if isinstance(obj, _Slot):
        return ("slot", obj.index)
    if type(obj) in (list, tuple):
        return (type(obj).__name__,) + tuple(_key(o) for o in obj)
    if type(obj) is dict:
        return ("dict",) + tuple((k, _key(v)) for k, v in sorted(obj.items()))
    # (floats by their exact bits: 0.0 == -0.0, yet copysign or 1 / x tell them apart)
    if type(obj) is float:
        return ("float", obj.hex())
    if type(obj) is complex:
        return ("complex", obj.real.hex(), obj.imag.hex())
    if isinstance(obj, (np.floating, np.complexfloating)):
        return (type(obj).__qualname__, obj.tobytes())
    return (type(obj).__qualname__, obj)


def _signature(call: LibraryCall) -> Any:
    groups: dict[int, int] = {}
    arrays = tuple(
        (a.shape, a.dtype.str, a.strides, a._offset, a._alloc.nbytes,
         groups.setdefault(a._alloc.id, len(groups)))
        for a in call.arrays
    )
    key = (call.name, _key(call.args), _key(call.kwargs), arrays, tuple(sorted(call.written)))
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


def infer(call: LibraryCall, fn: Callable[..., Any]) -> Any:
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
        views, buffers = placeholders(call, rng, zeros)
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


def argument_view(call: LibraryCall, index: int, shape: tuple[int, ...], dtype: np.dtype,
                  strides: tuple[int, ...], offset: int) -> Array:
    """A result viewing argument ``index``'s allocation; the argument itself where the call
    writes it and the view is all of it (``add(x, y, out=o)`` returns ``o``, as in CuPy)."""
    src = call.arrays[index]
    for j in call.written:       # (out= may be an input too: multiply(c, 2, out=c))
        out = call.arrays[j]
        if (out._alloc is src._alloc and shape == out.shape and dtype == out.dtype
                and offset == out._offset and (strides == out.strides or not out.size)):
            return out
    return Array._view(src._alloc, shape, dtype, strides, offset)


def _view_of(call: LibraryCall, meta: ViewResult) -> Array:
    return argument_view(call, meta.index, meta.shape, meta.dtype, meta.strides, meta.offset)


def allocate_results(runtime: Any, call: LibraryCall, meta: Any, new: list[Array]) -> Any:
    """Arrays for a result structure; fresh allocations are appended to ``new``."""
    if isinstance(meta, NewResult):
        arr = new_array(runtime, meta.shape, meta.dtype, 0, meta.strides)
        new.append(arr)
        return arr
    if isinstance(meta, ViewResult):
        return _view_of(call, meta)
    if isinstance(meta, tuple):
        items = [allocate_results(runtime, call, m, new) for m in meta]
        return type(meta)(*items) if hasattr(meta, "_fields") else tuple(items)
    if isinstance(meta, list):
        return [allocate_results(runtime, call, m, new) for m in meta]
    return meta


def flatten(structure: Any) -> list[Any]:
    """The leaves of a (nested tuple/list) result, in order."""
    if isinstance(structure, (tuple, list)):
        return [leaf for s in structure for leaf in flatten(s)]
    return [structure]


def run_now(runtime: Any, call: LibraryCall, fn: Callable[..., Any]) -> Any:
    """A synchronizing call (sim): wait for the arguments' conflicts, run on the host, wrap."""
    with contextlib.ExitStack() as stack:
        views = []
        for i, a in enumerate(call.arrays):
            write = i in call.written
            stack.enter_context(runtime.host_access(a, a._lo, a._hi, write))
            view = a._host_view()
            if not write:
                view = view.view()
                view.flags.writeable = False
            views.append(as_called(view, call.name, write))
        try:
            with quiet():
                result = fn(*fill(call.args, views), **fill(call.kwargs, views))
        except Exception as exc:
            raise call_failed(f"{call.describe()} failed: {type(exc).__name__}: {exc}", exc) from exc
        buffers = {a._alloc.id: a._alloc.buffer.host for a in call.arrays}
        meta = classify(call, result, views, buffers, placeholder=False)
        runtime.stats.sync("library-call")
        return _wrap_now(call, meta, result)


def _wrap_now(call: LibraryCall, meta: Any, value: Any) -> Any:
    if isinstance(meta, NewResult):
        value = np.asarray(value, dtype=meta.dtype)
        order = "F" if meta.strides is not None and value.flags.f_contiguous else "C"
        return host_array(value, order=order)
    if isinstance(meta, ViewResult):
        return _view_of(call, meta)
    if isinstance(meta, tuple):
        items = [_wrap_now(call, m, v) for m, v in zip(meta, value)]
        return type(meta)(*items) if hasattr(meta, "_fields") else tuple(items)
    if isinstance(meta, list):
        return [_wrap_now(call, m, v) for m, v in zip(meta, value)]
    return meta


# -- entry points ----------------------------------------------------------------------------
def function_resolver(path: str) -> Callable[[str], Callable[..., Any]]:
    """``"linalg.solve"`` -> a resolver giving ``numpy.linalg.solve`` / ``cupy.linalg.solve``
    (on ``sim``, ``cupy_surface.sim_function``'s where it has one: what computes CuPy's result
    from arguments given as CuPy's signature takes them).

    ``"ndarray.sum"`` stands for the method: ``x.sum(...)`` on the first argument.
    """
    if path.startswith("ndarray."):
        method = path[len("ndarray."):]

        def call_method(x: Any, *args: Any, **kwargs: Any) -> Any:
            return getattr(x, method)(*args, **kwargs)

        return lambda backend: (backend == "sim" and sim_function(path)) or call_method

    def resolve(backend: str) -> Callable[..., Any]:
        on_sim = sim_function(path) if backend == "sim" else None
        if on_sim is not None:
            return on_sim
        obj = array_modules.backend_module(backend)
        for part in path.split("."):
            obj = getattr(obj, part)
        return obj

    return resolve


def dispatch(path: str, args: tuple[Any, ...], kwargs: dict[str, Any],
             resolve: Callable[[str], Callable[..., Any]] | None = None,
             state: Array | None = None, inference: Callable[[], Any] | None = None) -> Any:
    """Schedule ``path(*args, **kwargs)`` as a node of the current runtime; returns its result."""
    runtime = current_runtime()
    call = LibraryCall(path, resolve or function_resolver(path), args, kwargs, state,
                       runtime.backend.name)
    call.inference = inference
    return runtime.launch_call(call)


ops.dispatch = dispatch
