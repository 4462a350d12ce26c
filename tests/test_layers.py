"""The package's layers and their import contracts (``[tool.importlinter]`` in pyproject.toml).

``core`` < ``runtime`` < ``recorder`` < ``backends`` | ``observe`` < ``cupy`` < ``cli`` < ``__main__``:
a module imports only from its own layer and the layers below, no package's modules import
each other in a circle, and the core imports no CUDA library. import-linter reads every import
statement, those inside functions too; the last two tests plant such imports in a copy of the
package and check that the contracts catch them.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

pytest.importorskip("importlinter", reason="import-linter is in the 'test' extra")

ROOT = pathlib.Path(__file__).resolve().parents[1]

LINT = ("import sys; from importlinter.cli import lint_imports; "
        "sys.exit(lint_imports(config_filename='pyproject.toml', no_cache=True))")


def lint(tree: pathlib.Path) -> subprocess.CompletedProcess[str]:
    """import-linter on the ``asyncgpu`` package of ``tree`` with ``tree``'s contracts."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    return subprocess.run([sys.executable, "-c", LINT], cwd=tree, env=env, capture_output=True,
                          text=True, timeout=240)


def copy_of_package(tmp_path: pathlib.Path) -> pathlib.Path:
    """The package's Python sources and the contracts, in a tree of their own."""
    shutil.copytree(ROOT / "asyncgpu", tmp_path / "asyncgpu",
                    ignore=shutil.ignore_patterns("__pycache__", "*.so", "data"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def plant(tree: pathlib.Path, module: str, source: str) -> None:
    """Append ``source`` (a function whose body imports something) to ``module``'s file."""
    path = tree / "asyncgpu" / module
    path.write_text(path.read_text() + "\n\n" + source)


def test_the_package_keeps_its_import_contracts():
    done = lint(ROOT)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout


def test_an_import_inside_a_function_up_a_layer_breaks_the_layers_contract(tmp_path):
    tree = copy_of_package(tmp_path)
    plant(tree, "core/dag.py", "def planted():\n    from ..recorder import entry\n"
                               "    return entry\n")
    done = lint(tree)
    assert done.returncode != 0
    assert "BROKEN" in done.stdout
    assert "asyncgpu.core.dag -> asyncgpu.recorder.entry" in done.stdout


def test_an_import_inside_a_function_closing_a_cycle_breaks_the_acyclic_contract(tmp_path):
    tree = copy_of_package(tmp_path)
    # array is below library (library imports it): an import back closes a circle
    plant(tree, "runtime/array.py", "def planted():\n    from . import library\n"
                                    "    return library\n")
    done = lint(tree)
    assert done.returncode != 0
    assert "No cycles are allowed in asyncgpu.runtime" in done.stdout


def test_a_cuda_import_in_the_core_breaks_the_forbidden_contract(tmp_path):
    tree = copy_of_package(tmp_path)
    plant(tree, "core/streams.py", "def planted():\n    import cupy\n    return cupy\n")
    done = lint(tree)
    assert done.returncode != 0
    assert "asyncgpu.core is not allowed to import cupy" in done.stdout
