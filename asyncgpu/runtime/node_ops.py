"""The operations of an :class:`~asyncgpu.Array` that make nodes, implemented above it.

The model
---------
An array's methods mostly work on the array itself (views, host access), but some make nodes:
a library call (``a + b``, ``a.reshape`` of a non-contiguous array: ``asyncgpu.runtime.library``),
advanced indexing (``asyncgpu.runtime.indexing``) and the exports to other libraries
(``asyncgpu.runtime.interop``). Those modules build on arrays, so the array module cannot
import them; it calls through the table :data:`ops` instead, which each of them fills with its
own functions when it is imported (the runtime package imports them all, before any array
exists).

Invariant: after ``import asyncgpu.runtime`` every entry is set; an entry is only ever the
one implementation of its operation (no copies, no fallbacks).

Example::

    ops.dispatch("add", (a, b), {})      # what ``a + b`` does: asyncgpu.runtime.library.dispatch
"""

from __future__ import annotations

from typing import Any, Callable


class NodeOps:
    """The table: one entry per operation, set by the module that implements it."""

    __slots__ = ("dispatch", "getitem", "setitem", "flat_index", "cuda_array_interface",
                 "dlpack", "dlpack_device")

    dispatch: Callable[..., Any]              # library.dispatch(path, args, kwargs)
    getitem: Callable[..., Any]               # indexing.getitem(x, key)
    setitem: Callable[..., Any]               # indexing.setitem(x, key, value)
    flat_index: Callable[..., Any]            # indexing.flat_index(key, size)
    cuda_array_interface: Callable[..., Any]  # interop.cuda_array_interface(array)
    dlpack: Callable[..., Any]                # interop.dlpack(array, stream, ...)
    dlpack_device: Callable[..., Any]         # interop.dlpack_device(array)


ops = NodeOps()
