"""Importing other libraries' arrays without a copy (``asyncgpu.runtime.interop``), on the CPU.

On ``sim`` what can be imported is host memory: CPU DLPack producers (here a small wrapper
over a NumPy array, standing in for a PyTorch CPU tensor) and device arrays of Numba's CUDA
simulator. The ``cuda`` backend's import path (pointer checks, the ordering node after the
producer's stream) runs against the stand-in CuPy of ``tools/fakecupy``. Errors: what is
refused says why and what to do, names no array "the scalar", and tells the truth about the
memory model.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import stand_in
from numba import cuda


class CpuProducer:
    """A DLPack producer whose memory is on the CPU (what a PyTorch CPU tensor looks like)."""

    def __init__(self, data: np.ndarray) -> None:
        self.data = data

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        if max_version is None:
            return self.data.__dlpack__()
        return self.data.__dlpack__(max_version=max_version)   # flags: writable or not

    def __dlpack_device__(self):
        return (1, 0)


class GpuInterface:
    """An object that only says it is CUDA memory (what the sim backend cannot read)."""

    def __init__(self) -> None:
        self.__cuda_array_interface__ = {"shape": (4,), "typestr": "<f4", "data": (4096, False),
                                         "version": 3, "strides": None, "stream": None}


def _double():
    import asyncgpu as ag

    return ag.kernel(_double_py)


def _double_py(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = 2 * x[i]


def test_asarray_views_a_cpu_dlpack_producer_without_a_copy(sim):
    ag = sim
    data = np.arange(8, dtype=np.float32)
    a = ag.asarray(CpuProducer(data))
    assert a.shape == (8,) and a.dtype == np.float32
    _double()[1, 8](a)
    assert a.numpy().tolist() == [2.0 * v for v in range(8)]
    ag.synchronize()
    assert data.tolist() == [2.0 * v for v in range(8)]      # the producer's memory changed


class LegacyProducer:
    """A CPU producer of DLPack's older protocol (no ``max_version``): NumPy views its memory
    read-only, since that protocol cannot say it is writable."""

    def __init__(self, a):
        self.a = a

    def __dlpack__(self, stream=None):
        return self.a.__dlpack__()

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


def test_a_producer_of_the_older_dlpack_protocol_is_copied_by_array_as_the_refusal_says(sim):
    ag = sim
    data = np.arange(4, dtype=np.float32)
    with pytest.raises(ag.ArgumentError, match=r"read-only.*copy it with asyncgpu.array\(x\)"):
        ag.asarray(LegacyProducer(data))
    copy = ag.array(LegacyProducer(data))       # (it was refused the same way)
    _double()[1, 4](copy)
    assert copy.tolist() == [0.0, 2.0, 4.0, 6.0] and data.tolist() == [0.0, 1.0, 2.0, 3.0]


def test_an_argument_overlapping_an_earlier_import_is_refused_naming_the_argument(sim):
    """Refused while the kernel's arguments are checked, naming the kernel's argument (it
    was refused as the import was adopted, naming asyncgpu.asarray)."""
    ag = sim
    data = np.zeros(16, dtype=np.float32)
    first = ag.asarray(CpuProducer(data[0:8]))
    with pytest.raises(ag.ArgumentValueError, match=r"kernel '\w+' \(launched at .*\), "
                       r"argument 0 .*overlaps memory imported before.*import the whole array "
                       r"first"):
        _double()[1, 8](CpuProducer(data[4:12]))
    _double()[1, 8](first)                          # (the runtime goes on)
    assert first.tolist() == [0.0] * 8


def test_memory_overlapping_an_import_dropped_since_is_imported_at_once(sim):
    """The dropped import is given back before the overlap is looked for: nothing holds it, so
    nothing is refused (it was, until some other call of the runtime gave it back)."""
    ag = sim
    data = np.zeros(8, dtype=np.float32)
    part = ag.asarray(CpuProducer(data[2:6]))
    assert part.tolist() == [0.0] * 4
    del part
    whole = ag.asarray(CpuProducer(data))
    _double()[1, 8](whole)
    assert whole.shape == (8,) and whole.tolist() == [0.0] * 8


@pytest.mark.parametrize("seed", range(3))
def test_an_import_inside_an_earlier_one_is_ordered_with_it(sim, seed):
    ag = sim
    with ag.configure(sim_seed=seed, sim_strategy="random"):
        data = np.zeros(16, dtype=np.float32)
        whole = ag.asarray(CpuProducer(data))
        part = ag.asarray(CpuProducer(data[4:12]))      # the same bytes as whole[4:12]
        double = _double()
        for _ in range(3):
            whole[...] = 1.0
            double[1, 8](part)                           # reads and writes whole's bytes
        assert whole.tolist() == [1.0] * 4 + [2.0] * 8 + [1.0] * 4
        assert part.tolist() == [2.0] * 8


def test_an_import_overlapping_an_earlier_one_without_lying_inside_it_is_refused(sim):
    ag = sim
    data = np.zeros(16, dtype=np.float32)
    part = ag.asarray(CpuProducer(data[4:12]))
    with pytest.raises(ag.ArgumentValueError, match="asyncgpu.asarray: .* overlaps memory "
                       "imported before .* import the whole array first"):
        ag.asarray(CpuProducer(data))
    assert part.tolist() == [0.0] * 8                  # (and the runtime goes on)
    part.free()
    assert ag.asarray(CpuProducer(data)).shape == (16,)


@pytest.mark.parametrize("values", [np.array(["ab", "c"]), np.array([1, "x"], dtype=object),
                                    np.array(["2026-12-01"], dtype="datetime64[D]")],
                         ids=["str", "object", "datetime"])
def test_an_import_of_what_asyncgpu_arrays_cannot_hold_is_refused(sim, values):
    # (an object array viewed as bytes would be PyObject pointers: host writes through it
    # would free objects it never owned)
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

    ag = sim
    said = re.escape(f"holds {values.dtype}, which asyncgpu arrays cannot hold")
    with pytest.raises(ag.ArgumentError, match=said):
        ag.asarray(FakeCUDAArray(values))
    assert ag.asarray(FakeCUDAArray(np.arange(3.0))).tolist() == [0.0, 1.0, 2.0]


def test_explicit_model_reads_an_import_through_its_mirror(explicit):
    ag = explicit
    data = np.arange(6, dtype=np.int64)
    a = ag.asarray(CpuProducer(data))
    _double()[1, 6](a)
    assert a.numpy().tolist() == [0, 2, 4, 6, 8, 10]
    a[0] = 7                                                   # a host write goes back too
    _double()[1, 6](a)
    ag.synchronize()
    assert data.tolist() == [14, 4, 8, 12, 16, 20]


def test_what_the_producer_writes_after_a_synchronize_is_read_and_never_overwritten(explicit):
    """After a host read the mirror of an import held its old values: the producer's later
    write (after ``ag.synchronize()``, as the interop guide asks) was not read, and a partial
    host write then copied the stale mirror over it."""
    ag = explicit
    data = np.zeros(8, dtype=np.float32)
    a = ag.asarray(CpuProducer(data))
    assert a[0] == 0.0                       # (a small array: fetched whole by one read)
    ag.synchronize()
    data[:] = 100.0                          # the producer writes its memory
    assert a.numpy().tolist() == [100.0] * 8
    a[1] = 5.0
    a += 1
    ag.synchronize()
    assert data.tolist() == [101.0, 6.0] + [101.0] * 6
    assert a.numpy().tolist() == data.tolist()


def test_a_host_write_of_an_import_reaches_the_producer_by_the_next_synchronize(explicit):
    ag = explicit
    data = np.zeros(8, dtype=np.float32)
    a = ag.asarray(CpuProducer(data))
    a[...] = 7.0                             # every byte: no kernel follows it
    ag.synchronize()
    assert data.tolist() == [7.0] * 8
    data[3] = 100.0                          # then the producer writes one element
    assert (a * 2).numpy().tolist() == [14.0] * 3 + [200.0] + [14.0] * 4
    assert data[3] == 100.0


def test_a_replayed_graph_does_not_copy_an_import_back_for_the_host(explicit):
    """A graph copies back behind itself what the host keeps reading after it: for another
    library's memory that copy would be read after the producer wrote it again."""
    ag = explicit
    data = np.ones(8, dtype=np.float32)
    a = ag.asarray(CpuProducer(data))

    double = _double()

    @ag.graph
    def step(x):
        double[1, 8](x)

    for i in range(4):                       # (recorded, then replayed: the host reads a
        step(a)                              # right after each replay)
        assert a.numpy().tolist() == [2.0 ** (i + 1)] * 8
    data[:] = 1.0
    for _ in range(3):
        step(a)
        ag.synchronize()
        data[:] = 5.0                        # the producer writes it after the step
        assert a.numpy().tolist() == [5.0] * 8
        data[:] = 1.0


