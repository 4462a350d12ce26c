"""Which arguments a library call writes: the one answer ``LibraryCall`` books its accesses by.

The model
---------
A call is a *path* (``"multiply"``, ``"linalg.solve"``, ``"add.at"``, ``"ndarray.sort"``,
``"random.Generator.shuffle"``) and the arguments it was given. Its *effects* are the argument
positions and keywords whose arrays it may modify; every array found anywhere in such an
argument (an ``out=`` tuple, say) is booked as a write, every other array argument as a read.
They are derived from the function itself, in this order:

1. Keyword ``out`` is written, whatever the function (an array or a tuple of arrays).
2. A ufunc (the backend's object, NumPy's or CuPy's, recognized by its integer ``nin`` and
   ``nout``) writes its positional arguments from ``nin`` on: ``multiply(a, 3.0, c)`` writes
   ``c``. Its methods: ``at`` writes its first argument; ``reduce``, ``accumulate``,
   ``reduceat`` and ``outer`` write their ``out`` parameter.
3. A function of :data:`PURE_VARIADIC` (``einsum``, ``meshgrid``, ``broadcast_arrays``, ...)
   writes nothing else: it takes its arrays through ``*args``, where no signature can say.
4. Any other function or method is bound to the call's arguments with ``inspect.signature``:
   the argument bound to its ``out`` parameter is written (``clip(a, lo, hi, out)``,
   ``sum(a, 0, None, out)``), and so are the parameters :data:`IN_PLACE` lists for it
   (``copyto``'s ``dst``, ``ndarray.sort``'s ``self``, a generator's ``shuffle``'s ``x``).
   The signature is that of the function the backend calls where Python can read one and it
   names every argument (CuPy's Cython functions may not expose one; a wrapper passing
   ``*args`` on says nothing): CuPy's on ``cuda``, on ``sim`` the function
   ``cupy_surface.sim_function`` gives, which reads its arguments as CuPy's signature does.
   Otherwise NumPy's function of the same path, whose API CuPy follows.

Invariant: a call is *known pure* apart from the writes above only when its path is a ufunc,
one of the five ufunc methods, or a callable NumPy has under the same path (the reference
surface, which ``tests/test_library_writes.py`` sweeps on ``sim`` to check that every array
it modifies is booked). Anything else -- a name only CuPy has, an attribute of a function that
is not one of those ufunc methods, a generator method NumPy's generator lacks, a signature
that cannot be read or does not bind the arguments, an :data:`IN_PLACE` parameter the
signature does not name -- writes *every* array argument: it is ordered like a write against
everything that touches those arrays, which costs concurrency and is never a race.

The answer depends only on the backend's module, the path, the number of positional
arguments and the keyword names (and, for a conditional :data:`IN_PLACE` entry, the truth of
one flag argument), so it is computed once per such key and cached (:func:`effects`).

Example::

    effects("sim", "multiply", (SLOT, 3.0, SLOT), {})       # Effects(positions={2})
    effects("sim", "put_along_axis", (SLOT, SLOT, SLOT, 0), {})   # positions={0}
    effects("sim", "ndarray.sum", (SLOT,), {"out": SLOT})   # keywords={"out"}
    effects("cuda", "scatter_add", (SLOT, SLOT, SLOT), {})  # everything (CuPy only)

This module is backend-neutral: it imports neither CuPy nor Numba (the backend's module comes
from ``asyncgpu.runtime.array_modules.backend_module``).
"""

from __future__ import annotations

import inspect
import logging
from typing import Any

import numpy as np

from . import array_modules
from .cupy_surface import sim_function

log = logging.getLogger(__name__)

