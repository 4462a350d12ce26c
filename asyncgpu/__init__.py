"""asyncgpu: write sequential CuPy and Numba code, run it asynchronously on the GPU.

Kernels wrapped with :func:`kernel` or :func:`cuda_kernel` return at once; independent ones run
concurrently on different CUDA streams, host-to-device transfers overlap computation, and the
host blocks only when it touches data that is still being computed::

    import numpy as np, asyncgpu as ag
    from numba import cuda

    @ag.kernel(const=["x"])
    @cuda.jit
    def square(x, y, n):
        i = cuda.grid(1)
        if i < n:
            y[i] = x[i] * x[i]

    x = ag.array(np.arange(1024, dtype=np.float32)); y = ag.empty_like(x)
    square[4, 256](x, y, 1024)      # returns at once
    print(y[3])                     # waits only for the kernel that writes y

CuPy calls and array operators are scheduled the same way (``asyncgpu.cupy``)::

    import asyncgpu.cupy as acp
    z = acp.sqrt(x) + y             # two nodes; returns at once
    total = float(z.sum())          # waits only for what z.sum() needs
"""

from __future__ import annotations

# The layers, top down (docs/design.md, "Layers"): this module composes them. Importing the
# backends registers their factory with the runtime, which does not import them.
from .core import compat as _compat  # noqa: F401  (must precede any numba.cuda import)
from . import backends  # noqa: F401  (registers the backends with the runtime)
from .core.config import Options
from .backends.cuda import queues as _queues
from .core.errors import (
    AnnotationViolation, ArgumentError, ArgumentValueError, AsyncGPUError,
    BackendUnavailableError, BlockTooLargeError, CompileError, DeadlockError, DeviceError,
    FreedArrayError,
    KernelFault, KernelFaults, LaunchError, NotOnSimulatorError, OutOfMemoryError, RaceError,
    RecordingError, SignatureError,
)
from .core.instrument import Instrument
from .core.statistics import Statistics
from .observe import process as _process_trace  # noqa: F401  (ASYNCGPU_TRACE's hooks)
from .observe.trace import Trace, trace
from .recorder.entry import graph, record
from .runtime.api import (
    array, asarray, configure, device, empty, empty_like, full, full_like, instrument, ones,
    ones_like, options, statistics, synchronize, zeros, zeros_like,
)
from .runtime.array import Array
from .runtime.kernel import Kernel
from .runtime.kernel_builders import cuda_kernel, kernel
from .runtime.regulator import Regulation
from .runtime.tenancy import TenantScope, regulate, regulation, tenant, tenants
from .core.plan import Plan
from .core.tenants import TenantStatistics

__version__ = "0.1.0"

_queues.claim()     # (now: the driver reads it once, in cuInit, which a program's next
#                     imports may already call: compiling a kernel for the device, say)

__all__ = [
    "AnnotationViolation", "ArgumentError", "ArgumentValueError", "Array", "AsyncGPUError",
    "BackendUnavailableError", "BlockTooLargeError", "CompileError", "DeadlockError", "DeviceError",
    "FreedArrayError", "Instrument", "Kernel", "KernelFault", "KernelFaults", "LaunchError",
    "NotOnSimulatorError", "Options", "OutOfMemoryError", "Plan", "RaceError", "RecordingError",
    "Regulation", "SignatureError", "Statistics", "TenantScope", "TenantStatistics", "Trace",
    "array", "asarray", "configure", "cuda_kernel", "device", "empty", "empty_like", "full",
    "full_like", "graph", "instrument", "kernel", "ones", "ones_like", "options", "record",
    "regulate", "regulation", "statistics", "synchronize", "tenant", "tenants", "trace", "zeros",
    "zeros_like",
]

for _name in __all__:
    _obj = globals()[_name]
    if getattr(_obj, "__module__", "").startswith("asyncgpu."):
        try:
            _obj.__module__ = "asyncgpu"
        except (AttributeError, TypeError):
            pass
del _name, _obj
