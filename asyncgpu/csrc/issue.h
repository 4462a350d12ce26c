/* asyncgpu._speedups: what issue.c (a kernel's launch and the common _issue) shares with
   graph_issue.c (a replayed graph's launch): the slots of the runtime and of a node. */
#ifndef ASYNCGPU_ISSUE_H
#define ASYNCGPU_ISSUE_H

#include "speedups.h"

/* asyncgpu.core.dag.Node and asyncgpu.runtime.context.Runtime (set by configure_issue) */
extern SlotLayout issue_node_layout, runtime_layout;
enum { N_KIND, N_ACCESSES, N_STREAM, N_PARENTS, N_LAUNCH, N_KEEPALIVE, N_EDGES, N_EVENT,
       N_FINISHED };
enum { R_BACKEND, R_STATS, R_LOCK, R_RELEASES, R_INSTRUMENTS, R_ISSUING, R_ISSUING_COMPILED,
       R_RECORDING, R_DEPS, R_STREAMS, R_SYNC_MODE, R_NO_CONST, R_MEMORY, R_PREFETCH,
       R_WANT_SITES, R_ALIAS_BLIND, R_EAGER_FREE, R_HOST_EPOCH, R_GRAPH_READ_BACK,
       R_LAST_REPLAY };
#define RT(self, f, name) get((self), &runtime_layout, (f), (name))

/* asyncgpu.core.dag.Node and asyncgpu.runtime.checks.user_site (set by configure_issue) */
extern PyObject *node_type, *user_site;

/* The runtime's attribute, tested for truth: 1, 0 or -1 */
int rt_truth(PyObject *self, int field, PyObject *name);
/* runtime._issue(node, launch, found, counts), direct when it is the compiled one */
PyObject *call_issue(PyObject *runtime, PyObject *node, PyObject *launch, PyObject *found,
                     PyObject *counts);

/* graph_issue.c: Runtime.launch_graph, and its part of configure_issue and issue_init */
PyObject *runtime_launch_graph(PyObject *self, PyObject *frozen);
int graph_issue_configure(PyObject *frozen, PyObject *python_launch_graph,
                          PyObject *graph_repeat);
int graph_issue_init(void);

#endif
