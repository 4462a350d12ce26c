"""CuPy's public surface as data: the generator of ``asyncgpu/data/cupy_surface.json``.

On the ``sim`` backend ``asyncgpu.cupy`` has no CuPy to look at, yet a program that passes
there must run on the GPU. So the simulator reads a checked-in description of CuPy's
namespace (``asyncgpu/runtime/cupy_surface.py`` loads it): which names exist, what each one is, the
signatures CuPy accepts. This script writes that description from an installed CuPy.

Rerun it (``python3 tools/cupy_surface.py --write asyncgpu/data/cupy_surface.json``) when the
CuPy version the project supports on the GPU changes; the GPU test
``tests/gpu/test_gpu_cupy_surface.py`` fails while the checked-in file and the installed
CuPy disagree. CuPy imports without a GPU (``pip install cupy-cuda13x`` in a scratch venv
is enough); no device is touched to describe it.

What is recorded, per namespace (``""`` for the top level, ``"linalg"``, ``"fft"``,
``"random"``, ``"lib.stride_tricks"``, ...; a sub-module is walked when NumPy has a module of
the same path, since that is what NumPy users reach):

* ``module``: a sub-module (``"walked": true`` when its names are listed too);
* ``ufunc``: ``nin``, ``nout`` and the signature of its docstring;
* ``function``: the signature (``inspect`` for Python functions, the embedded docstring
  signature for compiled ones; ``null`` where neither is readable), ``alias_of`` when it is
  the very object of other CuPy names (``trapz`` is ``trapezoid``), ``delegates`` when its
  body only warns and returns another CuPy function called with its own parameters
  (``product`` returns ``prod(a, axis, dtype, out, keepdims)``);
* ``type``: ``same_object`` when CuPy's class is NumPy's (``float32``, ``AxisError``);
* ``constant``: its ``repr`` (``pi``, ``NINF``, ``newaxis``);
* ``object``: other instances (``s_``, ``r_``), with ``same_object`` when it is NumPy's.

Besides: the methods of ``cupy.random.Generator`` and of ``cupy.ndarray`` (methods with
signatures, attributes) and the methods and attributes of CuPy's ufuncs.

``--coverage`` (on a GPU) calls every function that has a NumPy counterpart on small inputs
under CuPy and under the simulator's mapping, compares the results and prints the table of
``docs/reference/cupy-coverage.md`` (``--coverage-json PATH`` also writes the details).
"""

from __future__ import annotations

import argparse
import ast
import importlib
import inspect
import json
import re
import sys
import textwrap
import types
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_PATH = ROOT / "asyncgpu" / "data" / "cupy_surface.json"
#: Format of the file: bumped when the layout changes (the loader checks it).
FORMAT = 1


def _public(obj: Any) -> list[str]:
    return sorted(n for n in dir(obj) if not n.startswith("_"))


def _params(sig: inspect.Signature) -> list[dict[str, str]]:
    out = []
    for p in sig.parameters.values():
        entry = {"name": p.name, "kind": p.kind.name}
        if p.default is not inspect.Parameter.empty:
            # (a module's repr names its file: the name alone keeps the file the same
            # wherever CuPy is installed)
            entry["default"] = (f"<module '{p.default.__name__}'>"
                                if isinstance(p.default, types.ModuleType) else repr(p.default))
        out.append(entry)
    return out


def _split_top(text: str) -> list[str]:
    """``text`` split at the commas outside brackets and quotes."""
    parts, depth, quote, cur = [], 0, None, []
    for ch in text:
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
            continue
        cur.append(ch)
    if "".join(cur).strip():
        parts.append("".join(cur).strip())
    return parts


