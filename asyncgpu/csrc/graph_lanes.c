/* asyncgpu._speedups, graph_lanes.c: a kernel enqueued as a one-node graph on its stream.

The model
---------
Measured on the H100 machine (docs/performance.md, "Findings that shaped the launch path"),
``cuLaunchKernel`` costs about 4.7 us of host time there, while ``cuGraphLaunch`` of an
instantiated one-node graph costs about 2 us and changing that node's parameters in the
executable graph (``cuGraphExecKernelNodeSetParams``) about 0.6 us. So each kernel function
gets a *lane* on each stream it runs on: a one-node graph, instantiated on the function's first
launch on that stream, and every later launch of it there is enqueued by setting the node's
parameters (grid, block, shared memory, the packed parameter buffer) and launching the graph on
the stream. A lane holds one function, because a handle comes in one of two forms: the
handle ``cuLaunchKernel`` takes may be a library's ``CUkernel`` (numba-cuda loads its kernels
through ``cuLibraryLoadData``), which a kernel node takes as ``kern``, not ``func``. A lane whose
graph cannot be made with ``func`` is made with ``kern``, and keeps that form; an update then
never changes the node's function (which the driver does allow, status 0 in the probe, but the
form would have to be found again).

Invariants
----------
* Ordering is the stream's: a graph launch is stream-ordered work like a kernel launch, and a
  lane is only ever launched on its own stream (launches of one executable graph are also
  ordered among themselves, which a lane per stream makes harmless).
* Updating a launched graph's parameters does not touch launches already enqueued (CUDA's
  contract for executable-graph updates); the GPU tests check every launch's own output.
* A lane is used by one launch at a time: a launch marks it busy while the GIL is released, and
  a second thread meeting a busy lane launches the ordinary way.
* Anything the driver refuses (a parameter the node cannot take, another context's function,
  a full table) leaves the kernel to the ordinary ``cuLaunchKernel``, which reports the
  kernel's own error. If that ordinary launch succeeds, the lane was at fault and is not used
  again. Capture never sees a lane: the backend turns lanes off while any capture is engaged.

Example (driver.c's launchKernel)::

    Lane *tried;
    if (lanes.enabled && lanes_launch(&lanes, &params, stream, &tried) == 0)
        return;                                     // enqueued through its lane
    status = cuLaunchKernel(...);
    lanes_outcome(&lanes, tried, status);
*/
#include "speedups.h"
#include "graph_lanes.h"

#include <string.h>

static void
destroy_lane(GraphLanes *lanes, Lane *lane)
{
    if (lane->exec != NULL)
        lanes->fn.exec_destroy(lane->exec);
    if (lane->graph != NULL)
        lanes->fn.graph_destroy(lane->graph);
    lane->exec = lane->graph = lane->node = NULL;
}

/* ``params`` with the handle given as a CUkernel (``kern``) when the lane takes it so */
static const KernelNodeParams *
node_params(const Lane *lane, const KernelNodeParams *params, KernelNodeParams *space)
{
    if (!lane->as_kernel)
        return params;
    *space = *params;
    space->kern = space->func;
    space->func = NULL;
    return space;
}

/* The lane's graph, with ``params`` in its one node, instantiated: 0, or the driver's status
   (nothing left behind). */
static int
make_lane(GraphLanes *lanes, Lane *lane, const KernelNodeParams *params)
{
    KernelNodeParams space;
    int status = lanes->fn.create(&lane->graph, 0);
    lane->as_kernel = 0;
    if (status == 0
            && lanes->fn.add_node(&lane->node, lane->graph, NULL, 0, params) != 0) {
        lane->as_kernel = 1;    /* (refused as a function: perhaps it is a CUkernel) */
        status = lanes->fn.add_node(&lane->node, lane->graph, NULL, 0,
                                    node_params(lane, params, &space));
    }
    if (status == 0)
        status = lanes->fn.instantiate(&lane->exec, lane->graph, 0);
    if (status != 0)
        destroy_lane(lanes, lane);
    return status;
}

/* The lane of (stream, func), or the empty entry where it would go. */
static Lane *
find_lane(GraphLanes *lanes, void *stream, void *func)
{
    size_t h = ((size_t)stream * 0x9E3779B97F4A7C15ull) ^ ((size_t)func >> 4);
    for (size_t i = h ^ (h >> 29);; i++) {
        Lane *lane = &lanes->lane[i & (LANES - 1)];
        if (lane->state == LANE_EMPTY || (lane->stream == stream && lane->func == func))
            return lane;
    }
}

int
lanes_launch(GraphLanes *lanes, const KernelNodeParams *params, void *stream, Lane **tried)
{
    *tried = NULL;
    Lane *lane = find_lane(lanes, stream, params->func);
    int status, fresh = lane->state == LANE_EMPTY;
    if (fresh) {
        if (lanes->n >= LANES_MAX)
            return -1;
        /* taken only once it works (or is known broken): see lanes_outcome */
        lane->stream = stream;
        lane->func = params->func;
        *tried = lane;
        if ((status = make_lane(lanes, lane, params)) != 0)
            return status;
        lane->state = LANE_READY;
        lanes->n++;
    } else if (lane->state != LANE_READY) {
        return -1;
    }
    *tried = lane;
    lane->state = LANE_BUSY;
    void *exec = lane->exec, *node = lane->node;
    KernelNodeParams space;
    const KernelNodeParams *p = node_params(lane, params, &space);
    Py_BEGIN_ALLOW_THREADS
    status = fresh ? 0 : lanes->fn.set_params(exec, node, p);
    if (status == 0)
        status = lanes->graph_launch(exec, stream);
    Py_END_ALLOW_THREADS
    lane->state = LANE_READY;
    if (status == 0)
        lanes->launches++;
    return status;
}

void
lanes_outcome(GraphLanes *lanes, Lane *tried, int status)
{
    if (tried == NULL || status != 0)
        return;             /* no lane was tried, or the kernel itself is refused */
    if (tried->state == LANE_EMPTY)
        lanes->n++;         /* a lane that could not be made: known broken from now on */
    destroy_lane(lanes, tried);
    tried->state = LANE_BROKEN;
}

void
lanes_release(GraphLanes *lanes)
{
    int any = 0;
    for (int i = 0; i < LANES; i++) {
        if (lanes->lane[i].state == LANE_BUSY)
            return;     /* another thread is launching through it: left to the dealloc */
        any |= lanes->lane[i].exec != NULL;
    }
    /* (an executable graph is destroyed only once the device is done with its launches) */
    if (any && lanes->fn.ctx_synchronize != NULL)
        lanes->fn.ctx_synchronize();
    for (int i = 0; i < LANES; i++)
        destroy_lane(lanes, &lanes->lane[i]);
    memset(lanes->lane, 0, sizeof lanes->lane);
    lanes->n = 0;
}
