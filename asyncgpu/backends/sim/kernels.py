"""How the ``sim`` backend runs one kernel launch: snapshot at begin, run and publish at end.

Numba kernels run in Numba's CUDA simulator (whatever ``NUMBA_ENABLE_CUDASIM`` says: the
simulator's kernel class is used directly on the kernel's Python function). CUDA C kernels run
their ``sim=`` twin. Arrays are passed as NumPy views of a private snapshot of the bytes the
launch may touch; arguments sharing an allocation share one snapshot, so aliasing inside a
launch behaves as on the device.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import numpy as np

from ...core.errors import AnnotationViolation, ArgumentError, AsyncGPUError
from ...runtime.array import Array
from ...runtime.dtypes import long_double
from ...runtime.kernel import CudaCSource, Kernel
from .elements import NARROW, Boolean, device_integer
from .numba_sim import barrier_free, one_launch, simulated_device_functions

#: The byte every simulated allocation holds until written, and what a write-only argument's
#: elements become at a launch's begin: a read of bytes nobody wrote shows as this pattern.
POISON = 0xFF


@functools.lru_cache(maxsize=1)
def _sim_array() -> Any:
    """Numba's simulated device array as a launch's arguments need it where Numba's own does
    not do what the GPU does: ``promote``, element reads of integers of under 64 bits (and of
    booleans) as Numba's arithmetic sees them, 64-bit integers (``x[0] + x[0]`` of an int8 array
    holding 100 is 200 on the GPU; NumPy's int8 gives -56); writes to an integer array convert as
    the device converts (:func:`device_integer`); ``unset``, for an argument declared ``out``
    (write-only), a mask of the elements not written yet in this launch: a read of one is noted in
    ``seen`` (the kernel computes from what the array held, which ``out=`` says it does not)."""
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

    class SimArray(FakeCUDAArray):
        def __init__(self, ary: np.ndarray, stream: Any = 0, promote: bool = False,
                     unset: np.ndarray | None = None, seen: list[Any] | None = None) -> None:
            super().__init__(ary, stream=stream)
            self._promote, self._unset, self._seen = promote, unset, seen

        def __getitem__(self, idx: Any) -> Any:
            ret = self._ary[idx]
            unset = self._unset
            if type(ret) is np.ndarray or type(ret) is np.void:
                return SimArray(ret, self.stream, self._promote,
                                None if unset is None else unset[idx], self._seen)
            if unset is not None and unset[idx]:
                self._seen.append(idx)
            return NARROW[ret.dtype](ret) if self._promote else ret

        def __setitem__(self, idx: Any, val: Any) -> None:
            ary = self._ary
            if type(val) is not ary.dtype.type and ary.dtype.kind in "iu":
                val = device_integer(val, ary.dtype)
            ary[idx] = val
            if self._unset is not None:
                self._unset[idx] = False

    return SimArray


def _numba_runner(kernel: Kernel, py_or_fake: Any, grid: tuple[int, ...], block: tuple[int, ...],
                  shared: int) -> Callable[[list[Any]], None]:
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray
    from numba.cuda.simulator.kernel import FakeCUDAKernel

    fake = kernel._compiled.get("sim")
    if fake is None:
        if isinstance(py_or_fake, FakeCUDAKernel):
            fake = py_or_fake
        else:
            options = getattr(py_or_fake, "targetoptions", None) or {}
            fake = FakeCUDAKernel(getattr(py_or_fake, "py_func", py_or_fake), device=False,
                                  debug=bool(options.get("debug", False)))
        kernel._compiled["sim"] = fake

    one_thread = kernel._compiled.get("sim_one_thread")
    if one_thread is None:
        one_thread = kernel._compiled["sim_one_thread"] = barrier_free(fake.fn)

    sim_array = _sim_array()

    def run(args: list[Any], outs: dict[int, list[Any]] | None = None) -> None:
        wrapped = []
        for i, a in enumerate(args):
            if isinstance(a, np.ndarray):
                # (integer arrays store as the device converts: ``device_integer``)
                integers = a.dtype.kind in "iu"
                # (a bool computes as an integer in Numba: True + True is 2, -True -1)
                promote = integers and a.dtype.itemsize < 8 or a.dtype.kind == "b"
                seen = outs.get(i) if outs else None
                a = (sim_array(a, 0, promote, None if seen is None else np.ones(a.shape, bool),
                               seen)
                     if promote or integers or seen is not None else FakeCUDAArray(a))
            wrapped.append(a)
        with one_launch(one_thread), simulated_device_functions(fake.fn):
            fake[grid, block, 0, shared](*wrapped)

    return run


def _runner(kernel: Kernel, launcher: Any) -> Callable[..., None]:
    src = kernel.source
    if isinstance(src, CudaCSource):
        twin = src.sim
        if twin is None:
            raise AsyncGPUError(
                f"kernel '{kernel.name}' is CUDA C and the sim backend cannot compile it: give "
                f"it a Python twin, e.g. asyncgpu.cuda_kernel(source, '{kernel.name}', "
                "sim=twin), where twin is a @cuda.jit kernel or a NumPy function"
            )
        if src.sim_runs_blocks:
            return _numba_runner(kernel, twin, launcher.grid, launcher.block, launcher.shared)
        return lambda args, outs=None: twin(*args)
    return _numba_runner(kernel, src.dispatcher or src.py_func, launcher.grid, launcher.block,
                         launcher.shared)



def snapshot(layouts: Any, device: int = 0) -> dict[int, tuple[Any, int, np.ndarray]]:
    """A private copy of the bytes each buffer's layouts span on device ``device`` (what a
    kernel or call reads at its begin, so that writes by others before its end cannot reach
    it)."""
    spans: dict[int, list[Any]] = {}
    for a in layouts:
        span = spans.get(a.buffer.uid)
        if span is None:
            spans[a.buffer.uid] = [a.buffer, a.lo, a.hi]
        else:
            span[1] = min(span[1], a.lo)
            span[2] = max(span[2], a.hi)
    return {uid: (buf, lo, buf.on(device)[lo:hi].copy()) for uid, (buf, lo, hi) in spans.items()}


def overlap(a: Any, b: Any) -> bool:
    """Whether layouts ``a`` and ``b`` share bytes of one buffer (by their extents)."""
    return b.buffer is a.buffer and b.lo < a.hi and a.lo < b.hi


def dense(a: Any) -> bool:
    """Whether the elements of layout ``a`` fill its bytes ``[lo, hi)``, each byte once: they
    share none (a zero or overlapping stride would) and hold as many as the extent spans."""
    if a.hi - a.lo != int(np.prod(a.shape)) * a.dtype.itemsize:
        return False
    reach = a.dtype.itemsize - 1     # (the last byte of the lower axes' elements, from the first)
    for n, st in sorted(((n, abs(st)) for n, st in zip(a.shape, a.strides) if n > 1),
                        key=lambda axis: axis[1]):
        if st <= reach:
            return False
        reach += (n - 1) * st
    return True


class _Spec:
    """What a queued launch needs of one array argument: the buffer and layout, not the Array.

    Holding the Array would keep its memory alive by accident; lifetime is the runtime's job.
    """

    __slots__ = ("index", "param", "read", "write", "buffer", "lo", "hi", "offset", "shape",
                 "strides", "dtype", "desc")

    def __init__(self, a: Any) -> None:
        arr = a.array
        self.index, self.param, self.read, self.write = a.index, a.param, a.read, a.write
        self.buffer = arr._alloc.buffer
        self.lo, self.hi, self.offset = arr._lo, arr._hi, arr._offset
        self.shape, self.strides, self.dtype = arr.shape, arr.strides, arr.dtype
        self.desc = arr.describe()


class SimKernelLaunch:
    """One queued launch: ``begin()`` snapshots, ``end(state)`` runs and publishes."""

    __slots__ = ("kernel", "run", "arrays", "values", "site", "device")

    def __init__(self, kernel: Kernel, run: Callable[[list[Any]], None], arrays: list[Any],
                 values: list[Any], site: str | None) -> None:
        self.kernel = kernel
        self.run = run
        self.arrays = [_Spec(a) for a in arrays]
        self.values = [None if i in {a.index for a in arrays} else v for i, v in enumerate(values)]
        self.site = site
        self.device = 0         # the device it runs on (set when it is enqueued)

    def begin(self) -> dict[int, tuple[Any, int, np.ndarray]]:
        return snapshot(self.arrays, self.device)

    def written_ranges(self) -> list[tuple[int, int, int, bool]]:
        """``(uid, lo, hi, overwritten)`` of every array the launch writes: ``overwritten``
        where it writes each byte of ``[lo, hi)`` and reads none (``out``, write-only, over
        dense elements); a read-write argument's new bytes derive from its old ones."""
        return [(a.buffer.uid, a.lo, a.hi, not a.read and dense(a) and not any(
                    b.read and overlap(a, b) for b in self.arrays))   # (read through another)
                for a in self.arrays if a.write]

    def _views(self, snaps: dict[int, tuple[Any, int, np.ndarray]], writable: set[int]
               ) -> list[Any]:
        args = list(self.values)
        for a in self.arrays:
            _, lo0, snap = snaps[a.buffer.uid]
            if 0 in a.shape:
                view = np.empty(a.shape, a.dtype)
            else:
                view = np.ndarray(a.shape, a.dtype, buffer=snap, offset=a.offset - lo0,
                                  strides=a.strides)
            if a.index not in writable:
                view.flags.writeable = False
            args[a.index] = view
        return args

    def end(self, snaps: dict[int, tuple[Any, int, np.ndarray]]) -> None:
        arrays = self.arrays
        for a in arrays:
            if not a.read and not self._overlaps_other(a) and 0 not in a.shape:
                # write-only: the old contents are undefined, and a kernel must not rely on them.
                # Only the view's elements: a strided view's gaps belong to others (the extent
                # is copied back whole below).
                _, lo0, snap = snaps[a.buffer.uid]
                elements = np.ndarray(a.shape, np.dtype((np.void, a.dtype.itemsize)), buffer=snap,
                                      offset=a.offset - lo0, strides=a.strides)
                elements[...] = np.void(bytes([POISON]) * a.dtype.itemsize)
        writable = {a.index for a in arrays if a.write}
        # (the write-only arguments' reads of elements not written yet, by argument)
        outs: dict[int, list[Any]] = {a.index: [] for a in arrays
                                      if not a.read and not self._overlaps_other(a)}
        # (what the run starts from, for finding which const argument it wrote: the run changes
        # the bytes of the buffers it writes, and a write that depends on them may not happen
        # again on what it left; only where a const argument may be written)
        before = None
        if len(writable) < len(arrays):
            written = {a.buffer.uid for a in arrays if a.write}
            before = {uid: (buf, lo0, snap.copy() if uid in written else snap)
                      for uid, (buf, lo0, snap) in snaps.items()}
        try:
            self.run(self._views(snaps, writable), outs)
        except ValueError as exc:
            # (NumPy's refusal to write a read-only array, which a const argument is; the
            # kernel's own error where it is no argument's)
            violation = (self._const_violation(before, writable)
                         if before is not None and "read-only" in str(exc) else None)
            if violation is None:
                raise
            raise violation from exc
        for a in arrays:
            if outs.get(a.index):
                raise self._out_violation(a, outs[a.index][0])
        for a in arrays:
            if a.write:
                buf, lo0, snap = snaps[a.buffer.uid]
                buf.on(self.device)[a.lo:a.hi] = snap[a.lo - lo0: a.hi - lo0]

    def _overlaps_other(self, a: _Spec) -> bool:
        return any(b is not a and overlap(a, b) for b in self.arrays)

    def _out_violation(self, a: _Spec, index: Any) -> AnnotationViolation:
        where = f"kernel '{self.kernel.name}'" + (f" (launched at {self.site})" if self.site else "")
        return AnnotationViolation(
            f"{where} read argument {a.index} '{a.param}' ({a.desc}) at {index!r} before "
            f"writing it there, and '{a.param}' is declared out (write-only): the kernel "
            f"computes from what it held, which the runtime does not keep for it; remove "
            f"'{a.param}' from out=[...]")

    def _const_violation(self, before: dict[int, Any], writable: set[int]
                         ) -> AnnotationViolation | None:
        """Find which read-only argument the kernel wrote, by running it again on copies of
        ``before``, the snapshots as the failed run started from them (so that a write that
        depends on data the failed run changed happens again): with every argument writable,
        then each const argument alone read-only. None where it fails so with every argument
        writable: the read-only array it wrote is its own (a twin's NumPy table), and its error
        is its own to report."""
        where = f"kernel '{self.kernel.name}'" + (f" (launched at {self.site})" if self.site else "")
        everything = {a.index for a in self.arrays}

        def refused(read_only: set[int]) -> bool:
            copies = {uid: (buf, lo0, snap.copy()) for uid, (buf, lo0, snap) in before.items()}
            try:
                self.run(self._views(copies, everything - read_only))
            except ValueError as exc:
                return "read-only" in str(exc)
            except Exception:       # noqa: BLE001 - (any other failure: not this write)
                return False
            return False

        if refused(set()):
            return None
        consts = [a for a in self.arrays if a.index not in writable]
        for a in consts:
            if refused({a.index}):
                return _wrote(AnnotationViolation(
                    f"{where} wrote argument {a.index} '{a.param}' ({a.desc}), which is "
                    f"declared const; remove '{a.param}' from const=[...] or stop writing it"),
                    [a])
        return _wrote(AnnotationViolation(f"{where} wrote an argument declared const"), consts)


