"""Preparing and enqueuing kernel launches on the ``cuda`` backend.

Numba kernels are compiled for the argument types once (``Dispatcher.compile``) *before*
anything is enqueued, so a typing error leaves the runtime untouched. CUDA C kernels are
compiled through a CuPy ``RawKernel``. Both then launch through a packed plan (``packed.py``):
the argument values are gathered here, per launch, from values cached on the arrays (pointers,
Numba's array fields), and the enqueue is a single ``cuLaunchKernel``. Argument kinds the plan
does not cover fall back to Numba's own launch or to ``RawKernel.__call__``.
"""

from __future__ import annotations

import struct
import weakref
from typing import Any

import numpy as np

from ...core.errors import ArgumentError, BlockTooLargeError, CompileError
from ...runtime.allocation import View, c_contiguous
from ...runtime.array import Array
from ...runtime.kernel import CudaCSource, Kernel
from .numba_exit import keep_libraries_at_exit
from .packed import PackedPlan, cuda_c_plan, numba_array_fields, numba_plan


def _numba_view(backend: Any, array: Any) -> Any:
    """A Numba device array over ``array``'s memory on ``backend``'s device (cached)."""
    key = backend.cache_keys[2]
    view = array._cache.get(key)
    if view is None:
        from numba import cuda

        interface = (array._device_interface() if backend.slot == 0 else
                     array._device_interface_at(backend.buffer_of(array._alloc.buffer)))
        view = cuda.from_cuda_array_interface(interface, owner=None, sync=False)
        if array.dtype.fields is not None:     # (the interface's typestr is only |V<size>)
            view = view.view(array.dtype)
        array._cache[key] = view
    return view


def _numba_type(backend: Any, disp: Any, array: Any) -> Any:
    t = array._cache.get("numba_type")
    if t is None:
        t = array._cache["numba_type"] = disp.typeof_pyval(_numba_view(backend, array))
    return t


def _dispatcher(kernel: Kernel) -> Any:
    disp = kernel._compiled.get("cuda")
    if disp is None:
        from numba import cuda

        src = kernel.source
        disp = src.dispatcher
        if disp is None or not hasattr(disp, "compile") or type(disp).__name__ == "FakeCUDAKernel":
            disp = cuda.jit(src.py_func)
        keep_libraries_at_exit()
        kernel._compiled["cuda"] = disp
    return disp


class NumbaLaunch:
    """A launch through Numba's own path (argument kinds the packed path does not handle)."""

    __slots__ = ("backend", "compiled", "args", "grid", "block", "shared")

    def __init__(self, backend: Any, compiled: Any, args: list[Any], grid: Any, block: Any,
                 shared: int) -> None:
        self.backend = backend
        self.compiled = compiled
        self.args = args
        self.grid, self.block, self.shared = grid, block, shared

    def __call__(self, stream: Any) -> None:
        if getattr(self.compiled, "debug", False):
            self._launch_debug(stream)
            return
        self.compiled.launch(self.args, self.grid, self.block, self.backend.numba_stream(stream),
                             self.shared)

    def _launch_debug(self, stream: Any) -> None:
        """A ``debug=True`` kernel: Numba reads its error flag back, right after the launch,
        with a copy on the legacy default stream, which waits for nothing on our non-blocking
        streams (the flag was read before the kernel ran behind a parent, and its exception
        lost). So it runs on a blocking stream, which that copy waits for, after ``stream``'s
        work so far; ``stream`` then waits for it. (Numba's launch then returns once the
        kernel has run, as it does on its own streams.)"""
        backend = self.backend
        calls = backend.calls
        debug = backend.debug_stream()
        before, after = backend.create_event(), backend.create_event()
        calls.event_record(before.ptr, stream.ptr)
        calls.stream_wait(debug.ptr, before.ptr, 0)
        try:
            self.compiled.launch(self.args, self.grid, self.block, backend.numba_stream(debug),
                                 self.shared)
        finally:
            calls.event_record(after.ptr, debug.ptr)
            calls.stream_wait(stream.ptr, after.ptr, 0)


