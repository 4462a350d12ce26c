"""Real programs, ported from CuPy's and Numba's own examples, give NumPy's results on sim.

Each program of ``tests/corpus`` runs on the simulator under every schedule strategy (and in
the serial ``execution="sync"`` mode, and with the managed memory model), with the
happens-before checker on (always, on sim), and its results are compared with its NumPy
reference: exactly where the algorithm is deterministic, within the program's tolerance
otherwise. A missing dependency shows here as a wrong number or a ``RaceError``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import corpus  # noqa: E402


def _needs_numba_simulator(name):
    return getattr(corpus.load(name), "NEEDS_NUMBA_SIMULATOR", False)


IN_PROCESS = [n for n in corpus.PROGRAMS if not _needs_numba_simulator(n)]
SIMULATED_NUMBA = [n for n in corpus.PROGRAMS if _needs_numba_simulator(n)]


def test_the_corpus_lists_at_least_eight_programs_each_with_its_origin():
    assert len(corpus.PROGRAMS) >= 8
    for name in corpus.PROGRAMS:
        program = corpus.load(name)
        assert "Origin:" in program.__doc__, f"{name} does not say where it comes from"
        for attribute in ("SIZES", "TOLERANCE", "run", "reference"):
            assert hasattr(program, attribute), f"{name} has no {attribute}"


@pytest.mark.parametrize("mode", list(corpus.SIM_MODES))
@pytest.mark.parametrize("name", IN_PROCESS)
def test_ported_program_gives_numpy_results_under_every_schedule(name, mode):
    corpus.run_checked(name, "sim", **{"execution": "async", **corpus.SIM_MODES[mode]})


_CHILD = """
import json, sys
sys.path.insert(0, {here!r})
import corpus
failures = {{}}
for mode, options in corpus.SIM_MODES.items():
    try:
        corpus.run_checked({name!r}, "sim", **{{"execution": "async", **options}})
    except Exception as exc:
        failures[mode] = f"{{type(exc).__name__}}: {{exc}}"
print(json.dumps(failures))
"""


@pytest.mark.parametrize("name", SIMULATED_NUMBA)
def test_program_using_numba_outside_kernels_gives_numpy_results_under_every_schedule(name):
    # Numba's own device calls outside kernels (create_xoroshiro128p_states) work on a machine
    # without a GPU only in Numba's simulator, chosen before numba.cuda is first imported: the
    # program runs in a fresh interpreter that asks for it, as its user would
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", ASYNCGPU_BACKEND="sim",
               PYTHONWARNINGS="ignore")
    child = subprocess.run([sys.executable, "-c", _CHILD.format(here=HERE, name=name)],
                           env=env, capture_output=True, text=True, timeout=240)
    assert child.returncode == 0, child.stderr[-3000:]
    failures = json.loads(child.stdout.strip().splitlines()[-1])
    assert failures == {}, failures
