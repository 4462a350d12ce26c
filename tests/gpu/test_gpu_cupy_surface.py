"""The checked-in description of CuPy's surface equals the installed CuPy's (GPU machine)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]


def _tool():
    spec = importlib.util.spec_from_file_location("cupy_surface_tool",
                                                  ROOT / "tools" / "cupy_surface.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_checked_in_surface_equals_the_installed_cupys():
    pytest.importorskip("cupy")
    from asyncgpu.runtime import cupy_surface as _cupy_surface

    tool = _tool()
    live = json.loads(tool.dumps(tool.describe()))
    listed = _cupy_surface.surface()
    assert live["cupy_version"] == listed["cupy_version"]
    for prefix in sorted(set(live["namespaces"]) | set(listed["namespaces"])):
        assert live["namespaces"].get(prefix) == listed["namespaces"].get(prefix), (
            f"namespace {prefix!r} differs: rerun tools/cupy_surface.py --write")
    assert live == listed