class RawLaunch:
    """A launch through CuPy's ``RawKernel.__call__`` (kernels without a typed declaration)."""

    __slots__ = ("raw", "args", "grid", "block", "shared")

    def __init__(self, raw: Any, args: tuple[Any, ...], grid: Any, block: Any, shared: int) -> None:
        self.raw = raw
        self.args = args
        self.grid, self.block, self.shared = grid, block, shared

    def __call__(self, stream: Any) -> None:
        self.raw(self.grid, self.block, self.args, stream=stream, shared_mem=self.shared)


class PackedTarget:
    """What every packed launch of one launcher shares: the plan and the launch dimensions
    (made once per launcher and argument types; ``Launcher.prepared`` keeps the latest).

    ``backend`` is a weak reference: a kernel's launchers outlive runtimes (they are cached on
    the kernel), and a strong one kept a dropped runtime's backend, its memory pool with it,
    alive until the launcher was next used with another backend."""

    __slots__ = ("backend", "key", "plan", "grid", "block", "shared", "ptr_key", "nbf_key",
                 "kernel_name")

    def __init__(self, backend: Any, key: Any, plan: PackedPlan, launcher: Any) -> None:
        self.backend = weakref.ref(backend)     # (call it: the backend, or None once dropped)
        self.key = key            # Numba: the argument types' tokens it was built for
        self.plan = plan
        self.grid, self.block, self.shared = launcher.grid3, launcher.block3, launcher.shared
        # the arrays' cached pointers and Numba fields on this backend's device
        self.ptr_key, self.nbf_key = backend.cache_keys[0], backend.cache_keys[1]
        self.kernel_name = launcher.kernel.name

    # Each gathering answers None when an array's cached values are missing or are not what
    # the target was built for (then make_launch gathers them again).
    def numba_values(self, values: list[Any]) -> tuple[Any, ...] | None:
        """The flat values of a packed Numba launch: each array's ABI fields, each number."""
        if type(values) is not list or not isinstance(self.key, list):
            return None
        key = self.key
        n = len(values)
        if len(key) != n:
            return None
        flat = []
        nbf_key = self.nbf_key
        for i in range(n):
            v = values[i]
            if isinstance(v, View):     # (an Array)
                arr = v
                cache = arr._cache
                fields = cache.get(nbf_key)
                if fields is None or fields[0] != key[i]:
                    return None
                flat.extend(fields[1])
            else:
                t = type(v)
                if (t if t is not int or _INT64_MIN <= v <= _INT64_MAX else _big_int_key(v)) \
                        != key[i]:
                    return None
                flat.append(v)
        return tuple(flat)

    def pointer_values(self, values: list[Any], arrays: list[Any]) -> tuple[Any, ...] | None:
        """The values of a packed CUDA C launch: each array's device pointer, each number."""
        args = list(values)
        ptr_key = self.ptr_key
        for a in arrays:
            arr = a.array
            cache = arr._cache
            ptr = cache.get(ptr_key)
            if ptr is None:
                return None
            args[a.index] = ptr
        return tuple(args)


class PackedLaunch:
    """A launch through a :class:`PackedPlan`: one ``cuLaunchKernel`` call (made by
    :func:`packed_launch`, once per launch)."""

    __slots__ = ("target", "values")

    def __call__(self, stream: Any) -> None:
        try:
            self.enqueue(stream)
        except struct.error as exc:
            raise unfit_argument(self.target.kernel_name, exc) from None

    def enqueue(self, stream: Any) -> None:
        """The launch on ``stream`` (``CudaBackend.launch`` calls this directly, and turns a
        ``struct.error`` into :func:`unfit_argument`'s, off the launch's path)."""
        t = self.target
        t.plan.launch(self.values, t.grid, t.block, t.shared, stream.ptr)


def unfit_argument(kernel_name: str, exc: struct.error) -> ArgumentError:
    """What a packed launch's ``struct.error`` means: a number beyond the type its parameter was
    compiled for (a Numba kernel given a signature). Packed before the launch: nothing was
    enqueued."""
    return ArgumentError(
        f"kernel '{kernel_name}': an argument does not fit the type of its parameter ({exc}); "
        "a kernel given a signature is compiled for its types only: pass values of the "
        "declared types")


