"""Every fault reaches the user: when several nodes fault before the host waits, the next wait
raises all of them (one :class:`asyncgpu.KernelFaults`, each fault naming its launch site), and a
fault that surfaces inside the runtime's own recovery is kept for the next wait, not dropped."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

import asyncgpu as ag


@ag.kernel
@cuda.jit
def out_of_bounds(x, n):
    i = cuda.grid(1)
    if i < n:
        x[i + 1000] = 1.0


@ag.kernel
@cuda.jit
def plus_one(x, n):
    i = cuda.grid(1)
    if i < n:
        x[i] += 1.0


@ag.kernel(out=["x"])
@cuda.jit
def overwrite(x, v, n):
    i = cuda.grid(1)
    if i < n:
        x[i] = v


@ag.kernel(const=["x"])
@cuda.jit
def writes_const(x, n):
    i = cuda.grid(1)
    if i < n:
        x[i] = 2.0


@pytest.fixture(params=["random", "lazy"])
def rt(request):
    with ag.configure(backend="sim", sim_seed=3, sim_strategy=request.param):
        yield ag
        ag.synchronize()


def _line(marker: str) -> int:
    with open(__file__) as f:
        for n, line in enumerate(f, 1):
            if marker in line and "_line(" not in line:
                return n
    raise AssertionError(marker)


def test_two_faulting_kernels_are_both_reported_at_the_next_synchronize(rt):
    a = ag.zeros(8, np.float32)
    b = ag.zeros(8, np.float32)
    out_of_bounds[1, 8](a, 8)          # first fault
    out_of_bounds[1, 8](b, 8)          # second fault
    with pytest.raises(ag.KernelFault) as info:
        ag.synchronize()
    err = info.value
    assert isinstance(err, ag.KernelFaults) and isinstance(err, ExceptionGroup)
    assert len(err.exceptions) == 2
    sites = {f"test_every_fault_reported.py:{_line('# first fault')}",
             f"test_every_fault_reported.py:{_line('# second fault')}"}
    assert {s for s in sites if any(s in str(e) for e in err.exceptions)} == sites
    assert all(s in str(err) for s in sites)          # the message lists both
    ag.synchronize()                                   # reported once, then gone


def test_one_fault_alone_stays_a_plain_kernel_fault(rt):
    a = ag.zeros(8, np.float32)
    out_of_bounds[1, 8](a, 8)
    with pytest.raises(ag.KernelFault) as info:
        ag.synchronize()
    assert type(info.value) is ag.KernelFault


def test_a_launch_run_in_pieces_that_faults_is_one_fault(rt):
    # (an element-wise launch on a large input only on the host is run in chunks, each its
    # own node: the user made one launch, and sees one fault, with the count of its pieces)
    def twin(x, y, a, n):
        raise IndexError("index out of bounds")

    k = ag.cuda_kernel(r'''extern "C" __global__ void saxpy(const float* x, float* y,
        float a, int n) { }''', "saxpy", sim=twin, elementwise="n")
    n = 4 << 20
    x, y = ag.array(np.ones(n, np.float32)), ag.array(np.zeros(n, np.float32))
    chunks = ag.statistics().nodes
    k[n // 256, 256](x, y, 2.0, n)          # one launch
    assert ag.statistics().nodes - chunks > 2     # (ran in pieces)
    with pytest.raises(ag.KernelFault) as info:
        ag.synchronize()
    assert not isinstance(info.value, ag.KernelFaults)
    assert "kernel 'saxpy'" in str(info.value) and "IndexError" in str(info.value)
    assert "times: the pieces of one launch" in str(info.value)


def test_faults_of_different_kinds_split_with_except_star(rt):
    a = ag.zeros(8, np.float32)
    b = ag.zeros(8, np.float32)
    out_of_bounds[1, 8](a, 8)
    writes_const[1, 8](b, 8)
    kinds: list[type] = []
    try:
        ag.synchronize()
    except* ag.AnnotationViolation as group:
        kinds += [type(e) for e in group.exceptions]
    except* ag.KernelFault as group:
        kinds += [type(e) for e in group.exceptions]
    assert sorted(k.__name__ for k in kinds) == ["AnnotationViolation", "KernelFault"]


def test_two_failing_library_calls_are_both_reported(rt):
    import asyncgpu.cupy as acp

    # a NaN matrix: NumPy's SVD fails as the call runs on the simulator (its result's shape
    # was inferred on stand-in values, which are finite)
    m = ag.array(np.array([[1.0, np.nan], [0.0, 1.0]]))
    acp.linalg.matrix_rank(m)
    acp.linalg.matrix_rank(m)
    with pytest.raises(ag.KernelFaults) as info:
        ag.synchronize()
    assert len(info.value.exceptions) == 2
    assert all("'linalg.matrix_rank'" in str(e) for e in info.value.exceptions)


def test_the_runtime_stays_usable_after_several_faults(rt):
    a = ag.zeros(8, np.float32)
    out_of_bounds[1, 8](a, 8)
    out_of_bounds[1, 8](a, 8)
    with pytest.raises(ag.KernelFaults):
        ag.synchronize()
    c = ag.zeros(8, np.float32)
    plus_one[1, 8](c, 8)
    plus_one[1, 8](c, 8)
    np.testing.assert_array_equal(c.numpy(), np.full(8, 2, np.float32))


@pytest.mark.pure       # (replaces a method of StreamManager)
def test_a_fault_met_while_recovering_from_an_interrupted_launch_is_kept():
    """A launch interrupted right after its enqueue makes the runtime drain the device; a fault
    of earlier work met there is not this launch's error: the next wait raises it."""
    from asyncgpu.core.streams import StreamManager

    issued = StreamManager.__dict__["issued"]

    def interrupted(self, node, recorded=None):
        if node.kind == "kernel":         # (not the copy of c to the device before it)
            raise KeyboardInterrupt       # Ctrl-C just after the launch was enqueued
        issued(self, node, recorded)

    with ag.configure(backend="sim", sim_seed=0, sim_strategy="lazy"):
        a = ag.zeros(8, np.float32)
        c = ag.zeros(8, np.float32)
        out_of_bounds[1, 8](a, 8)          # pending: the lazy strategy runs nothing yet
        StreamManager.issued = interrupted
        try:
            with pytest.raises(KeyboardInterrupt):
                plus_one[1, 8](c, 8)
        finally:
            StreamManager.issued = issued
        with pytest.raises(ag.KernelFault, match="out_of_bounds"):
            ag.synchronize()
        np.testing.assert_array_equal(c.numpy(), np.ones(8, np.float32))
        ag.synchronize()


