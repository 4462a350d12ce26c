"""Kernels whose launches asyncgpu schedules (made by ``asyncgpu.runtime.kernel_builders``).

A :class:`Kernel` wraps a Numba kernel (a ``@cuda.jit`` dispatcher, or a plain Python function
that asyncgpu compiles with ``cuda.jit``) or a CUDA C kernel (source text, or a CuPy
``RawKernel``). It knows each parameter's name and access mode: ``const`` (read-only), ``out``
(write-only: old contents are not needed) or read-write, the default. For CUDA C, ``const T*``
parameters are read-only without annotation.

``k[grid, block]`` or ``k[grid, block, shared_bytes]`` returns a launcher (cached per
configuration); calling it validates every argument *before anything is enqueued*, resolves each
array to its allocation and byte extent, and hands the launch to the runtime, which returns at
once. Errors name the kernel with the user's launch site, the argument and the fix.
"""

from __future__ import annotations

import math
import operator
from array import array as stdlib_array
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ..core.deps import Access
from ..core.errors import ArgumentError, ArgumentValueError
from ..core.tenants import DECLARED
from . import current
from .allocation import View
from .array import Array
from .checks import (
    BLOCK_LIMITS,
    GRID_LIMITS,
    MAX_SHARED_BYTES,
    MAX_THREADS_PER_BLOCK,
    _int_bounds,
    a_or_an,
    check_usable,
    convert_scalar,
    is_int,
    launch_dims,
    user_site,
)
from .current import current_runtime
from .interop import adopt, describe_foreign, is_foreign, kind_of
from .recording_hook import MANY, this_thread
from .signature import Param

# Every launch reads the process's runtime: through the namespace of ``current`` (compiled, one
# dictionary lookup) instead of the module attribute (the module type's attribute lookup, about
# four times the work).
_current = vars(current)


@dataclass(frozen=True)
class NumbaSource:
    """A Numba kernel: the Python function and, if the user gave one, its dispatcher."""

    py_func: Callable[..., Any]
    dispatcher: Any


@dataclass(frozen=True)
class CudaCSource:
    """A CUDA C kernel: source, name, compiler options, an optional CuPy RawKernel, a CPU twin."""

    code: str
    name: str
    options: tuple[str, ...]
    raw: Any
    sim: Callable[..., Any] | None

    @property
    def sim_runs_blocks(self) -> bool:
        """Whether the ``sim=`` twin is a Numba kernel, which the ``sim`` backend runs block by
        block with the launch's grid (a plain function is called once per launch and sees no
        grid)."""
        twin = self.sim
        return hasattr(twin, "py_func") or type(twin).__name__ == "FakeCUDAKernel"


class ArrayArg(Access):
    """A validated array argument of one launch, which is also its dependency access.

    ``index``/``param``: position and parameter name; ``read``: the kernel may read the old
    contents; ``write``: it may modify them. As an :class:`asyncgpu.core.deps.Access` (``key``,
    ``alloc``, ``lo``, ``hi``, ``label``) the dependency tracker takes the argument as it is
    (no second object per array per launch). Made by :func:`array_arg`.
    """

    __slots__ = ("index", "param", "array")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("ArrayArg is made by array_arg(index, param, array, read, write)")

    def __repr__(self) -> str:
        return f"ArrayArg({self.index} {self.param}, {'rw' if self.write else 'r'})"


def array_arg(index: int, param: str, array: Array, read: bool, write: bool) -> ArrayArg:
    """The argument ``array`` bound to parameter ``param`` (position ``index``)."""
    # (a constructor function, not __init__: compiled, it sets the fields without parsing
    # a call's arguments, once per array per launch)
    self = ArrayArg.__new__(ArrayArg)
    self.index = index
    self.param = param
    self.array = array
    self.read = read
    self.write = write
    alloc = array._alloc
    self.key = alloc.id
    self.alloc = alloc
    self.lo = array._lo
    self.hi = array._hi
    self.label = param      # edge labels and messages name the array by its parameter
    return self


_NUMBERS = frozenset({int, float, bool, complex})
_BY_INDEX = operator.attrgetter("index")     # (array arguments in parameter order)
_INTS = frozenset({int})
_REALS = frozenset({int, float})