def _wrote(violation: AnnotationViolation, arrays: list[_Spec]) -> AnnotationViolation:
    """``violation``, with the spans of the const arguments it wrote (``written``): on a GPU
    the kernel would have changed them, so a host read of them must fault, not pass the
    bytes the simulator kept (``asyncgpu.backends.sim.fault_marks``)."""
    violation.written = [(a.buffer.uid, a.lo, a.hi) for a in arrays]
    return violation


def make_launch(kernel: Kernel, launcher: Any, arrays: list[Any], values: list[Any],
                site: str | None) -> SimKernelLaunch:
    """Prepare a launch for the sim backend (raises before enqueue if it cannot run)."""
    if not isinstance(kernel.source, CudaCSource):
        _type_scalars(kernel, values, site)
        values = [_as_numba_computes(v) for v in values]
    return SimKernelLaunch(kernel, _runner(kernel, launcher), arrays, values, site)


def _as_numba_computes(v: Any) -> Any:
    """An integer scalar argument of a Numba kernel as Numba's arithmetic sees it: a 64-bit
    integer (Numba computes on integers of at least 64 bits, and wraps there), where the
    kernel's Python body would compute on the NumPy type (``np.int8(100) + np.int8(100)`` is
    -56, on the GPU 200) or on an unbounded Python int. Unsigned ones beyond int64 stay
    ``uint64``. A bool (Python's or NumPy's) is a :class:`Boolean`, which computes as Numba's
    (``True + True`` is 2, ``~b`` is ``not b``) where Python's ``~True`` is -2 and NumPy's
    ``np.True_ + np.True_`` is True. A Python float is a float64 and a complex a complex128,
    which compute as IEEE numbers do (``1.0 / s`` of a zero is inf, ``s ** 0.5`` of a negative
    NaN, where Python's raise ZeroDivisionError or give a complex; the launch's threads ignore
    floating-point errors, as Numba's numpy error model does). NumPy floats, records and arrays
    are left as they are; a tuple's items become the same (Numba types a tuple by its items)."""
    t = type(v)
    if t is bool or t is np.bool_:
        return Boolean(v)
    if isinstance(v, tuple):
        items = [_as_numba_computes(x) for x in v]
        return v._make(items) if hasattr(v, "_make") else tuple(items)
    if t is int:
        return np.int64(v) if -2**63 <= v < 2**63 else np.uint64(v)
    if t is float:
        return np.float64(v)
    if t is complex:
        return np.complex128(v)
    if isinstance(v, np.integer) and t is not np.int64 and t is not np.uint64:
        return np.int64(v)
    return v


