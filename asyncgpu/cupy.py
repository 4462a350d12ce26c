"""``asyncgpu.cupy``: CuPy's functions as asynchronously scheduled nodes.

Every public function of CuPy (``cupy.sqrt``, ``cupy.matmul``, ``cupy.linalg.solve``,
``cupy.fft.fft``, ...) is available here under the same name, without a hand-written list: a
module ``__getattr__`` wraps the function of the same name. On ``cuda`` that is CuPy's; on
``sim`` the names are CuPy's too (a checked-in description of CuPy's namespace, see
``asyncgpu.runtime.cupy_surface``) and NumPy computes them, so a name or a keyword CuPy lacks
fails on ``sim`` as it would on the GPU. Each call is a node of the DAG: its result and the
:class:`asyncgpu.Array` arguments it writes (``out=``, a ufunc's positional outputs, in-place
targets; every argument of a call not known to be pure: ``asyncgpu.runtime.effects``) are
writes, its other array arguments reads, other arguments pass through, and it returns at once
with :class:`asyncgpu.Array` results::

    import asyncgpu as ag, asyncgpu.cupy as acp
    c = acp.sqrt(a) + b              # two nodes
    d = acp.matmul(a2, b2)           # independent of c: may run on another stream
    acp.multiply(c, 2, out=c)        # in place: a write of c
    s = float(c.sum() + d.sum())     # the host blocks here, only on what it needs

Random numbers come from an explicit generator, ``g = acp.random.default_rng(seed)``; its draws
are ordered among themselves (they share its state) and with everything else by their arrays.

Not nodes: constants and types (``acp.float32``, ``acp.pi``, ``acp.newaxis``) are CuPy's, which
are NumPy's; metadata functions (``result_type``, ``can_cast``, ``shape``, ``ndim``, ``size``, ``isscalar``,
...) look only at shapes and dtypes and run at once; ``asarray`` copies host data into the
runtime's memory and views foreign device arrays without a copy, ``array`` copies (unless
``copy=False`` and nothing needs converting; see :func:`asyncgpu.asarray`), and ``asanyarray``,
``require``, ``asarray_chkfinite``, which CuPy builds on them; the functions that
make an array of host data (``loadtxt``, ``genfromtxt``, ``load``, ``fromfile``, ``fromiter``,
``fromfunction``, ``frombuffer``, ``fromstring``) run NumPy's once, at the call, and copy its
result in, as CuPy does; ``asnumpy`` is a host read.
"""

from __future__ import annotations

import functools
import operator
import types
from typing import Any

import numpy as np

from .runtime import array_modules
from .runtime import cupy_surface as _cupy_surface
from .runtime.cupy_refusals import check_ufunc_method, refuse_sequences
from .runtime.dtypes import refuse_other_order
from .runtime.array import Array
from .runtime.library import dispatch, function_resolver
from .runtime.operators import already

_METADATA = frozenset({
    "result_type", "can_cast", "min_scalar_type", "promote_types", "common_type", "shape",
    "ndim", "size", "isscalar", "iscomplexobj", "isrealobj",
})


def _backend() -> str:
    from . import backends
    from .runtime.current import current_options

    return backends.resolve(current_options())


class Function:
    """A library function whose calls are scheduled as nodes (see the module docstring)."""

    __slots__ = ("path", "__name__", "__qualname__", "__dict__")

    def __init__(self, path: str, doc: str | None, sim: Any = None,
                 check: Any = None, ufunc: bool = False) -> None:
        self.path = path
        self.__name__ = self.__qualname__ = path.rsplit(".", 1)[-1]
        self.__doc__ = doc
        # on sim: what NumPy runs for CuPy's name, and CuPy's signature check (None on cuda)
        self._sim, self._check, self._ufunc = sim, check, ufunc

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._check is not None:
            self._check(args, kwargs)
            refuse_sequences(self.path, args, self._ufunc)
        return dispatch(self.path, args, kwargs)

    def __getattr__(self, name: str) -> Any:
        # ufunc methods (``acp.add.reduce``, ``acp.add.at``) are nodes too
        if name.startswith("_"):
            raise AttributeError(name)
        backend = _backend()
        if self._ufunc and backend != "cuda":
            _cupy_surface.ufunc_attribute(self.path, name)
        owner = self._sim if self._sim is not None and backend != "cuda" \
            else function_resolver(self.path)(backend)
        attr = getattr(owner, name)
        if not callable(attr):
            return attr
        # (on sim, a method CuPy's ufunc lacks, or takes otherwise, is refused at the call)
        check = (functools.partial(check_ufunc_method, self.path, name)
                 if self._ufunc and backend != "cuda" else None)
        if owner is self._sim:
            return Function(f"{self.path}.{name}", attr.__doc__, sim=attr, check=check)
        return Function(f"{self.path}.{name}", attr.__doc__, check=check)

    def __repr__(self) -> str:
        return f"<asyncgpu.cupy function {self.path}>"


