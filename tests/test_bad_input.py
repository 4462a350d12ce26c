"""Bad input is refused before anything is enqueued, with a message naming kernel, argument, fix.

Each case also checks that nothing was scheduled and that the next valid launch runs.
"""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

SRC = r'''
extern "C" __global__ void axpy(const float* x, float* y, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] += a * x[i];
}
'''


def axpy_twin(x, y, a, n):
    y[:n] += a * x[:n]


@pytest.fixture
def env(sim):
    """axpy, x = [0..8), y = zeros, and one launch y += x left pending (lazy: nothing ran)."""
    ag = sim
    k = ag.cuda_kernel(SRC, "axpy", sim=axpy_twin)
    x = ag.array(np.arange(8, dtype=np.float32))
    y = ag.zeros(8, np.float32)
    k[1, 8](x, y, 1.0, 8)
    return ag, k, x, y


def runtime_state(ag):
    """What a refused call must leave unchanged: counters, the backend's queues (the sim's
    operations per stream, and its executor steps), the DAG (in-flight nodes per stream and
    the tracker's live entries) and the pool of streams."""
    from asyncgpu.runtime.current import current_runtime
    rt = current_runtime()
    st = ag.statistics()
    sim = getattr(rt.backend, "inner", rt.backend)
    live = {key: (tuple((lo, hi, n.id) for lo, hi, n in v.writes),
                  tuple(sorted((id(s), tuple((lo, hi, n.id) for lo, hi, n in e))
                               for s, e in v.reads.items())))
            for key, v in rt.deps._live.items()}
    return (st.nodes, st.kernels, st.calls, st.host_accesses, st.events_recorded,
            tuple(len(s.ops) for s in sim.streams), sim.steps,
            tuple((s.index, s.seq, tuple(n.id for n in s.inflight)) for s in rt.streams.streams),
            live)


def assert_nothing_enqueued_and_usable(ag, k, x, y, before):
    """Nothing was enqueued or committed; the arrays hold what they held; the next launch runs."""
    assert runtime_state(ag) == before
    assert x.numpy().tolist() == list(range(8))
    assert y.numpy().tolist() == list(range(8))          # the pending y += x, nothing else
    k[1, 8](x, y, 2.0, 8)
    assert y.numpy().tolist() == (3.0 * np.arange(8)).tolist()


CASES = [
    ("too few arguments", lambda ag, x, y: ((x, y, 2.0), ag.ArgumentError,
                                            r"kernel 'axpy' \(launched at .*\) takes 4 arguments \(x, y, a, n\); 3 given")),
    ("scalar for pointer", lambda ag, x, y: ((1.0, y, 2.0, 8), ag.ArgumentError,
                                             r"argument 0 'x': expected an asyncgpu array")),
    ("array for scalar", lambda ag, x, y: ((x, y, x, 8), ag.ArgumentError,
                                           r"argument 2 'a': expected a scalar float")),
    ("wrong dtype", lambda ag, x, y: ((ag.zeros(8, np.float64), y, 2.0, 8), ag.ArgumentError,
                                      r"argument 0 'x': expected a float32 array .* got float64\[8\]")),
    ("int overflow", lambda ag, x, y: ((x, y, 2.0, 2**40), ag.ArgumentValueError,
                                       r"argument 3 'n': 1099511627776 does not fit in int")),
    ("float for int", lambda ag, x, y: ((x, y, 2.0, 2.5), ag.ArgumentValueError,
                                        r"argument 3 'n': expected an integer")),
    ("nan for int", lambda ag, x, y: ((x, y, 2.0, float("nan")), ag.ArgumentValueError,
                                      r"argument 3 'n': expected an integer")),
    ("None", lambda ag, x, y: ((x, y, None, 8), ag.ArgumentError, r"argument 2 'a'")),
    ("bool for int", lambda ag, x, y: ((x, y, 2.0, True), ag.ArgumentError, r"argument 3 'n'")),
    ("complex for float", lambda ag, x, y: ((x, y, 1j, 8), ag.ArgumentError, r"argument 2 'a'")),
    ("numpy array", lambda ag, x, y: ((np.zeros(8, np.float32), y, 2.0, 8), ag.ArgumentError,
                                      r"argument 0 'x': got a numpy.ndarray; .*asyncgpu.asarray")),
    ("non-contiguous", lambda ag, x, y: ((ag.zeros(16, np.float32)[::2], y, 2.0, 8),
                                         ag.ArgumentValueError, r"argument 0 'x': .*not C-contiguous")),
    ("negative strides", lambda ag, x, y: ((ag.zeros(8, np.float32)[::-1], y, 2.0, 8),
                                           ag.ArgumentValueError,
                                           r"argument 0 'x': .*not C-contiguous \(strides=\(-4,\)\).*contiguous copy")),
    ("Fortran order", lambda ag, x, y: ((ag.zeros((2, 4), np.float32).T, y, 2.0, 8),
                                        ag.ArgumentValueError, r"argument 0 'x': array float32\[4x2\] is not C-contiguous")),
    ("list", lambda ag, x, y: (([0.0] * 8, y, 2.0, 8), ag.ArgumentError,
                               r"argument 0 'x': expected an asyncgpu array for 'const float\*', got list")),
    ("object", lambda ag, x, y: ((x, y, object(), 8), ag.ArgumentError,
                                 r"argument 2 'a': expected a float number, got object")),
    ("string", lambda ag, x, y: ((x, y, 2.0, "8"), ag.ArgumentError, r"argument 3 'n'")),
    ("too many arguments", lambda ag, x, y: ((x, y, 2.0, 8, 9), ag.ArgumentError,
                                             r"takes 4 arguments \(x, y, a, n\); 5 given")),
    ("freed view", lambda ag, x, y: ((_freed_view(ag), y, 2.0, 8), ag.FreedArrayError,
                                     r"argument 0 'x': array float32\[8\] has been freed")),
    ("other runtime", lambda ag, x, y: ((_foreign_array(ag), y, 2.0, 8), ag.ArgumentValueError,
                                        r"argument 0 'x': .*was created on device 0 before "
                                        r"asyncgpu\.configure switched away and back")),
]


