"""Kernel parameter lists, read from a CUDA C declaration or from a GrCUDA signature string.

Both give a tuple of :class:`Param`. A CUDA C declaration::

    extern "C" __global__ void axpy(const float* x, float* __restrict__ y, float a, int n)

and the two GrCUDA signature styles (NFI, name optional and after the type; NIDL, name first)::

    "const pointer x, pointer y, float a, sint32 n"
    "x: in pointer float, y: out pointer float, a: float, n: sint32"
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ..core.errors import CompileError, SignatureError


@dataclass(frozen=True)
class Param:
    """One kernel parameter.

    ``dtype`` is the element dtype of a pointer (``None``: any, as for ``void*``) or the value
    dtype of a scalar. ``const`` means the pointee is read-only (never set for scalars); ``out``
    means a NIDL ``out`` pointer. ``ctype`` is the type as written, whitespace normalized.
    """

    name: str
    is_array: bool
    dtype: np.dtype | None
    const: bool
    ctype: str
    out: bool = False


_C_NAMED = {
    "float": "float32", "double": "float64", "__half": "float16", "half": "float16",
    "bool": "bool", "int8_t": "int8", "int16_t": "int16", "int32_t": "int32", "int64_t": "int64",
    "uint8_t": "uint8", "uint16_t": "uint16", "uint32_t": "uint32", "uint64_t": "uint64",
    "ptrdiff_t": "int64", "ssize_t": "int64", "size_t": "uint64",
}
_C_INT_WORDS = {"signed", "unsigned", "short", "long", "int", "char"}
_C_QUALIFIERS = {"const", "volatile", "__restrict__", "__restrict", "restrict"}
_C_KEYWORDS = _C_INT_WORDS | _C_QUALIFIERS | {"float", "double", "bool", "void", "struct"}
# Things allowed between `__global__` and the kernel name that carry their own parentheses.
_C_ATTRIBUTES = {"__launch_bounds__", "__maxnreg__", "__cluster_dims__", "__attribute__",
                 "__declspec", "__align__", "alignas"}

_GR_TYPES = {
    "sint8": "int8", "sint16": "int16", "sint32": "int32", "sint64": "int64",
    "uint8": "uint8", "uint16": "uint16", "uint32": "uint32", "uint64": "uint64",
    "float": "float32", "double": "float64", "char": "int8", "bool": "bool",
}
_GR_QUALIFIERS = ("const", "in", "out", "inout")
_IDENT = re.compile(r"[A-Za-z_]\w*\Z")


def _c_dtype(words: list[str]) -> str | None:
    """The dtype name of a C base type (qualifiers removed), or None when it has none."""
    if len(words) == 1 and words[0].removeprefix("std::") in _C_NAMED:
        return _C_NAMED[words[0].removeprefix("std::")]
    if not words or not set(words) <= _C_INT_WORDS:
        return None
    # Integer keywords combine in any order (`long unsigned int`); LP64 sizes.
    bits = 8 if "char" in words else 16 if "short" in words else 64 if "long" in words else 32
    return f"{'u' if 'unsigned' in words else ''}int{bits}"


def _strip_noise(source: str) -> str:
    # String literals stay whole: `extern "C"` survives, and `//` inside one is no comment.
    def repl(m: re.Match[str]) -> str:
        return m.group(0) if m.group(0)[0] in "\"'" else " "

    source = re.sub(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|//[^\n]*|/\*.*?\*/', repl,
                    source, flags=re.S)
    # Preprocessor lines (with continuations): a `#define` that mentions __global__ is no kernel.
    return re.sub(r"^[ \t]*#(?:[^\n]*\\\n)*[^\n]*", " ", source, flags=re.M)


def _group_end(src: str, i: int) -> int:
    """Index just past the parenthesis group that opens at ``src[i]``."""
    depth = 0
    for j in range(i, len(src)):
        depth += {"(": 1, ")": -1}.get(src[j], 0)
        if depth == 0:
            return j + 1
    return len(src)


def _kernels(src: str) -> list[tuple[str, str, bool, bool, bool]]:
    """(name, parameter text, is template, has C linkage, returns void) for each
    ``__global__`` function in ``src``."""
    found = []
    for m in re.finditer(r"\b__global__\b", src):
        prefix = src[max(src.rfind(c, 0, m.start()) for c in ";{}") + 1:m.start()]
        templated = re.search(r"\btemplate\s*<[^;{}]*>\s*(?:\w+\s+)*$", src[:m.start()])
        linkage = bool(re.search(r'\bextern\s*"C"', prefix)) or _in_extern_c(src, m.start())
        words = set(re.findall(r"[A-Za-z_]\w*", prefix))
        i, name = m.end(), None
        for t in re.finditer(r"\s*(\[\[.*?\]\]|[A-Za-z_]\w*|\S)", src[m.end():], flags=re.S):
            if t.start() < i - m.end():
                continue                      # inside an attribute group already skipped
            tok, i = t.group(1), m.end() + t.end()
            if tok in ";{}(":
                break
            nxt = re.match(r"\s*\(", src[i:])
            if nxt and tok in _C_ATTRIBUTES:
                i = _group_end(src, i + nxt.end() - 1)
            elif nxt:
                name, start = tok, i + nxt.end() - 1
                break
            else:
                words.add(tok)
        if name is not None:
            found.append((name, src[start + 1:_group_end(src, start) - 1], bool(templated),
                          linkage, "void" in words))
    return found


def _in_extern_c(src: str, pos: int) -> bool:
    """Whether ``pos`` lies inside an ``extern "C" { ... }`` block of ``src``."""
    blocks: list[bool] = []
    last = 0
    for m in re.finditer(r"[{};]", src[:pos]):
        if m.group() == "{":
            blocks.append(bool(re.search(r'\bextern\s*"C"\s*$', src[last:m.start()])))
        elif m.group() == "}" and blocks:
            blocks.pop()
        last = m.end()
    return any(blocks)


def check_declaration(source: str, name: str, params: tuple[Param, ...]) -> None:
    """Refuse, as the GPU's compiler or its lookup of the kernel would, a ``__global__``
    kernel ``name`` of ``source`` without C linkage (its name is mangled: CUDA cannot find it
    by name), returning a value, or with two parameters of one name. The ``sim`` backend never
    compiles the source, so these are checked where the kernel is defined.

    Raises
    ------
    SignatureError
        With the fix.
    """
    matches = [k for k in _kernels(_strip_noise(source)) if k[0] == name and not k[2]]
    if matches and not any(k[3] for k in matches):
        raise SignatureError(
            f'kernel \'{name}\' is not declared extern "C": C++ mangles its name, so CUDA cannot '
            f'find it as \'{name}\'; write extern "C" __global__ void {name}(...), or put it in '
            'an extern "C" { ... } block')
    if matches and not all(k[4] for k in matches):
        raise SignatureError(f"kernel '{name}' returns a value: a __global__ function must "
                             "return void; write its result to an array argument")
    seen: set[str] = set()
    for p in params:
        if p.name in seen:
            raise SignatureError(f"kernel '{name}': two parameters are named '{p.name}'; "
                                 "give each its own name")
        seen.add(p.name)


def _split_top(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for j, ch in enumerate(text):
        depth += {"(": 1, "<": 1, "[": 1, ")": -1, ">": -1, "]": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            parts.append(text[start:j])
            start = j + 1
    return parts + [text[start:]]


#: The qualifiers of a pointer that does not alias (a name merely containing them is a name).
_RESTRICT = frozenset({"__restrict__", "__restrict", "restrict"})


def _c_param(kernel: str, i: int, text: str, strict: bool) -> Param:
    text = text.split("=", 1)[0]        # (a C++ default value: `int n = 4`)
    tokens = re.findall(r"[A-Za-z_][\w:]*|\[[^\]]*\]|\S", text)
    where = f"kernel '{kernel}': parameter {i} ('{' '.join(text.split())}')"
    if not tokens or any(t in ("&", "...", ".") for t in tokens):
        raise SignatureError(f"{where}: not a parameter asyncgpu can pass (empty, reference "
                             "or variadic)")
    stray = next((t for t in tokens if t in ("{", "}", ";", "(", ")")), None)
    if stray is not None:
        raise SignatureError(f"{where}: {stray!r} in a parameter: the parameter list does not "
                             "close where it should (a missing ')'?); the GPU's compiler "
                             "refuses this source")
    name = f"arg{i}"
    arrays = sum(t.startswith("[") for t in tokens)      # `float x[]` is a pointer
    tokens = [t for t in tokens if not t.startswith("[") and t not in _RESTRICT]
    words = [t for t in tokens if t not in ("*", "const", "volatile")]
    if tokens[-1] not in _C_KEYWORDS and tokens[-1] != "*" and len(words) > 1:
        name = tokens.pop()
    stars = tokens.count("*") + arrays
    head = tokens[:tokens.index("*")] if "*" in tokens else tokens
    base = [t for t in head if t not in ("const", "volatile")]
    ctype = re.sub(r" \*", "*", " ".join(tokens)) + "*" * arrays
    dtype = _c_dtype(base)
    if stars:
        # Only a const left of the first `*` protects the data; `T* const p` is a const pointer.
        single = stars == 1
        if strict and (not single or dtype is None and base != ["void"]):
            # (its arrays' dtypes could not be checked: a float64 array for a `real*` that a
            # typedef makes float would be read as floats, silently)
            what = ("a pointer to pointers, whose elements are addresses" if not single else
                    f"'{' '.join(base)}' is no C type asyncgpu knows (a typedef, a macro, a "
                    "struct or a vector type)")
            raise SignatureError(
                f"{where}: the element type of '{ctype}' is unknown ({what}), so the dtype of "
                f"the arrays passed for it could not be checked; give the kernel a signature "
                f'string, e.g. ag.cuda_kernel(src, "{kernel}", signature="..."), with '
                f"'pointer float {name}' there for float32 elements (or another element type: "
                f"{', '.join(_GR_TYPES)}), or 'pointer {name}' for arrays of any dtype")
        return Param(name, True, np.dtype(dtype) if dtype and single else None,
                     "const" in head and single, ctype)
    if dtype is None and (strict or base == ["void"]):
        raise SignatureError(
            f"{where}: type '{' '.join(base)}' has no dtype asyncgpu can pass by value; the "
            f"kernel needs a signature string, e.g. "
            f'ag.cuda_kernel(src, "{kernel}", signature="...")'
        )
    return Param(name, False, np.dtype(dtype) if dtype else None, False, ctype)


def parse_cuda_declaration(source: str, name: str, *, strict: bool = True) -> tuple[Param, ...]:
    """Find ``__global__ void <name>(...)`` in CUDA C source and return its parameters.

    With ``strict=False`` a by-value parameter of unknown type, and a pointer whose element
    type is unknown (a typedef's, a macro's, a struct's, a pointer to pointers), get
    ``dtype=None`` instead of raising, so that a caller holding a signature string can supply
    the type; ``void*`` has ``dtype=None`` (arrays of any dtype) either way.

    Raises
    ------
    CompileError
        No ``__global__`` function is called ``name`` (the message lists those found).
    SignatureError
        The kernel is a template, or a parameter cannot be understood.
    """
    kernels = _kernels(_strip_noise(source))
    matches = [k for k in kernels if k[0] == name]
    # (a declaration before the definition may leave its parameters unnamed: the one that
    # names them gives the names that annotations such as out=["y"] refer to)
    match = (matches[0] if len(matches) == 1 else
             _best_named(name, matches, strict) if matches else None)
    if len(matches) > 1:
        _same_parameters(name, matches)
    if match is None:
        names = ", ".join(dict.fromkeys(k[0] for k in kernels)) or "none"
        raise CompileError(f"kernel '{name}' is not declared as __global__ in the source; "
                           f"kernels found: {names}")
    if match[2]:
        raise SignatureError(f"kernel '{name}' is a template; templates have mangled names: "
                             f'instantiate it inside an extern "C" __global__ wrapper kernel')
    body = " ".join(match[1].split())
    if body in ("", "void"):
        return ()
    return tuple(_c_param(name, i, p, strict) for i, p in enumerate(_split_top(body)))


def _same_parameters(name: str, matches: list[tuple]) -> None:
    """SignatureError where declarations of one kernel differ in their parameters' types: an
    ``extern "C"`` function has one signature (the GPU's compiler refuses an overload, and
    which one a launch would reach is not known)."""
    types = set()
    for match in matches:
        body = " ".join(match[1].split())
        if match[2] or body in ("", "void"):
            types.add(())
            continue
        try:
            types.add(tuple(_c_param(name, i, p, False).ctype.replace(" ", "")
                            for i, p in enumerate(_split_top(body))))
        except SignatureError:
            continue                    # (the declaration chosen is parsed again, strictly)
    if len(types) > 1:
        listed = "; ".join("(" + ", ".join(t) + ")" for t in sorted(types))
        raise SignatureError(f"kernel '{name}' is declared with different parameters: "
                             f"{listed}; an extern \"C\" kernel has one signature (the GPU's "
                             "compiler refuses an overload): give the others other names")


def _best_named(name: str, matches: list[tuple], strict: bool) -> tuple:
    """Of several declarations of one kernel, the first that names the most parameters."""
    def named(match: tuple) -> int:
        body = " ".join(match[1].split())
        if match[2] or body in ("", "void"):
            return 0
        try:
            params = [_c_param(name, i, p, strict) for i, p in enumerate(_split_top(body))]
        except SignatureError:
            return -1
        return sum(p.name != f"arg{i}" for i, p in enumerate(params))

    return max(matches, key=named)


def _gr_param(i: int, text: str) -> Param:
    where = f"signature parameter {i} ('{text}')"
    name = None
    if ":" in text:
        name, text = (s.strip() for s in text.split(":", 1))
        if not _IDENT.match(name) or name in _GR_TYPES:
            raise SignatureError(f"{where}: '{name}' is not a parameter name")
    tokens = text.split()
    quals = []
    while tokens and tokens[0] in _GR_QUALIFIERS:
        quals.append(tokens.pop(0))
    if not tokens:
        raise SignatureError(f"{where}: missing type after '{' '.join(quals) or ':'}'")
    kind, rest = tokens[0], tokens[1:]
    if kind != "pointer" and kind not in _GR_TYPES:
        raise SignatureError(f"{where}: unknown type '{kind}'; expected pointer, "
                             f"{', '.join(_GR_TYPES)}")
    elem = None
    if kind == "pointer":
        while rest and rest[0] == "const":
            quals.append(rest.pop(0))
        # After `pointer`: an element type, then a name (NFI only); a non-type alone is the name.
        if rest and (rest[0] in _GR_TYPES or name is not None or len(rest) > 1):
            elem = rest.pop(0)
            if elem not in _GR_TYPES:
                raise SignatureError(f"{where}: unknown element type '{elem}'")
    elif quals:
        raise SignatureError(f"{where}: '{quals[0]}' applies to pointers, not to scalar "
                             f"type '{kind}'")
    if rest:
        if name is not None or len(rest) > 1 or not _IDENT.match(rest[0]) \
                or rest[0] in _GR_TYPES or rest[0] in _GR_QUALIFIERS or rest[0] == "pointer":
            raise SignatureError(f"{where}: unexpected token '{rest[-1] if name else rest[0]}'")
        name = rest[0]
    directions = [q for q in quals if q != "const"]
    if len(directions) > 1 or (directions and directions[0] != "in" and "const" in quals):
        raise SignatureError(f"{where}: '{quals[-1]}' contradicts '{quals[0]}'")
    const = "const" in quals or "in" in quals
    dtype = _GR_TYPES.get(elem or kind) if (elem or kind != "pointer") else None
    ctype = " ".join(quals + [kind] + ([elem] if elem else []))
    return Param(name or f"arg{i}", kind == "pointer", np.dtype(dtype) if dtype else None,
                 const, ctype, out="out" in quals)


def parse_grcuda_signature(signature: str) -> tuple[Param, ...]:
    """Parse a GrCUDA signature string (NFI or NIDL style, see the module docstring).

    Raises
    ------
    SignatureError
        An unknown type token, ``const``/``in``/``out`` on a scalar, ``out`` with ``const`` or
        ``in``, an empty parameter, or a duplicate name; the message gives the 0-based position.
    """
    params: list[Param] = []
    for i, raw in enumerate(signature.split(",")):
        text = " ".join(raw.split())
        if not text:
            raise SignatureError(f"signature parameter {i} is empty (in {signature!r})")
        p = _gr_param(i, text)
        if any(q.name == p.name for q in params):
            raise SignatureError(f"signature parameter {i} ('{text}'): duplicate name '{p.name}'")
        params.append(p)
    return tuple(params)


__all__ = ["Param", "check_declaration", "parse_cuda_declaration", "parse_grcuda_signature"]
