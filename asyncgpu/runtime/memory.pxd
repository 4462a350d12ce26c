# C types of asyncgpu/runtime/memory.py where Cython compiles it (setup.py); the .py is the code.
cimport cython

from asyncgpu.core.deps cimport Access
from asyncgpu.core.placement cimport device_bit
from asyncgpu.runtime.allocation cimport Allocation


cdef class ExplicitMemory:
    cdef public dict copying_in
    cdef public object runtime

    @cython.locals(acc=Access, alloc=Allocation, bit=int, location=int)
    cpdef make_device_current(self, accesses, int device=*)

    @cython.locals(acc=Access, alloc=Allocation, bit=int)
    cpdef before_device(self, accesses, int device=*)
