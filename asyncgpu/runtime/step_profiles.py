"""Profiling a regulated tenant's steps: each launch in them noted, timed alone, made a profile.

The model
---------
While regulation (``asyncgpu.runtime.regulator``) profiles, each regulated tenant's open step
on a thread is a :class:`Step`: the shape keys of its launches (kernel, grid, block; a
recorded function's name and kernels), which tell a step of another shape from the plan's,
and, while profiling, its *ops*: for each launch, its name, its timing sample (two timing
events around it), its data parents in the step, its share of the device (its blocks over
those the device keeps resident, at most 1), whether it is bound by memory, the bytes it
moves, whether it may be split, its grid's waves and blocks, and the launch itself, to time it
again beside other tenants' (``asyncgpu.runtime.pair_profiles``). A profiled launch runs
alone: after the previous profiled launch of any tenant (an edge of reason ``profile``).
:meth:`StepProfiles._profile` makes a tenant's profile (``asyncgpu.core.plan.TenantProfile``)
from its profiled steps, each launch timed at the least it took at its place in them.

:class:`StepProfiles` holds these methods; the ``Regulator`` takes it as a base and keeps the
state they use (its open steps, its state, the latest profiled node, its test hooks).

Invariants: a launch is profiled only inside an open step of a regulated tenant while the
state is ``profiling``; profiled launches are issued one after another, so the last one's end
means every one has ended; a launch's data parents are launches of the same step.

Example::

    step = regulator.launch(index, launcher)       # the runtime, at a kernel launch
    if step is not None:
        regulator.profile(node, launcher, step, args, arrays)
"""

from __future__ import annotations

import threading
from typing import Any

from ..core.device_model import occupancy
from ..core.interference import Sample, heuristic_class, moved_bytes
from ..core.plan import Op, TenantProfile
from .chunks import splittable
from .stage_timing import TimedLaunch


class Step:
    """One open step of a regulated tenant on one thread: its launches' shape keys and, when
    profiled, its ops (kernel or recording name, timing sample, data parents in the step,
    share of the device, memory-bound, bytes moved, splittable) and each op's node's
    index."""

    __slots__ = ("index_of", "keys", "ops")

    def __init__(self) -> None:
        self.keys: list[tuple[Any, ...]] = []
        self.ops: list[tuple[Any, ...]] = []
        self.index_of: dict[Any, int] = {}


