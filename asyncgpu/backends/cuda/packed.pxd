# C types of asyncgpu/backends/cuda/packed.py where Cython compiles it (setup.py); the .py is the
# code.
cimport cython
from libc.stdint cimport intptr_t

from asyncgpu.backends.cuda.calls cimport CudaCalls


@cython.final
cdef class PackedPlan:
    # (handle and extra_ptr: C integers, passed to CudaCalls.launch_kernel in C)
    cdef public intptr_t handle, extra_ptr
    cdef public object struct, buf, buf_ptr, size, extra, pack
    cdef public CudaCalls calls
    cdef public tuple splits

    cpdef launch(self, values, tuple grid, tuple block, shared, stream_ptr)