def packed_launch(target: PackedTarget, values: tuple[Any, ...]) -> PackedLaunch:
    """The launch of ``values`` through ``target``: allocated directly (no ``__init__`` call to
    parse; this runs once per launch)."""
    launch = PackedLaunch.__new__(PackedLaunch)
    launch.target = target
    launch.values = values
    return launch


def _target(backend: Any, launcher: Any) -> Any:
    """The launcher's packed target on ``backend``: ``launcher.prepared`` for a backend of one
    device (or the first of several), the backend's own table for the others."""
    return launcher.prepared if backend.slot == 0 else backend.targets.get(launcher)


def _keep_target(backend: Any, launcher: Any, target: PackedTarget) -> PackedTarget:
    if backend.slot == 0:
        launcher.prepared = target
    else:
        backend.targets[launcher] = target
    return target


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
        raise BlockTooLargeError(
            f"{where}: a block of {threads} threads is more than this kernel can run: it uses "
            f"{regs} registers per thread, so at most {limit} threads per block fit; launch it "
            f"with at most {limit} threads per block"
        )


def make_launch(backend: Any, kernel: Kernel, launcher: Any, arrays: list[Any],
                values: list[Any], site: str | None) -> Any:
    """Compile if needed and build the launch object (nothing is enqueued here).

    The first launch of a kernel for given argument types compiles it, checks the block against
    the compiled kernel's limits and builds its packed plan; later launches of the same launcher
    find that in ``launcher.prepared`` and only gather the argument values.
    """
    if isinstance(kernel.source, CudaCSource):
        return _cuda_c_launch(backend, kernel, launcher, arrays, values, site)
    prepared = _target(backend, launcher)
    if isinstance(prepared, PackedTarget):
        target = prepared
        if target.backend() is backend:
            flat = target.numba_values(values)
            if flat is not None:
                return packed_launch(target, flat)
    return _numba_launch(backend, kernel, launcher, values, site)


def _numba_launch(backend: Any, kernel: Kernel, launcher: Any, values: list[Any],
                  site: str | None) -> Any:
    """make_launch of a Numba kernel whose launcher has no target for these values yet."""
    key = []
    flat: list[Any] = []
    nbf_key = backend.cache_keys[1]
    for v in values:
        if type(v) is Array:
            fields = v._cache.get(nbf_key)
            if fields is None:
                fields = v._cache[nbf_key] = _numba_fields(backend, v)
            key.append(fields[0])
            flat.extend(fields[1])
        else:
            key.append(_value_key(v))
            flat.append(v)
    target = _target(backend, launcher)
    if (isinstance(target, PackedTarget) and target.backend() is backend
            and target.key == key):
        return packed_launch(target, tuple(flat))
    # (compiled code is per device: the first device's entries keep their plain keys)
    compiled_key = tuple(key) if backend.slot == 0 else (tuple(key), backend.slot)
    entry = kernel._compiled.get(compiled_key)
    if entry is None:
        entry = kernel._compiled[compiled_key] = _compile_numba(backend, kernel, values, site)
    compiled, plan, checked = entry
    if plan is not None and plan.calls is not backend.calls:
        plan = numba_plan(compiled, backend.calls)      # (as for CUDA C: _cuda_c_prepare)
        kernel._compiled[compiled_key] = (compiled, plan, checked)
    if launcher.block not in checked:
        _check_block(kernel, launcher, site, compiled.max_threads_per_block,
                     compiled.regs_per_thread)
        checked.add(launcher.block)
    if plan is not None:
        target = _keep_target(backend, launcher, PackedTarget(backend, key, plan, launcher))
        return packed_launch(target, tuple(flat))
    args = [_numba_view(backend, v) if type(v) is Array else v for v in values]
    return NumbaLaunch(backend, compiled, args, launcher.grid, launcher.block, launcher.shared)


_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _big_int_key(v: int) -> str:
    """The launch key of a Python int beyond int64: Numba types one below 2**64 as a uint64
    (a plan of its own), and cannot type the others (its compile refuses them, an
    ``ArgumentError``; with one key for both, a plan made for a uint64 packed 2**64 and
    raised ``struct.error``)."""
    return "uint64" if 0 <= v < 2**64 else "bigint"


