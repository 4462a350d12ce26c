"""The uncompiled pass: where the launch path is compiled, the tests of the core, the recorder
and host access, and every test marked ``pure`` (line-level fault injection, mutants), run
again on the plain Python files (``pytest --pure``, tests/conftest.py). The same code runs either
way; this pass proves the Python answers are the compiled ones, and runs what only Python can
(a mutant replaces methods, which compiled classes do not allow)."""

from __future__ import annotations

import glob
import os
import subprocess
import sys

import pytest

from asyncgpu.core.compiled import is_compiled

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: The core, recorder and host-access tests (by file name), run whole.
PURE_FILES = ("test_dag.py", "test_policies.py", "test_hb.py", "test_tracker_*.py",
              "test_properties.py", "test_schedule_options.py", "test_recorder*.py",
              "test_host_reads.py", "test_memory_model.py", "test_multi_device.py",
              "test_backend_interface.py")


def _run(args: list[str]) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get(
        "PYTHONPATH")])))
    return subprocess.run([sys.executable, "-m", "pytest", "--pure", "-q", "-p", "no:cacheprovider",
                           "-m", "not gpu", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=1500)


@pytest.mark.slow
@pytest.mark.timeout(1600)
@pytest.mark.skipif(not is_compiled(), reason="the launch path is plain Python here: the "
                    "whole suite is the uncompiled pass")
def test_the_core_recorder_and_pure_tests_pass_on_the_python_files():
    files = sorted({path for pattern in PURE_FILES
                    for path in glob.glob(os.path.join(ROOT, "tests", pattern))})
    whole = _run(["-n", "2", *files])
    assert whole.returncode == 0, whole.stdout[-6000:] + whole.stderr[-2000:]
    marked = _run(["-n", "2", "-m", "pure and not gpu", os.path.join(ROOT, "tests")])
    assert marked.returncode == 0, marked.stdout[-6000:] + marked.stderr[-2000:]
    assert " passed" in marked.stdout
