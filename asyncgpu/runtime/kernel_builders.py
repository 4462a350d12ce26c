"""Building kernels: ``asyncgpu.kernel`` (Numba) and ``asyncgpu.cuda_kernel`` (CUDA C).

Each constructor works out a kernel's parameters (from the Python signature, a GrCUDA-style
signature string or the CUDA C declaration) and their access modes: ``const`` (read-only),
``out`` (write-only: the old contents are not needed) or read-write, the default; ``const T*``
in CUDA C is read-only without annotation. An annotation naming no parameter, or marking one
both ``const`` and ``out``, is refused here, when the kernel is made, not at its first launch.
The :class:`~asyncgpu.runtime.kernel.Kernel` it returns validates and launches
(``asyncgpu.runtime.kernel``).

Example::

    k = cuda_kernel(SRC, "axpy", const=["x"])     # y is read-write, x read-only
    k[blocks, threads](x, y, 2.0, n)

Plain Python: nothing here touches the device (Numba compiles at the first launch).
"""

from __future__ import annotations

import dataclasses
import dis
import inspect
from typing import Any

from ..core.errors import SignatureError
from .kernel import CudaCSource, Kernel, NumbaSource
from .signature import Param, check_declaration, parse_cuda_declaration, parse_grcuda_signature


def _annotate(name: str, params: tuple[Param, ...], const: Any, out: Any,
              declared_const: set[str], typed: bool) -> dict[str, str]:
    const_set, out_set = set(_names(const, name, "const")), set(_names(out, name, "out"))
    by_name = {p.name: p for p in params}
    for label, names in (("const", const_set), ("out", out_set)):
        unknown = sorted(names - set(by_name))
        if unknown:
            raise SignatureError(
                f"kernel '{name}': {label}={unknown} names no parameter; parameters are "
                f"{', '.join(by_name)}"
            )
        if typed:
            scalars = sorted(n for n in names if not by_name[n].is_array)
            if scalars:
                raise SignatureError(
                    f"kernel '{name}': {label} applies to arrays, but {scalars} are scalars"
                )
    both = sorted(const_set & out_set)
    if both:
        raise SignatureError(f"kernel '{name}': {both} cannot be both const and out")
    clash = sorted(out_set & declared_const)
    if clash:
        raise SignatureError(
            f"kernel '{name}': {clash} are declared const in the source and cannot be out"
        )
    modes = {}
    for p in params:
        if p.name in const_set or p.name in declared_const:
            modes[p.name] = "r"
        elif p.name in out_set:
            modes[p.name] = "w"
        elif not typed or p.is_array:
            modes[p.name] = "rw"
    return modes


