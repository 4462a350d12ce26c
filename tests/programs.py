"""Random programs over arrays, views and host accesses, for property and mutation tests.

A program is a list of steps over three allocations of ``SIZE`` float64. Each step names its
operands as :class:`Operand` views of one allocation, drawn at random: 1-D slices of any start
and length (so two operands can share a single element, 8 bytes, at an edge), strided 1-D views
(negative steps too), and 2-D views of the allocation seen as ``ROWS`` x ``COLS``: row blocks,
column blocks, reversed axes, transposes.

* A launch runs a CUDA C kernel generated for its access modes (with a NumPy twin for the sim
  backend) on a grid of several blocks of ``Launch.block`` threads. A raw pointer needs
  contiguous data, so launch operands are the contiguous ones: 1-D slices and 2-D row blocks.
* Host reads and writes take any operand, strided and 2-D ones included.

Every step is deterministic (sums run in one order, ``--fmad=false`` on the device), so an
asynchronous run must equal the serial run exactly, on the simulator as on a GPU.

The library programs (``tests/library_programs.py``) need operands of one shape, so they use
the fixed named operands of :data:`OPERANDS` (eight elements each, overlapping by four); every
helper here takes a name or an :class:`Operand`.
"""

from __future__ import annotations

import contextlib

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

#: Set by ``tests/conftest.py`` in the uncompiled pass (``--pure``): there a property test
#: proves that the plain Python files answer as the compiled ones, which the compiled run has
#: already explored with the full number of examples, so it takes a third of them.
PURE = False


