"""What an element of an integer or boolean array is in a simulated kernel, and what a number
stored into an integer one becomes (:func:`device_integer`).

Numba computes with the integers of arrays under 64 bits as int64s (``x[0] + x[0]`` of an int8
array holding 100 is 200 on the device, -56 in NumPy's int8) and with booleans as integers
(``True + True`` is 2); Numba's simulator hands out NumPy's own scalars. An element read there
is a :class:`Narrow` instead: an ``np.int64`` of its value, whose arithmetic gives plain
int64s, as Numba's results are, that keeps its array's ``width`` for the intrinsics that count
bits (``asyncgpu.backends.sim.intrinsics``); a boolean's ``~`` stays ``not``
(:class:`Boolean`, which a kernel's bool scalar arguments are too).

Example::

    NARROW[np.dtype(np.int8)](100) + 100        # 200, an np.int64
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np


class Narrow(np.int64):
    """An element of an integer array under 64 bits as a simulated kernel reads it: an int64,
    as Numba's arithmetic computes with it (what it computes is a plain int64, as Numba's
    results are), that remembers its own ``width`` for the intrinsics that count bits."""

    width = 64


class Short(Narrow):
    """An element of an integer array under 32 bits: with a ``float32`` it computes in
    ``float32``, as Numba types an ``int8``, ``int16``, ``uint8``, ``uint16`` or ``bool`` beside
    a ``float32`` (NumPy's rule before NEP 50; an int64 beside one gave a ``float64``); with
    anything else as an int64. Its priority over NumPy's scalars hands it the operation where a
    ``float32`` is on the left."""

    __array_priority__ = 1000.0


def _float32_aware(name: str) -> None:
    """``Short``'s ``__name__`` and ``__rname__``: in ``float32`` beside a ``float32``."""
    direct, reflected = getattr(np.int64, f"__{name}__"), getattr(np.int64, f"__r{name}__")

    def op(self: Any, other: Any) -> Any:
        if type(other) is np.float32:
            return getattr(np.float32(int(self)), f"__{name}__")(other)
        return direct(self, other)

    def rop(self: Any, other: Any) -> Any:
        if type(other) is np.float32:
            return getattr(other, f"__{name}__")(np.float32(int(self)))
        return reflected(self, other)

    setattr(Short, f"__{name}__", op)
    setattr(Short, f"__r{name}__", rop)


for _name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow"):
    _float32_aware(_name)


#: The class an element of each narrow integer dtype reads as (:class:`Narrow`).
NARROW = {np.dtype(t): type(f"{np.dtype(t).name}_element",
                            (Short if np.dtype(t).itemsize < 4 else Narrow,), {"width": 32})
          for t in (np.int8, np.int16, np.int32, np.uint8, np.uint16, np.uint32)}


class Boolean(Short):
    """A boolean element, or a bool scalar argument: it computes as an integer too (``True +
    True`` is 2, ``-True`` -1), but its ``~`` is ``not``, as Numba's; a warp shuffle refuses it,
    as Numba's does."""

    width = 32

    def __invert__(self) -> np.bool_:
        return np.bool_(not int(self))


NARROW[np.dtype(np.bool_)] = Boolean


def device_integer(value: Any, dtype: np.dtype) -> Any:
    """A number stored into an element of integer ``dtype`` as the device stores it: an integer
    wraps to the width; a float is truncated toward zero and saturates at the type's range (an
    8-bit type's 16-bit one), NaN giving the signed types' least value, 0 for unsigned up to
    32 bits and 2**63 for uint64 (PTX's ``cvt.rzi``), then wraps to the width (as an H200 gave
    them). NumPy refuses the out-of-range ones (``OverflowError``, ``ValueError`` for NaN),
    which faulted the launch on ``sim``. Anything else (an array, a bool) as it is."""
    if isinstance(value, (bool, np.bool_, complex, np.complexfloating)) \
            or not isinstance(value, (int, float, np.number)):
        return value
    if isinstance(value, (float, np.floating)):
        # (converted to a 16-bit integer at least, of the element's signedness, then stored
        # in its width, as the device converts to 8 bits: 300.0 into a uint8 is 44, 1e20 255)
        info = np.iinfo(f"{dtype.kind}{max(dtype.itemsize, 2)}")
        f = float(value)
        if f != f:
            value = info.min if dtype.kind == "i" else 1 << 63 if dtype.itemsize == 8 else 0
        else:
            value = info.max if f >= info.max else info.min if f <= info.min else math.trunc(f)
    bits = dtype.itemsize * 8
    wrapped = int(value) & ((1 << bits) - 1)
    if dtype.kind == "i" and wrapped >> (bits - 1):
        wrapped -= 1 << bits
    return dtype.type(wrapped)