def _names(value: Any, kernel: str, option: str) -> list[str]:
    """The parameter names an option (``const=``, ``out=``) gives: a name or names."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    try:
        names = list(value)
    except TypeError:
        names = [value]
    if not all(isinstance(n, str) for n in names):
        raise SignatureError(f"kernel '{kernel}': {option}= takes a parameter name or a list "
                             f"of names, not {value!r}")
    return names


def _numba_kernel(fn: Any, const: Any, out: Any, name: str | None) -> Kernel:
    py_func = getattr(fn, "py_func", None) or getattr(fn, "fn", None) or fn
    if not callable(py_func):
        raise TypeError(f"asyncgpu.kernel expects a function or a Numba kernel, got {fn!r}")
    dispatcher = fn if py_func is not fn else None
    if getattr(dispatcher, "_device", False) or getattr(
        getattr(dispatcher, "targetoptions", {}), "get", lambda *_: False
    )("device"):
        raise SignatureError(f"'{py_func.__name__}' is a device function, not a kernel")
    try:
        signature = inspect.signature(py_func)
    except (TypeError, ValueError):     # (a builtin, a class without a Python signature)
        raise SignatureError(f"asyncgpu.kernel expects a function or a Numba kernel, got "
                             f"{fn!r}, whose parameters cannot be read") from None
    if _returns_a_value(py_func):
        # (Numba refuses it when it compiles for the GPU, at the first launch; its simulator
        # runs it, so the sim backend would take what the GPU refuses)
        raise SignatureError(f"kernel '{py_func.__name__}' returns a value; a CUDA kernel "
                             "returns nothing (Numba: \"CUDA kernel must have void return "
                             "type\"): write its results into an array argument")
    params = []
    for p in signature.parameters.values():
        if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            raise SignatureError(
                f"kernel '{py_func.__name__}': parameter '{p.name}' must be positional "
                "(no *args, **kwargs or keyword-only parameters)"
            )
        params.append(Param(p.name, is_array=False, dtype=None, const=False, ctype="any"))
    kname = name or py_func.__name__
    modes = _annotate(kname, tuple(params), const, out, set(), typed=False)
    return Kernel._create(kname, tuple(params), modes, NumbaSource(py_func, dispatcher), False)


def _returns_a_value(fn: Any) -> bool:
    """Whether Python function ``fn`` has a ``return`` of something other than ``None`` (a
    bare ``return``, as a kernel's early exit, returns None)."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return False
    previous = None
    for ins in dis.get_instructions(code):
        if ins.opname == "RETURN_CONST" and ins.argval is not None:
            return True
        if ins.opname == "RETURN_VALUE" and not (
                previous is not None and previous.opname == "LOAD_CONST"
                and previous.argval is None):
            return True
        previous = ins
    return False


def kernel(fn: Any = None, *, const: Any = (), out: Any = (), sim: Any = None,
           name: str | None = None, elementwise: bool | str = False,
           broadcast: Any = (), grid_offset: tuple[str, str] | None = None,
           grid_stride: bool = False) -> Any:
    """Wrap a kernel so that its launches are scheduled asynchronously.

    Use as a decorator above ``@cuda.jit`` (or on a plain Python kernel function, which is
    compiled with ``cuda.jit``), or call it on a CuPy ``RawKernel``::

        @ag.kernel(const=["x"])
        @cuda.jit
        def square(x, y, n): ...

    Parameters
    ----------
    fn:
        A Numba ``@cuda.jit`` kernel, a Python function, a CuPy ``RawKernel`` or a
        :class:`Kernel` (re-annotated).
    const:
        Names of array parameters the kernel only reads. Readers of the same array run
        concurrently.
    out:
        Names of array parameters the kernel only writes (every element it is given); their old
        contents are not needed.
    sim:
        For a CuPy ``RawKernel``: a Python twin that the ``sim`` backend runs instead (see
        :func:`cuda_kernel`).
    name:
        The name used in messages and traces (default: the function's name).
    elementwise:
        Declares that the launch may be split into chunks (``memory="explicit"``: a large
        host-to-device copy then overlaps the kernel, chunk by chunk; see
        ``asyncgpu.runtime.chunks``).
        The contract: every array argument is split along axis 0 into the same chunks (so all
        have the same length along axis 0 and are C-contiguous), and the kernel computes the
        element(s) at index ``i`` of axis 0 from index ``i`` only (no reductions, neighbours
        or scatter), covering its arrays by a grid-stride loop or by a grid of at least one
        thread per element. ``True``: the kernel takes its extent from the arrays
        (``x.shape[0]``, ``x.size``); a parameter name (``elementwise="n"``): that integer
        argument is the element count along axis 0, and each chunk gets its own length there.
        Other scalar arguments, and the launch configuration, are passed unchanged to every
        chunk (a grid that covers the whole array covers each chunk). Off by default: never
        assumed.
    broadcast:
        With ``elementwise``: names of const array parameters that every chunk gets whole
        instead of split (weights, lookup tables: ``score(x, w, r)`` computing row ``i`` of
        ``r`` from row ``i`` of ``x`` and all of ``w``). They need not share the other arrays'
        length along axis 0.
    grid_offset:
        Declares that the launch's grid may be cut into consecutive block ranges launched one
        after another (a tenant's or a regulation plan's split; see ``asyncgpu.tenant``), for
        kernels that are not element-wise: grid-stride loops over rows, reductions into
        per-block outputs, stencils. ``grid_offset=("first", "total")`` names two integer
        scalar parameters. The contract: a launch on a grid of ``(G, ...)`` blocks with
        ``first=f`` and ``total=T`` behaves as blocks ``f`` to ``f + G - 1`` of a grid of ``T``
        blocks in x, so the kernel computes its block index as ``blockIdx.x + first`` and the
        grid's block count (a grid-stride loop's stride) from ``total``, never from
        ``gridDim.x``. Launch it with the whole launch's values, normally ``first=0`` and
        ``total=G``: a whole launch passes them unchanged, and each piece of a split one gets
        ``first`` raised by its first block and ``total`` unchanged. Not with ``elementwise``.
        None by default.
    grid_stride:
        With ``grid_offset``: declares that the kernel's answer is the same on a grid of any
        size (it covers its work with a grid-stride loop whose stride it takes from
        ``total``), so the pieces of a whole launch (``first=0``) may each run on the
        launch's whole grid, as consecutive parts of a grid ``k`` times larger: piece ``i``
        gets ``first = i * G`` and ``total = k * G``. A launch whose grid the device holds at
        once gains nothing from pieces of its blocks (each lasts as long as the launch); its
        pieces on the whole grid each do a ``k``-th of the work. Not for kernels whose
        answer depends on the grid (per-block outputs). False by default.

    Returns
    -------
    Kernel
        Launch it with ``k[blocks, threads](*args)`` or ``k[blocks, threads, shared_bytes]``.

    Raises
    ------
    SignatureError
        An annotation names no parameter, or a parameter is both const and out; or
        ``elementwise``, ``grid_offset`` or ``grid_stride`` cannot hold (see
        :func:`asyncgpu.runtime.chunks.check_annotation`, ``check_grid_offset`` and
        ``check_grid_stride``).
    """
    if fn is None:
        return lambda f: kernel(f, const=const, out=out, sim=sim, name=name,
                                elementwise=elementwise, broadcast=broadcast,
                                grid_offset=grid_offset, grid_stride=grid_stride)
    if isinstance(fn, Kernel):
        if isinstance(fn.source, CudaCSource):
            source = fn.source if sim is None else dataclasses.replace(fn.source, sim=sim)
            k = _c_kernel(source, fn.params, const, out, name or fn.name)
        else:
            _no_twin(fn.name, sim)
            k = _numba_kernel(fn.source.dispatcher or fn.source.py_func, const, out,
                              name or fn.name)
    elif hasattr(fn, "code") and hasattr(fn, "name") and type(fn).__module__.startswith("cupy"):
        source = CudaCSource(fn.code, fn.name, tuple(getattr(fn, "options", ()) or ()), fn, sim)
        k = _c_kernel(source, parse_cuda_declaration(fn.code, fn.name), const, out, name)
    else:
        _no_twin(name or getattr(fn, "__name__", repr(fn)), sim)
        k = _numba_kernel(fn, const, out, name)
    return _splittable(k, elementwise, broadcast, grid_offset, grid_stride)


def _no_twin(name: str, sim: Any) -> None:
    if sim is not None:
        raise SignatureError(f"kernel '{name}' is a Numba kernel: the sim backend runs it "
                             "itself in Numba's simulator; sim= is for CUDA C kernels, drop it")


def _splittable(k: Kernel, elementwise: bool | str, broadcast: Any, grid_offset: Any,
                grid_stride: Any) -> Kernel:
    from .chunks import check_annotation, check_broadcast, check_grid_offset, check_grid_stride

    k.elementwise = check_annotation(k, elementwise)
    k.broadcast = check_broadcast(k, broadcast)
    k.grid_offset = check_grid_offset(k, grid_offset)
    k.grid_stride = check_grid_stride(k, grid_stride)
    return k


def cuda_kernel(source: str, name: str, signature: str | None = None, *, const: Any = (),
                out: Any = (), sim: Any = None, options: tuple[str, ...] = (),
                elementwise: bool | str = False, broadcast: Any = (),
                grid_offset: tuple[str, str] | None = None, grid_stride: bool = False
                ) -> Kernel:
    """A CUDA C kernel from source, scheduled like any other kernel.

    ``const T*`` parameters are read-only without annotation. A GrCUDA-style ``signature``
    (``"const pointer x, pointer y, sint32 n"``) may replace the declaration's types.

    Parameters
    ----------
    source:
        CUDA C source declaring ``extern "C" __global__ void <name>(...)``.
    name:
        The kernel's name in the source.
    signature:
        Optional GrCUDA signature string; it must have as many parameters as the declaration.
    const, out:
        Extra access annotations by parameter name (see :func:`kernel`).
    sim:
        A CPU twin for the ``sim`` backend: a Numba ``@cuda.jit`` kernel with the same
        parameters (run in Numba's simulator with the same launch configuration), or a plain
        function called once per launch with NumPy arrays (``const`` ones read-only) and the
        scalars converted to their C types. Without it the ``sim`` backend cannot run the kernel.
    options:
        NVRTC options (``cuda`` backend), e.g. ``("-use_fast_math",)``.
    elementwise:
        The name of the integer parameter holding the element count (``elementwise="n"``),
        declaring the chunking contract of :func:`kernel`; ``True`` is refused because raw
        pointers carry no extent.
    broadcast:
        With ``elementwise``: const array parameters every chunk gets whole (see
        :func:`kernel`).
    grid_offset:
        The names of the integer parameters holding the launch's first block and the whole
        grid's block count (``grid_offset=("first", "total")``), declaring the contract of
        :func:`kernel`: the kernel's block index is ``blockIdx.x + first`` and its grid's
        block count ``total``. Its ``sim=`` twin, if any, must be a ``@cuda.jit`` kernel (a
        piece is a part of the grid, which a plain function does not see).
    grid_stride:
        With ``grid_offset``: the kernel's answer does not depend on its grid's size, so a
        whole launch's pieces may each run on its whole grid (see :func:`kernel`).

    Returns
    -------
    Kernel

    Raises
    ------
    SignatureError, CompileError
        The declaration cannot be parsed or disagrees with ``signature``; the kernel is not in
        the source (the compiler log is in the message when compilation fails).
    """
    for what, value in (("source", source), ("name", name)):
        if not isinstance(value, str):
            raise TypeError(f"asyncgpu.cuda_kernel: {what} must be a str (the CUDA C source, "
                            f"then the name of its extern \"C\" __global__ kernel); got "
                            f"{type(value).__name__} {value!r:.60}")
    params = parse_cuda_declaration(source, name, strict=signature is None)
    if signature is not None:
        sig = parse_grcuda_signature(signature)
        if len(sig) != len(params):
            raise SignatureError(
                f"kernel '{name}' has {len(params)} parameters, signature declares {len(sig)}"
            )
        for i, (d, s) in enumerate(zip(params, sig)):
            if d.is_array != s.is_array:
                raise SignatureError(
                    f"kernel '{name}': parameter {i} '{d.name}' is "
                    f"{'a pointer' if d.is_array else 'a scalar'} in the source but "
                    f"{'a pointer' if s.is_array else 'a scalar'} in the signature"
                )
            # (a pointer's elements too: float64 arrays for a 'float*' would be read as floats)
            if (d.dtype is not None and s.dtype is not None
                    and (d.dtype.itemsize != s.dtype.itemsize
                         or (d.dtype.kind == "f") != (s.dtype.kind == "f"))):
                what = "elements of " if d.is_array else ""
                raise SignatureError(
                    f"kernel '{name}': parameter {i} '{d.name}' is '{d.ctype}' "
                    f"({what}{d.dtype.itemsize} bytes) in the source but '{s.ctype}' "
                    f"({what}{s.dtype.itemsize} bytes, {s.dtype.name}) in the signature; the "
                    f"kernel would read the wrong bytes: declare it as the source does"
                )
        params = tuple(
            Param(d.name, d.is_array, s.dtype if s.dtype is not None else d.dtype,
                  d.const or s.const, d.ctype)
            for d, s in zip(params, sig)
        )
        out = list(_names(out, name, "out")) + [d.name for d, s in zip(params, sig)
                                                 if getattr(s, "out", False)]
    src = CudaCSource(source, name, tuple(options), None, sim)
    return _splittable(_c_kernel(src, params, const, out, None), elementwise, broadcast,
                       grid_offset, grid_stride)


def _c_kernel(source: CudaCSource, params: tuple[Param, ...], const: Any, out: Any,
              name: str | None) -> Kernel:
    declared = {p.name for p in params if p.is_array and p.const}
    kname = name or source.name
    check_declaration(source.code, source.name, params)
    _check_twin(kname, source, params)
    modes = _annotate(kname, params, const, out, declared, typed=True)
    return Kernel._create(kname, params, modes, source, True)


def _check_twin(name: str, source: CudaCSource, params: tuple[Param, ...]) -> None:
    """Refuse, where the kernel is defined, a ``sim=`` twin that cannot take the kernel's
    arguments (it would fail only when a launch runs, as a fault at the next synchronize)."""
    twin = source.sim
    if twin is None:
        return
    if isinstance(twin, Kernel):
        raise SignatureError(
            f"kernel '{name}': its sim= twin '{twin.name}' is an asyncgpu kernel; pass the "
            "function it wraps (the @cuda.jit kernel, or a NumPy function) instead")
    function = getattr(twin, "py_func", None) or getattr(twin, "fn", None) or twin
    if not callable(function):
        raise SignatureError(
            f"kernel '{name}': its sim= twin is a {type(twin).__name__}, not a function; pass "
            "a Python function or a @cuda.jit kernel taking the kernel's arguments")
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):      # (a builtin or a callable without one: trusted)
        return
    try:
        signature.bind(*[p.name for p in params])
    except TypeError as exc:
        names = ", ".join(p.name for p in params)
        raise SignatureError(
            f"kernel '{name}': its sim= twin {getattr(function, '__name__', function)!r} "
            f"cannot take the kernel's {len(params)} arguments ({names}): {exc}"
        ) from None

