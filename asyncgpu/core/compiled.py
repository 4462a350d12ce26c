"""The optional compiled module, ``asyncgpu._speedups``, and the one switch between it and Python.

The model
---------
A few hot methods exist twice: in Python, which is the reference and the whole implementation
where the C module is not built, and in C (``asyncgpu/csrc``), with the same answers
and side effects. A class with compiled methods takes a compiled base class before its Python
one (:func:`bases`), so the compiled methods win the method lookup; :func:`use` turns them off
by setting each Python method on the class itself, and on again by deleting those. Tests run
both ways (the ``compiled`` fixture of ``tests/conftest.py``); ``ASYNCGPU_SPEEDUPS=0`` starts a
process with the Python methods.

Invariant: whichever is in use, every method behaves the same; only its cost differs.

Example::

    class DependencyTracker(*bases("TrackerBase", PythonTracking)): ...
    register(DependencyTracker, PythonTracking, ("conflicts", "commit"))
    use(False)      # both run their Python versions from now on
"""

from __future__ import annotations

from .config import speedups_requested

try:
    from .. import _speedups as speedups
except ImportError:     # not built (a source tree, or no C compiler at install): Python only
    speedups = None

_registered: list[tuple[type, type, tuple[str, ...]]] = []
_on = speedups_requested() and speedups is not None     # (the variable checked either way)


def bases(compiled: str, python: type) -> tuple[type, ...]:
    """The base classes of a class whose methods in ``python`` have compiled versions in
    ``asyncgpu._speedups.<compiled>``: both (compiled first) when built, else ``python``."""
    return (getattr(speedups, compiled), python) if speedups is not None else (python,)


def register(cls: type, python: type, names: tuple[str, ...]) -> None:
    """Put ``cls``'s methods ``names`` under :func:`use` (their Python versions in ``python``)."""
    _registered.append((cls, python, names))
    _apply(cls, python, names)


def use(on: bool) -> bool:
    """Use the compiled methods (``on``, where built) or the Python ones; returns whether the
    compiled ones are in use."""
    global _on
    _on = on and speedups is not None
    for entry in _registered:
        _apply(*entry)
    return _on


def in_use() -> bool:
    """Whether the compiled methods are in use."""
    return _on


def configure(function: str, *args: object) -> None:
    """Call ``asyncgpu._speedups.<function>(*args)``, which hands the compiled methods the
    classes and callables they read (nothing where the module is not built)."""
    if speedups is not None:
        getattr(speedups, function)(*args)


def _apply(cls: type, python: type, names: tuple[str, ...]) -> None:
    for name in names:
        if _on:
            if name in cls.__dict__:
                delattr(cls, name)      # the compiled base's method again
        elif speedups is not None:
            setattr(cls, name, python.__dict__[name])

