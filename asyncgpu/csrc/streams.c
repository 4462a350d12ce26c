/* asyncgpu._speedups, streams.c: nodes, stream choice, waits and events, compiled.

The model
---------
After the dependencies are known, every launch makes a node (``Node.__init__``), picks its
stream (``StreamManager.choose`` and the policy's ``pick``: ``Reuse`` for a node without
parents, ``Disjoint`` for one with), waits for parents on other streams
(``wait_for_parents``), books the node and records its completion event (``issued``), and,
with many nodes in flight, polls one stream and retires what finished (``poll``,
``finished``, ``_on_finish``). In Python those are eight small methods calling each other;
here each is a C method over the very same objects (the ``__slots__`` of ``Node``,
``StreamState`` and ``StreamManager``, read at their offsets), and a C method calling another
stays in C. Retirement and polling (``finished``, ``poll``) are in retire.c. The Python twins
in ``asyncgpu/core/dag.py``, ``_streams.py`` and ``_policies.py`` (``PythonNode``,
``PythonStreamCalls``, ``PythonReusePick``, ``PythonDisjointPick``) are the reference.

Invariants
----------
* Same answers, side effects and order of calls as the Python twins; the backend's methods
  (``record``, ``wait``, ``event_done``) and the pool's rarely used ones (``grow``,
  ``_new_event``, ``least_recently_used``) are called by name, as Python calls them.
* A node is finished with everything before it on its stream and, transitively, its parents
  (``asyncgpu.core.dag.finish_through``, inlined in ``finished``).

Example: ``asyncgpu.core.compiled.use(False)`` puts the Python methods back.
*/
#include "streams.h"

SlotLayout streams_node_layout, manager_layout, state_layout;
PyObject *no_nodes;
static PyObject *node_ids;       /* asyncgpu.core.dag._ids (and no_nodes, _NONE) */
static PyObject *s_id, *s_kind, *s_name, *s_site, *s_accesses, *s_stream, *s_seq, *s_event,
    *s_parents, *s_edges, *s_keepalive, *s_finished, *s_handed_off, *s_launch, *s_device,
    *s_index, *s_handle, *s_inflight, *s_waited, *s_backend, *s_stats, *s_new_policy,
    *s_parent_policy, *s_free, *s_events, *s_by_use, *s_inflight_count, *s_pick, *s_can_grow,
    *s_grow, *s_least_recently_used, *s_new_event, *s_popleft, *s_pop, *s_graph, *s_done,
    *s_get;
static PyObject *empty;
static Twin t_take_free, t_choose, t_wait_for_parents, t_issued, t_poll, t_finished,
    t_on_finish, t_reuse_pick, t_disjoint_pick;
static PyObject *manager_take_free(PyObject *self, PyObject *unused);

/* ---- Node.__init__ ------------------------------------------------------------------------ */

