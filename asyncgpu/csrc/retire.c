/* asyncgpu._speedups, retire.c: the stream manager's retirement and polling, compiled.

The model
---------
A node is *finished* once its completion event has been seen done, or a later node on its
stream was (a stream runs in order), or one of its children was (a child starts after its
parents): ``StreamManager.finished(node)`` retires the node with everything before it on its
stream and, transitively, its parents (``asyncgpu.core.dag.finish_through``, inlined here), and
hands each retired node to ``_on_finish`` (streams.c: its event back to the pool, what it
kept alive dropped). ``StreamManager.poll``, called by ``_issue`` once more nodes are in flight
than ``poll_threshold``, asks the event of the newest node, then the oldest, of the stream
whose newest work is oldest, so retirement keeps pace with a long run of launches that never
waits (``should_poll`` says whether it is due). The Python twins are
``asyncgpu.core.streams.PythonStreamCalls.finished`` and ``.poll``.

Invariants: the same nodes retired, in the same order, with the same statistics
(``nodes_retired``, ``retired_by_poll``, ``events_queried``) as the Python twins; a node's
parents are dropped once it is finished (they can no longer matter).

Example: ``asyncgpu.core.compiled.use(False)`` puts the Python methods back.
*/
#include "streams.h"

static PyObject *s_backend, *s_by_use, *s_event, *s_finished, *s_inflight, *s_inflight_count,
    *s_parents, *s_poll_threshold, *s_popleft, *s_seq, *s_stats, *s_stream;

/* ---- retirement: asyncgpu.core.dag.finish_through, with the manager's _on_finish ------------- */

/* Retire m, the head of its stream: finished, its unfinished parents pushed on stack. */
static int
retire_one(PyObject *self, PyObject *m, PyObject *stack)
{
    PyObject *parents, *r;
    if (set(m, &streams_node_layout, N_FINISHED, s_finished, Py_True) < 0
            || (parents = NODE(m, N_PARENTS, s_parents)) == NULL)
        return -1;
    int t = PyObject_IsTrue(parents);
    if (t > 0) {
        Items it;
        PyObject *p;
        if (items_begin(&it, parents) < 0)
            t = -1;
        while (t > 0 && (p = items_next(&it)) != NULL) {
            PyObject *f = NODE(p, N_FINISHED, s_finished);
            int done = f == NULL ? -1 : truth(f);
            Py_XDECREF(f);
            if (done < 0 || (!done && PyList_Append(stack, p) < 0))
                t = -1;
            Py_DECREF(p);
        }
        items_end(&it);
        if (t > 0 && PyErr_Occurred())
            t = -1;
        if (t > 0 && set(m, &streams_node_layout, N_PARENTS, s_parents, no_nodes) < 0)
            t = -1;
    }
    Py_DECREF(parents);
    if (t < 0 || (r = call_on_finish(self, m)) == NULL)
        return -1;
    Py_DECREF(r);
    return 0;
}

/* Retire n with everything before it on its stream; the count, or -1. */
static Py_ssize_t
retire_through(PyObject *self, PyObject *n, PyObject *stack)
{
    PyObject *stream = NODE(n, N_STREAM, s_stream), *inflight = NULL, *seq = NULL;
    Py_ssize_t count = 0;
    if (stream == NULL)
        return -1;
    if (stream == Py_None) {                /* host nodes: complete when created */
        Py_DECREF(stream);
        return set(n, &streams_node_layout, N_FINISHED, s_finished, Py_True) < 0 ? -1 : 0;
    }
    if ((inflight = STATE(stream, S_INFLIGHT, s_inflight)) == NULL
            || (seq = NODE(n, N_SEQ, s_seq)) == NULL)
        goto error;
    for (;;) {
        Py_ssize_t len = size(inflight);
        if (len < 0)
            goto error;
        if (len == 0)
            break;
        PyObject *head = PySequence_GetItem(inflight, 0), *head_seq;
        if (head == NULL || (head_seq = NODE(head, N_SEQ, s_seq)) == NULL) {
            Py_XDECREF(head);
            goto error;
        }
        Py_DECREF(head);
        int t = less_equal(head_seq, seq);
        Py_DECREF(head_seq);
        if (t < 0)
            goto error;
        if (!t)
            break;
        PyObject *m = PyObject_CallMethodNoArgs(inflight, s_popleft);
        if (m == NULL)
            goto error;
        t = retire_one(self, m, stack);
        Py_DECREF(m);
        if (t < 0)
            goto error;
        count++;
    }
    Py_DECREF(stream);
    Py_DECREF(inflight);
    Py_DECREF(seq);
    return count;
error:
    Py_DECREF(stream);
    Py_XDECREF(inflight);
    Py_XDECREF(seq);
    return -1;
}

PyObject *
manager_finished(PyObject *self, PyObject *node)
{
    PyObject *stack = PyList_New(0), *stats = NULL, *n = NULL, *total = NULL;
    Py_ssize_t count = 0;
    if (stack == NULL || PyList_Append(stack, node) < 0)
        goto error;
    while (PyList_GET_SIZE(stack)) {
        n = list_pop_last(stack);
        PyObject *f = NODE(n, N_FINISHED, s_finished);
        int done = f == NULL ? -1 : truth(f);
        Py_XDECREF(f);
        if (done < 0)
            goto error;
        if (!done) {
            Py_ssize_t c = retire_through(self, n, stack);
            if (c < 0)
                goto error;
            count += c;
        }
        Py_CLEAR(n);
    }
    if ((total = PyLong_FromSsize_t(count)) == NULL
            || (stats = MANAGER(self, M_STATS, s_stats)) == NULL
            || count_stat(stats, ST_NODES_RETIRED, total) < 0)
        goto error;
    Py_DECREF(stack);
    Py_DECREF(stats);
    return total;
error:
    Py_XDECREF(stack);
    Py_XDECREF(stats);
    Py_XDECREF(n);
    Py_XDECREF(total);
    return NULL;
}

