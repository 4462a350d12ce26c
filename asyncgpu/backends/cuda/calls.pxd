# C types of asyncgpu/backends/cuda/calls.py where Cython compiles it (setup.py); the .py is the
# code. cudriver.pyx subclasses CudaCalls: the signatures below are its C method table.
from libc.stdint cimport intptr_t


cdef class CudaCalls:
    cdef object _launch, _record, _wait, _copy, _query, _sync, _get_device, _set_device
    cdef object _elapsed
    cdef intptr_t _device

    cpdef bint launches_kernels(self) except -1

    cpdef launch_kernel(self, intptr_t f, unsigned int gx, unsigned int gy, unsigned int gz,
                        unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared,
                        intptr_t stream, intptr_t extra)

    cpdef event_record(self, intptr_t event, intptr_t stream)

    cpdef stream_wait(self, intptr_t stream, intptr_t event, unsigned int flags)

    cpdef bint event_done(self, event) except -1

    cpdef double event_elapsed_ms(self, intptr_t start, intptr_t end) except? -2.0

    cpdef event_sync(self, event)

    cpdef memcpy_async(self, intptr_t dst, intptr_t src, size_t nbytes, int kind,
                       intptr_t stream)

    cpdef stream_sync(self, intptr_t stream)

    cpdef graph_launch(self, graph, stream)

    cpdef intptr_t enter(self) except? -1

    cpdef leave(self, intptr_t previous)
