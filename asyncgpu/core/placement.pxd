# C types of asyncgpu/core/placement.py where Cython compiles it (setup.py); the .py is the code.
cimport cython


cdef class Placement:
    cdef public object bandwidth, policy
    cdef public int n, next
    cdef public double threshold

    @cython.locals(n=int, start=int, best=int, gap=int, d=int)
    cpdef int _turn(self, candidates) except -2

    @cython.locals(n=int, d=int, top=object, total=object, least=object)
    cpdef int choose(self, needs, busy, bint data_first=*) except -2

    @cython.locals(held=list, d=int, n=int, location=object, size=object, reads=object)
    cpdef list held_bytes(self, needs)

    cpdef list transfer_times(self, needs, bint worst)
