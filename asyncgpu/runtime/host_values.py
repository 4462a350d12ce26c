"""How an :class:`asyncgpu.Array`'s values reach the host, and the host's values the array.

Every method here is a host access ordered by the runtime: a read (``numpy``, ``get``,
``np.asarray(a)``, ``tolist``, ``item``, ``float(a)``, ``str(a)``, ...) waits only for the
unfinished writers of the bytes it reads; ``set`` is a host write of the whole array, waiting
for the unfinished readers and writers of those bytes. A read returns a copy, never a view of
memory a later kernel could change. The conversions follow NumPy 2 (``float(a)`` of a 0-d
array only), as CuPy's, which converts through NumPy.

Example::

    x = ag.zeros(4)
    k[1, 4](x)              # writes x; returns at once
    x.get()                 # waits for k, then copies the four values
    float(x[1:2].sum())     # a 0-d result: waits for the sum alone
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..core.errors import ArgumentError


_REPR_NAME = "asyncgpu.Array("


class HostValues:
    """The host reads and writes of :class:`asyncgpu.Array` (a mixin: the array's view,
    allocation and runtime are its own)."""

    __slots__ = ()

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

    def get(self, stream: Any = None, order: str = "C", out: np.ndarray | None = None,
            blocking: bool = True) -> np.ndarray:
        """A host copy, as CuPy's ``ndarray.get``: waits only for unfinished writers of these
        bytes, like :meth:`numpy`.

        ``order`` is the copy's layout: ``'C'`` (the default), ``'F'``, or ``'A'`` (``'F'`` for
        a Fortran-contiguous array, else ``'C'``). ``out``, a NumPy array of the same shape and
        dtype, receives the values instead (``order`` is then ignored) and is returned.
        ``stream`` is accepted for CuPy's sake and not used: the runtime orders the copy after
        the work that writes the array itself. The copy has completed when ``get`` returns,
        also with ``blocking=False``."""
        self._check_alive()
        if out is not None:
            if not isinstance(out, np.ndarray):
                raise TypeError(f"Array.get: out must be a numpy.ndarray, got "
                                f"{type(out).__name__}")
            if out.dtype != self.dtype:
                raise TypeError(f"Array.get: a {out.dtype} array cannot be obtained from a "
                                f"{self.dtype} array (out must have the array's dtype)")
            if out.shape != self.shape:
                raise ValueError(f"Array.get: shape mismatch: expected shape {self.shape}, "
                                 f"out has shape {out.shape}")
            if not out.flags.writeable:
                raise ValueError("Array.get: out is read-only")
            if not (out.flags.c_contiguous or out.flags.f_contiguous):
                raise RuntimeError("Array.get: out cannot be a non-contiguous array, as CuPy "
                                   "refuses it; get() a new array and copy it there")
            self._read_into(out)
            return out
        layout = order.upper() if isinstance(order, str) else order
        flags = None
        if layout == "A":
            flags = self._probe().flags
            layout = "F" if flags.f_contiguous and not flags.c_contiguous else "C"
        if layout not in ("C", "F"):
            raise ValueError(f"Array.get: unsupported order {order!r} (use 'C', 'F' or 'A', "
                             "as CuPy)")
        if layout == "C" and self.is_c_contiguous:
            return self.numpy()
        flags = flags or self._probe().flags
        if layout == "F" and flags.f_contiguous:
            return self.numpy()
        host = np.empty(self.shape, self.dtype, order=layout)
        self._read_into(host)
        return host

    def _read_into(self, out: np.ndarray) -> None:
        """Copy the values into host array ``out`` (same shape and dtype, checked): a host read
        of the whole array, ordered as :meth:`numpy`'s."""
        with self._alloc.runtime.host_access(self, self._lo, self._hi, False):
            np.copyto(out, self._host_view())

    def set(self, arr: np.ndarray, stream: Any = None) -> None:
        """Copy host array ``arr`` into this array, as CuPy's ``ndarray.set``: a host write of
        the whole array (``a[...] = arr``), so it waits only for the unfinished work that reads
        or writes these bytes. ``arr`` must be a NumPy array of the same shape and dtype
        (``TypeError``, ``ValueError`` otherwise, before anything is written). ``stream`` is
        accepted for CuPy's sake and not used: the runtime orders the write itself."""
        self._check_alive()
        if not isinstance(arr, np.ndarray):
            raise TypeError(f"Array.set: only a numpy.ndarray can be set to an asyncgpu.Array, "
                            f"got {type(arr).__name__}")
        if arr.dtype != self.dtype:
            raise TypeError(f"Array.set: a {arr.dtype} array cannot be set to a {self.dtype} "
                            "array (convert it first, arr.astype(a.dtype))")
        if arr.shape != self.shape:
            raise ValueError(f"Array.set: shape mismatch: the array has shape {self.shape}, "
                             f"the new values {arr.shape}")
        if not (self.is_c_contiguous or self.flags.f_contiguous):
            raise RuntimeError("Array.set: cannot set to a non-contiguous array, as CuPy "
                               "refuses it; assign through the view instead, a[...] = arr")
        self[...] = arr

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        if copy is False:       # (NumPy 2's protocol: a view was asked for, none can be given)
            raise ValueError("asyncgpu arrays live in device memory: a host array of one is "
                             "always a copy (np.asarray(a, copy=False) cannot be honoured); "
                             "use np.asarray(a) or a.get()")
        out = self.numpy()
        return out if dtype is None else out.astype(dtype, copy=False)

    def tobytes(self, order: str = "C") -> bytes:
        """The raw bytes of the elements (a host read), as ``numpy.ndarray.tobytes``."""
        return self.numpy().tobytes(order)

    def tolist(self) -> Any:
        """The values as (nested) Python lists."""
        return self.numpy().tolist()

    def item(self, *args: Any, **kwargs: Any) -> Any:
        """The single element of a size-1 array as a Python scalar (CuPy's ``item`` takes no
        index: ``ArgumentError`` for one)."""
        if args or kwargs:
            raise ArgumentError(
                f"asyncgpu.Array.item: takes no arguments (got {len(args) + len(kwargs)}); "
                "CuPy's signature is ndarray.item(self) and the GPU refuses this call too; "
                "index the element first: a.ravel()[i].item(), or a.get().item(...) on the "
                "host")
        if self.size != 1:
            raise ValueError(f"can only convert an array of size 1 to a scalar, got "
                             f"{self.describe()}")
        return self.numpy().reshape(()).item()

    def _number(self, kind: Any) -> Any:
        """``kind(self)`` (``float``, ``int``, ``complex``) as NumPy converts an array of this
        shape, which CuPy converts through (NumPy 2 takes 0-d arrays only): NumPy's refusal is
        met on a stand-in of no memory before the element is read."""
        if self.ndim:
            kind(np.lib.stride_tricks.as_strided(np.zeros(1, self.dtype), self.shape,
                                                 (0,) * self.ndim))
        return kind(self.item())

    def __float__(self) -> float:
        return self._number(float)

    def __int__(self) -> int:
        return self._number(int)

    def __complex__(self) -> complex:
        return self._number(complex)

    def __index__(self) -> int:
        if self.dtype.kind not in "iu" or self.ndim:
            raise TypeError(f"only integer scalar (0-d) arrays can be used as an index, as in "
                            f"NumPy; got {self.describe()}")
        return int(self.item())

    def __bool__(self) -> bool:
        size = self.size
        if size > 1:
            raise ValueError("The truth value of an array with more than one element is "
                             "ambiguous. Use a.any() or a.all()")
        if size == 0:
            raise ValueError("The truth value of an empty array is ambiguous. Use a.size > 0 "
                             "to check that an array is not empty")
        return bool(self.item())

    def __bytes__(self) -> bytes:
        """``bytes(a)``: the raw bytes of the elements in C order (a host read), as NumPy's and
        CuPy's."""
        return self.tobytes()

    def __str__(self) -> str:
        """NumPy's ``str`` of the values (a host read): ``'3.0'`` for a 0-d array."""
        if self._alloc.freed:
            return repr(self)
        return str(self.numpy())

    def __format__(self, spec: str) -> str:
        """A 0-d array formats as its value (``f"{a.sum():.3f}"``, a host read); other arrays
        only with an empty spec, as NumPy's arrays."""
        if self.ndim == 0:
            return format(self.numpy()[()], spec)
        if spec:
            raise TypeError("unsupported format string passed to asyncgpu.Array.__format__")
        return str(self)

    def __repr__(self) -> str:
        if self._alloc.freed:
            return f"asyncgpu.Array(<freed {self.describe()}>)"
        # NumPy's repr (its line width, ``shape=`` of empty and summarized arrays) under our
        # name, with the dtype always said
        extra = len(_REPR_NAME) - len("array(")
        text = np.array_repr(self.numpy(),
                             max_line_width=np.get_printoptions()["linewidth"] - extra)
        if "dtype=" not in text:
            text = f"{text[:-1]}, dtype={self.dtype.name})"
        lines = text[len("array("):].split("\n")
        return _REPR_NAME + "\n".join(lines[:1] + [" " * extra + line if line else line
                                                   for line in lines[1:]])
