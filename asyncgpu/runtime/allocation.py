"""Allocations and the fields of the arrays that view them: what every launch reads.

The model
---------
An :class:`Allocation` is one block of backend memory (device memory with a pinned host mirror,
managed memory, or bytes on ``sim``) with its location flags and its lifetime. ``location`` says
which copy is current: ``HOST`` (the host wrote or read it last), ``DEVICE`` (a kernel did), or
both; ``freed`` is set by an explicit ``free()`` and never cleared. A :class:`View` is what an
:class:`asyncgpu.Array` is made of: the allocation, ``shape``, ``dtype``, ``strides``, the byte
``offset`` of the first element and the byte extent ``[lo, hi)`` the view covers, which the
dependency tracker compares; ``contiguous`` says the elements are packed in C order.

Invariants: ``lo <= offset < hi <= nbytes`` for a non-empty view and ``lo == hi == offset`` for an
empty one; an allocation's ``id`` is unique in the process; its buffer goes back to the backend
only through the runtime (``__del__`` queues the allocation, the runtime releases its buffer at
its next entry point), and only once nothing refers to the allocation any more.

A finalizer may bring an allocation back: when the collector frees a reference cycle it calls
the finalizers of every object of it, this one's ``__del__`` among them, before it looks
whether another finalizer stored one of them somewhere (a user's ``__del__`` putting the
cycle's array in a pool). So the runtime checks, when it takes the allocation off its queue,
that nothing else holds it; one that lives on gets a :class:`Requeue`, which queues it again
when it is collected next (Python calls an object's ``__del__`` only once).

These classes are compiled with the launch path (``setup.py``): binding an argument and booking
its location read their fields as C struct members.

Example::

    alloc = Allocation(rt, rt.allocate(32), 32, HOST)
    v = new_view(Array, alloc, (8,), np.dtype(np.float32), (4,), 0)
    (v._lo, v._hi, v._contiguous)          # (0, 32, True)
"""

from __future__ import annotations

import gc
import itertools
import weakref
from typing import Any

from ..core.placement import HOST_BIT, device_bit

#: The location bits of the host and of the first device (several devices: ``device_bit``).
HOST, DEVICE = HOST_BIT, device_bit(0)
_alloc_ids = itertools.count(1)
_frees = 0


def explicit_frees() -> int:
    """Explicit frees so far, in every runtime: whoever caches "these allocations are live"
    checks again only when this has moved."""
    return _frees


def count_explicit_free() -> None:
    """Count one explicit free (``Runtime.free``)."""
    global _frees
    _frees += 1


class Allocation:
    """A block of backend memory (runtime-owned; there is no public constructor)."""

    __slots__ = ("runtime", "buffer", "nbytes", "location", "freed", "id", "copy_back",
                 "fixed", "home", "requeue", "exported", "__weakref__")

    def __init__(self, runtime: Any, buffer: Any, nbytes: int, location: int) -> None:
        self.runtime = runtime
        self.buffer = buffer
        self.nbytes = nbytes
        self.location = location
        self.freed = False
        self.id = next(_alloc_ids)
        #: explicit memory: the copy to the host a replayed graph issued behind itself
        #: (``ExplicitMemory.read_back``), which a host access waits for instead of fetching
        self.copy_back: Any = None
        #: several devices: the device slot that used it last (or was pinned when it was
        #: made: ``asyncgpu.device``), where a kernel goes when no device holds enough of its
        #: inputs (-1: none)
        self.home = -1
        #: another library's memory (imported without a copy) on device ``home``: on several
        #: devices every node writing it runs there, so that the writes land in that memory
        self.fixed = False
        #: a :class:`Requeue`, once a finalizer has brought this allocation back (else None)
        self.requeue = None
        #: cuda: its device memory was handed to another library (``asyncgpu.runtime.export``),
        #: whose work on it runs on streams the runtime does not see: dropped, its memory is
        #: given back only after the device has been synchronized as a whole
        self.exported = False

    def __del__(self) -> None:
        # Garbage collection may run in the middle of runtime bookkeeping, and another
        # finalizer of the same cycle may still bring this allocation back: only queue it
        # here; the runtime gives its buffer back at its next entry point if it is dead then.
        # (getattr: uncompiled, buffer is unset if __init__ failed; the try: at interpreter
        # shutdown the module's globals may be gone, and a compiled finalizer's error would
        # be printed through a sys.excepthook already torn down)
        try:
            if getattr(self, "buffer", None) is not None:
                queue(self)
        except Exception:
            pass


def queue(alloc: Allocation) -> None:
    """Queue ``alloc`` for its runtime to release (``Runtime.release_later``)."""
    try:
        alloc.runtime.release_later(alloc)
    except Exception:  # interpreter shutdown: nothing left to order against
        pass


