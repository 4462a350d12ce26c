"""Launches in pieces: chunked copies feeding an element-wise kernel, and what a tenant's
splits (``asyncgpu.runtime.splits``) share with them.

The model
---------
In the explicit memory model (``asyncgpu.runtime.memory``) a kernel whose input is current only on
the host waits for the whole copy before it starts. If the kernel is declared element-wise
(``ag.kernel(..., elementwise=True)`` or ``elementwise="n"``, contract in
:func:`asyncgpu.kernel`), the launch is split along axis 0 into ``Options.copy_chunks``
pieces: for each chunk, a copy node of that chunk of every host-current input, then the
kernel on that chunk of every array argument. The dependency tracker works on byte ranges, so
kernel chunk ``k`` depends by data only on the copies of chunk ``k``. The copies of one array
run in order, each after the one before (an edge of reason ``split``), on a stream of their
own: copies side by side would share the link and all finish near the end, while in order
chunk ``k``'s copy is done first and compute on chunk ``k`` overlaps the copy of chunk ``k + 1``
(GACER's operator resizing, applied to transfers). Each kernel chunk also
runs after the one before (an edge of reason ``split``, as a tenant's pieces): every chunk is
launched on the whole grid, so chunks side by side would only queue more blocks, and a
launch in chunks would hold the device, against other tenants' kernels, for as long as all of
them at once. Node count grows by
``2 * chunks``; the launch path is unchanged for every other kernel and in managed memory.

An element-wise kernel may name const arrays every chunk reads whole (``broadcast=``:
weights, lookup tables); they are passed unsplit to each chunk, need not share the others'
length along axis 0, and one host-current is copied in whole, once, before the first chunk.

When a launch is chunked (all must hold, otherwise it runs whole): the memory model is
explicit and the execution asynchronous (in ``sync`` execution nothing would overlap); the
kernel is element-wise; ``copy_chunks > 1``; some split array argument's
allocation is current only on the host, with at least ``MIN_CHUNK_BYTES`` per chunk; every
such argument spans its whole allocation (the chunks' copies then make the whole allocation
current); and the device's link (:func:`link_busy`: an earlier copy from the host to the
device, of ``MIN_CHUNK_BYTES`` or more, still running) is free on a runtime over one device,
busy on a runtime over several (:func:`runs_whole`).

One device: behind a running copy the link is shared anyway and the kernel overlaps it, so
chunks would only add nodes for the host to issue: streaming launches one after another run
the first in chunks and the others whole, each kernel overlapping the next copies, and a lone
launch of a large input overlaps its kernel with its own copy. Several devices: a program
spreads its launches over them, and the host issuing one launch's chunks would hold back the
next device's first copy, so a launch whose device's link is free runs whole; one behind a
running copy to its device waits for the link anyway, and in chunks its kernel overlaps its
own copy, so the last launch of a burst on each device leaves one chunk's kernel after the
copies rather than a whole kernel.

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

On a runtime over several devices a launch in pieces (a tenant's split, or chunks where a
test forces them) is placed as one launch (``Issuing._place`` on its whole arguments, before
its pieces are prepared): every piece, and every chunk's copy, runs on the device chosen for
it.

Both kinds go through one path (``asyncgpu.runtime.splits.split_parts``): each piece is validated
(``Kernel.bind``) and prepared (``kernel_launch``) before the first is issued, then the pieces
are issued in order. Inside a recording the same pieces are deferred as
``asyncgpu.recorder.keys.Piece`` launches, and the captured graph orders each after the one
before.

Plain Python, compiled with the launch path (``setup.py``): an element-wise kernel's every
launch passes through :func:`chunk_plan`. The backends run the copies and kernels as usual.
"""

from __future__ import annotations

from typing import Any

from ..core.dag import Node
from ..core.errors import ArgumentError, SignatureError
from .allocation import DEVICE, HOST
from .array import Array
from .kernel import CudaCSource

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
    _integer_parameter(kernel, elementwise, "elementwise", "the element count")
    return elementwise


