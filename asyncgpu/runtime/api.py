"""Module-level functions of the public API (array creation, configuration, synchronization)."""

from __future__ import annotations

import contextlib
import threading
from typing import Any

import numpy as np

from ..core.config import Options
from ..core.errors import AnnotationViolation, DeviceError, KernelFault, RecordingError
from ..core.statistics import Statistics
from . import backend_registry, current
from .array import Array, empty_array, full_array, host_array
from .current import current_options, current_runtime, set_options
from .dtypes import refuse_other_order
from .interop import asarray as _import
from .interop import is_foreign
from .recording_hook import recording_of, this_thread


def array(obj: Any, dtype: Any = None) -> Array:
    """A new array holding a copy of ``obj`` (any array-like; NumPy rules for dtype).

    Parameters
    ----------
    obj:
        NumPy array, nested sequence, scalar, or an :class:`Array` (copied through the host).
    dtype:
        Element type; by default the type NumPy infers. Host data asked for the other byte
        order (``">f4"`` on x86) is converted to the device's, an :class:`Array` refused
        (a ``ValueError``), as CuPy does.

    Returns
    -------
    Array
        Current on the host: the first kernel that uses it copies it to the device (with
        ``memory="managed"``, prefetches it).
    """
    if is_foreign(obj):          # another library's array: viewed, then copied on the device
        return _import(obj, dtype, copy=True)
    if isinstance(obj, Array):   # (a conversion of device data: refused in the other order)
        refuse_other_order(dtype, "asyncgpu.array")
    return host_array(obj, dtype)


def asarray(obj: Any, dtype: Any = None) -> Array:
    """``obj`` itself if it is an :class:`Array` of that dtype; another library's device array
    viewed without a copy; else a new array (copy).

    Device arrays (CuPy, Numba device arrays, PyTorch CUDA tensors: anything with
    ``__cuda_array_interface__`` or a CUDA ``__dlpack__``) are viewed in place: the Array
    shares their memory, keeps the producer alive, and its first use is ordered after the
    producer's stream. NumPy arrays, array-likes and host DLPack producers are copied through
    the host. A ``dtype`` other than the array's converts into a new array (a node);
    :func:`array` always copies. See the interop guide for what each backend accepts.

    Returns
    -------
    Array
    """
    return _import(obj, dtype)


def _asked(dtype: Any, name: str) -> Any:
    """``dtype``, refused in the other byte order (``>f4`` on x86) as ``cupy.<name>`` refuses
    it: a new array holds numbers in the device's order (host data is converted instead)."""
    refuse_other_order(dtype, f"asyncgpu.{name}")
    return dtype


def empty(shape: Any, dtype: Any = np.float64) -> Array:
    """A new array with undefined contents (never touched by the host: no prefetch needed).

    Returns
    -------
    Array
    """
    return empty_array(shape, _asked(dtype, "empty"), 0)


def full(shape: Any, fill_value: Any, dtype: Any = None) -> Array:
    """A new array filled with ``fill_value`` (written by the host; from 1 MiB on, filled on
    the device).

    Returns
    -------
    Array
    """
    return full_array(shape, fill_value, _asked(dtype, "full"))


def zeros(shape: Any, dtype: Any = np.float64) -> Array:
    """A new array of zeros.

    Returns
    -------
    Array
    """
    return full(shape, 0, _asked(dtype, "zeros"))


def ones(shape: Any, dtype: Any = np.float64) -> Array:
    """A new array of ones.

    Returns
    -------
    Array
    """
    return full(shape, 1, _asked(dtype, "ones"))


def empty_like(a: Any, dtype: Any = None) -> Array:
    """A new uninitialized array with the shape (and by default the dtype) of ``a``.

    Returns
    -------
    Array
    """
    return empty(a.shape, _asked(a.dtype if dtype is None else dtype, "empty_like"))


def zeros_like(a: Any, dtype: Any = None) -> Array:
    """A new array of zeros with the shape (and by default the dtype) of ``a``.

    Returns
    -------
    Array
    """
    return zeros(a.shape, _asked(a.dtype if dtype is None else dtype, "zeros_like"))


def ones_like(a: Any, dtype: Any = None) -> Array:
    """A new array of ones with the shape (and by default the dtype) of ``a``.

    Returns
    -------
    Array
    """
    return ones(a.shape, _asked(a.dtype if dtype is None else dtype, "ones_like"))


