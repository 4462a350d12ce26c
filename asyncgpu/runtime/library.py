"""Library calls (CuPy on ``cuda``, NumPy on ``sim``) as nodes of the DAG.

The model
---------
A :class:`LibraryCall` is one call of an array-library function: its name (``"sqrt"``,
``"linalg.solve"``), a resolver that picks the function for the backend (``cupy.sqrt`` or
``numpy.sqrt``), and the arguments with every :class:`~asyncgpu.Array` found in them (anywhere in
positional or keyword arguments, also inside lists, tuples and dicts) replaced by a slot
(:mod:`asyncgpu.runtime.call_args`).

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
dtypes and layout (cached per signature: :mod:`asyncgpu.runtime.result_meta`). A call whose result
shape depends on the values (:data:`DATA_DEPENDENT` names, or a placeholder run that gives different
shapes for different data, or one that fails) is *synchronizing* on ``sim``: the host waits for its
inputs and runs it at once. On ``cuda`` CuPy itself copies the size to the host on the node's
stream, so such calls block the host there too.

Example::

    c = acp.sqrt(a) + b        # node sqrt(a: read) -> result r1; node add(r1, b) -> result c
    acp.multiply(c, 2, out=c)  # node multiply(c: read+write)
    acp.multiply(a, 2, c)      # the same, its output passed positionally: c is a write

This module is backend-neutral: it imports neither CuPy nor Numba.
"""

from __future__ import annotations

import contextlib
import threading
import warnings
from typing import Any, Callable

import numpy as np

from ..core.deps import Access
from ..core.errors import ArgumentError, call_failed
from . import array_modules
from .allocation import dense_layout
from .array import Array, host_array, new_array
from .call_args import Slot, fill, slots_in, split
from .checks import check_usable
from .cupy_surface import sim_function
from .result_meta import NewResult, ViewResult, classify
from .zero_d import as_called
from .current import current_runtime
from .dtypes import other_order, refuse_other_order
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
#: Calls that read their result to the host to warn of it (CuPy synchronizes), and the
#: warnings they give at the call: on ``sim`` these are NumPy's same warnings, let through.
WARNING = {"nanmin": "All-NaN slice encountered", "nanmax": "All-NaN slice encountered"}
#: Calls that check their quantiles' range (``q``, second).
QUANTILES = frozenset({"percentile", "quantile", "nanpercentile", "nanquantile"})
#: Data-dependent with one argument only (``where(c)`` is ``nonzero(c)``).
DATA_DEPENDENT_ALONE = frozenset({"where"})
#: CuPy's calls that copy host data in through ``cupy.asarray``, which converts the other byte
#: order to the device's: a ``dtype=">f4"`` converts for them unless an asyncgpu array is among
#: the arguments (an ``astype``, refused in CuPy), and is refused by every other call.
FROM_HOST = frozenset({
    "frombuffer", "fromfile", "fromfunction", "fromiter", "fromstring", "loadtxt",
    "genfromtxt", "asanyarray", "asarray_chkfinite", "require",
})


def _raises(mode: Any) -> bool:
    """Whether a ``mode`` (one, or one per index: ``ravel_multi_index``) raises."""
    return mode == "raise" or type(mode) in (tuple, list) and "raise" in mode


