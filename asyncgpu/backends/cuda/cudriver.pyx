# cython: language_level=3, binding=False, boundscheck=False, wraparound=False
# distutils: language = c++
"""The CUDA calls of a launch, made straight into the driver (``Options.direct_driver``).

The model
---------
Every launch on the ``cuda`` backend makes a few CUDA calls: ``cuLaunchKernel``, the event
record of its completion, perhaps a stream's wait for another stream's event, later an event
query; a graph replay makes ``cuGraphLaunch`` and a record; a copy node or a host read's fetch
makes ``cuMemcpyAsync``, and the fetch a wait for its stream. Through CuPy each is a wrapper
that parses Python integers, releases the GIL and checks the status, and the record, the wait,
the query and the copy go through the CUDA runtime, a layer above the driver.
:class:`DriverCalls` is the compiled-only subclass of
:class:`asyncgpu.backends.cuda.calls.CudaCalls` that makes the same calls (``launch_kernel``,
``event_record``, ``stream_wait``, ``event_done``, ``memcpy_async``, ``stream_sync``,
``graph_launch``) through cuda-python's Cython bindings of the driver
(``cuda.bindings.cydriver``). The backend and its packed plans reach these methods through
``CudaCalls``' C method table, so a launch goes from asyncgpu's compiled launch path to the
driver without a Python call.

One-node graphs (``single_node_graphs``): ``cuLaunchKernel`` costs about 4.7 us of host time on
the H100 machine, while ``cuGraphLaunch`` of an instantiated one-node graph costs about 2 us and
changing that node's parameters in the executable graph (``cuGraphExecKernelNodeSetParams``)
about 0.6 us (docs/performance.md). So each kernel function gets a *lane* on each stream it
runs on: a one-node graph, instantiated on the function's first launch there; every later
launch of it there sets the node's parameters (grid, block, shared memory, parameter buffer)
and launches the graph on the stream. A lane holds one function, because a handle comes in one
of two forms: the handle ``cuLaunchKernel`` takes may be a library's ``CUkernel`` (numba-cuda
loads its kernels through ``cuLibraryLoadData``), which a kernel node takes as ``kern``, not
``func``. A lane whose graph cannot be made with ``func`` is made with ``kern`` and keeps that
form.

Invariants
----------
* The same CUDA call with the same handles as CuPy would make (the driver function under the
  runtime one), and nothing else. A driver error raises ``error(status)`` (CuPy's
  ``CUDADriverError`` where the backend passes it), whose text starts with the error's name
  (``CUDA_ERROR_ILLEGAL_ADDRESS: ...``) and whose ``status`` is the ``CUresult``.
* A call refused because the thread has no current context (a new thread: the runtime layer
  would make the device's primary context current) makes the context that was current when the
  ``DriverCalls`` was made current on the thread, and is made again once.
* A kernel's launch (``cuLaunchKernel``, or its lane's ``cuGraphLaunch``) keeps the GIL: it
  returns in microseconds, and releasing the GIL there hands it to another waiting thread for
  a context switch each way per launch. A whole graph's launch (a replay) releases it, as
  CuPy's launches do. Either blocks while the stream's launch queue is full. A copy keeps it
  too; ``stream_sync`` polls with the GIL held for up to ``SPIN_NS`` (30 us) before it waits
  without it.
* Lanes: ordering is the stream's (a graph launch is stream-ordered work, and a lane is only
  launched on its own stream); updating an executable graph's parameters does not touch its
  launches already enqueued (CUDA's contract for executable-graph updates). A lane is used by
  one launch at a time, since its launch keeps the GIL. A lane is used only where the
  thread's current context is the one the lanes were made in (the driver crashes updating a
  node's parameters on a thread without one). The driver is asked once per thread (and again
  after a lane launch the driver refuses for the context): a thread-local remembers the
  context a thread was seen with, and a new thread starts with none. A thread that makes no
  context current after its launches began (a pop, a device reset) is outside that contract.
* Anything the driver refuses on the graph path (a parameter the node cannot take, another
  context's function, a full table) leaves the kernel to the ordinary ``cuLaunchKernel``, which
  reports the kernel's own error. If that ordinary launch succeeds, the lane was at fault and
  is not used again. Capture never sees a lane: the backend turns lanes off while any capture
  is engaged.
* Making a lane is cheap (tens of microseconds) except where the driver waits for the device
  to instantiate the graph, which it does with the GIL held here, holding back every thread:
  up to as long as the longest kernel in flight. A making that took over ``slow_make_ns``
  (1 ms) stops new lanes (``lanes_growing``) until ``grow_lanes`` (the backend calls it after
  a device-wide synchronize) or ``release_lanes``; lanes made stay in use, and kernels without
  one launch with ``cuLaunchKernel``.

Example (what asyncgpu/backends/cuda/driver.py does)::

    calls = DriverCalls(cupy)
    calls.single_node_graphs = True
    calls.event_record(event.ptr, stream.ptr)
"""