def plain_scalar(p: Param) -> tuple[frozenset[type], Any, Any, Any] | None:
    """How a typed scalar parameter converts a plain Python number as ``convert_scalar`` does,
    without its checks: (types taken, lowest, highest, conversion), or None (only the general
    path). Integers: a Python int in the type's range; reals: a Python int or float in the type's
    finite range (NaN, the infinities and reals beyond the range take the general path, which
    converts them the same, without NumPy's overflow warning)."""
    if p.is_array or p.dtype is None:
        return None
    dt = np.dtype(p.dtype)
    if dt.kind in "iu":
        lo, hi = _int_bounds(dt)
        return _INTS, lo, hi, dt.type
    if dt.kind == "f":
        top = float(np.finfo(dt).max)
        return _REALS, -top, top, dt.type
    return None


def _convert_fix() -> str:
    """The fix for host data given where a kernel takes an array: a copy on the device."""
    into = ("device memory (a copy node moves it before the first kernel)"
            if current_runtime().memory is not None else "managed memory")
    return f"convert it with asyncgpu.asarray(x), which copies it into {into}"


def _host_sequence_fix(a: Any) -> str:
    """``"; <the fix>"`` for a list, tuple or ``array.array`` that may be meant as an array
    (NumPy's get their own message), else ``""``."""
    return f"; {_convert_fix()}" if isinstance(a, (list, tuple, stdlib_array)) else ""


def _all_ints(config: Any) -> bool:
    """Whether a launch configuration holds only ints, at either level (``k[(2, 2), 64]``)."""
    for part in (config if type(config) is tuple else (config,)):
        if type(part) is tuple:
            for item in part:
                if type(item) is not int and not isinstance(item, np.integer):
                    return False
        elif type(part) is not int and not isinstance(part, np.integer):
            return False
    return True


