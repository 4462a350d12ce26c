"""``DriverCalls`` (``asyncgpu/csrc/driver.c``): the CUDA calls of a launch made straight into
the driver, with C functions (ctypes callbacks) standing in for the driver's entry points.

What a user relies on: each call reaches the driver function with the arguments CuPy's call
would pass; a call the driver refuses is made again through CuPy's callable, so the exception
(or the repaired success) is CuPy's; and where direct calls do not apply the backend keeps
CuPy's callables.
"""

from __future__ import annotations

import ctypes
import types

import pytest

from asyncgpu.core import compiled as _compiled
from asyncgpu.backends.cuda import driver as _driver

pytestmark = pytest.mark.skipif(_compiled.speedups is None,
                                reason="asyncgpu._speedups is not built")

P, U, I = ctypes.c_void_p, ctypes.c_uint, ctypes.c_int
NOT_READY = 600


class Driver:
    """Five C entry points that log their arguments and return ``status[name]``."""

    def __init__(self) -> None:
        self.log: list[tuple] = []
        self.status = {"launch": 0, "record": 0, "wait": 0, "query": 0, "graph": 0}

        def entry(name):
            def call(*args):
                self.log.append((name, *[0 if a is None else a for a in args]))
                return self.status[name]
            return call

        self.entries = [
            ctypes.CFUNCTYPE(I, P, U, U, U, U, U, U, U, P, P, P)(entry("launch")),
            ctypes.CFUNCTYPE(I, P, P)(entry("record")),
            ctypes.CFUNCTYPE(I, P, P, U)(entry("wait")),
            ctypes.CFUNCTYPE(I, P)(entry("query")),
            ctypes.CFUNCTYPE(I, P, P)(entry("graph")),
        ]
        self.addresses = tuple(ctypes.cast(e, ctypes.c_void_p).value for e in self.entries)


class CupyError(Exception):
    pass


def fallback(log: list, name: str, fails: bool = False):
    def call(*args):
        log.append(("cupy " + name, *args))
        if fails:
            raise CupyError(f"{name} refused")
        return f"{name} by cupy"
    return call


@pytest.fixture
def env():
    drv = Driver()
    cupy_log: list = []
    calls = _compiled.speedups.DriverCalls(
        drv.addresses, fallback(cupy_log, "launch"), fallback(cupy_log, "record"),
        fallback(cupy_log, "wait", fails=True))
    return drv, cupy_log, calls


LAUNCH = (0x1000, 4, 2, 1, 128, 1, 1, 256, 0x2000, 0, 0x3000)


def test_each_call_reaches_the_driver_with_cupys_arguments(env):
    drv, cupy_log, calls = env
    assert calls.launchKernel(*LAUNCH) is None
    assert calls.eventRecord(0x10, 0x2000) is None
    assert calls.streamWaitEvent(0x2000, 0x10, 0) is None
    assert drv.log == [("launch", *LAUNCH), ("record", 0x10, 0x2000),
                       ("wait", 0x2000, 0x10, 0)]
    assert cupy_log == []


def test_a_refused_call_is_made_again_through_cupy(env):
    drv, cupy_log, calls = env
    drv.status.update(launch=201, record=400, wait=700)
    assert calls.launchKernel(*LAUNCH) == "launch by cupy"      # (cupy repaired the cause)
    assert calls.eventRecord(0x10, 0x2000) == "record by cupy"
    with pytest.raises(CupyError, match="wait refused"):        # cupy's own exception
        calls.streamWaitEvent(0x2000, 0x10, 0)
    assert [c[0] for c in drv.log] == ["launch", "record", "wait"]
    assert cupy_log == [("cupy launch", *LAUNCH), ("cupy record", 0x10, 0x2000),
                        ("cupy wait", 0x2000, 0x10, 0)]


@pytest.mark.parametrize("args", [
    (0x1000, 4.0, 2, 1, 128, 1, 1, 256, 0x2000, 0, 0x3000),    # a float dimension
    (0x1000, 1 << 32, 2, 1, 128, 1, 1, 256, 0x2000, 0, 0x3000),  # beyond unsigned int
    (0x1000, -1, 2, 1, 128, 1, 1, 256, 0x2000, 0, 0x3000),
    ("f", 4, 2, 1, 128, 1, 1, 256, 0x2000, 0, 0x3000),
    LAUNCH[:10],
])
def test_arguments_the_driver_cannot_take_go_to_cupy(env, args):
    drv, cupy_log, calls = env
    assert calls.launchKernel(*args) == "launch by cupy"
    assert drv.log == [] and cupy_log == [("cupy launch", *args)]


