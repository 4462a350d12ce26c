"""``asyncgpu.Array``: a NumPy-like array in GPU memory whose host accesses are scheduled.

The model
---------
An :class:`Allocation` (``asyncgpu.runtime.allocation``) is one block of memory from the backend
(on ``cuda`` device memory with a pinned host mirror, or managed memory with
``memory="managed"``; byte arrays on ``sim``) with its location flags (``HOST``: the host wrote
or read it last, ``DEVICE``: a kernel did) and its lifetime. An :class:`Array` is a view of an
allocation: ``shape``, ``dtype``, ``strides`` and a byte ``offset``; slicing gives another view
of the same allocation (no copy, as in CuPy), and dependencies are computed on the byte extent
each view covers, so disjoint halves of one array do not wait for each other.

Host access goes through the runtime: reading waits only for the unfinished writers of the bytes
read (a read of data that kernels only read never blocks), writing waits for the unfinished
readers and writers of the bytes written. Setting a whole array of :data:`DEVICE_FILL_BYTES`
or more to one number (``x[...] = 0``, ``x[:] = 1.5``) is no host write: a fill node sets it
on the device, as CuPy does, and the host waits for nothing. Reads return NumPy copies, never
views of managed memory that a later kernel could change under the caller's feet.

Memory is given back to the backend only when no Array refers to the allocation *and* every node
that used it has finished (nodes keep their allocations alive): CuPy's pool would otherwise hand
the block to a new array while a kernel on another stream still reads it.

Example::

    x = ag.array(np.arange(8, dtype=np.float32))   # host-written: HOST
    k[1, 8](x)                                     # kernel writes x; returns at once
    x[2:4]                                         # a view, no wait
    print(x[3])                                    # waits for k only, then reads one element
"""

from __future__ import annotations

import math
import operator
import types
import weakref
from typing import Any

import numpy as np

from ..core.errors import FreedArrayError
from .allocation import (DEVICE, HOST, Allocation, View, c_strides, dense_layout,
                         describe, f_strides, new_view)
from .current import current_runtime
from .dtypes import UnsupportedDtype, array_dtype, fill_number
from .finalizers import in_finalizer
from .node_ops import ops
from .flags import Flags
from .host_values import HostValues
from .operators import ArrayOperators
from .recording_hook import recording_of, this_thread
from .sim_device import SimDevice

_FAKE = np.zeros(64, np.uint8)
#: A whole array of this many bytes or more set to one number is filled on the device.
DEVICE_FILL_BYTES = 1 << 20


def _normalize_key(key: Any, ndim: int) -> tuple[str, Any]:
    """Classify an index: ('scalar', ints) | ('basic', key) | ('advanced', key)."""
    tup = key if isinstance(key, tuple) else (key,)
    ints = []
    for k in tup:
        if isinstance(k, (bool, np.bool_)) or isinstance(k, (list, tuple, np.ndarray, Array)):
            return "advanced", key      # (a tuple inside the index is a sequence, as in NumPy)
        if isinstance(k, (int, np.integer)):
            ints.append(int(k))
        elif not (k is Ellipsis or k is None or isinstance(k, slice)):
            try:
                ints.append(operator.index(k))
            except TypeError:
                raise IndexError(
                    f"only integers, slices, ..., None and arrays are valid indices; got {k!r}"
                ) from None
    if len(ints) == len(tup) == ndim:
        return "scalar", ints
    return "basic", key


#: What to do instead of setting an array's layout field (``Array.__setattr__``).
_FIXED = {
    "shape": "a.reshape(shape) is a view of the same memory with the new shape (CuPy's "
             "a.shape = ... changes it in place)",
    "dtype": "a.view(dtype) reads the same bytes as another dtype, a.astype(dtype) converts "
             "them into a new array",
    "strides": "index, transpose or reshape the array for a view with other strides",
}


