# C types of asyncgpu/core/interference.py where Cython compiles it (setup.py); the .py is the code.
cimport cython

from asyncgpu.core.dag cimport Node
from asyncgpu.core.deps cimport Access, DependencyTracker
from asyncgpu.core.streams cimport StreamManager, StreamState, pool_of


@cython.locals(total=cython.longlong, a=Access)
cpdef long long moved_bytes(list accesses) except -1


cdef class Sample:
    cdef public object key, start, end, done


cdef class InterferenceRule:
    cdef public object backend, attributes, verdicts, verdict, _suspects, _seen, _trials
    cdef public long long device_threads, min_bytes
    cdef public int tries

    @cython.locals(nbytes=cython.longlong, key=tuple, apart=list, s=StreamState, other=Node,
                   sample=Sample, seen=int, pool=int, found=dict, devices=int, levels=list,
                   level=int)
    cpdef list partners(self, Node node, launcher, list arrays, int tenant,
                        StreamManager streams, DependencyTracker deps)