static int
node_init(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"kind", "name", "site", "accesses", NULL};
    PyObject *kind, *name, *site, *accesses;
    if (kwargs == NULL && PyTuple_CheckExact(args) && PyTuple_GET_SIZE(args) == 4) {
        kind = PyTuple_GET_ITEM(args, 0);       /* (the way the runtime makes them) */
        name = PyTuple_GET_ITEM(args, 1);
        site = PyTuple_GET_ITEM(args, 2);
        accesses = PyTuple_GET_ITEM(args, 3);
    } else if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOO:Node", names, &kind, &name,
                                            &site, &accesses)) {
        return -1;
    }
    PyObject *id = PyIter_Next(node_ids);
    if (id == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_RuntimeError, "node ids ran out");
        return -1;
    }
    int rc = set(self, &streams_node_layout, N_ID, s_id, id);
    Py_DECREF(id);
    if (rc < 0 || set(self, &streams_node_layout, N_KIND, s_kind, kind) < 0
            || set(self, &streams_node_layout, N_NAME, s_name, name) < 0
            || set(self, &streams_node_layout, N_SITE, s_site, site) < 0
            || set(self, &streams_node_layout, N_ACCESSES, s_accesses, accesses) < 0
            || set(self, &streams_node_layout, N_STREAM, s_stream, Py_None) < 0
            || set(self, &streams_node_layout, N_SEQ, s_seq, minus_one) < 0
            || set(self, &streams_node_layout, N_EVENT, s_event, Py_None) < 0
            || set(self, &streams_node_layout, N_PARENTS, s_parents, no_nodes) < 0
            || set(self, &streams_node_layout, N_EDGES, s_edges, no_nodes) < 0
            || set(self, &streams_node_layout, N_KEEPALIVE, s_keepalive, Py_None) < 0
            || set(self, &streams_node_layout, N_FINISHED, s_finished, Py_False) < 0
            || set(self, &streams_node_layout, N_HANDED_OFF, s_handed_off, Py_False) < 0
            || set(self, &streams_node_layout, N_LAUNCH, s_launch, Py_None) < 0)
        return -1;
    return set(self, &streams_node_layout, N_DEVICE, s_device, zero);
}

/* ---- the policies' picks ------------------------------------------------------------------ */

static PyObject *
reuse_pick(PyObject *self, PyObject *pool)
{
    PyObject *free = call_twin(&t_take_free, pool, NULL, 0);
    if (free != Py_None)
        return free;
    Py_DECREF(free);
    PyObject *grow = PyObject_CallMethodNoArgs(pool, s_can_grow);
    int t = grow == NULL ? -1 : truth(grow);
    Py_XDECREF(grow);
    if (t < 0)
        return NULL;
    return PyObject_CallMethodNoArgs(pool, t ? s_grow : s_least_recently_used);
}

static PyObject *
disjoint_pick(PyObject *self, PyObject *parents)
{
    Items it;
    PyObject *p;
    if (items_begin(&it, parents) < 0)
        return NULL;
    while ((p = items_next(&it)) != NULL) {
        PyObject *handed = NODE(p, N_HANDED_OFF, s_handed_off), *stream = NULL;
        int t = handed == NULL ? -1 : truth(handed);
        Py_XDECREF(handed);
        if (t == 0) {
            if (set(p, &streams_node_layout, N_HANDED_OFF, s_handed_off, Py_True) == 0)
                stream = NODE(p, N_STREAM, s_stream);
            Py_DECREF(p);
            items_end(&it);
            return stream;
        }
        Py_DECREF(p);
        if (t < 0) {
            items_end(&it);
            return NULL;
        }
    }
    items_end(&it);
    if (PyErr_Occurred())
        return NULL;
    Py_RETURN_NONE;
}

/* policy.pick(arg) */
static PyObject *
call_pick(PyObject *policy, PyObject *arg)
{
    if (direct(&t_reuse_pick, policy))
        return reuse_pick(policy, arg);
    if (direct(&t_disjoint_pick, policy))
        return disjoint_pick(policy, arg);
    return call_method(policy, s_pick, 1, arg);
}

/* ---- StreamManager ------------------------------------------------------------------------ */

static PyObject *
manager_take_free(PyObject *self, PyObject *unused)
{
    PyObject *free = MANAGER(self, M_FREE, s_free);
    if (free == NULL)
        return NULL;
    for (;;) {
        Py_ssize_t n = size(free);
        if (n <= 0) {
            Py_DECREF(free);
            if (n < 0)
                return NULL;
            Py_RETURN_NONE;
        }
        PyObject *s = PyObject_CallMethodNoArgs(free, s_popleft), *inflight;
        if (s == NULL || (inflight = STATE(s, S_INFLIGHT, s_inflight)) == NULL) {
            Py_XDECREF(s);
            Py_DECREF(free);
            return NULL;
        }
        n = size(inflight);
        Py_DECREF(inflight);
        if (n <= 0) {
            Py_DECREF(free);
            if (n < 0) {
                Py_DECREF(s);
                return NULL;
            }
            return s;
        }
        Py_DECREF(s);
    }
}

