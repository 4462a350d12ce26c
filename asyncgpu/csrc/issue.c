/* asyncgpu._speedups, issue.c: the runtime's launch_kernel and _issue, compiled.

The model
---------
Every eager kernel launch runs ``Runtime.launch_kernel`` (lock, bind, the backend's launch
object, the node), every replayed graph ``Runtime.launch_graph`` (graph_issue.c: the node of
the whole graph, the explicit model's booking of its inputs, the shortcut for a graph launched
again right after itself), and both ``Runtime._issue`` (dependencies, stream, prefetches,
event waits, launch, completion event, commit, statistics, polling). In Python the two methods' own
bytecode is a fifth of a launch's host time; their work is almost all calls to other objects
(the tracker, the stream manager, the backend), which this file makes in the same order with
the same arguments, as ``asyncgpu.runtime.issue.PythonIssuing`` does.

Invariants
----------
* Same steps, same calls, same errors as the Python twin. Unusual configurations
  (the explicit memory model's chunked elementwise launches, the ``no-const`` dependency
  policy and the test-only ``alias_blind`` bug) are handed to the Python ``launch_kernel``
  (``launch_graph``) whole: it calls this ``_issue`` in turn.
* An exception from any call before the launch leaves the bookkeeping as it was; from the
  launch on, ``Runtime._recover`` runs before it goes on (as in Python).
* The re-entry marks: ``_issuing`` (what the Python twin sets) and ``_issuing_compiled`` are
  both set while a node is being enqueued and both cleared on every way out, since no
  interrupt can land between C statements. A mark set by a Python ``_issue`` goes to
  ``refuse_reentry``, which tells a stale one from a live one by the stack.

Example: ``asyncgpu.core.compiled.use(False)`` puts the Python methods back.
*/
#include "issue.h"

/* Set by configure_issue(). */
PyObject *node_type, *user_site;
static PyObject *refuse_reentry, *python_launch_kernel, *reduce_parents, *host_flag,
    *device_flag;
SlotLayout issue_node_layout, runtime_layout;
static SlotLayout alloc_layout;
enum { L_LOCATION, L_NBYTES, L_BUFFER };
static Twin t_launch_graph, t_issue, t_launch_kernel;
static PyObject *runtime_issue(PyObject *self, PyObject *const *args, Py_ssize_t nargs);

static PyObject *s_kernel, *s_lock, *s_releases, *s_drain_releases, *s_want_sites,
    *s_recording, *s_memory, *s_elementwise, *s_no_const, *s_alias_blind, *s_backend, *s_name,
    *s_stats, *s_issuing, *s_issuing_compiled, *s_accesses, *s_kind, *s_copy, *s_deps,
    *s_streams, *s_stream, *s_parents, *s_prefetch, *s_alloc, *s_location, *s_nbytes,
    *s_buffer, *s_handle, *s_launch, *s_instruments, *s_launch_traced_graph, *s_write,
    *s_eager_free, *s_keepalive, *s_add, *s_index, *s_edges, *s_notify_node, *s_sync_mode,
    *s_host_wait, *s_event, *s_finished, *s_sync, *s_sync_reason, *s_recover;

/* The runtime's attribute, tested for truth: 1, 0 or -1 */
int
rt_truth(PyObject *self, int field, PyObject *name)
{
    PyObject *v = RT(self, field, name);
    if (v == NULL)
        return -1;
    int r = truth(v);
    Py_DECREF(v);
    return r;
}

/* hasattr(obj, name): 1, 0 or -1 */
static int
has_attr(PyObject *obj, PyObject *name)
{
    PyObject *v = PyObject_GetAttr(obj, name);
    if (v != NULL) {
        Py_DECREF(v);
        return 1;
    }
    if (!PyErr_ExceptionMatches(PyExc_AttributeError))
        return -1;
    PyErr_Clear();
    return 0;
}

/* ---- launch_kernel ------------------------------------------------------------------------ */