def _freed_view(ag):
    base = ag.zeros(16, np.float32)
    view = base[4:12]
    base.free()
    return view


_FOREIGN = []


def _foreign_array(ag):
    """An array of another runtime (one retired by a switch of device)."""
    return _FOREIGN[0]


@pytest.fixture(autouse=True, scope="module")
def _foreign():
    import asyncgpu as ag
    with ag.configure(backend="sim", sim_seed=12345, device=0, sim_devices=2):
        _FOREIGN.append(ag.zeros(8, np.float32))
        with ag.configure(device=1):        # retires the runtime the array was made on
            pass
    yield
    _FOREIGN.clear()


@pytest.mark.parametrize("name,case", CASES, ids=[c[0] for c in CASES])
def test_bad_argument_is_refused_before_enqueue(env, name, case):
    ag, k, x, y = env
    args, exc, pattern = case(ag, x, y)
    before = runtime_state(ag)
    with pytest.raises(exc, match=pattern):
        k[1, 8](*args)
    assert_nothing_enqueued_and_usable(ag, k, x, y, before)


@pytest.mark.parametrize("config,pattern", [
    ((0, 8), r"blocks along axis x must be in \[1, "),
    ((1, 2048), r"threads per block along axis x must be in \[1, 1024\]; got 2048"),
    ((1, (32, 32, 2)), r"2048 threads; the limit is 1024"),
    ((1, (1, 1, 65)), r"threads per block along axis z must be in \[1, 64\]"),
    ((1.5, 8), r"blocks must be a positive integer"),
    ((1, 8, -1), r"dynamic shared memory must be an integer"),
    ((1, 8, 1 << 20), r"dynamic shared memory must be an integer in \[0, 49152\]"),
    ((1, 8, 0, 0), r"asyncgpu chooses the stream itself"),
    ((1,), r"got 1 values"),
    ((1, 8, 64.0), r"dynamic shared memory must be an integer .* got 64.0"),
    ((1, 8, False), r"dynamic shared memory must be an integer .* got False"),
    ((True, 8), r"blocks must be a positive integer"),
    ((1, 8.0), r"threads per block must be a positive integer"),
    (((1.0, 1), 8), r"blocks must be a positive integer"),
])
@pytest.mark.parametrize("cached", [False, True], ids=["first", "after a valid launch"])
def test_bad_launch_configuration(env, config, pattern, cached):
    ag, k, x, y = env
    if cached:      # (an int configuration equal to this one: 1.0 == 1, True == 1)
        ints = tuple(tuple(int(d) for d in p) if isinstance(p, tuple) else int(p)
                     for p in config)
        try:
            k[ints]
        except ag.ArgumentValueError:
            pass
    before = runtime_state(ag)
    with pytest.raises(ag.ArgumentValueError, match=pattern):
        k[config](x, y, 2.0, 8)
    assert_nothing_enqueued_and_usable(ag, k, x, y, before)


def test_an_integer_beyond_every_float_is_refused_naming_the_argument(env):
    ag, k, x, y = env
    before = runtime_state(ag)
    with pytest.raises(ag.ArgumentValueError, match=r"kernel 'axpy'.*argument 2 'a': the "
                       r"integer of 332 digits is beyond the range of float"):
        k[1, 8](x, y, 2**1100, 8)
    assert_nothing_enqueued_and_usable(ag, k, x, y, before)


def test_freed_array(env):
    ag, k, x, y = env
    z = ag.array(np.ones(8, np.float32))
    z.free()
    before = runtime_state(ag)
    with pytest.raises(ag.FreedArrayError, match=r"argument 0 'x': array float32\[8\] has been freed"):
        k[1, 8](z, y, 2.0, 8)
    with pytest.raises(ag.FreedArrayError):
        z.numpy()
    with pytest.raises(ag.FreedArrayError):
        z[1:3]
    assert_nothing_enqueued_and_usable(ag, k, x, y, before)


def test_free_waits_for_pending_work(env):
    ag, k, x, y = env
    k[1, 8](x, y, 1.0, 8)
    x.free()                      # both kernels reading x must run first
    assert y.numpy().tolist() == (2.0 * np.arange(8)).tolist()


def test_kernel_called_without_configuration(env):
    ag, k, x, y = env
    with pytest.raises(ag.ArgumentValueError, match=r"needs a launch configuration: .*axpy\[blocks"):
        k(x, y, 2.0, 8)


