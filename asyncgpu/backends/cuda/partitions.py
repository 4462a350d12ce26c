"""The ``cuda`` backend's SM partitions: CUDA green contexts, one per partition.

The model
---------
``asyncgpu.core.partitions`` decides which SM groups a partition holds; this module
makes them real on one device: the device's SMs split once into groups of ``GRAIN``
(``cuDevSmResourceSplitByCount``), a partition's groups made into a resource descriptor and
a green context (``cuGreenCtxCreate``), and the streams of the tenants in it created there
(``cuGreenCtxStreamCreate``, with each tenant's priority), wrapped as CuPy external streams.
A kernel launched on such a stream runs on the partition's SMs only, whatever context its
function was loaded in; events recorded and waited on across green contexts and the device's
primary context order work as on any stream. A CUDA graph launched on such a stream runs on
every SM (its kernel nodes belong to the primary context): the backend launches kernels
without the one-node graph lanes once a partition exists, and the runtime refuses a recorded
function's replay in a partitioned tenant.

Invariants: a partition's streams and green context live until it is released
(:meth:`GreenContexts.release`, once the runtime moved its tenants' streams out) or until
:meth:`GreenContexts.close` (the backend's ``close``); a partition's green context is made once
while it lasts.

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
        #: the backend's one-node graph lanes before the first partition (its to restore)
        self.lanes = False
        #: per partition's owner: the streams made in it
        self._streams: dict[str, list[Any]] = {}

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
        self._streams.setdefault(owner, []).append(handle)
        return self.cupy.cuda.ExternalStream(int(handle), self.device)

    def holds(self) -> bool:
        """Whether any partition exists."""
        return bool(self.ledger.owners)

    def release(self, owner: str) -> None:
        """Destroy ``owner``'s streams and green context and free its SMs (nothing if it has
        no partition; the device must be done with its streams)."""
        driver = self._driver
        for handle in self._streams.pop(owner, ()):
            driver.cuStreamDestroy(handle)
        context = self._contexts.pop(owner, None)
        if context is not None:
            driver.cuGreenCtxDestroy(context)
        self.ledger.release(owner)

    def close(self) -> None:
        """Destroy the streams and the green contexts (the device must be done with them)."""
        for owner in {*self._streams, *self._contexts}:
            self.release(owner)


__all__ = ["GreenContexts"]