/* Whether this launch takes the Python method whole: 1, 0 or -1 */
static int
unusual(PyObject *self, PyObject *kernel)
{
    int r = rt_truth(self, R_NO_CONST, s_no_const);
    if (r != 0)
        return r;
    if ((r = rt_truth(self, R_ALIAS_BLIND, s_alias_blind)) != 0)
        return r;
    PyObject *memory = RT(self, R_MEMORY, s_memory), *elementwise;
    if (memory == NULL)
        return -1;
    int explicit = memory != Py_None;
    Py_DECREF(memory);
    if (!explicit)
        return 0;
    if ((elementwise = get(kernel, &kernel_layout, K_ELEMENTWISE, s_elementwise)) == NULL)
        return -1;
    r = truth(elementwise);
    Py_DECREF(elementwise);
    return r;
}

/* The body of launch_kernel, under the runtime's lock. */
static PyObject *
launch_locked(PyObject *self, PyObject *launcher, PyObject *args, PyObject *kernel)
{
    PyObject *result = NULL, *site = NULL, *rec = NULL, *pair = NULL, *backend = NULL,
        *launch = NULL, *name = NULL, *node = NULL, *stats = NULL, *r;
    int t = rt_truth(self, R_RELEASES, s_releases);
    if (t < 0)
        return NULL;
    if (t) {
        if ((r = PyObject_CallMethodNoArgs(self, s_drain_releases)) == NULL)
            return NULL;
        Py_DECREF(r);
    }
    if ((t = rt_truth(self, R_WANT_SITES, s_want_sites)) < 0)
        return NULL;
    site = t ? PyObject_CallNoArgs(user_site) : Py_NewRef(Py_None);
    if (site == NULL || (rec = RT(self, R_RECORDING, s_recording)) == NULL)
        goto done;
    if (rec != Py_None) {
        if ((r = call_method(rec, s_kernel, 3, launcher, args, site)) == NULL)
            goto done;
        t = truth(r);
        Py_DECREF(r);
        if (t < 0)
            goto done;
        if (t) {                        /* deferred into the recording */
            result = Py_NewRef(Py_None);
            goto done;
        }
    }
    if ((pair = call_bind(kernel, self, args, site)) == NULL)
        goto done;
    if (!PyTuple_CheckExact(pair) || PyTuple_GET_SIZE(pair) != 2) {
        PyErr_SetString(PyExc_TypeError, "Kernel.bind must return (arrays, values)");
        goto done;
    }
    PyObject *arrays = PyTuple_GET_ITEM(pair, 0), *values = PyTuple_GET_ITEM(pair, 1);
    if ((backend = RT(self, R_BACKEND, s_backend)) == NULL
            || (launch = call_kernel_launch(backend, (PyObject *[]){kernel, launcher, arrays,
                                                                    values, site})) == NULL
            || (name = get(kernel, &kernel_layout, K_NAME, s_name)) == NULL)
        goto done;
    PyObject *node_args[] = {s_kernel, name, site, arrays};
    if ((node = PyObject_Vectorcall(node_type, node_args, 4, NULL)) == NULL
            || set(node, &issue_node_layout, N_LAUNCH, s_launch, launch) < 0
            || (stats = RT(self, R_STATS, s_stats)) == NULL
            || count_stat(stats, ST_KERNELS, one) < 0)
        goto done;
    result = call_twin(&t_issue, self, &node, 1);
done:
    Py_XDECREF(site);
    Py_XDECREF(rec);
    Py_XDECREF(pair);
    Py_XDECREF(backend);
    Py_XDECREF(launch);
    Py_XDECREF(name);
    Py_XDECREF(node);
    Py_XDECREF(stats);
    return result;
}