def _shape_only(obj: Any) -> Any:
    if isinstance(obj, Array):
        return np.lib.stride_tricks.as_strided(np.zeros(1, obj.dtype), obj.shape,
                                               (0,) * obj.ndim)
    if type(obj) in (list, tuple):
        return type(obj)(_shape_only(o) for o in obj)
    return obj


def _metadata_function(fn: Any) -> Any:
    def run(*args: Any, **kwargs: Any) -> Any:
        return fn(*_shape_only(args), **{k: _shape_only(v) for k, v in kwargs.items()})
    run.__name__ = run.__qualname__ = fn.__name__
    run.__doc__ = f"NumPy's ``{fn.__name__}`` on the arrays' shapes and dtypes (no node)."
    return run


class Namespace(types.ModuleType):
    """A sub-namespace (``linalg``, ``fft``, ...) resolved like the top level."""

    def __init__(self, prefix: str) -> None:
        super().__init__(f"asyncgpu.cupy.{prefix.rstrip('.')}")
        self._prefix = prefix

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _attribute(self._prefix, name)


_cache: dict[tuple[str, str], Any] = {}


def _attribute(prefix: str, name: str) -> Any:
    backend = _backend()
    key = (backend, prefix + name)
    hit = _cache.get(key)
    if hit is not None:
        return hit
    if not prefix and name == "testing":
        # CuPy's array comparisons, taking asyncgpu and NumPy arrays alike
        from .runtime import cupy_testing as _cupy_testing
        return _cupy_testing
    if backend != "cuda":
        value = _sim_attribute(prefix[:-1], name)
        _cache[key] = value
        return value
    mod = array_modules.backend_module(backend)
    for part in prefix.split(".")[:-1]:
        mod = getattr(mod, part)
    if prefix == "random.":
        from .runtime.cupy_random import attribute
        value = attribute(name, mod)
    else:
        try:
            obj = getattr(mod, name)
        except AttributeError:
            raise AttributeError(
                f"asyncgpu.cupy has no attribute '{prefix}{name}': the {mod.__name__} module "
                "of this backend has none"
            ) from None
        if isinstance(obj, types.ModuleType):
            value = Namespace(prefix + name + ".")
        elif not prefix and name in _METADATA:
            value = _metadata_function(obj)
        elif isinstance(obj, type) or not callable(obj):
            value = obj
        else:
            value = Function(prefix + name, getattr(obj, "__doc__", None))
    _cache[key] = value
    return value


def _sim_attribute(prefix: str, name: str) -> Any:
    """``asyncgpu.cupy.<prefix>.<name>`` on ``sim``: CuPy's name, computed by NumPy."""
    entry = _cupy_surface.lookup(prefix, name)
    path = f"{prefix}.{name}" if prefix else name
    kind = entry["kind"]
    if prefix == "random" and name in ("default_rng", "Generator"):
        from .runtime.cupy_random import attribute
        return attribute(name, None)
    if kind == "module":
        if not entry.get("walked"):
            raise _cupy_surface.unavailable(path, " (a module of CuPy's own)")
        return Namespace(path + ".")
    if kind in ("function", "ufunc"):
        if prefix == "random":
            from .runtime.cupy_random import refuse_global
            raise refuse_global(name)
        fn = _cupy_surface.numpy_function(path)
        if not prefix and name in _METADATA:
            return _metadata_function(fn)
        return Function(path, getattr(fn, "__doc__", None), sim=fn,
                        check=_cupy_surface.checker(path, entry), ufunc=kind == "ufunc")
    return _cupy_surface.sim_value(prefix, name, entry)


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    return _attribute("", name)


ndarray = Array


_ORDERS = ("C", "F", "A", "K")


def _layout(order: Any, where: str) -> str:
    """``order`` as one of C, F, A, K (None is K, as in CuPy); TypeError otherwise."""
    if order is None:
        return "K"
    layout = order.upper() if isinstance(order, str) else None
    if layout not in _ORDERS:
        raise TypeError(f"{where}: order must be 'C', 'F', 'A' or 'K' (or None), as in CuPy; "
                        f"got {order!r}")
    return layout


