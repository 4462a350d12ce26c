"""Numba's kernel libraries at interpreter exit, when a kernel ran on several GPUs.

numba-cuda loads a compiled kernel into each device's context from one cached object code per
compute capability, so on GPUs of the same capability the two contexts' modules share one
``CUlibrary`` handle, and each module's finalizer queues ``cuLibraryUnload`` of it. At exit
every finalizer runs; once more than ``CUDA_DEALLOCS_COUNT`` (10,
``NUMBA_CUDA_MAX_PENDING_DEALLOCS_COUNT``) frees are queued in a context, numba flushes the
queue and unloads the shared library a second time: the driver frees it twice and the process
aborts ("double free or corruption") or segfaults after the program's last line.
:func:`keep_libraries_at_exit` stops numba from flushing its queues once the interpreter exits:
the process is ending, and the driver reclaims what it holds.

Invariant: only the exit is touched; while the program runs, numba frees what it frees.
"""

from __future__ import annotations

import atexit
import contextlib
import sys
import weakref

_armed = False
_held = contextlib.ExitStack()


def keep_libraries_at_exit() -> None:
    """Once per process: at exit, before numba's finalizers run, turn off the flushing of
    numba's pending frees in each context it made."""
    global _armed
    if _armed:
        return
    _armed = True
    # ``weakref.finalize`` runs its finalizers from one exit hook, registered when the first
    # finalizer is made; exit hooks run last-registered first, so make sure that hook is
    # registered before ours.
    weakref.finalize(keep_libraries_at_exit, int)
    atexit.register(_defer_numba_frees)


def _defer_numba_frees() -> None:
    driver = sys.modules.get("numba.cuda.cudadrv.driver")
    devices = getattr(getattr(driver, "driver", None), "devices", None) or {}
    for device in list(devices.values()):
        context = getattr(device, "primary_context", None)
        pending = getattr(context, "deallocations", None)
        if pending is not None:
            _held.enter_context(pending.disable())     # (left entered: the process is ending)