static PyObject *
runtime_launch_kernel(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "launch_kernel(launcher, args)");
        return NULL;
    }
    PyObject *kernel = get(args[0], &launcher_layout, LN_KERNEL, s_kernel);
    if (kernel == NULL)
        return NULL;
    int u = unusual(self, kernel);
    if (u != 0) {
        Py_DECREF(kernel);
        if (u < 0)
            return NULL;
        PyObject *call[] = {self, args[0], args[1]};
        return PyObject_Vectorcall(python_launch_kernel, call, 3, NULL);
    }
    PyObject *lock = RT(self, R_LOCK, s_lock);
    if (lock == NULL || lock_acquire(lock) < 0) {
        Py_DECREF(kernel);
        Py_XDECREF(lock);
        return NULL;
    }
    PyObject *result = unlocked(lock, launch_locked(self, args[0], args[1], kernel));
    Py_DECREF(kernel);
    Py_DECREF(lock);
    return result;
}

/* ---- _issue ------------------------------------------------------------------------------- */

/* alloc.location = DEVICE, or |= DEVICE (write: 0) */
static int
to_device(PyObject *alloc, int only_device)
{
    if (only_device)
        return set(alloc, &alloc_layout, L_LOCATION, s_location, device_flag);
    PyObject *loc = get(alloc, &alloc_layout, L_LOCATION, s_location), *now;
    if (loc == NULL)
        return -1;
    now = PyNumber_Or(loc, device_flag);
    Py_DECREF(loc);
    if (now == NULL)
        return -1;
    int r = set(alloc, &alloc_layout, L_LOCATION, s_location, now);
    Py_DECREF(now);
    return r;
}

/* What the prefetch of one access needs: the backend, the statistics, the stream's handle. */
typedef struct {
    PyObject *backend, *stats, *handle;
} Prefetch;

/* Prefetch acc's allocation onto the node's stream if it is current on the host. */
static int
prefetch_one(PyObject *acc, void *context)
{
    Prefetch *p = context;
    PyObject *alloc = get(acc, &arg_layout, G_ALLOC, s_alloc), *loc = NULL, *host = NULL,
        *nbytes = NULL, *buffer = NULL, *r = NULL;
    int wanted = alloc == NULL
        || (loc = get(alloc, &alloc_layout, L_LOCATION, s_location)) == NULL
        || (host = PyNumber_And(loc, host_flag)) == NULL ? -1 : truth(host);
    if (wanted > 0)
        wanted = (nbytes = get(alloc, &alloc_layout, L_NBYTES, s_nbytes)) == NULL
            ? -1 : truth(nbytes);
    if (wanted > 0)     /* migrated: a second view in this launch needs none */
        wanted = (buffer = get(alloc, &alloc_layout, L_BUFFER, s_buffer)) == NULL
            || (r = call_method(p->backend, s_prefetch, 2, buffer, p->handle)) == NULL
            || count_stat(p->stats, ST_PREFETCHES, one) < 0
            || count_stat(p->stats, ST_BYTES_PREFETCHED, nbytes) < 0
            || set(alloc, &alloc_layout, L_LOCATION, s_location, device_flag) < 0 ? -1 : 0;
    Py_XDECREF(alloc);
    Py_XDECREF(loc);
    Py_XDECREF(host);
    Py_XDECREF(nbytes);
    Py_XDECREF(buffer);
    Py_XDECREF(r);
    return wanted < 0 ? -1 : 0;
}

/* acc's allocation is on the device now (a write: only there). */
static int
book_location(PyObject *acc, void *unused)
{
    PyObject *alloc = get(acc, &arg_layout, G_ALLOC, s_alloc), *write = NULL;
    int w = -1;
    if (alloc != NULL && (write = get(acc, &arg_layout, G_WRITE, s_write)) != NULL
            && (w = truth(write)) >= 0)
        w = to_device(alloc, w);
    Py_XDECREF(alloc);
    Py_XDECREF(write);
    return w < 0 ? -1 : 0;
}

