"""The dtypes asyncgpu arrays hold: booleans and numbers of CUDA's types.

Invariant: an array's dtype passed :func:`array_dtype`; a library call's result dtype is
checked the same way (``asyncgpu.runtime.library``), so no array of another dtype exists.

Byte order, as in CuPy: data from the host in the other order (a NumPy ``>f4`` array, or host
data asked to be ``>f4``) is converted to the device's order, its values kept; a dtype of the
other order asked of work on the device (``astype``, ``zeros(dtype=)``, a library call's
``dtype=``) is refused by :func:`refuse_other_order` before anything is enqueued.

Example::

    array_dtype("float32")          # dtype('float32')
    array_dtype(np.longdouble)      # UnsupportedDtype: ... use float64
    array_dtype(">f4")              # dtype('float32'): host data's values are converted
    refuse_other_order(">f4", "asyncgpu.zeros")     # UnsupportedDtype: ... pass float32
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..core.errors import AsyncGPUError


class UnsupportedDtype(AsyncGPUError, TypeError, ValueError):
    """A dtype asyncgpu arrays cannot hold: CuPy raises ``ValueError`` ("Unsupported dtype"),
    NumPy code often expects ``TypeError``; either catches it, as ``AsyncGPUError`` does."""


def array_dtype(dtype: Any) -> np.dtype:
    """``dtype`` as a NumPy dtype; :class:`UnsupportedDtype` if arrays cannot hold it."""
    # (CUDA's numbers are the machine's order: a big-endian dtype's values are kept, in it)
    dt = native(np.dtype(dtype))
    if dt.kind not in "biufc" or dt.hasobject:
        raise UnsupportedDtype(
            f"asyncgpu arrays hold booleans and numbers; dtype {dt} is not supported"
        )
    if long_double(dt):
        raise UnsupportedDtype(
            f"dtype {dt} (NumPy's long double) has no CUDA type, and CuPy refuses it; use "
            f"{'complex128' if dt.kind == 'c' else 'float64'}")
    return dt


def native(dt: np.dtype) -> np.dtype:
    """``dt`` in the machine's byte order (``>f4`` -> ``float32``)."""
    return dt if dt.isnative else dt.newbyteorder("=")


def other_order(dtype: Any) -> bool:
    """Whether ``dtype`` (a dtype, or a string naming one) is of the other byte order than the
    machine's (``>f4`` on x86); False for anything else, a type or a string naming no dtype."""
    if isinstance(dtype, str):
        if not dtype.startswith(("<", ">", "!")):
            return False        # (the order is always written first: a cheap test first)
        try:
            dtype = np.dtype(dtype)
        except TypeError:
            return False
    return isinstance(dtype, np.dtype) and not dtype.isnative


def refuse_other_order(dtype: Any, where: str) -> None:
    """:class:`UnsupportedDtype` if ``dtype`` is of the other byte order: asked of work on the
    device, as CuPy refuses it ("Unsupported dtype >f4 with big-endian byte-order"). CUDA's
    numbers, and the bytes kernels read, are the machine's order."""
    if other_order(dtype):
        dt = np.dtype(dtype)
        raise UnsupportedDtype(
            f"{where}: dtype {dt.str} is {'big' if dt.byteorder == '>' else 'little'}-endian, "
            f"not the device's byte order, and CuPy refuses it; pass {dt.name} "
            f"(numpy.{dt.name}), and convert host data of the other order by copying it in "
            "(asyncgpu.asarray of a NumPy array of either order keeps its values)")


def long_double(dt: np.dtype) -> bool:
    """Whether ``dt`` is NumPy's long double (float128, complex256), which CUDA lacks."""
    return dt.kind in "fc" and dt.itemsize > (16 if dt.kind == "c" else 8)


def fill_number(value: Any, dtype: np.dtype) -> bool:
    """Whether ``value`` is one number (a Python or NumPy scalar, or a 0-d NumPy array) and
    ``dtype`` a numeric one: what a device fill can set."""
    if dtype.kind not in "biufc":
        return False
    if type(value) in (int, float, bool, complex):
        return True
    return (isinstance(value, (np.generic, np.ndarray)) and value.ndim == 0
            and value.dtype.kind in "biufc")