static PyObject *
manager_choose(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "choose(node, parents)");
        return NULL;
    }
    PyObject *stream = Py_NewRef(Py_None), *policy;
    int t = PyObject_IsTrue(args[1]);
    if (t < 0)
        goto error;
    if (t) {
        if ((policy = MANAGER(self, M_PARENT_POLICY, s_parent_policy)) == NULL)
            goto error;
        if (policy != Py_None) {
            Py_SETREF(stream, call_pick(policy, args[1]));
            if (stream == NULL) {
                Py_DECREF(policy);
                return NULL;
            }
        }
        Py_DECREF(policy);
    }
    if (stream == Py_None) {
        if ((policy = MANAGER(self, M_NEW_POLICY, s_new_policy)) == NULL)
            goto error;
        Py_SETREF(stream, call_pick(policy, self));
        Py_DECREF(policy);
    }
    return stream;
error:
    Py_DECREF(stream);
    return NULL;
}

/* The wait of ``stream`` for parent ``p`` unless stream order or an earlier wait implies it. */
static int
wait_for(PyObject *self, PyObject *stream, PyObject *waited, PyObject *p)
{
    int rc = -1, t;
    PyObject *ps = NULL, *index = NULL, *seq = NULL, *known = NULL, *backend = NULL,
        *handle = NULL, *event = NULL, *r = NULL, *stats = NULL;
    if ((ps = NODE(p, N_STREAM, s_stream)) == NULL)
        return -1;
    if (ps == stream || ps == Py_None) {
        Py_DECREF(ps);
        return 0;
    }
    if ((index = STATE(ps, S_INDEX, s_index)) == NULL || (seq = NODE(p, N_SEQ, s_seq)) == NULL)
        goto done;
    if (PyDict_CheckExact(waited)) {
        known = PyDict_GetItemWithError(waited, index);
        if (known == NULL && PyErr_Occurred())
            goto done;
        known = Py_NewRef(known != NULL ? known : minus_one);
    } else if ((known = call_method(waited, s_get, 2, index, minus_one)) == NULL) {
        goto done;
    }
    if ((t = less(known, seq)) <= 0) {      /* waited.get(index, -1) >= p.seq */
        rc = t;
        goto done;
    }
    if ((backend = MANAGER(self, M_BACKEND, s_backend)) == NULL
            || (handle = STATE(stream, S_HANDLE, s_handle)) == NULL
            || (event = NODE(p, N_EVENT, s_event)) == NULL
            || (r = call_wait(backend, handle, event)) == NULL
            || PyObject_SetItem(waited, index, seq) < 0
            || (stats = MANAGER(self, M_STATS, s_stats)) == NULL
            || count_stat(stats, ST_EVENT_WAITS, one) < 0)
        goto done;
    rc = 0;
done:
    Py_XDECREF(ps);
    Py_XDECREF(index);
    Py_XDECREF(seq);
    Py_XDECREF(known);
    Py_XDECREF(backend);
    Py_XDECREF(handle);
    Py_XDECREF(event);
    Py_XDECREF(r);
    Py_XDECREF(stats);
    return rc;
}

/* For each other stream among the parents, its latest parent (dict index -> node, in the
   parents' order of first appearance, as the Python dict keeps it). */