#: Values an assignment converts on the host (another library's device array is its own).
_HOST_VALUES = (bool, int, float, complex, str, bytes, list, tuple, np.ndarray, np.generic)


def _made(array: Any, name: str) -> bool:
    """Whether ``array``'s field ``name`` is set (it is, but while the array is made)."""
    try:
        getattr(array, name)
    except AttributeError:
        return False
    return True


class Array(View, HostValues, ArrayOperators):
    """An n-dimensional array in managed (unified) memory, scheduled by asyncgpu.

    Create arrays with :func:`asyncgpu.array`, :func:`asyncgpu.empty`, :func:`asyncgpu.zeros`
    and friends; pass them to kernels; read and write them from the host with NumPy indexing.
    ``a[i]`` (all indices integers) reads one element and returns a NumPy scalar; ``a[2:5]`` is
    a view sharing memory, like in CuPy; ``np.asarray(a)`` and ``a.numpy()`` return host copies;
    ``a[...] = values`` writes host values from the host. Each host access waits only for the
    work that touches the same bytes. Index arrays and masks (``a[idx]``, ``a[a > 0]``, and
    assignments through them or of an Array value) are nodes giving Arrays, as CuPy's
    (``asyncgpu.runtime.indexing``). Operators, reductions and methods (``a + b``, ``a @ b``,
    ``a.sum()``, ``a.astype(t)``, ...) are library-call nodes (``asyncgpu.runtime.operators``).
    """

    __slots__ = ("__weakref__",)     # (the other fields are View's)
    __array_priority__ = 100
    #: ``asyncgpu.Array[...]`` (and ``asyncgpu.cupy.ndarray[...]``) in type annotations.
    __class_getitem__ = classmethod(types.GenericAlias)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError(
            "asyncgpu.Array has no public constructor; use asyncgpu.array(data), "
            "asyncgpu.empty(shape, dtype) or asyncgpu.zeros(shape, dtype)"
        )

    def __setattr__(self, name: str, value: Any) -> None:
        # An array's layout is fixed once made: launches remembered by a recorded function,
        # and the pointers and Numba fields cached on the array, hold it (compiled, the
        # runtime sets the fields in C and never comes here; uncompiled, once, at the making)
        fix = _FIXED.get(name)
        if fix is not None and _made(self, name):
            raise AttributeError(f"asyncgpu arrays keep the {name} they were made with: {fix}")
        object.__setattr__(self, name, value)

    @classmethod
    def _view(cls, alloc: Allocation, shape: tuple[int, ...], dtype: np.dtype,
              strides: tuple[int, ...], offset: int) -> Array:
        return new_view(cls, alloc, shape, dtype, strides, offset)

    # -- NumPy-like metadata -------------------------------------------------------------------
    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return len(self.shape)

    @property
    def size(self) -> int:
        """Number of elements."""
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        """Bytes spanned by the elements (``size * itemsize``)."""
        return self.size * self.dtype.itemsize

    @property
    def itemsize(self) -> int:
        """Bytes per element."""
        return self.dtype.itemsize

    @property
    def is_c_contiguous(self) -> bool:
        """Whether the elements are laid out contiguously in C (row-major) order."""
        return self._contiguous

    @property
    def base(self) -> Array | None:
        """The whole allocation as an array of bytes if this is a view, else ``None``."""
        alloc = self._alloc
        if self._offset == 0 and self._hi - self._lo == alloc.nbytes and (
                self.is_c_contiguous or _OWN_LAYOUT.get(alloc) == self.strides):
            return None
        return Array._view(self._alloc, (self._alloc.nbytes,), np.dtype(np.uint8), (1,), 0)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d asyncgpu.Array")
        return self.shape[0]

    def __iter__(self) -> Any:
        """The sub-arrays along the first axis, as NumPy iterates (each a view; an element of a
        1-d array is read on the host)."""
        if not self.shape:
            raise TypeError("iteration over a 0-d asyncgpu.Array")
        return (self[i] for i in range(self.shape[0]))

    def __contains__(self, value: Any) -> bool:
        """``value in a``: whether any element equals it (a node, then a host read), as in
        NumPy: a string is in no array; what ``a == value`` refuses otherwise (a list, a NumPy
        array, a shape that does not broadcast) is refused here too, as CuPy refuses it."""
        if isinstance(value, str):
            return False
        equal = self == value
        return bool(equal.any()) if isinstance(equal, Array) else bool(equal)

    # -- views -------------------------------------------------------------------------------
    def _check_alive(self) -> None:
        if self._alloc.freed:
            raise FreedArrayError(
                f"array {self.describe()} has been freed; create a new array instead"
            )

    def _layout_of(self, key: Any) -> tuple[tuple[int, ...], tuple[int, ...], int]:
        """Shape, strides and byte offset of ``self[key]`` for basic indexing (no data access)."""
        probe = self._probe()
        v = probe[key]
        delta = v.__array_interface__["data"][0] - probe.__array_interface__["data"][0]
        return v.shape, v.strides, self._offset + delta

    def _first_axis_layout(self, key: Any
                           ) -> tuple[tuple[int, ...], tuple[int, ...], int] | None:
        """Shape, strides and byte offset of ``self[key]`` for a Python int or a slice of the
        first axis (the common views: ``x[a:b]``, ``m[i]``, ``m[a:b:s]``), as NumPy makes
        them; None for any other index, an int out of range or an empty slice (the general
        path answers those)."""
        shape = self.shape
        if not shape:
            return None
        n = shape[0]
        if type(key) is int:
            if not -n <= key < n:
                return None
            return shape[1:], self.strides[1:], self._offset + (key % n) * self.strides[0]
        if type(key) is slice:
            start, stop, step = key.indices(n)
            length = len(range(start, stop, step))
            if length == 0:
                return None
            st = self.strides[0]
            return (length, *shape[1:]), (st * step, *self.strides[1:]), self._offset + start * st
        return None

    def __getitem__(self, key: Any) -> Any:
        self._check_alive()
        if type(key) is int and len(self.shape) == 1 and -self.shape[0] <= key < self.shape[0]:
            # ``x[i]`` of a vector, the common scalar read (in loops over a small result),
            # without the general classification of the index
            if key < 0:
                key += self.shape[0]
            return self._alloc.runtime.read_element(self, self._offset + key * self.strides[0])
        if type(key) is tuple and len(key) == len(self.shape) and all(type(k) is int for k in key):
            # ``m[i, j]``: one element, every index a Python int (the general classification
            # would build the same list)
            return self._alloc.runtime.read_element(self, self._element_offset(key))
        layout = self._first_axis_layout(key)
        if layout is None:
            kind, norm = _normalize_key(key, self.ndim)
            if kind == "scalar":
                return self._alloc.runtime.read_element(self, self._element_offset(norm))
            if kind == "advanced":
                return ops.getitem(self, key)
            layout = self._layout_of(key)
        shape, strides, offset = layout
        return Array._view(self._alloc, shape, self.dtype, strides, offset)

    def _element_offset(self, index: Any) -> int:
        """Byte offset in the allocation of the element at an all-integer index."""
        offset = self._offset
        for axis, (idx, n, st) in enumerate(zip(index, self.shape, self.strides)):
            if not -n <= idx < n:
                raise IndexError(f"index {idx} is out of bounds for axis {axis} with size {n}")
            offset += (idx + n if idx < 0 else idx) * st
        return offset

    def __setitem__(self, key: Any, value: Any) -> None:
        self._check_alive()
        if isinstance(value, Array):
            # a device value: a node copies it, as in CuPy (no round trip through the host)
            return ops.setitem(self, key, value)
        if key is Ellipsis or (type(key) is slice and self.shape and key.start is None
                               and key.stop is None and key.step is None):
            # ``x[...] = values`` or ``x[:] = values``, the common rewrite of a whole array:
            # its own span, without working out a view's layout
            if (self.nbytes >= DEVICE_FILL_BYTES and fill_number(value, self.dtype)
                    and self._alloc.runtime.recording is None):
                # one number (converted as NumPy would, raising as NumPy does, before
                # anything is enqueued): a fill on the device, not every byte written on the
                # host and copied over (the host's write of 24 MB costs milliseconds). Not
                # while a function is recorded: a fill is not captured into graphs, where a
                # host write is refused with its remedy, as before
                typed = np.empty((), self.dtype)
                typed[()] = value
                return ops.dispatch("ndarray.fill", (self, typed[()]), {})
            # (a Fortran-ordered array also covers every byte of its span)
            lo, hi = self._lo, self._hi
            dense = self._contiguous or dense_layout(self.shape, self.strides, self.itemsize)
        else:
            kind, norm = _normalize_key(key, self.ndim)
            if kind == "advanced":
                # the value converted as NumPy's assignment converts it, raising as it does
                # (300 into int8, NaN into an int), before anything is enqueued: raised when
                # the node ran, the array was left unreadable
                if isinstance(value, _HOST_VALUES):
                    np.empty(np.shape(value), self.dtype)[...] = value
                return ops.setitem(self, key, value)
            if kind == "scalar":
                lo = self._element_offset(norm)
                hi = lo + self.dtype.itemsize
                dense = True
            else:
                shape, strides, offset = self._first_axis_layout(key) or self._layout_of(key)
                view = Array._view(self._alloc, shape, self.dtype, strides, offset)
                lo, hi = view._span()
                dense = view.is_c_contiguous     # every byte of [lo, hi) is written
        self._alloc.runtime.write_host(self, lo, hi, dense, key, value)

    def _span(self) -> tuple[int, int]:
        return self._lo, self._hi

    def reshape(self, *shape: Any, order: str = "C", copy: bool | None = None) -> Array:
        """A view with a new shape; of a non-contiguous array, a node whose result is a view
        where the shape allows one, else a copy (as in CuPy). ``order`` (``'F'``, ``'A'``) and
        ``copy`` are CuPy's: such a reshape is a node too."""
        self._check_alive()
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        if order != "C" or copy is not None:
            return ops.dispatch("ndarray.reshape", (self, shape),
                                {"order": order, "copy": copy})
        if not self.is_c_contiguous:
            return ops.dispatch("ndarray.reshape", (self, shape), {})
        probe = np.empty(0, self.dtype) if self.size == 0 else np.lib.stride_tricks.as_strided(
            _FAKE[: self.dtype.itemsize].view(self.dtype), (self.size,), (self.dtype.itemsize,)
        )
        v = probe.reshape(shape)
        return Array._view(self._alloc, v.shape, self.dtype, v.strides, self._offset)

    def ravel(self, order: str = "C") -> Array:
        """A flat view (of a non-contiguous array, as :meth:`reshape`: a copy unless a view
        can have the flat shape); ``order`` other than ``'C'``, CuPy's, is a node."""
        if order != "C":
            self._check_alive()
            return ops.dispatch("ndarray.ravel", (self,), {"order": order})
        return self.reshape(-1)

    @property
    def T(self) -> Array:
        """The transposed view (no copy)."""
        return self.transpose()

    def transpose(self, *axes: Any) -> Array:
        """A view with permuted axes (reversed by default, or with ``None``); ``axes`` must be
        a permutation of the axes, negative ones counted from the end, as in NumPy."""
        self._check_alive()
        if len(axes) == 1 and (axes[0] is None or isinstance(axes[0], (tuple, list))):
            axes = () if axes[0] is None else tuple(axes[0])
        ndim = self.ndim
        if not axes:
            order: tuple[int, ...] = tuple(reversed(range(ndim)))
        else:
            picked = []
            for axis in axes:
                try:
                    i = operator.index(axis)
                except TypeError:
                    i = ndim            # (not an axis: refused below)
                picked.append(i + ndim if -ndim <= i < 0 else i)
            order = tuple(picked)
            if sorted(order) != list(range(ndim)):
                # (an axis out of range is NumPy's AxisError, a ValueError and an IndexError)
                out = len(order) == ndim and any(not 0 <= i < ndim for i in order)
                raise (np.exceptions.AxisError if out else ValueError)(f"Array.transpose: axes must be a permutation of the array's "
                                 f"{ndim} axes (0 to {ndim - 1}, or -{ndim} to -1), each once, "
                                 f"as in NumPy; got {axes!r} for shape {self.shape}")
        return Array._view(self._alloc, tuple(self.shape[i] for i in order), self.dtype,
                           tuple(self.strides[i] for i in order), self._offset)

    @property
    def mT(self) -> Array:
        """The view with the last two axes swapped (a stack of transposed matrices)."""
        if self.ndim < 2:
            raise ValueError("matrix transpose with ndim < 2 is undefined")
        order = list(range(self.ndim))
        order[-2], order[-1] = order[-1], order[-2]
        return self.transpose(order)

    def view(self, dtype: Any = None) -> Array:
        """A view of the same memory with another dtype (no copy), by NumPy's rules: a dtype
        of another size needs a contiguous last axis, whose length changes accordingly."""
        self._check_alive()
        if dtype is None or (isinstance(dtype, type) and issubclass(dtype, (Array, np.ndarray))):
            return Array._view(self._alloc, self.shape, self.dtype, self.strides, self._offset)
        dtype = np.dtype(dtype)
        if dtype.hasobject or dtype.kind not in "biufc":
            raise TypeError(f"view({dtype}) of {self.describe()}: asyncgpu arrays hold booleans "
                            "and numbers only")
        if not dtype.isnative:
            # (a kernel reads the bytes in the device's order whatever the dtype says: Numba
            # refuses such an array at the launch, CUDA C and CuPy's kernels misread it)
            raise UnsupportedDtype(
                f"view({dtype.str}) of {self.describe()}: asyncgpu arrays hold numbers in "
                f"the device's byte order only, the order kernels read (CuPy refuses arrays of "
                f"the other order); view it as {dtype.name} "
                f"(x.view(numpy.{dtype.name})), and swap the bytes of data that is the other "
                "order on the host (asyncgpu.asarray of a NumPy array of either order converts "
                "its values)")
        v = self._probe().view(dtype)     # NumPy checks the layout and works out the shape
        return Array._view(self._alloc, v.shape, dtype, v.strides, self._offset)

    @property
    def real(self) -> Array:
        """The real part: a view for complex arrays, the array itself otherwise (as in CuPy)."""
        if self.dtype.kind != "c":
            return self
        return self._part(0)

    @real.setter
    def real(self, value: Any) -> None:
        self.real[...] = value

    @property
    def imag(self) -> Array:
        """The imaginary part: a view for complex arrays; for other dtypes a new array of
        zeros (as in CuPy, which does not return NumPy's read-only view)."""
        if self.dtype.kind != "c":
            self._check_alive()     # (as the complex case's view does)
            return full_array(self.shape, 0, self.dtype)
        return self._part(1)

    @imag.setter
    def imag(self, value: Any) -> None:
        if self.dtype.kind != "c":
            raise TypeError(f"array {self.describe()} does not have an imaginary part to set")
        self.imag[...] = value

    def _part(self, which: int) -> Array:
        self._check_alive()
        part = np.dtype(self.dtype.char.lower()).newbyteorder(self.dtype.byteorder)
        return Array._view(self._alloc, self.shape, part, self.strides,
                           self._offset + which * part.itemsize)

    def _probe(self) -> np.ndarray:
        """A NumPy array with this array's shape, dtype and strides over no real memory, for
        NumPy to work out layouts (never read)."""
        return np.lib.stride_tricks.as_strided(
            _FAKE[: self.dtype.itemsize].view(self.dtype), self.shape, self.strides
        )

    @property
    def flags(self) -> Flags:
        """Layout flags, as attributes (``a.flags.c_contiguous``) or by NumPy's keys
        (``a.flags['C_CONTIGUOUS']``)."""
        probe = self._probe().flags
        align = self.dtype.alignment
        aligned = self._offset % align == 0 and all(st % align == 0 for st in self.strides)
        return Flags(probe.c_contiguous, probe.f_contiguous, self.base is None, aligned)

    @property
    def flat(self) -> FlatIter:
        """A flat (C-order) iterator: ``a.flat[i]`` reads one element, ``a.flat[2:5]`` and
        ``a.flat[index_array]`` give arrays, iterating reads the array once, ``a.flat[k] = v``
        is a ``put`` node."""
        return FlatIter(self)

    @property
    def device(self) -> Any:
        """The device holding the array (on several, the one that used it last): on ``cuda``
        CuPy's ``cupy.cuda.Device`` of that GPU; on ``sim`` a :class:`SimDevice`, the
        runtime's virtual device."""
        rt = self._alloc.runtime
        home = self._alloc.home
        number = rt.devices[home if home >= 0 else 0]
        backend = rt.backend
        if backend.name == "cuda":
            return backend.cupy.cuda.Device(number)
        return SimDevice(number)

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        """Pickled by its values (a host read), as CuPy pickles; unpickled into an array of
        the runtime in use then."""
        data = self.numpy()
        fortran = data.flags.f_contiguous and not data.flags.c_contiguous
        return host_array, (data, None, "F" if fortran else "C")

    # -- lifetime ----------------------------------------------------------------------------
    def free(self) -> None:
        """Give the memory back now: waits for unfinished work on it; later use raises.

        Every view of the same allocation becomes unusable too (``FreedArrayError``), and so
        does a second ``free()``, even one racing this one in another thread. A fault of
        earlier work that the wait meets is raised after the memory is given back.

        Called by a finalizer the garbage collector runs, it waits for nothing: the array is
        unusable at once, and its memory is given back at the runtime's next call, after the
        work using it (a fault that wait meets is raised at the next host wait).
        """
        rt = self._alloc.runtime
        if in_finalizer():
            # (the collector may run it inside another call, or on a thread that call waits
            # for: the array is freed now, its memory given back at the runtime's next call)
            self._check_alive()
            rt.free_later(self._alloc)
            return
        with rt._lock:      # (checked under it: of two threads freeing it at once, one frees)
            self._check_alive()
            rt.free(self._alloc)

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        """CUDA Array Interface v3 (``cuda`` backend), safe to hand to other libraries.

        ``stream`` is a stream on which every unfinished asyncgpu node reading or writing this
        array is ordered (``None`` if there is none), so consumers that honour it (CuPy, Numba)
        order their work after asyncgpu's. What the consumer does afterwards is invisible to
        asyncgpu: see ``asyncgpu.runtime.interop`` and docs/guide/interop.md.
        """
        self._check_alive()
        return ops.cuda_array_interface(self)

    def _device_interface(self) -> dict[str, Any]:
        """The CUDA Array Interface without export bookkeeping (``stream: None``), for the
        runtime's own launches, which order their work themselves."""
        return self._device_interface_at(self._alloc.buffer)

    def _device_interface_at(self, buffer: Any) -> dict[str, Any]:
        """:meth:`_device_interface` over ``buffer`` (one device's copy of the allocation)."""
        ptr = buffer.device_pointer() + self._offset if self.size else 0
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (ptr, False),
                "strides": None if self.is_c_contiguous else self.strides, "version": 3,
                "stream": None}

    def __dlpack__(self, *, stream: Any = None, max_version: Any = None, dl_device: Any = None,
                   copy: Any = None) -> Any:
        """DLPack export: the consumer's ``stream`` is made to wait for asyncgpu's work on it.

        On ``cuda`` the capsule shares the device memory (``copy=True``: a copy node's
        result); on ``sim`` it holds a host copy, so ``copy=False`` raises ``BufferError``, as
        does a ``dl_device`` it cannot export to (``asyncgpu.runtime.export.dlpack``).
        """
        self._check_alive()
        return ops.dlpack(self, stream, max_version, dl_device, copy)

    def __dlpack_device__(self) -> tuple[int, int]:
        return ops.dlpack_device(self)


