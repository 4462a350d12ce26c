# C types of asyncgpu/backends/cuda/packed.py where Cython compiles it (setup.py); the .py is the
# code.
cimport cython


@cython.final
cdef class PackedPlan:
    # (handle, extra_ptr: the Python ints every launch passes on, never converted per launch)
    cdef public object handle, struct, buf, buf_ptr, size, extra, extra_ptr, launch_fn, pack
    cdef public tuple splits

    cpdef launch(self, values, tuple grid, tuple block, shared, stream_ptr)
