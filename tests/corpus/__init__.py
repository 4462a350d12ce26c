"""A corpus of real programs, ported from CuPy's and Numba's own examples.

Each module is one program, ported with as few changes as possible: its docstring names the
repository and file (or documentation page) it comes from, and every changed line carries a
comment ``# asyncgpu:`` saying why. Each module exposes

* ``SIZES``: ``{"sim": size, "gpu": size}``, the problem size for the simulator (a few seconds
  at most) and for a GPU;
* ``run(size) -> dict``: the program, in the current asyncgpu configuration, its results read
  back as NumPy arrays (and, where the program draws random numbers on the device, the draws
  it made, which the reference starts from as the original example does);
* ``reference(size, got) -> dict``: the same results computed independently with NumPy (``got``
  is used only for those device draws);
* ``TOLERANCE``: ``{"sim": {...}, "gpu": {...}}``, the ``rtol``/``atol`` of the comparison
  (0 and 0: exact, where the algorithm is deterministic), optionally per result under the
  result's name;
* ``NEEDS_NUMBA_SIMULATOR`` (optional, default false): on a machine without a GPU the program
  needs Numba's CUDA simulator itself (``NUMBA_ENABLE_CUDASIM=1`` before ``numba.cuda`` is
  first imported), for Numba calls it makes outside kernels (``create_xoroshiro128p_states``).

:func:`check` compares a run with its reference; :func:`run_checked` runs a program in a
configuration and checks it.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

import numpy as np

#: the programs, by module name
PROGRAMS = (
    "cupy_kmeans",          # cupy/cupy examples/kmeans/kmeans.py (CUDA C kernel with a twin)
    "cupy_gmm",             # cupy/cupy examples/gmm/gmm.py
    "cupy_cg",              # cupy/cupy examples/cg/cg.py
    "cupy_black_scholes",   # cupy/cupy examples/finance/black_scholes.py (CUDA C kernel)
    "cupy_monte_carlo",     # cupy/cupy examples/finance/monte_carlo.py (CUDA C kernel)
    "numba_matmul",         # numba-cuda docs: matrix multiplication, with shared memory
    "numba_montecarlo",     # numba-cuda docs: Monte Carlo integration, xoroshiro128p states
    "numba_laplace",        # numba-cuda docs: the 1-D heat equation
    "numba_reduction",      # numba-cuda docs: shared-memory reduction
)


#: how the CPU tests run each program: every strategy of the simulator (each with its own
#: seed), the managed memory model once, and the serial mode
SIM_MODES: dict[str, dict[str, Any]] = {
    "random": {"sim_strategy": "random", "sim_seed": 1},
    "pct": {"sim_strategy": "pct", "sim_seed": 2},
    "reverse": {"sim_strategy": "reverse", "sim_seed": 3},
    "starve": {"sim_strategy": "starve", "sim_seed": 4},
    "lazy": {"sim_strategy": "lazy", "sim_seed": 5},
    "eager": {"sim_strategy": "eager", "sim_seed": 6},
    "managed": {"sim_strategy": "random", "sim_seed": 7, "memory": "managed"},
    "sync": {"execution": "sync", "sim_seed": 8},
}


def load(name: str) -> ModuleType:
    """The program module ``name`` (one of :data:`PROGRAMS`)."""
    return importlib.import_module(f"{__name__}.{name}")


def _tolerance(program: ModuleType, backend: str, key: str) -> dict[str, float]:
    spec = program.TOLERANCE[backend]
    per_result = spec.get(key)
    if isinstance(per_result, dict):
        spec = per_result
    return {"rtol": spec.get("rtol", 0.0), "atol": spec.get("atol", 0.0)}


def check(program: ModuleType, got: dict[str, Any], want: dict[str, Any], backend: str) -> None:
    """Assert that every result of ``want`` is in ``got`` and matches it (exactly where the
    program's tolerance for ``backend`` is 0)."""
    for key, expected in want.items():
        assert key in got, f"{program.__name__}: the run returned no {key!r}"
        actual = np.asarray(got[key])
        expected = np.asarray(expected)
        assert actual.shape == expected.shape, \
            f"{program.__name__}: {key} has shape {actual.shape}, NumPy's {expected.shape}"
        tol = _tolerance(program, backend, key)
        if tol["rtol"] == 0 and tol["atol"] == 0:
            np.testing.assert_array_equal(actual, expected,
                                          err_msg=f"{program.__name__}: {key}")
        else:
            np.testing.assert_allclose(actual, expected, rtol=tol["rtol"], atol=tol["atol"],
                                       err_msg=f"{program.__name__}: {key}")


def run_checked(name: str, backend: str, **options: Any) -> dict[str, Any]:
    """Run program ``name`` under ``asyncgpu.configure(backend=backend, **options)`` at its size
    for that backend (``SIZES["sim"]`` on ``sim``, ``SIZES["gpu"]`` on ``cuda``), compare it
    with its reference, and return its results."""
    import asyncgpu as ag

    program = load(name)
    kind = "sim" if backend == "sim" else "gpu"
    size = program.SIZES[kind]
    with ag.configure(backend=backend, **options):
        got = program.run(size)
        ag.synchronize()
    check(program, got, program.reference(size, got), kind)
    return got