def _refuse_host_output(value: Any, where: str) -> None:
    """ArgumentError for a NumPy array where the call writes (``out=n``, ``x.sum(out=n)``): a
    0-d one, which ``split`` lets through as a number (CuPy refuses a NumPy ``out`` with
    ``TypeError``; a node would write it later, from a worker)."""
    if type(value) in (list, tuple):
        for v in value:
            _refuse_host_output(v, where)
    elif isinstance(value, np.ndarray):
        raise ArgumentError(
            f"{where}: got a NumPy array {value.dtype.name}{list(value.shape)} as an output; "
            "the device writes only asyncgpu.Array outputs (CuPy refuses a NumPy out too): "
            "pass an asyncgpu.Array and read it with .get(), or use the call's result"
        )


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
            if not found.everything:
                _refuse_host_output(value, self.describe())
            slots_in(value, written)
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
                or name in CHECKING or name in WARNING
                or (name in RAISING and _raises(self._mode(RAISING[name])))
                # (a device array of quantiles: CuPy reads it to check its range)
                or (name in QUANTILES and isinstance(
                    self.kwargs.get("q", self.args[1] if len(self.args) > 1 else None), Slot))
                # (weights: CuPy reads their sum to refuse zero, ZeroDivisionError at the call)
                or (name == "average" and self.kwargs.get(
                    "weights", self.args[2] if len(self.args) > 2 else None) is not None)
                # (an assignment through a device mask: CuPy counts the mask on the host to
                # shape the value, ValueError at the call where the counts differ)
                or (self.name == "ndarray.__setitem__" and self._device_mask()))

    def _device_mask(self) -> bool:
        """Whether the key of ``ndarray.__setitem__`` holds a boolean device array."""
        key = self.args[1] if len(self.args) > 1 else None
        return any(isinstance(k, Slot) and self.arrays[k.index].dtype.kind == "b"
                   for k in (key if isinstance(key, tuple) else (key,)))

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


# -- results ---------------------------------------------------------------------------------
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
    stats = runtime.stats
    ident = threading.get_ident()
    with contextlib.ExitStack() as stack:
        views = []
        # (the accesses' waits are the call's: traced and counted once, as its library-call)
        stats.quiet.add(ident)
        try:
            for i, a in enumerate(call.arrays):
                write = i in call.written
                stack.enter_context(runtime.host_access(a, a._lo, a._hi, write))
                view = a._host_view()
                if not write:
                    view = view.view()
                    view.flags.writeable = False
                views.append(as_called(view, call.name, write))
        finally:
            stats.quiet.discard(ident)
        stats.sync("library-call")
        try:
            with warnings.catch_warnings(record=True) as caught, np.errstate(all="ignore"):
                warnings.simplefilter("always")
                result = fn(*fill(call.args, views), **fill(call.kwargs, views))
        except Exception as exc:
            raise call_failed(f"{call.describe()} failed: {type(exc).__name__}: {exc}", exc) from exc
        said = WARNING.get(call.name.rsplit(".", 1)[-1])
        for w in caught:        # (the others NumPy gives and CuPy does not: not passed on)
            if said is not None and str(w.message) == said:
                warnings.warn(said, w.category, stacklevel=2)
                break
        buffers = {a._alloc.id: a._alloc.buffer.host for a in call.arrays}
        meta = classify(call, result, views, buffers, placeholder=False)
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


def _refuse_other_order(call: LibraryCall) -> None:
    """Refuse a dtype of the other byte order (``>f4`` on x86) asked of a call, as CuPy refuses
    it at array creation, before anything is enqueued: its ``dtype=`` or a positional dtype
    (``astype(">f4")``, ``zeros(2, ">i4")``: a dtype object, or a string starting with a byte
    order, which no other positional argument is). :data:`FROM_HOST` calls of host data
    convert instead."""
    if call.name in FROM_HOST and not call.arrays:
        return
    found = [v for v in (call.kwargs.get("dtype"), *call.args) if other_order(v)]
    if found:
        name = call.name
        where = (f"asyncgpu.Array.{name[len('ndarray.'):]}" if name.startswith("ndarray.")
                 else f"asyncgpu.cupy.{name}")
        refuse_other_order(found[0], where)


def dispatch(path: str, args: tuple[Any, ...], kwargs: dict[str, Any],
             resolve: Callable[[str], Callable[..., Any]] | None = None,
             state: Array | None = None, inference: Callable[[], Any] | None = None) -> Any:
    """Schedule ``path(*args, **kwargs)`` as a node of the current runtime; returns its result."""
    runtime = current_runtime()
    call = LibraryCall(path, resolve or function_resolver(path), args, kwargs, state,
                       runtime.backend.name)
    _refuse_other_order(call)
    call.inference = inference
    return runtime.launch_call(call)


ops.dispatch = dispatch