static PyObject *
latest_by_stream(PyObject *stream, PyObject *parents)
{
    PyObject *by_stream = PyDict_New(), *it = NULL, *p;
    if (by_stream == NULL || (it = PyObject_GetIter(parents)) == NULL)
        goto error;
    while ((p = PyIter_Next(it)) != NULL) {
        PyObject *ps = NODE(p, N_STREAM, s_stream), *index = NULL, *cur, *a = NULL, *b = NULL;
        int keep = ps == NULL ? -1 : ps == stream || ps == Py_None ? 0 : 1;
        if (keep > 0 && (index = STATE(ps, S_INDEX, s_index)) == NULL)
            keep = -1;
        if (keep > 0) {
            cur = PyDict_GetItemWithError(by_stream, index);
            if (cur == NULL && PyErr_Occurred())
                keep = -1;
            else if (cur != NULL)
                keep = (a = NODE(cur, N_SEQ, s_seq)) == NULL || (b = NODE(p, N_SEQ, s_seq)) == NULL
                    ? -1 : less(a, b);
            if (keep > 0 && PyDict_SetItem(by_stream, index, p) < 0)
                keep = -1;
        }
        Py_DECREF(p);
        Py_XDECREF(ps);
        Py_XDECREF(index);
        Py_XDECREF(a);
        Py_XDECREF(b);
        if (keep < 0)
            goto error;
    }
    if (PyErr_Occurred())
        goto error;
    Py_DECREF(it);
    PyObject *latest = PyDict_Values(by_stream);
    Py_DECREF(by_stream);
    return latest;
error:
    Py_XDECREF(by_stream);
    Py_XDECREF(it);
    return NULL;
}

static PyObject *
manager_wait_for_parents(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "wait_for_parents(node, parents)");
        return NULL;
    }
    PyObject *stream = NODE(args[0], N_STREAM, s_stream), *latest = NULL, *waited = NULL;
    if (stream == NULL)
        return NULL;
    Py_ssize_t n = size(args[1]);
    if (n < 0)
        goto error;
    latest = n != 1 ? latest_by_stream(stream, args[1])
        : PyList_CheckExact(args[1]) ? Py_NewRef(args[1]) : PySequence_List(args[1]);
    if (latest == NULL || (waited = STATE(stream, S_WAITED, s_waited)) == NULL)
        goto error;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(latest); i++)
        if (wait_for(self, stream, waited, PyList_GET_ITEM(latest, i)) < 0)
            goto error;
    Py_DECREF(stream);
    Py_DECREF(latest);
    Py_DECREF(waited);
    Py_RETURN_NONE;
error:
    Py_DECREF(stream);
    Py_XDECREF(latest);
    Py_XDECREF(waited);
    return NULL;
}

/* A pooled completion event for the next node: the pool's latest, or a new one. */
static PyObject *
take_event(PyObject *self)
{
    PyObject *events = MANAGER(self, M_EVENTS, s_events);
    if (events == NULL)
        return NULL;
    PyObject *event;
    if (PyList_CheckExact(events) && PyList_GET_SIZE(events) > 0) {
        event = list_pop_last(events);
    } else {
        int t = PyObject_IsTrue(events);
        event = t < 0 ? NULL : t ? PyObject_CallMethodNoArgs(events, s_pop)
                                 : PyObject_CallMethodNoArgs(self, s_new_event);
    }
    Py_DECREF(events);
    return event;
}

static PyObject *
manager_issued(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 1 || nargs > 2) {
        PyErr_SetString(PyExc_TypeError, "issued(node, recorded=None)");
        return NULL;
    }
    PyObject *node = args[0], *recorded = nargs > 1 ? args[1] : Py_None, *result = NULL;
    PyObject *stream = NULL, *seq = NULL, *by_use = NULL, *event = NULL, *backend = NULL,
        *handle = NULL, *r = NULL, *inflight = NULL, *stats = NULL;
    if ((stream = NODE(node, N_STREAM, s_stream)) == NULL
            || (r = STATE(stream, S_SEQ, s_seq)) == NULL
            || (seq = PyNumber_InPlaceAdd(r, one)) == NULL
            || set(stream, &state_layout, S_SEQ, s_seq, seq) < 0
            || set(node, &streams_node_layout, N_SEQ, s_seq, seq) < 0
            || (by_use = MANAGER(self, M_BY_USE, s_by_use)) == NULL
            || PyObject_DelItem(by_use, stream) < 0          /* to the most recently used end */
            || PyObject_SetItem(by_use, stream, Py_None) < 0)
        goto done;
    Py_CLEAR(r);
    if (recorded == Py_None) {
        if ((event = take_event(self)) == NULL
                || (backend = MANAGER(self, M_BACKEND, s_backend)) == NULL
                || (handle = STATE(stream, S_HANDLE, s_handle)) == NULL
                || (r = call_record(backend, event, handle)) == NULL)
            goto done;
    } else {
        event = Py_NewRef(recorded);
    }
    if (set(node, &streams_node_layout, N_EVENT, s_event, event) < 0
            || (inflight = STATE(stream, S_INFLIGHT, s_inflight)) == NULL
            || append_item(inflight, node) < 0
            || add_at(self, &manager_layout, M_INFLIGHT, s_inflight_count, one) < 0
            || (stats = MANAGER(self, M_STATS, s_stats)) == NULL
            || count_stat(stats, ST_EVENTS_RECORDED, one) < 0)
        goto done;
    result = Py_NewRef(Py_None);
