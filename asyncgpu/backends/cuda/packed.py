"""Packed launches: one ``cuLaunchKernel`` call with a prebuilt parameter buffer.

The model
---------
Numba's own launch path costs 25 to 60 us of host time per launch on an H100 host: it wraps
every array again, converts every scalar to a ctypes object and goes through cuda.core. CuPy's
``RawKernel.__call__`` costs 5 to 12 us. Both do per launch what can be done once per kernel and
argument *types*: work out the kernel's parameter layout. A :class:`PackedPlan` holds that
layout as a :class:`struct.Struct` (native alignment, which is the C rule CUDA uses for kernel
parameters), the kernel's function handle and one parameter buffer; a launch packs the argument
values into the buffer and calls ``cuLaunchKernel`` with ``CU_LAUNCH_PARAM_BUFFER_POINTER``
(through the backend's :class:`~asyncgpu.backends.cuda.calls.CudaCalls`).
The driver copies the parameters during the call, so the buffer can be reused at once.

Numba's parameter ABI (numba-cuda's ``_Kernel._prepare_args``) flattens an array argument into
``meminfo, parent, nitems, itemsize, data, shape[ndim], strides[ndim]`` (all 64-bit), a complex
scalar into its two parts, and passes integers and floats at their own width. Argument kinds
outside that set (booleans, half floats, records, tuples, enums) and debug or cooperative kernels
keep Numba's own launch: :func:`numba_plan` returns ``None`` for them.

Invariants
----------
* A plan is built from the compiled kernel's argument types only, never from values, so one plan
  serves every launch with arguments of those types.
* ``pack_into`` runs at enqueue time under the runtime's lock, so sharing the buffer between
  launches of one plan is safe.

Example::

    plan = cuda_c_plan(raw_kernel.kernel.ptr, params, calls)    # once per kernel
    plan.launch((a_ptr, b_ptr, 2.0, n), grid, block, 0, stream_ptr)
"""

from __future__ import annotations

import ctypes
import functools
import struct
from typing import Any

import numpy as np

from .calls import CudaCalls

# cuLaunchKernel's "extra" markers (cuda.h)
_PARAM_BUFFER_POINTER = 1
_PARAM_BUFFER_SIZE = 2
_PARAM_END = 0

#: struct codes of scalar dtypes (native alignment and sizes match CUDA's parameter layout).
_STRUCT_CODE = {
    "b": "b", "B": "B", "h": "h", "H": "H", "i": "i", "I": "I", "l": "q", "L": "Q",
    "q": "q", "Q": "Q", "e": "e", "f": "f", "d": "d", "?": "?", "F": "ff", "D": "dd",
}


class PackedPlan:
    """A kernel's function handle, parameter layout and reusable parameter buffer."""

    __slots__ = ("handle", "struct", "buf", "buf_ptr", "size", "extra", "extra_ptr", "splits",
                 "calls", "pack")

    def __init__(self, handle: int, fmt: str, splits: tuple[int, ...], calls: CudaCalls) -> None:
        self.handle = int(handle)
        self.struct = struct.Struct("@" + fmt)
        # The driver wants the exact end of the last parameter: no tail padding (a C struct's
        # sizeof, rounded up, makes it refuse the launch with "too many resources requested").
        self.buf = ctypes.create_string_buffer(max(self.struct.size, 8))
        self.buf_ptr = ctypes.addressof(self.buf)
        self.size = ctypes.c_size_t(self.struct.size)
        self.extra = (ctypes.c_void_p * 5)(
            _PARAM_BUFFER_POINTER, ctypes.addressof(self.buf),
            _PARAM_BUFFER_SIZE, ctypes.addressof(self.size), _PARAM_END,
        )
        self.extra_ptr = ctypes.addressof(self.extra)
        self.splits = splits          # positions of complex values to split into (real, imag)
        self.calls = calls            # the backend's CUDA calls (CuPy's or DriverCalls)
        # pack(*values) is struct.pack_into(buf, 0, *values) without building that argument
        # tuple per launch (partial passes the values on the C stack)
        self.pack = functools.partial(self.struct.pack_into, self.buf, 0)

    def launch(self, values: tuple[Any, ...], grid: tuple[int, int, int],
               block: tuple[int, int, int], shared: Any, stream_ptr: Any) -> None:
        """Pack ``values`` (in the plan's order and kinds, complex values whole) and enqueue
        the kernel: every packed launch goes through here."""
        if self.splits:
            values = split_complex(values, self.splits)
        self.pack(*values)
        self.calls.launch_kernel(self.handle, grid[0], grid[1], grid[2], block[0], block[1],
                                 block[2], shared, stream_ptr, self.extra_ptr)


def split_complex(values: tuple[Any, ...], splits: tuple[int, ...]) -> tuple[Any, ...]:
    out: list[Any] = []
    start = 0
    for i in splits:
        out.extend(values[start:i])
        z = complex(values[i])
        out.extend((z.real, z.imag))
        start = i + 1
    out.extend(values[start:])
    return tuple(out)


def cuda_c_plan(handle: int, params: Any, calls: CudaCalls) -> PackedPlan | None:
    """The plan of a typed CUDA C kernel (pointers, then scalars by declared dtype)."""
    fmt = []
    splits = []
    for i, p in enumerate(params):
        if p.is_array:
            fmt.append("Q")
            continue
        if p.dtype is None:
            return None
        code = _STRUCT_CODE.get(np.dtype(p.dtype).char)
        if code is None:
            return None
        if len(code) == 2:
            splits.append(i)
        fmt.append(code)
    return PackedPlan(handle, "".join(fmt), tuple(splits), calls)


def numba_plan(compiled: Any, calls: CudaCalls) -> PackedPlan | None:
    """The plan of a Numba ``_Kernel`` compiled for one signature, or ``None`` if unsupported."""
    from numba.core import types

    if getattr(compiled, "debug", False) or getattr(compiled, "cooperative", False):
        return None
    if getattr(compiled, "extensions", None):
        return None
    fmt = []
    splits = []
    position = 0   # index in the flattened value tuple that the launch builds
    for ty in compiled.argument_types:
        if isinstance(ty, types.Array):
            fmt.append("q" * (5 + 2 * ty.ndim))
            position += 5 + 2 * ty.ndim
            continue
        if isinstance(ty, types.Integer):
            code = {8: "b", 16: "h", 32: "i", 64: "q"}.get(ty.bitwidth)
            if code is None:
                return None
            fmt.append(code if ty.signed else code.upper())
        elif ty == types.float32:
            fmt.append("f")
        elif ty == types.float64:
            fmt.append("d")
        elif ty in (types.complex64, types.complex128):
            fmt.append("ff" if ty == types.complex64 else "dd")
            splits.append(position)
        else:
            return None
        position += 1
    cufunc = compiled._codelibrary.get_cufunc()
    return PackedPlan(int(cufunc.handle), "".join(fmt), tuple(splits), calls)


def numba_array_fields(array: Any, ptr: int) -> tuple[int, ...]:
    """The values Numba's ABI passes for an array: meminfo, parent, nitems, itemsize, data,
    shape, strides."""
    size = 1
    for n in array.shape:
        size *= n
    return (0, 0, size, array.dtype.itemsize, ptr, *array.shape, *array.strides)
