# C types of asyncgpu/backends/cuda/kernels.py where Cython compiles it (setup.py); the .py is
# the code.
cimport cython

from asyncgpu.backends.cuda.packed cimport PackedPlan
from asyncgpu.runtime.allocation cimport View
from asyncgpu.runtime.kernel cimport ArrayArg, Kernel, Launcher


cdef class NumbaLaunch:
    cdef public object backend, compiled, args, grid, block, shared


cdef class RawLaunch:
    cdef public object raw, args, grid, block, shared


@cython.final
cdef class PackedTarget:
    cdef public object backend, key, shared, ptr_key, nbf_key, kernel_name
    cdef public PackedPlan plan
    cdef public tuple grid, block

    @cython.locals(key=list, flat=list, n=Py_ssize_t, i=Py_ssize_t, cache=dict, fields=tuple,
                   arr=View)
    cpdef numba_values(self, values)

    @cython.locals(args=list, a=ArrayArg, cache=dict, arr=View)
    cpdef pointer_values(self, values, arrays)


@cython.final
cdef class PackedLaunch:
    cdef public PackedTarget target
    cdef public tuple values

    @cython.locals(t=PackedTarget)
    cpdef enqueue(self, stream)


@cython.locals(launch=PackedLaunch)
cpdef PackedLaunch packed_launch(PackedTarget target, tuple values)

@cython.locals(target=PackedTarget)
cpdef make_launch(backend, Kernel kernel, Launcher launcher, arrays, values, site)

@cython.locals(target=PackedTarget)
cpdef _cuda_c_launch(backend, Kernel kernel, Launcher launcher, arrays, values, site)

cpdef _target(backend, Launcher launcher)