#: Parameters that in-place functions and methods write besides ``out``, by path. An entry
#: ``(param, (flag, value))`` writes ``param`` only when ``bool(flag) == value`` (``flag``'s
#: default when not passed). ``self`` is the array a method is called on.
IN_PLACE: dict[str, tuple[Any, ...]] = {
    "copyto": ("dst",),
    "put": ("a",),
    "place": ("arr",),
    "putmask": ("a",),
    "fill_diagonal": ("a",),
    "put_along_axis": ("arr",),
    "nan_to_num": (("x", ("copy", False)),),
    # (with overwrite_input=True they partition or sort their input in place)
    "median": (("a", ("overwrite_input", True)),),
    "nanmedian": (("a", ("overwrite_input", True)),),
    "percentile": (("a", ("overwrite_input", True)),),
    "nanpercentile": (("a", ("overwrite_input", True)),),
    "quantile": (("a", ("overwrite_input", True)),),
    "nanquantile": (("a", ("overwrite_input", True)),),
    "ndarray.fill": ("self",),
    "ndarray.sort": ("self",),
    "ndarray.put": ("self",),
    "ndarray.partition": ("self",),
    "ndarray.resize": ("self",),
    "ndarray.setfield": ("self",),
    "ndarray.setflags": ("self",),
    "ndarray.byteswap": (("self", ("inplace", True)),),
    "ndarray.__setitem__": ("self",),
    "ndarray.__setstate__": ("self",),
    "random.Generator.shuffle": ("x",),
}
#: Functions that take their arrays through ``*args`` and write none of them (``out=``, where
#: they have it, aside): their signatures cannot say where the arguments go, their
#: documentation (NumPy's and CuPy's) says they only read them.
PURE_VARIADIC = frozenset({
    "einsum", "meshgrid", "broadcast_arrays", "ix_", "atleast_1d", "atleast_2d", "atleast_3d",
    "result_type", "common_type",
})
#: Parameters the known ufunc methods write besides ``out``.
UFUNC_METHODS: dict[str, tuple[str, ...]] = {
    "at": ("a",), "reduce": (), "accumulate": (), "reduceat": (), "outer": (),
}


_GENERATOR = "random.Generator."
_FLAGS = (bool, int, float, np.generic, type(None))
_METHOD = "ndarray."


