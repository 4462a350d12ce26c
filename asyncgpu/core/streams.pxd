# C types of asyncgpu/core/streams.py where Cython compiles it (setup.py); the .py is the code.
cimport cython

from asyncgpu.core.backend cimport Backend
from asyncgpu.core.dag cimport Node
from asyncgpu.core.policies cimport NewStreamPolicy, ParentStreamPolicy
from asyncgpu.core.statistics cimport Counters


cdef class StreamState:
    cdef public object index, handle, inflight
    cdef public Py_ssize_t seq, issue
    cdef public dict waited
    cdef public int device, pool


cdef class StreamManager:
    cdef public Backend backend
    cdef public NewStreamPolicy new_policy
    cdef public ParentStreamPolicy parent_policy
    cdef public Counters stats
    cdef public dict _by_use
    cdef public list _events, _frees, _members, _limits, _partitions, _priorities, streams
    cdef public Py_ssize_t _inflight, max_streams, poll_threshold, devices, _device, _pool
    cdef public Py_ssize_t issues

    @cython.locals(stream=StreamState, device=Py_ssize_t, pool=Py_ssize_t)
    cpdef choose(self, Node node, list parents)

    @cython.locals(s=StreamState)
    cpdef list moved_since(self, Py_ssize_t tenant, Py_ssize_t mark)

    @cython.locals(stream=StreamState, p=Node, ps=StreamState, cur=Node, by_stream=dict,
                   waited=dict)
    cpdef wait_for_parents(self, Node node, list parents)

    @cython.locals(stream=StreamState, by_use=dict, events=list)
    cpdef issued(self, Node node, recorded=*)

    @cython.locals(s=StreamState, tail=Node, head=Node)
    cpdef poll(self)

    cpdef bint _retire_if_done(self, Node node) except -1

    @cython.locals(stream=StreamState)
    cpdef _on_finish(self, Node node)

    @cython.locals(count=Py_ssize_t, stack=list, n=Node, m=Node, p=Node, stream=StreamState)
    cpdef Py_ssize_t finished(self, Node node) except -1

    @cython.locals(s=StreamState, free=object)
    cpdef take_free(self)

    @cython.locals(s=StreamState)
    cpdef all_finished(self)

    # (C calls from the host-access path, with their nodes' fields read as C fields)
    @cython.locals(latest=dict, n=Node, s=StreamState, cur=Node)
    cpdef list latest(self, nodes)

    cpdef host_wait(self, nodes)

    @cython.locals(n=Node)
    cpdef retire(self, nodes, bint wait=*)


cpdef Py_ssize_t pool_of(Py_ssize_t tenant, Py_ssize_t device, Py_ssize_t devices)

cpdef bint _pooled(Node node) except -1