def test_annotation_errors_at_definition(sim):
    ag = sim
    with pytest.raises(ag.SignatureError, match=r"const=\['z'\] names no parameter"):
        ag.cuda_kernel(SRC, "axpy", const=["z"])
    with pytest.raises(ag.SignatureError, match=r"applies to arrays, but \['n'\] are scalars"):
        ag.cuda_kernel(SRC, "axpy", const=["n"])
    with pytest.raises(ag.SignatureError, match=r"declared const in the source and cannot be out"):
        ag.cuda_kernel(SRC, "axpy", out=["x"])
    with pytest.raises(ag.SignatureError, match=r"cannot be both const and out"):
        ag.cuda_kernel(SRC, "axpy", const=["y"], out=["y"])
    with pytest.raises(ag.SignatureError, match=r"has 4 parameters, signature declares 3"):
        ag.cuda_kernel(SRC, "axpy", "const pointer, pointer, float")

    @cuda.jit
    def k(x, y):
        pass

    with pytest.raises(ag.SignatureError, match=r"out=\['q'\] names no parameter"):
        ag.kernel(k, out=["q"])


def test_grcuda_signature_string_is_accepted(sim):
    ag = sim
    k = ag.cuda_kernel(SRC, "axpy", "const pointer x, pointer y, float a, sint32 n", sim=axpy_twin)
    x, y = ag.ones(4, np.float32), ag.zeros(4, np.float32)
    k[1, 4](x, y, 3.0, 4)
    assert y.numpy().tolist() == [3.0] * 4


def test_numba_typing_error_is_not_a_crash(sim):
    ag = sim

    @ag.kernel
    @cuda.jit
    def fill(y, v):
        i = cuda.grid(1)
        if i < y.size:
            y[i] = v

    y = ag.zeros(4, np.float32)
    with pytest.raises(ag.ArgumentError, match=r"argument 1 'v': expected an asyncgpu array, a number"):
        fill[1, 4](y, "seven")
    fill[1, 4](y, 7)
    assert y.numpy().tolist() == [7.0] * 4


def test_bad_allocation_requests(sim):
    ag = sim
    with pytest.raises(ValueError, match="negative dimensions"):
        ag.zeros(-1)
    with pytest.raises(TypeError, match="dimensions must be integers"):
        ag.zeros(2.5)
    with pytest.raises(ValueError, match="too large"):
        ag.empty((2**40, 2**40), np.float32)
    with pytest.raises(TypeError, match="dtype object is not supported"):
        ag.array(np.array([None, 1], dtype=object))
    with pytest.raises(TypeError, match="no public constructor"):
        ag.Array()


# -- section 4 of the reliability note, the cases not covered above -----------------------------
UNSIGNED = SRC.replace("int n", "unsigned int n")


@pytest.mark.parametrize("build,exc,pattern", [
    # 1: syntax errors and unknown type tokens, with the position
    (lambda ag: ag.cuda_kernel(SRC, "axpy", "pointr x, pointer y, float a, sint32 n"),
     "SignatureError", r"signature parameter 0 \('pointr x'\): unknown type 'pointr'; expected pointer"),
    (lambda ag: ag.cuda_kernel(SRC, "axpy", "const pointer x, pointer y, float128 a, sint32 n"),
     "SignatureError", r"parameter 2 \('float128 a'\): unknown type 'float128'"),
    (lambda ag: ag.cuda_kernel(SRC, "axpy", "const pointer x,, pointer y, float a, sint32 n"),
     "SignatureError", r"signature parameter 1 is empty"),
    # 2: const on a scalar; const and out on one argument
    (lambda ag: ag.cuda_kernel(SRC, "axpy", "const pointer x, pointer y, const float a, sint32 n"),
     "SignatureError", r"parameter 2 \('const float a'\): 'const' applies to pointers"),
    (lambda ag: ag.cuda_kernel(SRC, "axpy", const=["a"]),
     "SignatureError", r"applies to arrays, but \['a'\] are scalars"),
    (lambda ag: ag.cuda_kernel(SRC, "axpy", const=["y"], out=["y"]),
     "SignatureError", r"cannot be both const and out"),
    # 3: parameter count
    (lambda ag: ag.cuda_kernel(SRC, "axpy", "const pointer x, pointer y, float a"),
     "SignatureError", r"kernel 'axpy' has 4 parameters, signature declares 3"),
    # 4: declared scalar size differs from the parameter's
    (lambda ag: ag.cuda_kernel(SRC, "axpy", "const pointer x, pointer y, float a, sint64 n"),
     "SignatureError", r"parameter 3 'n' is 'int' \(4 bytes\) in the source but 'sint64' \(8 bytes"),
    (lambda ag: ag.cuda_kernel(SRC, "axpy", "const pointer x, pointer y, double a, sint32 n"),
     "SignatureError", r"parameter 2 'a' is 'float' \(4 bytes\) .* 'double' \(8 bytes"),
    (lambda ag: ag.cuda_kernel(SRC, "axpy", "const pointer x, pointer y, sint32 a, sint32 n"),
     "SignatureError", r"parameter 2 'a' is 'float' .* in the source but 'sint32'"),
    (lambda ag: ag.cuda_kernel(SRC, "axpy", "const pointer x, float y, float a, sint32 n"),
     "SignatureError", r"parameter 1 'y' is a pointer in the source but a scalar in the signature"),
    # 24: kernel name not in the module
    (lambda ag: ag.cuda_kernel(SRC, "axpz"),
     "CompileError", r"kernel 'axpz' is not declared as __global__ in the source; kernels found: axpy"),
    # what the GPU's compiler or its lookup by name refuses, refused where the kernel is made
    (lambda ag: ag.cuda_kernel(SRC.replace('extern "C" ', ""), "axpy", sim=axpy_twin),
     "SignatureError", r"kernel 'axpy' is not declared extern \"C\": C\+\+ mangles its name"),
    (lambda ag: ag.cuda_kernel(SRC.replace("void axpy", "int axpy"), "axpy", sim=axpy_twin),
     "SignatureError", r"kernel 'axpy' returns a value: a __global__ function must return void"),
    (lambda ag: ag.cuda_kernel(SRC.replace("float* y", "float* x"), "axpy", sim=axpy_twin),
     "SignatureError", r"kernel 'axpy': two parameters are named 'x'"),
    # annotations and twins of the wrong kind
    (lambda ag: ag.cuda_kernel(SRC, "axpy", const=1),
     "SignatureError", r"kernel 'axpy': const= takes a parameter name or a list of names, not 1"),
    (lambda ag: ag.cuda_kernel(SRC, "axpy", out=[0]),
     "SignatureError", r"kernel 'axpy': out= takes a parameter name or a list of names"),
    (lambda ag: ag.cuda_kernel(SRC, "axpy", sim=ag.kernel(cuda.jit(axpy_twin))),
     "SignatureError", r"its sim= twin 'axpy_twin' is an asyncgpu kernel; pass the function"),
    (lambda ag: ag.kernel(cuda.jit(axpy_twin), sim=axpy_twin),
     "SignatureError", r"kernel 'axpy_twin' is a Numba kernel: .* sim= is for CUDA C kernels"),
])
def test_bad_kernel_definition(env, build, exc, pattern):
    ag, k, x, y = env
    before = runtime_state(ag)
    with pytest.raises(getattr(ag, exc), match=pattern):
        build(ag)
    assert_nothing_enqueued_and_usable(ag, k, x, y, before)


