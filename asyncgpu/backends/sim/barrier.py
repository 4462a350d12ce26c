"""``cuda.syncthreads()`` for one simulated block: the barrier its Python threads meet at; and
a cooperative grid's ``sync``, which the simulator runs for one block only (:func:`grid_sync`).

The model
---------
The sim backend runs a block's CUDA threads on Python threads of its own
(``asyncgpu.backends.sim.numba_sim``); a thread at ``cuda.syncthreads()`` waits here until
every thread of the block still running waits too (one that returned no longer counts, as in
Numba's simulator). The block's warp functions (:class:`~asyncgpu.backends.sim.warps.Warps`)
share the barrier's lock, so that a block whose threads all wait, some here and some in warp
functions, or all in warp functions, is seen at once: none can go on (the GPU hangs), and each
fails saying where the others wait.

Invariant: a thread that fails breaks the barrier for good; the others stop at it instead of
waiting for the failed one.

Example::

    barrier = BlockBarrier(64)       # a block of 64 threads; each calls barrier.wait()
"""

from __future__ import annotations

import threading
from typing import Any

from .warps import Warps


class BlockBarrier:
    """``cuda.syncthreads()`` for one block's Python threads: released when every thread of
    the block still running waits at it (a thread that returned no longer counts, as Numba's
    simulator counts it); broken for good when a thread fails, so that the others stop there
    instead of waiting for it. Its lock is the block's warps' too (:class:`Warps`): when every
    thread still running waits, some at the barrier and some in warp functions, or all in
    warp functions, none can go on (the GPU hangs there), and each fails saying so."""

    def __init__(self, threads: int) -> None:
        self.cond = threading.Condition()
        self._live = threads
        self._waiting = 0
        self._generation = 0
        self.broken = False
        self.breaker: Any = None
        #: why the block's threads stopped when they all waited (None: they did not)
        self.stuck: str | None = None
        self.warps = Warps(threads, self)

    def wait(self) -> None:
        with self.cond:
            if self.broken:
                raise RuntimeError(self.stuck or "abort flag set on syncthreads call")
            generation = self._generation
            self._waiting += 1
            if self._waiting >= self._live:
                self._release()
                return
            self.check_stuck()
            while generation == self._generation and not self.broken:
                self.cond.wait()
            if self.broken:
                raise RuntimeError(self.stuck or "abort flag set on syncthreads clear")

    def leave(self, failed: bool, thread: Any = None) -> None:
        with self.cond:
            self._live -= 1
            if failed:
                self.break_(thread)
                return
            self.warps.left(thread.thread_id)
            if self._waiting and self._waiting >= self._live:
                self._release()
            elif self._live:
                self.check_stuck()

    def break_(self, thread: Any) -> None:
        """(Under the lock.) Stop every thread waiting, for good."""
        if not self.broken:
            self.breaker = thread       # (the others' failures follow from its)
        self.broken = True
        self.cond.notify_all()

    def check_stuck(self) -> None:
        """(Under the lock.) If every thread still running waits and none can go on, break
        the block with :attr:`stuck` saying where they wait."""
        in_warps = self.warps.waiting()
        if not in_warps or self._waiting + in_warps < self._live:
            return
        at_barrier = f"{self._waiting} at cuda.syncthreads(), " if self._waiting else ""
        self.stuck = (f"the block's threads wait for each other: {at_barrier}{in_warps} in "
                      f"{self.warps.describe_waiting()}; on the GPU this hangs: every "
                      "thread of the block must reach the same syncthreads, every lane of a "
                      "mask the same warp function")
        self.break_(None)

    def _release(self) -> None:
        self._waiting = 0
        self._generation += 1
        self.cond.notify_all()


def grid_sync(self: Any) -> None:
    """``cuda.cg.this_grid().sync()`` in Numba's simulator: the block's barrier, as Numba's,
    where the launch is one block; a RuntimeError where it has more. The simulator runs a
    launch's blocks one after another, so no block can wait there for the others to arrive (on
    the GPU a cooperative launch runs them side by side); Numba's synchronised the block alone,
    and what the kernel read after it was wrong, with no error. Installed over Numba's by
    :func:`install_grid_sync`."""
    from numba.cuda.simulator.kernel import _get_kernel_context

    grid = _get_kernel_context().gridDim
    blocks = grid.x * grid.y * grid.z
    if blocks > 1:
        raise RuntimeError(
            f"cuda.cg.this_grid().sync() in a launch of {blocks} blocks: asyncgpu's simulator "
            "runs a launch's blocks one after another, so it cannot run a grid-wide sync "
            "across several blocks (the GPU runs a cooperative launch's blocks side by side); "
            "run this kernel on the cuda backend, or launch it with one block")
    threading.current_thread().syncthreads()


def install_grid_sync() -> bool:
    """Put :func:`grid_sync` in place of the simulator's grid group ``sync`` where the
    simulator keeps the launch's grid where this module reads it; whether it is in place."""
    from numba.cuda.simulator import kernel, kernelapi

    group = getattr(kernelapi, "GridGroup", None)
    if group is None or not hasattr(kernel, "_get_kernel_context"):
        return False
    group.sync = grid_sync
    return True
