"""The eager launch's fast path does exactly what the general pipeline does.

Every random program runs twice on the simulator with the same seed, once with the fast path
(the default) and once with ``fast_launch=False``; the backend sees the same operations in the
same order (launches, event records and waits, copies, on the same streams), the statistics
and the results are the same, and the checker is silent. The tests also assert that the fast
path was taken at all, and that each case it must not handle goes to the general path, whose
errors and copies are what the user gets.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from numba import cuda

import programs

STRATEGIES = ["random", "pct", "reverse", "starve", "lazy"]


class OperationLog:
    """Forwards to a backend and logs the operations that order work, with streams and events
    named by first appearance (object identities differ between runs)."""

    def __init__(self, inner):
        self._inner = inner
        self.ops = []
        self._names = {}

    def _name(self, obj):
        return self._names.setdefault(id(obj), len(self._names))

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def launch(self, node, stream):
        self.ops.append(("launch", node.kind, node.name, self._name(stream)))
        return self._inner.launch(node, stream)

    def record(self, event, stream):
        self.ops.append(("record", self._name(event), self._name(stream)))
        return self._inner.record(event, stream)

    def wait(self, stream, event):
        self.ops.append(("wait", self._name(stream), self._name(event)))
        return self._inner.wait(stream, event)


def logged_run(ag, steps, init, strategy, seed, fast):
    from asyncgpu._runtime import current_runtime

    with ag.configure(backend="sim", execution="async", sim_seed=seed, sim_strategy=strategy,
                      fast_launch=fast):
        rt = current_runtime()
        log = OperationLog(rt.backend)
        rt.backend = rt.streams.backend = log
        try:
            reads, final = programs.run(ag, steps, init)
            stats = ag.statistics().as_dict()
        finally:
            rt.backend = rt.streams.backend = log._inner
    return log.ops, stats, reads, final


def same_run(ag, steps, init, strategy, seed):
    fast = logged_run(ag, steps, init, strategy, seed, True)
    general = logged_run(ag, steps, init, strategy, seed, False)
    assert fast[0] == general[0]
    fast_stats, general_stats = dict(fast[1]), dict(general[1])
    taken = fast_stats.pop("fast_launches")
    assert general_stats.pop("fast_launches") == 0
    assert fast_stats == general_stats
    for x, y in zip(fast[2] + fast[3], general[2] + general[3]):
        assert x.tolist() == y.tolist()
    return taken


@pytest.mark.parametrize("strategy", STRATEGIES)
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=programs.strategies())
def test_fast_path_does_what_the_general_path_does(strategy, steps):
    import asyncgpu as ag

    same_run(ag, steps, programs.initial(2), strategy, 3)


def test_a_loop_over_device_data_takes_the_fast_path():
    import asyncgpu as ag

    rnd = __import__("random").Random(4)
    taken = 0
    for _ in range(5):
        steps = [programs.Launch((("A0", "r"), ("B0", "rw")), 1.0)] * 3
        steps += programs.random_program(rnd, 30)
        taken += same_run(ag, steps, programs.initial(3), "random", 5)
    assert taken > 50


def fast_count(ag):
    return ag.statistics().fast_launches


def scale_kernel(ag):
    @ag.kernel(const=["x"])
    @cuda.jit
    def scale(x, y, a):
        i = cuda.grid(1)
        if i < y.size:
            y[i] = x[i] * a
    return scale


AXPY = r"""
extern "C" __global__ void axpy(const float* x, float* y, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] += a * x[i];
}"""


def axpy_twin(x, y, a, n):
    y[:n] += np.float32(a) * x[:n]


def test_host_current_inputs_go_through_the_general_path_and_its_copies(sim):
    ag = sim
    scale = scale_kernel(ag)
    x = ag.array(np.arange(8, dtype=np.float32))       # host-current: needs a copy in
    y = ag.zeros(8, np.float32)
    scale[1, 8](x, y, 2.0)
    assert fast_count(ag) == 0 and ag.statistics().copies_to_device >= 1
    scale[1, 8](y, x, 0.5)                               # both on the device now
    assert fast_count(ag) == 1
    assert x.numpy().tolist() == list(range(8))


def test_unusual_arguments_get_the_general_paths_answers(sim):
    ag = sim
    axpy = ag.cuda_kernel(AXPY, "axpy", sim=axpy_twin)
    x, y = ag.ones(8, np.float32), ag.zeros(8, np.float32)
    axpy[1, 8](x, y, 1.0, 8)
    axpy[1, 8](x, y, 1.0, 8)
    taken = fast_count(ag)
    assert taken >= 1
    with pytest.raises(ag.ArgumentValueError, match=r"axpy.*argument 3 'n'.*does not fit"):
        axpy[1, 8](x, y, 1.0, 2**40)
    with pytest.raises(ag.ArgumentError, match=r"argument 3 'n'.*got the bool"):
        axpy[1, 8](x, y, 1.0, True)
    with pytest.raises(ag.ArgumentError, match=r"argument 1 'y'.*float32 array.*float64"):
        axpy[1, 8](x, ag.zeros(8, np.float64), 1.0, 8)
    with pytest.raises(ag.ArgumentValueError, match=r"argument 1 'y'.*not C-contiguous"):
        axpy[1, 4](x, ag.zeros(16, np.float32)[::2], 1.0, 4)
    dead = ag.ones(8, np.float32)
    axpy[1, 8](dead, y, 1.0, 8)                         # (host-current: the general path)
    dead.free()
    with pytest.raises(ag.FreedArrayError):
        axpy[1, 8](dead, y, 1.0, 8)
    assert fast_count(ag) == taken
    axpy[1, 8](x, y, np.float32(1.0), np.int32(8))      # NumPy scalars: the general path
    assert fast_count(ag) == taken
    axpy[1, 8](x, y, 1, 8)                              # an int for a float: converted
    assert fast_count(ag) == taken + 1
    assert y.numpy().tolist() == [5.0] * 8


def test_numba_numbers_and_arrays(sim):
    ag = sim
    scale = scale_kernel(ag)
    x, y = ag.ones(8, np.float32), ag.zeros(8, np.float32)
    scale[1, 8](x, y, 2.0)
    scale[1, 8](x, y, 3)
    before = fast_count(ag)
    scale[1, 8](x, y, np.float32(4.0))                  # a NumPy number: the general path
    assert fast_count(ag) == before
    scale[1, 8](x, y, 5.0)
    assert fast_count(ag) == before + 1
    assert y.numpy().tolist() == [5.0] * 8
    with pytest.raises(ag.ArgumentError, match=r"scale.*argument 2 'a'"):
        scale[1, 8](x, y, "5")


def test_a_launch_from_inside_the_fast_path_is_refused():
    """Something that runs while the fast path schedules a node (a finalizer, say) and
    launches gets the general path's refusal; the outer launch completes."""
    import asyncgpu as ag
    from asyncgpu._runtime import current_runtime

    with ag.configure(backend="sim", sim_seed=9, sim_strategy="random"):
        scale = scale_kernel(ag)
        x, y, z = ag.ones(8, np.float32), ag.zeros(8, np.float32), ag.zeros(8, np.float32)
        scale[1, 8](x, y, 1.0)
        rt = current_runtime()
        refused = []

        class Reentrant(OperationLog):
            def launch(self, node, stream):
                if node.name == "scale" and not refused:
                    try:
                        scale[1, 8](x, z, 7.0)
                    except RuntimeError as exc:
                        refused.append(str(exc))
                return self._inner.launch(node, stream)

        proxy = Reentrant(rt.backend)
        rt.backend = rt.streams.backend = proxy
        try:
            before = fast_count(ag)
            scale[1, 8](x, y, 2.0)
            assert fast_count(ag) == before + 1
        finally:
            rt.backend = rt.streams.backend = proxy._inner
        assert refused and "launched from inside another asyncgpu operation" in refused[0]
        assert y.numpy().tolist() == [2.0] * 8
        assert z.numpy().tolist() == [0.0] * 8
        scale[1, 8](y, z, 2.0)
        assert z.numpy().tolist() == [4.0] * 8


@pytest.mark.parametrize("options", [{"execution": "sync"}, {"dependency": "no-const"},
                                     {"fast_launch": False}])
def test_options_that_need_the_general_path_turn_it_off(options):
    import asyncgpu as ag

    with ag.configure(backend="sim", sim_seed=1, **options):
        scale = scale_kernel(ag)
        x, y = ag.ones(8, np.float32), ag.zeros(8, np.float32)
        for _ in range(3):
            scale[1, 8](x, y, 2.0)
        assert fast_count(ag) == 0
        assert y.numpy().tolist() == [2.0] * 8


def test_a_trace_turns_it_off_while_it_runs(sim):
    ag = sim
    scale = scale_kernel(ag)
    x, y = ag.ones(8, np.float32), ag.zeros(8, np.float32)
    scale[1, 8](x, y, 2.0)
    with ag.trace() as t:
        scale[1, 8](x, y, 2.0)
        scale[1, 8](x, y, 2.0)
    assert fast_count(ag) == 0
    assert len(t.kernels) == 2
    scale[1, 8](x, y, 2.0)
    assert fast_count(ag) == 1