def test_event_done_queries_the_event_and_asks_cupy_about_any_error(env):
    drv, _, calls = env

    class Event:
        ptr = 0x10
        done = "cupy's answer"

    assert calls.eventDone(Event()) is True
    drv.status["query"] = NOT_READY
    assert calls.eventDone(Event()) is False
    drv.status["query"] = 700
    assert calls.eventDone(Event()) is True          # CuPy's query decides (truthy here)

    class Broken(Event):
        @property
        def done(self):
            raise CupyError("illegal address")

    with pytest.raises(CupyError, match="illegal address"):
        calls.eventDone(Broken())
    assert drv.log == [("query", 0x10)] * 4


def test_graph_launch_uses_the_executable_graph_or_else_cupys_launch(env):
    drv, _, calls = env
    launched = []

    class Graph:
        def __init__(self, exec_):
            self.graphExec = exec_

        def launch(self, stream):
            launched.append((self.graphExec, stream.ptr))

    stream = types.SimpleNamespace(ptr=0x2000)
    calls.graphLaunch(Graph(0x50), stream)
    assert drv.log == [("graph", 0x50, 0x2000)] and launched == []
    calls.graphLaunch(Graph(0), stream)               # not instantiated: CuPy instantiates
    drv.status["graph"] = 400
    calls.graphLaunch(Graph(0x51), stream)            # refused: CuPy's launch decides
    assert launched == [(0, 0x2000), (0x51, 0x2000)]
    assert drv.log == [("graph", 0x50, 0x2000), ("graph", 0x51, 0x2000)]

    class NotCupys:
        def launch(self, stream):
            launched.append("other")

    calls.graphLaunch(NotCupys(), stream)
    assert launched[-1] == "other"


def test_a_missing_entry_point_leaves_that_call_to_cupy():
    drv = Driver()
    log: list = []
    calls = _compiled.speedups.DriverCalls((drv.addresses[0], 0, 0, 0, 0),
                                           fallback(log, "launch"), fallback(log, "record"),
                                           fallback(log, "wait"))
    calls.launchKernel(*LAUNCH)
    calls.eventRecord(1, 2)
    assert [c[0] for c in drv.log] == ["launch"] and log == [("cupy record", 1, 2)]


def test_bad_construction_is_refused():
    with pytest.raises(ValueError, match="five addresses"):
        _compiled.speedups.DriverCalls((1, 2), print, print, print)
    with pytest.raises(TypeError, match="ints"):
        _compiled.speedups.DriverCalls((1, 2, 3, 4, "x"), print, print, print)


def test_direct_calls_apply_only_to_cupys_compiled_calls(monkeypatch):
    def python_function(*args):
        return None

    stand_in = types.SimpleNamespace(cuda=types.SimpleNamespace(
        driver=types.SimpleNamespace(launchKernel=python_function),
        runtime=types.SimpleNamespace(eventRecord=python_function,
                                      streamWaitEvent=python_function)))
    assert _driver.driver_calls(stand_in) is None
    # CuPy's calls are compiled callables; without a driver library there is nothing to call
    compiled = types.SimpleNamespace(cuda=types.SimpleNamespace(
        driver=types.SimpleNamespace(launchKernel=len),
        runtime=types.SimpleNamespace(eventRecord=len, streamWaitEvent=len)))
    monkeypatch.setattr(_driver, "_LIBRARIES", ("libasyncgpu-no-such-driver.so",))
    assert _driver.driver_calls(compiled) is None
    calls = _driver.cuda_calls(compiled)
    assert calls.launch_kernel is len and calls.event_record is len
    assert calls.event_done(types.SimpleNamespace(done=True)) is True


def test_entry_points_are_found_by_name_or_not_at_all():
    drv = Driver()
    library = types.SimpleNamespace(**dict(zip(_driver.ENTRY_POINTS, drv.entries)))
    assert _driver.entry_points(library) == drv.addresses
    del library.cuGraphLaunch
    assert _driver.entry_points(library) is None


def test_a_found_driver_library_gives_driver_calls_over_its_entry_points(monkeypatch):
    drv = Driver()
    library = types.SimpleNamespace(**dict(zip(_driver.ENTRY_POINTS, drv.entries)))
    monkeypatch.setattr(_driver.ctypes, "CDLL", lambda name: library)
    log: list = []
    compiled = types.SimpleNamespace(cuda=types.SimpleNamespace(
        driver=types.SimpleNamespace(launchKernel=len),
        runtime=types.SimpleNamespace(eventRecord=len, streamWaitEvent=len)))
    calls = _driver.driver_calls(compiled)
    assert isinstance(calls, _compiled.speedups.DriverCalls)
    _driver.cuda_calls(compiled, calls).event_record(0x10, 0x20)
    assert drv.log == [("record", 0x10, 0x20)] and log == []
