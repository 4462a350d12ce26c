"""Backend selection, and the happens-before checker attached to a backend's operation log.

A backend is the only code that touches the device (or simulates it). Both backends offer the
same operations, always with explicit streams: ``create_stream``, ``create_event``,
``record(event, stream)``, ``wait(stream, event)``, ``event_done``, ``host_wait(event)``,
``synchronize``, ``alloc``/``free``, ``prefetch(buffer, stream)``, ``kernel_launch`` (prepare,
before enqueue) and ``launch(node, stream)`` (enqueue), ``host_access`` (a hook).

For traces (``asyncgpu._trace``) each backend also offers a device clock: ``timing_event()`` (an
event whose ``record`` captures a timestamp: CUDA timing events; on ``sim`` the executor's step
count, a logical clock), ``clock_base()`` (an already-complete event marking "now") and
``elapsed_s(start, end)`` (seconds between two completed ones). They are used only while tracing.

:class:`CheckedBackend` forwards every operation and feeds the same log to
:class:`asyncgpu._hb.HappensBeforeChecker`: always on ``sim``, on ``cuda`` with
``ASYNCGPU_DEBUG_HB=1``.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

from .._config import Options, enable_numba_simulator
from .._errors import BackendUnavailableError, RaceError
from .._hb import HappensBeforeChecker

log = logging.getLogger("asyncgpu")
_cuda_usable: bool | None = None


def cuda_usable() -> bool:
    """Whether CuPy is installed and sees at least one GPU (cached)."""
    global _cuda_usable
    if _cuda_usable is None:
        try:
            import cupy

            _cuda_usable = cupy.cuda.runtime.getDeviceCount() > 0
        except Exception:  # no CuPy, no driver, or no device: all mean "not usable"
            _cuda_usable = False
    return _cuda_usable


def resolve(options: Options) -> str:
    """The backend name ``options.backend`` stands for on this machine."""
    if options.backend != "auto":
        return options.backend
    return "cuda" if cuda_usable() else "sim"


def create(options: Options) -> Any:
    """Create the backend the options ask for (wrapped in the checker where it applies)."""
    name = resolve(options)
    if name == "sim":
        if options.backend == "auto":
            log.warning("asyncgpu: no usable GPU found; using the CPU simulator (sim backend)")
        if "numba.cuda" not in sys.modules:
            enable_numba_simulator()
        from ._sim import SimBackend

        sim = SimBackend(options.sim_seed, options.sim_strategy, options.sim_tick)
        return CheckedBackend(sim, sim.replay_hint)
    if not cuda_usable():
        raise BackendUnavailableError(
            "the cuda backend needs CuPy (pip install 'asyncgpu[cuda12]' or '[cuda13]') and a "
            "visible NVIDIA GPU; set ASYNCGPU_BACKEND=sim to run on the CPU simulator"
        )
    from ._cuda import CudaBackend

    cuda = CudaBackend(options)
    return CheckedBackend(cuda, lambda: "") if options.debug_hb else cuda


class CheckedBackend:
    """Forwards to a backend and checks the happens-before order of what it is asked to do."""

    def __init__(self, inner: Any, hint: Any) -> None:
        self.inner = inner
        self.hb = HappensBeforeChecker()
        self._hint = hint
        self.name = inner.name
        self.prefetches = inner.prefetches
        self.wants_sites = True
        self.host_coherent_while_busy = inner.host_coherent_while_busy

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def _checked(self, fn: Any, *args: Any) -> None:
        try:
            fn(*args)
        except RaceError as exc:
            hint = self._hint()
            raise RaceError(f"{exc} ({hint})" if hint else str(exc)) from None

    def record(self, event: Any, stream: Any) -> None:
        self.inner.record(event, stream)
        self.hb.record(event, stream)

    def wait(self, stream: Any, event: Any) -> None:
        self.inner.wait(stream, event)
        self.hb.wait(stream, event)

    def event_done(self, event: Any) -> bool:
        done = self.inner.event_done(event)
        if done:
            self.hb.host_sync_event(event)
        return done

    def host_wait(self, event: Any) -> None:
        self.inner.host_wait(event)
        self.hb.host_sync_event(event)

    def synchronize(self) -> None:
        self.inner.synchronize()
        self.hb.host_sync_all()

    def launch(self, node: Any, stream: Any) -> None:
        accesses = [(a.alloc.buffer.uid, a.lo, a.hi, a.write) for a in node.accesses]
        self._checked(self.hb.launch, stream, accesses, node.label())
        self.inner.launch(node, stream)

    def host_access(self, accesses: Any, label: str) -> None:
        hb_accesses = [(a.alloc.buffer.uid, a.lo, a.hi, a.write) for a in accesses]
        self._checked(self.hb.host_access, hb_accesses, label)
        self.inner.host_access(accesses, label)

    def timing_event(self) -> Any:
        return self.inner.timing_event()

    def clock_base(self) -> Any:
        return self.inner.clock_base()

    def elapsed_s(self, start: Any, end: Any) -> float:
        return self.inner.elapsed_s(start, end)

    def free(self, buffer: Any) -> None:
        self._checked(self.hb.free, buffer.uid, f"free of buffer {buffer.uid}")
        self.inner.free(buffer)