@pytest.mark.parametrize("value,pattern", [
    (-1, r"argument 3 'n': -1 does not fit in unsigned int \(\[0, 4294967295\]\)"),
    (2**32, r"argument 3 'n': 4294967296 does not fit in unsigned int"),
    (np.float64("nan"), r"argument 3 'n': expected an integer"),
])
def test_scalar_out_of_range_for_unsigned(env, value, pattern):       # case 10
    ag, k, x, y = env
    ku = ag.cuda_kernel(UNSIGNED, "axpy", sim=axpy_twin)
    before = runtime_state(ag)
    with pytest.raises(ag.ArgumentValueError, match=pattern):
        ku[1, 8](x, y, 1.0, value)
    assert_nothing_enqueued_and_usable(ag, k, x, y, before)


def test_const_argument_written_by_the_kernel(env):                   # case 5
    ag, k, x, y = env

    @cuda.jit
    def scribble(a, b):
        i = cuda.grid(1)
        if i < a.size:
            a[i] = 5
            b[i] = 1

    bad = ag.kernel(scribble, const=["a"])
    z = ag.zeros(8, np.float32)
    with pytest.raises(ag.AnnotationViolation,
                       match=r"kernel 'scribble' .*wrote argument 0 'a' .*declared const; remove 'a'"):
        bad[1, 8](x, z)
        ag.synchronize()
    # (on a GPU the kernel would have changed the const array: a read of it faults, as a
    # read of what any faulted launch was to write does, until it is written again)
    with pytest.raises(ag.KernelFault, match="to be written by work that faulted"):
        x.numpy()
    x[...] = np.arange(8, dtype=x.dtype)
    k[1, 8](x, y, 2.0, 8)
    assert y.numpy().tolist() == (3.0 * np.arange(8)).tolist()


def test_a_const_argument_written_only_while_a_flag_is_unset_is_named(sim):
    """The kernel sets the flag, then writes the const argument only where the flag was
    unset: the violation names the argument, found by running the kernel again on what the
    failed run started from (run again on what it left, the flag was set and nothing was
    named)."""
    ag = sim

    @ag.kernel(const=["x"])
    @cuda.jit
    def once(x, flag):
        if flag[0] == 0:
            flag[0] = 1
            x[0] = 5.0

    x, flag = ag.zeros(4), ag.zeros(1, np.int32)
    once[1, 1](x, flag)
    with pytest.raises(ag.AnnotationViolation,
                       match=r"kernel 'once' .*wrote argument 0 'x' .*declared const; remove 'x'"):
        ag.synchronize()
    with pytest.raises(ag.KernelFault, match="to be written by work that faulted"):
        x.numpy()


@pytest.mark.parametrize("own", ["table", "message"])
def test_a_twins_own_read_only_error_is_its_kernel_fault_not_a_const_violation(sim, own):
    """A twin writing a read-only NumPy array of its own, or raising a ValueError about
    something read-only, fails as the twin failed: a KernelFault with its error. Only a write
    to a const argument is an AnnotationViolation (this one blamed the const 'x', which the
    source declares const and the twin never wrote)."""
    ag = sim
    table = np.frombuffer(b"\x00" * 16, dtype=np.float32)     # (read-only)

    def twin(x, y, a, n):
        if own == "table":
            table[0] = a
        else:
            raise ValueError("the twin's lookup table is read-only")
        y[:n] += x[:n]

    k = ag.cuda_kernel(SRC, "axpy", sim=twin)
    x, y = ag.array(np.arange(4, dtype=np.float32)), ag.zeros(4, np.float32)
    k[1, 4](x, y, 1.0, 4)
    with pytest.raises(ag.KernelFault, match=r"kernel 'axpy' .*raised ValueError: .*read-only") \
            as caught:
        ag.synchronize()
    assert not isinstance(caught.value, ag.AnnotationViolation)
    assert x.numpy().tolist() == [0.0, 1.0, 2.0, 3.0]


