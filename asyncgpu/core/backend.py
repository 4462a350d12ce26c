"""The backend interface: the calls the core and the runtime make on every launch.

Model: a backend puts the runtime's nodes on a device. The stream manager and the runtime hold
it as a :class:`Backend` and call seven methods on the launch path: ``kernel_launch`` (prepare
a kernel's launch), ``launch`` (enqueue a node on a stream), ``graph_launch`` (replay a
captured graph), ``record`` and ``wait`` (a node's completion event, and a stream's wait for
another's), ``event_done`` and ``host_wait`` (what the host learns of an event). Every other
call a backend answers (memory, copies, capture, library calls) is made by name, as on any
object.

Invariants: every backend derives from :class:`Backend` and implements the seven methods; one
that wraps another (to trace it, check it or stress it) derives from :class:`ForwardingBackend`,
which hands the inner backend every call it does not override. Compiled (``setup.py``),
``Backend`` is a C type, so the launch path's calls to the CUDA backend are C calls, without a
Python method lookup and argument parse each; a backend written in Python overrides the
methods as usual.

Example::

    class Counting(ForwardingBackend):
        launches = 0

        def launch(self, node, stream):
            self.launches += 1
            self.inner.launch(node, stream)
"""

from __future__ import annotations

from typing import Any


class Backend:
    """The seven launch-path methods every backend implements (see the module docstring)."""

    __slots__ = ()

    def kernel_launch(self, kernel: Any, launcher: Any, arrays: list[Any], values: list[Any],
                      site: str | None, device: int = 0) -> Any:
        """What :meth:`launch` will enqueue for this kernel launch on ``device``."""
        raise _missing(self, "kernel_launch")

    def launch(self, node: Any, stream: Any) -> None:
        """Enqueue ``node``'s work on ``stream``."""
        raise _missing(self, "launch")

    def graph_launch(self, graph: Any, stream: Any) -> Any:
        """Launch a captured ``graph`` on ``stream``; its completion event if the launch
        recorded one, else None."""
        raise _missing(self, "graph_launch")

    def record(self, event: Any, stream: Any) -> None:
        """Record ``event`` on ``stream`` (it completes once the stream's work so far has)."""
        raise _missing(self, "record")

    def wait(self, stream: Any, event: Any) -> None:
        """Make ``stream``'s later work wait for ``event`` (the host does not wait)."""
        raise _missing(self, "wait")

    def event_done(self, event: Any) -> bool:
        """Whether ``event`` has completed (never blocks)."""
        raise _missing(self, "event_done")

    def host_wait(self, event: Any) -> None:
        """Block the host until ``event`` has completed."""
        raise _missing(self, "host_wait")


def _missing(backend: Any, method: str) -> NotImplementedError:
    return NotImplementedError(f"backend {type(backend).__name__} does not implement {method}")


class ForwardingBackend(Backend):
    """A backend that wraps another, ``inner``: every call it does not override, and every
    attribute it does not have, goes to ``inner``."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        if name == "inner":     # (not set yet: no recursion through __getattr__)
            raise AttributeError(name)
        return getattr(self.inner, name)

    def kernel_launch(self, kernel: Any, launcher: Any, arrays: list[Any], values: list[Any],
                      site: str | None, device: int = 0) -> Any:
        return self.inner.kernel_launch(kernel, launcher, arrays, values, site, device)

    def launch(self, node: Any, stream: Any) -> None:
        self.inner.launch(node, stream)

    def graph_launch(self, graph: Any, stream: Any) -> Any:
        return self.inner.graph_launch(graph, stream)

    def record(self, event: Any, stream: Any) -> None:
        self.inner.record(event, stream)

    def wait(self, stream: Any, event: Any) -> None:
        self.inner.wait(stream, event)

    def event_done(self, event: Any) -> bool:
        return self.inner.event_done(event)

    def host_wait(self, event: Any) -> None:
        self.inner.host_wait(event)
