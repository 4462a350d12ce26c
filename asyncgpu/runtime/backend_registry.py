"""The backends the runtime can make: the one seam between the runtime and the backend layer.

The model
---------
The backends (``asyncgpu.backends``) sit above the runtime: their kernel launches, library
calls and captures work on the runtime's arrays, kernels and library calls. A runtime still has
to make the backend its options select (``Runtime.__init__``, and ``asyncgpu.configure``
through ``asyncgpu.runtime.switch``), so the backend layer registers its factory here when it is
imported (``asyncgpu/__init__.py`` imports it, so it is registered before any runtime exists),
and the runtime asks through :func:`create`, :func:`resolve` and :func:`select` without
importing the backends.

Invariant: exactly one factory is registered; registering again replaces it (a test may
register a wrapper and put the original back).

Example::

    register(create=make_backend, resolve=backend_name, select=devices_of)  # asyncgpu.backends
    backend = create(options)            # the runtime: a new backend for these options
    name = resolve(options)              # "sim" or "cuda": what "auto" stands for here
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..core.config import Options
from ..core.errors import BackendUnavailableError

_create: Callable[[Options], Any] | None = None
_resolve: Callable[[Options], str] | None = None
_select: Callable[[Options], tuple[int, ...]] | None = None


def register(create: Callable[[Options], Any], resolve: Callable[[Options], str],
             select: Callable[[Options], tuple[int, ...]]) -> None:
    """Install the backend layer's factory (``create``), its name for a selection
    (``resolve``) and the devices a selection names on this machine (``select``)."""
    global _create, _resolve, _select
    _create, _resolve, _select = create, resolve, select


def _registered() -> tuple[Callable[[Options], Any], Callable[[Options], str],
                           Callable[[Options], tuple[int, ...]]]:
    if _create is None or _resolve is None or _select is None:
        raise BackendUnavailableError(
            "no backend is registered with the runtime: import asyncgpu (the package), which "
            "loads asyncgpu.backends, instead of a runtime module alone"
        )
    return _create, _resolve, _select


def create(options: Options) -> Any:
    """A new backend for ``options`` (wrapped in the happens-before checker where it applies)."""
    return _registered()[0](options)


def resolve(options: Options) -> str:
    """The backend name ``options.backend`` stands for on this machine."""
    return _registered()[1](options)


def select(options: Options) -> tuple[int, ...]:
    """The device numbers ``options.devices`` selects on this machine, without making a
    backend (DeviceError for a device it lacks: ``asyncgpu.configure`` asks before it retires
    the runtime in use)."""
    return _registered()[2](options)