/* edges[reason] += amount */
static int
count_edge(PyObject *edges, PyObject *reason, PyObject *amount)
{
    if (PyDict_CheckExact(edges) && PyLong_CheckExact(amount)) {
        /* (the statistics' own dict of ints: no generic item and number protocols) */
        PyObject *v = PyDict_GetItemWithError(edges, reason), *sum;
        long long a = v != NULL && PyLong_CheckExact(v) ? PyLong_AsLongLong(v) : -1;
        long long b = a == -1 ? -1 : PyLong_AsLongLong(amount);
        if (a != -1 && b != -1) {
            if ((sum = PyLong_FromLongLong(a + b)) == NULL)
                return -1;
            int r = PyDict_SetItem(edges, reason, sum);
            Py_DECREF(sum);
            return r;
        }
        if (PyErr_Occurred())
            return -1;
    }
    PyObject *v = PyObject_GetItem(edges, reason), *sum;
    if (v == NULL)
        return -1;
    sum = PyNumber_InPlaceAdd(v, amount);
    Py_DECREF(v);
    if (sum == NULL)
        return -1;
    int r = PyObject_SetItem(edges, reason, sum);
    Py_DECREF(sum);
    return r;
}

/* Unpack a 2-item sequence (a (reason, label) or (reason, count) pair): borrowed in *a, *b
   through a new reference in *seq. */
static int
pair_items(PyObject *obj, PyObject **seq, PyObject **a, PyObject **b)
{
    *seq = PySequence_Fast(obj, "expected a pair");
    if (*seq == NULL)
        return -1;
    if (PySequence_Fast_GET_SIZE(*seq) != 2) {
        PyErr_Format(PyExc_ValueError, "expected a pair, got %zd items",
                     PySequence_Fast_GET_SIZE(*seq));
        Py_CLEAR(*seq);
        return -1;
    }
    *a = PySequence_Fast_GET_ITEM(*seq, 0);
    *b = PySequence_Fast_GET_ITEM(*seq, 1);
    return 0;
}

/* The statistics' edge counts, and with instruments the node's labelled edges. */
static int
count_edges(PyObject *stats, PyObject *found, PyObject *parents, PyObject *edge_counts,
            PyObject *labelled)
{
    PyObject *edges = get(stats, &stats_layout, ST_EDGES, stats_attrs[ST_EDGES]), *items = NULL,
        *seq = NULL, *a, *b;
    int rc = -1;
    if (edges == NULL)
        return -1;
    if (edge_counts != Py_None && labelled == NULL) {
        if ((items = PySequence_Fast(edge_counts, "edge counts")) == NULL)
            goto done;
        for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(items); i++) {
            if (pair_items(PySequence_Fast_GET_ITEM(items, i), &seq, &a, &b) < 0
                    || count_edge(edges, a, b) < 0)
                goto done;
            Py_CLEAR(seq);
        }
        rc = 0;
        goto done;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(parents); i++) {
        PyObject *p = PyList_GET_ITEM(parents, i);
        Py_XSETREF(items, PyObject_GetItem(found, p));
        if (items == NULL)
            goto done;
        Py_SETREF(items, PySequence_Fast(items, "edge reasons"));
        if (items == NULL)
            goto done;
        for (Py_ssize_t j = 0; j < PySequence_Fast_GET_SIZE(items); j++) {
            if (pair_items(PySequence_Fast_GET_ITEM(items, j), &seq, &a, &b) < 0)
                goto done;
            if (labelled != NULL) {
                PyObject *edge = PyTuple_Pack(3, p, a, b);
                if (edge == NULL || PyList_Append(labelled, edge) < 0) {
                    Py_XDECREF(edge);
                    goto done;
                }
                Py_DECREF(edge);
            } else if (count_edge(edges, a, one) < 0) {
                goto done;
            }
            Py_CLEAR(seq);
        }
    }
    rc = 0;
done:
    Py_XDECREF(edges);
    Py_XDECREF(items);
    Py_XDECREF(seq);
    return rc;
}

