"""The uncompiled pass: where the launch path is compiled, the tests of the core, the recorder
and host access, and every test marked ``pure`` (line-level fault injection, mutants), run
again on the plain Python files (``pytest --pure``, tests/conftest.py). The same code runs either
way; this pass proves the Python answers are the compiled ones, and runs what only Python can
(a mutant replaces methods, which compiled classes do not allow)."""

from __future__ import annotations

import fnmatch
import os
import re
import subprocess
import sys

import pytest

from asyncgpu.core.compiled import is_compiled
from conftest import PURE_FILES

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.slow
@pytest.mark.timeout(1600)
@pytest.mark.skipif(not is_compiled(), reason="the launch path is plain Python here: the "
                    "whole suite is the uncompiled pass")
def test_the_core_recorder_and_pure_tests_pass_on_the_python_files():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get(
        "PYTHONPATH")])))
    # (one session: the files of conftest.PURE_FILES whole, the tests marked pure elsewhere)
    run = subprocess.run([sys.executable, "-m", "pytest", "--pure", "--pure-pass", "-q", "-rA",
                          "-n", "2",
                          "-p", "no:cacheprovider", "-m", "not gpu", os.path.join(ROOT, "tests")],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=1500)
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    files = {os.path.basename(path)
             for path in re.findall(r"^PASSED (tests/[^:]+)::", run.stdout, re.MULTILINE)}
    whole = {name for name in files
             if any(fnmatch.fnmatch(name, pattern) for pattern in PURE_FILES)}
    # (both parts ran: files of PURE_FILES, and tests marked pure in other files)
    assert whole and files - whole, sorted(files)
