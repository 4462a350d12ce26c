"""Compatibility shims that must run before Numba's CUDA target is imported.

numba-cuda 0.30.4 overloads ``np.row_stack`` when ``numba.cuda`` is imported, and NumPy 2.5
removed that alias, so the import fails with ``AttributeError``. ``row_stack`` was always
``vstack`` under another name, so restoring the alias is exact.
"""

from __future__ import annotations

import numpy as np

if not hasattr(np, "row_stack"):
    np.row_stack = np.vstack  # type: ignore[attr-defined]