/* Set or clear both re-entry marks (clearing keeps a pending error). */
static int
mark(PyObject *self, PyObject *node)
{
    if (set(self, &runtime_layout, R_ISSUING, s_issuing, node) < 0)
        return -1;
    return set(self, &runtime_layout, R_ISSUING_COMPILED, s_issuing_compiled, node);
}

static void
unmark(PyObject *self)
{
    SavedError saved;
    save_error(&saved);
    if (mark(self, Py_None) < 0)
        raise_in_cleanup(&saved);
    else
        restore_error(&saved);
}

/* After the marks are set: everything from the dependencies to the poll. *enqueued is set
   once the launch may be on the device. */
static int
issue_marked(PyObject *self, PyObject *node, PyObject *graph, PyObject *found_given,
             PyObject *edge_counts, int explicit, int *enqueued)
{
    int rc = -1, t;
    PyObject *found = NULL, *parents = NULL, *streams = NULL, *stream = NULL,
        *backend = NULL, *accesses = NULL, *stats = NULL, *handle = NULL, *recorded = NULL,
        *deps = NULL, *r = NULL, *used = NULL, *index = NULL, *instruments = NULL,
        *labelled = NULL, *event = NULL;

    if (found_given != Py_None) {
        found = Py_NewRef(found_given);
    } else {
        if ((deps = RT(self, R_DEPS, s_deps)) == NULL
                || (accesses = get(node, &issue_node_layout, N_ACCESSES, s_accesses)) == NULL
                || (found = call_conflicts(deps, accesses)) == NULL)
            goto done;
        Py_CLEAR(accesses);
    }
    Py_ssize_t nfound = PyObject_Size(found);
    if (nfound < 0)
        goto done;
    parents = nfound > 1 ? PyObject_CallOneArg(reduce_parents, found) : PySequence_List(found);
    if (parents == NULL)
        goto done;
    if (!PyList_CheckExact(parents)) {
        PyErr_SetString(PyExc_TypeError, "reduce_parents must return a list");
        goto done;
    }
    if ((streams = RT(self, R_STREAMS, s_streams)) == NULL
            || (stream = call_choose(streams, node, parents)) == NULL
            || set(node, &issue_node_layout, N_STREAM, s_stream, stream) < 0
            || set(node, &issue_node_layout, N_PARENTS, s_parents, parents) < 0
            || (backend = RT(self, R_BACKEND, s_backend)) == NULL
            || (accesses = get(node, &issue_node_layout, N_ACCESSES, s_accesses)) == NULL
            || (stats = RT(self, R_STATS, s_stats)) == NULL
            || (handle = get(stream, &state_layout, S_HANDLE, s_handle)) == NULL
            || (t = rt_truth(self, R_PREFETCH, s_prefetch)) < 0
            || (t && for_each(accesses, prefetch_one,
                              &(Prefetch){backend, stats, handle}) < 0))
        goto done;
    if (PyList_GET_SIZE(parents)
            && (r = call_wait_for_parents(streams, node, parents)) == NULL)
        goto done;
    Py_CLEAR(r);
    *enqueued = 1;
    if (graph == Py_None) {
        r = call_launch(backend, node, handle);
    } else {
        if ((instruments = RT(self, R_INSTRUMENTS, s_instruments)) == NULL
                || (t = truth(instruments)) < 0)
            goto done;
        if (t && (t = has_attr(backend, s_launch_traced_graph)) < 0)
            goto done;
        if (t)
            r = call_method(backend, s_launch_traced_graph, 3, node, graph, handle);
        else
            r = recorded = call_graph_launch(backend, graph, handle);
        Py_CLEAR(instruments);
    }
    if (r == NULL)
        goto done;
    if (r != recorded)      /* (the graph's completion event is kept in recorded) */
        Py_DECREF(r);
    r = NULL;
    /* the launch is enqueued: from here on nothing may fail half-way */
    if ((r = call_issued(streams, node, recorded ? recorded : Py_None)) == NULL)
        goto done;
    Py_CLEAR(r);
    if (deps == NULL && (deps = RT(self, R_DEPS, s_deps)) == NULL)
        goto done;
    if ((r = call_commit(deps, node, accesses)) == NULL)
        goto done;
    Py_CLEAR(r);
    if ((graph == Py_None || !explicit) && for_each(accesses, book_location, NULL) < 0)
        goto done;
    if ((t = rt_truth(self, R_EAGER_FREE, s_eager_free)) < 0)
        goto done;
    if (t) {
        PyObject *empty = PyList_New(0);
        t = empty == NULL || set(node, &issue_node_layout, N_KEEPALIVE, s_keepalive, Py_None) < 0
            || set(node, &issue_node_layout, N_ACCESSES, s_accesses, empty) < 0;
        Py_XDECREF(empty);
        if (t)
            goto done;
    }
    if (count_stat(stats, ST_NODES, one) < 0
            || (used = get(stats, &stats_layout, ST_STREAMS_USED, stats_attrs[ST_STREAMS_USED]))
               == NULL
            || (index = get(stream, &state_layout, S_INDEX, s_index)) == NULL)
        goto done;
    if (PySet_CheckExact(used) ? PySet_Add(used, index) < 0
            : (r = call_method(used, s_add, 1, index)) == NULL)
        goto done;
    Py_CLEAR(r);
    if (nfound && count_edges(stats, found, parents, edge_counts, NULL) < 0)
        goto done;
    if ((instruments = RT(self, R_INSTRUMENTS, s_instruments)) == NULL
            || (t = truth(instruments)) < 0)
        goto done;
    if (t) {
        if ((labelled = PyList_New(0)) == NULL
                || count_edges(stats, found, parents, Py_None, labelled) < 0
                || set(node, &issue_node_layout, N_EDGES, s_edges, labelled) < 0
                || (r = call_method(self, s_notify_node, 1, node)) == NULL)
            goto done;
        Py_CLEAR(r);
    }
    if ((t = rt_truth(self, R_SYNC_MODE, s_sync_mode)) < 0)
        goto done;
    if (t) {
        if ((event = get(node, &issue_node_layout, N_EVENT, s_event)) == NULL
                || (r = call_method(backend, s_host_wait, 1, event)) == NULL)
            goto done;
        Py_CLEAR(r);
        if ((r = call_method(streams, s_finished, 1, node)) == NULL)
            goto done;
        Py_CLEAR(r);
        if ((r = call_method(stats, s_sync, 1, s_sync_reason)) == NULL)
            goto done;
        Py_CLEAR(r);
    } else {
        if ((t = should_poll(streams)) < 0)
            goto done;
        if (t) {
            if ((r = call_poll(streams)) == NULL)
                goto done;
            Py_CLEAR(r);
        }
    }
    rc = 0;
done:
    Py_XDECREF(found);
    Py_XDECREF(parents);
    Py_XDECREF(streams);
    Py_XDECREF(stream);
    Py_XDECREF(backend);
    Py_XDECREF(accesses);
    Py_XDECREF(stats);
    Py_XDECREF(handle);
    Py_XDECREF(recorded);
    Py_XDECREF(deps);
    Py_XDECREF(r);
    Py_XDECREF(used);
    Py_XDECREF(index);
    Py_XDECREF(instruments);
    Py_XDECREF(labelled);
    Py_XDECREF(event);
    return rc;
}

