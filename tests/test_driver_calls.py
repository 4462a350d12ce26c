"""Which callables make a launch's CUDA calls (``asyncgpu/backends/cuda/driver.py``).

What a user relies on: with ``direct_driver`` the backend makes its CUDA calls through
``cudriver.DriverCalls`` (straight into the driver, raising CuPy's ``CUDADriverError``) where
that applies, and CuPy's own callables where it does not (the module not built, no CUDA
driver, CuPy's calls replaced by Python functions); either way the backend holds one
``CudaCalls`` that every launch calls. ``DriverCalls`` itself needs a GPU:
``tests/gpu/test_gpu_driver_calls.py``.
"""

from __future__ import annotations

import types

import pytest

from asyncgpu.backends.capture import CaptureTracker
from asyncgpu.backends.cuda import driver as _driver
from asyncgpu.backends.cuda.backend import CudaBackend
from asyncgpu.backends.cuda.calls import CudaCalls


class CupyDriverError(Exception):
    def __init__(self, status):
        super().__init__(f"CUDA error {status}")
        self.status = status


def compiled_cupy():
    """A CuPy whose calls are compiled callables (builtins stand in for them)."""
    return types.SimpleNamespace(cuda=types.SimpleNamespace(
        driver=types.SimpleNamespace(launchKernel=len, CUDADriverError=CupyDriverError),
        runtime=types.SimpleNamespace(eventRecord=max, streamWaitEvent=min, getDevice=int,
                                      setDevice=abs, memcpyAsync=max, streamQuery=abs,
                                      streamSynchronize=abs, eventElapsedTime=min)))


class FakeDriverCalls(CudaCalls):
    """What ``cudriver.DriverCalls`` offers, logging the calls."""

    made: list = []

    def __init__(self, cupy):
        super().__init__(cupy)
        self.error = cupy.cuda.driver.CUDADriverError
        self.single_node_graphs = False
        self.released = 0
        self.log: list = []
        FakeDriverCalls.made.append(self)

    def launch_kernel(self, *args):
        self.log.append(("launch", *args))

    def event_record(self, event, stream):
        self.log.append(("record", event, stream))

    def stream_wait(self, stream, event, flags):
        self.log.append(("wait", stream, event, flags))

    def event_done(self, event):
        self.log.append(("query", event.ptr))
        return True

    def graph_launch(self, graph, stream):
        self.log.append(("graph", graph, stream))

    def release_lanes(self):
        self.released += 1

    def grow_lanes(self):
        self.log.append(("grow",))


@pytest.fixture
def built(monkeypatch):
    """``driver.py`` finds a compiled module whose ``DriverCalls`` is :class:`FakeDriverCalls`."""
    FakeDriverCalls.made = []
    module = types.SimpleNamespace(DriverCalls=FakeDriverCalls)
    monkeypatch.setattr(_driver, "compiled_driver", lambda: module)
    return module


def logging_cupy(log, device=0, stream_status=0):
    """A CuPy whose calls log their arguments; the thread's current device starts at
    ``device``; a stream query answers ``stream_status`` (0: done, 600: not ready)."""
    current = [device]

    def logged(name):
        return lambda *args: log.append((name, *args))

    def set_device(n):
        log.append(("set device", n))
        current[0] = n
    return types.SimpleNamespace(cuda=types.SimpleNamespace(
        driver=types.SimpleNamespace(launchKernel=logged("launch")),
        runtime=types.SimpleNamespace(eventRecord=logged("record"),
                                      streamWaitEvent=logged("wait"),
                                      memcpyAsync=logged("copy"),
                                      streamQuery=lambda s: log.append(("query", s))
                                      or stream_status,
                                      streamSynchronize=logged("synchronize"),
                                      eventElapsedTime=logged("elapsed"),
                                      getDevice=lambda: current[0], setDevice=set_device)))


