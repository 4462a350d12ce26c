"""The checked-in description of CuPy's surface equals the installed CuPy's (GPU machine)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]


def test_checked_in_surface_equals_the_installed_cupys():
    """In a fresh interpreter, as the tool writes it: which of CuPy's lazily imported modules
    are present depends on what the process imported before (this test session imports many)."""
    pytest.importorskip("cupy")
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "cupy_surface.py"), "--check"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
