/* asyncgpu._speedups, graph_lanes.c: one kernel enqueued as a one-node graph of its stream.

The model
---------
Measured on the H100 machine (tools/graph_launch_probe.py, docs/performance.md "Stop 21"),
``cuLaunchKernel`` costs about 4.7 us of host time there, while ``cuGraphLaunch`` of an
instantiated one-node graph costs about 2 us and changing that node's parameters in the
executable graph (``cuGraphExecKernelNodeSetParams``) about 0.6 us. So each stream gets a
*lane*: a one-node graph, instantiated on the stream's first launch with that launch's kernel,
and every later kernel on that stream is enqueued by setting the node's parameters (function,
grid, block, shared memory, the packed parameter buffer: everything may change) and launching
the graph on the stream.

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
        return;                                     // enqueued through the stream's lane
    status = cuLaunchKernel(...);
    lanes_outcome(&lanes, tried, stream, status);
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

/* The lane's graph, with ``params`` in its one node, instantiated: 0, or the driver's status
   (nothing left behind). */
static int
make_lane(GraphLanes *lanes, Lane *lane, const KernelNodeParams *params)
{
    int status = lanes->fn.create(&lane->graph, 0);
    if (status == 0)
        status = lanes->fn.add_node(&lane->node, lane->graph, NULL, 0, params);
    if (status == 0)
        status = lanes->fn.instantiate(&lane->exec, lane->graph, 0);
    if (status != 0)
        destroy_lane(lanes, lane);
    return status;
}

static Lane *
find_lane(GraphLanes *lanes, void *stream)
{
    for (int i = 0; i < lanes->n; i++) {
        if (lanes->lane[i].stream == stream)
            return &lanes->lane[i];
    }
    return NULL;
}

int
lanes_launch(GraphLanes *lanes, const KernelNodeParams *params, void *stream, Lane **tried)
{
    *tried = NULL;
    Lane *lane = find_lane(lanes, stream);
    int status, fresh = lane == NULL;
    if (fresh) {
        if (lanes->n == LANES)
            return -1;
        /* the next free entry, counted in only once it works (or is known broken) */
        lane = &lanes->lane[lanes->n];
        memset(lane, 0, sizeof *lane);
        lane->stream = stream;
        *tried = lane;
        if ((status = make_lane(lanes, lane, params)) != 0)
            return status;
        lanes->n++;
    } else if (lane->state != LANE_READY) {
        return -1;
    }
    *tried = lane;
    lane->state = LANE_BUSY;
    void *exec = lane->exec, *node = lane->node;
    Py_BEGIN_ALLOW_THREADS
    status = fresh ? 0 : lanes->fn.set_params(exec, node, params);
    if (status == 0)
        status = lanes->graph_launch(exec, stream);
    Py_END_ALLOW_THREADS
    lane->state = LANE_READY;
    if (status == 0)
        lanes->launches++;
    return status;
}

void
lanes_outcome(GraphLanes *lanes, Lane *tried, void *stream, int status)
{
    if (tried == NULL || status != 0)
        return;             /* no lane was tried, or the kernel itself is refused */
    if (tried == &lanes->lane[lanes->n] && tried->stream == stream)
        lanes->n++;         /* a lane that could not be made: known broken from now on */
    destroy_lane(lanes, tried);
    tried->state = LANE_BROKEN;
}

void
lanes_release(GraphLanes *lanes)
{
    int any = 0;
    for (int i = 0; i < lanes->n; i++)
        any |= lanes->lane[i].exec != NULL;
    /* (an executable graph is destroyed only once the device is done with its launches) */
    if (any && lanes->fn.ctx_synchronize != NULL)
        lanes->fn.ctx_synchronize();
    for (int i = 0; i < lanes->n; i++)
        destroy_lane(lanes, &lanes->lane[i]);
    lanes->n = 0;
}
