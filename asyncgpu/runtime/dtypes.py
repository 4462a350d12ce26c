"""The dtypes asyncgpu arrays hold: booleans and numbers of CUDA's types.

Invariant: an array's dtype passed :func:`array_dtype`; a library call's result dtype is
checked the same way (``asyncgpu.runtime.library``), so no array of another dtype exists.

Example::

    array_dtype("float32")          # dtype('float32')
    array_dtype(np.longdouble)      # UnsupportedDtype: ... use float64
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
    dt = np.dtype(dtype)
    if dt.byteorder not in "=|":
        # (CUDA's numbers are the machine's order: a big-endian dtype's values are kept, in it)
        dt = dt.newbyteorder("=")
    if dt.kind not in "biufc" or dt.hasobject:
        raise UnsupportedDtype(
            f"asyncgpu arrays hold booleans and numbers; dtype {dt} is not supported"
        )
    if long_double(dt):
        raise UnsupportedDtype(
            f"dtype {dt} (NumPy's long double) has no CUDA type, and CuPy refuses it; use "
            f"{'complex128' if dt.kind == 'c' else 'float64'}")
    return dt


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