def _to_device(obj: Any, dtype: Any, copy: Any, order: Any, subok: Any, ndmin: Any,
               where: str) -> Array:
    """CuPy's ``array`` (and ``asarray``, with ``copy`` False): an Array of ``obj`` with
    ``dtype``, laid out by ``order``, with ``ndmin`` dimensions at least; ``obj`` itself, or a
    view of it, where ``copy`` is false and it needs no conversion."""
    from .runtime.array import host_array
    from .runtime.interop import asarray as _asarray
    from .runtime.interop import is_foreign

    layout = _layout(order, where)
    if subok:
        raise NotImplementedError(f"{where}: subok=True is not supported (asyncgpu has no array "
                                  "subclasses; CuPy refuses it too)")
    try:
        ndmin = operator.index(ndmin)
    except TypeError:
        raise TypeError(f"{where}: ndmin must be an integer, got {ndmin!r}") from None
    if not isinstance(obj, Array) and is_foreign(obj):
        obj = _asarray(obj)          # a view of the producer's memory; copied below if asked
    if isinstance(obj, Array):
        # (a copy, a conversion or a change of layout is an ``astype`` node; ``copy=False``
        # gives the array itself where none is needed; a dtype of the other byte order is
        # refused, as CuPy's astype refuses it, where host data below is converted)
        refuse_other_order(dtype, where)
        if copy is False and not already(obj, dtype, layout):
            raise ValueError(f"{where}: unable to avoid a copy while creating an array as "
                             "requested (copy=False, but the dtype or order differs); pass "
                             "copy=None to copy only where needed")
        out = obj.astype(obj.dtype if dtype is None else dtype, order=layout, copy=bool(copy))
        if ndmin > out.ndim:
            out = out[(None,) * (ndmin - out.ndim)]      # a view, as CuPy gives
        return out
    data = np.array(obj, dtype=dtype, order=layout, ndmin=ndmin, copy=None)
    # Fortran order where CuPy gives it: asked for, or kept ('K', 'A') from a NumPy array in
    # Fortran order (CuPy's _array_default; a non-contiguous one is copied in C order, where
    # NumPy's 'K' keeps the order of its strides)
    fortran = data.flags.f_contiguous and not data.flags.c_contiguous and (
        layout == "F" or layout != "C" and isinstance(obj, np.ndarray) and obj.flags.fnc)
    return host_array(data, order="F" if fortran else "C")


def asarray(a: Any, dtype: Any = None, order: Any = None, *, copy: bool | None = None,
            blocking: bool = False) -> Array:
    """``a`` as an :class:`asyncgpu.Array`, as CuPy's ``asarray``: ``a`` itself if it is one
    of that ``dtype`` and ``order``; another library's device array viewed without a copy;
    host data copied into the runtime's memory (``order``: the copy's layout, ``'C'``,
    ``'F'``, or ``'K'``/``'A'``/None to keep a NumPy array's Fortran order; ``'A'`` copies an
    array in neither C nor Fortran order into C order, as CuPy's ``astype``). ``copy=True``
    always copies; ``copy=None`` and ``copy=False`` copy only where needed. ``blocking`` is
    accepted for CuPy's sake: host data has been copied when ``asarray`` returns."""
    return _to_device(a, dtype, copy, order, False, 0, "asyncgpu.cupy.asarray")


def array(obj: Any, dtype: Any = None, copy: bool = True, order: Any = "K", subok: bool = False,
          ndmin: int = 0, *, blocking: bool = False) -> Array:
    """A new array holding a copy of ``obj``, as CuPy's ``array``: an asyncgpu array is copied
    by a node, host data through the host. ``order`` lays the copy out (``'C'``, ``'F'``, or
    ``'K'``/``'A'`` to keep the input's order); ``ndmin`` prepends dimensions of length 1;
    ``copy=False`` returns ``obj`` itself (a view with ``ndmin``) where no conversion is
    needed. ``subok=True`` raises ``NotImplementedError``, as in CuPy. ``blocking`` is accepted
    for CuPy's sake: host data has been copied when ``array`` returns."""
    return _to_device(obj, dtype, copy, order, subok, ndmin, "asyncgpu.cupy.array")


def asanyarray(a: Any, dtype: Any = None, order: Any = None, *, copy: bool | None = None,
               blocking: bool = False) -> Array:
    """CuPy's ``asanyarray``, which is its ``asarray`` (CuPy has no array subclasses): see
    :func:`asarray`; host data, a NumPy array too, is copied into the runtime's memory."""
    return _to_device(a, dtype, copy, order, False, 0, "asyncgpu.cupy.asanyarray")


def asarray_chkfinite(a: Any, dtype: Any = None, order: Any = None) -> Array:
    """CuPy's ``asarray_chkfinite``: ``a`` as :func:`asarray` gives it (host data, a NumPy
    array too, copied in), checked to hold no NaN or infinity: ``ValueError`` at the call,
    which waits for the array's writers, as CuPy synchronizes to check it on the host."""
    out = asarray(a, dtype, order)
    if not bool(_attribute("", "isfinite")(out).all()):
        raise ValueError("array must not contain Infs or NaNs")
    return out


_REQUIREMENTS = {"C": "C", "C_CONTIGUOUS": "C", "CONTIGUOUS": "C", "F": "F",
                 "F_CONTIGUOUS": "F", "FORTRAN": "F", "O": "OWNDATA", "OWNDATA": "OWNDATA"}


