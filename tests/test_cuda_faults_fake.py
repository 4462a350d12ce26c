"""The cuda backend's device-fault reporting, run on the CPU with fake CUDA errors.

A sticky fault (illegal address and friends) surfaces at a later sync; the backend turns it into
one ``KernelFault`` naming the latest launches, and every later call raises the same message
without touching CUDA. The real thing runs in a spawned interpreter in
tests/gpu/test_gpu_faults.py.
"""

from __future__ import annotations

import pytest
from stand_in import run

from asyncgpu import KernelFault
from asyncgpu.core.errors import LaunchError
from asyncgpu.core.dag import Node
from asyncgpu.core.streams import StreamState
from asyncgpu.backends.cuda import backend as _cuda
from asyncgpu.backends.cuda import faults
from asyncgpu.backends.cuda.calls import CudaCalls


class FakeCudaError(Exception):
    def __init__(self, status, text):
        super().__init__(text)
        self.status = status


class FakeRuntime:
    def __init__(self):
        self.calls = 0
        self.error = None

    def deviceSynchronize(self):
        self.calls += 1
        if self.error is not None:
            raise self.error

    def memcpyAsync(self, dst, src, nbytes, kind, stream):
        self.calls += 1
        if self.error is not None:
            raise self.error

    def streamSynchronize(self, stream):
        self.calls += 1
        if self.error is not None:
            raise self.error

    def setDevice(self, device):
        self.calls += 1


class FakeStream:
    ptr = 1


class FakeBuffer:
    ptr, host_ptr = 1 << 20, 1 << 30


class FakeEvent:
    ptr = 2

    def __init__(self, error=None):
        self.error = error

    def synchronize(self):
        if self.error is not None:
            raise self.error

    @property
    def done(self):
        if self.error is not None:
            raise self.error
        return True


class Calls(CudaCalls):
    """CuPy's calls as far as these tests go: the named ones (``"record"``, ``"wait"``) raise
    ``error``."""

    def __init__(self, error=None, failing=(), runtime=None):
        self.error, self.failing, self.runtime = error, failing, runtime

    def event_record(self, event, stream):
        if "record" in self.failing:
            raise self.error

    def stream_wait(self, stream, event, flags):
        if "wait" in self.failing:
            raise self.error

    def event_done(self, event):
        return event.done

    def memcpy_async(self, dst, src, nbytes, kind, stream):
        self.runtime.memcpyAsync(dst, src, nbytes, kind, stream)

    def stream_sync(self, stream):
        self.runtime.streamSynchronize(stream)


class FakeLaunch:
    """A launch object that raises the given errors, one per call, then succeeds."""

    def __init__(self, *errors):
        self.errors = list(errors)
        self.calls = 0

    def __call__(self, stream):
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)


def backend():
    """A backend without CUDA (made as an extension type allows: no ``__init__``) that has
    launched three kernels."""
    b = _cuda.CudaBackend.__new__(_cuda.CudaBackend)
    b.forget_launches()
    b.fault = None
    b.runtime = FakeRuntime()
    b.captures = _cuda.CaptureTracker()
    b._capturing = False
    b._graphs_in_flight = set()
    b._fetch_stream = FakeStream()
    b.calls = Calls(runtime=b.runtime)
    for i, name in enumerate(["fill", "scale", "oob_store"]):
        n = Node("kernel", name, f"prog.py:{10 + i}", [])
        n.stream = StreamState(i % 2, None)
        n.launch = FakeLaunch()
        b.launch(n, FakeStream())
    return b


ILLEGAL = FakeCudaError(700, "cudaErrorIllegalAddress: an illegal memory access was encountered")


def test_sticky_fault_names_the_latest_launches_and_stays():
    b = backend()
    with pytest.raises(KernelFault, match=r"the GPU reported a fault \(cudaErrorIllegalAddress.*"
                       r"Latest launches, newest first: kernel 'oob_store' at prog.py:12 on "
                       r"stream 0, kernel 'scale' at prog.py:11 on stream 1, kernel 'fill'.*"
                       r"restart it"):
        b.host_wait(FakeEvent(ILLEGAL))
    calls = b.runtime.calls
    for call in (b.synchronize, lambda: b.host_access([], "host read of x"),
                 lambda: b.alloc(64),
                 lambda: b.fetch_to_host(FakeBuffer(), 0, 4, "x to host", [])):
        with pytest.raises(KernelFault, match=r"kernel 'oob_store'"):
            call()
    assert b.runtime.calls == calls          # no new CUDA calls after the fault


def test_fault_reported_by_a_query_or_a_synchronize():
    b = backend()
    with pytest.raises(KernelFault):
        b.event_done(FakeEvent(FakeCudaError(719, "cudaErrorLaunchFailure")))
    b = backend()
    b.runtime.error = FakeCudaError(0, "CUDA_ERROR_INVALID_ADDRESS_SPACE: not supported")
    with pytest.raises(KernelFault, match="INVALID_ADDRESS_SPACE"):
        b.synchronize()


def test_fault_reported_by_a_host_reads_fetch():
    b = backend()
    b.runtime.error = ILLEGAL
    with pytest.raises(KernelFault, match=r"kernel 'oob_store'"):
        b.fetch_to_host(FakeBuffer(), 0, 4, "float32[8] to host", [])
    assert b.runtime.calls == 2              # the copy, and the synchronize after it regardless


def test_other_errors_pass_through_unchanged():
    b = backend()
    err = FakeCudaError(2, "cudaErrorMemoryAllocation")
    with pytest.raises(FakeCudaError):
        b.host_wait(FakeEvent(err))
    assert b.fault is None


