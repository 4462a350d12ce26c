"""Real programs, ported from CuPy's and Numba's own examples, on a GPU.

Each program of ``tests/corpus`` runs on the ``cuda`` backend at its GPU size, asynchronously
with the happens-before checker attached (``debug_hb``), and is compared with its NumPy
reference (within the program's GPU tolerance: cuBLAS, atomics and libdevice round
differently from NumPy) and with the same program run serially (``execution="sync"``).
"""

from __future__ import annotations

import pytest

import corpus

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("name", corpus.PROGRAMS)
def test_ported_program_gives_numpy_results_on_the_gpu_and_equals_its_serial_run(name):
    program = corpus.load(name)
    got = corpus.run_checked(name, "cuda", execution="async", debug_hb=True)
    serial = corpus.run_checked(name, "cuda", execution="sync")
    # the serial run draws the same device random numbers (same seeds, same generator), so it
    # is compared on every result, with the program's GPU tolerance (atomics and library
    # reductions may sum in another order from one run to the next)
    corpus.check(program, got, serial, "gpu")
