# C types of asyncgpu/core/dag.py where Cython compiles it (setup.py); the .py is the code.
cimport cython


cdef class Node:
    cdef public object id, kind, name, site, stream, event, parents, edges, accesses
    cdef public object keepalive, launch
    cdef public Py_ssize_t seq
    cdef public bint finished, handed_off
    cdef public int device, tenant


@cython.locals(cands=list, count=Py_ssize_t, first=Node, second=Node, c=Node, implied=set)
cpdef list reduce_parents(candidates)