def _value_key(v: Any) -> Any:
    """The launch key of a value argument: what Numba types it by. A number by its type (an
    int beyond int64: :func:`_big_int_key`); a tuple by its type and its items' keys (its
    length with them), a record by its dtype: ``type(v)`` alone gave ``(1.0, 2.0)`` and
    ``(1, 2, 3)`` one compiled kernel, whose launch flattens both as the first one's types."""
    t = type(v)
    if t is int:
        return t if _INT64_MIN <= v <= _INT64_MAX else _big_int_key(v)
    if isinstance(v, tuple):
        return (t, tuple([_value_key(x) for x in v]))
    if t is np.void:
        return ("record", v.dtype, v.dtype.isalignedstruct)
    return t


def _numba_fields(backend: Any, array: Array) -> tuple[str, tuple[int, ...]]:
    """An array's type token (same token, same Numba type) and its Numba ABI values on
    ``backend``'s device."""
    dt = array.dtype        # (records: every |V16 is not the same Numba type)
    token = f"{dt.str if dt.fields is None else dt.descr}/{len(array.shape)}/" \
            f"{array.is_c_contiguous}/" \
            f"{c_contiguous(array.shape[::-1], array.strides[::-1], dt.itemsize)}"
    buf = array._alloc.buffer
    ptr = backend.buffer_of(buf).ptr + array._offset if buf.nbytes else 0
    return token, numba_array_fields(array, ptr)


def _compile_numba(backend: Any, kernel: Kernel, values: list[Any], site: str | None,
                   ) -> tuple[Any, Any, set[Any]]:
    disp = _dispatcher(kernel)
    types: tuple[Any, ...] = ()
    try:
        # (typing a value can fail too: an int beyond 64 bits)
        types = tuple(_numba_type(backend, disp, v) if type(v) is Array else disp.typeof_pyval(v)
                      for v in values)
        if getattr(disp, "specialized", False) and disp.overloads:
            # (Numba compiles a kernel given a signature for its types only, and hands that
            # overload to arguments of any others, read then as the declared types)
            _refuse_undeclared(kernel, site, next(iter(disp.overloads)), types, values)
        compiled = disp.compile(types)
    except ArgumentError:
        raise
    except Exception as exc:
        where = f"kernel '{kernel.name}'" + (f" (launched at {site})" if site else "")
        shown = ", ".join(map(str, types)) if types else "not all typed"
        raise ArgumentError(
            f"{where}: Numba cannot compile it for the argument types ({shown}): {exc}"
        ) from exc
    plan = numba_plan(compiled, backend.calls) if backend.packed_launches else None
    return compiled, plan, set()


def _refuse_undeclared(kernel: Kernel, site: str | None, declared: tuple[Any, ...],
                       types: tuple[Any, ...], values: list[Any]) -> None:
    """ArgumentError naming the first argument whose Numba type a kernel compiled with an
    explicit signature (``cuda.jit("void(float32[::1], int32)")``) does not declare: an array
    of another dtype, rank or layout (``A`` takes any), a float for an integer, or an integer
    beyond the declared one's range; a number that converts as C converts it (an int to a
    float, a double to a float) goes."""
    from numba.core import types as nb

    for i, (want, got) in enumerate(zip(declared, types)):
        if want == got:
            continue
        if isinstance(want, nb.Array) and isinstance(got, nb.Array):
            if (want.dtype == got.dtype and want.ndim == got.ndim
                    and want.layout in ("A", got.layout)):
                continue
        elif isinstance(want, nb.Integer) and isinstance(got, (nb.Integer, nb.Boolean)):
            info = np.iinfo(f"{'i' if want.signed else 'u'}{want.bitwidth // 8}")
            if info.min <= int(values[i]) <= info.max:
                continue
        elif isinstance(want, nb.Float) and isinstance(got, (nb.Integer, nb.Float, nb.Boolean)):
            continue
        elif isinstance(want, nb.Complex) and isinstance(got, nb.Number):
            continue
        elif isinstance(want, nb.Boolean) and isinstance(got, nb.Boolean):
            continue
        where = f"kernel '{kernel.name}'" + (f" (launched at {site})" if site else "")
        name = kernel.params[i].name if i < len(kernel.params) else str(i)
        raise ArgumentError(
            f"{where}: argument '{name}' is {got}, and the kernel's signature declares {want}; "
            "a kernel given a signature is compiled for its types only, and would read the "
            f"argument as {want}: pass a value of the declared type (an array: "
            "x.astype(dtype), or a copy for another layout), or decorate it without a "
            "signature")


