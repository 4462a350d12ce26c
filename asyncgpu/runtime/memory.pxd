# C types of asyncgpu/runtime/memory.py where Cython compiles it (setup.py); the .py is the code.
cimport cython

from asyncgpu.core.deps cimport Access
from asyncgpu.core.placement cimport device_bit
from asyncgpu.core.statistics cimport Counters
from asyncgpu.core.streams cimport StreamManager
from asyncgpu.runtime.allocation cimport Allocation, View


# (C calls from the host-access path, which runs once per host access: a call through
# Python's protocol parses its arguments in a wrapper whose code a cold step fetches too)
cpdef int holder(location) except? -2

cpdef tuple host_read(int location, bint whole)

cpdef tuple host_write(int location, bint whole, bint dense)


cdef class ExplicitMemory:
    cdef public dict copying_in, host_busy
    cdef public object runtime

    @cython.locals(acc=Access, alloc=Allocation, bit=int, location=int)
    cpdef make_device_current(self, accesses, int device=*)

    @cython.locals(acc=Access, alloc=Allocation, bit=int)
    cpdef before_device(self, accesses, int device=*)

    @cython.locals(alloc=Allocation, location=int, on_devices=bint, whole=bint)
    cpdef bint before_host(self, View array, Py_ssize_t lo, Py_ssize_t hi, bint write,
                           bint dense) except -1

    @cython.locals(alloc=Allocation, streams=StreamManager, stats=Counters)
    cpdef fetch(self, View array, Py_ssize_t lo, Py_ssize_t hi, list after, label)

    cpdef dict host_waits(self, bint write, bint fetch, dict found)

    @cython.locals(alloc=Allocation, whole=bint, copy_in=bint, after=int)
    cpdef after_host(self, View array, Py_ssize_t lo, Py_ssize_t hi, bint write, bint dense)
