"""Stand-in profile numbers for ``asyncgpu.regulate`` (``asyncgpu.runtime.regulator``), for
tests: the simulator's clock is logical (every launch takes about the same) and its launches
are small, so tests that need the search to see a long, device-filling kernel beside a short one
give the times and shares themselves."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator

from ..runtime.current import current_runtime


@contextlib.contextmanager
def profiled_as(seconds: dict[str, float | list[float]], shares: dict[str, float] | None = None,
                waves: dict[str, float] | None = None,
                together: dict[tuple[str, str], tuple[float, float]] | None = None
                ) -> Iterator[None]:
    """Within the block, the current runtime's regulation profiles kernel ``k`` as taking
    ``seconds[k]`` alone (a list: its profiled launches take those times in turn) and holding
    ``shares[k]`` of the device, and a kernel split by its grid as running in ``waves[k]``
    waves (``Op.grid``; kernels not named keep what was measured and modelled). With
    ``together``, it also profiles in pairs: kernels ``k`` and ``j`` of two tenants timed side
    by side end ``together[(k, j)]`` seconds after their start (``k``'s end, ``j``'s), each
    alone taking its ``seconds``; without it, no pair is timed (the simulator's timings would
    not match the stand-in times). Call it after ``asyncgpu.regulate``."""
    regulator = current_runtime().regulator
    if regulator is None:
        raise RuntimeError("the current runtime is not regulated: call asyncgpu.regulate first")
    shares, waves = shares or {}, waves or {}
    turns = {k: itertools.cycle(v) for k, v in seconds.items() if isinstance(v, list)}

    def took(kernel: str, measured: float) -> float:
        turn = turns.get(kernel)
        return next(turn) if turn is not None else seconds.get(kernel, measured)

    def alone(kernel: str, measured: float) -> float:
        given = seconds.get(kernel, measured)
        return min(given) if isinstance(given, list) else given

    def pair(k: str, j: str, k_s: float, j_s: float, k_end: float, j_end: float
             ) -> tuple[float, float, float, float]:
        if (k, j) in together:
            k_end, j_end = together[(k, j)]
        elif (j, k) in together:
            j_end, k_end = together[(j, k)]
        return alone(k, k_s), alone(j, j_s), k_end, j_end

    saved = regulator.stand_in, regulator.pair_stand_in
    regulator.stand_in = lambda kernel, measured, share, grid: (
        took(kernel, measured), shares.get(kernel, share),
        waves.get(kernel, grid) if grid else grid)
    regulator.pair_stand_in = pair if together is not None else None
    try:
        yield
    finally:
        regulator.stand_in, regulator.pair_stand_in = saved
