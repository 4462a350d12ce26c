# C types of asyncgpu/runtime/host_access.py where Cython compiles it (setup.py); the .py is the
# code.
cimport cython

from asyncgpu.core.deps cimport Access, access
from asyncgpu.runtime.allocation cimport Allocation, View
from asyncgpu.runtime.issue cimport Issuing
from asyncgpu.runtime.memory cimport holder


cdef class HostAccess(Issuing):
    @cython.locals(alloc=Allocation, refused=bint, location=int)
    cpdef read_element(self, View array, offset)

    @cython.locals(alloc=Allocation)
    cpdef begin_host_access(self, View array, lo, hi, bint write, bint dense=*,
                            bint refused=*)

    cpdef synchronize(self)

    cpdef _synchronize_locked(self, str reason=*)

    cpdef _all_finished(self, str reason=*)
    cpdef _forget_dropped_graphs(self)

    cpdef bint _waits_unlocked(self) except -1

    @cython.locals(alloc=Allocation)
    cpdef end_host_access(self, View array, lo, hi, bint write, bint dense=*)

    # (C calls within the host-access path)
    cpdef list _conflicts_pending(self, View array, lo, hi, bint write)

    cpdef list _latest(self, list accesses)

    cpdef _wait_unlocked(self, list events)

    @cython.locals(alloc=Allocation)
    cpdef _write_locked(self, View array, lo, hi, bint dense, key, value, bint large)

    @cython.locals(alloc=Allocation)
    cpdef Access _access(self, View array, lo, hi, bint write, label)