class FlatIter:
    """``Array.flat``: the elements in C order. Indexing with an integer reads one element
    (a NumPy scalar, like ``a[i]``); with a slice or index array it gives an Array (of a view
    for a contiguous array, else of a copy); iteration and ``len`` read the array once;
    assignment is a ``put`` node (values repeat cyclically, as in NumPy)."""

    __slots__ = ("base",)

    def __init__(self, base: Array) -> None:
        self.base = base

    def __len__(self) -> int:
        return self.base.size

    def __iter__(self) -> Any:
        return iter(self.base.numpy().ravel())

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        if copy is False:       # (NumPy 2's protocol, as Array.__array__: no view can be given)
            raise ValueError(f"{self!r}: a host array of an asyncgpu array's elements is always "
                             "a copy (np.asarray(a.flat, copy=False) cannot be honoured); use "
                             "np.asarray(a.flat) or a.ravel().get()")
        return self.base.numpy().ravel() if dtype is None else \
            self.base.numpy().ravel().astype(dtype)

    def _int(self, key: Any) -> int | None:
        if isinstance(key, (bool, np.bool_)):
            return None
        try:
            i = operator.index(key)
        except TypeError:
            return None
        n = self.base.size
        if not -n <= i < n:
            raise IndexError(f"index {i} is out of bounds for axis 0 with size {n}")
        return i % n

    def __getitem__(self, key: Any) -> Any:
        base = self.base
        i = self._int(key)
        if i is not None:
            return base[np.unravel_index(i, base.shape)] if base.ndim else base[()]
        return base.reshape(-1)[key]

    def __setitem__(self, key: Any, value: Any) -> None:
        base = self.base
        base._check_alive()
        i = self._int(key)
        if i is not None:
            index: Any = np.array([i])
        elif isinstance(key, Array):
            index = ops.flat_index(key, base.size)
        else:
            index = np.arange(base.size)[key]
        if isinstance(index, np.ndarray):
            index = host_array(index.ravel())
        if not isinstance(value, Array):
            value = np.asarray(value)
            if value.ndim:
                value = host_array(value.ravel())
        base.put(index, value)

    def __repr__(self) -> str:
        return f"<asyncgpu flat iterator of {self.base.describe()}>"