done:
    Py_XDECREF(stream);
    Py_XDECREF(seq);
    Py_XDECREF(by_use);
    Py_XDECREF(event);
    Py_XDECREF(backend);
    Py_XDECREF(handle);
    Py_XDECREF(r);
    Py_XDECREF(inflight);
    Py_XDECREF(stats);
    return result;
}

/* Whether a finished node's event goes back to the pool (asyncgpu.core.streams._pooled): not a
   replayed graph's own. 1, 0 or -1. */
static int
pooled(PyObject *node, PyObject *event)
{
    PyObject *kind = NODE(node, N_KIND, s_kind), *keepalive = NULL, *done = NULL;
    int graph = kind == NULL ? -1 : PyObject_RichCompareBool(kind, s_graph, Py_EQ);
    Py_XDECREF(kind);
    if (graph <= 0)
        return graph < 0 ? -1 : 1;
    if ((keepalive = NODE(node, N_KEEPALIVE, s_keepalive)) == NULL)
        return -1;
    done = PyObject_GetAttr(keepalive, s_done);
    Py_DECREF(keepalive);
    if (done == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError))
            return -1;
        PyErr_Clear();
        done = Py_NewRef(Py_None);
    }
    Py_DECREF(done);            /* (only its identity is compared) */
    return event != done;
}

static PyObject *
manager_on_finish(PyObject *self, PyObject *node)
{
    PyObject *event = NODE(node, N_EVENT, s_event), *events = NULL, *stream = NULL,
        *inflight = NULL, *free = NULL, *result = NULL;
    int t;
    if (event == NULL || (t = pooled(node, event)) < 0)
        goto done;
    if (t && ((events = MANAGER(self, M_EVENTS, s_events)) == NULL
              || append_item(events, event) < 0))
        goto done;
    if (set(node, &streams_node_layout, N_EVENT, s_event, Py_None) < 0
            || set(node, &streams_node_layout, N_KEEPALIVE, s_keepalive, Py_None) < 0
            || set(node, &streams_node_layout, N_LAUNCH, s_launch, Py_None) < 0
            || set(node, &streams_node_layout, N_ACCESSES, s_accesses, empty) < 0
            || add_at(self, &manager_layout, M_INFLIGHT, s_inflight_count, minus_one) < 0
            || (stream = NODE(node, N_STREAM, s_stream)) == NULL
            || (inflight = STATE(stream, S_INFLIGHT, s_inflight)) == NULL
            || (t = PyObject_IsTrue(inflight)) < 0)
        goto done;
    if (!t) {
        if ((free = MANAGER(self, M_FREE, s_free)) == NULL
                || append_item(free, stream) < 0)
            goto done;
    }
    result = Py_NewRef(Py_None);
done:
    Py_XDECREF(event);
    Py_XDECREF(events);
    Py_XDECREF(stream);
    Py_XDECREF(inflight);
    Py_XDECREF(free);
    return result;
}

