"""``asyncgpu.Array``: a NumPy-like array in GPU memory whose host accesses are scheduled.

The model
---------
An :class:`Allocation` is one block of memory from the backend (on ``cuda`` device memory with
a pinned host mirror, or managed memory with ``memory="managed"``; byte arrays on ``sim``) with
its location flags (``HOST``: the host wrote or read it last,
``DEVICE``: a kernel did) and its lifetime. An :class:`Array` is a view of an allocation:
``shape``, ``dtype``, ``strides`` and a byte ``offset``; slicing gives another view of the same
allocation (no copy, as in CuPy), and dependencies are computed on the byte extent each view
covers, so disjoint halves of one array do not wait for each other.

Host access goes through the runtime: reading waits only for the unfinished writers of the bytes
read (a read of data that kernels only read never blocks), writing waits for the unfinished
readers and writers of the bytes written. Reads return NumPy copies, never views of managed
memory that a later kernel could change under the caller's feet.

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

import itertools
import math
import operator
from typing import TYPE_CHECKING, Any

import numpy as np

from ._errors import FreedArrayError
from ._operators import ArrayOperators

if TYPE_CHECKING:
    from ._runtime import Runtime

HOST, DEVICE = 1, 2
_alloc_ids = itertools.count(1)
_FAKE = np.zeros(64, np.uint8)


def describe(dtype: np.dtype, shape: tuple[int, ...]) -> str:
    """``float32[1024]`` / ``int32[16x8]``: how messages name an array."""
    name = _dtype_names.get(dtype)
    if name is None:
        name = _dtype_names[dtype] = dtype.name     # (NumPy works the name out at each call)
    return f"{name}[{'x'.join(map(str, shape)) if shape else ''}]"


_dtype_names: dict[np.dtype, str] = {}


class Allocation:
    """A block of backend memory (runtime-owned; there is no public constructor)."""

    __slots__ = ("runtime", "buffer", "nbytes", "location", "freed", "id", "copy_back",
                 "__weakref__")
    #: Explicit frees so far, in every runtime (``Runtime.free``): whoever caches "these
    #: allocations are live" checks again only when it has moved.
    explicit_frees = 0

    def __init__(self, runtime: Runtime, buffer: Any, nbytes: int, location: int) -> None:
        self.runtime = runtime
        self.buffer = buffer
        self.nbytes = nbytes
        self.location = location
        self.freed = False
        self.id = next(_alloc_ids)
        #: explicit memory: the copy to the host a replayed graph issued behind itself
        #: (``ExplicitMemory.read_back``), which a host access waits for instead of fetching
        self.copy_back: Any = None

    def __del__(self) -> None:
        # Garbage collection may run in the middle of runtime bookkeeping: only queue the
        # buffer here; the runtime gives it back at its next entry point.
        buffer = getattr(self, "buffer", None)
        if buffer is not None:
            try:
                self.runtime.release_later(self.id, buffer)
            except Exception:  # interpreter shutdown: nothing left to order against
                pass


def _normalize_key(key: Any, ndim: int) -> tuple[str, Any]:
    """Classify an index: ('scalar', ints) | ('basic', key) | ('advanced', key)."""
    tup = key if isinstance(key, tuple) else (key,)
    ints = []
    for k in tup:
        if isinstance(k, (bool, np.bool_)) or isinstance(k, (list, np.ndarray, Array)):
            return "advanced", key
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


class Array(ArrayOperators):
    """An n-dimensional array in managed (unified) memory, scheduled by asyncgpu.

    Create arrays with :func:`asyncgpu.array`, :func:`asyncgpu.empty`, :func:`asyncgpu.zeros`
    and friends; pass them to kernels; read and write them from the host with NumPy indexing.
    ``a[i]`` (all indices integers) reads one element and returns a NumPy scalar; ``a[2:5]`` is
    a view sharing memory, like in CuPy; ``np.asarray(a)`` and ``a.numpy()`` return host copies;
    ``a[...] = values`` writes from the host. Each host access waits only for the work that
    touches the same bytes. Operators, reductions and methods (``a + b``, ``a @ b``,
    ``a.sum()``, ``a.astype(t)``, ...) are library-call nodes (``asyncgpu._operators``).
    """

    __slots__ = ("_alloc", "shape", "dtype", "strides", "_offset", "_lo", "_hi", "_cache",
                 "_contiguous")
    __array_priority__ = 100

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError(
            "asyncgpu.Array has no public constructor; use asyncgpu.array(data), "
            "asyncgpu.empty(shape, dtype) or asyncgpu.zeros(shape, dtype)"
        )

    @classmethod
    def _view(cls, alloc: Allocation, shape: tuple[int, ...], dtype: np.dtype,
              strides: tuple[int, ...], offset: int) -> Array:
        self = object.__new__(cls)
        self._alloc = alloc
        self.shape = shape
        self.dtype = dtype
        self.strides = strides
        self._offset = offset
        self._cache: dict[str, Any] = {}
        if 0 in shape:
            self._lo = self._hi = offset
        else:
            lo = hi = offset
            for n, st in zip(shape, strides):
                span = (n - 1) * st
                if span < 0:
                    lo += span
                else:
                    hi += span
            self._lo, self._hi = lo, hi + dtype.itemsize
        expected = dtype.itemsize
        contiguous = True
        for n, st in zip(reversed(shape), reversed(strides)):
            if n != 1 and st != expected:
                contiguous = False
                break
            expected *= n
        self._contiguous = contiguous
        return self

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
        if self._offset == 0 and self._hi - self._lo == self._alloc.nbytes and self.is_c_contiguous:
            return None
        return Array._view(self._alloc, (self._alloc.nbytes,), np.dtype(np.uint8), (1,), 0)

    def describe(self) -> str:
        """``float32[1024]``: the dtype and shape, as error messages name arrays."""
        # cached: every host access labels its node with it, and NumPy's dtype.name is slow
        text = self._cache.get("describe")
        if text is None:
            text = self._cache["describe"] = describe(self.dtype, self.shape)
        return text

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d asyncgpu.Array")
        return self.shape[0]

    # -- views -------------------------------------------------------------------------------
    def _check_alive(self) -> None:
        if self._alloc.freed:
            raise FreedArrayError(
                f"array {self.describe()} has been freed; create a new array instead"
            )

    def _layout_of(self, key: Any) -> tuple[tuple[int, ...], tuple[int, ...], int]:
        """Shape, strides and byte offset of ``self[key]`` for basic indexing (no data access)."""
        probe = np.lib.stride_tricks.as_strided(
            _FAKE[: self.dtype.itemsize].view(self.dtype), self.shape, self.strides
        )
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
                return self.numpy()[key]
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
            value = value.numpy()
        if key is Ellipsis or (type(key) is slice and self.shape and key.start is None
                               and key.stop is None and key.step is None):
            # ``x[...] = values`` or ``x[:] = values``, the common rewrite of a whole array:
            # its own span, without working out a view's layout
            lo, hi, dense = self._lo, self._hi, self._contiguous
        else:
            kind, norm = _normalize_key(key, self.ndim)
            if kind == "advanced":
                lo, hi = self._lo, self._hi
                dense = False
            elif kind == "scalar":
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

    def reshape(self, *shape: Any) -> Array:
        """A view with a new shape; a non-contiguous array is copied by a node (as in CuPy)."""
        self._check_alive()
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        if not self.is_c_contiguous:
            from ._library import dispatch
            return dispatch("ndarray.reshape", (self, shape), {})
        probe = np.empty(0, self.dtype) if self.size == 0 else np.lib.stride_tricks.as_strided(
            _FAKE[: self.dtype.itemsize].view(self.dtype), (self.size,), (self.dtype.itemsize,)
        )
        v = probe.reshape(shape)
        return Array._view(self._alloc, v.shape, self.dtype, v.strides, self._offset)

    def ravel(self) -> Array:
        """A flat view (a copy, by a node, for a non-contiguous array)."""
        return self.reshape(-1)

    @property
    def T(self) -> Array:
        """The transposed view (no copy)."""
        return self.transpose()

    def transpose(self, *axes: int) -> Array:
        """A view with permuted axes (reversed by default)."""
        self._check_alive()
        order = tuple(axes[0]) if len(axes) == 1 and isinstance(axes[0], (tuple, list)) else axes
        order = order or tuple(reversed(range(self.ndim)))
        return Array._view(self._alloc, tuple(self.shape[i] for i in order), self.dtype,
                           tuple(self.strides[i] for i in order), self._offset)

    # -- host reads --------------------------------------------------------------------------
    def _host_view(self) -> np.ndarray:
        view = self._cache.get("host")
        if view is None:
            host = self._alloc.buffer.host
            if self.size == 0:
                view = np.empty(self.shape, self.dtype)
            else:
                view = np.ndarray(self.shape, self.dtype, buffer=host, offset=self._offset,
                                  strides=self.strides)
            self._cache["host"] = view
        return view

    def numpy(self) -> np.ndarray:
        """A host copy of the array (waits only for unfinished writers of these bytes)."""
        self._check_alive()
        return self._alloc.runtime.read_host(self)

    get = numpy

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        out = self.numpy()
        return out if dtype is None else out.astype(dtype, copy=False)

    def tolist(self) -> Any:
        """The values as (nested) Python lists."""
        return self.numpy().tolist()

    def item(self) -> Any:
        """The single element of a size-1 array as a Python scalar."""
        if self.size != 1:
            raise ValueError(f"can only convert an array of size 1 to a scalar, got {self.describe()}")
        return self.numpy().reshape(()).item()

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __index__(self) -> int:
        if self.dtype.kind not in "iu":
            raise TypeError("only integer arrays of size 1 can be used as an index")
        return int(self.item())

    def __bool__(self) -> bool:
        return bool(self.item())

    def __repr__(self) -> str:
        if self._alloc.freed:
            return f"asyncgpu.Array(<freed {self.describe()}>)"
        body = np.array2string(self.numpy(), separator=", ", prefix="asyncgpu.Array(")
        return f"asyncgpu.Array({body}, dtype={self.dtype.name})"

    # -- lifetime ----------------------------------------------------------------------------
    def free(self) -> None:
        """Give the memory back now: waits for unfinished work on it; later use raises.

        Every view of the same allocation becomes unusable too (``FreedArrayError``).
        """
        self._check_alive()
        self._alloc.runtime.free(self._alloc)

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        """CUDA Array Interface v3 (``cuda`` backend), safe to hand to other libraries.

        ``stream`` is a stream on which every unfinished asyncgpu node reading or writing this
        array is ordered (``None`` if there is none), so consumers that honour it (CuPy, Numba)
        order their work after asyncgpu's. What the consumer does afterwards is invisible to
        asyncgpu: see ``asyncgpu._interop`` and docs/api.md ("Interop").
        """
        self._check_alive()
        from ._interop import cuda_array_interface
        return cuda_array_interface(self)

    def _device_interface(self) -> dict[str, Any]:
        """The CUDA Array Interface without export bookkeeping (``stream: None``), for the
        runtime's own launches, which order their work themselves."""
        ptr = self._alloc.buffer.device_pointer() + self._offset if self.size else 0
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (ptr, False),
                "strides": None if self.is_c_contiguous else self.strides, "version": 3,
                "stream": None}

    def __dlpack__(self, *, stream: Any = None, max_version: Any = None, dl_device: Any = None,
                   copy: Any = None) -> Any:
        """DLPack export: the consumer's ``stream`` is made to wait for asyncgpu's work on it.

        On ``cuda`` the capsule shares the device memory; on ``sim`` it holds a host copy.
        """
        self._check_alive()
        from ._interop import dlpack
        return dlpack(self, stream, max_version, dl_device, copy)

    def __dlpack_device__(self) -> tuple[int, int]:
        from ._interop import dlpack_device
        return dlpack_device(self)


def c_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    """Strides of a C-contiguous array of this shape."""
    acc, out = itemsize, []
    for n in reversed(shape):
        out.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(out))


def new_array(runtime: Runtime, shape: tuple[int, ...], dtype: np.dtype, location: int) -> Array:
    """Allocate a C-contiguous array through ``runtime`` (runtime-internal)."""
    nbytes = math.prod(shape) * dtype.itemsize      # (exact: a Python int never wraps around)
    if nbytes >= 2**62:       # before the backend: no CUDA call with a size this large
        raise ValueError(f"an array {describe(dtype, shape)} needs {nbytes} bytes, too many "
                         "to allocate")
    alloc = Allocation(runtime, runtime.allocate(nbytes), nbytes, location)
    return Array._view(alloc, tuple(shape), dtype, c_strides(shape, dtype.itemsize), 0)