def _doc_params(obj: Any, name: str) -> list[dict[str, str]] | None:
    """The parameters of the signature Cython embeds as the docstring's first line
    (``name(a, /, out=None, *, dtype=None)``, with C types before names: ``int alignment=-1``)."""
    doc = (getattr(obj, "__doc__", None) or "").lstrip()
    first = doc.split("\n", 1)[0].replace("\\*", "*")
    # an alias (``abs`` of ``absolute``) carries the docstring of the name it aliases
    m = re.match(r"^(?:[\w.]+\.)?\w+\((.*)\)\s*(?:->.*)?$", first)
    if m is None:
        return None
    params: list[dict[str, str]] = []
    kind = "POSITIONAL_OR_KEYWORD"
    for part in _split_top(m.group(1)):
        left, eq, default = part.partition("=")
        words = left.split()
        if not words:
            return None
        word = words[-1]
        if word == "/":
            for p in params:
                p["kind"] = "POSITIONAL_ONLY"
            continue
        if word == "*":
            kind = "KEYWORD_ONLY"
            continue
        if word.startswith("**"):
            params.append({"name": word[2:], "kind": "VAR_KEYWORD"})
            continue
        if word.startswith("*"):
            params.append({"name": word[1:], "kind": "VAR_POSITIONAL"})
            kind = "KEYWORD_ONLY"
            continue
        if not word.isidentifier():
            return None
        entry = {"name": word, "kind": kind}
        if eq:
            entry["default"] = default.strip()
        params.append(entry)
    return params


def _signature(obj: Any, name: str) -> tuple[list[dict[str, str]] | None, str | None]:
    """(parameters, where they were read: ``"inspect"`` or ``"doc"``) or (None, None)."""
    try:
        return _params(inspect.signature(obj)), "inspect"
    except (TypeError, ValueError):
        pass
    params = _doc_params(obj, name)
    return (params, "doc") if params is not None else (None, None)


def _delegation(fn: Any, namespace: Any) -> dict[str, Any] | None:
    """``{"to", "args", "kwargs", "const"}`` when ``fn``'s body (past its docstring and
    ``warnings.warn`` calls) is one ``return target(<its parameters>, key=<constant>)``."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return None
    if not tree.body or not isinstance(tree.body[0], ast.FunctionDef):
        return None
    fdef = tree.body[0]
    params = {a.arg for a in fdef.args.args + fdef.args.kwonlyargs}
    body = [s for s in fdef.body
            if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))
            and not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Call)
                     and ast.unparse(s.value.func) in ("warnings.warn", "_warnings.warn"))]
    if len(body) != 1 or not isinstance(body[0], ast.Return):
        return None
    call = body[0].value
    if not isinstance(call, ast.Call):
        return None
    func = call.func
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) \
            and func.value.id == "cupy":
        target = func.attr
    elif isinstance(func, ast.Name):
        target = func.id
    else:
        return None
    if getattr(namespace, target, None) is None or target.startswith("_"):
        return None
    args = []
    for a in call.args:
        if not (isinstance(a, ast.Name) and a.id in params):
            return None
        args.append(a.id)
    kwargs: dict[str, str] = {}
    const: dict[str, Any] = {}
    for k in call.keywords:
        if k.arg is None:
            return None
        if isinstance(k.value, ast.Name) and k.value.id in params:
            kwargs[k.arg] = k.value.id
        elif isinstance(k.value, ast.Constant):
            const[k.arg] = k.value.value
        else:
            return None
    return {"to": target, "args": args, "kwargs": kwargs, "const": const}


def _numpy_path(obj: Any, numpy: Any, path: str) -> str | None:
    """Where NumPy keeps ``obj`` when CuPy exposes NumPy's own object, else None."""
    if isinstance(obj, type) and (obj.__module__ or "").split(".")[0] == "numpy":
        where = f"{obj.__module__}.{obj.__qualname__}"
        if _lookup(where) is obj:
            return where
    if _lookup(f"numpy.{path}") is obj:
        return f"numpy.{path}"
    return None


def _lookup(dotted: str) -> Any:
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        try:
            for p in parts[i:]:
                obj = getattr(obj, p)
        except AttributeError:
            return None
        return obj
    return None


_SIMPLE = (bool, int, float, complex, str, type(None))


