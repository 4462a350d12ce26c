"""``Array.flags``: the layout flags of an :class:`asyncgpu.Array`, as NumPy's and CuPy's.

A snapshot taken when ``a.flags`` is read; asyncgpu arrays are always writeable. Example::

    a = ag.zeros((2, 3))
    a.flags.c_contiguous, a.T.flags["F"]        # (True, True)
"""

from __future__ import annotations

from typing import Any


class Flags:
    """``Array.flags``: the layout flags of an array (a snapshot; asyncgpu arrays are always
    writeable). Attributes ``c_contiguous``, ``f_contiguous``, ``owndata``, ``writeable``,
    ``aligned``; NumPy's keys (``'C_CONTIGUOUS'``, ``'C'``, ``'OWNDATA'``, ...) index it."""

    __slots__ = ("c_contiguous", "f_contiguous", "owndata", "writeable", "aligned")
    _KEYS = {"C_CONTIGUOUS": "c_contiguous", "C": "c_contiguous", "CONTIGUOUS": "c_contiguous",
             "F_CONTIGUOUS": "f_contiguous", "F": "f_contiguous", "FORTRAN": "f_contiguous",
             "OWNDATA": "owndata", "O": "owndata", "WRITEABLE": "writeable", "W": "writeable",
             "ALIGNED": "aligned", "A": "aligned"}

    def __init__(self, c_contiguous: bool, f_contiguous: bool, owndata: bool,
                 aligned: bool) -> None:
        put = object.__setattr__
        put(self, "c_contiguous", bool(c_contiguous))
        put(self, "f_contiguous", bool(f_contiguous))
        put(self, "owndata", bool(owndata))
        put(self, "writeable", True)
        put(self, "aligned", bool(aligned))

    def __reduce__(self) -> tuple[Any, tuple[bool, bool, bool, bool]]:
        """Copied and pickled through the constructor (the attributes cannot be set)."""
        return Flags, (self.c_contiguous, self.f_contiguous, self.owndata, self.aligned)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"flag {name!r} of an asyncgpu array cannot be set: its flags "
                             "describe its layout, and asyncgpu arrays are always writeable")

    @property
    def contiguous(self) -> bool:
        return self.c_contiguous

    @property
    def fortran(self) -> bool:
        return self.f_contiguous

    def __getitem__(self, key: str) -> bool:
        name = self._KEYS.get(key.upper()) if isinstance(key, str) else None
        if name is None:
            raise KeyError(f"unknown flag {key!r}; flags are {', '.join(self._KEYS)}")
        return getattr(self, name)

    def __repr__(self) -> str:
        return "\n".join(f"  {key} : {self[key]}" for key in
                         ("C_CONTIGUOUS", "F_CONTIGUOUS", "OWNDATA", "WRITEABLE", "ALIGNED"))
