"""``Array.device`` on the ``sim`` backend: a stand-in for CuPy's ``cupy.cuda.Device``.

Example::

    SimDevice(1) == SimDevice(1)    # True; int(SimDevice(1)) == 1
"""

from __future__ import annotations

from typing import Any


class SimDevice:
    """``Array.device`` on ``sim``: a virtual device of the simulator (``id``, 0 unless
    ``device=`` or ``sim_devices`` choose others); usable like CuPy's ``Device`` where code
    only compares it, reads ``id`` or enters it as a context."""

    __slots__ = ("id",)

    def __init__(self, id: int = 0) -> None:
        self.id = id

    def __int__(self) -> int:
        return self.id

    __index__ = __int__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SimDevice) and other.id == self.id

    def __hash__(self) -> int:
        return hash((SimDevice, self.id))

    def __enter__(self) -> SimDevice:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    def __repr__(self) -> str:
        return f"<asyncgpu sim device {self.id}>"
