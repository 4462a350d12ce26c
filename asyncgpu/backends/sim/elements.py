"""What an element of an integer or boolean array is in a simulated kernel.

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

import numpy as np


class Narrow(np.int64):
    """An element of an integer array under 64 bits as a simulated kernel reads it: an int64,
    as Numba's arithmetic computes with it (what it computes is a plain int64, as Numba's
    results are), that remembers its own ``width`` for the intrinsics that count bits."""

    width = 64


#: The class an element of each narrow integer dtype reads as (:class:`Narrow`).
NARROW = {np.dtype(t): type(f"{np.dtype(t).name}_element", (Narrow,), {"width": 32})
          for t in (np.int8, np.int16, np.int32, np.uint8, np.uint16, np.uint32)}


class Boolean(Narrow):
    """A boolean element, or a bool scalar argument: it computes as an integer too (``True +
    True`` is 2, ``-True`` -1), but its ``~`` is ``not``, as Numba's; a warp shuffle refuses it,
    as Numba's does."""

    width = 32

    def __invert__(self) -> np.bool_:
        return np.bool_(not int(self))


NARROW[np.dtype(np.bool_)] = Boolean
