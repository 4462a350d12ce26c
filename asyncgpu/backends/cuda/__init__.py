"""The ``cuda`` backend: CuPy and the CUDA driver (imported only when this backend is made)."""
