"""What the ``sim`` backend changes in Numba's CUDA simulator to run a launch, and why.

Numba's simulator runs a kernel's Python function once per CUDA thread, each CUDA thread of a
block on a Python thread it starts for that block, and polls them in a loop so that
``cuda.syncthreads()`` can hold every thread of the block at the barrier. Six adaptations,
each installed over the simulator's own where its internals are the ones this module expects
(and left out otherwise, so that a newer Numba runs as it ships):

- blocks run on Python threads kept between blocks and launches (:class:`_Worker`), which meet
  at a barrier that wakes them (:class:`BlockBarrier`) instead of a loop that polls them;
  a kernel that reaches no barrier (no ``syncthreads`` or its ``_count``/``_and``/``_or``
  forms, no cooperative-groups ``sync``) and none of the atomics a thread could spin on
  (``cas``, ``exch``) or fence for (:func:`barrier_free`) runs each block's CUDA threads one
  after another on one of them. Then no thread of a block can wait for another, so that order
  is one the device may choose too. After a thread fails, the block's others that do not stop
  within :data:`FAILED_BLOCK_GRACE_S` (one spinning on a flag the failed one was to set) are
  left to run, as Numba's are. A block reduction on 32 threads runs about 5 times faster than
  on Numba's threads, an element-wise kernel about 50 times;
- ``cuda.shared.array`` is looked up under a lock (:func:`_shared_array`);
- the warp functions Numba's simulator lacks (``cuda.shfl_down_sync`` and kin) are added, as
  collectives of a warp's threads (:mod:`asyncgpu.backends.sim.warps`), and the intrinsics it
  computes otherwise than the device (``cbrt``, ``fma``, the bit counts) replaced
  (:mod:`asyncgpu.backends.sim.intrinsics`);
- the ``math`` a kernel reaches gives the device's IEEE answers during the launch
  (:mod:`asyncgpu.backends.sim.ieee_math`: ``math.log(0)`` is ``-inf``, not a ``ValueError``),
  and Numba's ``libdevice`` the device's answers or a refusal naming the function
  (:mod:`asyncgpu.backends.sim.libdevice`; Numba's stubs return None);
- compiled ``@cuda.jit`` functions a kernel calls (as device functions, whether made with
  ``device=True`` or not), reached through its module's globals, its closure or module
  attributes, are swapped for simulated ones during the launch
  (:func:`simulated_device_functions`);
- a grid-wide sync (``cuda.cg.this_grid().sync()``) in a launch of more than one block fails
  (:func:`asyncgpu.backends.sim.barrier.grid_sync`): the blocks run one after another, so none
  can wait there for the others, and Numba's synchronised the block alone (the kernel then
  read what later blocks had not written yet, silently).

Invariant: a block's CUDA threads see the indices, barriers and shared arrays they would see
on Numba's threads, and a failure is reported as Numba reports it (``tid=[x, y, z]
ctaid=[x, y, z]: message``), for the first thread that failed; the threads keep nothing of a
launch once it is over.

Example::

    with one_launch(barrier_free(fn)), simulated_device_functions(fn):
        FakeCUDAKernel(fn, device=False)[grid, block](*args)
"""

from __future__ import annotations

import contextlib
import inspect
import math
import os
import sys
import threading
import types
from collections.abc import Iterator
from typing import Any

import numpy as np

from ...runtime.checks import MAX_SHARED_BYTES
from ...runtime.finalizers import mark_waited_thread
from . import ieee_math, intrinsics, libdevice, warps
from .barrier import BlockBarrier, install_grid_sync
from .warps import WARP_FUNCTIONS, Warps

