"""Chunked pipelining: a large host-to-device copy feeding an element-wise kernel, in pieces.

The model
---------
In the explicit memory model (``asyncgpu.runtime.memory``) a kernel whose input is current only on
the host waits for the whole copy before it starts. If the kernel is declared element-wise
(``ag.kernel(..., elementwise=True)`` or ``elementwise="n"``, contract in
:func:`asyncgpu.kernel`), the launch is split along axis 0 into ``Options.copy_chunks``
pieces: for each chunk, a copy node of that chunk of every host-current input, then the
kernel on that chunk of every array argument. The dependency tracker works on byte ranges, so
kernel chunk ``k`` depends only on the copies of chunk ``k``, and the copy of chunk ``k + 1``
(a node without parents) goes to another stream: compute on chunk ``k`` overlaps the copy of
chunk ``k + 1`` (GACER's operator resizing, applied to transfers). Node count grows by
``2 * chunks``; the launch path is unchanged for every other kernel and in managed memory.

When a launch is chunked (all must hold, otherwise it runs whole): the memory model is
explicit; the kernel is element-wise; ``copy_chunks > 1``; some array argument's allocation is
current only on the host, with at least ``MIN_CHUNK_BYTES`` per chunk; and every such argument
spans its whole allocation (the chunks' copies then make the whole allocation current).

Invariants: the chunks partition ``[0, length)`` of axis 0 in order; every chunk's arguments
are validated (``Kernel.bind``) and prepared (``kernel_launch``) before the first node is
issued, so a refused launch enqueues nothing; the result equals the unchunked launch's
(tested on ``sim`` under adversarial orders).

Example::

    @ag.kernel(elementwise=True)
    @cuda.jit
    def square(x, y):
        for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
            y[i] = x[i] * x[i]

    x = ag.array(big)          # host-current
    square[1024, 256](x, y)    # 8 copies and 8 kernels, copy k+1 overlapping kernel k

Splitting (GACER's operator decomposition): a tenant may ask for an element-wise kernel to run
in ``k`` pieces (``asyncgpu.tenant(..., split={"name": k})``, :func:`launch_split`): the same
chunks of axis 0, each piece a node, every piece after the one before it (an edge of reason
``split``, so they keep to one stream and run in order). Between two pieces the GPU can start
another tenant's kernels, which a whole launch would keep waiting behind its blocks. Inside a
recording the same pieces (:func:`split_parts`) are deferred as ``asyncgpu.recorder.keys.Piece``
launches, and the captured graph orders each after the one before.

Plain Python: the backends run the copies and kernels as usual.
"""

from __future__ import annotations

from typing import Any

from ..core.dag import Node
from ..core.errors import ArgumentError, SignatureError
from .allocation import DEVICE, HOST
from .array import Array

#: Chunk only copies of at least this many bytes per chunk (smaller ones are latency-bound).
MIN_CHUNK_BYTES = 1 << 20


def check_annotation(kernel: Any, elementwise: Any) -> bool | str:
    """Validate ``elementwise=`` at decoration; returns the value the kernel keeps."""
    if elementwise is False or elementwise is None:
        return False
    if elementwise is True:
        if kernel.typed:
            raise SignatureError(
                f"kernel '{kernel.name}': elementwise=True needs the kernel to take its extent "
                "from its arrays, which CUDA C pointers do not carry; name the integer "
                "parameter holding the element count instead, e.g. elementwise='n'"
            )
        return True
    if not isinstance(elementwise, str):
        raise SignatureError(
            f"kernel '{kernel.name}': elementwise must be True, False or the name of the "
            f"element-count parameter; got {elementwise!r}"
        )
    by_name = {p.name: p for p in kernel.params}
    p = by_name.get(elementwise)
    if p is None:
        raise SignatureError(
            f"kernel '{kernel.name}': elementwise='{elementwise}' names no parameter; "
            f"parameters are {', '.join(by_name)}"
        )
    if kernel.typed and (p.is_array or p.dtype is None or p.dtype.kind not in "iu"):
        raise SignatureError(
            f"kernel '{kernel.name}': elementwise='{elementwise}' must name an integer "
            f"scalar parameter (the element count); '{p.name}' is '{p.ctype}'"
        )
    if elementwise in kernel.modes and kernel.modes[elementwise] != "rw":
        raise SignatureError(
            f"kernel '{kernel.name}': '{elementwise}' is annotated const/out, so it is an "
            "array, not the element count"
        )
    return elementwise


def ranges(length: int, chunks: int) -> list[tuple[int, int]]:
    """``chunks`` contiguous, nearly equal, non-empty ranges covering ``[0, length)``."""
    chunks = max(1, min(chunks, length))
    base, extra = divmod(length, chunks)
    out, start = [], 0
    for k in range(chunks):
        stop = start + base + (1 if k < extra else 0)
        out.append((start, stop))
        start = stop
    return out


