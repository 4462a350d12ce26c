"""What identifies a recording, and how a repeated run of one is recognized cheaply.

The model
---------
A recording's *key* (``asyncgpu.recorder.recording``) is the sequence of its launches' keys: per
launch the kernel, grid, block, shared memory, each array argument's allocation, byte range,
shape, strides and dtype, and each scalar's exact value (:class:`Launch`). Building it costs a
validation (``Kernel.bind``) and a tuple per launch, and hashing a long tuple of tuples costs
again at every cache lookup.

A recorded function usually makes the same launches with the same argument *objects* call after
call. :class:`LaunchMemo` remembers the previous run of each recording segment; a launch whose
launcher is the same object and whose arguments are the same live views (the same object, or
one with the same allocation, byte extent, shape, strides and dtype, as ``w[0]`` made again
at every call; a view's layout never changes) and equal numbers (of the same type, with one bit
pattern: not zero, not NaN) *is* the remembered launch, so it is taken as it is, without
validating or keying it again (the remembered launch keeps the first view object, which is
equivalent). The common case, every argument the very same object, is one identity test per
argument; that the remembered arrays are still live is checked once per run, and only when the
process's count of explicit frees has moved (:meth:`LaunchMemo.usable`). A run made only of
remembered launches, as many as before, has the remembered :class:`RecordingKey`, whose hash is
computed once.
Anything else (a new array, a freed one, another scalar, one launch more or fewer) is keyed in
full, as without the memo.

Invariant: the memo never changes a key, only skips recomputing one that is known to be equal;
``tests/test_recorder_memo.py`` checks that against full keying.

Example::

    @graph
    def step(x, y):
        k[g, b](x, y, 2)
    step(x, y)      # keyed in full (and remembered)
    step(x, y)      # every launch remembered: the key of the previous run, no bind
    step(x, z)      # z is another array: keyed in full

Plain Python (no CUDA); Cython compiles it with the C types of ``keys.pxd``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..runtime.allocation import explicit_frees
from ..runtime.array import Array
from ..runtime.checks import recorded_site
from ..runtime.result_meta import float_bits
from ..runtime.chunks import bind_parts
from ..runtime.splits import split_count, split_parts, tenant_splits


class Launch:
    """One deferred kernel launch: what to issue eagerly, to capture, and its key."""

    __slots__ = ("launcher", "args", "arrays", "values", "site", "key", "pin", "tenant")

    def __init__(self, launcher: Any, args: tuple[Any, ...], arrays: list[Any],
                 values: list[Any], site: str | None) -> None:
        self.launcher = launcher
        self.args = args
        self.arrays = arrays
        self.values = values
        self.site = site
        #: several devices: the device slot pinned (``asyncgpu.device``) when it was recorded,
        #: or -1 (the device policy places it)
        self.pin = -1
        #: the tenant (its index) whose block the launch was made in: issued after the block
        #: ended, it is still that tenant's (``issue_recorded``)
        self.tenant = 0
        parts: list[Any] = []
        by_value = False
        for v in values:
            t = type(v)
            if t is int:
                parts.append(v)
            elif isinstance(v, Array):
                parts.append((v._alloc.id, v._lo, v._hi, v.shape, v.strides, v.dtype))
            else:
                parts.append(scalar_key(v))
                by_value = by_value or t is np.void or isinstance(v, tuple)
        if by_value:
            # A record (alone or in a tuple) is kept as bound, a copy: the caller's may be a
            # view of an array it changes later, so a later launch is its launch only if it
            # passes an equal value (``same_arguments``), and an eager issue passes this one.
            self.args = tuple([v if type(v) is np.void or isinstance(v, tuple) else a
                               for a, v in zip(args, values)])
        self.key = (launcher.kernel, launcher.grid3, launcher.block3, launcher.shared,
                    tuple(parts))

    def issue(self, rt: Any) -> None:
        """Issue it eagerly (one kernel node), as it was made (:func:`issue_recorded`)."""
        issue_recorded(rt, self, rt.launch_kernel, self.launcher, self.args)


class Piece(Launch):
    """One piece of a launch its tenant splits (``asyncgpu.tenant(split=...)``, or a regulation
    plan's), deferred in a recording: piece ``piece`` of ``pieces``, cut as an eager split cuts
    it (``asyncgpu.runtime.splits.split_parts``). Its pieces come one after another in the
    recording, and each but the first must run after the one before it: their data do not
    order them (disjoint rows), so the capture adds that edge (``capture.dependencies``) and
    its key says it is a piece (the same slices launched by hand run unordered). ``whole``: the
    launch's own launcher and arguments; issued eagerly, the first piece issues the launch split in
    ``pieces`` (:meth:`issue`), the others nothing.

    A piece is never a remembered launch (``Recording.remember`` takes only a :class:`Launch`):
    a split launch is keyed in full at every run."""

    __slots__ = ("piece", "pieces", "whole")

    def __init__(self, launcher: Any, args: tuple[Any, ...], arrays: list[Any],
                 values: list[Any], site: str | None, piece: int, pieces: int,
                 whole: tuple[Any, ...]) -> None:
        Launch.__init__(self, launcher, args, arrays, values, site)
        self.piece = piece
        self.pieces = pieces
        self.whole = whole
        self.key = self.key + (("piece", piece, pieces),)

    def issue(self, rt: Any) -> None:
        """Issued eagerly (a first run, a failed or eager recording): the first piece issues
        the whole launch in ``pieces`` pieces, each after the one before (an edge of reason
        ``split``), as an eager split launch; the later pieces are issued with it."""
        if self.piece == 0:
            launcher, args = self.whole
            issue_recorded(rt, self, rt.launch_kernel, launcher, args, self.pieces)


def split_launch(rt: Any, launcher: Any, args: tuple[Any, ...], arrays: list[Any],
                 values: list[Any], site: str | None) -> list[Piece] | None:
    """The launch as the :class:`Piece` launches its tenant splits it into, every piece
    validated (``Kernel.bind``) before any is deferred; None when the tenant runs it whole.
    Raises as an eager split does (a kernel not element-wise, arrays that cannot be split)."""
    if tenant_splits(rt) is None:
        return None
    kernel = launcher.kernel
    count = split_count(rt.tenants[getattr(rt._pins, "tenant", 0)], kernel)
    if not count:
        return None
    parts = split_parts(launcher, args, arrays, values, site, count)
    if parts is None:
        return None
    bound = bind_parts(rt, kernel, parts, site)
    return [Piece(piece_launcher, part, piece_arrays, piece_values, site, i, len(parts),
                  (launcher, args))
            for i, ((piece_launcher, part), (piece_arrays, piece_values))
            in enumerate(zip(parts, bound))]


def issue_recorded(rt: Any, launch: Any, issue: Any, *args: Any) -> Any:
    """``issue(*args)`` for a launch or call a recording issues after the body made it, as it
    was made: on the device slot pinned then (``asyncgpu.device(n)``, ``launch.pin`` >= 0), in
    the tenant whose block it was made in (``launch.tenant``), its messages and trace naming
    its line (``launch.site``), although those blocks and that line have passed."""
    pins = rt._pins
    slot, tenant = getattr(pins, "slot", None), getattr(pins, "tenant", 0)
    site = getattr(recorded_site, "site", None)
    if launch.pin >= 0:
        pins.slot = launch.pin
    if rt._tenanted:
        pins.tenant = launch.tenant
    recorded_site.site = launch.site
    try:
        return issue(*args)
    finally:
        pins.slot, pins.tenant = slot, tenant
        recorded_site.site = site


class RecordingKey:
    """The key of one recording segment, hashed once (a tuple of tuples would be hashed again
    at every lookup). ``token``: the recorder's (token, segment)."""

    __slots__ = ("token", "parts", "hash")

    def __init__(self, token: Any, parts: tuple[Any, ...]) -> None:
        self.token = token
        self.parts = parts
        self.hash = hash((token, parts))

    def __hash__(self) -> int:
        return self.hash

    def __eq__(self, other: object) -> bool:
        return self is other or (isinstance(other, RecordingKey) and self.hash == other.hash
                                 and self.token == other.token and self.parts == other.parts)


def same_arguments(old: tuple[Any, ...], new: tuple[Any, ...]) -> bool:
    """Whether ``new`` passes exactly what ``old`` passed: live arrays that are the same view
    (allocation, byte extent, shape, strides, dtype), numbers of the same type and bit
    pattern, and tuples and records of the same value (:func:`scalar_key`)."""
    n = len(old)
    if n != len(new):
        return False
    for i in range(n):
        a = old[i]
        b = new[i]
        if a is b:
            if type(a) is Array and a._alloc.freed:
                return False        # keyed (and refused) in full
            continue
        t = type(a)
        if t is not type(b):
            return False
        if t is Array:
            # a new view object of the same bytes (``w[0]`` made again each call)
            if (a._alloc is b._alloc and a._lo == b._lo and a._hi == b._hi
                    and a.shape == b.shape and a.strides == b.strides
                    and (a.dtype is b.dtype or a.dtype == b.dtype) and not a._alloc.freed):
                continue
        elif t is int or isinstance(a, np.integer):
            if a == b:
                continue
        elif t is float or isinstance(a, np.floating):
            if a == b and a != 0:   # equal, nonzero, not NaN: the same bits
                continue
        elif t is np.void or isinstance(a, tuple):
            if scalar_key(a) == scalar_key(b):
                continue
        return False                # anything else (another array, say) is keyed in full
    return True


class LaunchMemo:
    """The previous run of one recording segment: its launches and key.

    ``frees``: ``explicit_frees()`` when the launches' arrays were last known to be
    live; :meth:`usable` checks them again only when it has moved, so a remembered launch is
    matched on argument identity alone.

    ``steady``: a later run of the segment repeated these launches, all of them and no more
    (set when such a run's segment ends, cleared when a run went on launching after them). A
    steady memo's segment ends at its last launch (``Recording.repeated``); a memo that is
    not steady waits for the host operation, so a body whose launches change from run to
    run is not cut at the shorter run's length.
    """

    __slots__ = ("launches", "key", "frees", "replayed", "steady", "splits")

    def __init__(self, launches: list[Any], key: RecordingKey) -> None:
        self.launches = launches
        self.key = key
        self.frees = explicit_frees()
        #: (the graph cache's entry for ``key``, the graph launched) after a run of these
        #: launches replayed a graph: what a run of the very same launches replays again
        #: while that graph lives and its inputs are where they were (``_recorder``).
        self.replayed: Any = None
        self.steady = False
        #: how the tenant split its kernels (``splits.split_settings``; None: made on a runtime
        #: without tenants): under other splits its launches may be cut otherwise, so it is
        #: not remembered (``Recording._remember``)
        self.splits: Any = None

    def usable(self) -> bool:
        """Whether no array of the remembered launches has been freed."""
        frees = explicit_frees()
        if frees != self.frees:
            for launch in self.launches:
                for a in launch.args:
                    if type(a) is Array and a._alloc.freed:
                        return False
            self.frees = frees
        return True


def scalar_key(v: Any) -> Any:
    """A scalar argument's part of a launch key: its type and exact value. A NumPy scalar by
    its bits (-0.0 and 0.0, or two NaN payloads, are different keys), a record by its dtype
    too (the same bytes read as other fields are another value), a tuple by its items'."""
    t = type(v)
    if isinstance(v, tuple):
        return (t, tuple([scalar_key(x) for x in v]))
    if t is np.void:
        return (t, v.dtype, v.tobytes())
    if isinstance(v, np.generic):
        return (t, v.tobytes())
    if t is float or t is complex:
        return (t, float_bits(v))
    return (t, repr(v))


def argument_key(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """What identifies a static call: arrays by allocation, extent, shape, strides and dtype;
    numbers by type and exact value; None if an argument is anything else."""
    try:
        return (tuple([value_key(a) for a in args]),
                tuple([(k, value_key(v)) for k, v in sorted(kwargs.items())]) if kwargs else ())
    except TypeError:
        return None


def value_key(v: Any) -> Any:
    if isinstance(v, Array):
        return ("A", v._alloc.id, v._lo, v._hi, v.shape, v.strides, v.dtype.str)
    if isinstance(v, (bool, int, str, type(None), np.integer, np.bool_)):
        return (type(v), v)
    # exact bits: -0.0 and 0.0, or -NaN and NaN (which hex() and repr() both print as nan),
    # are different keys
    if isinstance(v, (np.floating, np.complexfloating)):
        return (type(v), v.tobytes())
    if isinstance(v, (float, complex)):
        return (type(v), float_bits(v))
    if isinstance(v, tuple):
        return ("T",) + tuple([value_key(x) for x in v])
    raise TypeError(f"no static key for {type(v).__name__}")
