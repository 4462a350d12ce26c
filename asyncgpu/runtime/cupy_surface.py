"""CuPy's public surface on the ``sim`` backend: which names exist and what runs for them.

A program that passes on ``sim`` must run on the GPU, so on ``sim`` ``asyncgpu.cupy`` follows
CuPy's namespace, not NumPy's: the names, the ``random.Generator`` methods and the signatures
come from ``asyncgpu/data/cupy_surface.json``, a description of CuPy written by
``tools/cupy_surface.py`` from an installed CuPy. NumPy only computes. On ``cuda`` none of
this is used: the runtime reads CuPy's own namespace.

For a CuPy function or ufunc the simulator runs ``asyncgpu.runtime.cupy_results.AS_CUPY``'s
function where NumPy's result differs from CuPy's; otherwise, in this order:

1. NumPy's function of the same path;
2. NumPy's function for another CuPy name bound to the very same object (CuPy's ``trapz`` *is*
   its ``trapezoid``);
3. a CuPy function whose body only returns another CuPy function called with its own
   parameters (``product`` returns ``prod(a, axis, dtype, out, keepdims)``, ``msort``
   returns ``sort(a, axis=0)``): that call, with NumPy's function;
4. the replacement NumPy names in its message for a removed name (``round_``: "Use
   ``np.round`` instead");
5. :data:`_SAME_AS`: equivalences read off CuPy's implementation where no rule above shows
   them (``in1d``).

A name CuPy lacks raises the ``AttributeError`` the GPU gives; a CuPy name with no NumPy
counterpart raises :class:`NotOnSimulatorError` when it is looked up. Calls are bound to CuPy's
signature first, so a keyword CuPy refuses is refused on ``sim`` too, before anything is
enqueued.
"""

from __future__ import annotations

import ast
import functools
import inspect
import json
import re
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..core.errors import ArgumentError, NotOnSimulatorError
from .cupy_arithmetic import into
from .cupy_results import AS_CUPY

PATH = Path(__file__).parent.parent / "data" / "cupy_surface.json"     # (asyncgpu/data)
FORMAT = 1
_HINT = ("asyncgpu.cupy follows CuPy's namespace on every backend, so this program would fail "
         "on the GPU too")


@functools.lru_cache(maxsize=1)
def surface() -> dict[str, Any]:
    """The checked-in description of CuPy's public surface."""
    data = json.loads(PATH.read_text())
    if data.get("format") != FORMAT:
        raise RuntimeError(f"{PATH} has format {data.get('format')!r}, this asyncgpu reads "
                           f"{FORMAT}: regenerate it with tools/cupy_surface.py --write")
    return data


def _module_name(prefix: str) -> str:
    return "cupy" + ("." + prefix if prefix else "")


def lookup(prefix: str, name: str) -> dict[str, Any]:
    """The entry of CuPy's ``<prefix>.<name>``; the GPU's ``AttributeError`` if it has none."""
    entries = surface()["namespaces"].get(prefix)
    entry = None if entries is None else entries.get(name)
    if entry is None:
        raise AttributeError(f"module '{_module_name(prefix)}' has no attribute '{name}' "
                             f"({_HINT})", name=name)
    return entry


def unavailable(path: str, what: str = "") -> NotOnSimulatorError:
    return NotOnSimulatorError(
        f"asyncgpu.cupy.{path}: cupy.{path} exists on the GPU{what} but has no NumPy "
        "counterpart the sim backend could run, so it is not available on the simulator; "
        "run this part on the cuda backend or use a function both have"
    )


def _numpy(path: str) -> Any:
    obj: Any = np
    for part in path.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def _split(path: str) -> tuple[str, str]:
    prefix, _, name = path.rpartition(".")
    return prefix, name


def _in1d(ar1: Any, ar2: Any, assume_unique: bool = False, invert: bool = False) -> Any:
    # CuPy's in1d ravels both arrays and tests each element of the first for membership in
    # the second: NumPy's isin keeps the first array's shape, raveled it is the same answer
    return np.isin(ar1, ar2, assume_unique=assume_unique, invert=invert).ravel()


#: CuPy functions NumPy 2 dropped, equal to a NumPy expression that no rule of the module
#: docstring derives (checked against CuPy on the GPU by ``tools/cupy_surface.py --coverage``).
_SAME_AS: dict[str, Callable[..., Any]] = {"in1d": _in1d}
_REMOVED = re.compile(r"Use `np\.([\w.]+)` instead")


def _removed_replacement(path: str) -> Any:
    prefix, name = _split(path)
    mod = _numpy(prefix) if prefix else np
    try:
        getattr(mod, name)
    except AttributeError as exc:
        m = _REMOVED.search(str(exc))
        if m is not None:
            return _numpy(m.group(1))
    return None