#: Numba's simulator runs one launch at a time in a process: the launch's context (its grid,
#: its block, its shared memory) is a global of the simulator, and a launch that finds another
#: one's context runs as a device function of it. Launches from several threads (runtimes of
#: their own, each with its own lock) take turns here.
_simulating = threading.Lock()
#: The interpreter's thread switch interval while Numba's own block manager runs a launch
#: (where :class:`_Blocks` cannot). Its block's threads are Python threads that take turns with
#: its loop polling them; at Python's default interval (5 ms) each turn of that loop holds the
#: interpreter for the whole interval (the suite's HITS in every mode at the tiny scale: 24.8 s
#: at 5 ms, 5.8 s at 50 us). :class:`_Blocks` has no such loop, and runs faster at 5 ms.
SIMULATOR_SWITCH_S = 5e-5
_shared_arrays = threading.Lock()
#: Whether :func:`_shared_array` and :func:`_block_manager` are in place (decided at the first
#: launch; None before).
_shared_safe: bool | None = None
_blocks_safe: bool | None = None
#: Names that reach a barrier of the simulator (``cuda.syncthreads()`` and its forms, a cooperative
#: group's ``sync``, a warp function: :mod:`asyncgpu.backends.sim.warps`), and the atomics and
#: fences a thread may spin on a flag another sets with: a kernel whose code names none of them runs
#: its blocks on one Python thread each.
BARRIERS = frozenset({"syncthreads", "syncthreads_count", "syncthreads_and", "syncthreads_or",
                      "cg", "this_grid", "sync"}) | WARP_FUNCTIONS
SPINS = frozenset({"cas", "compare_and_swap", "exch", "threadfence", "threadfence_block",
                   "threadfence_system"})
#: How long a block whose thread failed waits for its other threads to stop (at a barrier, or
#: at their end) before it reports the failure and leaves them to run.
FAILED_BLOCK_GRACE_S = 0.5
#: Per thread: whether this thread's launch runs its blocks on one Python thread each.
_one_thread = threading.local()


def _shared_array(self: Any, shape: Any, dtype: Any, alignment: Any = None) -> np.ndarray:
    """``cuda.shared.array`` in Numba's simulator: one array per block and call site, as
    Numba's own, but looked up and made under a lock. Numba's (numba-cuda 0.30) looks the call
    site up and stores a new array without one, so two threads of a block switched between
    the two got two arrays, and a block reduction went wrong (seen with short switch
    intervals). Installed over Numba's by :func:`_install_shared_arrays`."""
    if alignment is not None:
        raise RuntimeError("Array alignment is not supported in cudasim")
    from numba.cuda import types as nb_types
    from numba.cuda.np import numpy_support

    dtype = np.dtype(numpy_support.as_dtype(dtype) if isinstance(dtype, nb_types.Type) else dtype)
    if shape == 0:      # the launch's dynamic shared memory: one buffer for all
        return np.frombuffer(self._dynshared.data, dtype=dtype,
                             count=self._dynshared_size // dtype.itemsize)
    caller = sys._getframe(1)
    site = (caller.f_code.co_filename, caller.f_lineno)
    with _shared_arrays:
        array = self._allocations.get(site)
        if array is None:
            array = np.empty(shape, dtype)
            used = (sum(a.nbytes for a in self._allocations.values()) + array.nbytes
                    + self._dynshared_size)
            if used > MAX_SHARED_BYTES:
                # (on the GPU Numba's compile refuses more than this of static shared memory,
                # and a launch whose static and dynamic together exceed it fails)
                raise RuntimeError(
                    f"cuda.shared.array({shape}, {dtype}) makes {used} bytes of shared memory "
                    f"per block (static{' and dynamic' if self._dynshared_size else ''}), over "
                    f"the {MAX_SHARED_BYTES} a block has on the GPU, which refuses it; use "
                    "less shared memory per block")
            self._allocations[site] = array
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


def _named(e: BaseException, where: str) -> tuple[BaseException, Any]:
    """``e`` as Numba's threads report it, ``where: message`` (``tid=[..] ctaid=[..]``), with
    its traceback; ``e`` itself with ``where`` as a note when its class cannot be made again
    from one message; a RuntimeError for what is no ``Exception`` (``SystemExit``) but a
    ``KeyboardInterrupt``, which stays one (the step that ran the kernel marks it a fault and
    lets it stop the host's wait: ``SimBackend._advance``)."""
    tb = e.__traceback__
    if isinstance(e, KeyboardInterrupt):
        e.add_note(where)
        return e, tb
    if not isinstance(e, Exception):    # (SystemExit from a kernel: a fault, not an exit)
        return RuntimeError(f"{where}: raised {type(e).__name__}({e})"), tb
    try:
        named = type(e)(f"{where}: {e}" if str(e) else where)
    except Exception:       # noqa: BLE001 - (a class whose constructor takes other arguments)
        e.add_note(where)
        return e, tb
    return named, tb


class _Worker(threading.Thread):
    """A Python thread that runs CUDA threads of a block, kept for the next block: Numba's
    simulator starts a thread per CUDA thread of every block, and starting one costs more than
    most simulated threads run. The simulator's ``cuda.threadIdx``, ``cuda.blockIdx`` and
    ``cuda.syncthreads()`` read this thread's attributes, as they read Numba's threads'. It runs
    its ``points`` (the CUDA threads' indices) one after another: one each where the kernel
    has barriers, the whole block where it has none."""

    def __init__(self) -> None:
        super().__init__(daemon=True, name="asyncgpu-sim-thread")
        self.go = threading.Semaphore(0)
        self.block: Any = None
        self.points: list[tuple[int, int, int]] = []
        self.blockIdx: Any = None
        self.threadIdx: Any = None
        self.thread_id = 0
        self.exception: tuple[BaseException, Any] | None = None

    def run(self) -> None:
        from numba.cuda.simulator.kernelapi import Dim3

        mark_waited_thread()    # (a finalizer run here may not call into asyncgpu)
        while True:
            self.go.acquire()
            block = self.block
            dx, dy = block.dims[0], block.dims[1]
            try:
                # (no floating-point error raises or warns, as none does on the device: Numba
                # compiles a kernel with its numpy error model, where 1.0 / 0.0 is inf;
                # a debug kernel's raise for division: :class:`_Blocks`)
                with np.errstate(all="ignore"):
                    for x, y, z in self.points:
                        self.threadIdx = Dim3(x, y, z)
                        self.thread_id = x + dx * (y + dy * z)
                        block.f(*block.args)
            except BaseException as e:  # (SystemExit too: this thread must live on)
                self.exception = _named(e, f"tid={list(self.threadIdx)} "
                                           f"ctaid={list(self.blockIdx)}")
            finally:
                self.block = None       # (nothing of the launch kept while idle)
                block.leave(self)
                block = None

    def syncthreads(self) -> None:
        barrier = self.block.barrier
        if barrier is None:
            raise RuntimeError(
                "asyncgpu's simulator runs this kernel's threads one after another, having "
                "found no barrier in its code, yet it reached cuda.syncthreads() (through a "
                f"name other than {', '.join(sorted(BARRIERS))}): call it by one of these")
        barrier.wait()

    def _block_vote(self, value: Any) -> np.ndarray:
        state = self.block.state
        state[tuple(self.threadIdx)[:state.ndim]] = value
        self.syncthreads()
        votes = state.copy()
        self.syncthreads()          # (every thread read the votes before the next write)
        return votes

    def syncthreads_count(self, value: Any) -> int:
        return int(np.count_nonzero(self._block_vote(value)))

    def syncthreads_and(self, value: Any) -> int:
        return 1 if np.all(self._block_vote(value)) else 0

    def syncthreads_or(self, value: Any) -> int:
        return 1 if np.any(self._block_vote(value)) else 0


#: The workers, kept between launches (made as blocks need them; forgotten in a forked child,
#: which has none of its parent's threads).
_workers: list[_Worker] = []
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_workers.clear)


