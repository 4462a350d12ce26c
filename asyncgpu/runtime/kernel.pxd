# C types of asyncgpu/runtime/kernel.py where Cython compiles it (setup.py); the .py is the code.
cimport cython

from asyncgpu.core.deps cimport Access
from asyncgpu.runtime.allocation cimport Allocation, View
from asyncgpu.runtime.recording_hook cimport RecordingHook, this_thread
from asyncgpu.runtime.issue cimport Issuing


cdef dict _current


cdef class ArrayArg(Access):
    cdef public Py_ssize_t index
    cdef public object param, array


@cython.locals(self=ArrayArg, alloc=Allocation)
cpdef ArrayArg array_arg(Py_ssize_t index, param, View array, bint read, bint write)


cdef class Kernel:
    cdef public object name, params, modes, source, elementwise, broadcast, grid_offset
    cdef public bint grid_stride
    cdef public object _launchers, _compiled
    cdef public tuple _slots
    cdef public bint typed
    cdef object __weakref__

    @cython.locals(slots=tuple, typed=bint, arrays=list, values=list, foreign=list,
                   read=bint, write=bint, is_array=bint, plain=tuple, k=Py_ssize_t, i=Py_ssize_t,
                   arr=View, alloc=Allocation)
    cpdef tuple bind(self, runtime, args, site)


cdef class Launcher:
    cdef public object kernel, grid, block, shared, grid3, block3, prepared

    @cython.locals(rec=RecordingHook, rt=Issuing)
    cpdef schedule(self, tuple args)