#: The layout of each allocation made in another order than C (``new_array(strides=...)``):
#: an array of that layout over the whole allocation owns it (``base`` is None), as a
#: C-contiguous one over the whole allocation does.
_OWN_LAYOUT: weakref.WeakKeyDictionary[Allocation, tuple[int, ...]] = weakref.WeakKeyDictionary()


def own_layout(alloc: Allocation, strides: tuple[int, ...]) -> None:
    """Record that an array of ``strides`` over the whole of ``alloc`` owns it."""
    _OWN_LAYOUT[alloc] = tuple(strides)


def new_array(runtime: Any, shape: tuple[int, ...], dtype: np.dtype, location: int,
              strides: tuple[int, ...] | None = None) -> Array:
    """Allocate an array through ``runtime`` (runtime-internal): C-contiguous, or with
    ``strides``, a dense layout of the shape (:func:`dense_layout`, non-negative strides)."""
    nbytes = math.prod(shape) * dtype.itemsize      # (exact: a Python int never wraps around)
    if nbytes >= 2**62:       # before the backend: no CUDA call with a size this large
        raise ValueError(f"an array {describe(dtype, shape)} needs {nbytes} bytes, too many "
                         "to allocate")
    with runtime._lock:
        # (the buffer and its Allocation made at once: a change of memory model in another
        # thread converts every allocation it finds, and must not come between the two)
        alloc = Allocation(runtime, runtime.allocate(nbytes), nbytes, location)
    if getattr(runtime, "placement", None) is not None:     # (several devices)
        alloc.home = runtime.pinned()
    if strides is None or nbytes == 0:
        strides = c_strides(shape, dtype.itemsize)
    else:
        strides = tuple(strides)
        if strides != c_strides(shape, dtype.itemsize):
            own_layout(alloc, strides)
    return Array._view(alloc, tuple(shape), dtype, strides, 0)