def examples(n: int) -> int:
    """A property test's ``max_examples``: ``n``, or a third of it (at least 5) in the
    uncompiled pass."""
    return max(5, n // 3) if PURE else n

#: elements of each of the three allocations, and the 2-D shape they are also viewed in
SIZE = 16
ROWS, COLS = 4, 4
ITEMSIZE = np.dtype(np.float64).itemsize
MODES = ("r", "rw", "w")
#: the thread counts per block a launch draws from (its grid covers its largest operand)
BLOCKS = (1, 2, 4, 8)
#: the longest 1-D slice drawn (a launch writes at most this many elements per operand)
MAX_LEN = 10

Slice = tuple[Any, Any, Any]        # (start, stop, step), as ``slice`` takes them (hashable)


@dataclass(frozen=True)
class Operand:
    """A view of allocation ``alloc``: ``slices`` of its 1-D form (one slice) or of its
    ``ROWS`` x ``COLS`` form (two), transposed after slicing when ``transpose``."""

    alloc: int
    slices: tuple[Slice, ...]
    transpose: bool = False

    def of(self, base: Any) -> Any:
        """The view of ``base`` (an asyncgpu or NumPy array of ``SIZE`` elements)."""
        if len(self.slices) == 2:
            base = base.reshape(ROWS, COLS)
        view = base[tuple(slice(*s) for s in self.slices)]
        return view.T if self.transpose else view

    @property
    def probe(self) -> np.ndarray:
        """The view applied to the element indices of a NumPy allocation."""
        return self.of(np.arange(SIZE))

    @property
    def extent(self) -> tuple[int, int]:
        """The byte range ``[lo, hi)`` of its allocation that the view spans."""
        idx = self.probe
        return int(idx.min()) * ITEMSIZE, (int(idx.max()) + 1) * ITEMSIZE

    @property
    def contiguous(self) -> bool:
        return bool(self.probe.flags.c_contiguous)


def _flat(alloc: int, start: int, length: int) -> Operand:
    return Operand(alloc, ((start, start + length, 1),))


#: The fixed named operands of the library programs: eight elements each, the halves of an
#: allocation and a middle view overlapping both.
N = 8
OPERANDS = {
    "A0": _flat(0, 0, N), "A1": _flat(0, 8, N), "Am": _flat(0, 4, N),
    "B0": _flat(1, 0, N), "B1": _flat(1, 8, N),
    "C0": _flat(2, 0, N), "Cm": _flat(2, 4, N),
}


def operand(o: str | Operand) -> Operand:
    """An operand given by name (:data:`OPERANDS`) or as itself."""
    return OPERANDS[o] if isinstance(o, str) else o


def _overlap(a: str | Operand, b: str | Operand) -> bool:
    """Whether the byte extents of two operands overlap (as the dependency tracker sees them)."""
    a, b = operand(a), operand(b)
    (alo, ahi), (blo, bhi) = a.extent, b.extent
    return a.alloc == b.alloc and alo < bhi and blo < ahi


@dataclass(frozen=True)
class Launch:
    args: tuple[tuple[Any, str], ...]   # (operand or its name, mode)
    c: float
    block: int = 4                      # threads per block


@dataclass(frozen=True)
class HostRead:
    operand: Any


@dataclass(frozen=True)
class HostWrite:
    operand: Any
    value: float


def valid_launch(args: tuple[tuple[Any, str], ...]) -> bool:
    """Contiguous operands, no two overlapping in one launch unless both are read-only."""
    if not all(operand(a).contiguous for a, _ in args):
        return False
    for i, (a, ma) in enumerate(args):
        for b, mb in args[i + 1:]:
            if _overlap(a, b) and (ma != "r" or mb != "r"):
                return False
    return True


def source(modes: tuple[str, ...]) -> str:
    """CUDA C for a launch with these modes: every thread sums the read-only operands (all of
    them, in order), thread ``t`` updates element ``t`` of each operand it may write."""
    params = ", ".join(
        f"{'const ' if m == 'r' else ''}double* a{i}, int n{i}" for i, m in enumerate(modes)
    )
    sums = "".join(f"    for (int j = 0; j < n{i}; ++j) s += a{i}[j];\n"
                   for i, m in enumerate(modes) if m == "r")
    body = "".join(
        f"    if (t < n{i}) a{i}[t] = a{i}[t] * 0.5 + s * 0.01 + c;\n" if m == "rw" else
        f"    if (t < n{i}) a{i}[t] = s * 0.01 + c;\n"
        for i, m in enumerate(modes) if m != "r"
    )
    return (f'extern "C" __global__ void prog({params}, double c) {{\n'
            f"    double s = 0.0;\n{sums}"
            f"    int t = blockIdx.x * blockDim.x + threadIdx.x;\n{body}}}\n")


def twin(modes: tuple[str, ...]) -> Any:
    """The NumPy twin of :func:`source` (the same sums in the same order)."""
    def run(*args: Any) -> None:
        arrays, counts, c = args[0:-1:2], args[1:-1:2], float(args[-1])
        flat = [a.reshape(-1) for a in arrays]      # contiguous: views, as the pointers are
        s = 0.0
        for a, n, m in zip(flat, counts, modes):
            if m == "r":
                for j in range(int(n)):
                    s += float(a[j])
        for a, n, m in zip(flat, counts, modes):
            n = int(n)
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


class Views(dict):
    """Operand (or name) -> its view of ``allocs``, made at first use and then kept (a program
    passes the same view objects to every step, as a user's code would)."""

    def __init__(self, allocs: list[Any]) -> None:
        super().__init__()
        self.allocs = allocs

    def __missing__(self, key: Any) -> Any:
        o = operand(key)
        view = self[key] = o.of(self.allocs[o.alloc])
        return view


def views(allocs: list[Any]) -> Views:
    return Views(allocs)


def launch(ag: Any, step: Launch, views: Views, c: float | None = None) -> None:
    """Launch ``step`` on ``views`` (``c``: another constant than the step's)."""
    arrays = [views[o] for o, _ in step.args]
    k = kernel_for(ag, tuple(m for _, m in step.args))
    args: list[Any] = []
    for a in arrays:
        args += (a, a.size)
    blocks = -(-max(a.size for a in arrays) // step.block)
    k[blocks, step.block](*args, step.c if c is None else c)


class Edges:
    """An instrument keeping each issued kernel and graph node with its edges' reasons:
    ``kernels`` and ``graphs``, lists of (node, reasons); with ``from_kernels``, only the edges
    from kernel nodes (not from the copies in of explicit memory)."""

    def __init__(self, from_kernels: bool = False) -> None:
        self.from_kernels = from_kernels
        self.kernels: list[Any] = []
        self.graphs: list[Any] = []

    def node_issued(self, node: Any) -> None:
        if node.kind in ("kernel", "graph"):
            reasons = [reason for p, reason, _ in node.edges
                       if not self.from_kernels or p.kind == "kernel"]
            (self.kernels if node.kind == "kernel" else self.graphs).append((node, reasons))


def run(ag: Any, steps: list[Any], init: np.ndarray,
        scope: Callable[[int], Any] | None = None) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Run a program in the current configuration; returns (host reads, final allocations).
    ``scope(i)``, called right before step ``i``: the context manager the step runs in."""
    allocs = [ag.array(init[i]) for i in range(3)]
    v = views(allocs)
    reads = []
    for i, step in enumerate(steps):
        with scope(i) if scope is not None else contextlib.nullcontext():
            if isinstance(step, Launch):
                launch(ag, step, v)
            elif isinstance(step, HostRead):
                reads.append(np.asarray(v[step.operand]))
            else:
                v[step.operand][...] = step.value
    final = [a.numpy() for a in allocs]
    return reads, final


# -- drawing programs ------------------------------------------------------------------------
# One set of rules for both drawers: ``pick(lo, hi)`` returns an integer in [lo, hi] (a
# hypothesis draw, shrinking towards lo, or a seeded ``random.Random``).

def draw_operand(pick: Callable[[int, int], int], contiguous: bool) -> Operand:
    """A random non-empty view; ``contiguous``: one a launch can take (a 1-D slice or a 2-D
    block of whole rows)."""
    alloc = pick(0, 2)
    kind = pick(0, 1 if contiguous else 4)
    if kind == 0:                           # a 1-D slice: any start, any length
        start = pick(0, SIZE - 1)
        return _flat(alloc, start, pick(1, min(MAX_LEN, SIZE - start)))
    if kind == 1:                           # whole rows of the 2-D form
        r0 = pick(0, ROWS - 1)
        return Operand(alloc, ((r0, pick(r0 + 1, ROWS), 1), (0, COLS, 1)))
    if kind == 2:                           # a strided 1-D view, reversed or not
        step = (2, 3, -1, -2)[pick(0, 3)]
        a, b = pick(0, SIZE - 1), pick(0, SIZE - 1)
        lo, hi = min(a, b), max(a, b)
        return Operand(alloc, ((lo, hi + 1, step),) if step > 0 else
                       ((hi, lo - 1 if lo else None, step),))
    # 2-D: a block of rows and columns, each axis possibly reversed, possibly transposed
    axes = []
    for n in (ROWS, COLS):
        a, b = pick(0, n - 1), pick(0, n - 1)
        lo, hi = min(a, b), max(a, b)
        axes.append((lo, hi + 1, 1) if kind == 3 or pick(0, 1) else
                    (hi, lo - 1 if lo else None, -1))
    return Operand(alloc, tuple(axes), transpose=kind == 4)


def draw_step(pick: Callable[[int, int], int]) -> Any:
    """A random step: a launch (about 2 in 3; one to three operands), a host read or write."""
    roll = pick(0, 19)
    if roll < 13:
        args: tuple[tuple[Operand, str], ...] = ()
        for _ in range(pick(1, 3)):
            for _attempt in range(3):       # an operand the launch can take with the others
                arg = ((draw_operand(pick, True), MODES[pick(0, 2)]),)
                if valid_launch(args + arg):
                    args += arg
                    break
        if not args:
            return HostRead(draw_operand(pick, False))
        return Launch(args, float(pick(1, 1000)), BLOCKS[pick(0, len(BLOCKS) - 1)])
    if roll < 17:
        return HostRead(draw_operand(pick, False))
    return HostWrite(draw_operand(pick, False), float(pick(-50, 50)))


def strategies(min_size: int = 1) -> Any:
    """Hypothesis strategy for programs of ``min_size`` to 14 steps (imported lazily: only
    tests need hypothesis)."""
    from hypothesis import strategies as st

    @st.composite
    def step(draw: Any) -> Any:
        return draw_step(lambda lo, hi: draw(st.integers(lo, hi)))

    return st.lists(step(), min_size=min_size, max_size=14)


def initial(seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(-8, 8, size=(3, SIZE)).astype(np.float64)


def random_program(rnd: Any, length: int = 12) -> list[Any]:
    """A seeded random program (for mutation tests, where hypothesis' shrinking is not needed)."""
    steps: list[Any] = []
    while len(steps) < length:
        steps.append(draw_step(rnd.randint))
    return steps


def run_serial(ag, run, steps, init, **options):
    """``run(ag, steps, init)`` on the serial oracle (sync execution, eager simulator)."""
    with ag.configure(backend="sim", execution="sync", sim_seed=0, sim_strategy="eager",
                      **options):
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
    # (polls an event at every launch: nodes retire while later work is issued, and one retired
    # before its work completed would give its event and its place in the tracker away)
    {"poll_threshold": 1},
]
