"""Random programs over arrays, views and host accesses, for property and mutation tests.

A program is a list of steps over three allocations of 16 float64 and seven 8-element
operands (halves, an overlapping middle view). Each launch uses a CUDA C kernel generated for
its access modes, with a NumPy twin for the sim backend; the result is deterministic, so an
asynchronous run must equal the serial run exactly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

N = 8
#: operand name -> (allocation index, start)
OPERANDS = {
    "A0": (0, 0), "A1": (0, 8), "Am": (0, 4),
    "B0": (1, 0), "B1": (1, 8),
    "C0": (2, 0), "Cm": (2, 4),
}
MODES = ("r", "rw", "w")


@dataclass(frozen=True)
class Launch:
    args: tuple[tuple[str, str], ...]   # (operand, mode)
    c: float


@dataclass(frozen=True)
class HostRead:
    operand: str


@dataclass(frozen=True)
class HostWrite:
    operand: str
    value: float


def _overlap(a: str, b: str) -> bool:
    (ia, sa), (ib, sb) = OPERANDS[a], OPERANDS[b]
    return ia == ib and sa < sb + N and sb < sa + N


def valid_launch(args: tuple[tuple[str, str], ...]) -> bool:
    """No two overlapping operands in one launch unless both are read-only."""
    for i, (a, ma) in enumerate(args):
        for b, mb in args[i + 1:]:
            if _overlap(a, b) and (ma != "r" or mb != "r"):
                return False
    return True


def source(modes: tuple[str, ...]) -> str:
    params = ", ".join(
        f"{'const ' if m == 'r' else ''}double* a{i}" for i, m in enumerate(modes)
    )
    sums = "".join(f"    for (int j = 0; j < n; ++j) s += a{i}[j];\n"
                   for i, m in enumerate(modes) if m == "r")
    body = "".join(
        f"        a{i}[t] = a{i}[t] * 0.5 + s * 0.01 + c;\n" if m == "rw" else
        f"        a{i}[t] = s * 0.01 + c;\n"
        for i, m in enumerate(modes) if m != "r"
    )
    return (f'extern "C" __global__ void prog({params}, int n, double c) {{\n'
            f"    double s = 0.0;\n{sums}"
            "    int t = blockIdx.x * blockDim.x + threadIdx.x;\n"
            f"    if (t < n) {{\n{body}    }}\n}}\n")


def twin(modes: tuple[str, ...]) -> Any:
    def run(*args: Any) -> None:
        arrays, n, c = args[:-2], int(args[-2]), float(args[-1])
        s = 0.0
        for a, m in zip(arrays, modes):
            if m == "r":
                for j in range(n):
                    s += float(a[j])
        for a, m in zip(arrays, modes):
            if m == "rw":
                a[:n] = a[:n] * 0.5 + s * 0.01 + c
            elif m == "w":
                a[:n] = s * 0.01 + c
    return run


_kernels: dict[tuple[str, ...], Any] = {}


def kernel_for(ag: Any, modes: tuple[str, ...]) -> Any:
    k = _kernels.get(modes)
    if k is None:
        out = [f"a{i}" for i, m in enumerate(modes) if m == "w"]
        k = _kernels[modes] = ag.cuda_kernel(source(modes), "prog", out=out, sim=twin(modes),
                                             options=("--fmad=false",))
    return k


def run(ag: Any, steps: list[Any], init: np.ndarray) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Run a program in the current configuration; returns (host reads, final allocations)."""
    allocs = [ag.array(init[i]) for i in range(3)]
    views = {name: allocs[i][s:s + N] for name, (i, s) in OPERANDS.items()}
    reads = []
    for step in steps:
        if isinstance(step, Launch):
            modes = tuple(m for _, m in step.args)
            k = kernel_for(ag, modes)
            k[1, N](*[views[o] for o, _ in step.args], N, step.c)
        elif isinstance(step, HostRead):
            reads.append(np.asarray(views[step.operand]))
        else:
            views[step.operand][...] = step.value
    final = [a.numpy() for a in allocs]
    return reads, final


def strategies() -> Any:
    """Hypothesis strategy for programs (imported lazily: only tests need hypothesis)."""
    from hypothesis import strategies as st

    operand = st.sampled_from(sorted(OPERANDS))
    arg = st.tuples(operand, st.sampled_from(MODES))
    launch = st.builds(
        Launch, st.lists(arg, min_size=1, max_size=3).map(tuple).filter(valid_launch),
        st.integers(1, 1000).map(float),
    )
    host_read = st.builds(HostRead, operand)
    host_write = st.builds(HostWrite, operand, st.integers(-50, 50).map(float))
    step = st.one_of(launch, launch, launch, host_read, host_write)
    return st.lists(step, min_size=1, max_size=14)


def initial(seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(-8, 8, size=(3, 16)).astype(np.float64)


def random_program(rnd: Any, length: int = 12) -> list[Any]:
    """A seeded random program (for mutation tests, where hypothesis' shrinking is not needed)."""
    names = sorted(OPERANDS)
    steps: list[Any] = []
    while len(steps) < length:
        roll = rnd.random()
        if roll < 0.65:
            args = tuple((rnd.choice(names), rnd.choice(MODES)) for _ in range(rnd.randint(1, 3)))
            if valid_launch(args):
                steps.append(Launch(args, float(rnd.randint(1, 1000))))
        elif roll < 0.85:
            steps.append(HostRead(rnd.choice(names)))
        else:
            steps.append(HostWrite(rnd.choice(names), float(rnd.randint(-50, 50))))
    return steps


def run_serial(ag, run, steps, init):
    """``run(ag, steps, init)`` on the serial oracle (sync execution, eager simulator)."""
    with ag.configure(backend="sim", execution="sync", sim_seed=0, sim_strategy="eager"):
        return run(ag, steps, init)


def run_async(ag, run, steps, init, strategy, seed, **options):
    """``run(ag, steps, init)`` asynchronously under one simulator strategy and seed."""
    with ag.configure(backend="sim", execution="async", sim_seed=seed, sim_strategy=strategy,
                      **options):
        return run(ag, steps, init)


#: Scheduling policies every random program must also equal serial under.
POLICIES = [
    {"dependency": "no-const"},
    {"parent_stream": "same-as-parent"},
    {"new_stream": "always-new"},
    {"prefetch": "off"},
    {"max_streams": 2},
]
