# C types of asyncgpu/backends/cuda/backend.py where Cython compiles it (setup.py); the .py is
# the code.
cimport cython

from asyncgpu.backends.capture cimport check_launch
from asyncgpu.backends.cuda.calls cimport CudaCalls
from asyncgpu.backends.cuda.kernels cimport PackedLaunch, make_launch
from asyncgpu.core.backend cimport Backend
from asyncgpu.core.dag cimport Node


cdef class CudaBackend(Backend):
    cdef object __weakref__
    cdef public object _debug_stream, _driver_error, _fetch_stream
    cdef public object captures, cupy, device_name, driver, fault, pool, runtime
    cdef public CudaCalls calls
    cdef public object _lane_cost_s, _peak_bandwidth, _timing_gate, _green
    cdef public set _graphs_in_flight
    cdef public dict _numba_streams
    cdef public object _recent
    cdef public bint _capturing, explicit, host_coherent_while_busy, packed_launches
    cdef public bint single_node_graphs
    cdef public int device, sm_count, slot
    cdef public object cache_keys, copies
    cdef public dict targets

    cpdef record(self, event, stream)

    cpdef wait(self, stream, event)

    cpdef bint event_done(self, event) except -1

    cpdef kernel_launch(self, kernel, launcher, arrays, values, site, int device=*)

    @cython.locals(at=Py_ssize_t, packed=PackedLaunch)
    cpdef launch(self, Node node, stream)

    cpdef host_wait(self, event)

    @cython.locals(calls=CudaCalls, inflight=set)
    cpdef graph_launch(self, graph, stream)
