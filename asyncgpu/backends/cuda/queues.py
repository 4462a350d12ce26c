"""CUDA's hardware queues: ``CUDA_DEVICE_MAX_CONNECTIONS``, asked for as asyncgpu is imported.

The model
---------
CUDA maps streams onto ``CUDA_DEVICE_MAX_CONNECTIONS`` hardware queues (8 unless set), and
work on one queue runs in order, so streams that share a queue wait for each other's work.
The driver reads the variable once, in ``cuInit``. :func:`claim`, called as ``asyncgpu`` is
imported, sets it to 32 unless the program set it (``asyncgpu.core.config``) and notes
whether this process had initialized CUDA already, in which case the setting came too late;
the ``cuda`` backend then says so once, as it is made (:func:`warn_if_late`).

Invariants: nothing here loads or initializes CUDA: the probe only asks a driver library
already loaded (``RTLD_NOLOAD``) how many devices it sees, which before ``cuInit`` answers
``CUDA_ERROR_NOT_INITIALIZED``.

Example::

    claim()             # at import: 32 queues, unless too late
    warn_if_late()      # as the backend is made: one warning if it was
"""

from __future__ import annotations

import ctypes
import logging
import os

from ...core.config import cuda_device_max_connections

log = logging.getLogger("asyncgpu")

#: The driver library's name on Linux, the only system whose loader can be asked this.
DRIVER = "libcuda.so.1"

_late = False


def initialized_already(library: str = DRIVER) -> bool:
    """Whether ``library``, the CUDA driver, is loaded in this process and initialized
    (``cuDeviceGetCount`` succeeds); False where it is not loaded or this cannot be asked."""
    noload = getattr(os, "RTLD_NOLOAD", None)
    if noload is None:
        return False
    try:
        driver = ctypes.CDLL(library, mode=noload | os.RTLD_LAZY)
    except OSError:             # (not loaded: nothing initialized it)
        return False
    count = ctypes.c_int(0)
    return driver.cuDeviceGetCount(ctypes.byref(count)) == 0


def claim() -> None:
    """Ask for 32 hardware queues (unless the program chose a number), and note whether CUDA
    was initialized before, so that the request cannot apply."""
    global _late
    _late = cuda_device_max_connections() and initialized_already()


def warn_if_late() -> None:
    """Warn, once, that CUDA was initialized before asyncgpu was imported with the number of
    hardware queues unset: its streams then share CUDA's 8."""
    global _late
    if _late:
        _late = False
        log.warning(
            "asyncgpu: CUDA was initialized before asyncgpu was imported, with "
            "CUDA_DEVICE_MAX_CONNECTIONS unset, so its streams share CUDA's 8 hardware queues "
            "and a kernel may wait for unrelated work on another stream; import asyncgpu "
            "before the program's first CUDA call, or set CUDA_DEVICE_MAX_CONNECTIONS=32 in "
            "the environment")


__all__ = ["claim", "initialized_already", "warn_if_late"]