def test_out_argument_read_by_the_kernel_is_an_annotation_violation(sim):   # case 6
    """The simulator poisons an ``out`` argument (NaN), and the kernel read the poison
    silently (the result differed from serial, with no error; on the GPU it reads whatever
    the memory held). Now the read is caught, and the launch's writes are discarded."""
    ag = sim

    @cuda.jit
    def accumulate(y):
        i = cuda.grid(1)
        if i < y.size:
            y[i] += 1

    k = ag.kernel(accumulate, out=["y"])
    y = ag.zeros(4, np.float32)
    k[1, 4](y)
    with pytest.raises(ag.AnnotationViolation,
                       match=r"read argument 0 'y' .* declared out .* remove 'y' from out="):
        ag.synchronize()
    y[...] = 1.0                       # (usable after it)
    ag.kernel(accumulate)[1, 4](y)
    assert y.numpy().tolist() == [2.0] * 4


def test_misaligned_data_is_copied_to_aligned_memory(env):            # case 14
    ag, k, x, y = env
    raw = np.zeros(8 * 4 + 1, np.uint8)
    misaligned = raw[1:].view(np.float32)
    misaligned[:] = np.arange(8)
    assert misaligned.ctypes.data % 4 != 0
    m = ag.asarray(misaligned)               # asarray copies into an aligned allocation
    assert m._alloc.buffer.host.ctypes.data % 4 == 0
    z = ag.zeros(8, np.float32)
    k[1, 8](m, z, 1.0, 8)
    # asyncgpu arrays have no dtype-changing views, so element views are always aligned
    k[1, 4](x[4:8], z[0:4], 1.0, 4)
    assert z.numpy().tolist() == [4.0, 6.0, 8.0, 10.0, 4.0, 5.0, 6.0, 7.0]


def test_zero_size_arrays_launch_as_a_no_op(env):                     # case 15
    ag, k, x, y = env
    e = ag.zeros(0, np.float32)
    k[1, 8](e, e, 2.0, 0)                    # documented: runs, touches nothing
    assert e.numpy().shape == (0,)
    assert y.numpy().tolist() == list(range(8))
    with pytest.raises(ag.ArgumentValueError, match=r"blocks along axis x must be in \[1, "):
        k[0, 8](e, e, 2.0, 0)               # an empty grid is refused at once


def test_read_only_numpy_data_is_copied_not_written(env):             # case 18
    ag, k, x, y = env
    ro = np.arange(8, dtype=np.float32)
    ro.flags.writeable = False
    r = ag.asarray(ro)                        # a copy: the kernel may write it
    k[1, 8](x, r, 1.0, 8)
    assert r.numpy().tolist() == (2.0 * np.arange(8)).tolist()
    assert ro.tolist() == list(range(8))


def test_one_array_passed_twice_is_ordered_as_one_writer(env):        # case 19
    ag, k, x, y = env
    # Decision (documented): allowed. The node's accesses are the union of its arguments, so
    # the DAG orders it as a writer of y; what the kernel does inside is the kernel's business.
    k[1, 8](y, y, 1.0, 8)                     # y += y, after the pending y += x
    k[1, 8](y, x, 1.0, 8)                     # x += y: RAW on the aliased write
    assert y.numpy().tolist() == (2.0 * np.arange(8)).tolist()
    assert x.numpy().tolist() == (3.0 * np.arange(8)).tolist()


@pytest.mark.parametrize("use", [
    lambda a: a.numpy(), lambda a: a.__setitem__(0, 1.0), lambda a: a[1:3], lambda a: a.free(),
    lambda a: a.__cuda_array_interface__, lambda a: a.reshape(2, 4), lambda a: float(a[0]),
], ids=["read", "write", "view", "free", "export", "reshape", "item"])
def test_every_entry_refuses_a_freed_array(env, use):                 # cases 20, 21
    ag, k, x, y = env
    for victim in (ag.zeros(8, np.float32), _freed_view(ag)):
        if not victim._alloc.freed:
            victim.free()
        before = runtime_state(ag)
        with pytest.raises(ag.FreedArrayError, match=r"array float32\[8\] has been freed"):
            use(victim)
        assert_nothing_enqueued_and_usable(ag, k, x, y, before)
        k[1, 8](x, y, -2.0, 8)               # undo the check's launch: y back to x


def test_kernel_that_raises_is_reported_naming_it_and_the_runtime_goes_on(env):   # case 27
    ag, k, x, y = env

    def boom(x, y, a, n):
        raise IndexError("index 1073741824 out of bounds")

    bad = ag.cuda_kernel(SRC, "axpy", sim=boom)
    bad[1, 8](x, y, 1.0, 8)
    with pytest.raises(ag.KernelFault, match=r"kernel 'axpy' at .* raised IndexError: index 1073741824"):
        y.numpy()
    ag.synchronize()
    y[:] = np.arange(8, dtype=np.float32)    # (what the faulted kernel was to write, again)
    k[1, 8](x, y, 2.0, 8)
    assert y.numpy().tolist() == (3.0 * np.arange(8)).tolist()


