# C types of asyncgpu/runtime/allocation.py where Cython compiles it (setup.py); the .py is the code.
cimport cython

cdef Py_ssize_t _frees

cpdef Py_ssize_t explicit_frees()


@cython.auto_pickle(False)
cdef class Allocation:
    cdef public object runtime, buffer, id, copy_back, requeue
    cdef public Py_ssize_t nbytes
    cdef public int location, home
    cdef public bint freed, fixed, exported
    cdef object __weakref__


@cython.auto_pickle(False)
cdef class View:
    cdef public Allocation _alloc
    cdef public object shape, dtype, strides
    cdef public Py_ssize_t _offset, _lo, _hi
    cdef public dict _cache
    cdef public bint _contiguous

    cpdef describe(self)


@cython.locals(self=View, itemsize=Py_ssize_t)
cpdef new_view(cls, Allocation alloc, shape, dtype, strides, Py_ssize_t offset)

@cython.locals(lo=Py_ssize_t, hi=Py_ssize_t, span=Py_ssize_t)
cpdef tuple byte_extent(shape, strides, Py_ssize_t itemsize, Py_ssize_t offset)

@cython.locals(expected=Py_ssize_t)
cpdef bint c_contiguous(shape, strides, Py_ssize_t itemsize) except -1
