"""The runtime layer: arrays, kernels and library calls as nodes, issued through one runtime.

The execution context (``context``) and its issue path (``issue``), host access
(``host_access``) and the explicit memory model (``memory``), arrays (``array``, ``operators``,
``indexing``, ``chunks``), kernels and their binding (``kernel``, ``kernel_builders``,
``checks``, ``signature``), library calls (``library``, ``effects``, ``cupy_random``,
``cupy_surface``, ``cupy_testing``), configuration changes (``switch``), interop (``interop``)
and the public functions (``api``). It drives a backend through the interface the backends
register (``backend``), and lets the recorder and tracer in through hooks: it imports
neither, nor any backend.
"""
