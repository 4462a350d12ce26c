"""The backend interface: a backend written in Python derives from ``Backend`` (or wraps
another through ``ForwardingBackend``) and gets every launch-path call, compiled or not."""

from __future__ import annotations

import numpy as np
import pytest
import recorder_kernels as rk

import asyncgpu as ag
from asyncgpu.core.backend import Backend, ForwardingBackend
from asyncgpu.core.config import Options
from asyncgpu.runtime.allocation import HOST
from asyncgpu.runtime.array import new_array
from asyncgpu.runtime import backend_registry
from asyncgpu.runtime.context import Runtime


class Counting(ForwardingBackend):
    """Counts three of the launch path's calls, and forwards every call."""

    def __init__(self, inner):
        super().__init__(inner)
        self.calls = {"kernel_launch": 0, "launch": 0, "record": 0}

    def kernel_launch(self, *args):
        self.calls["kernel_launch"] += 1
        return super().kernel_launch(*args)

    def launch(self, node, stream):
        self.calls["launch"] += 1
        super().launch(node, stream)

    def record(self, event, stream):
        self.calls["record"] += 1
        super().record(event, stream)


def test_a_backend_that_wraps_another_sees_every_launch_and_the_results_stay_right():
    opts = Options(backend="sim", execution="async")
    backend = Counting(backend_registry.create(opts))   # (the simulator, checked)
    rt = Runtime(opts, backend=backend)
    inc = ag.cuda_kernel(rk.INC, "inc", sim=rk._inc)
    x = new_array(rt, (rk.N,), np.dtype(np.float32), HOST)
    x[...] = 0
    for _ in range(5):
        rt.launch_kernel(inc[1, rk.N], (x, rk.N))
    assert (x.numpy() == 5).all()
    # each launch prepared, and each node (the 5 kernels, the copy of x to the device)
    # enqueued and its completion recorded, through the wrapper; the attribute it does not
    # define (the simulator's name) comes from the inner backend
    nodes = 5 + rt.stats.copies_to_device
    assert backend.calls == {"kernel_launch": 5, "launch": nodes, "record": nodes}
    assert backend.name == "sim"


def test_a_backend_missing_a_launch_path_method_says_which():
    class Partial(Backend):
        pass

    with pytest.raises(NotImplementedError, match="backend Partial does not implement record"):
        Partial().record(None, None)


def test_a_runtime_refuses_a_backend_that_is_not_one():
    class Duck:
        name = "duck"

    with pytest.raises(TypeError, match="derives from asyncgpu.core.backend.Backend.*Duck"):
        Runtime(Options(backend="sim"), backend=Duck())
