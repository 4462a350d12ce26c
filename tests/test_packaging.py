"""What installing asyncgpu puts where, checked from the packaging configuration (building the
wheel compiles the C extension, too slow for the CPU suite): no generic top-level packages, the
benchmark suite usable from the installed layout, no C sources in the wheel, an sdist that
carries the docs, the tests and the tools the tests use."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def config():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)


def _source_dir(setuptools: dict, package: str) -> str:
    """The folder setuptools takes ``package`` from (its ``package-dir`` mapping)."""
    mapping = setuptools.get("package-dir", {})
    parts = package.split(".")
    for i in range(len(parts), 0, -1):
        head = ".".join(parts[:i])
        if head in mapping:
            return os.path.join(ROOT, mapping[head], *parts[i:])
    return os.path.join(ROOT, mapping.get("", ""), *parts)


def test_installs_only_the_asyncgpu_package(config):
    packages = config["tool"]["setuptools"]["packages"]
    assert {p.split(".")[0] for p in packages} == {"asyncgpu"}
    assert "asyncgpu.benchmarks" in packages and "asyncgpu.kernels" in packages


def test_every_package_folder_of_the_tree_is_installed(config):
    setuptools = config["tool"]["setuptools"]
    packages = setuptools["packages"]
    for package in packages:
        assert os.path.isfile(os.path.join(_source_dir(setuptools, package), "__init__.py"))
    for top, name in (("asyncgpu", "asyncgpu"), ("benchmarks", "asyncgpu.benchmarks"),
                      ("kernels", "asyncgpu.kernels")):
        for folder, _, files in os.walk(os.path.join(ROOT, top)):
            if "__init__.py" in files:
                rel = os.path.relpath(folder, os.path.join(ROOT, top))
                sub = name if rel == "." else f"{name}.{rel.replace(os.sep, '.')}"
                assert sub in packages, f"{folder} would be left out of the wheel"


def test_the_wheel_holds_no_c_sources(config):
    setuptools = config["tool"]["setuptools"]
    assert setuptools.get("include-package-data") is False
    patterns = [p for ps in setuptools.get("package-data", {}).values() for p in ps]
    assert not [p for p in patterns if p.endswith((".c", ".h", ".pxd", ".pyx", "*"))]


def test_every_compiled_module_is_plain_python_beside_its_declarations():
    """setup.py compiles each hot module from its .py (the code) and the .pxd beside it (C
    types only): there is no second source of any of them."""
    import ast

    tree = ast.parse(open(os.path.join(ROOT, "setup.py")).read())
    hot = next(node.value for node in tree.body if isinstance(node, ast.Assign)
               and getattr(node.targets[0], "id", "") == "HOT_MODULES")
    for name in ast.literal_eval(hot):
        path = os.path.join(ROOT, *name.split("."))
        assert os.path.isfile(path + ".py"), name
        assert not os.path.exists(path + ".pyx"), name
    for folder, _, files in os.walk(os.path.join(ROOT, "asyncgpu")):
        assert not [f for f in files if f.endswith((".c", ".h")) and
                    not os.path.exists(os.path.join(folder, f[:-2] + ".py"))
                    and not os.path.exists(os.path.join(folder, f[:-2] + ".pyx"))], folder


def test_extras(config):
    extras = config["project"]["optional-dependencies"]
    assert {"cuda12", "cuda13", "bench", "test"} <= set(extras)
    assert not any("tqdm" in d for deps in extras.values() for d in deps)
    assert not any("tqdm" in d for d in config["project"]["dependencies"])


def test_the_license_the_metadata_names_is_in_the_tree(config):
    assert config["project"]["license"] == "Apache-2.0"
    with open(os.path.join(ROOT, "LICENSE")) as f:
        text = f.read()
    assert "Apache License" in text and "Version 2.0, January 2004" in text


def test_the_sdist_carries_docs_tests_and_tools():
    with open(os.path.join(ROOT, "MANIFEST.in")) as f:
        lines = {line.strip() for line in f}
    for folder in ("docs", "tests", "tools", "benchmarks", "kernels"):
        assert f"graft {folder}" in lines
    assert "recursive-include asyncgpu *.pxd *.pyx" in lines


def test_benchmarks_import_kernels_through_their_own_layout():
    """A plain ``from kernels import ...`` would break in the wheel (there is no top-level
    ``kernels`` there)."""
    offenders = []
    for folder, _, files in os.walk(os.path.join(ROOT, "benchmarks")):
        for name in files:
            if name.endswith(".py"):
                with open(os.path.join(folder, name)) as f:
                    for line in f:
                        if line.lstrip().startswith(("from kernels", "import kernels",
                                                     "from benchmarks", "import benchmarks")):
                            offenders.append(f"{name}: {line.strip()}")
    assert offenders == []


def test_bench_runs_from_the_installed_layout(config, tmp_path):
    """The packages laid out as the wheel lays them out (``package-dir``), outside the
    checkout: ``asyncgpu bench`` runs and imports no top-level ``benchmarks`` or ``kernels``."""
    setuptools = config["tool"]["setuptools"]
    site = tmp_path / "site"
    for package in setuptools["packages"]:
        src = _source_dir(setuptools, package)
        dst = site.joinpath(*package.split("."))
        dst.mkdir(parents=True, exist_ok=True)
        for name in os.listdir(src):
            if name.endswith((".py", ".so")):
                shutil.copy2(os.path.join(src, name), dst / name)
    script = ("import sys, runpy\n"
              "sys.argv = ['asyncgpu', 'bench', 'vec', '--modes', 'parallel']\n"
              "from asyncgpu.__main__ import main\n"
              "code = main(sys.argv[1:])\n"
              "assert 'benchmarks' not in sys.modules and 'kernels' not in sys.modules, code\n"
              "assert 'asyncgpu.kernels.vec' in sys.modules\n"
              "sys.exit(code)\n")
    env = dict(os.environ, PYTHONPATH=str(site), ASYNCGPU_BACKEND="sim", COLUMNS="80")
    run = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "PASS" in run.stdout


def test_a_build_without_a_c_compiler_says_so_in_one_line_and_leaves_plain_python(tmp_path):
    """Every module fails to compile (the compiler is /bin/false): the build succeeds, says so
    in one line, and leaves no compiled module beside the Python ones (the modules build in
    parallel: each failure was a line of its own, and the clean-up raised)."""
    tree = tmp_path / "tree"
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout.split()
    for name in files:
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(os.path.join(ROOT, name), tree / name)
    env = dict(os.environ, CC="/bin/false", CXX="/bin/false", ASYNCGPU_BUILD="optional")
    # (through pip, as a user installs: the build's own requirements, isolated)
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "-w",
                           str(tmp_path / "wheel"), str(tree)],
                          env=env, capture_output=True, text=True, timeout=900)
    said = [line.strip() for line in (done.stdout + done.stderr).splitlines()
            if line.strip().startswith("asyncgpu:")]
    assert done.returncode == 0, done.stderr[-2000:]
    assert len(said) == 1 and said[0].startswith("asyncgpu: compiling the launch path failed")
    assert said[0].endswith("it will run as plain Python")
    wheel, = (tmp_path / "wheel").glob("asyncgpu-*.whl")
    import zipfile

    names = zipfile.ZipFile(wheel).namelist()
    assert "asyncgpu/runtime/context.py" in names
    assert not [n for n in names if n.endswith(".so")]
    # (the license the metadata names travels with the wheel)
    assert [n for n in names if n.endswith(".dist-info/licenses/LICENSE")], names