def test_cupys_calls_take_cupys_arguments():
    log = []
    calls = CudaCalls(logging_cupy(log))
    assert calls.launches_kernels() is True
    calls.launch_kernel(0x10, 2, 1, 1, 256, 1, 1, 64, 0xA, 0x500)
    calls.event_record(0x20, 0xA)
    calls.stream_wait(0xB, 0x20, 0)
    assert log == [("launch", 0x10, 2, 1, 1, 256, 1, 1, 64, 0xA, 0, 0x500),
                   ("record", 0x20, 0xA), ("wait", 0xB, 0x20, 0)]
    assert calls.event_done(types.SimpleNamespace(done=True)) is True
    assert calls.event_done(types.SimpleNamespace(done=False)) is False
    launched = []
    calls.graph_launch(types.SimpleNamespace(launch=launched.append), "stream")
    assert launched == ["stream"]


def test_a_stream_wait_queries_first_and_waits_only_for_unfinished_work():
    log = []
    calls = CudaCalls(logging_cupy(log))
    calls.memcpy_async(0x100, 0x200, 64, 2, 0xA)
    calls.stream_sync(0xA)                  # done: the query is the whole wait
    assert log == [("copy", 0x100, 0x200, 64, 2, 0xA), ("query", 0xA)]
    log.clear()
    calls = CudaCalls(logging_cupy(log, stream_status=600))
    calls.stream_sync(0xA)
    assert log == [("query", 0xA), ("synchronize", 0xA)]


def test_the_calls_make_their_own_device_current_and_give_the_thread_its_device_back():
    log = []
    cupy = logging_cupy(log, device=2)
    calls = CudaCalls(cupy)                 # made with device 2 current: its device
    cupy.cuda.runtime.setDevice(0)          # the program's device, meanwhile
    previous = calls.enter()
    assert cupy.cuda.runtime.getDevice() == 2
    calls.leave(previous)
    assert cupy.cuda.runtime.getDevice() == 0
    assert log == [("set device", 0), ("set device", 2), ("set device", 0)]
    cupy.cuda.runtime.setDevice(2)
    log.clear()
    calls.leave(calls.enter())              # already current: no call at all
    assert log == []


def test_a_cupy_without_launch_kernel_keeps_its_own_launches():
    cupy = compiled_cupy()
    del cupy.cuda.driver.launchKernel
    assert CudaCalls(cupy).launches_kernels() is False


def test_driver_calls_where_the_module_is_built(built):
    calls = _driver.driver_calls(compiled_cupy())
    assert isinstance(calls, FakeDriverCalls)
    assert calls.error is CupyDriverError       # a refused call raises CuPy's driver error


def test_no_driver_calls_where_the_module_is_not_built(monkeypatch):
    monkeypatch.setattr(_driver, "compiled_driver", lambda: None)
    assert _driver.driver_calls(compiled_cupy()) is None


@pytest.mark.parametrize("compiled", [True, False])
def test_a_compiled_launch_path_without_the_driver_calls_says_so_once(monkeypatch, caplog,
                                                                      compiled):
    # (a build that compiled everything but the driver module, or a cuda-bindings at run time
    # other than the build's: every launch then pays for CuPy's calls, which the user must see)
    monkeypatch.setattr(_driver, "compiled_driver", lambda: None)
    monkeypatch.setattr(_driver, "is_compiled", lambda: compiled)
    monkeypatch.setattr(_driver, "_said_missing", False)
    with caplog.at_level("WARNING", logger="asyncgpu"):
        assert _driver.driver_calls(compiled_cupy()) is None
        assert _driver.driver_calls(compiled_cupy()) is None
    said = [r.getMessage() for r in caplog.records if "driver calls are not in use" in
            r.getMessage()]
    if not compiled:        # (the uncompiled launch path's own line says it all)
        assert said == []
        return
    assert len(said) == 1 and "not built" in said[0] and "asyncgpu info" in said[0]


