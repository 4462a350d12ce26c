# C types of asyncgpu/runtime/issue.py where Cython compiles it (setup.py); the .py is the code.
cimport cython

from asyncgpu.core.backend cimport Backend
from asyncgpu.core.dag cimport Node, reduce_parents
from asyncgpu.core.placement cimport Placement, device_bit
from asyncgpu.core.deps cimport Access, DependencyTracker
from asyncgpu.core.interference cimport InterferenceRule, Sample
from asyncgpu.core.statistics cimport Counters
from asyncgpu.core.streams cimport StreamManager, StreamState
from asyncgpu.runtime.allocation cimport Allocation
from asyncgpu.runtime.frozen cimport FrozenGraph
from asyncgpu.runtime.kernel cimport Kernel, Launcher
from asyncgpu.runtime.memory cimport ExplicitMemory
from asyncgpu.runtime.recording_hook cimport RecordingHook


cdef class Issuing:
    cdef public object _instruments, _issuing, _lock, _releases, graph_config, graphs
    cdef public list _lent
    cdef public Py_ssize_t _lent_bytes
    cdef public Backend backend
    cdef public object _acquire, _release
    cdef public object last_replay, options, retired, devices, _pins, open_pins, tenants
    cdef public object regulator, gate
    cdef public object exclusive_steps, one_core
    cdef public dict _host_busy
    cdef public InterferenceRule interference, _rule
    cdef public Placement placement
    cdef public RecordingHook recording
    cdef public ExplicitMemory memory
    cdef public DependencyTracker deps
    cdef public StreamManager streams
    cdef public Counters stats
    cdef public bint _plain_reads, _short_reads, no_const, prefetch, graph_read_back
    cdef public bint sync_mode, want_sites, _tenanted
    cdef public Py_ssize_t host_epoch

    @cython.locals(node=Node, kernel=Kernel, arrays=list, values=list, accesses=list,
                   index=Py_ssize_t)
    cpdef launch_kernel(self, Launcher launcher, args, Py_ssize_t pieces=*)

    @cython.locals(explicit=bint, enqueued=bint, parents=list, streams=StreamManager,
                   stream=StreamState, stats=Counters, p=Node, acc=Access, alloc=Allocation,
                   bit=int, location=int, edges=dict, several=bint)
    cpdef _issue(self, Node node, graph=*, dict found=*, edge_counts=*)

    @cython.locals(node=Node, deps=DependencyTracker, previous=Node, last=tuple, repeat=tuple,
                   memory=ExplicitMemory, placed=bint)
    cpdef launch_graph(self, FrozenGraph frozen)

    cpdef _drain_releases(self)

    cpdef int pinned(self) except -2


    # (a C call: Cython 3.3.0 dropped the read of node.accesses from it as a Python method)
    @cython.locals(placement=Placement, needs=list, alloc=Allocation)
    cpdef _place(self, Node node)
