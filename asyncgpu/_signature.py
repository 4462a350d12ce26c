"""Kernel parameter descriptions from CUDA C declarations and GrCUDA signature strings."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ._errors import CompileError, SignatureError


@dataclass(frozen=True)
class Param:
    """One kernel parameter: name, pointer or scalar, element/value dtype, read-only pointee."""

    name: str
    is_array: bool
    dtype: np.dtype | None
    const: bool
    ctype: str
    out: bool = False


_C_TYPES = {
    "float": "float32", "double": "float64", "__half": "float16", "half": "float16",
    "int": "int32", "signed": "int32", "signed int": "int32", "int32_t": "int32",
    "unsigned": "uint32", "unsigned int": "uint32", "uint32_t": "uint32",
    "short": "int16", "short int": "int16", "int16_t": "int16", "unsigned short": "uint16",
    "uint16_t": "uint16", "char": "int8", "signed char": "int8", "int8_t": "int8",
    "unsigned char": "uint8", "uint8_t": "uint8", "long": "int64", "long int": "int64",
    "long long": "int64", "long long int": "int64", "int64_t": "int64", "ptrdiff_t": "int64",
    "ssize_t": "int64", "unsigned long": "uint64", "unsigned long long": "uint64",
    "uint64_t": "uint64", "size_t": "uint64", "bool": "bool",
}
_GRCUDA_TYPES = {
    "sint8": "int8", "sint16": "int16", "sint32": "int32", "sint64": "int64",
    "uint8": "uint8", "uint16": "uint16", "uint32": "uint32", "uint64": "uint64",
    "float": "float32", "double": "float64", "char": "int8", "bool": "bool",
}


def _strip_comments(src: str) -> str:
    src = re.sub(r"/\*.*?\*/", " ", src, flags=re.S)
    return re.sub(r"//[^\n]*", " ", src)


def parse_cuda_declaration(source: str, name: str) -> tuple[Param, ...]:
    """Parameters of ``__global__ void <name>(...)`` in CUDA C source."""
    src = _strip_comments(source)
    found = re.findall(r"__global__\s+void\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?(\w+)\s*\(", src)
    m = re.search(r"(template\s*<[^>]*>\s*)?__global__\s+void\s+(?:__launch_bounds__\s*\([^)]*\)"
                  rf"\s*)?{re.escape(name)}\s*\(([^)]*)\)", src)
    if m is None:
        raise CompileError(
            f"kernel '{name}' is not declared as __global__ in the source; kernels found: "
            f"{', '.join(found) or 'none'}"
        )
    if m.group(1):
        raise SignatureError(f"kernel '{name}' is a template: wrap it in an extern \"C\" kernel")
    body = " ".join(m.group(2).split())
    if body in ("", "void"):
        return ()
    params = []
    for i, raw in enumerate(body.split(",")):
        text = raw.replace("__restrict__", " ").replace("restrict", " ").strip()
        stars = text.count("*")
        tokens = text.replace("*", " * ").split()
        if not tokens:
            raise SignatureError(f"kernel '{name}': parameter {i} is empty")
        pname = tokens[-1] if len(tokens) > 1 and tokens[-1] not in ("*",) else f"arg{i}"
        type_tokens = tokens[:-1] if pname == tokens[-1] else tokens
        if stars:
            first_star = type_tokens.index("*")
            pointee = [t for t in type_tokens[:first_star]]
            const = "const" in pointee
            base = " ".join(t for t in pointee if t != "const")
            dt = _C_TYPES.get(base) if stars == 1 else None
            params.append(Param(pname, True, np.dtype(dt) if dt else None, const and stars == 1,
                                " ".join(type_tokens)))
        else:
            base = " ".join(t for t in type_tokens if t != "const")
            dt = _C_TYPES.get(base)
            if dt is None:
                raise SignatureError(
                    f"kernel '{name}': parameter {i} '{pname}' has type '{base}', which asyncgpu "
                    f"cannot convert; give a signature string, e.g. "
                    f"asyncgpu.cuda_kernel(src, '{name}', signature='...')"
                )
            params.append(Param(pname, False, np.dtype(dt), False, base))
    return tuple(params)


def parse_grcuda_signature(signature: str) -> tuple[Param, ...]:
    """Parse ``"const pointer x, pointer y, sint32 n"`` or NIDL ``"x: in pointer float, ..."``."""
    params: list[Param] = []
    names: set[str] = set()
    for i, raw in enumerate(signature.split(",")):
        text = raw.strip()
        if not text:
            raise SignatureError(f"signature parameter {i} is empty")
        name = f"arg{i}"
        if ":" in text:
            name, text = (s.strip() for s in text.split(":", 1))
        tokens = text.split()
        direction = None
        if tokens and tokens[0] in ("in", "out", "inout"):
            direction = tokens.pop(0)
        const = "const" in tokens
        tokens = [t for t in tokens if t != "const"]
        if "pointer" in tokens:
            k = tokens.index("pointer")
            rest = tokens[:k] + tokens[k + 1:]
            elem = None
            if ":" not in raw and rest:
                name = rest.pop()
            if rest:
                elem = _GRCUDA_TYPES.get(rest[0])
                if elem is None:
                    raise SignatureError(f"signature parameter {i}: unknown type '{rest[0]}'")
            params.append(Param(name, True, np.dtype(elem) if elem else None,
                                const or direction == "in", "pointer", out=direction == "out"))
        else:
            if not tokens or tokens[0] not in _GRCUDA_TYPES:
                bad = tokens[0] if tokens else text
                raise SignatureError(f"signature parameter {i}: unknown type '{bad}'")
            if const or direction:
                raise SignatureError(f"signature parameter {i}: const/in/out apply to pointers")
            if len(tokens) > 1 and ":" not in raw:
                name = tokens[1]
            params.append(Param(name, False, np.dtype(_GRCUDA_TYPES[tokens[0]]), False, tokens[0]))
        if name in names:
            raise SignatureError(f"signature parameter {i}: duplicate name '{name}'")
        names.add(name)
    return tuple(params)
