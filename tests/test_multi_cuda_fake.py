"""The ``cuda`` backend over several devices, run over the stand-in CuPy (``tools/fakecupy``):
its routing, the device it leaves current, and the happens-before checker over it. The
results of kernels are the GPU tests' (tests/gpu/test_gpu_multi_device.py)."""

from __future__ import annotations

import pytest
from stand_in import run

PROGRAM = """
import numpy as np
import cupy
import asyncgpu as ag
from benchmarks import replay

with ag.configure(backend="cuda", devices=2, debug_hb={debug_hb}):
    inc = ag.cuda_kernel(replay.INC, "inc")
    xs = []
    for c in range(4):
        with ag.device(c % 2):
            xs.append(ag.zeros(1024, np.float32))
    cupy.cuda.runtime.setDevice(3)          # the program's own CuPy device
    for i in range(16):
        inc[1, 32](xs[i % 4], 32)
        assert cupy.cuda.runtime.getDevice() == 3, i
    float(xs[1][0])
    assert cupy.cuda.runtime.getDevice() == 3
    ag.synchronize()
    print(sorted(ag.statistics().placed.items()))
"""


def test_launches_on_several_gpus_leave_the_programs_device_current():
    assert run(PROGRAM.format(debug_hb=False)).split("\n")[-2] == "[(0, 8), (1, 8)]"


def test_the_checker_follows_launches_on_several_gpus():
    assert run(PROGRAM.format(debug_hb=True)).split("\n")[-2] == "[(0, 8), (1, 8)]"


STRESS = """
import numpy as np
import cupy
import asyncgpu as ag
from benchmarks import replay
from asyncgpu.runtime.current import current_runtime

with ag.configure(backend="cuda", devices=2, stress=True, stress_seed=3, debug_hb=True):
    inc = ag.cuda_kernel(replay.INC, "inc")
    xs = []
    for c in range(4):
        with ag.device(c % 2):
            xs.append(ag.zeros(1024, np.float32))
    for i in range(40):
        inc[1, 32](xs[i % 4], 32)
    ag.synchronize()
    spins = [(current, device) for k, current, device in cupy.launched]
    assert all(current == device for current, device in spins), spins
    print(current_runtime().backend.delays, len(spins), sorted({d for _, d in spins}))
"""


def test_stress_mode_delays_nodes_on_every_gpu_on_the_nodes_own_gpu():
    delays, spins, devices = run(STRESS).split("\n")[-2].split(" ", 2)
    assert int(delays) == int(spins) > 0
    assert devices == "[0, 1]"


IMPORT = """
import types
import numpy as np
import cupy
import asyncgpu as ag
from benchmarks import replay
from asyncgpu.runtime.current import current_runtime

recorded = []
cupy.cuda.runtime.eventRecord = lambda event, stream: recorded.append(
    (cupy.cuda.runtime.getDevice(), stream))
cupy.cuda.runtime.pointerGetAttributes = lambda ptr: types.SimpleNamespace(
    type=2, device={{0x5000000: 1, 0x6000000: 3}}.get(ptr, 0))


class Producer:
    def __init__(self, ptr, stream):
        self.__cuda_array_interface__ = {{"shape": (256,), "typestr": "<f4",
                                         "data": (ptr, False), "version": 3, "strides": None,
                                         "stream": stream}}


with ag.configure(backend="cuda", devices=2, memory="{memory}"):
    rt = current_runtime()
    cupy.cuda.runtime.setDevice(0)
    a = ag.asarray(Producer(0x5000000, 0x77))     # memory of GPU 1
    print("recorded", [r for r in recorded if r[1] == 0x77], "device",
          cupy.cuda.runtime.getDevice())
    alloc = a._alloc
    print("alloc", alloc.location, alloc.home, alloc.fixed, alloc.buffer.on(1).ptr
          if hasattr(alloc.buffer, "on") else alloc.buffer.ptr)
    inc = ag.cuda_kernel(replay.INC, "inc")
    inc[1, 32](a, 32)                             # writes it: on GPU 1
    print("placed", sorted(ag.statistics().placed.items()))
    print("export", hex(a.__cuda_array_interface__["data"][0]))
    if "{memory}" == "explicit":     # (the stand-in's managed memory has no host bytes)
        with ag.device(1):
            own = ag.zeros(256, np.float32)
        inc[1, 32](own, 32)
        print("own export on", own._alloc.location,
              own.__cuda_array_interface__["data"][0] == own._alloc.buffer.on(1).ptr)
    try:
        ag.asarray(Producer(0x6000000, 0x77))
    except ag.ArgumentError as exc:
        print("refused:", exc)
"""


@pytest.mark.parametrize("memory", ["explicit", "managed"])
def test_another_librarys_array_on_the_second_gpu_is_imported_there(memory):
    out = run(IMPORT.format(memory=memory)).splitlines()
    assert out[0] == "recorded [(1, 119)] device 0"    # the producer's stream, on its GPU
    assert out[1] == f"alloc 4 1 True {0x5000000}"      # current on slot 1, its home, fixed
    assert out[2] == "placed [(1, 1)]"
    assert out[3] == "export 0x5000000"                  # exported from its own GPU
    if memory == "explicit":
        assert out[4] == "own export on 4 True"         # from the GPU that holds it
    assert "is on GPU 3, and this runtime runs on GPUs 0, 1" in out[-1]
