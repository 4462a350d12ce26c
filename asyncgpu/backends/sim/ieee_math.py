"""The ``math`` module a simulated kernel sees: IEEE answers where Python's ``math`` raises.

A Numba kernel calls ``math.log``, ``math.sqrt``, ``math.floor`` ... as the device's math
library computes them: ``log(0)`` is ``-inf``, ``sqrt(-1)`` and ``asin(2)`` are NaN,
``exp(1000)`` is ``inf``, ``floor(inf)`` is ``inf``. Numba's simulator runs the kernel's Python,
where Python's ``math`` raises ``ValueError`` or ``OverflowError`` for each of those, so a
kernel that computes a log of zero on the GPU failed on ``sim``. This module is a stand-in for
``math`` with the same names, the functions that raise computed by NumPy's ufuncs instead
(IEEE arithmetic, warnings silenced as the device gives none), in the argument's precision as
Numba's overloads are (a ``float32`` in, a ``float32`` out; an integer in, a ``float64`` out).
``floor``, ``ceil`` and ``trunc`` give a float, as Numba's do on the device (``-0.0`` and the
infinities kept; of an integer a float64, as Numba types them). ``nextafter``, ``erf`` and
``erfc`` of a float32 step and round in single precision; ``remainder``, ``ldexp`` and ``exp2``
give NaN or inf where Python's raise. A function Numba's CUDA target does not compile
(``math.cbrt``, ``math.factorial``: not in its typing registry) raises, naming it, as the GPU
refuses the kernel.

:func:`stand_in` maps what a kernel reaches by name (the module, or a function imported from
it) to what ``asyncgpu.backends.sim.numba_sim`` binds in its place for the launch: one that
answers as the stand-in in the simulator's threads and as Python's ``math`` in any other (the
kernel's module globals are shared with the host's threads).

Example::

    math.log(0.0)            # in a simulated kernel: -inf (Python's math raises ValueError)
"""

from __future__ import annotations

import math
import threading
import types
from typing import Any, Callable

import numpy as np

#: Python's ``math`` functions and the NumPy ufuncs that compute them as the device does.
_UFUNCS = {
    "sqrt": np.sqrt, "exp": np.exp, "expm1": np.expm1, "log": np.log, "log2": np.log2,
    "log10": np.log10, "log1p": np.log1p, "sin": np.sin, "cos": np.cos, "tan": np.tan,
    "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "sinh": np.sinh, "cosh": np.cosh,
    "tanh": np.tanh, "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh,
    "atan2": np.arctan2, "hypot": np.hypot, "fmod": np.fmod, "copysign": np.copysign,
    "fabs": np.fabs, "degrees": np.degrees, "radians": np.radians, "pow": np.power,
    "exp2": np.exp2, "nextafter": np.nextafter,
}
#: Rounding to a float (Numba's ``math.floor`` of a float is a float on the device).
_ROUNDING = {"floor": np.floor, "ceil": np.ceil, "trunc": np.trunc}


def _real(x: Any) -> Any:
    """``x`` as NumPy computes with it: a Python or NumPy integer as a float64 (Numba's math
    of an integer is double precision), a float as it is."""
    if isinstance(x, (bool, int, np.integer, np.bool_)):
        return np.float64(x)
    return x


def _ieee(name: str, ufunc: np.ufunc) -> Callable[..., Any]:
    def fn(*args: Any) -> Any:
        with np.errstate(all="ignore"):
            return ufunc(*(_real(a) for a in args))
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"``math.{name}`` as the device computes it (IEEE, NumPy's ``{ufunc.__name__}``)"
    return fn


def _rounding(name: str, ufunc: np.ufunc) -> Callable[..., Any]:
    def fn(x: Any) -> Any:
        with np.errstate(all="ignore"):
            return ufunc(_real(x))
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = (f"``math.{name}`` as a float, as Numba's on the device (of an integer a "
                  "float64, as Numba types it: cudamath's ``Math_unary_with_fp16``)")
    return fn


def _precision(x: Any, value: float) -> Any:
    """``value``, computed in double precision, in ``x``'s precision as Numba's overload
    returns it (a float32 of a float32 or half float, else a float64)."""
    return np.float32(value) if isinstance(x, (np.float32, np.float16)) else np.float64(value)


def _erf(which: str) -> Callable[[Any], Any]:
    """``erf`` and ``erfc`` (NumPy has neither): Python's, in double precision, rounded to the
    argument's precision (a float32 in, a float32 out, as Numba's ``erff``)."""
    base = getattr(math, which)

    def fn(x: Any) -> Any:
        return _precision(x, base(float(_real(x))))
    fn.__name__ = fn.__qualname__ = which
    return fn


def remainder(x: Any, y: Any) -> Any:
    """IEEE ``remainder``: NaN for a zero ``y`` or an infinite ``x`` (Python's raises), ``x``
    for an infinite ``y``; exact in either precision, so computed in double and rounded."""
    a, b = float(_real(x)), float(_real(y))
    if b == 0 or math.isinf(a) or a != a or b != b:
        value = math.nan
    else:
        value = a if math.isinf(b) else math.remainder(a, b)
    both32 = isinstance(x, np.float32) and isinstance(y, np.float32)
    return np.float32(value) if both32 else np.float64(value)