class Kernel:
    """A kernel whose launches asyncgpu schedules (see :func:`asyncgpu.kernel`)."""

    __slots__ = ("name", "params", "modes", "source", "typed", "elementwise", "broadcast",
                 "grid_offset", "grid_stride", "_launchers", "_compiled", "_slots", "__weakref__")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError(
            "asyncgpu.Kernel has no public constructor; use asyncgpu.kernel(fn) or "
            "asyncgpu.cuda_kernel(source, name)"
        )

    @classmethod
    def _create(cls, name: str, params: tuple[Param, ...], modes: dict[str, str],
                source: Any, typed: bool) -> Kernel:
        self = cls.__new__(cls)
        self.name = name
        DECLARED.add(name)      # (what a tenant's split= and after= may name)
        self.params = params
        self.modes = modes        # parameter name -> "r" | "w" | "rw" (arrays only)
        self.source = source
        self.typed = typed        # CUDA C: dtypes and array/scalar kinds are declared
        #: False, True (extent from the arrays) or the element-count parameter's name
        #: (``asyncgpu.runtime.chunks``); set by ``kernel``/``cuda_kernel`` after validation.
        self.elementwise: bool | str = False
        #: the const array parameters an element-wise kernel's chunks each get whole
        self.broadcast: tuple[str, ...] = ()
        #: None, or the names of the (first block, total blocks) parameters the runtime fills
        #: when it launches the grid in pieces (``asyncgpu.runtime.chunks``); set like
        #: ``elementwise``.
        self.grid_offset: tuple[str, str] | None = None
        #: with ``grid_offset``: its answer is the same on a grid of any size (a grid-stride
        #: loop), so a whole launch's pieces may each run on its whole grid
        #: (``asyncgpu.runtime.splits``)
        self.grid_stride: bool = False
        self._launchers: dict[Any, Launcher] = {}
        self._compiled: dict[Any, Any] = {}  # backend caches (compiled functions per signature)
        # Per parameter, what the launch path needs without dictionary lookups:
        # (index, name, read, write, array dtype the declaration demands or None, is_array,
        #  how a plain Python number converts without the general checks or None)
        self._slots = tuple(
            (i, p.name, modes.get(p.name, "rw") != "w", modes.get(p.name, "rw") != "r",
             p.dtype if typed and p.is_array else None, p.is_array,
             plain_scalar(p) if typed and p.name not in modes else None)
            for i, p in enumerate(params)
        )
        return self

    def __repr__(self) -> str:
        names = ", ".join(
            f"{'const ' if self.modes.get(p.name) == 'r' else 'out ' if self.modes.get(p.name) == 'w' else ''}{p.name}"
            for p in self.params
        )
        return f"<asyncgpu kernel {self.name}({names})>"

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        raise ArgumentValueError(
            f"kernel '{self.name}' needs a launch configuration: call it as "
            f"{self.name}[blocks, threads_per_block](...)"
        )

    def __getitem__(self, config: Any) -> Launcher:
        try:
            launcher = self._launchers[config]
        except (KeyError, TypeError):
            launcher = None
        if launcher is not None:
            # (a hit for a configuration of floats or bools is parsed: 1.0 == 1 and True == 1
            # find the integers' launcher, but Numba refuses them, and so do we; the common
            # [blocks, threads] of two ints is told apart first, in a few instructions)
            if type(config) is tuple and len(config) == 2:
                blocks, threads = config
                if type(blocks) is int and type(threads) is int:
                    return launcher
            if _all_ints(config):
                return launcher
        launcher = Launcher(self, *self._parse_config(config))
        try:
            if len(self._launchers) < 256 and _all_ints(config):
                self._launchers[config] = launcher
        except TypeError:  # unhashable configuration (lists): fine, just not cached
            pass
        return launcher

    def _parse_config(self, config: Any) -> tuple[tuple[int, ...], tuple[int, ...], int]:
        parts = config if isinstance(config, tuple) else (config,)
        where = f"kernel '{self.name}' (at {user_site()})"
        if len(parts) == 4 or (len(parts) == 3 and not isinstance(
                parts[2], (int, float, np.integer, np.floating, np.bool_))):
            raise ArgumentValueError(
                f"{where}: a launch configuration is [blocks, threads] or "
                "[blocks, threads, shared_bytes]; asyncgpu chooses the stream itself, so drop "
                "the stream from the configuration"
            )
        if len(parts) not in (2, 3):
            raise ArgumentValueError(
                f"{where}: a launch configuration is [blocks, threads] or "
                f"[blocks, threads, shared_bytes]; got {len(parts)} values"
            )
        grid = launch_dims(parts[0], "blocks", GRID_LIMITS, where)
        block = launch_dims(parts[1], "threads per block", BLOCK_LIMITS, where)
        threads = math.prod(block)
        if threads > MAX_THREADS_PER_BLOCK:
            raise ArgumentValueError(
                f"{where}: a block of {block} has {threads} threads; the limit is "
                f"{MAX_THREADS_PER_BLOCK}. Use fewer threads per block and more blocks"
            )
        shared = parts[2] if len(parts) == 3 else 0
        if not is_int(shared) or not 0 <= int(shared) <= MAX_SHARED_BYTES:
            raise ArgumentValueError(
                f"{where}: dynamic shared memory must be an integer in [0, {MAX_SHARED_BYTES}] "
                f"bytes; got {shared!r}"
            )
        return grid, block, int(shared)

    # -- argument validation ------------------------------------------------------------------
    def _where(self, site: str | None, index: int | None = None) -> str:
        text = f"kernel '{self.name}'" + (f" (launched at {site})" if site else "")
        if index is not None:
            text += f", argument {index} '{self.params[index].name}'"
        return text

    def _check_array(self, runtime: Any, i: int, p: Param, a: Array, site: str | None) -> None:
        """Raise the error that explains why array ``a`` cannot be argument ``i``."""
        check_usable(a, runtime, f"{self._where(site, i)}: array {a.describe()}")
        self._check_typed(i, p, a.describe(), a.dtype, a.is_c_contiguous, a.strides, site)

    def _describe_foreign(self, runtime: Any, i: int, a: Any, site: str | None) -> Any:
        """Another library's array as argument ``i``: read and checked against the parameter
        (``asyncgpu.runtime.interop``, the import ``asyncgpu.asarray`` makes), not yet imported."""
        d = describe_foreign(runtime, a, self._where(site, i))
        self._check_typed(i, self.params[i], f"{d.kind} of dtype {d.dtype} and shape {d.shape}",
                          d.dtype, d.is_c_contiguous, d.strides, site)
        return d

    def _check_typed(self, i: int, p: Param, label: str, dtype: np.dtype, contiguous: bool,
                     strides: Any, site: str | None) -> None:
        """A CUDA C parameter's demands on an array argument, the same for asyncgpu's arrays
        and other libraries': a pointer parameter, its element type, contiguous data."""
        if not self.typed:
            return
        where = self._where(site, i)
        if not p.is_array:
            raise ArgumentError(f"{where}: expected a scalar {p.ctype}, got array {label}")
        if p.dtype is not None and dtype != p.dtype:
            raise ArgumentError(
                f"{where}: expected {a_or_an(p.dtype.name)} array for '{p.ctype}', got "
                f"{label}; pass "
                f"an array of that dtype (x.astype(numpy.{p.dtype.name}) converts a copy) or "
                "declare the parameter with the array's element type"
            )
        if not contiguous:
            raise ArgumentValueError(
                f"{where}: array {label} is not C-contiguous (strides={strides}); a raw "
                "pointer parameter needs contiguous data: pass a contiguous copy "
                "(asyncgpu.array(x) makes one)"
            )

    def _bind_scalar(self, i: int, p: Param, a: Any, site: str | None) -> Any:
        if isinstance(a, np.ndarray):
            raise ArgumentError(
                f"{self._where(site, i)}: got a numpy.ndarray; it lives in host memory, and "
                "kernels take asyncgpu arrays (or device arrays of other libraries): "
                f"{_convert_fix()}"
            )
        if self.typed and p.is_array:
            raise ArgumentError(
                f"{self._where(site, i)}: expected an asyncgpu array for '{p.ctype}', "
                f"got {type(a).__name__} {a!r}" + _host_sequence_fix(a)
            )
        number = isinstance(a, (bool, int, float, complex, np.number, np.bool_))
        what = f"the scalar {a!r}" if number else f"a {kind_of(a)}"
        if p.name in self.modes and self.modes[p.name] != "rw":
            annotation = "const" if self.modes[p.name] == "r" else "out"
            fix = _host_sequence_fix(a)
            if isinstance(a, tuple):
                fix += "; or, if the tuple is meant as one value, remove the annotation"
            raise ArgumentError(
                f"{self._where(site, i)}: the parameter is annotated {annotation}, which only "
                f"applies to arrays, but got {what}"
                + (fix or "; remove the annotation or pass an array")
            )
        if not self.typed:
            if isinstance(a, (bool, int, float, complex, np.number, np.bool_)):
                return a
            if isinstance(a, (tuple, np.void)):
                return self._bind_value(i, a, site)
            raise ArgumentError(
                f"{self._where(site, i)}: expected an asyncgpu array, a number, a tuple of "
                f"numbers or a NumPy record, got {type(a).__name__}" + _host_sequence_fix(a)
            )
        return convert_scalar(a, p, lambda: self._where(site, i))

    def _bind_value(self, i: int, a: Any, site: str | None) -> Any:
        """A tuple (nested or named) or NumPy record argument of a Numba kernel, which Numba
        passes by value: the value the launch passes, a record copied (one indexed out of an
        NumPy array is a view of it, and the launch runs later). Arrays inside a tuple are
        refused: the runtime orders a launch by the arrays it is given as arguments, and would
        not see these."""
        if isinstance(a, np.void):
            return a.copy()
        if not isinstance(a, tuple):
            if isinstance(a, (bool, int, float, complex, np.number, np.bool_)):
                return a
            if isinstance(a, (View, np.ndarray)) or is_foreign(a):
                what = (a.describe() if isinstance(a, View) and not a._alloc.freed else
                        f"numpy.ndarray {a.dtype}{list(a.shape)}" if isinstance(a, np.ndarray)
                        else kind_of(a))
                raise ArgumentError(
                    f"{self._where(site, i)}: got a tuple holding an array ({what}); the "
                    "runtime orders a launch after the writers of the arrays passed as "
                    "arguments and cannot track one inside a tuple: pass the arrays as "
                    "separate arguments"
                    + (" (asyncgpu.asarray(x) copies a NumPy array to the device)"
                       if isinstance(a, np.ndarray) else "")
                )
            raise ArgumentError(
                f"{self._where(site, i)}: got a tuple holding {type(a).__name__} {a!r}; a "
                "tuple argument holds numbers, NumPy records or tuples of them"
            )
        items = [self._bind_value(i, x, site) for x in a]
        if all(x is y for x, y in zip(items, a)):
            return a
        return a._make(items) if hasattr(a, "_make") else tuple(items)

    def bind(self, runtime: Any, args: tuple[Any, ...], site: str | None,
             ) -> tuple[list[ArrayArg], list[Any]]:
        """Validate ``args``; return the array arguments and the argument values to pass.

        Raises before anything is enqueued; nothing is changed on failure. The common case
        (live arrays of this runtime, plain numbers for untyped kernels) takes no detour; every
        other case goes through the checks that explain what is wrong.
        """
        slots = self._slots
        if len(args) != len(slots):
            names = ", ".join([p.name for p in self.params])
            raise ArgumentError(
                f"{self._where(site)} takes {len(slots)} arguments ({names}); "
                f"{len(args)} given"
            )
        typed = self.typed
        arrays: list[ArrayArg] = []
        values = list(args)
        foreign: list[Any] | None = None     # (rare: allocated when one comes)
        for k in range(len(slots)):
            i, name, read, write, dtype, is_array, plain = slots[k]
            a = args[k]
            if isinstance(a, View):     # (an Array: the only View there is)
                arr = a
                alloc = arr._alloc
                if (alloc.freed or alloc.runtime is not runtime
                        or (typed and not (is_array and (dtype is None or arr.dtype is dtype
                                                         or arr.dtype == dtype)
                                           and arr._contiguous))):
                    self._check_array(runtime, i, self.params[i], a, site)
                arrays.append(array_arg(i, name, arr, read, write))
            elif plain is not None and type(a) in plain[0] and plain[1] <= a <= plain[2]:
                values[i] = plain[3](a)     # what convert_scalar returns, without its checks
            elif typed or type(a) not in _NUMBERS or not (read and write):
                if type(a) not in _NUMBERS and is_foreign(a):
                    if foreign is None:
                        foreign = []
                    foreign.append((i, name, read, write,
                                    self._describe_foreign(runtime, i, a, site)))
                else:
                    values[i] = self._bind_scalar(i, self.params[i], a, site)
        if self.grid_offset is not None and arrays:
            self._refuse_offset_arrays(arrays, site)
        if foreign:
            # every argument is checked: only now may the imports enqueue their ordering
            for i, name, read, write, described in foreign:
                imported = adopt(runtime, described)
                arrays.append(array_arg(i, name, imported, read, write))
                values[i] = imported
            arrays.sort(key=_BY_INDEX)
        return arrays, values

    def _refuse_offset_arrays(self, arrays: list[ArrayArg], site: str | None) -> None:
        """ArgumentError for an array given where ``grid_offset`` names a block number (an
        untyped Numba kernel's parameters take anything until it runs)."""
        for a in arrays:
            if a.param in self.grid_offset:
                raise ArgumentError(
                    f"{self._where(site)}, argument {a.index} '{a.param}': grid_offset declares "
                    f"it a block number, an integer, but it is an array "
                    f"({a.array.describe()}); pass an int")


