"""Stress mode for the ``cuda`` backend: random delays before nodes (``ASYNCGPU_STRESS=1``).

On the GPU the hardware scheduler cannot be controlled, but it can be perturbed. Before a node
is launched, with probability ``probability``, a one-thread spin kernel of random length
(``clock64`` loop, up to ``max_cycles``: about 1 ms on an H100) is launched on the node's
stream, so the node starts late relative to work on other streams. A missing dependency then
shows as a wrong answer instead of hiding behind timing (the reliability note's E2: the same
missing event was invisible without a delay and failed every time with one). Together with the
``random`` stream policy, which stress mode also selects, and the happens-before checker
(``ASYNCGPU_DEBUG_HB=1``) this is the GPU counterpart of the sim backend's adversarial executor.

Choices come from one seeded RNG (``ASYNCGPU_STRESS_SEED``). Nothing is delayed inside a stream
capture (the delay would become part of the graph). On a runtime over several GPUs the spin runs
on the node's GPU, before the node on its stream, so nodes on one GPU also start late relative
to the other GPUs' work (a missing cross-device event or peer copy shows as a wrong answer).
"""

from __future__ import annotations

import contextlib
import random
from typing import Any

import numpy as np

from ...core.backend import ForwardingBackend

SPIN_SOURCE = r'''
extern "C" __global__ void asyncgpu_stress_spin(long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) { }
}
'''


class StressBackend(ForwardingBackend):
    """Forwards to the cuda backend; may enqueue a random delay before each node's launch."""

    def __init__(self, inner: Any, seed: int, probability: float = 0.5,
                 max_cycles: int = 2_000_000) -> None:
        self.inner = inner
        self.name = inner.name
        self.prefetches = inner.prefetches
        self.wants_sites = inner.wants_sites
        self.host_coherent_while_busy = inner.host_coherent_while_busy
        self.rng = random.Random(seed)
        self.probability = probability
        self.max_cycles = max_cycles
        self.delays = 0
        self._spin: Any = None

    def launch(self, node: Any, stream: Any) -> None:
        if self.rng.random() < self.probability and not self.inner.captures.engaged:
            self.delay(stream, node.device)
        self.inner.launch(node, stream)

    def delay(self, stream: Any, slot: int = 0) -> None:
        """Enqueue a spin of random length on ``stream`` (mostly short, sometimes ~1 ms), a
        stream of the runtime's device ``slot``."""
        on_device = getattr(self.inner, "on_device", None)     # (a backend of several GPUs)
        with on_device(slot) if on_device is not None else contextlib.nullcontext():
            if self._spin is None:
                import cupy
                self._spin = cupy.RawKernel(SPIN_SOURCE, "asyncgpu_stress_spin")
            cycles = int(self.max_cycles * self.rng.random() ** 3)
            # (CuPy loads the kernel on the current device: the stream's)
            self._spin((1,), (1,), (np.int64(cycles),), stream=stream)
        self.delays += 1
