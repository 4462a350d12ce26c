# C types of asyncgpu/recorder/keys.py where Cython compiles it (setup.py); the .py is the code.
cimport cython


cdef class Launch:
    cdef public object launcher, arrays, values, site, key
    cdef public tuple args
    cdef public int pin, tenant


cdef class Piece(Launch):
    cdef public Py_ssize_t piece, pieces
    cdef public tuple whole


cdef class RecordingKey:
    cdef public object token
    cdef public tuple parts
    cdef public Py_hash_t hash


cdef class LaunchMemo:
    cdef public list launches
    cdef public RecordingKey key
    cdef public Py_ssize_t frees
    cdef public object replayed, splits
    cdef public bint steady

    @cython.locals(frees=Py_ssize_t)
    cpdef bint usable(self) except -1


@cython.locals(n=Py_ssize_t, i=Py_ssize_t)
cpdef bint same_arguments(tuple old, tuple new) except -1


cpdef object argument_key(tuple args, dict kwargs)

cpdef object value_key(v)
