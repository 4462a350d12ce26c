"""How the ``sim`` backend runs one kernel launch: snapshot at begin, run and publish at end.

Numba kernels run in Numba's CUDA simulator (whatever ``NUMBA_ENABLE_CUDASIM`` says: the
simulator's kernel class is used directly on the kernel's Python function). CUDA C kernels run
their ``sim=`` twin. Arrays are passed as NumPy views of a private snapshot of the bytes the
launch may touch; arguments sharing an allocation share one snapshot, so aliasing inside a
launch behaves as on the device.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterator
from typing import Any, Callable

import numpy as np

from ...core.errors import AnnotationViolation, ArgumentError, AsyncGPUError
from ...runtime.array import Array
from ...runtime.kernel import CudaCSource, Kernel

#: The byte every simulated allocation holds until written, and what a write-only argument's
#: elements become at a launch's begin: a read of bytes nobody wrote shows as this pattern.
POISON = 0xFF


#: Numba's simulator runs one launch at a time in a process: the launch's context (its grid,
#: its block, its shared memory) is a global of the simulator, and a launch that finds another
#: one's context runs as a device function of it. Launches from several threads (runtimes of
#: their own, each with its own lock) take turns here.
_simulating = threading.Lock()
#: The interpreter's thread switch interval while Numba's simulator runs a launch. A block's
#: threads are Python threads that take turns with the simulator's loop polling them; at
#: Python's default interval (5 ms) each turn of that loop holds the interpreter for the whole
#: interval (the suite's HITS in every mode at the tiny scale: 24.8 s at 5 ms, 5.8 s at 50 us).
SIMULATOR_SWITCH_S = 5e-5
_shared_arrays = threading.Lock()
#: Whether :func:`_shared_array` is in place (decided at the first launch; None before).
_shared_safe: bool | None = None


def _shared_array(self: Any, shape: Any, dtype: Any, alignment: Any = None) -> np.ndarray:
    """``cuda.shared.array`` in Numba's simulator: one array per block and call site, as
    Numba's own, but looked up and made under a lock. Numba's (numba-cuda 0.30) looks the call
    site up and stores a new array without one, so two threads of a block switched between
    the two got two arrays, and a block reduction went wrong (seen with short switch
    intervals). Installed over Numba's by :func:`_install_shared_arrays`."""
    if alignment is not None:
        raise RuntimeError("Array alignment is not supported in cudasim")
    from numba.cuda import types
    from numba.cuda.np import numpy_support

    dtype = np.dtype(numpy_support.as_dtype(dtype) if isinstance(dtype, types.Type) else dtype)
    if shape == 0:      # the launch's dynamic shared memory: one buffer for all
        return np.frombuffer(self._dynshared.data, dtype=dtype,
                             count=self._dynshared_size // dtype.itemsize)
    caller = sys._getframe(1)
    site = (caller.f_code.co_filename, caller.f_lineno)
    with _shared_arrays:
        array = self._allocations.get(site)
        if array is None:
            array = self._allocations[site] = np.empty(shape, dtype)
    return array


def _install_shared_arrays() -> bool:
    """Put :func:`_shared_array` in place of Numba's simulated ``cuda.shared.array`` where the
    simulator keeps its arrays as this module expects; whether it is in place."""
    from numba.cuda.simulator import kernelapi

    shared = getattr(kernelapi, "FakeCUDAShared", None)
    if shared is None:
        return False
    if shared.array is _shared_array:
        return True
    probe = shared(0)
    if not all(hasattr(probe, name) for name in ("_allocations", "_dynshared",
                                                   "_dynshared_size")):
        return False
    shared.array = _shared_array
    return True


@contextlib.contextmanager
def _one_launch() -> Iterator[None]:
    """The simulator to this thread's launch alone, with :data:`SIMULATOR_SWITCH_S` as the
    switch interval meanwhile where its shared arrays are safe with it (the interval before
    it afterwards)."""
    global _shared_safe
    with _simulating:
        if _shared_safe is None:
            _shared_safe = _install_shared_arrays()
        if not _shared_safe:
            yield
            return
        saved = sys.getswitchinterval()
        sys.setswitchinterval(min(saved, SIMULATOR_SWITCH_S))
        try:
            yield
        finally:
            sys.setswitchinterval(saved)


def _is_real_device_function(obj: Any) -> bool:
    options = getattr(obj, "targetoptions", None)
    return isinstance(options, dict) and bool(options.get("device")) and hasattr(obj, "py_func")


@contextlib.contextmanager
def _simulated_device_functions(fn: Any) -> Iterator[None]:
    """Swap compiled ``@cuda.jit(device=True)`` functions in ``fn``'s globals for simulated ones.

    When ``numba.cuda`` was imported without ``NUMBA_ENABLE_CUDASIM``, device functions are real
    dispatchers that cannot be called from Python; the simulator needs Python versions. Device
    functions calling device functions in other modules are swapped there too.
    """
    from numba.cuda.simulator.kernel import FakeCUDAKernel

    swapped: list[tuple[dict[str, Any], str, Any]] = []
    pending, seen = [fn], set()
    while pending:
        f = pending.pop()
        globs = getattr(f, "__globals__", None)
        if globs is None or id(globs) in seen:
            continue
        seen.add(id(globs))
        for name, obj in list(globs.items()):
            if _is_real_device_function(obj):
                globs[name] = FakeCUDAKernel(obj.py_func, device=True)
                swapped.append((globs, name, obj))
                pending.append(obj.py_func)
    try:
        yield
    finally:
        for globs, name, obj in reversed(swapped):
            globs[name] = obj


def _numba_runner(kernel: Kernel, py_or_fake: Any, grid: tuple[int, ...], block: tuple[int, ...],
                  shared: int) -> Callable[[list[Any]], None]:
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray
    from numba.cuda.simulator.kernel import FakeCUDAKernel

    fake = kernel._compiled.get("sim")
    if fake is None:
        if isinstance(py_or_fake, FakeCUDAKernel):
            fake = py_or_fake
        else:
            fake = FakeCUDAKernel(getattr(py_or_fake, "py_func", py_or_fake), device=False)
        kernel._compiled["sim"] = fake

    def run(args: list[Any]) -> None:
        wrapped = [FakeCUDAArray(a) if isinstance(a, np.ndarray) else a for a in args]
        with _one_launch(), _simulated_device_functions(fake.fn):
            fake[grid, block, 0, shared](*wrapped)

    return run


def _runner(kernel: Kernel, launcher: Any) -> Callable[[list[Any]], None]:
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
        return lambda args: twin(*args)
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
        try:
            self.run(self._views(snaps, writable))
        except ValueError as exc:
            if "read-only" not in str(exc):
                raise
            raise self._const_violation(snaps, writable) from exc
        for a in arrays:
            if a.write:
                buf, lo0, snap = snaps[a.buffer.uid]
                buf.on(self.device)[a.lo:a.hi] = snap[a.lo - lo0: a.hi - lo0]

    def _overlaps_other(self, a: _Spec) -> bool:
        return any(
            b is not a and b.buffer is a.buffer and b.lo < a.hi and a.lo < b.hi
            for b in self.arrays
        )

    def _const_violation(self, snaps: dict[int, Any], writable: set[int]) -> AnnotationViolation:
        """Find which read-only argument the kernel wrote, by running it on copies."""
        where = f"kernel '{self.kernel.name}'" + (f" (launched at {self.site})" if self.site else "")
        everything = {a.index for a in self.arrays}
        for a in self.arrays:
            if a.index in writable:
                continue
            copies = {uid: (buf, lo0, snap.copy()) for uid, (buf, lo0, snap) in snaps.items()}
            try:
                self.run(self._views(copies, everything - {a.index}))
            except ValueError as exc:
                if "read-only" in str(exc):
                    return AnnotationViolation(
                        f"{where} wrote argument {a.index} '{a.param}' ({a.desc}), which is "
                        f"declared const; remove '{a.param}' from const=[...] or stop writing it"
                    )
            except Exception:
                continue
        return AnnotationViolation(f"{where} wrote an argument declared const")


def make_launch(kernel: Kernel, launcher: Any, arrays: list[Any], values: list[Any],
                site: str | None) -> SimKernelLaunch:
    """Prepare a launch for the sim backend (raises before enqueue if it cannot run)."""
    if not isinstance(kernel.source, CudaCSource):
        _type_scalars(kernel, values, site)
    return SimKernelLaunch(kernel, _runner(kernel, launcher), arrays, values, site)


def _type_scalars(kernel: Kernel, values: list[Any], site: str | None) -> None:
    """Refuse, as Numba's compile on the ``cuda`` backend does, a scalar Numba cannot type
    (an int beyond 64 bits, an object): the simulator runs the kernel as Python, which would
    take it."""
    import numba

    for i, v in enumerate(values):
        if type(v) is Array or isinstance(v, (bool, float, np.generic)):
            continue
        try:
            numba.typeof(v)
        except Exception as exc:   # noqa: BLE001 - (ValueError for big ints, others for objects)
            where = f"kernel '{kernel.name}'" + (f" (launched at {site})" if site else "")
            raise ArgumentError(f"{where}, argument {i}: Numba cannot type {v!r} "
                                f"({type(v).__name__}): {exc}") from None