def test_asyncgpu_info_says_why_the_driver_calls_are_not_in_use():
    reason = _driver.missing_reason()
    if _driver.compiled_driver() is not None:
        assert reason is None
    else:
        assert "not built at install" in reason or "does not load" in reason


def test_no_driver_calls_over_cupy_calls_that_are_python_functions(built):
    def python_function(*args):
        return None

    stand_in = types.SimpleNamespace(cuda=types.SimpleNamespace(
        driver=types.SimpleNamespace(launchKernel=python_function),
        runtime=types.SimpleNamespace(eventRecord=python_function,
                                      streamWaitEvent=python_function, getDevice=int,
                                      setDevice=abs)))
    assert _driver.driver_calls(stand_in) is None       # not ours to go around
    assert FakeDriverCalls.made == []


def test_no_driver_calls_where_the_driver_cannot_be_reached(built, monkeypatch, caplog):
    def no_driver(cupy):
        raise RuntimeError("libcuda.so.1: cannot open shared object file")

    monkeypatch.setattr(built, "DriverCalls", no_driver)
    with caplog.at_level("INFO", logger="asyncgpu"):
        assert _driver.driver_calls(compiled_cupy()) is None
    assert "no CUDA driver for direct calls" in caplog.text


def test_the_compiled_module_is_none_or_offers_the_driver_calls():
    module = _driver.compiled_driver()
    if module is None:
        pytest.skip("asyncgpu.backends.cuda.cudriver is not built")
    assert issubclass(module.DriverCalls, CudaCalls)
    for name in ("launch_kernel", "event_record", "stream_wait", "event_done", "memcpy_async",
                 "stream_sync", "graph_launch", "release_lanes", "grow_lanes"):
        assert callable(getattr(module.DriverCalls, name))
    assert module.LANES_MAX > 0 and issubclass(module.CUDADriverError, RuntimeError)


def bare_backend(calls=None, lanes=True):
    """The CUDA-free parts of a backend, with a stand-in CuPy whose captures only say so."""
    backend = CudaBackend.__new__(CudaBackend)
    backend.captures = CaptureTracker()
    backend.single_node_graphs = lanes
    backend.cupy = compiled_cupy()
    backend.runtime = types.SimpleNamespace(streamCaptureModeRelaxed=1)
    backend._green = None       # (no SM partitions)
    backend.use_calls(calls)
    return backend


def test_a_device_wide_synchronize_lets_the_driver_make_lanes_again(built):
    calls = _driver.driver_calls(compiled_cupy())
    backend = bare_backend(calls)
    synced = []
    backend.runtime.deviceSynchronize = lambda: synced.append(True)
    backend.fault = None
    backend._graphs_in_flight = set()
    backend.synchronize()
    assert synced == [True] and calls.log == [("grow",)]


def test_the_backend_keeps_the_calls_it_makes_every_launch_with(built):
    calls = _driver.driver_calls(compiled_cupy())
    backend = bare_backend(calls)
    assert backend.driver is calls and backend.calls is calls
    backend.record(types.SimpleNamespace(ptr=0x10), types.SimpleNamespace(ptr=0x20))
    backend.wait(types.SimpleNamespace(ptr=0x20), types.SimpleNamespace(ptr=0x10))
    assert backend.event_done(types.SimpleNamespace(ptr=0x10)) is True
    assert calls.log == [("record", 0x10, 0x20), ("wait", 0x20, 0x10, 0), ("query", 0x10)]
    backend.use_calls(None)                     # (configure(direct_driver=False))
    assert backend.driver is None and type(backend.calls) is CudaCalls


def test_closing_the_backend_releases_the_one_node_graphs(built):
    calls = _driver.driver_calls(compiled_cupy())
    backend = bare_backend(calls)
    backend.pool = types.SimpleNamespace(free_all_blocks=lambda: None)
    backend.close()
    assert calls.released == 1
    plain = bare_backend(None)                  # (no driver calls: nothing to release)
    plain.pool = backend.pool
    plain.close()