def test_a_fault_seen_by_a_record_or_a_wait_is_a_kernel_fault_raised_from_it():
    b = backend()
    b.calls = Calls(ILLEGAL, {"record"})
    with pytest.raises(KernelFault, match=r"kernel 'oob_store'") as info:
        b.record(FakeEvent(), FakeStream())
    assert info.value.__context__ is ILLEGAL       # raised while handling the CUDA error
    b = backend()
    b.calls = Calls(ILLEGAL, {"wait"})
    with pytest.raises(KernelFault, match=r"kernel 'oob_store'"):
        b.wait(FakeStream(), FakeEvent())


def test_other_errors_of_a_record_or_a_wait_pass_through_unchanged():
    err = FakeCudaError(2, "cudaErrorInvalidValue")
    b = backend()
    b.calls = Calls(err, {"record", "wait"})
    for call in (lambda: b.record(FakeEvent(), FakeStream()),
                 lambda: b.wait(FakeStream(), FakeEvent())):
        with pytest.raises(FakeCudaError) as info:
            call()
        assert info.value is err
    assert b.fault is None


def test_a_refused_launch_is_a_launch_error_and_a_missing_context_launches_again():
    b = backend()
    b._driver_error = FakeCudaError
    b.device = 0
    node = Node("kernel", "k", "prog.py:1", [])
    node.launch = FakeLaunch(FakeCudaError(1, "CUDA_ERROR_INVALID_VALUE"))
    with pytest.raises(LaunchError, match=r"kernel 'k' at prog.py:1: the driver refused"):
        b.launch(node, FakeStream())
    assert b.recent_launches()[0] is node
    node.launch = FakeLaunch(FakeCudaError(201, "CUDA_ERROR_INVALID_CONTEXT"))
    b.launch(node, FakeStream())                   # bound the device's context, launched again
    assert node.launch.calls == 2
    node.launch = FakeLaunch(ValueError("not a driver error"))
    with pytest.raises(ValueError, match="not a driver error"):
        b.launch(node, FakeStream())
    node.launch = FakeLaunch(ILLEGAL)
    with pytest.raises(KernelFault, match=r"kernel 'k' at prog.py:1"):
        b.launch(node, FakeStream())


def test_a_fault_names_the_latest_launches_only():
    b = backend()
    nodes = []
    for i in range(faults.RECENT_LAUNCHES + 5):
        n = Node("kernel", f"k{i}", f"prog.py:{i}", [])
        n.stream = StreamState(0, None)
        n.launch = FakeLaunch()
        b.launch(n, FakeStream())
        nodes.append(n)
    assert all(n.launch.calls == 1 for n in nodes)
    assert b.recent_launches() == nodes[::-1][:faults.RECENT_LAUNCHES]
    with pytest.raises(KernelFault, match=r"newest first: kernel 'k20' at prog.py:20 on stream "
                       r"0, kernel 'k19'.*kernel 'k5' at prog.py:5 on stream 0\. The CUDA"):
        b.host_wait(FakeEvent(ILLEGAL))


@pytest.mark.parametrize("status, name", [
    (700, "CUDA_ERROR_ILLEGAL_ADDRESS"), (710, "CUDA_ERROR_ASSERT"),
    (714, "CUDA_ERROR_HARDWARE_STACK_ERROR"), (715, "CUDA_ERROR_ILLEGAL_INSTRUCTION"),
    (716, "CUDA_ERROR_MISALIGNED_ADDRESS"), (717, "CUDA_ERROR_INVALID_ADDRESS_SPACE"),
    (718, "CUDA_ERROR_INVALID_PC"), (719, "CUDA_ERROR_LAUNCH_FAILED"),
])
def test_driver_errors_of_the_direct_calls_are_classified_by_status_or_by_name(status, name):
    """The direct driver calls (``cudriver.DriverCalls``) raise driver errors, named as the
    driver names them: each sticky one is a fault by its status and by its text alone."""
    text = f"{name}: the GPU faulted"
    assert faults.is_sticky(FakeCudaError(status, text))
    assert faults.is_sticky(RuntimeError(text))
    b = backend()
    b.calls = Calls(FakeCudaError(status, text), {"record"})
    with pytest.raises(KernelFault, match=name):
        b.record(FakeEvent(), FakeStream())
    assert not faults.is_sticky(FakeCudaError(1, "CUDA_ERROR_INVALID_VALUE: invalid argument"))


FREE_AFTER_A_FAULT = """
import os
import numpy as np
import cupy
import asyncgpu as ag
from benchmarks import replay


def illegal(*args):
    raise cupy.cuda.runtime.CUDARuntimeError("cudaErrorIllegalAddress: an illegal memory access")


ag.configure(backend="cuda")
inc = ag.cuda_kernel(replay.INC, "inc")
b = ag.zeros(1024, np.float32)
inc[1, 32](b, 32)
cupy.cuda.Event.done = property(illegal)         # (the device faulted meanwhile)
cupy.cuda.Event.synchronize = illegal
cupy.cuda.runtime.deviceSynchronize = illegal
try:
    b.free()
except ag.KernelFault as fault:
    print("raised:", "the GPU reported a fault" in str(fault))
print("freed:", b._alloc.freed, b._alloc.buffer is None)
os._exit(0)     # (the context is lost: no exit-time synchronize)
"""


def test_free_that_meets_a_sticky_fault_frees_the_array_then_raises_it():
    """On the real cuda backend over the stand-in CuPy (``tools/fakecupy``): the free's wait
    meets a sticky fault; the array is freed, then the fault raised (it stayed allocated)."""
    out = run(FREE_AFTER_A_FAULT)
    assert out.strip().splitlines()[-2:] == ["raised: True", "freed: True True"]