def ldexp(x: Any, i: Any) -> Any:
    """``x * 2**i`` in ``x``'s precision: inf where it overflows (Python's raises), ``i``
    converted to an int32 as Numba's ``ldexp(float, int32)`` takes it."""
    i = ((int(i) + 2**31) & 0xFFFFFFFF) - 2**31
    with np.errstate(all="ignore"):
        return np.ldexp(_real(x), i)


def frexp(x: Any) -> Any:
    """Python's ``frexp`` with the mantissa in ``x``'s precision."""
    m, e = math.frexp(float(_real(x)))
    return _precision(x, m), e


def _gamma(which: str) -> Callable[[Any], Any]:
    """``gamma`` and ``lgamma`` (NumPy has neither): Python's, with the device's answers where
    it raises: at the poles inf (``gamma`` of a zero keeps its sign), below them NaN for
    ``gamma``, overflow inf."""
    base = getattr(math, which)

    def fn(x: Any) -> Any:
        wide = np.float64(_real(x))
        try:
            value = base(float(wide))
        except OverflowError:
            value = math.inf
        except ValueError:             # (a pole, or -inf)
            if which == "lgamma":
                value = math.inf
            elif wide == 0:
                value = math.copysign(math.inf, wide)
            else:
                value = math.nan
        return np.float32(value) if isinstance(x, np.float32) else np.float64(value)
    fn.__name__ = fn.__qualname__ = which
    return fn


def _module() -> types.ModuleType:
    shim = types.ModuleType("math", "Python's math with the device's IEEE answers (asyncgpu)")
    shim.__dict__.update({k: v for k, v in vars(math).items() if not k.startswith("__")})
    for name, ufunc in _UFUNCS.items():
        setattr(shim, name, _ieee(name, ufunc))
    for name, ufunc in _ROUNDING.items():
        setattr(shim, name, _rounding(name, ufunc))
    shim.gamma, shim.lgamma = _gamma("gamma"), _gamma("lgamma")
    shim.erf, shim.erfc = _erf("erf"), _erf("erfc")
    shim.remainder, shim.ldexp, shim.frexp = remainder, ldexp, frexp
    compiled = _cuda_math()
    if compiled:
        for name, value in vars(math).items():
            if callable(value) and not name.startswith("_") and name not in compiled:
                setattr(shim, name, _uncompiled(name, compiled))
    return shim


def _cuda_math() -> frozenset[str]:
    """The ``math`` functions Numba's CUDA target compiles (its typing registry); empty where
    it cannot be read (``numba.cuda`` imported as the simulator): then none is refused."""
    try:
        from numba.cuda import cudamath
        return frozenset(fn.__name__ for fn, _ in cudamath.registry.globals
                         if getattr(fn, "__module__", None) == "math")
    except (ImportError, AttributeError):
        return frozenset()


def _uncompiled(name: str, compiled: frozenset[str]) -> Callable[..., Any]:
    """A ``math`` function Numba's CUDA target does not compile: the GPU refuses the kernel,
    so its call on ``sim`` fails the launch, naming it (Python's would have answered)."""
    def fn(*args: Any) -> Any:
        raise NotImplementedError(
            f"math.{name} is not compiled by Numba's CUDA target, so the GPU refuses this "
            f"kernel; compute it with the math functions it compiles ({', '.join(sorted(compiled))}"
            ") or numba.cuda.libdevice's")
    fn.__name__ = fn.__qualname__ = name
    return fn


MODULE = _module()


def _in_kernel() -> bool:
    """Whether this thread runs a simulated kernel's CUDA threads now (the simulator's threads
    carry their ``threadIdx``; a host thread has none)."""
    return getattr(threading.current_thread(), "threadIdx", None) is not None


in_kernel = _in_kernel


class _Math(types.ModuleType):
    """What a kernel's module sees as ``math`` during a launch: the stand-in's functions in
    the simulator's threads, Python's own in every other thread (the module's globals are the
    whole process's: a host thread running the same module's code meanwhile keeps its math)."""

    def __getattr__(self, name: str) -> Any:
        return getattr(MODULE if _in_kernel() else math, name)


def _switch(name: str) -> Callable[..., Any]:
    real, ieee = getattr(math, name), getattr(MODULE, name)

    def fn(*args: Any) -> Any:
        return (ieee if _in_kernel() else real)(*args)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = real.__doc__
    return fn


#: id of Python's ``math`` and of each of its functions the stand-in replaces -> what a
#: kernel's module sees in their place during a launch.
_BY_ID = {id(math): _Math("math")} | {
    id(value): _switch(name) for name, value in vars(math).items()
    if callable(value) and not name.startswith("_") and getattr(MODULE, name) is not value}


def stand_in(value: Any) -> Any:
    """What to bind in place of ``value`` (Python's ``math``, or one of its functions) during
    a launch, else None."""
    return _BY_ID.get(id(value))