def check_broadcast(kernel: Any, broadcast: Any) -> tuple[str, ...]:
    """Validate ``broadcast=`` at decoration (``kernel.elementwise`` already set): const array
    parameters of an element-wise kernel; returns their names."""
    if broadcast is None or broadcast == () or broadcast == []:
        return ()
    names = (broadcast,) if isinstance(broadcast, str) else tuple(broadcast)
    where = f"kernel '{kernel.name}': broadcast"
    if not kernel.elementwise:
        raise SignatureError(
            f"{where} names the arrays every chunk of an element-wise launch gets whole, but "
            "the kernel is not element-wise; declare elementwise= too, or drop broadcast=")
    params = [p.name for p in kernel.params]
    for name in names:
        if not isinstance(name, str) or name not in params:
            raise SignatureError(f"{where} names {name!r}, which is no parameter; parameters "
                                 f"are {', '.join(params)}")
        if name == kernel.elementwise:
            raise SignatureError(f"{where} names '{name}', the element-count parameter; name "
                                 "const array parameters")
        if kernel.typed and not next(p for p in kernel.params if p.name == name).is_array:
            raise SignatureError(f"{where} names '{name}', a scalar parameter; name const "
                                 "array parameters")
        if kernel.modes.get(name) != "r":
            raise SignatureError(
                f"{where} names '{name}', which the kernel may write: every chunk gets a "
                "broadcast array whole, so the chunks may only read it; annotate it const "
                "(and make sure the kernel only reads it), or drop it from broadcast=")
    return names


def _integer_parameter(kernel: Any, param: str, option: str, role: str) -> None:
    """Check that ``option`` (``elementwise``, ``grid_offset``) names an integer scalar
    parameter ``param`` of ``kernel``, which holds ``role``."""
    by_name = {p.name: p for p in kernel.params}
    p = by_name.get(param)
    where = f"kernel '{kernel.name}': {option}"
    if p is None:
        raise SignatureError(f"{where} names '{param}' ({role}), which is no parameter; "
                             f"parameters are {', '.join(by_name)}")
    if kernel.typed and (p.is_array or p.dtype is None or p.dtype.kind not in "iu"):
        raise SignatureError(f"{where}'s '{param}' must be an integer scalar parameter "
                             f"({role}); it is '{p.ctype}'")
    if param in kernel.modes and kernel.modes[param] != "rw":
        raise SignatureError(f"{where} names '{param}' ({role}), but it is annotated "
                             "const/out, so it is an array; name an integer scalar parameter")


def check_grid_offset(kernel: Any, grid_offset: Any) -> tuple[str, str] | None:
    """Validate ``grid_offset=`` at decoration (``kernel.elementwise`` already set); returns
    the pair of parameter names the kernel keeps, or None."""
    if grid_offset is None or grid_offset is False or grid_offset == ():
        return None
    name = kernel.name
    if (not isinstance(grid_offset, (tuple, list)) or len(grid_offset) != 2
            or not all(isinstance(n, str) for n in grid_offset)):
        raise SignatureError(
            f"kernel '{name}': grid_offset must name two integer parameters, the launch's "
            "first block and the whole grid's block count, e.g. grid_offset=('first', "
            f"'total'); got {grid_offset!r}"
        )
    first, total = grid_offset
    if first == total:
        raise SignatureError(
            f"kernel '{name}': grid_offset=('{first}', '{total}') names one parameter twice; "
            "the first block and the grid's block count are two parameters"
        )
    if kernel.elementwise:
        raise SignatureError(
            f"kernel '{name}': elementwise= and grid_offset= both declare how its launches "
            "split (by its arrays' rows, by its grid's blocks); declare one of them"
        )
    for param, role in ((first, "the launch's first block"), (total, "the grid's block count")):
        _integer_parameter(kernel, param, "grid_offset", role)
    source = kernel.source
    if isinstance(source, CudaCSource) and source.sim is not None and not source.sim_runs_blocks:
        # (a piece is a part of the grid; a function called once per launch sees no grid)
        raise SignatureError(
            f"kernel '{name}': its sim= twin is a plain function, which the sim backend calls "
            "once per launch without the grid, so it cannot run a piece of the grid; give a "
            "@cuda.jit twin (run block by block on the launch's grid) or drop grid_offset="
        )
    return first, total