import logging

from libc.stdint cimport intptr_t
from libc.string cimport memset
from posix.time cimport CLOCK_MONOTONIC, clock_gettime, timespec

from asyncgpu.backends.cuda.calls cimport CudaCalls
from cuda.bindings cimport cydriver
from cuda.bindings.cydriver cimport (
    CUDA_ERROR_INVALID_CONTEXT,
    CUDA_ERROR_NOT_READY,
    CUDA_KERNEL_NODE_PARAMS,
    CUDA_SUCCESS,
    CUcontext,
    CUdeviceptr,
    CUevent,
    CUfunction,
    CUgraph,
    CUgraphExec,
    CUgraphNode,
    CUkernel,
    CUresult,
    CUstream,
)


cdef extern from *:
    """
    /* The context this thread was last seen to have current (DriverCalls._in_context): NULL
       on a new thread, so its first lane launch asks the driver. */
    static thread_local void *asyncgpu_lanes_context = NULL;
    """
    void* asyncgpu_lanes_context


cdef enum:
    LANE_EMPTY = 0
    LANE_READY = 1
    LANE_BROKEN = 2

# The lane table: open addressing on (stream, function), filled to at most _LANES_MAX (so a
# probe always meets an empty entry).
cdef enum:
    _LANES = 512
    _LANES_MAX = 384

#: The lane table's capacity: (function, stream) pairs beyond it launch with cuLaunchKernel.
LANES_MAX = _LANES_MAX

#: How long ``stream_sync`` polls with the GIL held before it waits without it (ns).
cdef long long SPIN_NS = 30_000

_log = logging.getLogger("asyncgpu")

#: A lane's making (graph, node, instantiation) that takes longer than this (ns) waited for
#: the device: no new lanes are made after it (``DriverCalls.slow_make_ns``).
SLOW_MAKE_NS = 1_000_000


cdef inline long long now_ns() noexcept nogil:
    cdef timespec t
    clock_gettime(CLOCK_MONOTONIC, &t)
    return <long long>t.tv_sec * 1_000_000_000 + t.tv_nsec


cdef struct Lane:
    CUstream stream
    CUfunction func
    CUgraph graph
    CUgraphNode node
    CUgraphExec graph_exec
    int state
    bint as_kernel      # func is a CUkernel (cuLibraryGetKernel: Numba's), given as ``kern``


class CUDADriverError(RuntimeError):
    """A CUDA driver error (CuPy's ``CUDADriverError``, where CuPy is not given): ``status`` is
    the ``CUresult``; the text starts with its name."""

    def __init__(self, status):
        self.status = int(status)
        super().__init__(error_text(self.status))