/* ---- the types ---------------------------------------------------------------------------- */

static PyMethodDef manager_methods[] = {
    {"take_free", manager_take_free, METH_NOARGS,
     "The free stream that has been free longest, or None."},
    {"choose", (PyCFunction)(void (*)(void))manager_choose, METH_FASTCALL,
     "choose(node, parents): the node's stream, by policy (nothing is enqueued)."},
    {"wait_for_parents", (PyCFunction)(void (*)(void))manager_wait_for_parents, METH_FASTCALL,
     "wait_for_parents(node, parents): the event waits on the node's stream."},
    {"issued", (PyCFunction)(void (*)(void))manager_issued, METH_FASTCALL,
     "issued(node, recorded=None): book the node and record its completion event."},
    {"poll", manager_poll, METH_NOARGS,
     "Retire finished work by querying events, when many nodes are in flight."},
    {"finished", manager_finished, METH_O,
     "finished(node): retire it and everything ordered before it; the count."},
    {"_on_finish", manager_on_finish, METH_O,
     "_on_finish(node): give back the node's event and stream."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot manager_slots[] = {
    {Py_tp_methods, manager_methods},
    {Py_tp_doc, "Base of asyncgpu's StreamManager: its per-launch methods, compiled."},
    {0, NULL},
};

static PyType_Spec manager_spec = {
    "asyncgpu._speedups.StreamsBase", sizeof(PyObject), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE, manager_slots,
};

static PyMethodDef reuse_methods[] = {
    {"pick", reuse_pick, METH_O, "pick(pool): a free stream, a new one, or the least recently "
     "used."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot reuse_slots[] = {
    {Py_tp_methods, reuse_methods},
    {Py_tp_doc, "Base of asyncgpu's Reuse policy: its pick, compiled."},
    {0, NULL},
};

static PyType_Spec reuse_spec = {
    "asyncgpu._speedups.ReuseBase", sizeof(PyObject), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE, reuse_slots,
};

static PyMethodDef disjoint_methods[] = {
    {"pick", disjoint_pick, METH_O, "pick(parents): the first parent's stream not yet handed "
     "to another child, or None."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot disjoint_slots[] = {
    {Py_tp_methods, disjoint_methods},
    {Py_tp_doc, "Base of asyncgpu's Disjoint policy: its pick, compiled."},
    {0, NULL},
};

static PyType_Spec disjoint_spec = {
    "asyncgpu._speedups.DisjointBase", sizeof(PyObject), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE, disjoint_slots,
};

static PyType_Slot node_slots[] = {
    {Py_tp_init, node_init},
    {Py_tp_doc, "Base of asyncgpu's Node: its __init__, compiled."},
    {0, NULL},
};

static PyType_Spec node_spec = {
    "asyncgpu._speedups.NodeBase", sizeof(PyObject), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE, node_slots,
};

PyObject *
configure_streams(PyObject *module, PyObject *args)
{
    PyObject *node, *state, *manager, *ids, *none;
    static const char *const node_names[] = {
        "id", "kind", "name", "site", "accesses", "stream", "seq", "event", "parents", "edges",
        "keepalive", "finished", "handed_off", "launch", "device"};
    static const char *const state_names[] = {"index", "handle", "inflight", "seq", "waited"};
    static const char *const manager_names[] = {
        "backend", "stats", "poll_threshold", "new_policy", "parent_policy", "streams", "_free",
        "_events", "_by_use", "_inflight"};
    if (!PyArg_ParseTuple(args, "OOOOO:configure_streams", &node, &state, &manager, &ids,
                          &none))
        return NULL;
    if (layout(&streams_node_layout, node, node_names, 15) < 0
            || layout(&state_layout, state, state_names, 5) < 0
            || layout(&manager_layout, manager, manager_names, 10) < 0)
        return NULL;
    Py_XSETREF(node_ids, Py_NewRef(ids));
    Py_XSETREF(no_nodes, Py_NewRef(none));
    Py_RETURN_NONE;
}

int
streams_init(PyObject *module)
{
    static const Name names[] = {
        {&s_id, "id"}, {&s_kind, "kind"}, {&s_name, "name"}, {&s_site, "site"},
        {&s_accesses, "accesses"}, {&s_stream, "stream"}, {&s_seq, "seq"}, {&s_event, "event"},
        {&s_parents, "parents"}, {&s_edges, "edges"}, {&s_keepalive, "keepalive"},
        {&s_finished, "finished"}, {&s_handed_off, "handed_off"}, {&s_launch, "launch"},
        {&s_device, "device"}, {&s_index, "index"}, {&s_handle, "handle"},
        {&s_inflight, "inflight"}, {&s_waited, "waited"}, {&s_backend, "backend"},
        {&s_stats, "stats"}, {&s_new_policy, "new_policy"}, {&s_parent_policy, "parent_policy"},
        {&s_free, "_free"}, {&s_events, "_events"},
        {&s_by_use, "_by_use"}, {&s_inflight_count, "_inflight"},
        {&s_pick, "pick"}, {&s_can_grow, "can_grow"},
        {&s_grow, "grow"}, {&s_least_recently_used, "least_recently_used"},
        {&s_new_event, "_new_event"},
        {&s_popleft, "popleft"},
        {&s_pop, "pop"}, {&s_graph, "graph"}, {&s_done, "done"},
        {&s_get, "get"},
    };
    if (INTERN_ALL(names) < 0 || retire_init() < 0)
        return -1;
    if ((empty = PyTuple_New(0)) == NULL)
        return -1;
    if (add_type(module, "StreamsBase", &manager_spec) < 0
            || add_type(module, "ReuseBase", &reuse_spec) < 0
            || add_type(module, "DisjointBase", &disjoint_spec) < 0
            || add_type(module, "NodeBase", &node_spec) < 0)
        return -1;
    static struct {
        Twin *twin;
        const char *type, *method;
    } twins[] = {
        {&t_take_free, "StreamsBase", "take_free"}, {&t_choose, "StreamsBase", "choose"},
        {&t_wait_for_parents, "StreamsBase", "wait_for_parents"},
        {&t_issued, "StreamsBase", "issued"}, {&t_poll, "StreamsBase", "poll"},
        {&t_finished, "StreamsBase", "finished"}, {&t_on_finish, "StreamsBase", "_on_finish"},
        {&t_reuse_pick, "ReuseBase", "pick"}, {&t_disjoint_pick, "DisjointBase", "pick"},
    };
    for (size_t i = 0; i < sizeof twins / sizeof twins[0]; i++)
        if (twin(twins[i].twin, module, twins[i].type, twins[i].method) < 0)
            return -1;
    return 0;
}

/* ---- the calls of other files --------------------------------------------------------------- */

PyObject *
call_choose(PyObject *manager, PyObject *node, PyObject *parents)
{
    return call_twin(&t_choose, manager, (PyObject *[]){node, parents}, 2);
}

PyObject *
call_wait_for_parents(PyObject *manager, PyObject *node, PyObject *parents)
{
    return call_twin(&t_wait_for_parents, manager, (PyObject *[]){node, parents}, 2);
}

PyObject *
call_issued(PyObject *manager, PyObject *node, PyObject *recorded)
{
    return call_twin(&t_issued, manager, (PyObject *[]){node, recorded}, 2);
}

PyObject *
call_on_finish(PyObject *manager, PyObject *node)
{
    return call_twin(&t_on_finish, manager, &node, 1);
}

PyObject *
call_finished(PyObject *manager, PyObject *node)
{
    return call_twin(&t_finished, manager, &node, 1);
}

PyObject *
call_poll(PyObject *manager)
{
    return call_twin(&t_poll, manager, NULL, 0);
}
