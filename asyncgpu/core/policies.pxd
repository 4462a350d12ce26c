# C types of asyncgpu/core/policies.py where Cython compiles it (setup.py); the .py is the code.
cimport cython

from asyncgpu.core.dag cimport Node


cdef class NewStreamPolicy:
    cpdef pick(self, pool)


cdef class ParentStreamPolicy:
    cpdef pick(self, list parents)


cdef class Reuse(NewStreamPolicy):
    cpdef pick(self, pool)


cdef class AlwaysNew(NewStreamPolicy):
    cpdef pick(self, pool)


cdef class Serial(NewStreamPolicy):
    cpdef pick(self, pool)


cdef class RandomStream(NewStreamPolicy):
    cdef public object rng

    cpdef pick(self, pool)


cdef class Disjoint(ParentStreamPolicy):
    @cython.locals(p=Node)
    cpdef pick(self, list parents)


cdef class SameAsParent(ParentStreamPolicy):
    cpdef pick(self, list parents)
