"""Preparing and enqueuing kernel launches on the ``cuda`` backend.

Numba kernels are compiled for the argument types once (``Dispatcher.compile``) *before*
anything is enqueued, so a typing error leaves the runtime untouched; each launch then calls the
compiled kernel directly with cached Numba views of the arrays and a cached Numba wrapper of the
CuPy stream. CUDA C kernels go through a CuPy ``RawKernel``; pointers are passed by value and
scalars converted to their declared C types (CuPy would pass a Python ``int`` as 8 bytes).
"""

from __future__ import annotations

from typing import Any


from .._errors import ArgumentError, ArgumentValueError, CompileError
from .._kernel import CudaCSource, Kernel


def _numba_view(array: Any) -> Any:
    view = array._cache.get("numba")
    if view is None:
        from numba import cuda

        view = cuda.from_cuda_array_interface(array.__cuda_array_interface__, owner=None,
                                              sync=False)
        array._cache["numba"] = view
    return view


def _numba_type(disp: Any, array: Any) -> Any:
    t = array._cache.get("numba_type")
    if t is None:
        t = array._cache["numba_type"] = disp.typeof_pyval(_numba_view(array))
    return t


def _cupy_view(backend: Any, array: Any) -> Any:
    """A CuPy array over the same memory (CuPy's fastest kernel-argument path), cached."""
    view = array._cache.get("cupy")
    if view is None:
        cupy = backend.cupy
        buf = array._alloc.buffer
        if buf.nbytes == 0:
            view = array._cache["cupy"] = cupy.empty(array.shape, array.dtype)
            return view
        mem = cupy.cuda.UnownedMemory(buf.ptr, buf.nbytes, array._alloc, backend.device)
        ptr = cupy.cuda.MemoryPointer(mem, array._offset)
        view = cupy.ndarray(array.shape, array.dtype, ptr, array.strides)
        array._cache["cupy"] = view
    return view


def _dispatcher(kernel: Kernel) -> Any:
    disp = kernel._compiled.get("cuda")
    if disp is None:
        from numba import cuda

        src = kernel.source
        disp = src.dispatcher
        if disp is None or not hasattr(disp, "compile") or type(disp).__name__ == "FakeCUDAKernel":
            disp = cuda.jit(src.py_func)
        kernel._compiled["cuda"] = disp
    return disp


class NumbaLaunch:
    __slots__ = ("backend", "compiled", "args", "grid", "block", "shared")

    def __init__(self, backend: Any, compiled: Any, args: list[Any], grid: Any, block: Any,
                 shared: int) -> None:
        self.backend = backend
        self.compiled = compiled
        self.args = args
        self.grid, self.block, self.shared = grid, block, shared

    def __call__(self, stream: Any) -> None:
        self.compiled.launch(self.args, self.grid, self.block, self.backend.numba_stream(stream),
                             self.shared)


class RawLaunch:
    __slots__ = ("raw", "args", "grid", "block", "shared")

    def __init__(self, raw: Any, args: tuple[Any, ...], grid: Any, block: Any, shared: int) -> None:
        self.raw = raw
        self.args = args
        self.grid, self.block, self.shared = grid, block, shared

    def __call__(self, stream: Any) -> None:
        self.raw(self.grid, self.block, self.args, stream=stream, shared_mem=self.shared)


def _raw_kernel(backend: Any, kernel: Kernel) -> Any:
    raw = kernel._compiled.get("raw")
    if raw is None:
        src: CudaCSource = kernel.source
        raw = src.raw or backend.cupy.RawKernel(src.code, src.name, options=src.options)
        try:
            raw.compile()
        except Exception as exc:
            raise CompileError(
                f"kernel '{src.name}' failed to compile:\n{exc}"
            ) from exc
        kernel._compiled["raw"] = raw
    return raw


def _check_block(kernel: Kernel, launcher: Any, site: str | None, limit: int, regs: int) -> None:
    """Refuse a block the compiled kernel cannot run (the driver would refuse it after enqueue)."""
    threads = 1
    for d in launcher.block:
        threads *= d
    if threads > limit:
        where = f"kernel '{kernel.name}'" + (f" (launched at {site})" if site else "")
        raise ArgumentValueError(
            f"{where}: a block of {threads} threads is more than this kernel can run: it uses "
            f"{regs} registers per thread, so at most {limit} threads per block fit; launch it "
            f"with at most {limit} threads per block"
        )


def make_launch(backend: Any, kernel: Kernel, launcher: Any, arrays: list[Any],
                values: list[Any], site: str | None) -> Any:
    """Compile if needed and build the launch object (nothing is enqueued here)."""
    args = list(values)
    if isinstance(kernel.source, CudaCSource):
        raw = _raw_kernel(backend, kernel)
        _check_block(kernel, launcher, site, raw.max_threads_per_block, raw.num_regs)
        for a in arrays:
            args[a.index] = _cupy_view(backend, a.array)
        return RawLaunch(raw, tuple(args), launcher.grid, launcher.block, launcher.shared)
    disp = _dispatcher(kernel)
    types = list(args)
    array_slots = {a.index for a in arrays}
    for i, v in enumerate(args):
        if i not in array_slots:
            types[i] = disp.typeof_pyval(v)
    for a in arrays:
        args[a.index] = _numba_view(a.array)
        types[a.index] = _numba_type(disp, a.array)
    types = tuple(types)
    compiled = kernel._compiled.get(types)
    if compiled is None:
        try:
            compiled = disp.compile(types)
        except Exception as exc:
            where = f"kernel '{kernel.name}'" + (f" (launched at {site})" if site else "")
            raise ArgumentError(
                f"{where}: Numba cannot compile it for the argument types "
                f"({', '.join(map(str, types))}): {exc}"
            ) from exc
        kernel._compiled[types] = compiled
    _check_block(kernel, launcher, site, compiled.max_threads_per_block, compiled.regs_per_thread)
    return NumbaLaunch(backend, compiled, args, launcher.grid, launcher.block, launcher.shared)
