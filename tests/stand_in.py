"""Run a script against the real ``cuda`` backend over the stand-in CuPy of ``tools/fakecupy``,
in a separate interpreter, so the stand-in never reaches the test process."""

from __future__ import annotations

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(script: str) -> str:
    """The script's standard output; fails the test with its standard error if it fails."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.path.join(ROOT, "tools", "fakecupy"), ROOT]))
    env.pop("ASYNCGPU_BACKEND", None)
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout
