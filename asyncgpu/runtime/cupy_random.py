"""``asyncgpu.cupy.random``: random numbers from an explicit, seeded generator, as nodes.

A :class:`Generator` wraps the backend's generator (``cupy.random.default_rng`` on ``cuda``,
``numpy.random.default_rng`` on ``sim``). Its state is modelled as a one-byte array that every
draw reads and writes, so draws are ordered among themselves in program order (whatever streams
they land on) and each draw produces the same numbers as in a serial run; different generators
are independent and their draws may overlap. On ``cuda`` the generator is created by a node too,
so its state is initialized on one of the runtime's streams, never on the legacy default stream.

The values differ between backends (cuRAND's XORWOW against NumPy's PCG64): tests check shapes,
dtypes and statistics, not values. Module-level functions with a hidden global state
(``rand``, ``normal``, ``seed``, ...) are refused: their order could not be tracked.

Example::

    g = acp.random.default_rng(42)
    x = g.standard_normal((1000, 1000), dtype=np.float32)   # a node
    y = g.random(10)                                       # after x's draw
"""

from __future__ import annotations

import copy
from typing import Any, Callable

import numpy as np

from ..core.errors import ArgumentError
from . import array_modules
from . import cupy_surface as _cupy_surface
from .array import empty_array
from .current import current_runtime, foreign
from .library import dispatch


class Generator:
    """A seeded random generator whose draws are nodes (see the module docstring)."""

    def __init__(self, seed: Any = None) -> None:
        self._runtime = current_runtime()
        self._state = empty_array(1, np.uint8, 0)
        backend = self._runtime.backend.name
        if backend == "cuda":
            self._gen = dispatch(
                "random.default_rng", (seed,), {}, state=self._state,
                resolve=lambda b: array_modules.backend_module(b).random.default_rng)
        else:
            self._gen = np.random.default_rng(seed)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        gen = self._gen
        check = entry = None
        if self._runtime.backend.name != "cuda":
            # CuPy's Generator has fewer methods than NumPy's: sim offers CuPy's, with CuPy's
            # signatures, so that a draw that passes here runs on the GPU too (and one CuPy
            # takes runs here: uniform(..., dtype=np.float32))
            entry = _cupy_surface.generator_method(name)
            check = _cupy_surface.checker(f"random.Generator.{name}", entry, drop_self=True)

        def method(g: Any) -> Any:
            """What draws, from generator ``g``: its method, called as CuPy's on sim."""
            found = getattr(g, name)
            if entry is None:
                return found
            if name in _CONVERTED:
                found = _converted(found, name)
            return _cupy_surface.as_cupy_signature(found, entry, drop_self=True)

        if not callable(getattr(gen, name, None)):
            raise AttributeError(f"the {type(gen).__module__} generator has no method '{name}'")

        def draw(*args: Any, **kwargs: Any) -> Any:
            if check is not None:
                check(args, kwargs)
            if current_runtime() is not self._runtime:
                raise ArgumentError(
                    f"random.Generator.{name}: this generator {foreign(self._runtime)}")
            return dispatch(f"random.Generator.{name}", args, kwargs,
                            resolve=lambda b: method(gen), state=self._state,
                            inference=lambda: method(copy.deepcopy(gen)))

        draw.__name__ = name
        draw.__doc__ = getattr(getattr(gen, name), "__doc__", None)
        return draw


#: Draws CuPy makes in a float type and converts to any other ``dtype`` asked for, unchecked
#: (``random(3, np.float16)``, ``standard_exponential(3, np.int32)``; NumPy's take float32 and
#: float64 alone).
_CONVERTED = frozenset({"random", "standard_exponential"})


def _converted(found: Callable[..., Any], name: str) -> Callable[..., Any]:
    """NumPy's draw ``found`` (``size, dtype, ...``) giving any ``dtype`` as CuPy's does, and
    refusing a ``method`` of ``standard_exponential`` CuPy lacks."""
    def draw(size: Any = None, dtype: Any = np.float64, *rest: Any, **kwargs: Any) -> Any:
        if name == "standard_exponential":
            method = kwargs.pop("method", rest[0] if rest else "inv")
            rest = rest[1:]
            if method != "inv":
                raise NotImplementedError(f"cupy.random.Generator.standard_exponential: method "
                                          f"{method!r} is not supported; CuPy draws by 'inv'")
            kwargs["method"] = "inv"
        dtype = np.dtype(dtype)
        if dtype in (np.float32, np.float64):
            return found(size, dtype, *rest, **kwargs)
        return np.asarray(found(size, np.float64, *rest, **kwargs)).astype(dtype)
    return draw


def default_rng(seed: Any = None) -> Generator:
    """A new :class:`Generator` (``cupy.random.default_rng`` / ``numpy.random.default_rng``)."""
    return Generator(seed)


def refuse_global(name: str) -> AttributeError:
    """The error for ``asyncgpu.cupy.random.<name>``, a function of the hidden global state."""
    methods = _cupy_surface.surface()["generator_methods"]
    method = {"rand": "random", "randn": "standard_normal", "random_sample": "random",
              "randint": "integers"}.get(name, name)
    use = (f"g.{method}(...)" if method in methods else
           f"CuPy's Generator has no '{name}' method; it has {', '.join(sorted(methods))}")
    return AttributeError(
        f"asyncgpu.cupy.random.{name} draws from a hidden global state whose order asyncgpu "
        f"cannot track; use an explicit generator: g = asyncgpu.cupy.random.default_rng(seed); "
        f"{use}", name=name
    )


def attribute(name: str, mod: Any) -> Any:
    """What ``asyncgpu.cupy.random.<name>`` is (``mod``: CuPy's ``random`` module)."""
    if name in ("default_rng", "Generator"):
        return default_rng if name == "default_rng" else Generator
    obj = getattr(mod, name, None)
    if obj is None:
        raise AttributeError(f"asyncgpu.cupy.random has no attribute '{name}'")
    if isinstance(obj, type) or not callable(obj):
        return obj
    raise refuse_global(name)
