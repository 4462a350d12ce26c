"""The runtime layer: arrays, kernels and library calls as nodes, issued through one runtime.

The execution context (``context``) and its issue path (``issue``), host access
(``host_access``), the explicit memory model (``memory``) and frozen graphs (``frozen``), the
process-wide runtime (``current``), arrays (``array``, ``operators``, ``indexing``, ``chunks``,
``node_ops``), kernels and their binding (``kernel``, ``kernel_builders``, ``checks``,
``signature``), library calls (``library``, ``effects``, ``array_modules``, ``cupy_random``,
``cupy_surface``, ``cupy_testing``), configuration changes (``switch``), interop (``interop``)
and the public functions (``api``). It makes backends through the factory the backend layer
registers (``backend_registry``), and lets the recorder and the tracer in through hooks
(``Runtime.recording``, ``context.NEW_RUNTIME_HOOKS``): it imports neither, nor any backend.
"""

# The package composes itself on first import, before any runtime or array exists: the
# execution context installs the runtime class (``current.install``), and the modules that
# implement an array's node-making operations fill their table (``node_ops.ops``).
from . import context, export, indexing, interop, library  # noqa: F401,E402
