"""Random programs mixing library calls, operators, custom kernels and host accesses.

They run over the operands of ``programs`` (three allocations of 16 float64, seven 8-element
views, some overlapping). Library steps only use bounded, deterministic functions (no NaN can
appear), and an ``out=`` operand either is the input itself or does not overlap it (CuPy leaves
partially overlapping in-place calls undefined), so an asynchronous run must equal the serial
run exactly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import programs

UNARY = ("tanh", "sin", "absolute", "negative")
BINARY = ("add", "subtract", "multiply", "maximum")


@dataclass(frozen=True)
class Unary:
    fn: str
    src: str
    dst: str


@dataclass(frozen=True)
class Binary:
    fn: str
    a: str
    b: str
    dst: str


@dataclass(frozen=True)
class Reduce:
    """``dst[...] = src * 0.5 + mean(other)`` through a temporary and ``copyto``."""
    src: str
    other: str
    dst: str


@dataclass(frozen=True)
class Matmul:
    """``dst[:4] = (a as 2x4) @ (b as 4x2)`` (flattened), then ``dst *= 0.125``."""
    a: str
    b: str
    dst: str


@dataclass(frozen=True)
class InPlace:
    """``dst += src`` (an operator)."""
    src: str
    dst: str


def _ok_out(dst: str, *srcs: str) -> bool:
    return all(s == dst or not programs._overlap(s, dst) for s in srcs)


def run(ag: Any, steps: list[Any], init: Any) -> tuple[list[Any], list[Any]]:
    """Run in the current configuration; returns (host reads, final allocations)."""
    import asyncgpu.cupy as acp

    allocs = [ag.array(init[i]) for i in range(3)]
    views = programs.views(allocs)
    reads = []
    for step in steps:
        if isinstance(step, programs.Launch):
            programs.launch(ag, step, views)
        elif isinstance(step, programs.HostRead):
            reads.append(views[step.operand].numpy())
        elif isinstance(step, programs.HostWrite):
            views[step.operand][...] = step.value
        elif isinstance(step, Unary):
            getattr(acp, step.fn)(views[step.src], out=views[step.dst])
        elif isinstance(step, Binary):
            getattr(acp, step.fn)(views[step.a], views[step.b], out=views[step.dst])
        elif isinstance(step, Reduce):
            tmp = views[step.src] * 0.5 + views[step.other].mean()
            acp.copyto(views[step.dst], tmp)
        elif isinstance(step, Matmul):
            r = views[step.a].reshape(2, 4) @ views[step.b].reshape(4, 2)
            acp.copyto(views[step.dst][:4], r.reshape(4))
            views[step.dst][:4] *= 0.125
        elif isinstance(step, InPlace):
            views[step.dst] += views[step.src]
            acp.tanh(views[step.dst], out=views[step.dst])
        else:
            raise TypeError(step)
    return reads, [a.numpy() for a in allocs]


def strategies() -> Any:
    """Hypothesis strategy for mixed programs."""
    from hypothesis import strategies as st

    op = st.sampled_from(sorted(programs.OPERANDS))
    unary = st.builds(Unary, st.sampled_from(UNARY), op, op).filter(
        lambda s: _ok_out(s.dst, s.src))
    binary = st.builds(Binary, st.sampled_from(BINARY), op, op, op).filter(
        lambda s: _ok_out(s.dst, s.a, s.b))
    reduce = st.builds(Reduce, op, op, op)
    matmul = st.builds(Matmul, op, op, op)
    inplace = st.builds(InPlace, op, op).filter(lambda s: _ok_out(s.dst, s.src))
    arg = st.tuples(op, st.sampled_from(programs.MODES))
    launch = st.builds(
        programs.Launch,
        st.lists(arg, min_size=1, max_size=3).map(tuple).filter(programs.valid_launch),
        st.integers(1, 20).map(float),
    )
    host = st.one_of(st.builds(programs.HostRead, op),
                     st.builds(programs.HostWrite, op, st.integers(-5, 5).map(float)))
    step = st.one_of(unary, binary, reduce, matmul, inplace, launch, host)
    return st.lists(step, min_size=1, max_size=12)