static PyObject *
runtime_issue(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 1 || nargs > 4) {
        PyErr_SetString(PyExc_TypeError, "_issue(node, graph=None, found=None, edge_counts=None)");
        return NULL;
    }
    PyObject *node = args[0], *graph = nargs > 1 ? args[1] : Py_None,
        *found = nargs > 2 ? args[2] : Py_None, *edge_counts = nargs > 3 ? args[3] : Py_None;
    PyObject *issuing = RT(self, R_ISSUING, s_issuing), *r;
    if (issuing == NULL)
        return NULL;
    if (issuing != Py_None) {
        Py_DECREF(issuing);
        PyObject *call[] = {self, node};
        if ((r = PyObject_Vectorcall(refuse_reentry, call, 2, NULL)) == NULL)
            return NULL;
        Py_DECREF(r);
    } else {
        Py_DECREF(issuing);
    }
    PyObject *memory = RT(self, R_MEMORY, s_memory);
    if (memory == NULL)
        return NULL;
    int explicit = memory != Py_None;
    if (explicit && graph == Py_None) {
        /* (copy nodes are parents of this one; a graph's are booked by before_graph) */
        PyObject *kind = get(node, &issue_node_layout, N_KIND, s_kind), *accesses = NULL;
        int other = kind == NULL ? -1 : PyObject_RichCompareBool(kind, s_copy, Py_NE);
        Py_XDECREF(kind);
        if (other > 0) {
            accesses = get(node, &issue_node_layout, N_ACCESSES, s_accesses);
            r = accesses ? call_before_device(memory, accesses) : NULL;
            Py_XDECREF(accesses);
            Py_XDECREF(r);
            other = r == NULL ? -1 : 0;
        }
        if (other < 0) {
            Py_DECREF(memory);
            return NULL;
        }
    }
    Py_DECREF(memory);
    int enqueued = 0;
    if (mark(self, node) < 0
            || issue_marked(self, node, graph, found, edge_counts, explicit, &enqueued) < 0) {
        if (enqueued) {
            /* the node may be queued on the device while the DAG does not know it */
            SavedError saved;
            save_error(&saved);
            if ((r = call_method(self, s_recover, 1, node)) == NULL) {
                raise_in_cleanup(&saved);
            } else {
                Py_DECREF(r);
                restore_error(&saved);
            }
        }
        unmark(self);
        return NULL;
    }
    unmark(self);
    if (PyErr_Occurred())
        return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef runtime_methods[] = {
    {"launch_kernel", (PyCFunction)(void (*)(void))runtime_launch_kernel, METH_FASTCALL,
     "Validate and schedule one kernel launch; returns without waiting."},
    {"launch_graph", runtime_launch_graph, METH_O,
     "Schedule one launch of a captured graph as one node (the caller holds the lock)."},
    {"_issue", (PyCFunction)(void (*)(void))runtime_issue, METH_FASTCALL,
     "Enqueue one node: dependencies, stream, waits, launch, event, commit."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot runtime_slots[] = {
    {Py_tp_methods, runtime_methods},
    {Py_tp_doc, "Base of asyncgpu's Runtime: launch_kernel and _issue, compiled."},
    {0, NULL},
};

static PyType_Spec runtime_spec = {
    "asyncgpu._speedups.RuntimeBase",
    sizeof(PyObject),
    0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    runtime_slots,
};

PyObject *
configure_issue(PyObject *module, PyObject *args)
{
    PyObject *node, *alloc, *site, *refuse, *python_launch, *reduce, *host, *device, *runtime,
        *counters, *python_graph, *frozen, *repeat;
    static const char *const node_names[] = {"kind", "accesses", "stream", "parents", "launch",
                                             "keepalive", "edges", "event", "finished"};
    static const char *const alloc_names[] = {"location", "nbytes", "buffer"};
    static const char *const runtime_names[] = {
        "backend", "stats", "_lock", "_releases", "_instruments", "_issuing",
        "_issuing_compiled", "recording", "deps", "streams", "sync_mode", "no_const", "memory",
        "prefetch", "want_sites", "alias_blind", "eager_free", "host_epoch", "graph_read_back",
        "last_replay"};
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOOOO:configure_issue", &runtime, &counters, &node,
                          &alloc, &site, &refuse, &python_launch, &reduce, &host, &device,
                          &python_graph, &frozen, &repeat))
        return NULL;
    if (layout(&runtime_layout, runtime, runtime_names, 20) < 0 || stats_configure(counters) < 0
            || layout(&issue_node_layout, node, node_names, 9) < 0
            || layout(&alloc_layout, alloc, alloc_names, 3) < 0
            || graph_issue_configure(frozen, python_graph, repeat) < 0)
        return NULL;
    Py_XSETREF(node_type, Py_NewRef(node));
    Py_XSETREF(user_site, Py_NewRef(site));
    Py_XSETREF(refuse_reentry, Py_NewRef(refuse));
    Py_XSETREF(python_launch_kernel, Py_NewRef(python_launch));
    Py_XSETREF(reduce_parents, Py_NewRef(reduce));
    Py_XSETREF(host_flag, Py_NewRef(host));
    Py_XSETREF(device_flag, Py_NewRef(device));
    Py_RETURN_NONE;
}