def check_grid_stride(kernel: Any, grid_stride: Any) -> bool:
    """Validate ``grid_stride=`` at decoration (``kernel.grid_offset`` already set)."""
    if grid_stride is False or grid_stride is None:
        return False
    if grid_stride is not True:
        raise SignatureError(
            f"kernel '{kernel.name}': grid_stride must be True or False; got {grid_stride!r}")
    if kernel.grid_offset is None:
        raise SignatureError(
            f"kernel '{kernel.name}': grid_stride=True declares how pieces of its grid run, "
            "which needs grid_offset=('first', 'total') to tell each piece its part; declare "
            "both, or drop grid_stride="
        )
    return True


def splittable(launcher: Any) -> bool:
    """Whether a tenant's split would launch ``launcher``'s launches in pieces: its kernel is
    element-wise, declares a grid offset and the grid has two blocks or more in x, or also
    declares a grid-stride loop (its pieces then run on the whole grid)."""
    kernel = launcher.kernel
    if kernel.grid_offset is not None:
        return kernel.grid_stride or launcher.grid[0] >= 2
    return bool(kernel.elementwise)


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


def axis_length(kernel: Any, arrays: list[Any], values: list[Any], site: str | None) -> int:
    """The common length along axis 0, after checking the contract; raises if it cannot hold.
    Runs at every launch of an element-wise kernel, so the common case reads the arrays'
    fields only and the messages are written where a check fails (:func:`_refuse`)."""
    length = -1
    broadcast = kernel.broadcast
    for a in arrays:
        if broadcast and a.param in broadcast:
            continue            # (every chunk gets it whole)
        arr = a.array
        shape = arr.shape
        if not shape or not arr._contiguous:
            _refuse(kernel, site, a, "contiguous", None)
        if length < 0:
            length = shape[0]
        elif shape[0] != length:
            _refuse(kernel, site, a, "rows", length)
    count = kernel.elementwise
    if isinstance(count, str) and length >= 0:
        i = 0
        for param in kernel.params:
            if param.name == count:
                break
            i += 1
        n = values[i]
        if isinstance(n, (Array, bool, float, complex)) or not hasattr(n, "__index__") \
                or int(n) != length:
            _refuse(kernel, site, (i, count, n), "count", length)
    return length if length > 0 else 0


def _refuse(kernel: Any, site: str | None, what: Any, why: str, length: Any) -> None:
    """Raise the :class:`ArgumentError` of a launch that breaks the element-wise contract
    (:func:`axis_length`): ``what`` is the array argument, or (index, name, value) of the
    element count."""
    where = f"kernel '{kernel.name}'" + (f" (launched at {site})" if site else "")
    if why == "count":
        i, count, n = what
        if isinstance(n, (Array, bool, float, complex)) or not hasattr(n, "__index__"):
            raise ArgumentError(
                f"{where}, argument {i} '{count}': elementwise='{count}' declares it the "
                f"element count, an integer, but it is {n!r}; pass the arrays' length, "
                f"{length}, as an int")
        raise ArgumentError(
            f"{where}, argument {i} '{count}': elementwise='{count}' declares it the "
            f"element count, but it is {int(n)} where the arrays have {length} rows; pass "
            "the arrays' length (or drop elementwise=)"
        )
    arr = what.array
    if why == "contiguous":
        raise ArgumentError(
            f"{where}, argument {what.index} '{what.param}': array {arr.describe()} cannot be "
            "split along axis 0 (elementwise needs C-contiguous arrays of at least one "
            "dimension); pass a contiguous array or drop elementwise="
        )
    raise ArgumentError(
        f"{where}, argument {what.index} '{what.param}': array {arr.describe()} has "
        f"{arr.shape[0]} rows where the other arrays have {length}; elementwise "
        "splits every array into the same chunks, so they must agree along axis 0 "
        "(name an array every chunk reads whole in broadcast=, or drop elementwise=)"
    )