def describe_namespace(mod: Any, prefix: str, cupy: Any, numpy: Any,
                       out: dict[str, dict[str, Any]]) -> None:
    """Describe ``mod`` (``cupy`` or one of its sub-modules) into ``out[prefix]``, walking
    sub-modules that NumPy also has."""
    import __future__

    entries: dict[str, Any] = {}
    ids: dict[int, list[str]] = {}
    for name in _public(mod):
        ids.setdefault(id(getattr(mod, name)), []).append(name)
    for name in _public(mod):
        obj = getattr(mod, name)
        path = f"{prefix}.{name}" if prefix else name
        if isinstance(obj, __future__._Feature):
            continue    # ``from __future__ import annotations`` in CuPy's module: not an API
        if isinstance(obj, types.ModuleType):
            entry: dict[str, Any] = {"kind": "module"}
            mine = obj.__name__ == f"cupy.{path}"
            if mine and isinstance(_lookup(f"numpy.{path}"), types.ModuleType):
                entry["walked"] = True
                describe_namespace(obj, path, cupy, numpy, out)
            entries[name] = entry
        elif isinstance(obj, cupy.ufunc):
            params, source = _signature(obj, name)
            entries[name] = {"kind": "ufunc", "nin": obj.nin, "nout": obj.nout,
                             "params": params, "params_from": source}
        elif isinstance(obj, type):
            entries[name] = {"kind": "type", "same_object": _numpy_path(obj, numpy, path)}
        elif callable(obj):
            params, source = _signature(obj, name)
            entry = {"kind": "function", "params": params, "params_from": source}
            others = [n for n in ids[id(obj)] if n != name]
            if others:
                entry["alias_of"] = others
            if isinstance(obj, types.FunctionType):
                delegates = _delegation(obj, mod)
                if delegates is not None:
                    entry["delegates"] = delegates
            entries[name] = entry
        elif isinstance(obj, _SIMPLE):
            entries[name] = {"kind": "constant", "value": repr(obj)}
        else:
            entries[name] = {"kind": "object", "same_object": _numpy_path(obj, numpy, path)}
    out[prefix] = entries


def _methods(cls: Any, prefix: str) -> dict[str, Any]:
    entries: dict[str, Any] = {}
    for name in _public(cls):
        attr = inspect.getattr_static(cls, name)
        if callable(getattr(cls, name)) and not isinstance(attr, property):
            params, source = _signature(getattr(cls, name), name)
            entries[name] = {"kind": "method", "params": params, "params_from": source}
        else:
            entries[name] = {"kind": "attribute"}
    return entries


