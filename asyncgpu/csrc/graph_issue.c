/* asyncgpu._speedups, graph_issue.c: the runtime's launch_graph, compiled.

The model
---------
A replayed graph (``asyncgpu.runtime.frozen.FrozenGraph``) is one node of the dynamic DAG:
``Runtime.launch_graph`` makes that node over the union of the graph's accesses, books the
explicit memory model's locations around it (``before_graph`` / ``after_graph``, memory.c),
hands it to ``_issue`` (issue.c) like any node, and afterwards copies back what the host
learnt to read (``graph_read_back``). Two shortcuts keep a replay cheap:

* *settled*: a graph launched again while the runtime's host epoch has not moved since its
  last launch has nothing host-current and its writes are booked DEVICE already: no booking;
* *repeat*: a graph launched again with nothing committed since its previous launch, which
  is unfinished, needs that launch alone as its parent (when it conflicts with itself at all),
  not a scan of the tracker (``asyncgpu.runtime.issue.graph_repeat`` finds the reasons once per
  tracker).

The Python twin is ``asyncgpu.runtime.issue.PythonIssuing.launch_graph``; with the ``no-const``
policy (every access a write) the Python method runs whole.

Invariants: the same node, bookkeeping, parents and errors as the Python twin; a launch that
fails before its graph ran puts the booked locations back (``graph_not_launched``).

Example: ``asyncgpu.core.compiled.use(False)`` puts the Python method back.
*/
#include "issue.h"

/* Set by configure_issue (graph_issue_configure). */
static PyObject *python_launch_graph, *graph_repeat;
static SlotLayout frozen_layout;
enum { F_GRAPH, F_ACCESSES, F_NAME, F_COPY_IN, F_SETTLED, F_LAST, F_REPEAT, F_READ_BACK,
       F_REPLAY_VERSION };
static PyObject *s_accesses, *s_copy_in, *s_deps, *s_drain_releases, *s_finished, *s_graph,
    *s_graph_not_launched, *s_graph_read_back, *s_graphs_replayed, *s_host_epoch, *s_keepalive,
    *s_last, *s_last_replay, *s_memory, *s_name, *s_no_const, *s_read_back, *s_recording,
    *s_releases, *s_repeat, *s_replay_version, *s_settled, *s_stats, *s_version, *s_want_sites;

/* The parents of a graph launched again with nothing committed since its previous launch
   (``previous``, unfinished): that launch alone, if the graph conflicts with itself. Sets
   *found and *counts (new references) or leaves them NULL. */
static int
repeat_parents(PyObject *frozen, PyObject *deps, PyObject *previous, PyObject *accesses,
               PyObject **found, PyObject **counts)
{
    PyObject *repeat = get(frozen, &frozen_layout, F_REPEAT, s_repeat);
    if (repeat == NULL)
        return -1;
    if (repeat == Py_None || !PyTuple_CheckExact(repeat) || PyTuple_GET_SIZE(repeat) != 3
            || PyTuple_GET_ITEM(repeat, 0) != deps) {
        PyObject *call[] = {frozen, deps, accesses};
        Py_SETREF(repeat, PyObject_Vectorcall(graph_repeat, call, 3, NULL));
        if (repeat == NULL)
            return -1;
        if (!PyTuple_CheckExact(repeat) || PyTuple_GET_SIZE(repeat) != 3) {
            Py_DECREF(repeat);
            PyErr_SetString(PyExc_TypeError, "graph_repeat must return a 3-tuple");
            return -1;
        }
    }
    int t = truth(PyTuple_GET_ITEM(repeat, 1));
    if (t > 0) {
        if ((*found = PyDict_New()) == NULL
                || PyDict_SetItem(*found, previous, PyTuple_GET_ITEM(repeat, 1)) < 0) {
            Py_CLEAR(*found);
            t = -1;
        } else {
            *counts = Py_NewRef(PyTuple_GET_ITEM(repeat, 2));
        }
    }
    Py_DECREF(repeat);
    return t < 0 ? -1 : 0;
}