def _delegated(entry: dict[str, Any], prefix: str) -> Any:
    spec = entry.get("delegates")
    if not spec:
        return None
    target = _numpy_function(f"{prefix}.{spec['to']}" if prefix else spec["to"], set())
    if target is None:
        return None
    params = _signature(entry)
    if any(p.default is _DEFAULT for p in params.parameters.values()):
        return None         # (the defaults CuPy passes on for arguments not given: literals)
    args, kwargs, const = spec["args"], spec["kwargs"], spec["const"]

    def call(*a: Any, **k: Any) -> Any:
        bound = params.bind(*a, **k)
        bound.apply_defaults()
        given = bound.arguments
        return target(*[given[n] for n in args],
                      **{key: given[n] for key, n in kwargs.items()}, **const)

    return call


def _numpy_function(path: str, seen: set[str]) -> Any:
    if path in seen:
        return None
    seen.add(path)
    prefix, name = _split(path)
    try:
        entry = lookup(prefix, name)
    except AttributeError:
        return None
    fn = _numpy(path)
    if callable(fn) and not isinstance(fn, type):
        return fn
    for other in entry.get("alias_of", ()):
        fn = _numpy_function(f"{prefix}.{other}" if prefix else other, seen)
        if fn is not None:
            return fn
    return _delegated(entry, prefix) or _removed_replacement(path) or _SAME_AS.get(path)


@functools.lru_cache(maxsize=None)
def numpy_function(path: str) -> Callable[..., Any]:
    """What the simulator runs for CuPy's function or ufunc ``path`` (see the module docstring);
    :class:`NotOnSimulatorError` when nothing does, ``AttributeError`` when CuPy has no such
    name."""
    prefix, name = _split(path)
    entry = lookup(prefix, name)
    fn = AS_CUPY.get(path) or _numpy_function(path, set())
    if fn is None:
        raise unavailable(path)
    return as_cupy_signature(fn, entry)


@functools.lru_cache(maxsize=None)
def sim_function(path: str) -> Callable[..., Any] | None:
    """What the simulator calls for the call ``path`` (``"ndarray.<name>"``: the method, called
    with the array first): :func:`numpy_function`'s, read as CuPy's signature reads its
    arguments; None where that is NumPy's own function or method of the same path, called as it
    is (a method without an :data:`AS_CUPY` entry, a path CuPy lacks: an internal call's)."""
    prefix, _ = _split(path)
    if path.startswith("ndarray.") or (prefix and prefix not in surface()["namespaces"]):
        return AS_CUPY.get(path)        # (a method: an array's, or a ufunc's, ``add.at``)
    try:
        return numpy_function(path)
    except (AttributeError, NotOnSimulatorError):
        return None


#: CuPy's parameter names NumPy's functions call otherwise (where their positions differ).
_RENAMED = {"interpolation": "method"}