def test_huge_allocation_is_refused_before_the_backend(sim):          # case 30
    ag = sim
    with pytest.raises(ValueError, match=r"needs 9223372036854775808 bytes, too many"):
        ag.empty(2**61, np.float32)
    with pytest.raises(ValueError, match="too large"):
        ag.zeros((2**31, 2**31), np.int8)
    assert ag.zeros(4).numpy().tolist() == [0.0] * 4


def _plus_one(ag):
    """A Numba kernel ``y = x + 1`` (x read-only)."""
    @ag.kernel(const=["x"])
    @cuda.jit
    def plus_one(x, y):
        i = cuda.grid(1)
        if i < y.size:
            y[i] = x[i] + 1

    return plus_one


def test_launch_from_inside_another_launch_is_refused_and_nothing_breaks(sim):
    """Case 29 of the reliability note: a finalizer or callback that launches while asyncgpu is
    scheduling another node (same thread, re-entrant lock) gets a RuntimeError; the outer
    launch completes and the runtime stays usable."""
    from asyncgpu.runtime.current import current_runtime

    ag = sim
    plus_one = _plus_one(ag)
    x = ag.array(np.arange(16, dtype=np.float32))
    y, z = ag.zeros(16, np.float32), ag.zeros(16, np.float32)
    refused = []

    class Reentrant:
        def node_issued(self, node):       # runs inside the runtime's scheduling of a node
            try:
                plus_one[1, 16](x, z)
            except RuntimeError as exc:
                refused.append(str(exc))

    with current_runtime().instrument(Reentrant()):
        plus_one[1, 16](x, y)
    assert refused and "launched from inside another asyncgpu operation" in refused[0]
    assert "plus_one" in refused[0]
    assert y.numpy().tolist() == list(range(1, 17))
    assert z.numpy().tolist() == [0.0] * 16          # the refused launch never ran
    plus_one[1, 16](y, z)                            # and the runtime is usable
    assert z.numpy().tolist() == list(range(2, 18))


@pytest.mark.pure     # (compiled, no interrupt can land between C statements: the mark is proof)
def test_an_interrupt_that_leaves_the_issuing_mark_set_refuses_nothing_later(sim):
    """An interrupt landing on the line that clears ``Runtime._issuing`` leaves it set; a later
    launch whose input is copied to the device first (an ``_issue`` inside an ``_issue`` that
    has not launched yet) is not a re-entrant launch and must go through."""
    from asyncgpu.core.dag import Node
    from asyncgpu.runtime.current import current_runtime

    ag = sim
    with ag.configure(backend="sim", memory="explicit"):
        plus_one = _plus_one(ag)
        rt = current_runtime()
        rt._issuing = Node("kernel", "interrupted", None, [])    # left set by the interrupt
        x = ag.array(np.arange(16, dtype=np.float32))               # host-current: copied in
        y = ag.zeros(16, np.float32)
        plus_one[1, 16](x, y)
        assert y.numpy().tolist() == list(range(1, 17))
        assert rt._issuing is None


@pytest.mark.parametrize("mode", [{}, {"execution": "sync"}, {"memory": "managed"}])
@pytest.mark.parametrize("case", ["rows", "count"])
def test_an_elementwise_launch_that_breaks_its_contract_is_refused_in_every_mode(sim, mode,
                                                                                 case):
    ag = sim
    k = ag.cuda_kernel(SRC, "axpy", elementwise="n", sim=axpy_twin)
    x = ag.array(np.arange(16, dtype=np.float32))
    y = ag.zeros(8, np.float32)
    with ag.configure(**mode):
        before = ag.statistics().kernels
        with pytest.raises(ag.ArgumentError, match="kernel 'axpy'.*" +
                           ("rows" if case == "rows" else "element count")):
            if case == "rows":
                k[1, 16](x, y, 1.0, 8)          # 16 rows against 8
            else:
                k[1, 16](x, x, 1.0, 4)          # n says 4, the arrays have 16 rows
        assert ag.statistics().kernels == before
        k[1, 8](x[:8], y, 1.0, 8)
        assert y.tolist() == list(range(8))


@pytest.mark.parametrize("bad", ["no simulator twin", "broken contract"])
def test_a_refused_launch_in_a_recording_raises_at_its_call_and_what_came_before_runs(sim,
                                                                                     bad):
    ag = sim
    inc = ag.cuda_kernel(r'''extern "C" __global__ void inc(float* y, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] += 1; }''', "inc",
        elementwise="n", sim=lambda y, n: y.__iadd__(1))
    notwin = ag.cuda_kernel(r'''extern "C" __global__ void notwin(float* y, int n) { }''',
                            "notwin")
    z = ag.zeros(4, np.float32)
    w = ag.zeros(8, np.float32)
    for run in range(1, 4):         # recorded, then captured, then replayed
        reached = False
        with pytest.raises(ag.AsyncGPUError):
            with ag.record(name="refused"):
                inc[1, 4](z, 4)
                if bad == "no simulator twin":
                    notwin[1, 4](w, 4)
                else:
                    inc[1, 8](w, 4)             # n says 4, w has 8 rows
                reached = True
                inc[1, 4](z, 4)
        assert not reached
        assert z.tolist() == [float(run)] * 4
    inc[1, 4](z, 4)                         # and the runtime goes on
    assert z.tolist() == [4.0] * 4


