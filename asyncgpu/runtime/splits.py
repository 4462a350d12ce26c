"""A tenant's splits: a splittable launch run as pieces, in order.

The model
---------
Splitting (GACER's operator decomposition): a tenant may ask for a splittable kernel to run
in ``k`` pieces (``asyncgpu.tenant(..., split={"name": k})``, :func:`launch_split`), each
piece a node, every piece after the one before it (an edge of reason ``split``, so they keep
to one stream and run in order). Between two pieces the GPU can start another tenant's
kernels, which a whole launch would keep waiting behind its blocks. A kernel is splittable in
one of two ways:

* element-wise (``elementwise=``): the pieces are a chunked launch's chunks of axis 0
  (``asyncgpu.runtime.chunks``), each on the launch's grid;
* by its grid (``grid_offset=("first", "total")``, contract in :func:`asyncgpu.kernel`): the
  kernel computes its block index as ``blockIdx.x + first`` and the grid's block count as
  ``total``, so a launch of ``G`` blocks in x is cut into consecutive block ranges
  (``ranges(G, k)``): the piece of blocks ``[a, b)`` is launched on ``b - a`` blocks with
  ``first`` raised by ``a`` and ``total`` unchanged. Which data a piece touches is unknown, so
  every piece has the whole launch's accesses (the tracker orders each as the whole launch),
  and an ``out`` array, written whole by the launch but not by each piece, is read-write to
  the pieces after the first (what a piece leaves alone is kept).
  A launch whose ``first`` and ``total`` cannot describe its grid (``first`` 0 and ``total``
  not its blocks in x, or ``first + G`` over ``total``) is refused before anything is
  enqueued; one of fewer than two blocks in x runs whole.
  A kernel that also declares ``grid_stride=True`` gives the same answer on any grid, so a
  whole launch (``first`` 0) is cut otherwise: every piece runs on the launch's grid of
  ``G`` blocks as the ``i``-th part of a grid of ``k * G`` (``first = i * G``, ``total =
  k * G``), each a ``k``-th of the work on every block. Cut by block ranges, a grid the
  device holds at once would give pieces as long as the whole launch.

The pieces are cut, validated and prepared as a chunked launch's are (the same rows along
axis 0, the same placement on several devices). Inside a recording the
same pieces are deferred as ``asyncgpu.recorder.keys.Piece`` launches, and the captured graph
orders each after the one before.

Plain Python: the backends run the kernels as usual.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from ..core.dag import Node
from ..core.errors import ArgumentError
from .checks import is_int
from .chunks import axis_length, prepared, ranges, row_parts

log = logging.getLogger("asyncgpu")


def _grid_parts(launcher: Any, args: tuple[Any, ...], values: list[Any], site: str | None,
                count: int) -> list[tuple[Any, tuple[Any, ...]]] | None:
    """A grid-offset launch's ``count`` pieces of its grid along x (``ranges`` of its blocks):
    (the launcher of the piece's blocks, the arguments with ``first`` raised by the piece's
    start); None when it runs whole (fewer than two pieces or blocks). Raises if its ``first``
    and ``total`` cannot describe its grid."""
    kernel = launcher.kernel
    names = kernel.grid_offset
    at = [next(i for i, p in enumerate(kernel.params) if p.name == n) for n in names]
    first, total = values[at[0]], values[at[1]]
    blocks = launcher.grid[0]
    where = f"kernel '{kernel.name}'" + (f" (launched at {site})" if site else "")
    for i, name, v in zip(at, names, (first, total)):
        if not is_int(v):
            raise ArgumentError(
                f"{where}, argument {i} '{name}': grid_offset declares it a block number, but "
                f"it is {v!r}; pass an integer"
            )
    first, total = int(first), int(total)
    if first == 0 and total != blocks:
        raise ArgumentError(
            f"{where}, argument {at[1]} '{names[1]}': grid_offset declares it the whole "
            f"grid's block count, but it is {total} where the launch has {blocks} blocks in x "
            f"and '{names[0]}' is 0; pass the launch's blocks in x (first 0, total {blocks}), "
            "or drop grid_offset="
        )
    if first < 0 or first + blocks > total:
        raise ArgumentError(
            f"{where}, argument {at[0]} '{names[0]}': the launch would be blocks {first} to "
            f"{first + blocks - 1} of a grid of {total} ('{names[1]}'), which is not a part of "
            f"that grid; pass first 0 and total {blocks} for a whole launch (or drop "
            "grid_offset=)"
        )
    start_type = type(args[at[0]])
    if kernel.grid_stride and first == 0 and count >= 2:
        # (its answer is the same on any grid: each piece runs the whole grid as the i-th
        # part of one count times larger, a count-th of the work on every block)
        total_type = type(args[at[1]])
        # (no more pieces than the arguments' integer types can number the larger grid by:
        # a launch given total as an int8 runs whole rather than wrapped around)
        count = min(count, _most(kernel.params[at[1]], total_type) // blocks,
                    _most(kernel.params[at[0]], start_type) // blocks + 1)
        if count < 2:
            return None
        parts = []
        for i in range(count):
            part = list(args)
            part[at[0]] = start_type(i * blocks)
            part[at[1]] = total_type(count * blocks)
            parts.append((launcher, tuple(part)))
        return parts
    if count < 2 or blocks < 2:
        return None
    rest = launcher.grid[1:]
    parts = []
    for start, stop in ranges(blocks, count):
        part = list(args)
        part[at[0]] = start_type(first + start)
        piece = kernel[(stop - start,) + rest, launcher.block, launcher.shared]
        parts.append((piece, tuple(part)))
    return parts


def _most(param: Any, value_type: type) -> int:
    """The largest integer that a value of ``value_type`` passed as ``param`` holds: the
    narrower of a NumPy integer type's and the parameter's declared type's (CUDA C)."""
    most = 2 ** 63 - 1
    for dt in (value_type if issubclass(value_type, np.integer) else None, param.dtype):
        if dt is not None and np.dtype(dt).kind in "iu":
            most = min(most, int(np.iinfo(dt).max))
    return most