def test_a_producer_passed_straight_to_a_kernel_is_imported_once(sim):
    ag = sim
    data = np.ones(16, dtype=np.float64)
    producer = CpuProducer(data)
    k = _double()
    for _ in range(5):               # the same allocation each time: launches are ordered
        k[1, 16](producer)
    assert ag.asarray(producer).numpy().tolist() == [32.0] * 16
    assert ag.asarray(producer)._alloc is ag.asarray(producer)._alloc


def test_array_copies_a_foreign_array(sim):
    ag = sim
    data = np.arange(4, dtype=np.float32)
    copy = ag.array(CpuProducer(data))
    _double()[1, 4](copy)
    assert copy.numpy().tolist() == [0.0, 2.0, 4.0, 6.0]
    assert data.tolist() == [0.0, 1.0, 2.0, 3.0]
    converted = ag.asarray(CpuProducer(data), np.float64)
    assert converted.dtype == np.float64 and converted.numpy().tolist() == [0.0, 1.0, 2.0, 3.0]


def test_a_strided_producer_keeps_its_layout(sim):
    ag = sim
    data = np.arange(12, dtype=np.float32)
    a = ag.asarray(CpuProducer(data[::3]))
    assert a.shape == (4,) and a.strides == (12,)
    _double()[1, 4](a)
    ag.synchronize()
    assert data.tolist() == [0, 1, 2, 6, 4, 5, 12, 7, 8, 18, 10, 11]