def _length(kernel: Any, arrays: list[Any], values: list[Any], site: str | None) -> int:
    """The common length along axis 0, after checking the contract; raises if it cannot hold."""
    where = f"kernel '{kernel.name}'" + (f" (launched at {site})" if site else "")
    length = None
    for a in arrays:
        arr = a.array
        if arr.ndim == 0 or not arr.is_c_contiguous:
            raise ArgumentError(
                f"{where}, argument {a.index} '{a.param}': array {arr.describe()} cannot be "
                "split along axis 0 (elementwise needs C-contiguous arrays of at least one "
                "dimension); pass a contiguous array or drop elementwise="
            )
        if length is None:
            length = arr.shape[0]
        elif arr.shape[0] != length:
            raise ArgumentError(
                f"{where}, argument {a.index} '{a.param}': array {arr.describe()} has "
                f"{arr.shape[0]} rows where the other arrays have {length}; elementwise "
                "splits every array into the same chunks, so they must agree along axis 0 "
                "(or drop elementwise=)"
            )
    count = kernel.elementwise
    if isinstance(count, str) and length is not None:
        i = next(p for p, param in enumerate(kernel.params) if param.name == count)
        n = values[i]
        if isinstance(n, Array) or int(n) != length:
            raise ArgumentError(
                f"{where}, argument {i} '{count}': elementwise='{count}' declares it the "
                f"element count, but it is {n!r} where the arrays have {length} rows; pass "
                "the arrays' length (or drop elementwise=)"
            )
    return length or 0


def _parts(kernel: Any, args: tuple[Any, ...], length: int, count: int) -> list[tuple[Any, ...]]:
    """The launch's ``count`` pieces along axis 0 (``ranges``), as argument tuples: each array
    its rows of the piece, the element count (``elementwise="n"``) the piece's."""
    n = kernel.elementwise
    n_at = (next(i for i, p in enumerate(kernel.params) if p.name == n)
            if isinstance(n, str) else -1)
    return [tuple([a[start:stop] if isinstance(a, Array) else
                   (type(a)(stop - start) if i == n_at else a) for i, a in enumerate(args)])
            for start, stop in ranges(length, count)]


def _prepared(rt: Any, launcher: Any, parts: list[tuple[Any, ...]], site: str | None
              ) -> list[tuple[list[Any], Any]]:
    """Each piece's arguments (:func:`_parts`) validated and prepared: (its array arguments,
    its backend launch). Nothing is enqueued."""
    kernel = launcher.kernel
    planned = []
    for part in parts:
        piece_arrays, piece_values = kernel.bind(rt, part, site)
        launch = rt.backend.kernel_launch(kernel, launcher, piece_arrays, piece_values, site)
        planned.append((piece_arrays, launch))
    return planned


def launch_chunked(rt: Any, launcher: Any, args: tuple[Any, ...], arrays: list[Any],
                   values: list[Any], site: str | None) -> bool:
    """Issue the launch in chunks if it qualifies (see the module docstring); whether it did."""
    kernel = launcher.kernel
    length = _length(kernel, arrays, values, site)
    chunks = rt.options.copy_chunks
    host = {}
    for a in arrays:
        alloc = a.alloc
        if alloc.location == HOST and alloc.nbytes:
            if a.lo != 0 or a.hi != alloc.nbytes:
                return False
            host[alloc.id] = a
    if chunks < 2 or length < 2 or not host:
        return False
    if max(a.alloc.nbytes for a in host.values()) < chunks * MIN_CHUNK_BYTES:
        return False
    planned = _prepared(rt, launcher, _parts(kernel, args, length, chunks), site)
    memory = rt.memory
    for a in host.values():     # the chunks' copies make these current on the device
        a.alloc.location = HOST | DEVICE
    for chunk_arrays, launch in planned:
        copied = set()
        for a in chunk_arrays:
            if a.alloc.id in host and a.alloc.id not in copied:
                copied.add(a.alloc.id)
                memory.copy(a.alloc, a.lo, a.hi, True, a.param)
        node = Node("kernel", kernel.name, site, chunk_arrays)
        node.launch = launch
        rt.stats.kernels += 1
        rt._issue(node)
    return True


def split_parts(kernel: Any, args: tuple[Any, ...], arrays: list[Any], values: list[Any],
                site: str | None, pieces: int) -> list[tuple[Any, ...]] | None:
    """The argument tuples of a split launch's pieces, in order (:func:`_parts`), or None when
    it runs whole (fewer than two pieces or rows). Raises ``ArgumentError`` when the kernel is
    not element-wise or its arrays cannot be split. Shared by the eager split
    (:func:`launch_split`) and a recording's (``asyncgpu.recorder.keys.Piece``), so both cut a
    launch the same way."""
    if not kernel.elementwise:
        where = f"kernel '{kernel.name}'" + (f" (launched at {site})" if site else "")
        raise ArgumentError(
            f"{where}: the tenant splits it in {pieces} pieces, but it is not declared "
            "element-wise, so its pieces cannot be told apart; declare it with elementwise= "
            "(asyncgpu.kernel) or drop it from the tenant's split")
    length = _length(kernel, arrays, values, site)
    if pieces < 2 or length < 2:
        return None
    return _parts(kernel, args, length, pieces)


def launch_split(rt: Any, launcher: Any, args: tuple[Any, ...], arrays: list[Any],
                 values: list[Any], site: str | None, pieces: int, after: Any = None) -> bool:
    """Issue an element-wise launch as ``pieces`` nodes in order (see the module docstring);
    whether it did (a launch of fewer than two rows runs whole). Every piece is validated and
    prepared before the first is issued. ``after``: a node the first piece waits for (a
    tenant's pointer: an edge of reason ``pointer``), or None."""
    kernel = launcher.kernel
    parts = split_parts(kernel, args, arrays, values, site, pieces)
    if parts is None:
        return False
    previous = None
    for piece_arrays, launch in _prepared(rt, launcher, parts, site):
        node = Node("kernel", kernel.name, site, piece_arrays)
        node.launch = launch
        rt.stats.kernels += 1
        if previous is None:
            rt.issue_after(node, () if after is None else (after,), "pointer")
        else:
            rt.issue_after(node, (previous,), "split")
        previous = node
    return True