class Launcher:
    """``kernel[grid, block]``: calling it schedules one launch and returns at once."""

    __slots__ = ("kernel", "grid", "block", "shared", "grid3", "block3", "prepared")

    def __init__(self, kernel: Kernel, grid: tuple[int, ...], block: tuple[int, ...],
                 shared: int) -> None:
        self.kernel = kernel
        self.grid = grid
        self.block = block
        self.shared = shared
        self.grid3 = (grid + (1, 1))[:3]     # the x, y, z a driver launch takes
        self.block3 = (block + (1, 1))[:3]
        #: The backend's cache for this launcher's launches (its prepared launch target).
        self.prepared: Any = None

    def __repr__(self) -> str:
        return f"<launcher {self.kernel.name}[{self.grid}, {self.block}, {self.shared}]>"

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        """Schedule one launch: remembered by the thread's recording, or handed to the
        runtime."""
        if kwargs:
            raise ArgumentValueError(
                f"kernel '{self.kernel.name}' (at {user_site()}): kernel arguments are "
                "positional, in the kernel's parameter order; got keyword argument(s) "
                f"{', '.join(sorted(kwargs))}"
            )
        self.schedule(args)

    def schedule(self, args: tuple[Any, ...]) -> None:
        """Schedule one launch of ``args`` (``__call__`` without its argument parsing)."""
        rt = _current["_runtime"]
        if rt is None:
            rt = current.current_runtime()
        rec = rt.recording
        # A launch that repeats the recording's previous run is taken from its memo without
        # the runtime's lock: only this thread reads or ends its own recording (``MANY``:
        # several threads record, each call goes to the caller's own).
        if (rec is not None and (rec.thread == this_thread() or rec.thread == MANY)
                and rec.remember(self, args)):
            return
        rt.launch_kernel(self, args)
