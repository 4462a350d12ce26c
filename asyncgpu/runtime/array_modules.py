"""The array library each backend runs library calls with: CuPy on ``cuda``, NumPy on ``sim``.

The one place that picks it. Callers look it up here at call time
(``array_modules.backend_module(name)``), so a test can stand a fake CuPy in for the ``cuda``
backend's by replacing this one function.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def backend_module(backend: str) -> Any:
    """The array library a backend runs calls with: CuPy on ``cuda``, NumPy on ``sim``."""
    if backend == "cuda":
        import cupy
        return cupy
    return np