def _cuda_c_launch(backend: Any, kernel: Kernel, launcher: Any, arrays: list[Any],
                   values: list[Any], site: str | None) -> Any:
    prepared = _target(backend, launcher)
    if isinstance(prepared, PackedTarget):
        target = prepared
        if target.backend() is backend:
            flat = target.pointer_values(values, arrays)
            if flat is not None:
                return packed_launch(target, flat)
    return _cuda_c_prepare(backend, kernel, launcher, arrays, values, site)


def _cuda_c_prepare(backend: Any, kernel: Kernel, launcher: Any, arrays: list[Any],
                    values: list[Any], site: str | None) -> Any:
    """_cuda_c_launch where the launcher has no target for this backend yet, or an array's
    pointer is not cached yet: compile, check, plan, cache, then gather."""
    target = _target(backend, launcher)
    if not isinstance(target, PackedTarget) or target.backend() is not backend:
        compiled_key = "c" if backend.slot == 0 else ("c", backend.slot)
        entry = kernel._compiled.get(compiled_key)
        if entry is None:
            raw = _raw_kernel(backend, kernel)
            plan = None
            if kernel.typed and backend.packed_launches:
                # (the function handle of the current device: CuPy loads a module per device)
                plan = cuda_c_plan(raw.kernel.ptr, kernel.params, backend.calls)
            entry = kernel._compiled[compiled_key] = (raw, plan, set())
        raw, plan, checked = entry
        if plan is not None and plan.calls is not backend.calls:
            # A plan launches through the calls of the backend that made it, and a kernel
            # outlives runtimes: a later backend's calls are its own (their one-node graphs
            # are switched off while it captures, and a launch through another backend's
            # would be a graph launched into the capture, which CUDA refuses).
            plan = cuda_c_plan(raw.kernel.ptr, kernel.params, backend.calls)
            kernel._compiled[compiled_key] = (raw, plan, checked)
        if launcher.block not in checked:
            _check_block(kernel, launcher, site, raw.max_threads_per_block, raw.num_regs)
            checked.add(launcher.block)
        if plan is None:
            args = list(values)
            for a in arrays:
                args[a.index] = backend.cupy_view(a.array)
            return RawLaunch(raw, tuple(args), launcher.grid, launcher.block, launcher.shared)
        target = _keep_target(backend, launcher, PackedTarget(backend, None, plan, launcher))
    flat = target.pointer_values(values, arrays)
    if flat is None:
        ptr_key = backend.cache_keys[0]
        for a in arrays:        # (the first launch with these arrays: cache their pointers)
            arr = a.array
            if arr._cache.get(ptr_key) is None:
                buf = arr._alloc.buffer
                arr._cache[ptr_key] = backend.buffer_of(buf).ptr + arr._offset if buf.nbytes \
                    else 0
        flat = target.pointer_values(values, arrays)
    return packed_launch(target, flat)


def kernel_attributes(kernel: Any) -> dict[str, int] | None:
    """Registers per thread and static shared memory of an already compiled kernel (for the
    recorder's launch order); None before the kernel's first compilation."""
    try:
        cache = kernel._compiled
        if isinstance(kernel.source, CudaCSource):
            entry = cache.get("c")
            if entry is None:
                return None
            raw = entry[0]
            return {"regs": int(raw.num_regs), "shared": int(raw.shared_size_bytes)}
        for key, entry in list(cache.items()):
            if isinstance(key, tuple):
                compiled = entry[0]
                return {"regs": int(getattr(compiled, "regs_per_thread", 0)),
                        "shared": int(getattr(compiled, "shared_mem_per_block", 0))}
    except Exception:   # attributes only tune the order: never fail a capture over them
        return None
    return None

