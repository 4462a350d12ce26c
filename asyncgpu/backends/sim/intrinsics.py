"""Numba's CUDA intrinsics in its simulator, as the device computes them.

Numba's simulator (numba-cuda 0.30) computes ``cuda.cbrt`` as ``a ** (1 / 3)`` (NaN for a negative
number, where the device's cube root is negative), ``cuda.fma`` as ``a * b + c`` rounded twice, and
``cuda.popc``, ``cuda.brev``, ``cuda.clz`` and ``cuda.ffs`` on 32 bits whatever the argument's width
(``clz`` of an int64 1 is 31 there, 63 on the device) and raising for a negative number, and of
``cuda.fp16`` ``hfloor`` as a ceiling, ``hmax``/``hmin`` as NaN where one operand is (CUDA's
``__hmax``/``__hmin`` give the other), ``hfma`` rounded twice, ``hrsqrt`` and ``hexp10`` in half
precision. Here they are the device's: the cube root of NumPy, the fused multiply-add of
:func:`asyncgpu.runtime.cupy_arithmetic.fused_multiply_add` (``hfma`` too), the half float
functions in single precision rounded once, and the bit counts on the argument's width
(32 bits for an element of an int32 array or narrower, or a NumPy integer of 32 bits, else 64: a
Python integer, or a sum of two int32 elements, is an int64, as Numba types them). Its atomics run
on arrays of any dtype, and compute with the value as given; here an atomic of a dtype Numba's
compile refuses (:data:`ATOMIC_DTYPES`) raises, as the launch fails on the device, and the value
is converted to the array's dtype first, as Numba's are.

Invariant: each gives what an H200 gave for the same arguments (the half float ones: what
CUDA's documentation of ``__hfloor``, ``__hmax``, ``__hmin`` and ``__hfma`` says).

Example::

    cuda.clz(np.int64(1))        # 63
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from ...runtime.cupy_arithmetic import fused_multiply_add
from .elements import device_integer

_NARROW = (np.int8, np.int16, np.int32, np.uint8, np.uint16, np.uint32)


def _bits(value: Any) -> tuple[int, int]:
    """The argument's two's complement bits as an unsigned integer, and its width (an element
    of a narrow integer array keeps its own: ``asyncgpu.backends.sim.elements.Narrow``)."""
    width = 32 if isinstance(value, _NARROW) else getattr(value, "width", 64)
    return int(value) & ((1 << width) - 1), width


def cbrt(self: Any, a: Any) -> Any:
    return np.cbrt(a)


def fma(self: Any, a: Any, b: Any, c: Any) -> Any:
    return fused_multiply_add(a, b, c)


def popc(self: Any, val: Any) -> int:
    bits, _ = _bits(val)
    return bin(bits).count("1")


def clz(self: Any, val: Any) -> int:
    bits, width = _bits(val)
    return width - bits.bit_length()


def ffs(self: Any, val: Any) -> int:
    bits, _ = _bits(val)
    return (bits & -bits).bit_length()


def brev(self: Any, val: Any) -> Any:
    """The bits reversed: of a uint64 its 64 bits, of any other integer its low 32 (Numba's
    ``brev`` of an int64 reverses its low word, as an H200 answered), unsigned."""
    if isinstance(val, np.uint64):
        return np.uint64(int(f"{int(val):064b}"[::-1], 2))
    return np.uint32(int(f"{int(val) & 0xFFFFFFFF:032b}"[::-1], 2))


def hfloor(self: Any, x: Any) -> Any:
    return np.floor(x, dtype=np.float16)


def hmax(self: Any, a: Any, b: Any) -> Any:
    """CUDA's ``__hmax``: the other operand where one is NaN (NaN where both are)."""
    return np.fmax(np.float16(a), np.float16(b))


def hmin(self: Any, a: Any, b: Any) -> Any:
    """CUDA's ``__hmin``: the other operand where one is NaN (NaN where both are)."""
    return np.fmin(np.float16(a), np.float16(b))


def hfma(self: Any, a: Any, b: Any, c: Any) -> Any:
    return fused_multiply_add(np.float16(a), np.float16(b), np.float16(c))


def hrsqrt(self: Any, x: Any) -> Any:
    with np.errstate(all="ignore"):
        return np.float16(np.float32(1) / np.sqrt(np.float32(x)))


def hexp10(self: Any, x: Any) -> Any:
    with np.errstate(all="ignore"):
        return np.float16(np.power(np.float32(10), np.float32(x)))


_ARITHMETIC = ("int32", "int64", "uint32", "uint64", "float32", "float64")
_BITWISE = ("int32", "int64", "uint32", "uint64")
#: The array dtypes each of Numba's atomics compiles for (numba-cuda 0.30, as an H200's
#: compiles refused the others: ``add`` of an int8 or float16 array, ``inc`` of an int32, a
#: bitwise or exchanging atomic of floats); the simulator's ran them all.
ATOMIC_DTYPES = {
    "add": _ARITHMETIC, "sub": _ARITHMETIC, "max": _ARITHMETIC, "min": _ARITHMETIC,
    "nanmax": _ARITHMETIC, "nanmin": _ARITHMETIC, "and_": _BITWISE, "or_": _BITWISE,
    "xor": _BITWISE, "exch": _BITWISE, "cas": _BITWISE, "compare_and_swap": _BITWISE,
    "inc": ("uint32", "uint64"), "dec": ("uint32", "uint64"),
}




def _checked_atomic(name: str, fn: Any) -> Any:
    """Numba's simulated atomic ``fn``, refusing the array dtypes Numba's compile refuses, with
    its values (all but the index) converted to the array's dtype first, as Numba's signature
    ``(ary.dtype, ary, intp, ary.dtype)`` converts them on the device: a float64 added to a
    float32 array rounds to float32 first, -0.5 added to an int32 one is 0 (truncated), -1
    added to a uint64 one wraps."""
    allowed = ATOMIC_DTYPES[name]
    first = 0 if name == "compare_and_swap" else 1        # (it takes no index)

    @functools.wraps(fn)
    def atomic(self: Any, array: Any, *args: Any) -> Any:
        dtype = getattr(array, "dtype", None)
        if dtype is not None:
            dtype = np.dtype(dtype)
            if dtype.name not in allowed:
                raise TypeError(f"cuda.atomic.{name.rstrip('_')} of an array of "
                                f"{dtype.name}: Numba's compiles it for arrays of "
                                f"{', '.join(allowed)} only, and refuses the launch on the GPU")
            kind, t = dtype.kind, dtype.type
            args = (*args[:first], *(
                v if type(v) is t else device_integer(v, dtype) if kind in "iu" else t(v)
                for v in args[first:]))
        return fn(self, array, *args)
    atomic.__wrapped_atomic__ = fn      # type: ignore[attr-defined]
    return atomic


def install() -> None:
    """Put these in place of the simulator's ``cuda`` intrinsics of the same names, and check
    its atomics' array dtypes and convert their values as Numba's compile does."""
    from numba.cuda.simulator.kernelapi import FakeCUDAAtomic, FakeCUDAFp16, FakeCUDAModule

    for fn in (cbrt, fma, popc, brev, clz, ffs):
        setattr(FakeCUDAModule, fn.__name__, fn)
    for fn in (hfloor, hmax, hmin, hfma, hrsqrt, hexp10):
        setattr(FakeCUDAFp16, fn.__name__, fn)
    for name in ATOMIC_DTYPES:
        current = getattr(FakeCUDAAtomic, name)
        if not hasattr(current, "__wrapped_atomic__"):
            setattr(FakeCUDAAtomic, name, _checked_atomic(name, current))
