# C types of asyncgpu/core/deps.py where Cython compiles it (setup.py); the .py is the code.
cimport cython

from asyncgpu.core.dag cimport Node


cdef class Access:
    cdef public object key, alloc, label
    cdef public Py_ssize_t lo, hi
    cdef public bint write, read


cpdef Access access(key, alloc, Py_ssize_t lo, Py_ssize_t hi, bint write, label)


cdef class _Live:
    cdef public list writes
    cdef public dict reads


cdef class DependencyTracker:
    cdef public dict _live
    cdef public Py_ssize_t version

    @cython.locals(found=dict, live_map=dict, acc=Access, live=_Live, lo=Py_ssize_t,
                   hi=Py_ssize_t, writes=list, elo=Py_ssize_t, ehi=Py_ssize_t, node=Node,
                   reasons=list)
    cpdef dict conflicts(self, accesses)

    @cython.locals(live_map=dict, acc=Access, live=_Live, lo=Py_ssize_t, hi=Py_ssize_t,
                   writes=list, reads=dict, entries=list, kept=list, mine=list, e=tuple,
                   elo=Py_ssize_t, ehi=Py_ssize_t)
    cpdef commit(self, Node node, accesses)

    @cython.locals(live=_Live, node=Node)
    cpdef bint writes_beyond(self, key, known) except -1


@cython.locals(reasons=list)
cpdef _add(dict found, Node node, reason, label)

@cython.locals(stale=bint, elo=Py_ssize_t, ehi=Py_ssize_t, node=Node)
cpdef _scan(list entries, Py_ssize_t lo, Py_ssize_t hi, reason, label, dict found)

@cython.locals(alive=bint, elo=Py_ssize_t, ehi=Py_ssize_t, node=Node, entries=list)
cpdef _scan_reads(dict reads, Py_ssize_t lo, Py_ssize_t hi, label, dict found)