def full_like(a: Any, fill_value: Any, dtype: Any = None) -> Array:
    """A new array filled with ``fill_value`` with the shape (and by default dtype) of ``a``.

    Returns
    -------
    Array
    """
    return full(a.shape, fill_value, _asked(a.dtype if dtype is None else dtype, "full_like"))


def synchronize() -> None:
    """Block the host until every scheduled kernel has finished."""
    current_runtime().synchronize()


def statistics() -> Statistics:
    """A frozen snapshot of the runtime's counters (nodes, edges, streams, events, syncs).

    Returns
    -------
    Statistics
    """
    return current_runtime().statistics()


def instrument(obj: Any) -> Any:
    """Register an instrument for a ``with`` block: ``with asyncgpu.instrument(tool) as t:``.

    The hooks are those of :class:`asyncgpu.Instrument` (``node_added``, ``edge_added``,
    ``node_issued``, ``synchronized``, ``regulation_changed``); an object may define any
    subset.

    Returns
    -------
    A context manager yielding ``obj``.

    Raises
    ------
    TypeError
        ``obj`` defines none of the hooks (``None``, a number, a tool's class where an
        instance was meant): it would slow every launch and see nothing.
    """
    hooks = ("node_added", "edge_added", "node_issued", "synchronized", "regulation_changed")
    if not any(callable(getattr(obj, hook, None)) for hook in hooks):
        raise TypeError(f"asyncgpu.instrument: {obj!r:.60} defines none of the hooks "
                        f"({', '.join(hooks)}); pass an object with at least one of them "
                        "(see asyncgpu.Instrument)")
    return current_runtime().instrument(obj)


class device(contextlib.ContextDecorator):
    """``with asyncgpu.device(1):`` the kernels and library calls this thread issues in the
    block run on device ``number`` (a device of the runtime's ``devices``) whatever the
    device policy; their inputs are copied there as needed. The object can be entered again,
    nested or later, as CuPy's ``Device``, and decorates a function as a block around it.

    Raises
    ------
    DeviceError
        ``number`` is not among the runtime's devices (nothing is pinned).
    """

    def __init__(self, number: int) -> None:
        self.number = number
        #: Per thread (one object may serve several): the blocks entered and not left, as
        #: (runtime, mark, the thread's ``_pins`` dictionary): a block a generator holds, left
        #: in another thread, is left for the thread that entered it (__exit__)
        self._entered: dict[int, list[tuple[Any, object, dict[str, Any]]]] = {}

    def __enter__(self) -> device:
        rt = current_runtime()
        mark = rt.pin(self.number)
        self._entered.setdefault(threading.get_ident(), []).append(
            (rt, mark, rt._pins.__dict__))
        return self

    def __exit__(self, *exc: object) -> None:
        marks = self._entered.get(threading.get_ident())
        if marks:
            rt, mark, _ = marks.pop()
            rt.unpin(mark)
            return
        # (a generator holding the block, closed in another thread: the block is left for the
        # thread that entered it, which runs where it did before the block, and configure no
        # longer counts it as pinned; the error says why)
        others = [m for m in self._entered.values() if m]
        if not others:
            raise RuntimeError(f"asyncgpu.device({self.number!r}) is left, and no thread is "
                               "inside it (never entered, or left already): leave a device "
                               "block once, after entering it")
        rt, mark, pins = others[-1].pop()
        rt.unpin(mark, pins)
        raise RuntimeError(
            f"asyncgpu.device({self.number!r}) is left in a thread that did not enter it: a "
            "device block belongs to the thread that entered it (no yield or await inside "
            "it; a generator holding one must be closed in that thread); it is left for that "
            "thread, whose launches run where they did before the block")

    def __repr__(self) -> str:
        return f"asyncgpu.device({self.number!r})"


def options() -> Options:
    """The options in force.

    Returns
    -------
    Options
    """
    return current_options()


def _refuse_pinned(changes: str, leaving: str = "") -> None:
    """DeviceError where a thread is inside an ``asyncgpu.device`` block of the runtime in
    use (a change of backend or devices makes a new runtime, which the pin does not reach)."""
    rt = current._runtime
    pins = rt.live_pins() if rt is not None else []
    if not pins:
        return
    mine = [slot for thread, slot in pins if thread == threading.get_ident()]
    where = (f"inside asyncgpu.device({rt.devices[mine[-1]]})" if mine else
             f"while another thread is inside asyncgpu.device({rt.devices[pins[-1][1]]})")
    raise DeviceError(
        f"{leaving}asyncgpu.configure({changes}) {where}: a change of backend or devices makes "
        "a new runtime, which the pin does not reach; leave the asyncgpu.device block first, "
        "and pin again inside the new configuration")


