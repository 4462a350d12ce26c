"""Test configuration: the sim backend by default; GPU tests only with ``-m gpu`` on a GPU.

``--pure`` runs the session on the plain Python files of a compiled build (the uncompiled pass
of ``tests/test_uncompiled.py``); tests marked ``pure`` (line-level fault injection, methods
replaced by mutants) run only where the launch path is plain Python.
"""

from __future__ import annotations

import fnmatch
import importlib.machinery
import importlib.util
import os
import sys

import pytest


#: The core, recorder and host-access tests (by file name): the uncompiled pass runs them whole.
PURE_FILES = ("test_dag.py", "test_policies.py", "test_hb.py", "test_tracker_*.py",
              "test_properties.py", "test_schedule_options.py", "test_recorder*.py",
              "test_host_reads.py", "test_memory_model.py", "test_multi_device.py",
              "test_backend_interface.py")


class _PythonSources(importlib.machinery.PathFinder):
    """Finds asyncgpu's ``.py`` files where a compiled module sits beside them."""

    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        if not fullname.startswith("asyncgpu."):
            return None
        spec = super().find_spec(fullname, path, target)
        origin = spec.origin if spec is not None else None
        if origin and origin.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES)):
            source = os.path.join(os.path.dirname(origin), fullname.rpartition(".")[2] + ".py")
            if os.path.exists(source):
                return importlib.util.spec_from_file_location(fullname, source)
        return spec


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--pure", action="store_true",
                     help="import asyncgpu's .py files even where they are compiled")
    parser.addoption("--pure-pass", action="store_true",
                     help="only the uncompiled pass's tests: the core, recorder and "
                          "host-access files whole and the tests marked pure elsewhere")


def _gpu_selected(config: pytest.Config) -> bool:
    expr = config.getoption("markexpr") or ""
    return "gpu" in expr and "not gpu" not in expr


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("pure"):
        assert not any(name.startswith("asyncgpu.") for name in sys.modules), \
            "--pure must take effect before asyncgpu is imported"
        sys.meta_path.insert(0, _PythonSources)
        import programs     # (tests/: the property tests' example counts)

        programs.PURE = True
    if not _gpu_selected(config):
        # Before asyncgpu (and numba.cuda) are imported: CPU tests never touch a GPU.
        os.environ.setdefault("ASYNCGPU_BACKEND", "sim")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    from asyncgpu.backends import cuda_usable
    from asyncgpu.core.compiled import is_compiled

    # The long tests first: with several workers (pytest-xdist hands tests out in order) one
    # that starts last would keep its worker busy after the others have finished.
    items.sort(key=lambda item: "slow" not in item.keywords)

    if config.getoption("pure_pass"):
        keep, drop = [], []
        for item in items:
            whole = any(fnmatch.fnmatch(item.path.name, pattern) for pattern in PURE_FILES)
            (keep if whole or "pure" in item.keywords else drop).append(item)
        if drop:
            config.hook.pytest_deselected(items=drop)
            items[:] = keep

    if is_compiled():
        compiled = pytest.mark.skip(reason="needs the launch path as plain Python: runs in "
                                           "the uncompiled pass (tests/test_uncompiled.py)")
        for item in items:
            if "pure" in item.keywords:
                item.add_marker(compiled)
    if _gpu_selected(config) and cuda_usable():
        return
    reason = ("needs an NVIDIA GPU with CuPy; run with -m gpu" if not _gpu_selected(config)
              else "no usable NVIDIA GPU (CuPy cannot see a device)")
    skip = pytest.mark.skip(reason=reason)
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def chunk_always(monkeypatch):
    """Every element-wise launch of a host-current input of 8 bytes or more runs in chunks,
    even behind a copy in that is still running and on several devices (where the runtime
    launches it whole): for tests of what the chunks compute and where they run."""
    from asyncgpu.runtime import chunks

    monkeypatch.setattr(chunks, "MIN_CHUNK_BYTES", 8)
    monkeypatch.setattr(chunks, "runs_whole", lambda rt, device: False)


@pytest.fixture
def sim():
    """A fresh sim runtime (seed 0, strategy random) for one test; yields the asyncgpu module."""
    import asyncgpu as ag

    with ag.configure(backend="sim", sim_seed=0, sim_strategy="random", execution="async"):
        yield ag
        ag.synchronize()


@pytest.fixture(params=[0, 1, 2])
def explicit(request):
    """A sim runtime with the explicit memory model, randomized execution with three seeds;
    yields the asyncgpu module."""
    import asyncgpu as ag

    with ag.configure(backend="sim", sim_seed=request.param, sim_strategy="random",
                      memory="explicit"):
        yield ag
        ag.synchronize()


@pytest.fixture
def managed_memory():
    """Pin the managed memory model for a test of what only it does (prefetch counts, DAGs
    without copy nodes); the explicit model, the default, has its own tests of those."""
    import asyncgpu as ag

    with ag.configure(memory="managed"):
        yield


@pytest.fixture
def fresh_runtime():
    """A runtime of the test's own, closed after it: what a runtime's tenants hold (SM
    partitions) lasts as long as the runtime, and the process's runtime lives across tests."""
    from asyncgpu.runtime import current

    saved = current._runtime
    current._runtime = None         # (the next call makes one of the current options)
    try:
        yield
    finally:
        rt = current._runtime
        if rt is not None and rt is not saved:
            rt.synchronize()
            rt.close()
        current._runtime = saved
