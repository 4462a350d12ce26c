# C types of asyncgpu/backends/capture.py where Cython compiles it (setup.py); the .py is the
# code. A graph launch's checks are a C call from the CUDA backend (``cimport``).
from asyncgpu.runtime.allocation cimport explicit_frees


cpdef check_launch(graph, stream, tracker)