def test_gpu_memory_is_refused_on_sim_with_what_works_there(sim):
    ag = sim
    with pytest.raises(ag.ArgumentError, match=r"asyncgpu.asarray: the .*GpuInterface lives in "
                                               r"GPU memory, which the sim backend cannot read"):
        ag.asarray(GpuInterface())
    y = ag.zeros(4, np.float32)
    with pytest.raises(ag.ArgumentError, match=r"kernel '_double_py'.*argument 0 'x': the "
                                               r".*GpuInterface lives in GPU memory"):
        _double()[1, 4](GpuInterface())
    _double()[1, 4](y)                          # still usable afterwards
    assert y.numpy().tolist() == [0.0] * 4


def test_a_read_only_producer_is_refused(sim):
    ag = sim
    data = np.arange(4, dtype=np.float32)
    data.flags.writeable = False
    with pytest.raises(ag.ArgumentError, match=r"is read-only.*asyncgpu.array\(x\)"):
        ag.asarray(CpuProducer(data))


def test_typed_kernel_names_the_foreign_dtype_it_cannot_take(sim):
    ag = sim
    k = ag.cuda_kernel('extern "C" __global__ void k(float* x, int n) {}', "k",
                       sim=lambda x, n: None)
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

    records = np.zeros(4, np.dtype([("s0", np.uint64), ("s1", np.uint64)], align=True))
    with pytest.raises(ag.ArgumentError, match=r"argument 0 'x': expected a float32 array for "
                                               r"'float\*', got numba.FakeCUDAArray of dtype "
                                               r"\{'names': \['s0', 's1'\].*shape \(4,\)"):
        k[1, 4](FakeCUDAArray(records), 4)
    strided = np.zeros(8, np.float32)[::2]
    with pytest.raises(ag.ArgumentValueError, match=r"is not C-contiguous .*strides=\(8,\)"):
        k[1, 4](CpuProducer(strided), 4)
    with pytest.raises(ag.ArgumentError, match=r"argument 1 'n': expected a scalar int, got "
                                               r"array .*CpuProducer of dtype int32"):
        k[1, 4](ag.zeros(4, np.float32), CpuProducer(np.zeros(4, np.int32)))


def test_no_array_is_called_a_scalar(sim):
    ag = sim

    @ag.kernel(const=["x"])
    def k(x, y):
        pass

    with pytest.raises(ag.ArgumentError, match=r"annotated const.*but got a list;") as info:
        k[1, 1]([1, 2], ag.zeros(2))
    assert "scalar" not in str(info.value)
    with pytest.raises(ag.ArgumentError, match=r"but got the scalar 3;"):
        k[1, 1](3, ag.zeros(2))


