# C types of asyncgpu/core/backend.py where Cython compiles it (setup.py); the .py is the code.
from asyncgpu.core.dag cimport Node


cdef class Backend:
    cpdef kernel_launch(self, kernel, launcher, arrays, values, site, int device=*)

    cpdef launch(self, Node node, stream)

    cpdef graph_launch(self, graph, stream)

    cpdef record(self, event, stream)

    cpdef wait(self, stream, event)

    cpdef bint event_done(self, event) except -1

    cpdef host_wait(self, event)
