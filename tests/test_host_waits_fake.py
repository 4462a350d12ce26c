"""A thread waiting on the host for the device (a read, a write of what the device still reads
or writes, a synchronize) does not hold back other threads' launches: the runtime waits for
the device without its lock, then does the access under it. Run on the
real ``cuda`` backend over the stand-in CuPy (``tools/fakecupy``), whose events complete only
when the test opens a gate."""

from __future__ import annotations

import pytest
from stand_in import run

PROGRAM = """
import threading
import numpy as np
import cupy
import asyncgpu as ag
from asyncgpu.core.backend import ForwardingBackend
from asyncgpu.runtime.current import current_runtime
from asyncgpu.runtime.library import dispatch
from benchmarks import replay

gate = threading.Event()
gate.set()
cupy.cuda.Event.done = property(lambda self: gate.is_set())
cupy.cuda.Event.synchronize = lambda self: gate.wait(30)
cupy.cuda.runtime.streamSynchronize = lambda stream: gate.wait(30)     # (a fetch's copy)
cupy.cuda.runtime.streamQuery = lambda stream: 0 if gate.is_set() else 600
cupy.cuda.runtime.deviceSynchronize = lambda: gate.wait(30)


class CupyCall(ForwardingBackend):
    # the backend, with a library call that does what CuPy's nonzero does on its stream: copy
    # the result's size to the host, which waits for the call's inputs
    def library_call(self, runtime, call, accesses, device=0):
        call.results = None
        return lambda stream: gate.wait(30)


with ag.configure(backend="cuda", devices={devices}):
    inc = ag.cuda_kernel(replay.INC, "inc")
    x = ag.zeros(1024, np.float32)
    y = ag.zeros(1024, np.float32)
    inc[1, 32](y, 32)
    ag.synchronize()
    {setup}
    gate.clear()                        # from here, the device "runs" until the gate opens
    inc[1, 32](x, 32)
    waiting = threading.Thread(target=lambda: {wait})
    waiting.start()
    waiting.join(0.5)
    assert waiting.is_alive()           # waiting for the device
    other = threading.Thread(target=lambda: inc[1, 32](y, 32))
    other.start()
    other.join(10)
    launched = not other.is_alive()
    gate.set()
    other.join()
    waiting.join()
    print("launched while the other thread waited:", launched)
"""


@pytest.mark.parametrize("wait", ["float(x[0])", "x.numpy()", "ag.synchronize()",
                                  "x.__setitem__(3, 5.0)",
                                  "x.__setitem__(Ellipsis, np.ones(1024, np.float32))"])
@pytest.mark.parametrize("devices", [1, 2])
def test_a_thread_waiting_for_the_device_lets_other_threads_launch(wait, devices):
    out = run(PROGRAM.format(wait=wait, devices=devices, setup=""))
    assert out.strip().splitlines()[-1] == "launched while the other thread waited: True"


def test_a_library_call_waiting_for_its_inputs_lets_other_threads_launch():
    """A call whose result's shape depends on the values (``nonzero``, ``unique``, ...) waits
    inside CuPy for its inputs' kernels; the runtime waits for them first without its lock."""
    out = run(PROGRAM.format(
        wait='dispatch("nonzero", (x,), {}, lambda b: np.nonzero)', devices=1,
        setup="current_runtime().backend = CupyCall(current_runtime().backend)"))
    assert out.strip().splitlines()[-1] == "launched while the other thread waited: True"