class configure:
    """Change options now; used as a context manager, restore the previous ones on exit.

    ``asyncgpu.configure(execution="sync")`` switches to serial execution for the rest of the
    program; ``with asyncgpu.configure(execution="sync"): ...`` only inside the block (even if
    it raises). Pending work is finished before options change; if it faulted, the fault is
    raised here and the options stay as they were (on leaving a ``with`` block they are
    restored all the same, and where the block raised, its exception goes on and the fault is
    raised at the next host wait). The same holds for a failure to build the new configuration (its
    backend, streams or converted arrays): raised here, with the runtime, its options, arrays
    and memory model as they were.

    Arrays and generators stay usable across every change but one of ``backend``, ``device`` or
    ``devices``, or of ``sim_devices`` on a runtime of several devices: a change of ``memory``
    converts each live array's memory (explicit: device memory and a host mirror; managed:
    unified memory), keeping its contents; recorded graphs are recorded again where the backend
    is rebuilt (``memory``, the other ``sim_*`` options, ``debug_hb``, ``stress``, the launch
    paths), and statistics start again there. After a change of ``backend`` or of the devices,
    arrays made before are refused as arguments, with a message naming the switch: create them
    again. A change that rebuilds the backend is refused inside a ``with asyncgpu.trace()``
    block.

    Parameters
    ----------
    **changes:
        Fields of :class:`Options` (``execution``, ``dependency``, ``new_stream``,
        ``parent_stream``, ``prefetch``, ``backend``, ``max_streams``, ...). An integer
        option takes NumPy's integers too (``copy_chunks=np.int64(4)``).

    Raises
    ------
    TypeError
        An unknown option name.
    ValueError
        A value outside the option's choices or range (a count such as ``max_streams``: at
        most ``sys.maxsize``).
    DeviceError
        ``device`` or ``devices`` names a device the host lacks, or a change of backend or
        devices is asked for inside an ``asyncgpu.device`` block (the options stay as they
        were).
    BackendUnavailableError
        ``backend="cuda"`` where CuPy or a GPU is missing (the options stay as they were).
    KernelFault
        Work issued before faulted (nothing changed; the runtime stays usable).
    RuntimeError
        A change that rebuilds the backend while a trace is in progress.
    """

    def __init__(self, **changes: Any) -> None:
        rt = current._runtime
        recording = recording_of(rt, this_thread()) if rt is not None else None
        if recording is not None and not recording.split:
            recording.failed = True     # (as a refused host operation: this call runs eagerly)
            raise RecordingError(
                f"asyncgpu.configure inside the recording of '{recording.name}': a change of "
                "options first finishes the pending work, which the recording issues only "
                "when it ends; call configure outside the recorded function (or record with "
                "split=True, where it ends a segment)")
        self._previous = current_options()
        new = self._previous.replace(**changes)
        if (new.backend != self._previous.backend or new.devices != self._previous.devices
                or new.device != self._previous.device
                or new.sim_devices != self._previous.sim_devices):
            # a backend or a device the host lacks is refused here, not at the first launch,
            # and before the runtime in use is retired: its arrays stay usable
            backend_registry.select(new)
            _refuse_pinned(", ".join(f"{k}={v!r}" for k, v in changes.items()))
        set_options(new)
        self.options = new
        self._changes = changes

    def __enter__(self) -> Options:
        return self.options

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        now, before = current_options(), self._previous
        if (now.backend, now.devices, now.device, now.sim_devices) != (
                before.backend, before.devices, before.device, before.sim_devices):
            # (restoring makes a new runtime too: refused as the change was, the block's
            # options kept, so that no thread's pin is dropped unseen)
            _refuse_pinned(", ".join(f"{k}={v!r}" for k, v in self._changes.items()),
                           "leaving the block of ")
        try:
            set_options(self._previous)
        except (KernelFault, AnnotationViolation) as fault:
            # the block's last work faulted: it has finished, so the options are restored
            # now, and the fault still reaches the user: here, or, where the block's own
            # exception is on its way out (which goes on), at the next host wait
            set_options(self._previous)
            if exc_type is None:
                raise
            current_runtime().backend.keep_faults(fault)
