"""How the ``sim`` backend runs a library call: NumPy, snapshot at begin, run and publish at end.

A library call is an operation the simulator begins and ends like a kernel: *begin* copies the
bytes of every argument into a private snapshot, *end* runs the NumPy function on views of that
snapshot and publishes what the call writes (``out=`` and in-place targets from the snapshot,
fresh results into their allocations). Anything that runs in between cannot be seen by the call,
so a missing dependency turns into a wrong value, as for kernels.

The result's metadata was inferred at call time (``asyncgpu.runtime.result_meta.infer``); ``end``
checks that the real result matches it and reports a :class:`~asyncgpu.KernelFault` otherwise.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ...core.deps import Access
from ...runtime.array import Array
from ...runtime.effects import IN_PLACE
from ...runtime.call_args import fill
from ...runtime.dtypes import native
from ...runtime.library import LibraryCall, allocate_results, flatten
from ...runtime.result_meta import Synchronizing, infer, quiet
from ...runtime.zero_d import as_called
from .kernels import dense, overlap, snapshot


class _Layout:
    """An array argument or result without the Array (lifetime is the runtime's job)."""

    __slots__ = ("buffer", "lo", "hi", "offset", "shape", "strides", "dtype")

    def __init__(self, a: Array) -> None:
        self.buffer = a._alloc.buffer
        self.lo, self.hi, self.offset = a._lo, a._hi, a._offset
        self.shape, self.strides, self.dtype = a.shape, a.strides, a.dtype

    def view(self, memory: np.ndarray, base: int) -> np.ndarray:
        if 0 in self.shape:
            return np.empty(self.shape, self.dtype)
        return np.ndarray(self.shape, self.dtype, buffer=memory, offset=self.offset - base,
                          strides=self.strides)


def _selects_all(index: Any, shape: tuple[int, ...]) -> bool:
    """Whether ``index`` (slices and at most one ``...``) selects every element of an array of
    ``shape``, once each (``a[...]``, ``a[:]``, ``a[0:n]``, ``a[:, 0:m]``)."""
    items = index if type(index) is tuple else (index,)
    if not all(k is Ellipsis or isinstance(k, slice) for k in items):
        return False
    ellipses = [n for n, k in enumerate(items) if k is Ellipsis]
    if len(ellipses) > 1 or len(items) - len(ellipses) > len(shape):
        return False
    before = items[:ellipses[0]] if ellipses else items
    after = items[ellipses[0] + 1:] if ellipses else ()
    dims = list(range(len(before))) + list(range(len(shape) - len(after), len(shape)))
    return all(k.indices(shape[d]) == (0, shape[d], 1)
               for k, d in zip(before + after, dims))


class SimCallLaunch:
    """One queued library call: ``begin()`` snapshots, ``end(state)`` runs and publishes."""

    __slots__ = ("name", "fn", "args", "kwargs", "inputs", "written", "results", "leaves",
                 "device", "known")

    def __init__(self, call: LibraryCall, fn: Callable[..., Any], results: list[Array],
                 leaves: list[Any]) -> None:
        self.name = call.name
        self.fn = fn
        self.args, self.kwargs = call.args, call.kwargs
        self.inputs = [_Layout(a) for a in call.arrays]
        self.written = set(call.written)
        #: the written arguments that are the call's outputs: not all of them where what it
        #: writes is unknown, nor a generator's state (its draws read it)
        self.known = set() if call.assumed else self.written - (
            {len(self.inputs) - 1} if call.state else set())
        self.results = [_Layout(a) for a in results]
        # per result leaf: index into results, or a view's (shape, dtype), or None (no array)
        self.leaves = leaves
        self.device = 0               # the device it runs on (set when it is enqueued)

    def _check(self, value: np.ndarray, shape: tuple[int, ...], dtype: np.dtype) -> None:
        if value.shape != shape or value.dtype != dtype:
            raise RuntimeError(
                f"call '{self.name}' produced {value.dtype}{list(value.shape)} where "
                f"{dtype}{list(shape)} was inferred: its result depends on the data; report "
                "this function as data-dependent")

    def begin(self) -> dict[int, tuple[Any, int, np.ndarray]]:
        return snapshot(self.inputs, self.device)

    def written_ranges(self) -> list[tuple[int, int, int, bool]]:
        """``(uid, lo, hi, overwritten)`` of the call's written arguments and its results:
        results are overwritten; an argument is where the call writes every byte of it from
        other data (:meth:`_overwrites`)."""
        return ([(a.buffer.uid, a.lo, a.hi, self._overwrites(i))
                 for i, a in ((i, self.inputs[i]) for i in self.written)]
                + [(r.buffer.uid, r.lo, r.hi, True) for r in self.results])

    def _overwrites(self, i: int) -> bool:
        """Whether written argument ``i`` gets every byte anew, none derived from its old
        ones: a fill, a ``copyto``, an ``out=`` without ``where=`` or an assignment to every
        element (``a[...] = b``), over dense elements that no other argument reads. Another
        in-place function (sort, put, an indexed ``__setitem__``, a ufunc's ``at``) reads or
        keeps what it writes."""
        a = self.inputs[i]
        if i not in self.known or "where" in self.kwargs or not dense(a):
            return False
        if self.name == "ndarray.fill":
            return True
        if self.name == "ndarray.__setitem__" and i == 0 and len(self.args) > 1:
            # (a[...] = b, a[:] = b, a[0:n] = b: every element of a from b, unless b is a)
            if not _selects_all(self.args[1], a.shape):
                return False
        elif (self.name != "copyto" and self.name in IN_PLACE) or self.name.endswith(".at"):
            return False
        return not any(j != i and overlap(a, b) for j, b in enumerate(self.inputs))

    def end(self, snaps: dict[int, tuple[Any, int, np.ndarray]]) -> None:
        views = []
        for i, a in enumerate(self.inputs):
            _, base, snap = snaps[a.buffer.uid]
            view = a.view(snap, base)
            if i not in self.written:
                view.flags.writeable = False
            views.append(as_called(view, self.name, i in self.written))
        with quiet():
            result = self.fn(*fill(self.args, views), **fill(self.kwargs, views))
        values = flatten(result)
        if len(values) != len(self.leaves):
            raise RuntimeError(f"call '{self.name}' returned {len(values)} values where "
                               f"{len(self.leaves)} were inferred")
        for value, leaf in zip(values, self.leaves):
            if leaf is None:
                continue
            if type(leaf) is tuple:     # (a view of an argument: nothing to publish)
                self._check(np.asarray(value), *leaf)
                continue
            out = self.results[leaf]
            value = np.asarray(value)
            if not value.dtype.isnative:        # (host data: converted, result_meta.classify)
                value = value.astype(native(value.dtype))
            self._check(value, out.shape, out.dtype)
            out.view(out.buffer.on(self.device), 0)[...] = value
        for i in self.written:
            a = self.inputs[i]
            buf, base, snap = snaps[a.buffer.uid]
            buf.on(self.device)[a.lo:a.hi] = snap[a.lo - base: a.hi - base]


def make_call(runtime: Any, call: LibraryCall, accesses: list[Access]) -> SimCallLaunch | None:
    """Prepare a call (infer its result); ``None`` when it must run at once (synchronizing)."""
    fn = call.resolve("sim")
    try:
        meta = infer(call, fn)
    except Synchronizing:
        return None
    new: list[Array] = []
    call.results = allocate_results(runtime, call, meta, new)
    leaves = []
    by_id = {id(a): k for k, a in enumerate(new)}
    for leaf in flatten(call.results):
        index = by_id.get(id(leaf))
        if index is None and isinstance(leaf, Array):
            leaves.append((leaf.shape, leaf.dtype))
        else:
            leaves.append(index)
    for a in new:
        alloc = a._alloc
        accesses.append(Access(alloc.id, alloc, a._lo, a._hi, True, a.describe()))
    return SimCallLaunch(call, fn, new, leaves)