/* found/counts for a graph launched again (see repeat_parents), or both left NULL. */
static int
relaunch_parents(PyObject *frozen, PyObject *deps, PyObject *accesses, PyObject **found,
                 PyObject **counts)
{
    PyObject *last = get(frozen, &frozen_layout, F_LAST, s_last), *version = NULL;
    int rc = 0;
    if (last == NULL)
        return -1;
    if (PyTuple_CheckExact(last) && PyTuple_GET_SIZE(last) == 3
            && PyTuple_GET_ITEM(last, 0) == deps) {
        int same = (version = PyObject_GetAttr(deps, s_version)) == NULL ? -1
            : PyObject_RichCompareBool(PyTuple_GET_ITEM(last, 1), version, Py_EQ);
        PyObject *previous = PyTuple_GET_ITEM(last, 2), *f = NULL;
        int done = same > 0
            ? ((f = get(previous, &issue_node_layout, N_FINISHED, s_finished)) == NULL
               ? -1 : truth(f)) : 0;
        Py_XDECREF(f);
        if (same < 0 || done < 0)
            rc = -1;
        else if (same && !done)
            rc = repeat_parents(frozen, deps, previous, accesses, found, counts);
    }
    Py_DECREF(last);
    Py_XDECREF(version);
    return rc;
}

/* After a graph's launch, with graph_read_back on and no recording engaged: remember it as
   the runtime's last replay (``last_replay``, a weak reference; at tracker ``version``) and
   issue the copies back to the host it has learnt (ExplicitMemory.read_back, which then
   books the version after them). 0, or -1 with an error set. */
static int
read_back_after(PyObject *self, PyObject *frozen, PyObject *memory, PyObject *version)
{
    PyObject *recording = NULL, *pending = NULL;
    int t = rt_truth(self, R_GRAPH_READ_BACK, s_graph_read_back);
    if (t <= 0)
        return t;
    if ((recording = RT(self, R_RECORDING, s_recording)) == NULL)
        return -1;
    t = recording == Py_None;
    Py_DECREF(recording);
    if (!t)
        return 0;
    PyObject *ref = PyWeakref_NewRef(frozen, NULL);     /* (the graph's one plain ref) */
    t = ref == NULL ? -1 : set(self, &runtime_layout, R_LAST_REPLAY, s_last_replay, ref);
    Py_XDECREF(ref);
    if (t < 0 || set(frozen, &frozen_layout, F_REPLAY_VERSION, s_replay_version, version) < 0
            || (pending = get(frozen, &frozen_layout, F_READ_BACK, s_read_back)) == NULL)
        return -1;
    t = truth(pending);
    Py_DECREF(pending);
    if (t <= 0)
        return t;
    PyObject *r = call_method(memory, s_read_back, 1, frozen);
    Py_XDECREF(r);
    return r == NULL ? -1 : 0;
}

