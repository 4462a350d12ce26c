/* asyncgpu._speedups: what streams.c (nodes, stream choice, waits, events) shares with
   retire.c (retirement and polling): the slots of a node and of the stream manager. */
#ifndef ASYNCGPU_STREAMS_H
#define ASYNCGPU_STREAMS_H

#include "speedups.h"

/* asyncgpu.core.dag.Node and asyncgpu.core.streams.StreamManager (set by configure_streams;
   StreamState's state_layout is in speedups.h) */
extern SlotLayout streams_node_layout, manager_layout;
enum { N_ID, N_KIND, N_NAME, N_SITE, N_ACCESSES, N_STREAM, N_SEQ, N_EVENT, N_PARENTS, N_EDGES,
       N_KEEPALIVE, N_FINISHED, N_HANDED_OFF, N_LAUNCH, N_DEVICE };
enum { M_BACKEND, M_STATS, M_POLL_THRESHOLD, M_NEW_POLICY, M_PARENT_POLICY, M_STREAMS, M_FREE,
       M_EVENTS, M_BY_USE, M_INFLIGHT };
#define NODE(obj, f, name) get((obj), &streams_node_layout, (f), (name))
#define STATE(obj, f, name) get((obj), &state_layout, (f), (name))
#define MANAGER(obj, f, name) get((obj), &manager_layout, (f), (name))

/* asyncgpu.core.dag._NONE: the parents of a node that has none (set by configure_streams) */
extern PyObject *no_nodes;

/* a deque's or list's length, or -1 */
static inline Py_ssize_t
size(PyObject *seq)
{
    return PyList_CheckExact(seq) ? PyList_GET_SIZE(seq) : PyObject_Size(seq);
}

/* the manager's _on_finish(node) and finished(node), direct when they are the compiled ones */
PyObject *call_on_finish(PyObject *manager, PyObject *node);
PyObject *call_finished(PyObject *manager, PyObject *node);

/* retire.c: StreamManager.finished and .poll, and its strings */
PyObject *manager_finished(PyObject *self, PyObject *node);
PyObject *manager_poll(PyObject *self, PyObject *unused);
int retire_init(void);

#endif
