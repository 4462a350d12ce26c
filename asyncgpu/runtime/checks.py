"""Checks shared by kernel launches: launch limits, scalar conversion, the user's launch site.

Everything here runs before anything is enqueued, and raises errors that name the kernel (with
the user's launch site), the argument and the fix.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import threading
from typing import Any, Callable

import numpy as np

from ..core.errors import ArgumentError, ArgumentValueError, FreedArrayError
from .current import foreign
from .signature import Param

# the whole asyncgpu package (this module is in its runtime/ subpackage): frames there are ours
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_CONTEXTLIB = contextlib.__file__
GRID_LIMITS = (2**31 - 1, 65535, 65535)
BLOCK_LIMITS = (1024, 1024, 64)
MAX_THREADS_PER_BLOCK = 1024
#: Dynamic shared memory a launch may ask for without opting in to more (CUDA's default limit).
MAX_SHARED_BYTES = 48 * 1024


def user_frame() -> Any:
    """The innermost frame outside the asyncgpu package (the caller's), or None, passing over
    the standard library's ``contextlib``, whose context managers the package enters (a
    library call whose result's size depends on its values waits inside one). (Compiled
    functions have no frames of their own: a fixed depth would be off by one there.)"""
    f = sys._getframe(1)
    while f is not None and (f.f_code.co_filename == _CONTEXTLIB or _in_package(
            os.path.dirname(os.path.abspath(f.f_code.co_filename)))):
        f = f.f_back
    return f


def _in_package(folder: str) -> bool:
    """Whether ``folder`` is the package's or one inside it (not a sibling whose name begins
    the same, as ``asyncgpu_ext``)."""
    return folder == _PACKAGE_DIR or folder.startswith(_PACKAGE_DIR + os.sep)


#: The site a recorded launch was made at while the recorder issues it, after the body's line
#: has passed (``asyncgpu.recorder.keys.issue_recorded``): its messages name the launch's line.
recorded_site = threading.local()


def user_site() -> str:
    """``file.py:12`` of the innermost frame outside the asyncgpu package (of the launch, for
    one a recording issues after the fact)."""
    site = getattr(recorded_site, "site", None)
    if site is not None:
        return site
    f = user_frame()
    if f is None:
        return "<unknown>"
    return f"{os.path.basename(f.f_code.co_filename)}:{f.f_lineno}"


def check_usable(array: Any, runtime: Any, what: str) -> None:
    """Refuse a freed array, or one of another runtime (made before ``asyncgpu.configure``
    switched to another backend or device), as an argument; ``what`` names it in the message
    (``kernel 'k', argument 0 'x': array float32[8]``)."""
    alloc = array._alloc
    if alloc.freed:
        raise FreedArrayError(f"{what} has been freed; pass a live array")
    if alloc.runtime is not runtime:
        raise ArgumentValueError(f"{what} {foreign(alloc.runtime)}")


def a_or_an(word: str) -> str:
    """``word`` with the article English reads it with: ``an int``, ``an unsigned int``,
    ``an int32 array``, but ``a uint8`` ("you-int") and ``a float``."""
    head = word.lstrip("_").lower()
    vowel = head[:1] in ("a", "e", "i", "o") or head.startswith("un")
    return f"{'an' if vowel else 'a'} {word}"


def convert_scalar(a: Any, p: Param, where: Callable[[], str]) -> np.generic:
    """Convert a Python or NumPy scalar to a C parameter's dtype, refusing lossy conversions."""
    dt = p.dtype
    assert dt is not None  # Invariant: typed scalar parameters always have a dtype.
    if a is None or not isinstance(a, (bool, int, float, np.number, np.bool_)):
        if isinstance(a, (tuple, np.void)):
            raise ArgumentError(
                f"{where()}: expected {a_or_an(p.ctype)} number, got "
                f"{'a tuple' if isinstance(a, tuple) else 'a NumPy record'} {a!r}; a CUDA C "
                "parameter takes one number, and asyncgpu passes no tuples or structs by value: "
                "declare a parameter per value and pass them separately")
        raise ArgumentError(
            f"{where()}: expected {a_or_an(p.ctype)} number, got {type(a).__name__}")
    if dt.kind == "b":
        if not isinstance(a, (bool, np.bool_)):
            raise ArgumentError(f"{where()}: expected a bool, got {type(a).__name__} {a!r}")
        return np.bool_(a)
    if isinstance(a, (bool, np.bool_)):
        raise ArgumentError(
            f"{where()}: expected {a_or_an(p.ctype)}, got the bool {a!r}; pass int({a!r}) if "
            "meant"
        )
    if dt.kind in "iu":
        if isinstance(a, (float, np.floating)):
            if not np.isfinite(a) or float(a) != int(a):
                raise ArgumentValueError(
                    f"{where()}: expected an integer for {p.ctype}, got {a!r}"
                )
        if isinstance(a, (complex, np.complexfloating)):
            raise ArgumentError(f"{where()}: expected an integer for {p.ctype}, got {a!r}")
        value = int(a)
        lo, hi = _int_bounds(dt)
        if not lo <= value <= hi:
            raise ArgumentValueError(
                f"{where()}: {value} does not fit in {p.ctype} ([{lo}, {hi}])"
            )
        return dt.type(value)
    if dt.kind == "f":
        if isinstance(a, (complex, np.complexfloating)):
            raise ArgumentError(f"{where()}: expected a real {p.ctype}, got {a!r}")
    try:
        return beyond_range_to_infinity(dt, a)
    except OverflowError:       # (an int beyond any float: Python cannot convert it either)
        text = str(a)
        if len(text) > 24:
            text = f"of {len(text.lstrip('-'))} digits"
        raise ArgumentValueError(f"{where()}: the integer {text} is beyond the range of "
                                 f"{p.ctype}; pass a float (float('inf') if meant)") from None


def beyond_range_to_infinity(dt: np.dtype, a: Any) -> np.generic:
    """``a`` as a ``dt`` scalar; a real beyond the type's finite range becomes an infinity of
    its sign, as C's conversion to ``float`` gives on the device. Deliberate, so without
    NumPy's overflow warning (its count would depend on the values a program happens to pass)."""
    with np.errstate(over="ignore"):
        return dt.type(a)


@functools.cache
def _int_bounds(dt: np.dtype) -> tuple[int, int]:
    info = np.iinfo(dt)
    return int(info.min), int(info.max)


def is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def launch_dims(value: Any, what: str, limits: tuple[int, ...], where: str) -> tuple[int, ...]:
    dims = tuple(value) if isinstance(value, (tuple, list)) else (value,)
    if not 1 <= len(dims) <= 3 or not all(is_int(d) for d in dims):
        raise ArgumentValueError(
            f"{where}: {what} must be a positive integer or a tuple of 1 to 3 positive "
            f"integers; got {value!r}"
        )
    for axis, (d, limit) in enumerate(zip(dims, limits)):
        if not 1 <= int(d) <= limit:
            raise ArgumentValueError(
                f"{where}: {what} along axis {'xyz'[axis]} must be in [1, {limit}]; got {int(d)}"
            )
    return tuple(int(d) for d in dims)
