"""The ``cuda`` backend's SM partitions: CUDA green contexts, one per partitioned tenant.

The model
---------
``asyncgpu.core.partitions`` decides which SM groups a tenant's partition holds; this module
makes them real on one device: the device's SMs split once into groups of ``GRAIN``
(``cuDevSmResourceSplitByCount``), a partition's groups made into a resource descriptor and
a green context (``cuGreenCtxCreate``), and the tenant's streams created in it
(``cuGreenCtxStreamCreate``, with the tenant's priority), wrapped as CuPy external streams.
A kernel launched on such a stream runs on the partition's SMs only, whatever context its
function was loaded in; events recorded and waited on across green contexts and the device's
primary context order work as on any stream. A CUDA graph launched on such a stream runs on
every SM (its kernel nodes belong to the primary context): the backend launches kernels
without the one-node graph lanes once a partition exists, and the runtime refuses a recorded
function's replay in a partitioned tenant.

Invariants: the streams and green contexts live until :meth:`GreenContexts.close` (the
backend's ``close``); a partition's green context is made once.

Example::

    green = GreenContexts(cupy, device=0)
    green.reserve("dl", 40)                 # 40 SMs of device 0
    stream = green.stream("dl", priority=-5)
"""

from __future__ import annotations

from typing import Any

from ...core.partitions import GRAIN, SmLedger


def _ok(result: Any) -> Any:
    """cuda-python's (status, values...) as the values; RuntimeError naming the status."""
    status, *values = result if isinstance(result, tuple) else (result,)
    if int(status) != 0:
        raise RuntimeError(f"CUDA driver: {status!r}")
    return values[0] if len(values) == 1 else tuple(values)


class GreenContexts:
    """One device's SM groups and the green contexts of its partitions."""

    def __init__(self, cupy: Any, device: int) -> None:
        from cuda.bindings import driver

        self.cupy = cupy
        self.device = device
        self._driver = driver
        self._dev = _ok(driver.cuDeviceGet(device))
        sms = _ok(driver.cuDeviceGetDevResource(
            self._dev, driver.CUdevResourceType.CU_DEV_RESOURCE_TYPE_SM))
        groups, count, _ = _ok(driver.cuDevSmResourceSplitByCount(
            sms.sm.smCount // GRAIN, sms, 0, GRAIN))
        self._groups = list(groups)[:count]
        self.ledger = SmLedger([g.sm.smCount for g in self._groups])
        self._contexts: dict[str, Any] = {}
        self._streams: list[Any] = []

    def reserve(self, owner: str, sms: int) -> int:
        """``owner``'s partition of at least ``sms`` SMs (see ``SmLedger.reserve``); its SMs."""
        self.ledger.reserve(owner, sms)
        return self.ledger.sms_of(owner)

    def stream(self, owner: str, priority: int = 0) -> Any:
        """A new non-blocking stream of ``owner``'s partition (reserved before), of CUDA
        priority ``priority``, as a CuPy stream."""
        driver = self._driver
        context = self._contexts.get(owner)
        if context is None:
            chosen = [self._groups[g] for g in self.ledger.owners[owner]]
            desc = _ok(driver.cuDevResourceGenerateDesc(chosen, len(chosen)))
            context = self._contexts[owner] = _ok(driver.cuGreenCtxCreate(
                desc, self._dev, driver.CUgreenCtxCreate_flags.CU_GREEN_CTX_DEFAULT_STREAM))
        handle = _ok(driver.cuGreenCtxStreamCreate(
            context, driver.CUstream_flags.CU_STREAM_NON_BLOCKING, priority))
        self._streams.append(handle)
        return self.cupy.cuda.ExternalStream(int(handle), self.device)

    def close(self) -> None:
        """Destroy the streams and the green contexts (the device must be done with them)."""
        driver = self._driver
        for handle in self._streams:
            driver.cuStreamDestroy(handle)
        for context in self._contexts.values():
            driver.cuGreenCtxDestroy(context)
        self._streams, self._contexts = [], {}


__all__ = ["GreenContexts"]