def describe() -> dict[str, Any]:
    """The description of the installed CuPy (what ``--write`` stores)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import cupy
        import numpy

        namespaces: dict[str, dict[str, Any]] = {}
        describe_namespace(cupy, "", cupy, numpy, namespaces)
        return {
            "format": FORMAT,
            "cupy_version": cupy.__version__,
            "generated_by": "tools/cupy_surface.py",
            "namespaces": dict(sorted(namespaces.items())),
            "generator_methods": _methods(cupy.random.Generator, "random.Generator"),
            "ndarray": _methods(cupy.ndarray, "ndarray"),
            "ufunc_attributes": _public(cupy.ufunc),
        }


def dumps(surface: dict[str, Any]) -> str:
    return json.dumps(surface, indent=1, sort_keys=True) + "\n"


# -- coverage on the GPU ---------------------------------------------------------------------
def _inputs(numpy: Any, name: str, entry: dict[str, Any]) -> list[tuple[Any, ...]]:
    """Small argument tuples to try, from the positional parameters without defaults."""
    rng = numpy.random.default_rng(0)
    pos = entry.get("nin")
    if pos is None:
        params = entry.get("params") or []
        pos = sum(1 for p in params if "default" not in p
                  and p["kind"] in ("POSITIONAL_ONLY", "POSITIONAL_OR_KEYWORD"))
    candidates = [
        tuple(rng.uniform(0.5, 1.5, (4, 4)) for _ in range(pos)),
        tuple(rng.uniform(0.5, 1.5, 8) for _ in range(pos)),
        tuple(rng.integers(1, 7, 8) for _ in range(pos)),
    ]
    return candidates if pos else [()]


def _compare(numpy: Any, got: Any, want: Any) -> bool:
    if isinstance(want, (tuple, list)):
        return isinstance(got, (tuple, list)) and len(got) == len(want) and all(
            _compare(numpy, g, w) for g, w in zip(got, want))
    if hasattr(got, "__cuda_array_interface__") and hasattr(got, "get"):
        got = got.get()         # (CuPy refuses implicit copies to the host)
    try:
        g, w = numpy.asarray(got), numpy.asarray(want)
    except Exception:
        try:
            return bool(got == want)
        except Exception:
            return False
    if g.shape != w.shape:
        return False
    if w.dtype.kind in "biufc" and g.dtype.kind in "biufc":
        return bool(numpy.allclose(g, w, rtol=1e-6, atol=1e-8, equal_nan=True))
    return bool((g == w).all())


def coverage() -> dict[str, Any]:
    """Call each function/ufunc with a simulator counterpart under CuPy and under the
    simulator's mapping (``asyncgpu.runtime.cupy_surface.numpy_function``) on the same small
    inputs."""
    import warnings

    import cupy
    import numpy

    sys.path.insert(0, str(ROOT))
    from asyncgpu.runtime import cupy_surface as surface_mod

    surface = surface_mod.surface()
    rows: dict[str, str] = {}
    for prefix, entries in surface["namespaces"].items():
        if prefix.split(".")[0] in ("random", "testing"):
            continue     # random: drawn through Generator; testing: host-side helpers
        for name, entry in entries.items():
            if entry["kind"] not in ("function", "ufunc"):
                continue
            path = f"{prefix}.{name}" if prefix else name
            try:
                sim_fn = surface_mod.numpy_function(path)
            except NotImplementedError:
                rows[path] = "not on sim"
                continue
            gpu_fn = _lookup(f"cupy.{path}")
            verdict = "not called"
            for args in _inputs(numpy, name, entry):
                with warnings.catch_warnings(), numpy.errstate(all="ignore"):
                    warnings.simplefilter("ignore")
                    try:
                        want = sim_fn(*[a.copy() for a in args])
                    except Exception:
                        continue
                    try:
                        got = gpu_fn(*[cupy.asarray(a) for a in args])
                        got = cupy.asnumpy(got) if isinstance(got, cupy.ndarray) else got
                        if isinstance(got, (tuple, list)):
                            got = type(got)(cupy.asnumpy(g) if isinstance(g, cupy.ndarray)
                                            else g for g in got)
                    except Exception as exc:
                        verdict = f"cupy raised {type(exc).__name__}"
                        break
                verdict = "equal" if _compare(numpy, got, want) else "differs"
                break
            rows[path] = verdict
    return {"cupy_version": cupy.__version__, "numpy_version": numpy.__version__,
            "rows": rows}


def coverage_table(result: dict[str, Any], surface: dict[str, Any]) -> str:
    """The Markdown table of ``docs/reference/cupy-coverage.md``."""
    rows = result["rows"]
    names = sum(len(e) for e in surface["namespaces"].values())
    calls = sum(1 for v in rows.values())
    counts: dict[str, int] = {}
    for v in rows.values():
        counts[v] = counts.get(v, 0) + 1
    lines = [f"CuPy {result['cupy_version']}, NumPy {result['numpy_version']}", "",
             "| measure | count |", "| --- | --- |",
             f"| names listed (all namespaces) | {names} |",
             f"| functions and ufuncs checked | {calls} |"]
    lines += [f"| {k} | {counts[k]} |" for k in sorted(counts)]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--write", metavar="PATH", help="write the description of the installed "
                    "CuPy to PATH (the checked-in file is asyncgpu/data/cupy_surface.json)")
    ap.add_argument("--check", action="store_true", help="exit 1 when the checked-in file "
                    "differs from the installed CuPy's description")
    ap.add_argument("--coverage", action="store_true", help="(GPU) call the functions under "
                    "CuPy and the simulator's mapping and print the coverage table")
    ap.add_argument("--coverage-json", metavar="PATH", help="with --coverage: the details")
    ns = ap.parse_args(argv)
    if ns.write:
        Path(ns.write).parent.mkdir(parents=True, exist_ok=True)
        Path(ns.write).write_text(dumps(describe()))
    if ns.check:
        if DEFAULT_PATH.read_text() != dumps(describe()):
            print(f"{DEFAULT_PATH} differs from the installed CuPy: rerun with --write")
            return 1
    if ns.coverage:
        result = coverage()
        print(coverage_table(result, json.loads(DEFAULT_PATH.read_text())))
        if ns.coverage_json:
            Path(ns.coverage_json).write_text(json.dumps(result, indent=1, sort_keys=True))
    if not (ns.write or ns.check or ns.coverage):
        ap.print_help()
    return 0


if __name__ == "__main__":
    sys.exit(main())