def error_text(int status):
    """``"CUDA_ERROR_NAME: description"`` of a ``CUresult``, as CuPy writes it."""
    cdef const char* name = NULL
    cdef const char* text = NULL
    cdef CUresult code = <CUresult>status
    try:
        if (cydriver.cuGetErrorName(code, &name) == CUDA_SUCCESS and name != NULL
                and cydriver.cuGetErrorString(code, &text) == CUDA_SUCCESS and text != NULL):
            return f"{name.decode()}: {text.decode()}"
    except Exception:       # (no driver to ask)
        pass
    return f"CUDA error {status}"


cdef inline size_t lane_hash(CUstream stream, CUfunction func) noexcept nogil:
    cdef size_t h = ((<size_t>stream) * <size_t>0x9E3779B97F4A7C15ULL) ^ ((<size_t>func) >> 4)
    return h ^ (h >> 29)


cdef class DriverCalls(CudaCalls):
    """DriverCalls(cupy): the CUDA calls of a launch, made straight into the driver (see the
    module docstring); a driver error raises CuPy's ``CUDADriverError`` (this module's
    :class:`CUDADriverError` where ``cupy`` has none). Made on the thread whose current context
    the launches use."""

    cdef object _error
    cdef CUcontext _context         # current at creation: made current on a thread without one
    cdef bint _lanes_available      # a context to make them in; the graph entry points work
    cdef bint _lanes_on             # ... and the backend wants lanes now (not while capturing)
    cdef int _n                     # entries of the table in use (ready or broken)
    cdef bint _grow                 # new lanes are made (until one's making waited: see below)
    cdef public long long slow_make_ns
    cdef unsigned long long _slow_makes
    cdef unsigned long long _lane_launches
    cdef Lane _lanes[_LANES]

    def __init__(self, cupy):
        CudaCalls.__init__(self, cupy)
        error = getattr(cupy.cuda.driver, "CUDADriverError", None)
        self._error = CUDADriverError if error is None else error
        cdef CUresult status = cydriver.cuCtxGetCurrent(&self._context)
        if status != CUDA_SUCCESS:
            self._context = NULL
            raise self._error(<int>status)
        self._lanes_available = self._context != NULL     # (lanes live in that context)
        self._grow = True
        self.slow_make_ns = SLOW_MAKE_NS

    def __dealloc__(self):
        self._release()

    # -- the calls (CudaCalls' C methods) ---------------------------------------------------

    cpdef bint launches_kernels(self) except -1:
        return True

    cpdef launch_kernel(self, intptr_t f, unsigned int gx, unsigned int gy, unsigned int gz,
                        unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared,
                        intptr_t stream, intptr_t extra):
        """cuLaunchKernel with the parameter buffer ``extra`` describes, or the kernel's
        one-node graph on the stream (``single_node_graphs``)."""
        cdef CUresult status
        cdef Lane* tried = NULL
        cdef CUDA_KERNEL_NODE_PARAMS p
        if self._lanes_on:
            p.func = <CUfunction><void*>f
            p.gridDimX, p.gridDimY, p.gridDimZ = gx, gy, gz
            p.blockDimX, p.blockDimY, p.blockDimZ = bx, by, bz
            p.sharedMemBytes = shared
            p.kernelParams = NULL
            p.extra = <void**>extra
            p.kern = NULL
            p.ctx = NULL
            if self._lane_launch(&p, <CUstream><void*>stream, &tried) == 0:
                return None
        # (with the GIL held: see _lane_launch)
        status = cydriver.cuLaunchKernel(<CUfunction><void*>f, gx, gy, gz, bx, by, bz,
                                         shared, <CUstream><void*>stream, NULL, <void**>extra)
        if status != CUDA_SUCCESS and self._rebind(status):
            status = cydriver.cuLaunchKernel(<CUfunction><void*>f, gx, gy, gz, bx, by, bz,
                                             shared, <CUstream><void*>stream, NULL,
                                             <void**>extra)
        if tried != NULL:
            self._outcome(tried, status)
        if status != CUDA_SUCCESS:
            raise self._error(<int>status)
        return None

    cpdef event_record(self, intptr_t event, intptr_t stream):
        """cuEventRecord."""
        cdef CUresult status = cydriver.cuEventRecord(<CUevent><void*>event,
                                                      <CUstream><void*>stream)
        if status != CUDA_SUCCESS and self._rebind(status):
            status = cydriver.cuEventRecord(<CUevent><void*>event, <CUstream><void*>stream)
        if status != CUDA_SUCCESS:
            raise self._error(<int>status)
        return None

    cpdef stream_wait(self, intptr_t stream, intptr_t event, unsigned int flags):
        """cuStreamWaitEvent."""
        cdef CUresult status = cydriver.cuStreamWaitEvent(<CUstream><void*>stream,
                                                          <CUevent><void*>event, flags)
        if status != CUDA_SUCCESS and self._rebind(status):
            status = cydriver.cuStreamWaitEvent(<CUstream><void*>stream,
                                                <CUevent><void*>event, flags)
        if status != CUDA_SUCCESS:
            raise self._error(<int>status)
        return None

    cpdef bint event_done(self, event) except -1:
        """Whether a CuPy event completed, by cuEventQuery."""
        cdef intptr_t e = event.ptr
        cdef CUresult status = cydriver.cuEventQuery(<CUevent><void*>e)
        if status != CUDA_SUCCESS and status != CUDA_ERROR_NOT_READY and self._rebind(status):
            status = cydriver.cuEventQuery(<CUevent><void*>e)
        if status == CUDA_SUCCESS:
            return True
        if status == CUDA_ERROR_NOT_READY:
            return False
        raise self._error(<int>status)

    cpdef double event_elapsed_ms(self, intptr_t start, intptr_t end) except? -2.0:
        """Milliseconds between two timing events, by cuEventElapsedTime; -1.0 while either
        has not completed."""
        cdef float ms = 0.0
        cdef CUresult status = cydriver.cuEventElapsedTime(&ms, <CUevent><void*>start,
                                                           <CUevent><void*>end)
        if status != CUDA_SUCCESS and status != CUDA_ERROR_NOT_READY and self._rebind(status):
            status = cydriver.cuEventElapsedTime(&ms, <CUevent><void*>start, <CUevent><void*>end)
        if status == CUDA_SUCCESS:
            return ms
        if status == CUDA_ERROR_NOT_READY:
            return -1.0
        raise self._error(<int>status)

    cpdef memcpy_async(self, intptr_t dst, intptr_t src, size_t nbytes, int kind,
                       intptr_t stream):
        """cuMemcpyAsync (unified addressing: the pointers give the direction, ``kind`` is
        not needed), with the GIL held as a kernel's launch: with a pinned host side it only
        enqueues the copy."""
        cdef CUresult status = cydriver.cuMemcpyAsync(<CUdeviceptr>dst, <CUdeviceptr>src,
                                                      nbytes, <CUstream><void*>stream)
        if status != CUDA_SUCCESS and self._rebind(status):
            status = cydriver.cuMemcpyAsync(<CUdeviceptr>dst, <CUdeviceptr>src, nbytes,
                                            <CUstream><void*>stream)
        if status != CUDA_SUCCESS:
            raise self._error(<int>status)
        return None

    cpdef stream_sync(self, intptr_t stream):
        """Block until ``stream``'s work is done: cuStreamQuery again and again with the GIL
        held, for at most ``SPIN_NS``, then cuStreamSynchronize without it. The runtime waits
        so for a host read's copy, under its lock: a copy of a few bytes lands in
        microseconds, while a release of the GIL there lets another thread take it, run until
        it needs the lock, and wait, and this thread wait for the GIL in turn."""
        cdef CUstream s = <CUstream><void*>stream
        cdef CUresult status = cydriver.cuStreamQuery(s)
        cdef long long deadline
        if status != CUDA_SUCCESS and status != CUDA_ERROR_NOT_READY and self._rebind(status):
            status = cydriver.cuStreamQuery(s)
        if status == CUDA_ERROR_NOT_READY:
            deadline = now_ns() + SPIN_NS
            while status == CUDA_ERROR_NOT_READY and now_ns() < deadline:
                status = cydriver.cuStreamQuery(s)
        if status == CUDA_ERROR_NOT_READY:
            with nogil:
                status = cydriver.cuStreamSynchronize(s)
        if status != CUDA_SUCCESS:
            raise self._error(<int>status)
        return None

    cpdef graph_launch(self, graph, stream):
        """cuGraphLaunch of a CuPy graph's executable graph; a graph without one yet (or not
        CuPy's) launches itself."""
        handle = getattr(graph, "graphExec", 0)
        if type(handle) is not int or not handle:
            graph.launch(stream)        # (CuPy instantiates it first)
            return None
        cdef CUgraphExec exec_ = <CUgraphExec><void*><intptr_t>handle
        cdef CUstream s = <CUstream><void*><intptr_t>stream.ptr
        cdef CUresult status
        with nogil:
            status = cydriver.cuGraphLaunch(exec_, s)
        if status != CUDA_SUCCESS and self._rebind(status):
            with nogil:
                status = cydriver.cuGraphLaunch(exec_, s)
        if status != CUDA_SUCCESS:
            raise self._error(<int>status)
        return None

    cpdef intptr_t enter(self) except? -1:
        """Make the context current at creation current; returns the thread's context before
        (NULL on a thread without one), for :meth:`leave`."""
        cdef CUcontext previous = NULL
        cdef CUresult status
        if self._context == NULL:
            return CudaCalls.enter(self)
        status = cydriver.cuCtxGetCurrent(&previous)
        if status == CUDA_SUCCESS and previous != self._context:
            status = cydriver.cuCtxSetCurrent(self._context)
        if status != CUDA_SUCCESS:
            raise self._error(<int>status)
        return <intptr_t><void*>previous

    cpdef leave(self, intptr_t previous):
        """Make ``previous`` (what :meth:`enter` returned) the thread's context again."""
        cdef CUresult status
        if self._context == NULL:
            return CudaCalls.leave(self, previous)
        if <CUcontext><void*>previous != self._context:
            status = cydriver.cuCtxSetCurrent(<CUcontext><void*>previous)
            if status != CUDA_SUCCESS:
                raise self._error(<int>status)
        return None

    def grow_lanes(self):
        """grow_lanes(): new lanes may be made again (after a device-wide synchronize: the
        device is idle, so a making does not wait for it)."""
        self._grow = True

    def release_lanes(self):
        """release_lanes(): wait for the device, then destroy the one-node graphs (later
        launches make them again)."""
        self._release()

    # -- the switch and the counters -------------------------------------------------------

    @property
    def single_node_graphs(self):
        """Whether launch_kernel enqueues each kernel as its stream's one-node graph; setting it
        True has no effect where the graph entry points are missing."""
        return self._lanes_on

    @single_node_graphs.setter
    def single_node_graphs(self, value):
        self._lanes_on = bool(value) and self._lanes_available

    @property
    def lane_launches(self):
        """How many kernels launch_kernel enqueued through a one-node graph."""
        return self._lane_launches

    @property
    def lanes_growing(self):
        """Whether a kernel launched on a stream where its function has no lane yet gets one:
        True until a lane's making takes longer than ``slow_make_ns`` (the driver waited for
        the device), and again after ``grow_lanes`` or ``release_lanes``."""
        return self._grow

    @property
    def slow_lane_makes(self):
        """How many lanes' makings took longer than ``slow_make_ns``."""
        return self._slow_makes

    @property
    def lanes_available(self):
        """Whether the one-node graphs can be used: a context was current at creation, and
        no graph entry point was found missing."""
        return self._lanes_available

    # -- internals -------------------------------------------------------------------------

    cdef bint _rebind(self, CUresult status) except -1:
        """Whether a call refused with ``status`` should be made again: the thread had no
        current context, and now has the one current when this object was made."""
        cdef CUcontext current = NULL
        if status != CUDA_ERROR_INVALID_CONTEXT or self._context == NULL:
            return False
        if cydriver.cuCtxGetCurrent(&current) != CUDA_SUCCESS or current != NULL:
            return False        # (another context is current: not ours to replace)
        return cydriver.cuCtxSetCurrent(self._context) == CUDA_SUCCESS

    cdef Lane* _find(self, CUstream stream, CUfunction func) noexcept:
        """The lane of (stream, func), or the empty entry where it would go."""
        cdef size_t i = lane_hash(stream, func)
        cdef Lane* lane
        while True:
            lane = &self._lanes[i & (_LANES - 1)]
            if lane.state == LANE_EMPTY or (lane.stream == stream and lane.func == func):
                return lane
            i += 1

    cdef int _lane_launch(self, CUDA_KERNEL_NODE_PARAMS* p, CUstream stream,
                          Lane** tried) except -2:
        """Enqueue the kernel through the lane of its function on ``stream`` (made on first
        use): 0. Else the driver's status, or -1 where no lane was tried; the caller launches
        the kernel the ordinary way and reports the outcome with ``_outcome(*tried, ...)``."""
        global asyncgpu_lanes_context
        cdef Lane* lane = self._find(stream, p.func)
        cdef CUresult status = CUDA_SUCCESS
        cdef bint fresh = lane.state == LANE_EMPTY
        cdef long long started, took
        cdef CUDA_KERNEL_NODE_PARAMS space
        cdef const CUDA_KERNEL_NODE_PARAMS* q
        tried[0] = NULL
        if not self._in_context():
            return -1
        if fresh:
            if self._n >= _LANES_MAX or not self._grow:
                return -1
            # taken only once it works (or is known broken): see _outcome
            lane.stream = stream
            lane.func = p.func
            started = now_ns()
            try:
                status = <CUresult>self._make_lane(lane, p)
            except Exception:       # an entry point this driver lacks: no lanes from now on
                self._destroy(lane)
                self._lanes_available = self._lanes_on = False
                return -1
            if status != CUDA_SUCCESS:
                tried[0] = lane
                return <int>status
            lane.state = LANE_READY
            self._n += 1
            took = now_ns() - started
            if took > self.slow_make_ns:
                self._stop_growing(took)
        elif lane.state != LANE_READY:
            return -1
        q = p
        if lane.as_kernel:
            space = p[0]
            space.kern = <CUkernel><void*>space.func
            space.func = NULL
            q = &space
        # A kernel's launch keeps the GIL: the call returns in a few microseconds (it blocks
        # only once the stream's launch queue is full, a thousand launches ahead of the
        # device), and a release there hands the GIL to a thread waiting for it, and this
        # thread then waits for its turn back (three threads launching on an H200's host:
        # 0.7-1.0 voluntary context switches per launch with the release, 0.01 without). A
        # graph's launch, longer, and the host's waits release it.
        if not fresh:
            status = cydriver.cuGraphExecKernelNodeSetParams(lane.graph_exec, lane.node, q)
        if status == CUDA_SUCCESS:
            status = cydriver.cuGraphLaunch(lane.graph_exec, stream)
        if status == CUDA_SUCCESS:
            self._lane_launches += 1
        else:
            tried[0] = lane
            if status == CUDA_ERROR_INVALID_CONTEXT:
                asyncgpu_lanes_context = NULL       # (ask the driver again next time)
        return <int>status

    cdef bint _in_context(self) except -1:
        """Whether this thread's current context is the lanes' one (made current where the
        thread has none). The graph calls are made in it alone: the driver's
        cuGraphExecKernelNodeSetParams crashes on a thread without a current context. The
        driver is asked once per thread: the answer is kept in a thread-local."""
        global asyncgpu_lanes_context
        cdef CUcontext current = NULL
        if self._context == NULL:
            return False
        if asyncgpu_lanes_context == <void*>self._context:
            return True
        if cydriver.cuCtxGetCurrent(&current) != CUDA_SUCCESS:
            return False
        if current != self._context and (
                current != NULL or cydriver.cuCtxSetCurrent(self._context) != CUDA_SUCCESS):
            return False
        asyncgpu_lanes_context = <void*>self._context
        return True

    cdef int _make_lane(self, Lane* lane, const CUDA_KERNEL_NODE_PARAMS* p) except -1:
        """The lane's graph, with ``p`` in its one node, instantiated: CUDA_SUCCESS, or the
        driver's status (nothing left behind)."""
        cdef CUDA_KERNEL_NODE_PARAMS space
        cdef CUresult status = cydriver.cuGraphCreate(&lane.graph, 0)
        lane.as_kernel = False
        if (status == CUDA_SUCCESS and cydriver.cuGraphAddKernelNode(
                &lane.node, lane.graph, NULL, 0, p) != CUDA_SUCCESS):
            lane.as_kernel = True       # (refused as a function: perhaps it is a CUkernel)
            space = p[0]
            space.kern = <CUkernel><void*>space.func
            space.func = NULL
            status = cydriver.cuGraphAddKernelNode(&lane.node, lane.graph, NULL, 0, &space)
        if status == CUDA_SUCCESS:
            status = cydriver.cuGraphInstantiate(&lane.graph_exec, lane.graph, 0)
        if status != CUDA_SUCCESS:
            self._destroy(lane)
        return <int>status

    cdef void _stop_growing(self, long long took) noexcept:
        """A lane's making waited for the device (the driver sometimes waits for the kernels
        in flight to instantiate a graph, and does so with the GIL held, so every thread of
        the process stood still meanwhile: 9-23 ms beside a tenant's long kernels on an
        H200): no new lanes until the device is next synchronized (``grow_lanes``); those
        made stay in use."""
        self._grow = False
        self._slow_makes += 1
        try:
            _log.info("making a one-node graph lane took %.1f ms (the driver waited for the "
                      "device): no new lanes are made until the device is next synchronized; "
                      "kernels without one are launched with cuLaunchKernel", took / 1e6)
        except Exception:       # noqa: BLE001 - logging must not fail a launch
            pass

    cdef void _outcome(self, Lane* tried, CUresult status) noexcept:
        """The ordinary launch after a refused lane launch: ``status`` CUDA_SUCCESS means the
        lane, not the kernel, was at fault, and the lane is not used again."""
        if status != CUDA_SUCCESS:
            return              # the kernel itself is refused: the lane may still serve
        if tried.state == LANE_EMPTY:
            self._n += 1        # a lane that could not be made: known broken from now on
        self._destroy(tried)
        tried.state = LANE_BROKEN

    cdef void _destroy(self, Lane* lane) noexcept:
        if lane.graph_exec != NULL:
            cydriver.cuGraphExecDestroy(lane.graph_exec)
        if lane.graph != NULL:
            cydriver.cuGraphDestroy(lane.graph)
        lane.graph_exec = NULL
        lane.graph = NULL
        lane.node = NULL

    cdef void _release(self) noexcept:
        """Destroy every lane once the device finished their work."""
        cdef int i
        cdef bint made = False
        cdef CUcontext popped = NULL
        for i in range(_LANES):
            made = made or self._lanes[i].graph_exec != NULL
        if made:
            # (an executable graph is destroyed only once the device is done with its launches)
            if self._context != NULL and cydriver.cuCtxPushCurrent(self._context) == CUDA_SUCCESS:
                cydriver.cuCtxSynchronize()
                cydriver.cuCtxPopCurrent(&popped)
            else:
                cydriver.cuCtxSynchronize()
        for i in range(_LANES):
            self._destroy(&self._lanes[i])
        memset(self._lanes, 0, sizeof(self._lanes))
        self._n = 0
        self._grow = True
