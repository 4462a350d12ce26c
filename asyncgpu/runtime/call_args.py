"""A library call's arguments with its arrays taken out: what is hashed, recorded and re-filled.

The model
---------
:func:`split` walks positional and keyword arguments (into lists, tuples and dicts) and
replaces every :class:`~asyncgpu.Array` by a :class:`Slot`, its index in the list of the call's
arrays; :func:`fill` puts values back in the slots: the arrays themselves, NumPy placeholders
for inference on ``sim``, or device copies. Splitting refuses what the device cannot take
before anything is enqueued: a NumPy array (CuPy refuses implicit host-to-device copies), a
foreign device array asyncgpu cannot order against, a Python int beyond 64 bits. A 0-d NumPy
array, a number to CuPy, is taken as a copy: its value at the call, as CuPy reads it then,
whatever the host writes into it before the node runs.

Invariant: ``fill(split(obj, arrays, where), arrays)`` equals ``obj``.

Example::

    arrays = []
    template = split((a, [b, 2.0]), arrays, "sqrt")    # (Slot(0), [Slot(1), 2.0]); arrays [a, b]
    fill(template, arrays)                              # (a, [b, 2.0])
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..core.errors import ArgumentError
from .array import Array


class Slot:
    """Where an :class:`Array` stood in the arguments."""

    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index

    def __eq__(self, other: object) -> bool:     # signatures of calls are compared and hashed
        return isinstance(other, Slot) and other.index == self.index

    def __hash__(self) -> int:
        return hash(("slot", self.index))


def split(obj: Any, arrays: list[Array], where: str) -> Any:
    """``obj`` with every Array replaced by a :class:`Slot` (appended to ``arrays``)."""
    if isinstance(obj, Array):
        arrays.append(obj)
        return Slot(len(arrays) - 1)
    if type(obj) in (list, tuple):
        return type(obj)(split(o, arrays, where) for o in obj)
    if type(obj) is dict:
        return {k: split(v, arrays, where) for k, v in obj.items()}
    if type(obj) is int and not -2**63 <= obj < 2**64:
        raise OverflowError(f"{where}: Python int {obj} too large to convert to C long (CuPy "
                            "passes Python ints to the device as 64-bit integers)")
    if isinstance(obj, np.ndarray) and obj.ndim > 0:
        raise ArgumentError(
            f"{where}: got a NumPy array {obj.dtype.name}{list(obj.shape)} where the device needs "
            "an asyncgpu.Array (CuPy refuses implicit host-to-device copies too); pass "
            "asyncgpu.asarray(x) instead"
        )
    if isinstance(obj, np.ndarray):
        return obj.copy()       # (0-d: the node runs later, the value is the call's)
    if (hasattr(obj, "__cuda_array_interface__") or hasattr(obj, "copy_to_host")) \
            and not isinstance(obj, type):
        raise ArgumentError(
            f"{where}: got a {type(obj).__module__.split('.')[0]}.{type(obj).__name__}, whose "
            "producer asyncgpu cannot order against; import it with asyncgpu.asarray(x) first"
        )
    return obj


def slots_in(template: Any, into: set[int]) -> None:
    """Add the index of every :class:`Slot` inside ``template`` to ``into``."""
    if isinstance(template, Slot):
        into.add(template.index)
    elif type(template) in (list, tuple):
        for o in template:
            slots_in(o, into)
    elif type(template) is dict:
        for o in template.values():
            slots_in(o, into)


def fill(template: Any, values: list[Any]) -> Any:
    """The inverse of :func:`split`: slots replaced by ``values[slot.index]``."""
    if isinstance(template, Slot):
        return values[template.index]
    if type(template) in (list, tuple):
        return type(template)(fill(o, values) for o in template)
    if type(template) is dict:
        return {k: fill(v, values) for k, v in template.items()}
    return template
