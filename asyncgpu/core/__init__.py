"""The core layer: the scheduling model, with no CUDA and no import of the layers above.

Accesses and the dependency tracker (``deps``), the DAG's nodes and their retirement (``dag``),
the stream manager and its stream-choice policies (``streams``, ``policies``), the
happens-before checker (``hb``), the runtime's counters (``statistics``), the instrument hooks
(``instrument``), options (``config``), the exceptions (``errors``) and whether the hot path
runs compiled (``compiled``). Everything here works on plain Python objects and a backend
object it is handed; it never imports CuPy or Numba's CUDA target.
"""
