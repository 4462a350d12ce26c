# C types of asyncgpu/runtime/chunks.py where Cython compiles it (setup.py); the .py is the code.
cimport cython

from asyncgpu.runtime.allocation cimport Allocation, View
from asyncgpu.runtime.kernel cimport ArrayArg, Kernel


@cython.locals(length=Py_ssize_t, a=ArrayArg, arr=View, i=Py_ssize_t)
cpdef Py_ssize_t axis_length(Kernel kernel, list arrays, list values, site) except -1

@cython.locals(length=Py_ssize_t, chunks=Py_ssize_t, least=Py_ssize_t, a=ArrayArg,
               alloc=Allocation)
cpdef chunk_plan(rt, Kernel kernel, list arrays, list values, site, int device)
