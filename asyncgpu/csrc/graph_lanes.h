/* asyncgpu._speedups: one-node graphs per kernel and stream, the cheaper way to enqueue one
   kernel (see graph_lanes.c). */
#ifndef ASYNCGPU_GRAPH_LANES_H
#define ASYNCGPU_GRAPH_LANES_H

#include <stddef.h>

/* CUDA_KERNEL_NODE_PARAMS (its v2 layout; the v1 entry points read its first fields alone) */
typedef struct {
    void *func;
    unsigned grid_x, grid_y, grid_z, block_x, block_y, block_z, shared;
    void **kernel_params, **extra;
    void *kern, *ctx;
} KernelNodeParams;

enum { LANE_EMPTY, LANE_READY, LANE_BUSY, LANE_BROKEN };

/* A one-node graph of one kernel function on one stream: the template (kept for its node's
   handle) and its executable. */
typedef struct {
    void *stream, *func, *graph, *node, *exec;
    int state;
    int as_kernel;      /* func is a CUkernel (cuLibraryGetKernel: Numba's), given as ``kern`` */
} Lane;

/* The table of lanes: open addressing on (stream, function), filled to at most LANES_MAX. */
enum { LANES = 512, LANES_MAX = 384 };

/* The driver's graph entry points, in the order GRAPH_ENTRY_POINTS names them
   (asyncgpu/backends/cuda/driver.py). */
typedef struct {
    int (*create)(void **graph, unsigned flags);
    int (*add_node)(void **node, void *graph, void *const *deps, size_t ndeps,
                    const KernelNodeParams *params);
    int (*instantiate)(void **exec, void *graph, unsigned long long flags);
    int (*set_params)(void *exec, void *node, const KernelNodeParams *params);
    int (*exec_destroy)(void *exec);
    int (*graph_destroy)(void *graph);
    int (*ctx_synchronize)(void);
} GraphEntries;

enum { GRAPH_ENTRY_COUNT = 7 };

typedef struct {
    GraphEntries fn;
    int (*graph_launch)(void *exec, void *stream);
    int available;              /* every entry point was found */
    int enabled;                /* ... and the backend wants lanes now (not while capturing) */
    int n;
    unsigned long long launches;    /* kernels enqueued through a lane */
    Lane lane[LANES];
} GraphLanes;

/* Enqueue the kernel through the lane of its function on ``stream`` (made on first use).
   0: enqueued. Else the caller launches it the ordinary way, and reports the outcome with
   lanes_outcome(*tried). */
int lanes_launch(GraphLanes *lanes, const KernelNodeParams *params, void *stream,
                 Lane **tried);
/* The ordinary launch after a refused lane launch: status 0 means the lane, not the kernel,
   was at fault, and the lane is not used again. */
void lanes_outcome(GraphLanes *lanes, Lane *tried, int status);
/* Destroy every lane (after the device finished their work); nothing while one is in use. */
void lanes_release(GraphLanes *lanes);

#endif