def bind_parts(rt: Any, kernel: Any, parts: list[tuple[Any, tuple[Any, ...]]],
               site: str | None) -> list[tuple[list[Any], list[Any]]]:
    """Each piece of :func:`split_parts`, validated (``Kernel.bind``): (its array arguments,
    its values). A grid-offset kernel's pieces are given whole arrays and write part of them."""
    partial = kernel.grid_offset is not None
    bound = []
    for n, (_, part) in enumerate(parts):
        piece_arrays, piece_values = kernel.bind(rt, part, site)
        if partial and n:
            # (a write-only argument is written whole by the launch, not by each piece: what
            # a later piece leaves alone is the earlier pieces' output, to be kept as a
            # read-write argument's old contents are)
            for a in piece_arrays:
                a.read = True
        bound.append((piece_arrays, piece_values))
    return bound


def prepared(rt: Any, kernel: Any, parts: list[tuple[Any, tuple[Any, ...]]],
              site: str | None, device: int) -> list[tuple[list[Any], Any]]:
    """Each piece validated and prepared (:func:`bind_parts`, then the backend's
    ``kernel_launch`` for device slot ``device``): (its array arguments, its backend launch).
    Nothing is enqueued."""
    backend = rt.backend
    several = rt.placement is not None
    return [(piece_arrays,
             backend.kernel_launch(kernel, piece_launcher, piece_arrays, piece_values, site,
                                   device) if several else
             backend.kernel_launch(kernel, piece_launcher, piece_arrays, piece_values, site))
            for (piece_launcher, _), (piece_arrays, piece_values)
            in zip(parts, bind_parts(rt, kernel, parts, site))]


def row_parts(launcher: Any, args: tuple[Any, ...], length: int, count: int
               ) -> list[tuple[Any, tuple[Any, ...]]]:
    """An element-wise launch's ``count`` pieces along axis 0 (``ranges``): (the launcher,
    each array's rows of the piece and the element count, ``elementwise="n"``, the piece's)."""
    kernel = launcher.kernel
    n = kernel.elementwise
    n_at = (next(i for i, p in enumerate(kernel.params) if p.name == n)
            if isinstance(n, str) else -1)
    whole = {i for i, p in enumerate(kernel.params) if p.name in kernel.broadcast}
    return [(launcher, tuple([a[start:stop] if isinstance(a, Array) and i not in whole else
                              (type(a)(stop - start) if i == n_at else a)
                              for i, a in enumerate(args)]))
            for start, stop in ranges(length, count)]


def chunk_plan(rt: Any, kernel: Any, arrays: list[Any], values: list[Any], site: str | None,
               device: int) -> tuple[int, dict[int, Any], dict[int, Any]] | None:
    """Whether a launch placed on device slot ``device`` runs in chunks (see the module
    docstring): (its length along axis 0, the split arguments current only on the host, the
    broadcast ones, by allocation id), or None: it qualifies not, or runs whole there
    (:func:`runs_whole`). Raises if its element count contradicts the arrays
    (:func:`axis_length`), whether or not it runs in chunks."""
    length = axis_length(kernel, arrays, values, site)
    chunks = rt.options.copy_chunks
    if chunks < 2 or length < 2:
        return None
    # (the common case, first and without building anything: no split argument current
    # only on the host is large enough for chunks)
    least = chunks * MIN_CHUNK_BYTES
    broadcast = kernel.broadcast
    for a in arrays:
        alloc = a.alloc
        if alloc.location == HOST and alloc.nbytes >= least and a.param not in broadcast:
            break
    else:
        return None
    if runs_whole(rt, device):
        return None
    host, whole = {}, {}
    for a in arrays:
        alloc = a.alloc
        if alloc.location == HOST and alloc.nbytes:
            if a.param in broadcast:
                whole[alloc.id] = a
            elif a.lo != 0 or a.hi != alloc.nbytes:
                return None
            else:
                host[alloc.id] = a
    for key in whole:           # (also split: copied whole, before every chunk)
        host.pop(key, None)
    for a in host.values():
        if a.alloc.nbytes >= least:
            return length, host, whole
    return None


