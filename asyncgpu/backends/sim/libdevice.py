"""``numba.cuda.libdevice`` as a simulated kernel sees it: computed, or refused by name.

Numba's ``libdevice`` module holds stubs for the device's math library (``libdevice.sinf``,
``libdevice.exp10`` ...) whose Python bodies are docstrings only: a simulated kernel that
called one got None, stored NaN into a float array, and went on with no error. During a launch
the simulator's threads see here, in place of each stub, the function the device computes
where NumPy computes it the same way (in the declared precision: an argument converted to the
declared type, ``sinf`` of a float32 a float32, ``sin`` a float64; IEEE answers, no warnings),
and for every other one (the fast approximations, the explicit rounding modes, the bit
tricks, the conversions, those returning through a pointer) a function that raises
``NotImplementedError`` naming it, which faults the launch. Any other thread keeps Numba's
stubs (the kernel's module globals are the whole process's).

:func:`stand_in` maps what a kernel reaches by name (the module, or a stub imported from it) to
what ``asyncgpu.backends.sim.numba_sim`` binds in its place for the launch.

Example::

    libdevice.sinf(np.float32(1.0))      # in a simulated kernel: np.float32(0.84147096)
"""

from __future__ import annotations

import functools
import math
import types
from typing import Any, Callable

import numpy as np

from ...runtime.cupy_arithmetic import fused_multiply_add
from . import ieee_math


def _fdim(x: Any, y: Any) -> Any:
    """``x - y`` where it is positive (or NaN), else +0."""
    return x - y if x > y or x != x or y != y else type(x)(0)


def _round(x: Any) -> Any:
    """C's ``round``: half away from zero (NumPy's rounds half to even)."""
    t = np.trunc(x)
    return t + np.copysign(1, x) if abs(x - t) >= 0.5 else t


def _scalar(fn: Callable[[float], float]) -> Callable[[Any], Any]:
    """Python's ``fn`` of one float in double precision, NaN where it raises."""
    def f(x: Any) -> Any:
        try:
            return fn(float(x))
        except (ValueError, OverflowError):
            return math.nan
    return f


#: libdevice's functions (the float64 name; the float32 one has an ``f`` suffix) and how NumPy
#: computes them on arguments of the declared types, as the device does.
_COMPUTED: dict[str, Callable[..., Any]] = {
    "acos": np.arccos, "acosh": np.arccosh, "asin": np.arcsin, "asinh": np.arcsinh,
    "atan": np.arctan, "atan2": np.arctan2, "atanh": np.arctanh, "cbrt": np.cbrt,
    "ceil": np.ceil, "copysign": np.copysign, "cos": np.cos, "cosh": np.cosh,
    "erf": _scalar(math.erf), "erfc": _scalar(math.erfc), "exp": np.exp, "exp2": np.exp2,
    "exp10": lambda x: np.power(10.0, np.float64(x)), "expm1": np.expm1, "fabs": np.fabs,
    "fdim": _fdim, "floor": np.floor, "fma": fused_multiply_add, "fmax": np.fmax,
    "fmin": np.fmin, "fmod": np.fmod, "hypot": np.hypot, "lgamma": ieee_math.MODULE.lgamma,
    "tgamma": ieee_math.MODULE.gamma, "log": np.log, "log10": np.log10, "log1p": np.log1p,
    "log2": np.log2, "pow": np.power, "powi": np.power, "rint": np.rint, "nearbyint": np.rint,
    "round": _round, "rsqrt": lambda x: 1.0 / np.sqrt(np.float64(x)),
    "rcbrt": lambda x: 1.0 / np.cbrt(np.float64(x)), "sin": np.sin, "sinh": np.sinh,
    "sqrt": np.sqrt, "tan": np.tan, "tanh": np.tanh, "trunc": np.trunc, "ldexp": np.ldexp,
    "scalbn": np.ldexp, "remainder": ieee_math.remainder, "nextafter": np.nextafter,
    # (signed integers: in their declared width, wrapping as the device's do; Numba declares
    # the unsigned ones' arguments signed, so they are refused)
    "abs": abs, "llabs": abs, "min": min, "max": max, "llmin": min, "llmax": max,
}


