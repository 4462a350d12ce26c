"""The eager launch's fast path: the general pipeline, specialized to its common case.

The model
---------
Most launches in a loop look alike: live arrays of this runtime whose current copy is already
on the device, plain Python numbers, no recording, no trace. For them the general pipeline
(``Kernel.bind``, the explicit model's ``before_device``, chunking, and ``Runtime._issue`` with
its branches for copies, prefetches, graphs, instruments and sync mode) does work whose outcome
is known in advance. :func:`launch_fast` runs the same steps in the same order without it::

    check every argument against the kernel's fast slots  (anything unusual: general path)
    -> backend.kernel_launch -> book written allocations DEVICE -> dependencies -> stream
    -> event waits -> backend.launch -> issued (event record) -> commit -> locations -> poll

Each parameter's checks are worked out once per kernel (:func:`fast_slots`): for an array, the
dtype and contiguity a CUDA C declaration demands; for a number, the Python type that passes
unchanged (Numba) or converts as ``convert_scalar`` would (CUDA C, bounds included).

Invariants
----------
* Nothing is changed before the launch is known to go this way: every test that can send it to
  the general path comes first, so the general path starts from the state the call found, and
  gives the same error message it always gives.
* For every launch it takes, the fast path makes the same node, parents, stream, event waits,
  locations and statistics as the general path (``tests/test_fast_launch.py`` runs random
  programs both ways, on every simulated schedule, and compares).
* It runs only while the runtime's ``fast`` flag holds (``Runtime._configure``): the option
  ``fast_launch``, async execution, ``with-const``, no planted test bug, no instrument.

Example::

    for i in range(n):          # after the first launch, every one of these takes the fast path
        axpy[g, b](x, y, 2.0, n)

This module is plain Python: no CuPy or Numba.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._array import DEVICE, HOST, Array
from ._checks import _int_bounds, user_site
from ._dag import Node, reduce_parents
from ._kernel import ArrayArg

#: Python number types an untyped (Numba) kernel passes on unchanged.
_PLAIN = frozenset({int, float, bool, complex})
_NUMBER, _INT, _REAL = 1, 2, 3


def fast_slots(kernel: Any) -> tuple[tuple[Any, ...], ...]:
    """Per parameter: ``(index, name, read, write, array_dtype, contiguous, scalar, conv, lo,
    hi)``; ``scalar`` says which numbers pass without the general checks (None: none do)."""
    slots = []
    for (i, name, read, write, dtype, is_array), p in zip(kernel._slots, kernel.params):
        scalar, conv, lo, hi = None, None, 0, 0
        annotated = not (read and write)
        if not kernel.typed:
            if not annotated:
                scalar = _NUMBER
        elif not p.is_array and not annotated and p.dtype is not None:
            dt = np.dtype(p.dtype)
            conv = dt.type
            if dt.kind in "iu":
                scalar = _INT
                lo, hi = _int_bounds(dt)
            elif dt.kind == "f":
                scalar = _REAL
        array_ok = not kernel.typed or p.is_array
        slots.append((i, name, read, write, dtype if array_ok else False,
                      kernel.typed, scalar, conv, lo, hi))
    return tuple(slots)


def launch_fast(rt: Any, launcher: Any, args: tuple[Any, ...]) -> bool:
    """Schedule the launch on the fast path if it qualifies; whether it did.

    Called by ``Runtime.launch_kernel`` under the runtime's lock, with no recording open and the
    runtime's ``fast`` flag set. Returns False, having changed nothing, for anything it does not
    handle.
    """
    kernel = launcher.kernel
    slots = kernel._fast
    if slots is None:
        slots = kernel._fast = fast_slots(kernel)
    if len(args) != len(slots):
        return False
    blocked = rt.host_blocked      # locations that need a copy or prefetch first
    values = list(args)
    arrays: list[Any] = []
    for (i, name, read, write, dtype, contiguous, scalar, conv, lo, hi), a in zip(slots, args):
        ta = type(a)
        if ta is Array:
            alloc = a._alloc
            if (dtype is False or alloc.freed or alloc.runtime is not rt
                    or alloc.location in blocked
                    or (contiguous and ((dtype is not None and a.dtype != dtype)
                                        or not a._contiguous))):
                return False
            arrays.append(ArrayArg(i, name, a, read, write))
        elif scalar is _NUMBER:
            if ta not in _PLAIN:
                return False
        elif scalar is _INT:
            if ta is not int or not lo <= a <= hi:
                return False
            values[i] = conv(a)
        elif scalar is _REAL:
            if ta is not float and ta is not int:
                return False
            values[i] = conv(a)
        else:
            return False
    site = user_site() if rt.want_sites else None
    backend = rt.backend
    launch = backend.kernel_launch(kernel, launcher, arrays, values, site)
    node = Node("kernel", kernel.name, site, arrays)
    node.launch = launch
    stats = rt.stats
    stats.kernels += 1
    stats.fast_launches += 1
    if rt.memory is not None:
        # as ExplicitMemory.before_device books them: DEVICE before the launch
        for acc in arrays:
            if acc.write and acc.alloc.nbytes:
                acc.alloc.location = DEVICE
    rt._issuing = True
    enqueued = False
    try:
        deps = rt.deps
        found = deps.conflicts(arrays)
        parents = reduce_parents(found) if len(found) > 1 else list(found)
        streams = rt.streams
        stream = streams.choose(node, parents)
        node.stream = stream
        node.parents = parents
        if parents:
            streams.wait_for_parents(node, parents)
        enqueued = True
        backend.launch(node, stream.handle)
        streams.issued(node)
        deps.commit(node, arrays)
        for acc in arrays:
            alloc = acc.alloc
            alloc.location = DEVICE if acc.write else alloc.location | DEVICE
        stats.nodes += 1
        stats.streams_used.add(stream.index)
        if found:
            edges = stats.edges
            for p in parents:
                for reason, _ in found[p]:
                    edges[reason] += 1
        if streams._inflight > streams.poll_threshold:
            streams.poll()
    except BaseException:
        if enqueued:
            rt._recover(node)
        raise
    finally:
        rt._issuing = False
    return True


def host_blocked(explicit: bool, prefetch: bool) -> frozenset[int]:
    """Locations a launch's array may not have on the fast path, where it needs a copy or a
    prefetch first: ``{HOST}`` in the explicit model (a copy in), ``{HOST, HOST|DEVICE}`` when managed
    memory is prefetched, nothing otherwise."""
    if explicit:
        return frozenset({HOST})
    return frozenset({HOST, HOST | DEVICE}) if prefetch else frozenset()
