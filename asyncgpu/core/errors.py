"""The asyncgpu exception hierarchy.

Every error derives from :class:`AsyncGPUError` and, where one fits, from the built-in exception a
NumPy or CuPy user would expect (``TypeError`` for a wrong kind of argument, ``ValueError`` for a
bad value, ``MemoryError`` for memory). Messages name the kernel (with the user's launch site), the
argument (index and name), the array (``float32[1024]``) and, where one exists, the fix.

Errors about user input are raised *before* anything is enqueued: the DAG, the streams and the
arrays are unchanged afterwards and the runtime stays usable.
"""

from __future__ import annotations

from collections.abc import Sequence


class AsyncGPUError(Exception):
    """Base class of every error raised by asyncgpu."""


class SignatureError(AsyncGPUError, ValueError):
    """A kernel's declared parameters cannot be understood or disagree with its annotations.

    Raised when a kernel is defined (``ag.kernel``, ``ag.cuda_kernel``), never at launch.
    """


class CompileError(AsyncGPUError):
    """A CUDA C kernel failed to compile, or the named kernel is not in the source.

    The message carries the compiler log.
    """


class ArgumentError(AsyncGPUError, TypeError):
    """A launch argument has the wrong number, kind or type (checked before enqueue)."""


class ArgumentValueError(AsyncGPUError, ValueError):
    """A launch argument or launch configuration has a bad value (checked before enqueue)."""


_CALL_ERRORS: dict[type, type] = {}


def call_failed(text: str, exc: BaseException) -> AsyncGPUError:
    """The error of a library call that raised ``exc`` (a NumPy or CuPy error), saying
    ``text``: an :class:`ArgumentError` that is also of ``exc``'s class, so that an
    ``except ValueError`` (or ``IndexError``, ``numpy.linalg.LinAlgError``, ...) written for
    CuPy catches it as before; an :class:`OutOfMemoryError` (a ``MemoryError``) for one of
    memory::

        call_failed("sum(a) failed: ...", AxisError(5, 1))   # an ArgumentError, a ValueError,
                                                              # an IndexError, an AxisError
    """
    kind = type(exc)
    if issubclass(kind, MemoryError):
        return OutOfMemoryError(text)       # (not an ArgumentError: the arguments were fine)
    cls = _CALL_ERRORS.get(kind)
    if cls is None:
        try:
            # (the message is ours: a class such as AxisError formats its own fields)
            cls = type(kind.__name__, (ArgumentError, kind),
                       {"__module__": __name__, "__doc__": ArgumentError.__doc__,
                        "__init__": Exception.__init__, "__str__": Exception.__str__})
        except TypeError:       # (a class that cannot be a base: ArgumentError alone)
            cls = ArgumentError
        _CALL_ERRORS[kind] = cls
    try:
        return cls(text)
    except Exception:  # noqa: BLE001 - a class whose constructor wants more than a message
        return ArgumentError(text)


class BlockTooLargeError(ArgumentValueError):
    """A launch asks for more threads per block than the compiled kernel can run on this device
    (its registers per thread limit the block); raised before enqueue, naming the limit."""


class FreedArrayError(AsyncGPUError, RuntimeError):
    """An array was used after :meth:`asyncgpu.Array.free`."""


class OutOfMemoryError(AsyncGPUError, MemoryError):
    """An allocation was refused because the device does not have that much free memory."""


class AnnotationViolation(AsyncGPUError):
    """A kernel broke its own annotations: it wrote an argument declared ``const``.

    Detected by the ``sim`` backend, which passes ``const`` arrays read-only.
    """


class RaceError(AsyncGPUError):
    """Two conflicting accesses to the same bytes were not ordered (happens-before checker).

    This is a bug in the runtime (or in work submitted around it), never in the user's program:
    the message names both accesses and their launch sites.
    """


class CaptureError(AsyncGPUError, RuntimeError):
    """An operation CUDA stream capture forbids (a host synchronization with captured work, a
    prefetch on a capturing stream, unjoined work at the end of a capture), or a misused graph."""


class RecordingError(AsyncGPUError, RuntimeError):
    """An operation a recording cannot contain (a host access to an array, a synchronize, a
    free) was attempted inside ``asyncgpu.graph``/``asyncgpu.record``: the launches of a
    recording run only when it ends, so the host would see stale data."""