class Effects:
    """The argument positions and keywords a call writes (``everything``: all its arrays)."""

    __slots__ = ("positions", "keywords", "everything", "conditional")

    def __init__(self, positions: frozenset[int] = frozenset(),
                 keywords: frozenset[str] = frozenset(), everything: bool = False,
                 conditional: tuple[tuple[Any, bool, Any], ...] = ()) -> None:
        self.positions = positions
        self.keywords = keywords
        self.everything = everything
        #: (where the flag was passed, the value that writes, where the target was passed);
        #: a place is a position (int) or a keyword (str)
        self.conditional = conditional

    def places(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
        """The arguments (values) this call writes, for the given arguments."""
        if self.everything:
            return list(args) + list(kwargs.values())
        got = [args[p] for p in self.positions if p < len(args)]
        got += [kwargs[k] for k in self.keywords if k in kwargs]
        for flag, value, target in self.conditional:
            raw = args[flag] if isinstance(flag, int) else kwargs[flag]
            # anything but a plain scalar (an array, say) has a truth unknown here
            hit = not isinstance(raw, _FLAGS) or bool(raw) == value
            if hit:
                got.append(args[target] if isinstance(target, int) else kwargs[target])
        return got

    def __repr__(self) -> str:
        if self.everything:
            return "Effects(everything)"
        return (f"Effects(positions={set(self.positions)}, keywords={set(self.keywords)}, "
                f"conditional={self.conditional})")


EVERYTHING = Effects(everything=True)
_plans: dict[Any, tuple[Any, Effects]] = {}
_PLANS_KEPT = 4096


def effects(backend: str, path: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Effects:
    """What a call of ``path`` with these arguments writes on ``backend`` (cached)."""
    try:
        module = array_modules.backend_module(backend)
    except Exception:                # no CuPy here (a test of the cuda path): NumPy's only
        module = None
    # keyed by the module's identity (a stand-in module need not be hashable), which the
    # entry keeps alive so that the identity cannot be reused
    key = (id(module), path, len(args), tuple(kwargs))
    hit = _plans.get(key)
    if hit is not None and hit[0] is module:
        return hit[1]
    plan = _derive(module, path, len(args), tuple(kwargs))
    if len(_plans) >= _PLANS_KEPT:
        _plans.clear()               # rare: programs call a few hundred functions
    _plans[key] = (module, plan)
    return plan


def _lookup(root: Any, parts: list[str]) -> Any:
    obj = root
    for part in parts:
        if obj is None:
            return None
        try:
            obj = getattr(obj, part)
        except Exception:
            return None
    return obj


def _is_ufunc(obj: Any) -> bool:
    return isinstance(getattr(obj, "nin", None), int) \
        and isinstance(getattr(obj, "nout", None), int) and callable(obj)


def _sources(module: Any, path: str) -> tuple[list[Any], int, tuple[Any, ...], bool]:
    """(candidate functions, best first; implicit leading arguments; the parameters written
    besides ``out``; whether NumPy has the path, i.e. whether it is known)."""
    mine = module is not None and module is not np
    if path.startswith(_GENERATOR) or path.startswith(_METHOD):
        generator = path.startswith(_GENERATOR)
        name = path[len(_GENERATOR if generator else _METHOD):]
        cls = ["random", "Generator"] if generator else ["ndarray"]
        ref = _lookup(np, cls + [name])
        ours = _lookup(module, cls + [name]) if mine else None
        known = callable(ref)
        if not mine and not generator:
            ours = sim_function(path)
        return [ours, ref], int(generator), IN_PLACE.get(path, ()), known
    parts = path.split(".")
    ours = _lookup(module, parts) if mine else sim_function(path)
    ref = _lookup(np, parts)
    parent = parts[:-1]
    if parent and (_is_ufunc(_lookup(module, parent)) or _is_ufunc(_lookup(np, parent))):
        method = parts[-1]
        return [ours, ref], 0, UFUNC_METHODS.get(method, ()), method in UFUNC_METHODS
    return [ours, ref], 0, IN_PLACE.get(path, ()), callable(ref) or _is_ufunc(ours)


def _derive(module: Any, path: str, nargs: int, keywords: tuple[str, ...]) -> Effects:
    candidates, implicit, params, known = _sources(module, path)
    if not known:
        log.debug("call '%s' is not known to be pure: all its array arguments are writes",
                  path)
        return EVERYTHING
    outs = frozenset({"out"} & set(keywords))
    if path in PURE_VARIADIC:
        return Effects(frozenset(), outs)
    for fn in candidates:
        if _is_ufunc(fn):
            return Effects(frozenset(range(fn.nin, nargs)), outs)
        plan = _bound(fn, params, implicit, nargs, keywords, outs)
        if plan is not None:
            return plan
    log.debug("call '%s': no readable signature binds %d positional arguments and keywords "
              "%s; all its array arguments are writes", path, nargs, keywords)
    return EVERYTHING


def _readable(fn: Any) -> inspect.Signature | None:
    """``fn``'s signature when it says something about where arguments go."""
    if fn is None or not callable(fn):
        return None
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    named = [p for p in sig.parameters.values()
             if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and p.name != "self"]
    return sig if named else None   # a bare (*args, **kwargs) wrapper says nothing


def _bound(fn: Any, params: tuple[Any, ...], implicit: int, nargs: int,
           keywords: tuple[str, ...], outs: frozenset[str]) -> Effects | None:
    """The effects from binding the call to ``fn``'s signature; None if it cannot say."""
    sig = _readable(fn)
    if sig is None:
        return None
    places = [_Place(i - implicit) for i in range(implicit + nargs)]
    try:
        bound = sig.bind(*places, **{k: _Place(k) for k in keywords})
    except TypeError:
        return None
    if any(sig.parameters[name].kind in (inspect.Parameter.VAR_POSITIONAL,
                                         inspect.Parameter.VAR_KEYWORD)
           for name in bound.arguments):
        return None                # arguments passed on unnamed: this signature cannot say
    where = {name: value for name, value in bound.arguments.items()}
    positions: set[int] = set()
    written = set(outs)

    def book(name: str) -> None:
        for place in _places(where.get(name)):
            if isinstance(place.at, int):
                positions.add(place.at)
            else:
                written.add(place.at)

    book("out")
    conditional = []
    for entry in params:
        target, condition = (entry, None) if isinstance(entry, str) else entry
        if target == "self" and target not in sig.parameters and not implicit and sig.parameters:
            target = next(iter(sig.parameters))     # (a method as a function: its array first)
        if target not in sig.parameters:
            return EVERYTHING      # the backend names it otherwise: do not guess
        if condition is None:
            book(target)
            continue
        flag, value = condition
        passed = where.get(flag)
        if isinstance(passed, _Place):
            conditional += [(passed.at, value, t.at) for t in _places(where.get(target))]
        else:
            default = sig.parameters[flag].default if flag in sig.parameters else None
            if default is inspect.Parameter.empty or bool(default) == value:
                book(target)
    positions.discard(-1)          # a method's implicit self (a generator's) is no argument
    return Effects(frozenset(positions), frozenset(written), False, tuple(conditional))


class _Place:
    """Where an argument was passed: a position or a keyword (binding stand-in)."""

    __slots__ = ("at",)

    def __init__(self, at: int | str) -> None:
        self.at = at


def _places(value: Any) -> list[_Place]:
    if isinstance(value, _Place):
        return [value]
    if isinstance(value, tuple):
        return [v for v in value if isinstance(v, _Place)]
    if isinstance(value, dict):
        return [v for v in value.values() if isinstance(v, _Place)]
    return []
