"""Test configuration: the sim backend by default; GPU tests only with ``-m gpu`` on a GPU."""

from __future__ import annotations

import os

import pytest


def _gpu_selected(config: pytest.Config) -> bool:
    expr = config.getoption("markexpr") or ""
    return "gpu" in expr and "not gpu" not in expr


def pytest_configure(config: pytest.Config) -> None:
    if not _gpu_selected(config):
        # Before asyncgpu (and numba.cuda) are imported: CPU tests never touch a GPU.
        os.environ.setdefault("ASYNCGPU_BACKEND", "sim")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    from asyncgpu.backends import cuda_usable

    if _gpu_selected(config) and cuda_usable():
        return
    reason = ("needs an NVIDIA GPU with CuPy; run with -m gpu" if not _gpu_selected(config)
              else "no usable NVIDIA GPU (CuPy cannot see a device)")
    skip = pytest.mark.skip(reason=reason)
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


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


@pytest.fixture(params=["compiled", "python"])
def compiled(request):
    """Run a test with the compiled methods of ``asyncgpu._speedups`` and with the Python
    ones (``asyncgpu.core.compiled``); the compiled case is skipped where the module is not
    built."""
    from asyncgpu.core import compiled as _compiled

    if request.param == "compiled" and _compiled.speedups is None:
        pytest.skip("asyncgpu._speedups is not built (python3 tools/build_speedups.py)")
    before = _compiled.in_use()
    _compiled.use(request.param == "compiled")
    yield request.param
    _compiled.use(before)


@pytest.fixture
def managed_memory():
    """Pin the managed memory model for a test of what only it does (prefetch counts, DAGs
    without copy nodes); the explicit model, the default, has its own tests of those."""
    import asyncgpu as ag

    with ag.configure(memory="managed"):
        yield