def _type_scalars(kernel: Kernel, values: list[Any], site: str | None) -> None:
    """Refuse, as Numba's compile on the ``cuda`` backend does, a scalar Numba cannot type
    (an int beyond 64 bits, NumPy's long double, an object): the simulator runs the kernel as
    Python, which would take it."""
    import numba

    for i, v in enumerate(values):
        if type(v) is Array or isinstance(v, (bool, float)) or (
                isinstance(v, np.generic) and not long_double(v.dtype)
                and type(v) is not np.void):        # (a record's fields are typed too)
            continue
        try:
            if isinstance(v, np.number):
                raise TypeError(f"{v.dtype} (NumPy's long double) has no CUDA type")
            numba.typeof(v)
        except Exception as exc:   # noqa: BLE001 - (ValueError for big ints, others for objects)
            where = f"kernel '{kernel.name}'" + (f" (launched at {site})" if site else "")
            fix = ("an int of at most 64 bits" if isinstance(v, int) else
                   "a float64 or complex128 value" if isinstance(v, np.number) else
                   "numbers Numba can type (ints of at most 64 bits, no long double), records "
                   "or tuples of them" if isinstance(v, (tuple, np.void)) else
                   "a number, a bool or an asyncgpu array")
            raise ArgumentError(f"{where}, argument {i} '{kernel.params[i].name}': Numba cannot "
                                f"type {v!r} ({type(v).__name__}): {exc}; pass {fix}") from None