PyObject *
runtime_launch_graph(PyObject *self, PyObject *frozen)
{
    int t = rt_truth(self, R_NO_CONST, s_no_const);
    if (t != 0) {       /* every access a write: the Python method makes them */
        if (t < 0)
            return NULL;
        PyObject *call[] = {self, frozen};
        return PyObject_Vectorcall(python_launch_graph, call, 2, NULL);
    }
    PyObject *graph = NULL, *accesses = NULL, *r = NULL, *site = NULL, *name = NULL,
        *node = NULL, *stats = NULL, *memory = NULL, *booked = NULL, *deps = NULL,
        *found = NULL, *counts = NULL, *version = NULL, *last = NULL, *epoch = NULL,
        *result = NULL;
    if ((graph = get(frozen, &frozen_layout, F_GRAPH, s_graph)) == NULL
            || (accesses = get(frozen, &frozen_layout, F_ACCESSES, s_accesses)) == NULL
            || (t = rt_truth(self, R_RELEASES, s_releases)) < 0)
        goto done;
    if (t && (r = PyObject_CallMethodNoArgs(self, s_drain_releases)) == NULL)
        goto done;
    Py_CLEAR(r);
    if ((t = rt_truth(self, R_WANT_SITES, s_want_sites)) < 0
            || (site = t ? PyObject_CallNoArgs(user_site) : Py_NewRef(Py_None)) == NULL
            || (name = get(frozen, &frozen_layout, F_NAME, s_name)) == NULL)
        goto done;
    PyObject *node_args[] = {s_graph, name, site, accesses};
    if ((node = PyObject_Vectorcall(node_type, node_args, 4, NULL)) == NULL
            || set(node, &issue_node_layout, N_KEEPALIVE, s_keepalive, graph) < 0
            || (stats = RT(self, R_STATS, s_stats)) == NULL
            || add_to(stats, s_graphs_replayed, one) < 0
            || (memory = RT(self, R_MEMORY, s_memory)) == NULL)
        goto done;
    if (memory != Py_None) {
        /* (settled: launched at this epoch, so nothing of it is host-current and what it
           writes is already booked DEVICE: the bookkeeping would change nothing) */
        PyObject *settled = get(frozen, &frozen_layout, F_SETTLED, s_settled), *copy_in;
        int moved = settled == NULL || (epoch = RT(self, R_HOST_EPOCH, s_host_epoch)) == NULL
            ? -1 : PyObject_RichCompareBool(settled, epoch, Py_NE);
        Py_XDECREF(settled);
        Py_CLEAR(epoch);
        if (moved == 0) {
            copy_in = get(frozen, &frozen_layout, F_COPY_IN, s_copy_in);
            moved = copy_in == NULL ? -1 : truth(copy_in);
            Py_XDECREF(copy_in);
        }
        if (moved < 0)
            goto done;
        if (moved && (booked = call_before_graph(memory, frozen)) == NULL)
            goto done;
    }
    if ((deps = RT(self, R_DEPS, s_deps)) == NULL
            || relaunch_parents(frozen, deps, accesses, &found, &counts) < 0)
        goto done;
    r = call_issue(self, node, graph, found ? found : Py_None, counts ? counts : Py_None);
    if (r == NULL) {
        if (booked != NULL && (t = truth(booked)) != 0) {
            SavedError saved;
            save_error(&saved);
            PyObject *f = t < 0 ? NULL : get(node, &issue_node_layout, N_FINISHED, s_finished);
            int finished = f == NULL ? -1 : truth(f);
            Py_XDECREF(f);
            PyObject *undone = finished == 0
                ? call_method(memory, s_graph_not_launched, 1, booked) : NULL;
            if (finished < 0 || (finished == 0 && undone == NULL))
                raise_in_cleanup(&saved);
            else
                restore_error(&saved);
            Py_XDECREF(undone);
        }
        goto done;
    }
    Py_CLEAR(r);
    if ((version = PyObject_GetAttr(deps, s_version)) == NULL
            || (last = PyTuple_Pack(3, deps, version, node)) == NULL
            || set(frozen, &frozen_layout, F_LAST, s_last, last) < 0
            || (epoch = RT(self, R_HOST_EPOCH, s_host_epoch)) == NULL
            || set(frozen, &frozen_layout, F_SETTLED, s_settled, epoch) < 0)
        goto done;
    if (booked != NULL && (t = truth(booked)) != 0) {
        if (t < 0 || (r = call_after_graph(memory, frozen)) == NULL)
            goto done;
        Py_CLEAR(r);
    }
    if (read_back_after(self, frozen, memory, version) < 0)
        goto done;
    result = Py_NewRef(Py_None);
done:
    Py_XDECREF(graph);
    Py_XDECREF(accesses);
    Py_XDECREF(r);
    Py_XDECREF(site);
    Py_XDECREF(name);
    Py_XDECREF(node);
    Py_XDECREF(stats);
    Py_XDECREF(memory);
    Py_XDECREF(booked);
    Py_XDECREF(deps);
    Py_XDECREF(found);
    Py_XDECREF(counts);
    Py_XDECREF(version);
    Py_XDECREF(last);
    Py_XDECREF(epoch);
    return result;
}

int
graph_issue_configure(PyObject *frozen, PyObject *python_graph, PyObject *repeat)
{
    static const char *const frozen_names[] = {"graph", "accesses", "name", "copy_in",
                                               "settled", "last", "repeat", "read_back",
                                               "replay_version"};
    if (layout(&frozen_layout, frozen, frozen_names, 9) < 0)
        return -1;
    Py_XSETREF(python_launch_graph, Py_NewRef(python_graph));
    Py_XSETREF(graph_repeat, Py_NewRef(repeat));
    return 0;
}

int
graph_issue_init(void)
{
    static const Name names[] = {
        {&s_accesses, "accesses"}, {&s_copy_in, "copy_in"}, {&s_deps, "deps"},
        {&s_drain_releases, "_drain_releases"}, {&s_finished, "finished"}, {&s_graph, "graph"},
        {&s_graph_not_launched, "graph_not_launched"}, {&s_graph_read_back, "graph_read_back"},
        {&s_graphs_replayed, "graphs_replayed"}, {&s_host_epoch, "host_epoch"},
        {&s_keepalive, "keepalive"}, {&s_last, "last"}, {&s_last_replay, "last_replay"},
        {&s_memory, "memory"}, {&s_name, "name"}, {&s_no_const, "no_const"},
        {&s_read_back, "read_back"}, {&s_recording, "recording"}, {&s_releases, "_releases"},
        {&s_repeat, "repeat"}, {&s_replay_version, "replay_version"}, {&s_settled, "settled"},
        {&s_stats, "stats"}, {&s_version, "version"}, {&s_want_sites, "want_sites"},
    };
    return INTERN_ALL(names);
}