def test_a_numba_scalar_numba_cannot_type_is_refused_at_the_launch(sim):
    # (Numba's compile refuses it on a GPU; the simulator, running the kernel as Python,
    # would take it)
    ag = sim

    @ag.kernel
    @cuda.jit
    def store(x, v):
        x[0] = v

    x = ag.zeros(2, np.int64)
    before = ag.statistics().kernels
    with pytest.raises(ag.ArgumentError, match=r"kernel 'store'.*argument 1 'v': Numba cannot "
                       r"type 1180591620717411303424 .*; pass an int of at most 64 bits"):
        store[1, 1](x, 2**70)
    with pytest.raises(ag.ArgumentError, match=r"argument 1 'v': Numba cannot type .*long double"
                       r".*; pass a float64 or complex128 value"):
        store[1, 1](x, np.longdouble(1.5))
    assert ag.statistics().kernels == before
    store[1, 1](x, 2**40)
    assert x.tolist() == [2**40, 0]



def test_a_simulator_twin_that_cannot_take_the_arguments_is_refused_where_defined(sim):
    ag = sim
    with pytest.raises(ag.SignatureError, match=r"kernel 'axpy': its sim= twin 'short' cannot "
                       r"take the kernel's 4 arguments \(x, y, a, n\)"):
        def short(x, y):
            pass

        ag.cuda_kernel(SRC, "axpy", sim=short)
    ag.cuda_kernel(SRC, "axpy", sim=lambda *args: None)     # (any arguments: fine)
    with pytest.raises(ag.SignatureError, match=r"kernel 'axpy': its sim= twin is a int, not a "
                       r"function"):
        ag.cuda_kernel(SRC, "axpy", sim=5)          # (it failed as each launch ran)


def test_a_numba_kernel_returning_a_value_is_refused_where_defined_as_the_gpu_refuses_it(sim):
    """Numba's simulator runs it; Numba refuses it as it compiles for the GPU."""
    ag = sim

    @cuda.jit
    def answer(x):
        x[0] = 1.0
        return x[0]

    with pytest.raises(ag.SignatureError, match="kernel 'answer' returns a value; a CUDA "
                       "kernel returns nothing"):
        ag.kernel(answer)

    @ag.kernel
    @cuda.jit
    def early_exit(x):              # (a bare return is a kernel's early exit: fine)
        i = cuda.grid(1)
        if i >= x.size:
            return
        x[i] = 1.0

    x = ag.zeros(3)
    early_exit[1, 4](x)
    assert x.tolist() == [1.0] * 3
    with pytest.raises(ag.SignatureError, match="got <class 'int'>, whose parameters cannot "
                       "be read"):
        ag.kernel(int)


def test_an_allocation_larger_than_the_simulators_memory_is_an_out_of_memory_error(sim):
    ag = sim
    with pytest.raises(ag.OutOfMemoryError, match="simulated device memory"):
        ag.empty(10**15, np.float32)
    assert (ag.zeros(3) + 1).tolist() == [1.0] * 3


def test_the_imaginary_part_of_a_freed_real_array_is_refused(sim):
    ag = sim
    x = ag.zeros(3, np.float32)
    x.free()
    with pytest.raises(ag.FreedArrayError):
        x.imag


def test_a_long_double_array_is_refused_as_cupy_refuses_it(sim):
    with pytest.raises(ValueError, match=r"dtype float128 \(NumPy's long double\) has no CUDA "
                       r"type.*use float64"):
        sim.array(np.zeros(4, np.longdouble))
    for refused in (np.longdouble, object, "U3"):   # (caught as asyncgpu's, NumPy's, CuPy's)
        for cls in (sim.AsyncGPUError, TypeError, ValueError):
            with pytest.raises(cls, match="not supported|no CUDA type"):
                sim.zeros(2, dtype=refused)
    with pytest.raises(ValueError, match=r"call 'ndarray.astype': its result has dtype float128"):
        sim.zeros(4).astype(np.longdouble)
    assert sim.zeros(4).astype(np.float64).dtype == np.float64


def test_a_cuda_c_kernel_re_annotated_with_a_new_twin_runs_the_new_twin(sim):
    ag = sim
    k = ag.cuda_kernel(SRC, "axpy", sim=axpy_twin)

    def twice(x, y, a, n):
        y[:n] += 2 * a * x[:n]

    k2 = ag.kernel(k, sim=twice)
    x, y = ag.array(np.ones(4, np.float32)), ag.zeros(4, np.float32)
    k2[1, 4](x, y, 1.0, 4)
    assert y.tolist() == [2.0] * 4
    k[1, 4](x, y, 1.0, 4)           # (the first kernel keeps its twin)
    assert y.tolist() == [3.0] * 4


def test_an_elementwise_count_that_is_not_an_integer_is_refused_at_the_launch(sim):
    ag = sim

    @ag.kernel(elementwise="n", const=["x"])
    @cuda.jit
    def copy(x, y, n):
        i = cuda.grid(1)
        if i < n:
            y[i] = x[i]

    x, y = ag.ones(4, np.float32), ag.zeros(4, np.float32)
    with pytest.raises(ag.ArgumentError, match=r"argument 2 'n': elementwise='n' declares it the "
                       r"element count, an integer, but it is 4.0; pass the arrays' length, 4"):
        copy[1, 4](x, y, 4.0)
    copy[1, 4](x, y, 4)
    assert y.tolist() == [1.0] * 4