def as_cupy_signature(fn: Callable[..., Any], entry: dict[str, Any],
                      drop_self: bool = False) -> Callable[..., Any]:
    """``fn`` (NumPy's) called as CuPy's signature in ``entry`` reads its arguments: where the
    two differ in names or order (``flip(a=)``, ``argmax(a, axis, dtype)``, ``histogram2d``'s
    ``weights`` by position), each argument goes to NumPy's parameter of CuPy's name, or of
    its position; a ``dtype`` or ``out`` NumPy's lacks converts or stores the result. ``fn``
    itself where the two agree, or where either cannot be read. ``drop_self``: ``entry`` is a
    method's, ``fn`` bound (a generator's ``uniform(low, high, size, dtype)``)."""
    if entry.get("kind") not in ("function", "method") or entry.get("params") is None:
        return fn
    try:
        theirs = inspect.signature(fn)
    except (TypeError, ValueError):
        return fn
    mine = _signature(entry, drop_self)
    cupy = list(mine.parameters)
    numpy = list(theirs.parameters.values())
    names = [p.name for p in numpy]
    variadic = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    positional_only = inspect.Parameter.POSITIONAL_ONLY
    ordered = (positional_only, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    if (any(p.kind in variadic for p in numpy + list(mine.parameters.values()))
            or (cupy == names[:len(cupy)] and not any(
                p.kind is positional_only and mine.parameters[p.name].kind is not positional_only
                for p in numpy[:len(cupy)]))):
        return fn
    to: dict[str, str | None] = {}
    for i, name in enumerate(cupy):
        if name in names:
            to[name] = name
        elif _RENAMED.get(name) in names:
            to[name] = _RENAMED[name]
        elif name in ("dtype", "out"):
            to[name] = None         # (applied to the result)
        elif i < len(names) and names[i] not in cupy:
            to[name] = names[i]
        else:
            return fn               # (no place for it: NumPy's own refusal stands)

    def run(*args: Any, **kwargs: Any) -> Any:
        given = mine.bind(*args, **kwargs).arguments
        call = {to[name]: value for name, value in given.items() if to[name] is not None}
        # (by position as far as NumPy's order allows: its C methods take no keywords, though
        # their signatures name them)
        positional = []
        for p in numpy:
            if p.kind not in ordered or p.name not in call:
                break
            positional.append(call.pop(p.name))
        result = fn(*positional, **call)
        if to.get("dtype", "dtype") is None and given.get("dtype") is not None:
            result = np.asarray(result).astype(given["dtype"])
        if to.get("out", "out") is None and given.get("out") is not None:
            result = into(given["out"], np.asarray(result))
        return result

    # (what the call writes is read from this signature: an out= in CuPy's place is booked)
    run.__signature__ = mine      # type: ignore[attr-defined]
    return run


def sim_value(prefix: str, name: str, entry: dict[str, Any]) -> Any:
    """A constant, type or object of CuPy on ``sim`` (NumPy's own object where CuPy's is)."""
    path = f"{prefix}.{name}" if prefix else name
    if entry["kind"] == "constant":
        text = entry["value"]
        if text in ("inf", "-inf", "nan"):
            return float(text)
        return ast.literal_eval(text)
    where = entry.get("same_object")
    obj = _numpy(where[len("numpy."):]) if where else None
    if obj is None:
        raise unavailable(path, f" (a {entry['kind']} of CuPy's own)")
    return obj


_DEFAULT = object()     # a stand-in default: binding needs to know only that there is one


def _default(p: dict[str, Any]) -> Any:
    """A parameter's default: the literal CuPy's signature shows (the booking of writes reads
    a flag's, ``overwrite_input=False``), or a stand-in where it is no literal."""
    if "default" not in p:
        return inspect.Parameter.empty
    try:
        return ast.literal_eval(p["default"])
    except (ValueError, SyntaxError, TypeError):
        return _DEFAULT


def _signature(entry: dict[str, Any], drop_self: bool = False) -> inspect.Signature:
    params = entry["params"][1:] if drop_self else entry["params"]
    return inspect.Signature([
        inspect.Parameter(p["name"], getattr(inspect.Parameter, p["kind"]), default=_default(p))
        for p in params
    ])


def _text(name: str, entry: dict[str, Any], drop_self: bool = False) -> str:
    params = entry["params"][1:] if drop_self else entry["params"]
    parts, star = [], False
    for i, p in enumerate(params):
        kind = p["kind"]
        if kind == "KEYWORD_ONLY" and not star:
            parts.append("*")
            star = True
        prefix = {"VAR_POSITIONAL": "*", "VAR_KEYWORD": "**"}.get(kind, "")
        star = star or kind == "VAR_POSITIONAL"
        parts.append(prefix + p["name"] + (f"={p['default']}" if "default" in p else ""))
        if kind == "POSITIONAL_ONLY" and (i + 1 == len(params)
                                          or params[i + 1]["kind"] != "POSITIONAL_ONLY"):
            parts.append("/")
    return f"{name}({', '.join(parts)})"


def checker(path: str, entry: dict[str, Any], drop_self: bool = False,
            label: str | None = None
            ) -> Callable[[tuple[Any, ...], dict[str, Any]], None] | None:
    """A function refusing, with :class:`ArgumentError`, the arguments CuPy's signature for
    ``path`` refuses; None where CuPy's signature was not readable. Its messages name the
    call ``label`` (by default ``asyncgpu.cupy.<path>``)."""
    if entry.get("params") is None:
        return None
    sig = _signature(entry, drop_self)
    where = label or f"asyncgpu.cupy.{path}"

    def check(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        try:
            sig.bind(*args, **kwargs)
        except TypeError as exc:
            raise ArgumentError(
                f"{where}: {exc}; CuPy's signature is "
                f"{_text(path, entry, drop_self)} and the GPU refuses this call too"
            ) from None

    return check


def generator_method(name: str) -> dict[str, Any]:
    """The entry of ``cupy.random.Generator.<name>``; the GPU's ``AttributeError`` if none."""
    entry = surface()["generator_methods"].get(name)
    if entry is None or entry["kind"] != "method":
        raise AttributeError(
            f"'Generator' object has no attribute '{name}' (cupy.random.Generator has no "
            f"method '{name}'; {_HINT}; its methods: "
            f"{', '.join(sorted(surface()['generator_methods']))})", name=name)
    return entry


def ufunc_attribute(path: str, name: str) -> None:
    """Raise the GPU's ``AttributeError`` unless CuPy's ufuncs have an attribute ``name``."""
    if name not in surface()["ufunc_attributes"]:
        raise AttributeError(f"'cupy._core._kernel.ufunc' object has no attribute '{name}' "
                             f"(asyncgpu.cupy.{path}.{name}; {_HINT})", name=name)