class _Blocks:
    """Numba's ``BlockManager``, one block at a time on :class:`_Worker` threads: a thread per
    CUDA thread meeting at a :class:`BlockBarrier` (Numba's polls its threads in a loop that
    competes with them for the interpreter), or, for a barrier-free kernel (``one_thread``),
    the block's CUDA threads one after another on one. Reports the first thread that
    failed."""

    def __init__(self, f: Any, block_dim: Any, debug: bool, one_thread: bool) -> None:
        self.f, self.dims, self._one_thread = f, tuple(block_dim), one_thread
        if debug:                   # (what Numba's debug mode does in each thread)
            def f_debug(*args: Any) -> None:
                with np.errstate(divide="raise"):
                    f(*args)
            self.f = f_debug
        self.state = np.zeros(block_dim, dtype=np.bool_)
        self.args: tuple[Any, ...] = ()
        self.barrier: BlockBarrier | None = None
        self.warps: Warps | None = None
        self._done = threading.Condition()
        self._running = 0
        self._failed: list[tuple[_Worker, tuple[BaseException, Any]]] = []
        self._team: set[_Worker] = set()

    def leave(self, worker: _Worker) -> None:
        failed = worker.exception is not None
        if self.barrier is not None:
            self.barrier.leave(failed, worker)
        with self._done:
            if failed:
                self._failed.append((worker, worker.exception))
            worker.exception = None
            self._running -= 1
            self._team.discard(worker)
            self._done.notify_all()

    def run(self, grid_point: tuple[int, ...], *args: Any) -> None:
        from numba.cuda.simulator.kernelapi import Dim3

        points = list(np.ndindex(*self.dims))
        shares = [points] if self._one_thread else [[p] for p in points]
        while len(_workers) < len(shares):
            worker = _Worker()
            worker.start()
            _workers.append(worker)
        team = _workers[:len(shares)]
        self.args = args
        self.barrier = None if self._one_thread else BlockBarrier(len(shares))
        self.warps = None if self.barrier is None else self.barrier.warps
        self._running, self._failed, self._team = len(shares), [], set(team)
        self.state[...] = False
        block_idx = Dim3(*grid_point)
        for worker, share in zip(team, shares):
            worker.block, worker.points, worker.blockIdx = self, share, block_idx
            worker.exception = None
        for worker in team:
            worker.go.release()
        with self._done:
            self._done.wait_for(lambda: not self._running or self._failed)
            if self._running:
                # (after a failure the others stop at a barrier; one that does not may spin
                # on a flag the failed thread was to set: it is left to that, and the next
                # blocks get other threads)
                self._done.wait_for(lambda: not self._running, FAILED_BLOCK_GRACE_S)
                for worker in self._team:
                    _workers.remove(worker)
            failed, self._failed = self._failed, []
        self.args = ()
        if failed:
            breaker = self.barrier.breaker if self.barrier is not None else None
            exc, tb = next((f for w, f in failed if w is breaker), failed[0][1])
            raise exc.with_traceback(tb)


