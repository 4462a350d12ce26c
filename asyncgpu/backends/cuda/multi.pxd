# C types of asyncgpu/backends/cuda/multi.py where Cython compiles it (setup.py); the .py is the
# code.
cimport cython
from libc.stdint cimport intptr_t

from asyncgpu.backends.cuda.backend cimport CudaBackend
from asyncgpu.backends.cuda.calls cimport CudaCalls
from asyncgpu.core.backend cimport Backend
from asyncgpu.core.dag cimport Node


cdef class MultiCudaBackend(Backend):
    cdef object __weakref__
    cdef public tuple devices
    cdef public list parts
    cdef public dict _slots
    cdef public object captures, cupy, runtime, _bandwidth
    cdef public bint explicit, prefetches, host_coherent_while_busy
    cdef public int device_count

    cpdef CudaBackend _of(self, stream)

    @cython.locals(part=CudaBackend)
    cpdef record(self, event, stream)

    @cython.locals(part=CudaBackend)
    cpdef wait(self, stream, event)

    cpdef bint event_done(self, event) except -1

    @cython.locals(part=CudaBackend, calls=CudaCalls, previous=intptr_t)
    cpdef kernel_launch(self, kernel, launcher, arrays, values, site, int device=*)

    @cython.locals(part=CudaBackend, calls=CudaCalls, previous=intptr_t)
    cpdef launch(self, Node node, stream)

    cpdef host_wait(self, event)

    cpdef graph_launch(self, graph, stream)
