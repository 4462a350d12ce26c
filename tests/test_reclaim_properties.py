"""Random programs on a small simulated device: every program whose serial run fits also fits
asynchronously, and computes the same values (``Runtime.allocating``).

The programs are those of ``tests/programs.py`` (launches, host reads and writes over three
allocations and their views) with steps that allocate: a temporary made from host data and
dropped right after the kernel that reads it is launched, a temporary made by library calls
(``asyncgpu.cupy``) and dropped likewise, arrays held for a while and then dropped, and a
recorded function that makes a temporary at each call. The device is capped to the most live
bytes the serial run (``execution="sync"``) ever held at an allocation, plus a drawn slack:
the asynchronous run, whose dropped temporaries stay held by their unfinished kernels, fits
only if a refused allocation waits for the work in flight and frees what the dropped arrays
held.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import programs
import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

STRATEGIES = ["lazy", "random", "starve"]
ITEM = programs.ITEMSIZE


# -- steps that allocate ---------------------------------------------------------------------
@dataclass(frozen=True)
class Temp:
    """``t = ag.array(host data)`` (``length`` elements), a kernel reads ``t`` and updates
    ``target``, then ``t`` is dropped while that kernel may still be pending."""
    target: programs.Operand
    length: int
    c: float


@dataclass(frozen=True)
class LibTemp:
    """``t = v[src] * c + 1.0`` (two library calls: two results, the first dropped at once), a
    kernel reads ``t`` and updates ``target``, then ``t`` is dropped."""
    src: programs.Operand
    target: programs.Operand
    c: float


@dataclass(frozen=True)
class Hold:
    """Keep a new array of ``length`` elements (filled on the device from ``src``)."""
    src: programs.Operand
    length: int


@dataclass(frozen=True)
class Drop:
    """Drop the oldest held array (none held: nothing)."""


@dataclass(frozen=True)
class RecordedTemp:
    """A recorded function (``asyncgpu.graph``) called ``calls`` times, each call making a
    temporary from host data, updating ``target`` from it and dropping it."""
    target: programs.Operand
    c: float
    calls: int


_READ_UPDATE = ("r", "rw")


def _update(ag: Any, t: Any, view: Any, c: float) -> None:
    """Launch the programs' ('r', 'rw') kernel: every element of ``view`` updated from the sum
    of ``t``."""
    k = programs.kernel_for(ag, _READ_UPDATE)
    n = max(t.size, view.size)
    k[-(-n // 4), 4](t, t.size, view, view.size, c)


def run(ag: Any, steps: list[Any], init: np.ndarray) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """``programs.run`` with the allocating steps too."""
    import asyncgpu.cupy as cp

    allocs = [ag.array(init[i]) for i in range(3)]
    v = programs.views(allocs)
    reads: list[np.ndarray] = []
    held: list[Any] = []
    for step in steps:
        if isinstance(step, programs.Launch):
            programs.launch(ag, step, v)
        elif isinstance(step, programs.HostRead):
            reads.append(np.asarray(v[step.operand]))
        elif isinstance(step, programs.HostWrite):
            v[step.operand][...] = step.value
        elif isinstance(step, Temp):
            t = ag.array(np.arange(step.length, dtype=np.float64) * 0.25 + step.c)
            _update(ag, t, v[step.target], step.c)
            del t
        elif isinstance(step, LibTemp):
            t = cp.add(cp.multiply(v[step.src], step.c), 1.0)
            _update(ag, t, v[step.target], step.c)
            del t
        elif isinstance(step, Hold):
            h = ag.zeros(step.length)
            _update(ag, v[step.src], h, 0.5)
            held.append(h)
            del h
        elif isinstance(step, Drop):
            if held:
                del held[0]
        elif isinstance(step, RecordedTemp):
            @ag.graph
            def body(view: Any, c: float) -> None:
                t = ag.array(np.arange(programs.SIZE, dtype=np.float64) * 0.25 + c)
                _update(ag, t, view, c)

            for i in range(step.calls):
                body(v[step.target], step.c + i)
    reads += [h.numpy() for h in held]
    final = [a.numpy() for a in allocs]
    return reads, final


def contiguous(draw: Any) -> programs.Operand:
    return programs.draw_operand(lambda lo, hi: draw(st.integers(lo, hi)), True)


def any_operand(draw: Any) -> programs.Operand:
    return programs.draw_operand(lambda lo, hi: draw(st.integers(lo, hi)), False)


@st.composite
def step(draw: Any) -> Any:
    kind = draw(st.integers(0, 10))
    if kind <= 2:       # one of the programs' steps
        return programs.draw_step(lambda lo, hi: draw(st.integers(lo, hi)))
    if kind <= 5:
        return Temp(contiguous(draw), draw(st.integers(1, programs.SIZE)),
                    float(draw(st.integers(1, 9))))
    if kind <= 7:
        return LibTemp(any_operand(draw), contiguous(draw), float(draw(st.integers(1, 9))))
    if kind == 8:
        return Hold(contiguous(draw), draw(st.integers(1, programs.SIZE)))
    if kind == 9:
        return RecordedTemp(contiguous(draw), float(draw(st.integers(1, 9))),
                            draw(st.integers(1, 4)))
    return Drop()


def program_strategy() -> Any:
    return st.lists(step(), min_size=1, max_size=16)


# -- a device of few bytes ---------------------------------------------------------------------
class Capped:
    """The current sim backend, refusing (``OutOfMemoryError``) an allocation that would take
    its live buffers over ``limit`` bytes (None: no limit, only measured); freed buffers go
    back. ``peak``: the most live bytes an allocation reached."""

    def __init__(self, ag: Any, limit: int | None) -> None:
        from asyncgpu.runtime.current import current_runtime

        backend = current_runtime().backend
        self.backend = getattr(backend, "inner", backend)
        self.ag, self.limit = ag, limit
        self.live: dict[int, int] = {}
        self.total = self.peak = 0
        self.refused = 0
        self._alloc, self._free = self.backend.alloc, self.backend.free

    def alloc(self, nbytes: int) -> Any:
        if self.limit is not None and self.total + nbytes > self.limit:
            self.refused += 1
            raise self.ag.OutOfMemoryError(
                f"cannot allocate {nbytes} bytes: the test's device holds {self.total} of "
                f"{self.limit}")
        buf = self._alloc(nbytes)
        self.live[id(buf)] = nbytes
        self.total += nbytes
        self.peak = max(self.peak, self.total)
        return buf

    def free(self, buf: Any) -> None:
        self.total -= self.live.pop(id(buf), 0)
        self._free(buf)

    def __enter__(self) -> Capped:
        self.backend.alloc, self.backend.free = self.alloc, self.free
        return self

    def __exit__(self, *exc: Any) -> None:
        del self.backend.alloc, self.backend.free     # (the class's methods again)


def capped_run(ag: Any, steps: list[Any], init: np.ndarray, limit: int | None,
               **options: Any) -> tuple[Any, Capped]:
    import gc

    gc.collect()        # (arrays of an earlier example, in cycles: not this run's)
    with ag.configure(backend="sim", **options):
        ag.synchronize()
        with Capped(ag, limit) as cap:
            try:
                out = run(ag, steps, init)
            finally:
                ag.synchronize()
    return out, cap


def assert_same(a: Any, b: Any) -> None:
    reads_a, final_a = a
    reads_b, final_b = b
    assert len(reads_a) == len(reads_b)
    for x, y in zip(reads_a + final_a, reads_b + final_b):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("memory", ["explicit", "managed"])
# (no shrinking and no example database: a failing run ends in seconds, not after minutes of
# shrinking, and writes nothing beside the repository; add Phase.shrink to minimize a failure)
@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck),
          database=None, phases=(Phase.explicit, Phase.generate))
@given(steps=program_strategy(), slack=st.sampled_from([0, 0, 8, 128]),
       seed=st.integers(0, 3))
@example(steps=[Temp(programs.OPERANDS["A0"], 1, 1.0)] * 3, slack=0, seed=0)
@example(steps=[RecordedTemp(programs.OPERANDS["A0"], 1.0, 4)], slack=0, seed=0)
def test_a_program_that_fits_serially_fits_asynchronously(memory, steps, slack, seed):
    import asyncgpu as ag

    init = programs.initial(seed)
    expected, serial = capped_run(ag, steps, init, None, execution="sync",
                                  sim_strategy="eager", sim_seed=0, memory=memory)
    limit = serial.peak + slack
    again, _ = capped_run(ag, steps, init, limit, execution="sync", sim_strategy="eager",
                          sim_seed=0, memory=memory)     # (it fits in what it needed)
    assert_same(again, expected)
    for strategy in STRATEGIES:
        got, cap = capped_run(ag, steps, init, limit, execution="async",
                              sim_strategy=strategy, sim_seed=seed, memory=memory)
        assert_same(got, expected)
        assert cap.peak <= limit


def test_the_cap_bites():
    """The property is not vacuous: a temporary-dropping program capped to its serial peak
    needs the reclaim asynchronously (an allocation is refused, then fits)."""
    import asyncgpu as ag

    steps = [Temp(programs.OPERANDS["A0"], programs.SIZE, float(i)) for i in range(8)]
    init = programs.initial()
    expected, serial = capped_run(ag, steps, init, None, execution="sync",
                                  sim_strategy="eager", sim_seed=0)
    got, cap = capped_run(ag, steps, init, serial.peak, execution="async",
                          sim_strategy="lazy", sim_seed=0)
    assert_same(got, expected)
    assert cap.refused >= 1