def _block_manager(f: Any, grid_dim: Any, block_dim: Any, debug: bool) -> _Blocks:
    """What Numba's simulator makes for each block (:class:`_Blocks`)."""
    return _Blocks(f, block_dim, debug, getattr(_one_thread, "on", False))


def _install_block_manager() -> bool:
    """Put :func:`_block_manager` in place of the simulator's ``BlockManager`` where the
    simulator makes one per block with the arguments this module passes and reads a thread's
    indices from its Python thread; whether it is in place."""
    from numba.cuda.simulator import kernel, kernelapi

    manager = getattr(kernel, "BlockManager", None)
    if manager is _block_manager:
        return True
    try:
        init = list(inspect.signature(manager.__init__).parameters)
        run = list(inspect.signature(manager.run).parameters)
        reads = inspect.getsource(kernelapi.FakeCUDAModule)
    except (TypeError, ValueError, OSError, AttributeError):
        return False
    if (init != ["self", "f", "grid_dim", "block_dim", "debug"] or run[:2] != ["self", "grid_point"]
            or "current_thread().threadIdx" not in reads):
        return False
    kernel.BlockManager = _block_manager
    warps.install()
    intrinsics.install()
    libdevice.install()
    return True


def _code_names(code: types.CodeType) -> set[str]:
    """Every global and attribute name ``code`` and the code nested in it (comprehensions,
    inner functions) load."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _code_names(const)
    return names


def _dispatcher(obj: Any) -> bool:
    """Whether ``obj`` is Numba's compiled ``@cuda.jit`` function, which a kernel calls as a
    device function whether or not it was made with ``device=True``."""
    return isinstance(getattr(obj, "targetoptions", None), dict) and hasattr(obj, "py_func")


def _device_function(obj: Any) -> Any:
    """The Python function of a function ``obj`` a kernel calls on the device (Numba's
    compiled one, or the simulator's), else None."""
    if _dispatcher(obj):
        return obj.py_func
    if hasattr(obj, "_device") and isinstance(getattr(obj, "fn", None), types.FunctionType):
        return obj.fn           # (the simulator's: a kernel it calls runs as a device function)
    return None


def _references(f: types.FunctionType) -> Iterator[tuple[Any, str | None, Any]]:
    """What ``f``'s code reaches by name: ``(holder, name, value)`` for each global it names
    (holder its globals dict), each variable of its closure (holder the cell, name None) and
    each attribute it names of a module it reaches so (holder the module)."""
    names = _code_names(f.__code__)
    globs = f.__globals__
    values: list[tuple[Any, str | None, Any]] = [(globs, n, globs[n]) for n in names if n in globs]
    for cell in f.__closure__ or ():
        try:
            values.append((cell, None, cell.cell_contents))
        except ValueError:          # (a variable not yet bound)
            continue
    modules: set[int] = set()
    for _, _, value in values:      # (growing: a module's modules, as in ``pkg.sub.dev``)
        if isinstance(value, types.ModuleType) and id(value) not in modules:
            modules.add(id(value))
            attrs = vars(value)
            values.extend((value, n, attrs[n]) for n in names if n in attrs)
    return iter(values)


def _reachable(fn: types.FunctionType) -> Iterator[tuple[types.FunctionType, list[Any]]]:
    """``fn`` and every Python function it reaches through device functions and plain
    functions, each with its references (:func:`_references`)."""
    pending, seen = [fn], set()
    while pending:
        f = pending.pop()
        if id(f) in seen:
            continue
        seen.add(id(f))
        refs = list(_references(f))
        yield f, refs
        for _, _, value in refs:
            inner = _device_function(value)
            if inner is None and isinstance(value, types.FunctionType):
                inner = value
            if inner is not None:
                pending.append(inner)


def barrier_free(fn: types.FunctionType) -> bool:
    """Whether no code ``fn`` reaches names a barrier or an atomic a thread could spin on
    (:data:`BARRIERS`, :data:`SPINS`), or refers to one by another name."""
    threads = BARRIERS | SPINS
    for f, refs in _reachable(fn):
        if _code_names(f.__code__) & threads:
            return False
        if any(getattr(value, "__name__", None) in threads for _, _, value in refs):
            return False
    return True


@contextlib.contextmanager
def simulated_device_functions(fn: types.FunctionType) -> Iterator[None]:
    """Swap the compiled ``@cuda.jit`` functions ``fn`` reaches (through its globals, its
    closure, or attributes of modules it names, and so on through theirs), which it calls as
    device functions, for simulated ones, and Python's ``math`` (or its functions) for
    :mod:`asyncgpu.backends.sim.ieee_math`'s stand-in, and back afterwards.

    When ``numba.cuda`` was imported without ``NUMBA_ENABLE_CUDASIM``, device functions are real
    dispatchers that cannot be called from Python; the simulator needs Python versions.
    """
    from numba.cuda.simulator.kernel import FakeCUDAKernel

    swapped: list[tuple[Any, str | None, Any]] = []
    try:
        for _, refs in _reachable(fn):
            for holder, name, obj in refs:
                if _dispatcher(obj):
                    replacement = FakeCUDAKernel(obj.py_func, device=True)
                else:
                    # (Python's math, or a function of it: the device's IEEE answers; Numba's
                    # libdevice, or a function of it: the device's answers, or a refusal
                    # naming it; never an attribute of either module itself, which the whole
                    # process shares)
                    if holder is math or libdevice.shared(holder):
                        continue
                    replacement = ieee_math.stand_in(obj)
                    if replacement is None:
                        replacement = libdevice.stand_in(obj)
                    if replacement is None:
                        continue
                _put(holder, name, replacement)
                swapped.append((holder, name, obj))
        yield
    finally:
        for holder, name, obj in reversed(swapped):
            _put(holder, name, obj)


def _put(holder: Any, name: str | None, value: Any) -> None:
    """Bind what a reference of :func:`_references` names to ``value``."""
    if name is None:
        holder.cell_contents = value
    elif isinstance(holder, dict):
        holder[name] = value
    else:
        setattr(holder, name, value)


@contextlib.contextmanager
def one_launch(one_thread_blocks: bool) -> Iterator[None]:
    """The simulator to this thread's launch alone, its blocks run by :class:`_Blocks` (on one
    Python thread each if ``one_thread_blocks``: a barrier-free kernel, :func:`barrier_free`).
    Where Numba's own block manager runs instead (its internals not as this module expects),
    with :data:`SIMULATOR_SWITCH_S` as the switch interval where the simulator's shared arrays
    are safe with it (the interval before it afterwards)."""
    global _shared_safe, _blocks_safe
    with _simulating:
        if _shared_safe is None:
            _shared_safe = _install_shared_arrays()
            install_grid_sync()
        if _blocks_safe is None:
            _blocks_safe = _install_block_manager()
        if _blocks_safe:
            _one_thread.on = one_thread_blocks
            try:
                yield
            finally:
                _one_thread.on = False
            return
        if not _shared_safe:
            yield
            return
        saved = sys.getswitchinterval()
        sys.setswitchinterval(min(saved, SIMULATOR_SWITCH_S))
        try:
            yield
        finally:
            sys.setswitchinterval(saved)