def require(a: Any, dtype: Any = None, requirements: Any = None) -> Array:
    """CuPy's ``require``: ``a`` as :func:`array` with ``copy=None`` gives it (host data, a
    NumPy array too, copied in), C- or Fortran-contiguous (``'C'``, ``'F'``) or a copy of its
    own (``'O'``) as ``requirements`` ask; ``ValueError`` for another flag, as CuPy's."""
    where = "asyncgpu.cupy.require"
    if not requirements:
        try:
            return _to_device(a, dtype, None, None, False, 0, where)
        except TypeError:
            raise ValueError(f'Incorrect dtype "{dtype}" provided') from None
    try:
        wanted = {_REQUIREMENTS[x.upper()] for x in requirements}
    except KeyError:
        unknown = (set(requirements) - set(_REQUIREMENTS)).pop()
        raise ValueError(f'Incorrect flag "{unknown}" in requirements') from None
    if wanted >= {"C", "F"}:
        raise ValueError('Cannot specify both "C" and "F" order')
    order = "F" if "F" in wanted else "C" if "C" in wanted else "A"
    copy = True if "OWNDATA" in wanted else None
    try:
        return _to_device(a, dtype, copy, order, False, 0, where)
    except TypeError:
        raise ValueError(f'Incorrect dtype "{dtype}" provided') from None


def _from_host(name: str) -> Any:
    """CuPy's ``<name>``, ``asarray(numpy.<name>(*args, **kwargs))``: NumPy's function run
    once, at the call, on the host, and its result copied into the runtime's memory. Not a
    node: its input may be read once only (a generator, an open file), and a node's result
    would be inferred on ``sim`` by running the function first."""
    fn = getattr(np, name)

    def run(*args: Any, **kwargs: Any) -> Array:
        return _to_device(fn(*args, **kwargs), None, None, None, False, 0,
                          f"asyncgpu.cupy.{name}")

    run.__name__ = run.__qualname__ = name
    run.__doc__ = (f"``numpy.{name}`` run once on the host, its result copied into the "
                   "runtime's memory, as CuPy's (not a node).")
    return run


frombuffer = _from_host("frombuffer")
fromfile = _from_host("fromfile")
fromfunction = _from_host("fromfunction")
fromiter = _from_host("fromiter")
fromstring = _from_host("fromstring")
loadtxt = _from_host("loadtxt")
genfromtxt = _from_host("genfromtxt")


class NpzFile:
    """CuPy's ``NpzFile``: an ``.npz`` file :func:`load` opened, each array copied into the
    runtime's memory as it is read (``f["x"]``); a context manager, as NumPy's."""

    def __init__(self, npz_file: Any) -> None:
        self.npz_file = npz_file

    def __enter__(self) -> NpzFile:
        self.npz_file.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.npz_file.__exit__(*exc)

    def __getitem__(self, key: str) -> Array:
        return array(self.npz_file[key])

    def close(self) -> None:
        self.npz_file.close()


def load(file: Any, mmap_mode: Any = None, allow_pickle: Any = None) -> Any:
    """CuPy's ``load``: ``numpy.load`` run once, at the call, on the host (pickles refused
    unless ``allow_pickle``); an array copied into the runtime's memory, an ``.npz`` file an
    :class:`NpzFile` that copies each array as it is read, anything else as NumPy loads it."""
    obj = np.load(file, mmap_mode, False if allow_pickle is None else allow_pickle)
    if isinstance(obj, np.ndarray):
        return array(obj)
    if isinstance(obj, np.lib.npyio.NpzFile):
        return NpzFile(obj)
    return obj


def asnumpy(a: Any, stream: Any = None, order: str = "C", out: np.ndarray | None = None, *,
            blocking: bool = True) -> np.ndarray:
    """A host copy, as CuPy's ``asnumpy``: of an asyncgpu array :meth:`Array.get` (a host read
    that waits only for the writers of ``a``; ``order``, ``out`` as there); of host data
    ``numpy.asarray(a, order=order)``, copied into ``out`` if given. ``stream`` is accepted
    for CuPy's sake and not used: the runtime orders the copy itself. The copy has completed
    when ``asnumpy`` returns, also with ``blocking=False``."""
    if isinstance(a, Array):
        return a.get(stream, order, out, blocking)
    from .runtime.interop import is_foreign

    if is_foreign(a):
        return asarray(a).get(stream, order, out, blocking)
    host = np.asarray(a, order=order)
    if out is None:
        return host
    out[...] = host
    return out


def get_array_module(*args: Any) -> Any:
    """This module if any argument is an :class:`asyncgpu.Array`, else ``numpy`` (as CuPy
    answers ``numpy`` unless an argument is a device array)."""
    import sys

    if any(isinstance(a, Array) for a in args):
        return sys.modules[__name__]
    return np
