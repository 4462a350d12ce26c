"""The README's example, extracted from README.md as written, runs on the sim backend and prints
the answer the serial NumPy computation gives."""

from __future__ import annotations

import contextlib
import io
import re
import time
from pathlib import Path

import numpy as np
import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def readme_python_blocks() -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", README.read_text(), re.S | re.M)


def test_readme_has_one_python_example():
    assert len(readme_python_blocks()) == 1


@pytest.mark.parametrize("seed", [0, 1])
def test_readme_example_runs_on_sim_in_seconds_and_prints_the_serial_answer(seed):
    import asyncgpu as ag

    code = readme_python_blocks()[0]
    np.random.seed(seed)                     # the example draws its inputs with np.random
    namespace: dict = {"__name__": "readme_example"}
    out = io.StringIO()
    start = time.perf_counter()
    with ag.configure(backend="sim", sim_seed=seed), contextlib.redirect_stdout(out):
        exec(compile(code, str(README), "exec"), namespace)
    elapsed = time.perf_counter() - start
    x, y = namespace["x"].numpy().astype(np.float64), namespace["y"].numpy().astype(np.float64)
    expected = np.sum(x * x - y * y)
    printed = float(out.getvalue().split()[-1])
    assert printed == pytest.approx(expected, rel=1e-4, abs=1e-3)
    assert elapsed < 60, f"the README example took {elapsed:.1f} s on sim"
