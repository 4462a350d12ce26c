"""``asyncgpu.cupy.testing``: CuPy's array comparisons, for asyncgpu and NumPy arrays alike.

``acp.testing.assert_allclose(actual, desired)`` and its companions take an
:class:`asyncgpu.Array` or a NumPy array (or anything NumPy converts) in either position, as
``cupy.testing``'s take CuPy and NumPy arrays: asyncgpu arrays are read to the host (a host read,
which waits only for the writers of that array) and NumPy's ``numpy.testing`` compares. The
arguments and the ``AssertionError`` messages are NumPy's.
"""

from __future__ import annotations

from typing import Any

import numpy.testing as npt

from .array import Array

__all__ = [
    "assert_allclose", "assert_array_almost_equal", "assert_array_almost_equal_nulp",
    "assert_array_equal", "assert_array_less", "assert_array_list_equal",
    "assert_array_max_ulp",
]


def _host(x: Any) -> Any:
    """An asyncgpu array as a NumPy copy (a host read); anything else as it is."""
    return x.numpy() if isinstance(x, Array) else x


def assert_allclose(actual: Any, desired: Any, rtol: float = 1e-7, atol: float = 0,
                    err_msg: str = "", verbose: bool = True) -> None:
    """Raise ``AssertionError`` unless ``|actual - desired| <= atol + rtol * |desired|``
    elementwise (``numpy.testing.assert_allclose``)."""
    npt.assert_allclose(_host(actual), _host(desired), rtol=rtol, atol=atol, err_msg=err_msg,
                        verbose=verbose)


def assert_array_almost_equal(x: Any, y: Any, decimal: int = 6, err_msg: str = "",
                              verbose: bool = True) -> None:
    """Raise ``AssertionError`` unless equal to ``decimal`` places
    (``numpy.testing.assert_array_almost_equal``)."""
    npt.assert_array_almost_equal(_host(x), _host(y), decimal=decimal, err_msg=err_msg,
                                  verbose=verbose)


def assert_array_almost_equal_nulp(x: Any, y: Any, nulp: int = 1) -> None:
    """Raise ``AssertionError`` unless within ``nulp`` units in the last place
    (``numpy.testing.assert_array_almost_equal_nulp``)."""
    npt.assert_array_almost_equal_nulp(_host(x), _host(y), nulp=nulp)


def assert_array_max_ulp(a: Any, b: Any, maxulp: int = 1, dtype: Any = None) -> None:
    """Raise ``AssertionError`` unless at most ``maxulp`` units in the last place apart
    (``numpy.testing.assert_array_max_ulp``)."""
    npt.assert_array_max_ulp(_host(a), _host(b), maxulp=maxulp, dtype=dtype)


def assert_array_equal(x: Any, y: Any, err_msg: str = "", verbose: bool = True,
                       strict: bool = False) -> None:
    """Raise ``AssertionError`` unless shapes and elements are equal
    (``numpy.testing.assert_array_equal``)."""
    npt.assert_array_equal(_host(x), _host(y), err_msg=err_msg, verbose=verbose, strict=strict)


def assert_array_list_equal(xlist: Any, ylist: Any, err_msg: str = "",
                            verbose: bool = True) -> None:
    """Raise ``AssertionError`` unless two sequences of arrays have the same length and equal
    arrays, pair by pair."""
    if len(xlist) != len(ylist):
        raise AssertionError(f"List size is different: {len(xlist)} != {len(ylist)}"
                             + (f"\n{err_msg}" if err_msg else ""))
    for i, (x, y) in enumerate(zip(xlist, ylist)):
        npt.assert_array_equal(_host(x), _host(y), verbose=verbose,
                               err_msg=f"array {i} of the lists differs. {err_msg}".rstrip())


def assert_array_less(x: Any, y: Any, err_msg: str = "", verbose: bool = True) -> None:
    """Raise ``AssertionError`` unless ``x < y`` elementwise
    (``numpy.testing.assert_array_less``)."""
    npt.assert_array_less(_host(x), _host(y), err_msg=err_msg, verbose=verbose)


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    raise AttributeError(
        f"asyncgpu.cupy.testing has no attribute '{name}': it has the array comparisons "
        f"{', '.join(__all__)}; for other helpers use numpy.testing on np.asarray(x)"
    )

