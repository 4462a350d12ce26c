"""One-node graph lanes (``single_node_graphs``): the backend's switch, on the CPU.

``cudriver.DriverCalls.launch_kernel`` enqueues each kernel through its stream's one-node graph
while its ``single_node_graphs`` is on; the lanes themselves run against the real driver
(``tests/gpu/test_gpu_driver_calls.py``). What a user relies on here: the backend turns the
lanes on as configured, off while any capture is engaged (a recorded graph must hold the kernel
itself, never a graph launch), on again when the capture ends or fails to begin, and leaves
them off when configured so.
"""

from __future__ import annotations

import types

import pytest

from asyncgpu.backends.capture import CaptureError, CaptureTracker
from asyncgpu.backends.cuda.backend import CudaBackend
from asyncgpu.backends.cuda.calls import CudaCalls
from asyncgpu.core.config import Options


class CupyError(Exception):
    pass


class Calls(CudaCalls):
    """What the backend uses of a ``DriverCalls``: its switch, its calls (which log whether
    the switch was on when called)."""

    def __init__(self) -> None:
        self.single_node_graphs = False
        self.launched: list[bool] = []

    def launch_kernel(self, *args):
        self.launched.append(self.single_node_graphs)

    event_record = stream_wait = graph_launch = launch_kernel

    def event_done(self, event):
        self.launch_kernel(event)
        return True


class Stream:
    """A stream that only says what capture does (or refuses to begin one)."""

    def __init__(self, ptr, refuse=False):
        self.ptr, self.refuse = ptr, refuse

    def begin_capture(self, mode):
        if self.refuse:
            raise CupyError("capture refused")

    def end_capture(self):
        return "g"


def backend_over(calls, lanes):
    """The CUDA-free parts of a backend."""
    backend = CudaBackend.__new__(CudaBackend)
    backend.captures = CaptureTracker()
    backend.single_node_graphs = lanes
    backend.runtime = types.SimpleNamespace(streamCaptureModeRelaxed=1)
    backend.cupy = types.SimpleNamespace(cuda=types.SimpleNamespace(
        Event=lambda **kw: "done", driver=types.SimpleNamespace(launchKernel=len),
        runtime=types.SimpleNamespace(eventRecord=max, streamWaitEvent=min, getDevice=int,
                                      setDevice=abs, memcpyAsync=max, streamQuery=abs,
                                      streamSynchronize=abs, eventElapsedTime=min)))
    backend.use_calls(calls)
    return backend


def test_lanes_are_on_by_default():
    calls = Calls()
    backend_over(calls, Options().single_node_graphs)
    assert calls.single_node_graphs is True


def test_the_backend_turns_lanes_off_while_a_capture_is_engaged():
    calls = Calls()
    backend = backend_over(calls, True)
    origin = Stream(0xA)
    backend.begin_capture(origin)
    assert calls.single_node_graphs is False
    backend.calls.launch_kernel(0x10, 1, 1, 1, 32, 1, 1, 0, 0xA, 0x500)     # captured as a kernel
    assert backend.end_capture(origin).handle == "g"
    assert calls.single_node_graphs is True
    backend.calls.launch_kernel(0x10, 1, 1, 1, 32, 1, 1, 0, 0xA, 0x500)
    assert calls.launched == [False, True]


def test_a_capture_that_fails_to_begin_turns_lanes_back_on():
    calls = Calls()
    backend = backend_over(calls, True)
    with pytest.raises(CaptureError, match="capture refused"):
        backend.begin_capture(Stream(0xB, refuse=True))
    assert calls.single_node_graphs is True and not backend.captures.engaged


def test_lanes_configured_off_stay_off():
    calls = Calls()
    backend = backend_over(calls, True)
    backend.single_node_graphs = False          # (configure(single_node_graphs=False))
    backend.use_calls(calls)
    assert calls.single_node_graphs is False
    origin = Stream(0xA)
    backend.begin_capture(origin)
    backend.end_capture(origin)
    assert calls.single_node_graphs is False


def test_without_driver_calls_there_is_no_switch_to_turn():
    backend = backend_over(None, True)          # CuPy's calls: kernels go through cuLaunchKernel
    origin = Stream(0xA)
    backend.begin_capture(origin)
    assert backend.end_capture(origin).handle == "g"
    assert backend.driver is None


def test_the_launch_path_tells_the_capture_what_it_records_only_while_one_is_engaged():
    """The backend's record, wait, query and launch reach the capture tracker exactly while a
    capture is engaged (through begin_capture, until end_capture), however it ended."""
    calls = Calls()
    backend = backend_over(calls, True)
    origin, event = Stream(0xA), Stream(0xE)        # (an event needs only its .ptr here)
    backend.record(event, origin)               # no capture: no check, one CUDA call
    assert backend.event_done(event) is True
    backend.begin_capture(origin)
    backend.record(event, origin)               # recorded in the capture ...
    with pytest.raises(CaptureError, match="event query of .* recorded in the capture"):
        backend.event_done(event)               # ... so querying it invalidates the capture
    with pytest.raises(CaptureError, match="invalidated"):
        backend.end_capture(origin)
    assert not backend.captures.engaged and calls.single_node_graphs is True
    backend.record(event, origin)               # engaged no more: the tracker is not asked
    assert backend.event_done(event) is True
    assert len(calls.launched) == 5     # the CUDA calls made (the refused query made none)