def _convert(dtype: np.dtype) -> Callable[[Any], Any]:
    """A value converted to an argument of ``dtype`` as Numba converts it (an integer wraps to
    the width)."""
    if dtype.kind in "iu":
        bits = dtype.itemsize * 8

        def to_int(v: Any) -> Any:
            if isinstance(v, (float, np.floating)):
                v = math.trunc(v) if math.isfinite(v) else 0
            return dtype.type(int(v) & ((1 << bits) - 1)) if dtype.kind == "u" else \
                dtype.type(((int(v) + (1 << (bits - 1))) & ((1 << bits) - 1)) - (1 << (bits - 1)))
        return to_int
    return dtype.type


def _computed(name: str, fn: Callable[..., Any], retty: Any, argtys: list[Any]
              ) -> Callable[..., Any]:
    converts = [_convert(np.dtype(str(t))) for t in argtys]
    result = _convert(np.dtype(str(retty)))

    def f(*args: Any) -> Any:
        with np.errstate(all="ignore"):
            return result(fn(*(c(a) for c, a in zip(converts, args))))
    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"``libdevice.{name}`` as the device computes it"
    return f


def _refused(name: str) -> Callable[..., Any]:
    def f(*args: Any) -> Any:
        raise NotImplementedError(
            f"numba.cuda.libdevice.{name} is not simulated by asyncgpu's sim backend (its "
            "answer could differ from the GPU's, and Numba's simulator returns None for it); "
            "use the math module's function or a cuda intrinsic where one computes it, or run "
            "this kernel on the cuda backend")
    f.__name__ = f.__qualname__ = name
    return f


def _implementation(name: str, retty: Any, args: list[Any]) -> Callable[..., Any]:
    """What the simulator's threads call for libdevice's ``name``."""
    if any(a.is_ptr for a in args):
        return _refused(name)
    base = name
    if name not in _COMPUTED and name.endswith("f") and name[:-1] in _COMPUTED:
        base = name[:-1]
    fn = _COMPUTED.get(base)
    if fn is None or (base != name and str(retty) != "float32"):
        return _refused(name)
    return _computed(name, fn, retty, [a.ty for a in args])


@functools.lru_cache(maxsize=1)
def _tables() -> tuple[Any, types.ModuleType, dict[int, Any]]:
    from numba.cuda import libdevice, libdevicefuncs

    impls = {name[5:]: _implementation(name[5:], retty, args)
             for name, (retty, args) in libdevicefuncs.functions.items()}

    class _Libdevice(types.ModuleType):
        """What a kernel's module sees as ``libdevice`` during a launch: the simulated
        functions in the simulator's threads, Numba's stubs in every other thread."""

        def __getattr__(self, attr: str) -> Any:
            if ieee_math.in_kernel() and attr in impls:
                return impls[attr]
            return getattr(libdevice, attr)

    def switch(attr: str) -> Callable[..., Any]:
        stub, impl = getattr(libdevice, attr), impls[attr]

        def fn(*args: Any) -> Any:
            return (impl if ieee_math.in_kernel() else stub)(*args)
        fn.__name__ = fn.__qualname__ = attr
        fn.__doc__ = stub.__doc__
        return fn

    by_id = {id(libdevice): _Libdevice("libdevice")} | {
        id(getattr(libdevice, attr)): switch(attr) for attr in impls
        if hasattr(libdevice, attr)}
    return libdevice, by_id[id(libdevice)], by_id


def shared(holder: Any) -> bool:
    """Whether ``holder`` is Numba's ``libdevice`` module itself (the whole process's: its
    functions are never rebound)."""
    return holder is _tables()[0]


def stand_in(value: Any) -> Any:
    """What to bind in place of ``value`` (Numba's ``libdevice``, or one of its stubs) during a
    launch, else None."""
    return _tables()[2].get(id(value))


def install() -> None:
    """Give the simulator's ``cuda`` module a ``libdevice`` (a kernel's ``cuda.libdevice.sinf``:
    the simulator's has none, and the kernel faulted with an AttributeError)."""
    from numba.cuda.simulator.kernelapi import FakeCUDAModule

    FakeCUDAModule.libdevice = property(lambda self: _tables()[1])  # type: ignore[attr-defined]