def link_busy(rt: Any, device: int) -> bool:
    """Whether a copy from the host to device slot ``device`` is still running (the latest
    issued there, ``ExplicitMemory.copying_in``, has not finished): a copy issued now would
    share the link with it. A copy of less than ``MIN_CHUNK_BYTES`` holds the link for
    microseconds and does not count. Asks the copy's event unless its stream has retired it
    (its event may then serve another node), and not while a recording captures (its events
    cannot be asked): then it answers no."""
    copying_in = rt.memory.copying_in
    latest = copying_in.get(device)
    if latest is None or rt.recording is not None:
        return False
    stream, seq, event, nbytes = latest
    inflight = stream.inflight
    if (nbytes < MIN_CHUNK_BYTES or not inflight or inflight[0].seq > seq
            or rt.backend.event_done(event)):
        del copying_in[device]
        return False
    return True


def runs_whole(rt: Any, device: int) -> bool:
    """Whether a launch that qualifies for chunks runs whole on device slot ``device`` all the
    same: on one device, while its link still carries an earlier copy in (:func:`link_busy`;
    the kernel overlaps that copy); on several, while the link is free (the host goes on to
    the next device's first copy sooner; behind a busy link the chunks' nodes are issued while
    the link is busy anyway, and the kernel overlaps its own copy)."""
    busy = link_busy(rt, device)
    return busy if rt.placement is None else not busy


def launch_chunked(rt: Any, launcher: Any, args: tuple[Any, ...], site: str | None,
                   plan: tuple[int, dict[int, Any], dict[int, Any]], device: int) -> None:
    """Issue a launch in chunks on device slot ``device`` (``plan``: its :func:`chunk_plan`)."""
    kernel = launcher.kernel
    length, host, whole = plan
    chunks = rt.options.copy_chunks
    planned = prepared(rt, kernel, row_parts(launcher, args, length, chunks), site, device)
    memory = rt.memory
    current = HOST | DEVICE << device
    for a in whole.values():    # every chunk reads these whole: one copy each, first
        memory.copy(a.alloc, 0, a.alloc.nbytes, True, a.param, device)
        a.alloc.location = current
    for a in host.values():     # the chunks' copies make these current on the device
        a.alloc.location = current
    previous = None
    copies: dict[int, Any] = {}     # allocation id -> its last chunk's copy
    for chunk_arrays, launch in planned:
        copied = set()
        for a in chunk_arrays:
            key = a.alloc.id
            if key in host and key not in copied:
                copied.add(key)
                # each chunk's copy after the one before, on one stream: copies side by side
                # share the link and finish together, so the first chunk's kernel would wait
                # for nearly every byte; in order, chunk k runs while chunk k + 1 copies
                copies[key] = memory.copy(a.alloc, a.lo, a.hi, True, a.param, device,
                                          -1, copies.get(key))
        node = Node("kernel", kernel.name, site, chunk_arrays)
        node.launch = launch
        node.device = device
        rt.stats.kernels += 1
        # each chunk after the one before (an edge of reason ``split``): the chunks run one at
        # a time, each on the launch's whole grid, while the next chunks' copies go on
        rt.issue_after(node, () if previous is None else (previous,), "split")
        previous = node
