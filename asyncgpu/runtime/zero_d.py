"""0-d array arguments of library calls on ``sim``: as CuPy reads them, not as NumPy does.

The model
---------
CuPy's arrays are no Python integers: a 0-d device array given where NumPy's function takes an
integer is read as a number by some calls (``arange(n)``, ``around(x, n)``), refused by others
(``zeros((n, 2))``, ``tri(n)``), and is an array index in ``x[n]``. The simulator runs NumPy,
which would take it as an integer everywhere, so each 0-d argument a call only reads is handed
to it as CuPy would have it (:func:`as_called`): a :class:`Device0d` (no ``__index__``), its
number (:data:`AS_NUMBER`), or itself (:data:`INDEXING`); :func:`refuse_0d` refuses one for the
calls of :data:`NO_0D` before anything runs (measured with CuPy 14.2 on the GPU).

Invariant: an argument the call writes, or of one dimension or more, is handed as it is.

Example::

    as_called(np.array(3), "zeros")          # Device0d: zeros((n, 2)) raises TypeError
    as_called(np.array(3), "around")         # 3: around(x, n) rounds to n digits
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..core.errors import call_failed


class Device0d(np.ndarray):
    """A 0-d array argument as a call sees it on ``sim``: CuPy's arrays are no integers (no
    ``__index__``), so ``zeros((n, 2))`` or ``linspace(0, 1, num=n)`` raises TypeError there,
    where ``arange(n)`` reads the number (``int``)."""

    def __index__(self) -> int:
        raise TypeError("'ndarray' object cannot be interpreted as an integer")


#: What CuPy 14.2 does with a 0-d array argument where NumPy's function would take it as an
#: integer, measured on the GPU: an index is an array (``x[n]``); these read it as a number
#: (``around(x, n)``) ...
INDEXING = frozenset({"ndarray.__getitem__", "ndarray.__setitem__"})
AS_NUMBER = frozenset({"around", "round", "ndarray.round", "rot90", "percentile",
                       "quantile", "nanpercentile", "nanquantile"})
#: ... and these refuse it, where NumPy's take it (``tri(n)``, ``split(x, n)``).
NO_0D = frozenset({"tri", "triu", "tril", "split", "array_split", "partition",
                   "argpartition"})


def as_called(view: np.ndarray, name: str, written: bool = False) -> Any:
    """``view`` as call ``name`` sees it: a 0-d one it only reads as a :class:`Device0d`, or as
    its number (:data:`AS_NUMBER`), or as itself (an index)."""
    if view.ndim or written or name in INDEXING:
        return view
    return view[()] if name in AS_NUMBER else view.view(Device0d)


def refuse_0d(call: Any) -> None:
    """TypeError, as CuPy's, for a 0-d array given to a library call (a
    ``runtime.library.LibraryCall``) of :data:`NO_0D`."""
    if call.name in NO_0D and any(a.ndim == 0 for a in call.arrays):
        exc = TypeError("'ndarray' object cannot be interpreted as an integer")
        raise call_failed(f"{call.describe()} failed: TypeError: {exc}", exc)