class DeadlockError(AsyncGPUError):
    """The host waits for work that can never start (``sim`` backend)."""


class KernelFault(AsyncGPUError):
    """A kernel raised while it ran (``sim``) or the device reported a fault (``cuda``)."""


class KernelFaults(ExceptionGroup, KernelFault):
    """Several nodes faulted before the host next waited: every one of them, in the order the
    device reported them, each naming its launch site.

    It is a :class:`KernelFault`, so ``except KernelFault`` catches it as it catches a single
    fault, and an :class:`ExceptionGroup`: ``exceptions`` holds the individual faults
    (:class:`KernelFault` or :class:`AnnotationViolation`), and ``except*`` splits them.
    """

    def __new__(cls, message: str, exceptions: Sequence[Exception]) -> KernelFaults:
        return super().__new__(cls, message, exceptions)

    def derive(self, excs: Sequence[Exception]) -> KernelFaults:
        return KernelFaults(self.message, excs)


def gathered(faults: Sequence[Exception]) -> Exception:
    """The one error that reports ``faults`` (at least one): the fault itself when alone, else
    a :class:`KernelFaults` whose message lists every one."""
    seen: dict[tuple[type, str], list[Exception]] = {}
    for fault in faults:
        for one in (fault.exceptions if isinstance(fault, KernelFaults) else (fault,)):
            base = getattr(one, "repeats", (str(one), 1))[0]
            seen.setdefault((type(one), base), []).append(one)
    # (the same fault of the same launch site, several times: a launch the runtime ran in
    # pieces, or repeated launches that all failed alike; reported once, with the count, also
    # where faults gathered before are gathered again with more)
    flat = [same[0] if len(same) == 1 else _repeated(same) for same in seen.values()]
    if len(flat) == 1:
        return flat[0]
    listing = "; ".join(f"({i}) {type(f).__name__}: {f}" for i, f in enumerate(flat, 1))
    return KernelFaults(f"{len(flat)} faults since the last synchronization: {listing}", flat)


def _repeated(same: list[Exception]) -> Exception:
    """One fault standing for ``same``, identical faults (their count in its message, and in
    its ``repeats``: the message without it and the count, so that it is counted again, not
    said twice, where it is gathered with more of them)."""
    first = same[0]
    base = getattr(first, "repeats", (str(first), 1))[0]
    count = sum(getattr(f, "repeats", (None, 1))[1] for f in same)
    try:
        one = type(first)(f"{base} ({count} times: the pieces of one launch, or launches "
                          "that failed alike)")
    except Exception:  # noqa: BLE001 - a class whose constructor wants more than a message
        return first
    one.__cause__ = first.__cause__
    one.repeats = (base, count)
    return one


class LaunchError(AsyncGPUError, RuntimeError):
    """The driver refused a launch (out of resources, an invalid configuration for this kernel
    on this device). Not a device fault: nothing ran, and the runtime stays usable."""


class NotOnSimulatorError(AsyncGPUError, NotImplementedError, AttributeError):
    """A CuPy name that exists on the GPU has no NumPy counterpart the ``sim`` backend could
    run (``cupy.fuse``, ``cupy.RawKernel``, ``cupy.cuda``): raised when it is looked up on
    ``sim``. Run that part of the program on the ``cuda`` backend. Also an ``AttributeError``,
    so that ``hasattr(acp.random, "RandomState")`` answers False on ``sim`` instead of
    raising."""


class BackendUnavailableError(AsyncGPUError, RuntimeError):
    """The requested backend cannot run on this machine (for example ``cuda`` without a GPU)."""


class DeviceError(AsyncGPUError, ValueError):
    """A device that does not exist or cannot be used as asked: a device number the host
    lacks in ``devices`` or ``asyncgpu.device``, or several devices where a feature supports
    one (importing another library's device array)."""


__all__ = [
    "AnnotationViolation",
    "DeviceError",
    "ArgumentError",
    "ArgumentValueError",
    "AsyncGPUError",
    "BackendUnavailableError",
    "CaptureError",
    "CompileError",
    "DeadlockError",
    "FreedArrayError",
    "KernelFault",
    "KernelFaults",
    "LaunchError",
    "NotOnSimulatorError",
    "OutOfMemoryError",
    "RaceError",
    "RecordingError",
    "SignatureError",
]