class StepProfiles:
    """The profiling methods of a ``Regulator`` (a base of it, whose state they use)."""

    __slots__ = ()

    def launch(self, index: int, launcher: Any) -> Step | None:
        """A kernel launch of tenant ``index``: noted in its open step; returns the step when
        the launch is to be profiled (the caller then issues it through :meth:`profile`)."""
        step = self._open.get((threading.get_ident(), index))
        if step is None:
            return None
        step.keys.append((launcher.kernel.name, launcher.grid3, launcher.block3))
        return step if self.state == "profiling" else None

    def profile(self, node: Any, launcher: Any, step: Step, args: tuple[Any, ...],
                arrays: list[Any]) -> None:
        """Issue a profiled kernel launch (``args`` as given, ``arrays`` bound): alone (after
        the previous profiled one), timed; kept to be timed beside other tenants' launches
        (:func:`~asyncgpu.runtime.pair_profiles.time_pairs`)."""
        rt = self.rt
        backend = rt.backend
        share, threads, attrs, waves = self._shape(launcher)
        nbytes = moved_bytes(node.accesses)
        memory = heuristic_class(nbytes, threads, attrs) == "memory"
        sample = Sample(None, backend.timing_event(node.device),
                        backend.timing_event(node.device))
        # (a grid-stride kernel's pieces run on the whole grid, a k-th of the work each:
        # as an element-wise one's, whatever its waves)
        kernel = launcher.kernel
        grid = waves if kernel.grid_offset is not None and not kernel.grid_stride else 0.0
        g = launcher.grid3
        previous = self._note(node, step, sample, kernel.name, share, memory, nbytes,
                              splittable(launcher), grid, g[0] * g[1] * g[2],
                              TimedLaunch(launcher, args, arrays, node.site))
        rt.issue_after(node, previous, "profile")

    def _shape(self, launcher: Any) -> tuple[float, int, dict[str, Any], float]:
        """A launch's share of the device (at most 1), its threads, its kernel's attributes
        (registers, shared memory; empty where the backend has none) and its ``occupancy``
        (above 1: the grid runs in waves)."""
        backend = self.rt.backend
        grid, block = launcher.grid3, launcher.block3
        blocks, per_block = grid[0] * grid[1] * grid[2], block[0] * block[1] * block[2]
        attrs = None
        attributes = getattr(backend, "kernel_attributes", None)
        if attributes is not None:
            try:
                attrs = attributes(launcher.kernel)
            except Exception:  # noqa: BLE001 - a kernel without attributes: shape only
                attrs = None
        attrs = attrs or {}
        waves = occupancy(blocks, per_block, getattr(backend, "sm_count", 132),
                          attrs.get("regs", 0), attrs.get("shared", 0))
        return min(1.0, waves), blocks * per_block, attrs, waves

    def graph(self, index: int, node: Any, frozen: Any) -> tuple[Any, ...] | None:
        """A graph launch (a recorded function's replay) of tenant ``index``: noted in its open
        step by the recording's name; while profiling, timed as one launch holding the share
        of the device its largest kernel holds (its kernels may run side by side inside it, so
        this is a floor), and the profiled launch it must wait for is returned (``()`` for
        none)."""
        step = self._open.get((threading.get_ident(), index))
        if step is None:
            return None
        step.keys.append((frozen.name, frozen.kernels))
        if self.state != "profiling":
            return None
        backend = self.rt.backend
        graph = frozen.graph
        share = max((self._shape(launch.launcher)[0] for launch in frozen.launches
                     if hasattr(launch, "launcher")), default=1.0)
        sample = Sample(graph, backend.timing_event(node.device),
                        backend.timing_event(node.device), getattr(graph, "done", None))
        return self._note(node, step, sample, frozen.name, share, False,
                          moved_bytes(node.accesses), False)

    def _note(self, node: Any, step: Step, sample: Sample, name: str, share: float,
              memory: bool, nbytes: int, splittable: bool, grid: float = 0.0, blocks: int = 0,
              launch: TimedLaunch | None = None) -> tuple[Any, ...]:
        """Put a profiled launch in its step (with its data parents there, its ``blocks`` (0
        for a graph) and ``launch``, to time it again; None for a graph) and on its node; the
        previous profiled launch it waits for (``()`` for none)."""
        found = self.rt.deps.conflicts(node.accesses)
        parents = tuple(sorted(step.index_of[p] for p in found if p in step.index_of))
        node.keepalive = sample
        step.index_of[node] = len(step.ops)
        step.ops.append((name, sample, parents, share, memory, nbytes, splittable, grid,
                         blocks, launch))
        last = self._last
        self._last = node
        return () if last is None else (last,)

    def _profile(self, index: int, steps: list[list[tuple[Any, ...]]]) -> TenantProfile:
        """Tenant ``index``'s profile from its profiled ``steps``: the last one's launches,
        each timed at the least it took at its place in those of the same launches: a launch
        alone can only be lengthened (by another process's work on the device, say), so one
        slow sample does not make the plan."""
        rt = self.rt
        backend = rt.backend
        ops = steps[-1]
        names = [op[0] for op in ops]
        alike = [step for step in steps if [op[0] for op in step] == names]
        timed = []
        for i, (name, _, parents, share, memory, nbytes, splittable, grid, blocks, _
                ) in enumerate(ops):
            seconds = None
            for step in alike:
                sample = step[i][1]
                took = max(backend.elapsed_s(sample.start, sample.end), 1e-9)
                if self.stand_in is not None:
                    took, share, grid = self.stand_in(name, took, share, grid)
                seconds = took if seconds is None else min(seconds, took)
            timed.append((name, seconds, share, memory, nbytes, parents, splittable, grid,
                          blocks))
        # bandwidth as a share of the fastest rate a memory-bound launch reached (the device's
        # peak, near enough, when the mix has one)
        peak = max((nbytes / seconds for _, seconds, _, memory, nbytes, *_ in timed if memory),
                   default=0.0)
        out = [Op(name, seconds, share,
                  min(1.0, nbytes / seconds / peak) if memory and peak else 0.0,
                  splittable and rt.placement is None, parents, grid, blocks)
               for name, seconds, share, memory, nbytes, parents, splittable, grid, blocks
               in timed]
        tenant = rt.tenants[index]
        return TenantProfile(tenant.name, tenant.priority, tuple(out), tenant.streams == 1)


__all__ = ["Step", "StepProfiles"]
