# C types of asyncgpu/runtime/memory.py where Cython compiles it (setup.py); the .py is the code.
cimport cython

from asyncgpu.core.deps cimport Access


cdef class ExplicitMemory:
    cdef public object runtime

    @cython.locals(acc=Access)
    cpdef make_device_current(self, accesses)

    @cython.locals(acc=Access)
    cpdef before_device(self, accesses)