/* ---- polling ------------------------------------------------------------------------------ */

/* Retire ``node`` if its event says it completed: 1 (retired), 0, or -1. */
static int
retire_if_done(PyObject *self, PyObject *backend, PyObject *stats, PyObject *node)
{
    PyObject *event = NODE(node, N_EVENT, s_event), *done = NULL, *n = NULL;
    int t = -1;
    if (event != NULL && count_stat(stats, ST_EVENTS_QUERIED, one) == 0
            && (done = call_event_done(backend, event)) != NULL
            && (t = truth(done)) > 0) {
        n = call_finished(self, node);
        t = n == NULL
            || count_stat(stats, ST_RETIRED_BY_POLL, n) < 0 ? -1 : 1;
    }
    Py_XDECREF(event);
    Py_XDECREF(done);
    Py_XDECREF(n);
    return t;
}

/* The least recently used stream with work in flight (a new reference), None if there is
   none, or NULL with an error set. */
static PyObject *
oldest_busy(PyObject *by_use)
{
    PyObject *s, *value, *queue;
    Py_ssize_t pos = 0;
    if (!PyDict_CheckExact(by_use)) {
        PyErr_SetString(PyExc_TypeError, "StreamManager._by_use must be a dict");
        return NULL;
    }
    while (PyDict_Next(by_use, &pos, &s, &value)) {
        Py_INCREF(s);
        Py_ssize_t len = (queue = STATE(s, S_INFLIGHT, s_inflight)) == NULL ? -1 : size(queue);
        Py_XDECREF(queue);
        if (len != 0)
            return len < 0 ? (Py_DECREF(s), NULL) : s;
        Py_DECREF(s);
    }
    return Py_NewRef(Py_None);
}

PyObject *
manager_poll(PyObject *self, PyObject *unused)
{
    PyObject *inflight = MANAGER(self, M_INFLIGHT, s_inflight_count), *threshold = NULL,
        *by_use = NULL, *backend = NULL, *stats = NULL, *s = NULL, *queue = NULL,
        *tail = NULL, *head = NULL;
    PyObject *result = NULL;
    int t;
    if (inflight == NULL
            || (threshold = MANAGER(self, M_POLL_THRESHOLD, s_poll_threshold)) == NULL
            || (t = less(threshold, inflight)) < 0)
        goto done;
    if (!t) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    /* (the stream whose newest work is oldest: see PythonStreamCalls.poll) */
    if ((by_use = MANAGER(self, M_BY_USE, s_by_use)) == NULL
            || (s = oldest_busy(by_use)) == NULL)
        goto done;
    if (s == Py_None) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    Py_ssize_t len;
    if ((backend = MANAGER(self, M_BACKEND, s_backend)) == NULL
            || (stats = MANAGER(self, M_STATS, s_stats)) == NULL
            || (queue = STATE(s, S_INFLIGHT, s_inflight)) == NULL
            || (len = size(queue)) < 0
            || (tail = PySequence_GetItem(queue, len - 1)) == NULL
            || (t = retire_if_done(self, backend, stats, tail)) < 0)
        goto done;
    if (!t) {
        if ((head = PySequence_GetItem(queue, 0)) == NULL
                || (head != tail && retire_if_done(self, backend, stats, head) < 0))
            goto done;
    }
    result = Py_NewRef(Py_None);
done:
    Py_XDECREF(inflight);
    Py_XDECREF(threshold);
    Py_XDECREF(by_use);
    Py_XDECREF(backend);
    Py_XDECREF(stats);
    Py_XDECREF(s);
    Py_XDECREF(queue);
    Py_XDECREF(tail);
    Py_XDECREF(head);
    return result;
}

/* ---- the calls of other files --------------------------------------------------------------- */

/* Whether _issue polls after a launch: more nodes in flight than the threshold (1/0/-1). */
int
should_poll(PyObject *manager)
{
    PyObject *inflight = MANAGER(manager, M_INFLIGHT, s_inflight_count), *threshold = NULL;
    int t = -1;
    if (inflight != NULL
            && (threshold = MANAGER(manager, M_POLL_THRESHOLD, s_poll_threshold)) != NULL)
        t = less(threshold, inflight);
    Py_XDECREF(inflight);
    Py_XDECREF(threshold);
    return t;
}

int
retire_init(void)
{
    static const Name names[] = {
        {&s_backend, "backend"}, {&s_by_use, "_by_use"}, {&s_event, "event"},
        {&s_finished, "finished"}, {&s_inflight, "inflight"}, {&s_inflight_count, "_inflight"},
        {&s_parents, "parents"}, {&s_poll_threshold, "poll_threshold"},
        {&s_popleft, "popleft"}, {&s_seq, "seq"}, {&s_stats, "stats"}, {&s_stream, "stream"},
    };
    return INTERN_ALL(names);
}