# -- constructing arrays ---------------------------------------------------------------------
def empty_array(shape: Any, dtype: Any, location: int, order: str = "C") -> Array:
    """A new array of the current runtime, its contents undefined, marked current at
    ``location`` (``HOST``: the host writes it next; 0: nobody wrote it); ``order`` ``'F'``
    lays it out in Fortran order."""
    shape, dt = _shape(shape), array_dtype(dtype)
    strides = f_strides(shape, dt.itemsize) if order == "F" else None
    return new_array(current_runtime(), shape, dt, location, strides)


def full_array(shape: Any, fill_value: Any, dtype: Any = None) -> Array:
    """A new array filled with ``fill_value`` (``asyncgpu.full`` and its kin): by the host, or
    on the device from :data:`DEVICE_FILL_BYTES` on (a one-number write, ``__setitem__``)."""
    dt = np.asarray(fill_value).dtype if dtype is None else dtype
    out = empty_array(shape, dt, HOST)
    if not isinstance(fill_value, Array) and np.ndim(fill_value) == 0:
        # (one number cast as NumPy's and CuPy's ``full`` cast it: unsafely, so NaN into an
        # integer array is a value, where an assignment refuses it)
        typed = np.empty((), out.dtype)
        np.copyto(typed, fill_value, casting="unsafe")
        fill_value = typed[()]
    _fill_new(out, fill_value)
    return out