def split_parts(launcher: Any, args: tuple[Any, ...], arrays: list[Any], values: list[Any],
                site: str | None, pieces: int) -> list[tuple[Any, tuple[Any, ...]]] | None:
    """A split launch's pieces in order, each (its launcher, its arguments): chunks of axis 0
    for an element-wise kernel, block ranges of the grid for one with a grid offset; None when
    it runs whole (fewer than two pieces, rows or blocks). Raises ``ArgumentError`` when the
    kernel is neither or its arguments cannot be split. Shared by the eager split
    (:func:`launch_split`) and a recording's (``asyncgpu.recorder.keys.Piece``), so both cut a
    launch the same way; :func:`bind_parts` validates the pieces."""
    kernel = launcher.kernel
    if kernel.grid_offset is not None:
        return _grid_parts(launcher, args, values, site, pieces)
    if not kernel.elementwise:
        where = f"kernel '{kernel.name}'" + (f" (launched at {site})" if site else "")
        raise ArgumentError(
            f"{where}: the tenant splits it in {pieces} pieces, but it is not declared "
            "element-wise or with a grid offset, so its pieces cannot be told apart; declare "
            "it with elementwise= or grid_offset= (asyncgpu.kernel) or drop it from the "
            "tenant's split")
    length = axis_length(kernel, arrays, values, site)
    if pieces < 2 or length < 2:
        return None
    return row_parts(launcher, args, length, pieces)


def split_count(tenant: Any, kernel: Any) -> int:
    """How many pieces ``tenant`` cuts ``kernel``'s launches into (0: none). A regulation
    plan's split of a kernel declared neither element-wise nor with a grid offset is not
    applied, said once per tenant and kernel (a plan never makes a working launch fail);
    the tenant's own is, and :func:`split_parts` refuses it naming the fix."""
    pieces = tenant.splits.get(kernel.name, 0)
    if pieces and not kernel.elementwise and kernel.grid_offset is None:
        own = tenant.given[0]
        if not own or kernel.name not in own:
            said = (tenant.name, kernel.name)
            if said not in _unsplit:
                _unsplit.add(said)
                log.warning("asyncgpu: the regulation plan splits kernel %r of tenant %r in %d "
                            "pieces, and it is declared neither element-wise nor with a grid "
                            "offset: its launches run whole", kernel.name, tenant.name, pieces)
            return 0
    return pieces


#: (tenant, kernel) names told that a plan's split of the kernel is not applied.
_unsplit: set[tuple[str, str]] = set()


def tenant_splits(rt: Any) -> Any:
    """The current thread's tenant's splits (kernel name -> pieces), or None: what a
    recording made now splits (``asyncgpu.recorder.keys.split_launch``)."""
    if not rt._tenanted:
        return None
    return rt.tenants[getattr(rt._pins, "tenant", 0)].splits or None


def split_settings(rt: Any, launches: Any) -> Any:
    """What recorded ``launches`` made now depend on beside their arguments: their kernels'
    names and how the current tenant splits those (``((name, pieces), ...)``); None on a
    runtime without tenants. A memo or graph made under settings that no longer hold
    (:func:`splits_hold`) is not reused, so a change of plan records anew."""
    if not rt._tenanted:
        return None
    names = tuple(dict.fromkeys([launch.launcher.kernel.name for launch in launches
                                 if launch.launcher is not None]))
    return names, _split_of(tenant_splits(rt), names)


def splits_hold(rt: Any, made: Any) -> bool:
    """Whether the current tenant splits the kernels of ``made`` (:func:`split_settings`) as
    they were split then. (Once per recorded segment, and per static replay, on a runtime
    with tenants.)"""
    if made is None:
        return not rt._tenanted
    splits = tenant_splits(rt)
    if not splits:
        return not made[1]
    return _split_of(splits, made[0]) == made[1]


def _split_of(splits: Any, names: Any) -> tuple[Any, ...]:
    """How ``splits`` (a tenant's, or None) cuts the kernels ``names``: ``((name, pieces),
    ...)`` for those it splits."""
    if not splits:
        return ()
    return tuple([(name, splits[name]) for name in names if name in splits])


def launch_split(rt: Any, launcher: Any, args: tuple[Any, ...], arrays: list[Any],
                 values: list[Any], site: str | None, pieces: int, device: int = 0,
                 after: Any = None) -> bool:
    """Issue a splittable launch as ``pieces`` nodes in order on device slot ``device`` (where
    the whole launch was placed: every piece goes there; see the module docstring and
    :func:`split_parts`); whether it did (a launch of fewer than two rows or blocks runs
    whole). Every piece is validated and prepared before the first is issued. ``after``: the
    nodes the first piece waits for (a tenant's pointer: edges of reason ``pointer``), or
    None."""
    kernel = launcher.kernel
    parts = split_parts(launcher, args, arrays, values, site, pieces)
    if parts is None:
        return False
    previous = None
    for piece_arrays, launch in prepared(rt, kernel, parts, site, device):
        node = Node("kernel", kernel.name, site, piece_arrays)
        node.launch = launch
        node.device = device
        rt.stats.kernels += 1
        if previous is None:
            rt.issue_after(node, () if after is None else after, "pointer")
        else:
            rt.issue_after(node, (previous,), "split")
        previous = node
    return True