@pytest.mark.parametrize("make", [lambda ag: ag.array(np.array([None, 1], dtype=object)),
                                  lambda ag: ag.zeros(2, dtype="U5"),
                                  lambda ag: ag.zeros(2).astype(np.longdouble)],
                         ids=["object", "string", "long double"])
def test_a_dtype_arrays_cannot_hold_is_caught_as_cupy_raises_it_or_as_numpy_code_expects(sim,
                                                                                          make):
    for cls in (ValueError, TypeError):     # (CuPy: ValueError "Unsupported dtype")
        with pytest.raises(cls, match="dtype"):
            make(sim)


def test_cuda_kernel_of_no_source_or_no_name_is_refused_naming_the_argument(sim):
    with pytest.raises(TypeError, match="cuda_kernel: source must be a str"):
        sim.cuda_kernel(None, "f", sim=lambda x: None)
    with pytest.raises(TypeError, match="cuda_kernel: name must be a str"):
        sim.cuda_kernel('extern "C" __global__ void f(float* x) {}', None, sim=lambda x: None)


def test_asarray_of_a_freed_array_is_refused_at_the_call(sim):
    a = sim.zeros(3)
    a.free()
    with pytest.raises(sim.FreedArrayError, match="has been freed"):
        sim.asarray(a)


@pytest.mark.parametrize("tool", [None, 3, "trace"])
def test_an_instrument_without_any_hook_is_refused(sim, tool):
    with pytest.raises(TypeError, match="defines none of the hooks"):
        sim.instrument(tool)
    x = sim.zeros(4)                            # nothing registered: the runtime goes on
    assert (x + 1).tolist() == [1.0] * 4


def test_a_tuple_or_record_for_a_cuda_c_number_says_to_pass_the_values_separately(env):
    ag, k, x, y = env
    record = np.array([(1.0, 2.0)], dtype=[("a", "f4"), ("b", "f4")])[0]
    for arg, what in [((1.0, 2.0), r"a tuple \(1.0, 2.0\)"), (record, "a NumPy record")]:
        with pytest.raises(ag.ArgumentError, match=(
                rf"kernel 'axpy' .*argument 2 'a': expected a float number, got {what}.*"
                "declare a parameter per value and pass them separately")):
            k[1, 8](x, y, arg, 8)
    ag.synchronize()
    assert y.numpy().tolist() == list(range(8))


def test_a_list_tuple_or_array_array_for_an_array_parameter_says_to_convert_it(env):
    """Host sequences given for an annotated Numba parameter or a CUDA C pointer get the fix a
    NumPy array gets (asyncgpu.asarray), not "remove the annotation", which only changed the
    error."""
    import array

    ag, k, x, y = env

    @ag.kernel(const=["src"])
    @cuda.jit
    def copy(src, dst):
        i = cuda.grid(1)
        if i < dst.size:
            dst[i] = src[i]

    fix = r"convert it with asyncgpu.asarray\(x\), which copies it into"
    for host in ([1.0] * 8, (1.0,) * 8, array.array("f", [1.0] * 8)):
        with pytest.raises(ag.ArgumentError, match=(
                rf"kernel 'copy' .*argument 0 'src': the parameter is annotated const.*{fix}")):
            copy[1, 8](host, y)
        with pytest.raises(ag.ArgumentError, match=(
                rf"kernel 'axpy' .*argument 0 'x': expected an asyncgpu array for "
                rf"'const float\*', got .*; {fix}")):
            k[1, 8](host, y, 1.0, 8)
    with pytest.raises(ag.ArgumentError, match="if the tuple is meant as one value, remove "
                                               "the annotation"):
        copy[1, 8]((1.0,) * 8, y)
    copy[1, 8](ag.asarray(np.full(8, 3, np.float32)), y)
    assert y.numpy().tolist() == [3.0] * 8



def test_an_array_in_the_other_byte_order_is_named_so_for_a_cuda_c_pointer(env):
    """"expected a float32 array for 'float*', got float32[4]" contradicted itself: the
    message names the byte order. (No public call makes such an array any more, astype
    included: one is made by hand, as a foreign import the checks missed would be.)"""
    ag, k, x, y = env
    other = ">" if np.little_endian else "<"
    swapped = ag.Array._view(x._alloc, x.shape, np.dtype(other + "f4"), x.strides, x._offset)
    with pytest.raises(ag.ArgumentError, match=(
            rf"argument 0 'x': expected a float32 array for 'const float\*', got float32 "
            rf"\({'big' if other == '>' else 'little'}-endian\)\[8\]")):
        k[1, 8](swapped, y, 1.0, 8)


@pytest.mark.parametrize("decl, arg, expected", [
    ("int n", "seven", "expected an int number, got str"),
    ("unsigned int n", "seven", "expected an unsigned int number, got str"),
    ("int n", True, "expected an int, got the bool True"),
    ("float n", "seven", "expected a float number, got str"),
    ("uint8_t n", "seven", "expected a uint8_t number, got str"),
    ("int* n", np.zeros(2, np.float32), "expected an int32 array for 'int\\*'"),
    ("unsigned char* n", np.zeros(2, np.float32), "expected a uint8 array"),
])
def test_messages_name_types_with_the_article_english_reads_them_with(sim, decl, arg, expected):
    k = sim.cuda_kernel(f'extern "C" __global__ void f({decl}) {{}}', "f", sim=lambda n: None)
    if isinstance(arg, np.ndarray):
        arg = sim.array(arg)
    with pytest.raises(sim.ArgumentError, match=expected):
        k[1, 1](arg)