def host_array(obj: Any, dtype: Any = None, order: str = "C") -> Array:
    """A new array holding a copy of host data ``obj`` (array-like; an :class:`Array` is read
    through the host), with NumPy's rules for ``dtype``: ``asyncgpu.array`` of anything that
    is not another library's device array. ``order`` ``'F'`` lays the copy out in Fortran
    order."""
    data = obj.numpy() if isinstance(obj, Array) else obj
    data = np.asarray(data, dtype=dtype)
    out = empty_array(data.shape, array_dtype(data.dtype), HOST, order)
    _fill_new(out, data)
    return out


def _fill_new(out: Array, value: Any) -> None:
    """The first write of a new array, ``out[...] = value``; in this thread's recording (a
    recorded function's scratch array), straight into its host copy, where any other host
    write is refused: nothing else can reach an allocation made a moment ago, and the
    recording copies it in before a launch reads it (its location is the host)."""
    rt = out._alloc.runtime
    if rt.recording is not None and recording_of(rt, this_thread()) is not None:
        out._host_view()[...] = value
    else:
        out[...] = value


def _shape(shape: Any) -> tuple[int, ...]:
    dims = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    out = []
    for d in dims:
        if isinstance(d, (bool, np.bool_)) or not isinstance(d, (int, np.integer)):
            raise TypeError(f"array dimensions must be integers; got {d!r} in shape {shape!r}")
        if d < 0:
            raise ValueError(f"negative dimensions are not allowed; got shape {shape!r}")
        out.append(int(d))
    total = 1
    for d in out:
        total *= d
    if total >= 2**62:
        raise ValueError(f"an array of shape {tuple(out)} is too large to allocate")
    return tuple(out)