int
issue_init(PyObject *module)
{
    static const Name names[] = {
        {&s_kernel, "kernel"}, {&s_lock, "_lock"}, {&s_releases, "_releases"},
        {&s_drain_releases, "_drain_releases"}, {&s_want_sites, "want_sites"},
        {&s_recording, "recording"}, {&s_memory, "memory"}, {&s_elementwise, "elementwise"},
        {&s_no_const, "no_const"}, {&s_alias_blind, "alias_blind"}, {&s_backend, "backend"},
        {&s_name, "name"}, {&s_stats, "stats"}, {&s_issuing, "_issuing"},
        {&s_issuing_compiled, "_issuing_compiled"},
        {&s_accesses, "accesses"}, {&s_kind, "kind"}, {&s_copy, "copy"}, {&s_deps, "deps"},
        {&s_streams, "streams"}, {&s_stream, "stream"}, {&s_parents, "parents"},
        {&s_prefetch, "prefetch"}, {&s_alloc, "alloc"}, {&s_location, "location"},
        {&s_nbytes, "nbytes"}, {&s_buffer, "buffer"}, {&s_handle, "handle"},
        {&s_launch, "launch"}, {&s_instruments, "_instruments"},
        {&s_launch_traced_graph, "launch_traced_graph"},
        {&s_write, "write"}, {&s_eager_free, "eager_free"}, {&s_keepalive, "keepalive"},
        {&s_add, "add"}, {&s_index, "index"}, {&s_edges, "edges"},
        {&s_notify_node, "_notify_node"}, {&s_sync_mode, "sync_mode"},
        {&s_host_wait, "host_wait"}, {&s_event, "event"}, {&s_finished, "finished"},
        {&s_sync, "sync"}, {&s_sync_reason, "sync-mode"}, {&s_recover, "_recover"},
    };
    if (INTERN_ALL(names) < 0 || graph_issue_init() < 0
            || add_type(module, "RuntimeBase", &runtime_spec) < 0
            || twin(&t_launch_graph, module, "RuntimeBase", "launch_graph") < 0
            || twin(&t_issue, module, "RuntimeBase", "_issue") < 0
            || twin(&t_launch_kernel, module, "RuntimeBase", "launch_kernel") < 0)
        return -1;
    return 0;
}

PyObject *
call_launch_kernel(PyObject *runtime, PyObject *launcher, PyObject *args)
{
    return call_twin(&t_launch_kernel, runtime, (PyObject *[]){launcher, args}, 2);
}

PyObject *
call_launch_graph(PyObject *runtime, PyObject *frozen)
{
    return call_twin(&t_launch_graph, runtime, &frozen, 1);
}

PyObject *
call_issue(PyObject *runtime, PyObject *node, PyObject *launch, PyObject *found,
           PyObject *counts)
{
    return call_twin(&t_issue, runtime, (PyObject *[]){node, launch, found, counts}, 4);
}