class Requeue:
    """Held by an allocation a finalizer brought back (``Allocation.requeue``, set by
    ``Issuing._drain_releases``), with which it forms a cycle: when the collector frees that
    cycle, this ``__del__`` queues the allocation again, as the allocation's own, already
    called, no longer can."""

    __slots__ = ("alloc",)

    def __init__(self, alloc: Allocation) -> None:
        self.alloc = alloc

    def __del__(self) -> None:
        alloc = self.alloc
        try:
            if alloc is not None and alloc.buffer is not None:
                queue(alloc)
        except Exception:   # (at interpreter shutdown the module's globals may be gone)
            pass


class View:
    """The fields of an array: an allocation, its layout, and the bytes it covers."""

    __slots__ = ("_alloc", "shape", "dtype", "strides", "_offset", "_lo", "_hi", "_cache",
                 "_contiguous")

    def describe(self) -> str:
        """``float32[1024]``: the dtype and shape, as error messages name arrays."""
        # cached: every host access labels its node with it, and NumPy's dtype.name is slow
        text = self._cache.get("describe")
        if text is None:
            text = self._cache["describe"] = describe(self.dtype, self.shape)
        return text


def allocations_and_views() -> list[Any]:
    """Every allocation and view (array) the garbage collector tracks, for the walk at a
    change of memory model (``asyncgpu.runtime.switch``). The collector's list holds every
    tracked object, a tuple another thread is still building from an iterator among them,
    which CPython may only grow while nothing else refers to it. Compiled, this function is C
    from the list's making to its release, and no other thread runs in between; uncompiled,
    one may, and a ``tuple(generator)`` it is running can fail with ``SystemError``.
    ``type()``, not ``isinstance``: isinstance may read ``__class__``, which runs Python (and
    raises ReferenceError on a weakref.proxy whose referent is gone)."""
    found = []
    for obj in gc.get_objects():
        kind = type(obj)
        if issubclass(kind, Allocation) or issubclass(kind, View):
            found.append(obj)
    return found


def describe(dtype: Any, shape: tuple[int, ...]) -> str:
    """``float32[1024]`` / ``int32[16x8]``: how messages name an array; a byte order other
    than the machine's is named (``float32 (big-endian)[4]``: ``float32[4]`` contradicted
    "expected a float32 array")."""
    name = _dtype_names.get(dtype)
    if name is None:
        name = dtype.name       # (NumPy works the name out at each call)
        if not dtype.isnative:
            name += f" ({'big' if dtype.byteorder == '>' else 'little'}-endian)"
        _dtype_names[dtype] = name
    return f"{name}[{'x'.join(map(str, shape)) if shape else ''}]"


_dtype_names: dict[Any, str] = {}


def new_view(cls: Any, alloc: Allocation, shape: tuple[int, ...], dtype: Any,
             strides: tuple[int, ...], offset: int) -> Any:
    """A ``cls`` (a :class:`View` subclass) over ``alloc``; computes its byte extent."""
    self = cls.__new__(cls)
    # (the cache before the allocation: a view whose making was interrupted may still be
    # found by the walk of a memory-model switch, which clears the caches of an allocation's
    # views)
    self._cache = {}
    self._alloc = alloc
    self.shape = shape
    self.dtype = dtype
    self.strides = strides
    self._offset = offset
    itemsize = dtype.itemsize
    self._lo, self._hi = byte_extent(shape, strides, itemsize, offset)
    self._contiguous = c_contiguous(shape, strides, itemsize)
    return self


def byte_extent(shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int,
                offset: int) -> tuple[int, int]:
    """The bytes ``[lo, hi)`` that elements of this layout starting at ``offset`` cover
    (``(offset, offset)`` when there are none; negative strides reach below ``offset``)."""
    if 0 in shape:
        return offset, offset
    lo = hi = offset
    for n, st in zip(shape, strides):
        span = (n - 1) * st
        if span < 0:
            lo += span
        else:
            hi += span
    return lo, hi + itemsize


def c_contiguous(shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int) -> bool:
    """Whether elements of this layout are packed in C (row-major) order; with the shape and
    strides reversed, in Fortran order."""
    expected = itemsize
    for n, st in zip(reversed(shape), reversed(strides)):
        if n != 1 and st != expected:
            return False
        expected *= n
    return True


def c_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    """Strides of a C-contiguous array of this shape."""
    acc, out = itemsize, []
    for n in reversed(shape):
        out.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(out))


def f_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    """Strides of a Fortran-contiguous (column-major) array of this shape."""
    acc, out = itemsize, []
    for n in shape:
        out.append(acc)
        acc *= max(n, 1)
    return tuple(out)


def dense_layout(shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int) -> bool:
    """Whether the elements of this layout fill their byte span exactly, each byte once: C or
    Fortran order, or any other order of the axes (what NumPy's ``order='K'`` makes)."""
    expected = itemsize
    for st, n in sorted((st, n) for n, st in zip(shape, strides) if n != 1):
        if st != expected:
            return False
        expected *= n
    return True
