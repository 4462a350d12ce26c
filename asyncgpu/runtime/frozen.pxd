# C types of asyncgpu/runtime/frozen.py where Cython compiles it (setup.py); the .py is the code.
cimport cython


cdef class FrozenGraph:
    cdef public object graph, accesses, launches, events, name, recording, plan, last, repeat
    cdef public object splits
    cdef public tuple copy_in, copy_only, written, inputs, overwritten, read_back
    cdef public Py_ssize_t kernels, copy_bytes, settled, replay_version
    cdef object __weakref__

    cpdef tuple host_current(self, rt)


cpdef tuple copy_key(tuple allocs)