#: A program whose kernel ``boom`` (launched at line 10 of the program, after ``setup``)
#: writes out of bounds and is never waited for.
_BOOM = ("import threading, time, numpy as np, asyncgpu as ag\n"
         "from numba import cuda\n"
         "@ag.kernel\n@cuda.jit\n"
         "def boom(x, n):\n"
         "    i = cuda.grid(1)\n"
         "    if i < n:\n"
         "        x[i + 1000] = 1.0\n"
         "x = ag.zeros(8, np.float32)\n"
         "boom[1, 8](x, 8)\n")


def _stderr_at_exit(tmp_path, name, rest, strategy):
    """What the program ``_BOOM`` then ``rest`` writes to standard error, run on sim."""
    import os
    import subprocess
    import sys

    program = tmp_path / f"{name}.py"
    program.write_text(_BOOM + rest)
    env = dict(os.environ, ASYNCGPU_BACKEND="sim", ASYNCGPU_SIM_STRATEGY=strategy)
    done = subprocess.run([sys.executable, str(program)], capture_output=True, text=True,
                          env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stderr


def test_a_fault_never_waited_for_is_reported_when_the_program_ends(tmp_path):
    said = _stderr_at_exit(tmp_path, "ends_without_waiting", "", "lazy")   # (it just ends)
    assert "faults no synchronization reported" in said
    assert "ends_without_waiting.py:10" in said


def test_a_fault_never_waited_for_is_reported_at_exit_while_a_daemon_thread_keeps_launching(
        tmp_path):
    said = _stderr_at_exit(tmp_path, "daemon_at_exit", (
        "def slow_twin(x):\n"                 # (a twin that takes its time, run at its
        "    time.sleep(0.02)\n"                # launch: the daemon holds the runtime's lock
        "    x += 1.0\n"                        # most of the time)
        "slow = ag.cuda_kernel('extern \"C\" __global__ void slow(float* x) {}', 'slow',\n"
        "                      sim=slow_twin)\n"
        "def background():\n"
        "    z = ag.zeros(64, np.float32)\n"
        "    while True:\n"
        "        slow[1, 1](z)\n"
        "threading.Thread(target=background, daemon=True).start()\n"
        "time.sleep(0.3)\n"), "eager")
    assert "faults no synchronization reported" in said
    assert "daemon_at_exit.py:10" in said


@pytest.mark.parametrize("memory", ["explicit", "managed"])
def test_what_a_faulted_kernel_was_to_write_is_not_read_as_good_data(memory):
    """The fault is raised at the first host wait that meets it, maybe a read of another
    array or another thread's; a later read of what the faulted kernel was to write raises
    too, until the array is written again, instead of passing its old bytes for the result."""
    import threading

    with ag.configure(backend="sim", sim_seed=3, sim_strategy="random", memory=memory):
        a, b = ag.zeros(8, np.float32), ag.zeros(8, np.float32)
        out_of_bounds[1, 8](b, 8)
        other = threading.Thread(target=lambda: (plus_one[1, 8](a, 8), ag.synchronize()))
        caught = []
        other.run = (lambda run: lambda: _catch(run, caught))(other.run)
        other.start()
        other.join()
        assert len(caught) == 1                 # (the other thread met the fault first)
        for _ in range(2):
            with pytest.raises(ag.KernelFault, match=r"were to be written by work that faulted"
                               r".*kernel 'out_of_bounds'.*; write the array again"):
                b.numpy()
        assert a.tolist() == [1.0] * 8
        b[:] = 5.0
        assert b.tolist() == [5.0] * 8
        out_of_bounds[1, 8](b, 8)
        with pytest.raises(ag.KernelFault):
            ag.synchronize()
        plus_one[1, 8](b, 8)                    # (its new bytes derive from the old ones)
        with pytest.raises(ag.KernelFault, match="were to be written by work that faulted"):
            b.numpy()
        overwrite[1, 8](b[:4], 7.0, 4)          # (write-only: those bytes are the program's)
        assert b[:4].tolist() == [7.0] * 4
        with pytest.raises(ag.KernelFault, match="were to be written by work that faulted"):
            b[4:].numpy()
        overwrite[1, 8](b, 8.0, 8)
        assert b.tolist() == [8.0] * 8


@pytest.mark.parametrize("memory", ["explicit", "managed"])
def test_a_host_write_of_part_of_what_faulted_leaves_the_rest_unreadable(memory):
    """In explicit memory the write first fetched the device's bytes to the host, and that
    copy cleared the mark: the rest of the array was then read as good data."""
    with ag.configure(backend="sim", sim_seed=3, memory=memory):
        c = ag.array(np.arange(8, dtype=np.float32))
        out_of_bounds[1, 8](c, 8)
        with pytest.raises(ag.KernelFault):
            ag.synchronize()
        c[0] = 5.0
        with pytest.raises(ag.KernelFault, match="were to be written by work that faulted"):
            c.numpy()
        c[:] = np.zeros(8, np.float32)
        assert c.tolist() == [0.0] * 8


@ag.kernel(out=["y"])
@cuda.jit
def fault_writing(y, n):
    i = cuda.grid(1)
    if i < n:
        y[i] = 7.0
        if i == 0:
            raise ValueError("faulted while writing")


@ag.kernel(const=["x"], out=["y"])
@cuda.jit
def plus_one_into(x, y, n):
    i = cuda.grid(1)
    if i < n:
        y[i] = x[i] + 1.0


def _refused_write(a):
    with pytest.raises(ValueError):
        a[...] = np.ones(3, np.float32)         # (cannot broadcast: nothing written)


def _aliased_kernel(a):
    plus_one_into[1, 4](a, a, 4)                # (reads the faulted bytes through x)


def _strided_copy(a):
    import asyncgpu.cupy as acp

    view = acp.lib.stride_tricks.as_strided(a, (2, 2), (12, 0))    # (elements 0, 0, 3, 3)
    acp.copyto(view, ag.array(np.ones((2, 2), np.float32)))


@pytest.mark.parametrize("write", [
    _refused_write,
    lambda a: a.__setitem__(slice(None, None, 3), np.array([1, 2], np.float32)),
    _aliased_kernel,
    lambda a: __import__("asyncgpu.cupy", fromlist=["x"]).atleast_2d(a),
    _strided_copy,
    lambda a: a.__setitem__(Ellipsis, a[::-1]),
    lambda a: a.__setitem__(slice(1, None), ag.ones(3, np.float32)),
], ids=["refused-host-write", "strided-host-write-over-the-whole", "kernel-reading-them-too",
        "call-whose-writes-are-unknown", "overlapping-strided-copy",
        "assignment-of-its-own-bytes", "device-assignment-of-part"])
def test_what_does_not_overwrite_the_faulted_bytes_leaves_them_unreadable(write):
    """Each of these left some faulted bytes unwritten, or computed from them, and made the
    whole array readable: a refused host write (the marks were dropped before it), a strided
    write whose extent covers the array, a kernel given the array as input and output, a call
    booked as writing all its arrays because what it writes is unknown, and a copy into a
    layout whose elements repeat."""
    with ag.configure(backend="sim", sim_seed=3):
        a = ag.zeros(4, np.float32)
        fault_writing[1, 4](a, 4)
        with pytest.raises(ag.KernelFault, match="faulted while writing"):
            ag.synchronize()
        write(a)
        ag.synchronize()
        with pytest.raises(ag.KernelFault, match="were to be written by work that faulted"):
            a.numpy()
        a[1:3] = np.array([5.0, 6.0], np.float32)   # (a dense host write of part: those bytes)
        assert a[1:3].tolist() == [5.0, 6.0]
        with pytest.raises(ag.KernelFault, match="were to be written by work that faulted"):
            a.numpy()


@pytest.mark.parametrize("index", [Ellipsis, slice(None), slice(0, 4), slice(None, 4, 1)],
                         ids=["ellipsis", "colon", "bounds", "bounds-and-step"])
def test_an_array_assigned_to_every_element_makes_the_faulted_bytes_readable(index):
    """``a[...] = b`` writes every byte of ``a`` from ``b``, as ``copyto(a, b)`` does, which
    cleared the marks where the assignment left them."""
    with ag.configure(backend="sim", sim_seed=3):
        a = ag.zeros(4, np.float32)
        fault_writing[1, 4](a, 4)
        with pytest.raises(ag.KernelFault, match="faulted while writing"):
            ag.synchronize()
        a[index] = ag.ones(4, np.float32)
        assert a.tolist() == [1.0] * 4


def test_a_chunked_launch_one_of_whose_chunks_faulted_leaves_those_rows_unreadable(
        chunk_always):
    """The chunks after the faulted one wrote the same array and completed: each cleared the
    mark of the whole array, and the rows the faulted chunk never wrote read as zeros."""
    def twin(x, y, n):
        if x[0] == 0:
            raise IndexError("the first chunk faults")
        y[:n] = x[:n] + 1

    k = ag.cuda_kernel('extern "C" __global__ void k(const float* x, float* y, int n) {}', "k",
                       sim=twin, elementwise="n")
    with ag.configure(backend="sim", sim_seed=3):
        n = 1 << 12
        x = ag.array(np.arange(n, dtype=np.float32))
        y = ag.zeros(n, np.float32)
        k[16, 256](x, y, n)
        with pytest.raises(ag.KernelFault, match="the first chunk faults"):
            ag.synchronize()
        with pytest.raises(ag.KernelFault, match="were to be written by work that faulted"):
            y.numpy()
        assert y[-4:].tolist() == list(np.arange(n - 4, n, dtype=np.float32) + 1)


def _catch(run, caught):
    try:
        run()
    except ag.KernelFault as exc:
        caught.append(exc)


def test_free_that_meets_an_earlier_kernels_fault_frees_the_array_then_raises_it(rt):
    """``try: ... finally: b.free()`` leaks nothing when earlier work faulted: the free waits
    for b's work, gives the memory back and raises the fault it met (once); it left b
    allocated, and only a second free freed it."""
    a = ag.zeros(8, np.float32)
    b = ag.zeros(8, np.float32)
    out_of_bounds[1, 8](a, 8)              # faults
    b[...] = a                             # (so that the free's wait meets the fault)
    plus_one[1, 8](b, 8)
    with pytest.raises(ag.KernelFault, match="kernel 'out_of_bounds'"):
        b.free()
    assert b._alloc.freed
    with pytest.raises(ag.FreedArrayError):
        b.numpy()
    ag.synchronize()                       # (reported once)


@pytest.mark.parametrize("seed", range(4))
def test_a_fault_the_free_does_not_raise_reaches_the_next_wait(seed):
    """The free drains the device after the fault it met: another kernel's fault found there
    is kept for the next wait, not lost (whichever of the two the free's wait met first)."""
    with ag.configure(backend="sim", sim_seed=seed, sim_strategy="random"):
        a, b, c = (ag.zeros(8, np.float32) for _ in range(3))
        out_of_bounds[1, 8](a, 8)              # fault a
        b[...] = a
        out_of_bounds[1, 8](c, 8)              # fault c
        sites = []
        with pytest.raises(ag.KernelFault) as info:
            b.free()
        sites += [str(e) for e in getattr(info.value, "exceptions", [info.value])]
        assert b._alloc.freed
        try:
            ag.synchronize()
        except ag.KernelFault as fault:
            sites += [str(e) for e in getattr(fault, "exceptions", [fault])]
        for marker in ("# fault a", "# fault c"):
            assert sum(f"test_every_fault_reported.py:{_line(marker)}" in s for s in sites) == 1


def test_faults_gathered_again_with_more_are_counted_once_not_said_twice():
    """A fault kept for the next host wait (a recovery's, a configure's) is gathered again with
    the later ones: its count grows; the message said "(2 times: ...) (2 times: ...)"."""
    from asyncgpu.core.errors import KernelFault, gathered

    twice = gathered([KernelFault("kernel 'k' raised X") for _ in range(2)])
    again = gathered([twice, KernelFault("kernel 'k' raised X"),
                      KernelFault("kernel 'j' raised Y")])
    message = str(again)
    assert message.count("times: the pieces") == 1
    assert "kernel 'k' raised X (3 times: the pieces of one launch" in message
    assert str(gathered([again, twice])).count("(5 times:") == 1
