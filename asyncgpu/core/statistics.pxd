# C types of asyncgpu/core/statistics.py where Cython compiles it (setup.py); the .py is the code.

cdef class Counters:
    cdef public Py_ssize_t nodes, kernels, event_waits, events_recorded, nodes_retired
    cdef public Py_ssize_t retired_by_poll, prefetches, bytes_prefetched, events_queried, calls
    cdef public Py_ssize_t host_accesses, streams_created, events_created, copies_to_device
    cdef public Py_ssize_t copies_to_host, bytes_to_device, bytes_to_host, graphs_recorded
    cdef public Py_ssize_t graphs_replayed, copies_peer, bytes_peer, serial
    cdef public dict edges
    cdef public object listener, syncs, placed
    cdef public set quiet
    cdef public set streams_used

    cpdef sync(self, str reason)