@pytest.mark.parametrize("memory, where", [("explicit", "device memory"),
                                           ("managed", "managed memory")])
def test_numpy_argument_error_says_where_asarray_copies_it(memory, where):
    import asyncgpu as ag

    with ag.configure(backend="sim", sim_seed=0, memory=memory):
        with pytest.raises(ag.ArgumentError, match=rf"got a numpy.ndarray; it lives in host "
                                                   rf"memory.*copies it into {where}"):
            _double()[1, 4](np.zeros(4))


CUDA_IMPORT = """
import types
import numpy as np
import cupy
from tools.host_paths import stand_in_runtime
import asyncgpu as ag

recorded = []
cupy.cuda.runtime.eventRecord = lambda event, stream: recorded.append(stream)
cupy.cuda.runtime.pointerGetAttributes = lambda ptr: types.SimpleNamespace(
    type=2, device=1 if ptr == 0xDEAD000 else 0)
rt = stand_in_runtime()

class Producer:
    def __init__(self, ptr, stream):
        self.__cuda_array_interface__ = {"shape": (256,), "typestr": "<f4", "data": (ptr, False),
                                         "version": 3, "strides": None, "stream": stream}

a = ag.asarray(Producer(0x5000000, 0x77))
print(hex(a._alloc.buffer.ptr), a._alloc.buffer.mem is not None, 0x77 in recorded,
      rt.stats.nodes)
b = ag.asarray(Producer(0x5000000, 0x77))
print(b._alloc is a._alloc, rt.stats.nodes)
try:
    ag.asarray(Producer(0xDEAD000, None))
except ag.ArgumentError as exc:
    print("refused:", exc)
recorded.clear()
c = ag.asarray(Producer(0x6000000, None))
print(recorded[:1], rt.stats.nodes)
"""


def test_cuda_import_views_the_pointer_and_orders_after_the_producer_stream():
    out = stand_in.run(CUDA_IMPORT).splitlines()
    assert out[0] == "0x5000000 True True 1"        # no copy; an event on the producer's stream
    assert out[1] == "True 1"                        # imported once: no second node
    assert "is on GPU 1, and this runtime runs on GPU 0" in out[2]
    assert "device=1" in out[2]


def test_cuda_import_without_a_stream_waits_for_the_legacy_default_stream():
    """An interface naming no stream (Numba's ``to_device`` without one): its pageable copy may
    still be running on the legacy default stream, so the first use waits for that stream."""
    out = stand_in.run(CUDA_IMPORT).splitlines()
    assert out[3] == "[1] 2"          # an event on the legacy stream (1); a second import node


@pytest.mark.parametrize("first", ["explicit", "managed"])
def test_an_import_stays_the_producers_memory_across_a_change_of_memory_model(first):
    import asyncgpu as ag

    other = "managed" if first == "explicit" else "explicit"
    data = np.arange(8, dtype=np.float32)
    with ag.configure(backend="sim", sim_seed=1, sim_strategy="random", memory=first):
        a = ag.asarray(CpuProducer(data))
        a[0] = 10.0                        # explicit: newest bytes in the host mirror only
        with ag.configure(memory=other):
            _double()[1, 8](a)             # the producer's memory, not a converted copy
            ag.synchronize()
            assert data.tolist() == [20.0] + [2.0 * v for v in range(1, 8)]
        _double()[1, 8](a)
        assert a.numpy().tolist() == [40.0] + [4.0 * v for v in range(1, 8)]
        ag.synchronize()
        assert data.tolist() == [40.0] + [4.0 * v for v in range(1, 8)]


def test_probing_an_array_for_the_cuda_interface_on_sim_answers_no(sim):
    # (libraries test hasattr(x, "__cuda_array_interface__") to find CUDA arrays)
    ag = sim
    a = ag.zeros(4, np.float32)
    assert not hasattr(a, "__cuda_array_interface__")
    with pytest.raises(ag.NotOnSimulatorError, match="no device pointer to export"):
        a.__cuda_array_interface__
    assert a.__dlpack_device__()[0] == 1        # (DLPack still works: host memory)


def test_numpy_asarray_with_copy_false_refuses_as_numpy_2_asks(sim):
    a = sim.zeros(4, np.float32)
    with pytest.raises(ValueError, match="always a copy"):
        np.asarray(a, copy=False)
    assert np.asarray(a).tolist() == [0.0] * 4
