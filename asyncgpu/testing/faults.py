"""Fault injection for tests: raise an exception at the n-th executed line of the runtime.

The model
---------
The reliability promise is that an exception (a driver refusal, a bug, ``KeyboardInterrupt``
from Ctrl-C, which Python delivers between any two bytecodes) escaping an asyncgpu call at *any*
point leaves the runtime consistent: the call either happened or did not, and later calls give
the serial answer. Named injection points in the launch pipeline would cost a check per point
per launch; instead :func:`inject` installs a ``sys.settrace`` hook for the duration of a block
and raises at the n-th *line event* in the runtime's own modules (the core, not the backends,
which stand in for the driver). Counting the lines of one call with ``at=None`` gives its
number of points; raising at each of them in turn covers every point of the pipeline
(validation, dependencies, stream choice, prefetch, waits, launch, event record, commit, host
access), exhaustively. Nothing is installed, and nothing costs, outside the block.

Example::

    with inject(at=None) as probe:          # count the points of one launch
        k[1, 8](x, y)
    for n in range(1, probe.count + 1):
        with pytest.raises(KeyboardInterrupt), inject(at=n):
            k[1, 8](x, y)
        ...check the runtime: synchronize, read, compare with the serial answer...
"""

from __future__ import annotations

import contextlib
import dis
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

# (the asyncgpu package: this module lives in its testing/ subpackage)
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: the runtime's own modules (the backends and the happens-before checker play the driver
#: and the oracle: an exception inside them would model a corrupted driver, not a caller)
CORE_MODULES = ("runtime/context", "core/streams", "core/deps", "core/dag", "runtime/kernel",
                "runtime/checks", "runtime/array", "runtime/library", "core/policies",
                "core/statistics", "runtime/memory", "runtime/chunks")


class FaultInjector:
    """Counts line events in the core modules and raises ``make()`` at the ``at``-th one."""

    def __init__(self, at: int | None, make: Callable[[], BaseException],
                 modules: tuple[str, ...] = CORE_MODULES) -> None:
        self.at = at
        self.make = make
        self.count = 0
        self.where: str | None = None        # "file.py:line in function" of the raise
        self.points: list[str] = []          # every point seen (when counting)
        self._files = {os.path.join(_PACKAGE, m + ".py") for m in modules}
        # One bound method each, owned here. CPython drops its reference to the global trace
        # function when a trace function raises; if that happens inside a finalizer run by a
        # garbage collection that a trace call itself triggered (3.11 builds the frame object
        # for the call event first), the interpreter goes on to call the function it had
        # already loaded: freed memory, unless something else keeps it alive.
        self.trace = self._call
        self._local = self._line

    def _call(self, frame: Any, event: str, arg: Any) -> Any:
        if frame.f_code.co_filename in self._files:
            return self._local
        return None

    def _line(self, frame: Any, event: str, arg: Any) -> Any:
        if event != "line" or frame.f_lasti in _with_exits(frame.f_code):
            return self._local
        self.count += 1
        where = (f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno} "
                 f"in {frame.f_code.co_name}")
        if self.at is None:
            self.points.append(where)
        elif self.count == self.at:
            self.where = where
            raise self.make()
        return self._local


_exits: dict[Any, frozenset[int]] = {}


def _with_exits(code: Any) -> frozenset[int]:
    """The offsets in ``code`` where a ``with`` block's normal exit begins: the line event
    there (the ``with`` line again) comes before the call of ``__exit__``, outside the block's
    protection, and Python never delivers an interrupt there (it checks for one after a call,
    inside the block, or at a function's start or a loop's jump), so a fault raised there would
    leave the context manager (a lock) entered as no real interrupt can."""
    exits = _exits.get(code)
    if exits is None:
        ops = [op for op in dis.get_instructions(code) if op.opname != "PRECALL"]   # (3.11)
        found = set()
        for i, op in enumerate(ops):
            if not op.starts_line:
                continue
            j = i + 1 if op.opname == "SWAP" else i     # (a return's value kept under it)
            call = ops[j + 3] if j + 3 < len(ops) else None
            if (call is not None and call.opname == "CALL" and call.arg == 2
                    and all(o.opname == "LOAD_CONST" and o.argval is None
                            for o in ops[j:j + 3])):
                found.add(op.offset)
        exits = _exits[code] = frozenset(found)
    return exits


@contextlib.contextmanager
def inject(at: int | None, make: Callable[[], BaseException] = KeyboardInterrupt,
           modules: tuple[str, ...] = CORE_MODULES) -> Iterator[FaultInjector]:
    """Raise ``make()`` at the ``at``-th executed line of the core modules inside the block
    (``at=None``: only count, and list the points in ``.points``)."""
    injector = FaultInjector(at, make, modules)
    previous = sys.gettrace()
    sys.settrace(injector.trace)
    try:
        yield injector
    finally:
        sys.settrace(previous)
