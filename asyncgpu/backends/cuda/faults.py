"""Device faults on the ``cuda`` backend: which CUDA errors kill the context, and what the user
is told.

The model
---------
A kernel that faults (an illegal address, a device assert, ...) is reported by a later CUDA
call, not by its launch: a synchronize, an event query or wait, a copy, another launch. From
then on the context is dead and every CUDA call fails with the same kind of error. The backend
keeps the first such error as its ``fault`` (:func:`fault_from`): a
:class:`~asyncgpu.core.errors.KernelFault` naming the latest launches, since the one that
faulted is among them, newest first; every later call raises that message again without
touching CUDA. Any other CUDA error passes on unchanged.

A launch the driver refuses is not a fault (:func:`refused_launch`): nothing ran and the context
is fine, so the error says what the launch asked for that the kernel cannot have.

Example::

    is_sticky(CUDADriverError(700, "CUDA_ERROR_ILLEGAL_ADDRESS"))     # True
    fault = fault_from(exc, backend.recent_launches())                 # a KernelFault
"""

from __future__ import annotations

import logging
from typing import Any

from ...core.errors import KernelFault, LaunchError

log = logging.getLogger("asyncgpu")

#: Errors that kill the context (cudaError / CUresult share these numbers): illegal address,
#: device assert, hardware stack error, illegal instruction, misaligned address, invalid
#: address space, invalid PC, launch failure. Every later CUDA call fails with one of them.
STICKY_ERRORS = frozenset({700, 710, 714, 715, 716, 717, 718, 719})
#: The same errors as CuPy's, the driver's and Numba's messages name them (some carry no
#: status number).
_STICKY_NAMES = ("ILLEGAL_ADDRESS", "IllegalAddress", "INVALID_ADDRESS_SPACE",
                 "InvalidAddressSpace", "ILLEGAL_INSTRUCTION", "IllegalInstruction",
                 "MISALIGNED_ADDRESS", "MisalignedAddress", "LAUNCH_FAILED", "LaunchFailure",
                 "INVALID_PC", "InvalidPc", "HARDWARE_STACK_ERROR", "HardwareStackError",
                 "cudaErrorAssert", "CUDA_ERROR_ASSERT")
#: How many of the latest launches a device fault names as candidates.
RECENT_LAUNCHES = 16


def is_sticky(exc: BaseException) -> bool:
    """Whether a CUDA error (CuPy runtime or driver, Numba) means the context has faulted."""
    if getattr(exc, "status", None) in STICKY_ERRORS:
        return True
    text = str(exc)
    return any(name in text for name in _STICKY_NAMES)


def fault_from(exc: BaseException, launches: list[Any]) -> KernelFault:
    """The fault to keep for the sticky error ``exc``, naming ``launches`` (newest first) as
    the candidates; logged once, here."""
    candidates = ", ".join(f"{n.label()} on stream {getattr(n.stream, 'index', '?')}"
                           for n in launches) or "none recorded"
    fault = KernelFault(
        f"the GPU reported a fault ({exc}); a kernel launched since the last clean "
        f"synchronization caused it. Latest launches, newest first: {candidates}. The CUDA "
        "context is unusable for the rest of this process: restart it (with "
        "ASYNCGPU_EXECUTION=sync or CUDA_LAUNCH_BLOCKING=1 the first fault names the exact "
        "kernel)"
    )
    log.error("%s", fault)
    return fault


def refused_launch(node: Any, exc: BaseException) -> LaunchError:
    """The error for a launch of ``node`` the driver refused with ``exc`` (not a fault)."""
    return LaunchError(
        f"{node.label()}: the driver refused the launch ({exc}); nothing ran. The launch "
        "configuration asks for more than this kernel can have on this device (threads for "
        "its registers, static plus dynamic shared memory)"
    )
