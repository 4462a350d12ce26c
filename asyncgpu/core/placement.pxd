# C types of asyncgpu/core/placement.py where Cython compiles it (setup.py); the .py is the code.
cimport cython


cpdef int device_bit(int slot)


cdef class Placement:
    cdef public object bandwidth, policy
    cdef public int code, n, next
    cdef public double threshold

    @cython.locals(n=int, start=int, k=int, d=int)
    cpdef int _turn(self, values, bound, bint equal) except -2

    @cython.locals(n=int, d=int, code=int, need=tuple, held=list, homes=list,
                   total=cython.longlong, top=cython.longlong)
    cpdef int choose(self, needs, busy, bint data_first=*) except -2

    @cython.locals(held=list, d=int, n=int, need=tuple, location=cython.longlong)
    cpdef list held_bytes(self, needs)

    cpdef list transfer_times(self, needs, bint worst)
