#include "speedups.h"

/* ---- The dependency tracker's conflicts and commit ----------------------------------------
   The same algorithm as asyncgpu/core/deps.py's PythonTracking, over the same Python objects (a
   dict of allocation key -> _Live, whose ``writes`` is a list and ``reads`` a dict of stream ->
   list of (lo, hi, node) tuples), with the same answers, the same side effects on stale
   entries, and the same order of the parents found. What makes it cheaper is reading
   ``__slots__`` attributes at their offsets (found once, per exact type, by
   configure_tracker) instead of through the attribute protocol; an object of another type is
   read through the protocol. */

enum { A_KEY, A_LO, A_HI, A_WRITE, A_LABEL };
#define MAX_ACCESS_TYPES 4

static SlotLayout access_layouts[MAX_ACCESS_TYPES];
static int n_access_layouts = 0;
static SlotLayout live_layout, node_layout, tracker_layout;    /* writes, reads / finished,
                                                                   stream /
                                                                   _live, _drop_raw, _drop_war,
                                                                   version */
static PyObject *s_key, *s_lo, *s_hi, *s_write, *s_label, *s_writes, *s_reads, *s_finished,
    *s_live, *s_drop_raw, *s_drop_war, *s_version;
static PyObject *reason_raw, *reason_war, *reason_waw, *s_stream;

static const SlotLayout *
access_layout(PyObject *acc)
{
    for (int i = 0; i < n_access_layouts; i++)
        if (Py_TYPE(acc) == access_layouts[i].type)
            return &access_layouts[i];
    return NULL;
}

/* node.finished as 1/0, -1 on error */
static int
finished(PyObject *node)
{
    PyObject *f = get(node, &node_layout, 0, s_finished);
    if (f == NULL)
        return -1;
    int r = f == Py_False ? 0 : f == Py_True ? 1 : PyObject_IsTrue(f);
    Py_DECREF(f);
    return r;
}

static int
unpack_entry(PyObject *e, PyObject **lo, PyObject **hi, PyObject **node)
{
    if (!PyTuple_CheckExact(e) || PyTuple_GET_SIZE(e) != 3) {
        PyErr_SetString(PyExc_TypeError, "dependency tracker: an entry is not (lo, hi, node)");
        return -1;
    }
    *lo = PyTuple_GET_ITEM(e, 0);
    *hi = PyTuple_GET_ITEM(e, 1);
    *node = PyTuple_GET_ITEM(e, 2);
    return 0;
}

/* elo < hi and lo < ehi */
static int
overlaps(PyObject *elo, PyObject *ehi, PyObject *lo, PyObject *hi)
{
    int r = less(elo, hi);
    if (r <= 0)
        return r;
    return less(lo, ehi);
}

/* lo <= elo and ehi <= hi */
static int
covers(PyObject *lo, PyObject *hi, PyObject *elo, PyObject *ehi)
{
    int r = less_equal(lo, elo);
    if (r <= 0)
        return r;
    return less_equal(ehi, hi);
}

static int
add_reason(PyObject *found, PyObject *node, PyObject *reason, PyObject *label)
{
    PyObject *pair = PyTuple_Pack(2, reason, label);
    if (pair == NULL)
        return -1;
    PyObject *reasons = PyDict_GetItemWithError(found, node);      /* borrowed */
    int r;
    if (reasons != NULL) {
        r = PyList_Append(reasons, pair);
    } else if (PyErr_Occurred()) {
        r = -1;
    } else {
        PyObject *list = PyList_New(1);
        if (list == NULL) {
            Py_DECREF(pair);
            return -1;
        }
        Py_INCREF(pair);
        PyList_SET_ITEM(list, 0, pair);
        r = PyDict_SetItem(found, node, list);
        Py_DECREF(list);
    }
    Py_DECREF(pair);
    return r;
}

/* entries[:] = [e for e in entries if keep(e)]: keep unfinished (mode 0), or keep those not
   covered by [lo, hi) (mode 1), or neither covered nor finished (mode 2). */
static int
filter_entries(PyObject *entries, int mode, PyObject *lo, PyObject *hi)
{
    PyObject *kept = PyList_New(0);
    if (kept == NULL)
        return -1;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(entries); i++) {
        PyObject *e = PyList_GET_ITEM(entries, i), *elo, *ehi, *node;
        if (unpack_entry(e, &elo, &ehi, &node) < 0)
            goto error;
        int drop = 0;
        if (mode >= 1) {
            drop = covers(lo, hi, elo, ehi);
            if (drop < 0)
                goto error;
        }
        if (!drop && mode != 1) {
            drop = finished(node);
            if (drop < 0)
                goto error;
        }
        if (!drop && PyList_Append(kept, e) < 0)
            goto error;
    }
    int r = PyList_SetSlice(entries, 0, PyList_GET_SIZE(entries), kept);
    Py_DECREF(kept);
    return r;
error:
    Py_DECREF(kept);
    return -1;
}

/* DependencyTracker._scan */
static int
scan_writes(PyObject *entries, PyObject *lo, PyObject *hi, PyObject *reason, PyObject *label,
            PyObject *found)
{
    int stale = 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(entries); i++) {
        PyObject *elo, *ehi, *node;
        if (unpack_entry(PyList_GET_ITEM(entries, i), &elo, &ehi, &node) < 0)
            return -1;
        int f = finished(node);
        if (f < 0)
            return -1;
        if (f) {
            stale = 1;
            continue;
        }
        int o = overlaps(elo, ehi, lo, hi);
        if (o < 0 || (o && add_reason(found, node, reason, label) < 0))
            return -1;
    }
    return stale ? filter_entries(entries, 0, NULL, NULL) : 0;
}

/* DependencyTracker._scan_reads */
static int
scan_reads(PyObject *reads, PyObject *lo, PyObject *hi, PyObject *label, PyObject *found)
{
    PyObject *stale = NULL, *stream, *entries;
    Py_ssize_t pos = 0;
    while (PyDict_Next(reads, &pos, &stream, &entries)) {
        if (!PyList_Check(entries)) {
            PyErr_SetString(PyExc_TypeError, "dependency tracker: reads of a stream not a list");
            goto error;
        }
        int alive = 0;
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(entries); i++) {
            PyObject *elo, *ehi, *node;
            if (unpack_entry(PyList_GET_ITEM(entries, i), &elo, &ehi, &node) < 0)
                goto error;
            int f = finished(node);
            if (f < 0)
                goto error;
            if (f)
                continue;
            alive = 1;
            int o = overlaps(elo, ehi, lo, hi);
            if (o < 0 || (o && add_reason(found, node, reason_war, label) < 0))
                goto error;
        }
        if (!alive) {
            if (stale == NULL && (stale = PyList_New(0)) == NULL)
                goto error;
            if (PyList_Append(stale, stream) < 0)
                goto error;
        }
    }
    if (stale != NULL) {
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(stale); i++)
            if (PyDict_DelItem(reads, PyList_GET_ITEM(stale, i)) < 0)
                goto error;
        Py_DECREF(stale);
    }
    return 0;
error:
    Py_XDECREF(stale);
    return -1;
}

typedef struct {
    PyObject *live_map;
    int drop_raw, drop_war;
} TrackerState;

static int
tracker_state(PyObject *self, TrackerState *st)
{
    PyObject *v;
    st->live_map = get(self, &tracker_layout, 0, s_live);
    if (st->live_map == NULL)
        return -1;
    if (!PyDict_Check(st->live_map)) {
        PyErr_SetString(PyExc_TypeError, "dependency tracker: _live is not a dict");
        Py_CLEAR(st->live_map);
        return -1;
    }
    if ((v = get(self, &tracker_layout, 1, s_drop_raw)) == NULL)
        goto error;
    st->drop_raw = PyObject_IsTrue(v);
    Py_DECREF(v);
    if ((v = get(self, &tracker_layout, 2, s_drop_war)) == NULL)
        goto error;
    st->drop_war = PyObject_IsTrue(v);
    Py_DECREF(v);
    if (st->drop_raw < 0 || st->drop_war < 0)
        goto error;
    return 0;
error:
    Py_CLEAR(st->live_map);
    return -1;
}

/* One access's fields, new references. */
typedef struct { PyObject *key, *lo, *hi, *label; int write; } AccessFields;

static int
access_fields(PyObject *acc, AccessFields *a, int want_label)
{
    const SlotLayout *l = access_layout(acc);
    a->key = a->lo = a->hi = a->label = NULL;
    PyObject *w;
    if ((a->key = get(acc, l, A_KEY, s_key)) == NULL
            || (a->lo = get(acc, l, A_LO, s_lo)) == NULL
            || (a->hi = get(acc, l, A_HI, s_hi)) == NULL
            || (want_label && (a->label = get(acc, l, A_LABEL, s_label)) == NULL)
            || (w = get(acc, l, A_WRITE, s_write)) == NULL)
        goto error;
    a->write = w == Py_True ? 1 : w == Py_False ? 0 : PyObject_IsTrue(w);
    Py_DECREF(w);
    if (a->write < 0)
        goto error;
    return 0;
error:
    Py_CLEAR(a->key);
    Py_CLEAR(a->lo);
    Py_CLEAR(a->hi);
    Py_CLEAR(a->label);
    return -1;
}

static void
release_fields(AccessFields *a)
{
    Py_CLEAR(a->key);
    Py_CLEAR(a->lo);
    Py_CLEAR(a->hi);
    Py_CLEAR(a->label);
}

/* (writes, reads) of a _Live, new references */
static int
live_parts(PyObject *live, PyObject **writes, PyObject **reads)
{
    *writes = get(live, &live_layout, 0, s_writes);
    if (*writes == NULL)
        return -1;
    *reads = get(live, &live_layout, 1, s_reads);
    if (*reads == NULL) {
        Py_CLEAR(*writes);
        return -1;
    }
    if (!PyList_Check(*writes) || !PyDict_Check(*reads)) {
        PyErr_SetString(PyExc_TypeError, "dependency tracker: malformed live entry");
        Py_CLEAR(*writes);
        Py_CLEAR(*reads);
        return -1;
    }
    return 0;
}

static PyObject *
tracker_conflicts(PyObject *self, PyObject *accesses)
{
    TrackerState st;
    if (tracker_state(self, &st) < 0)
        return NULL;
    PyObject *found = PyDict_New(), *acc = NULL;
    Items it = {NULL, NULL, 0};
    if (found == NULL || items_begin(&it, accesses) < 0)
        goto error;
    while ((acc = items_next(&it)) != NULL) {
        AccessFields a;
        PyObject *writes = NULL, *reads = NULL;
        if (access_fields(acc, &a, 1) < 0)
            goto error;
        PyObject *live = PyDict_GetItemWithError(st.live_map, a.key);     /* borrowed */
        if (live == NULL) {
            release_fields(&a);
            if (PyErr_Occurred())
                goto error;
            Py_CLEAR(acc);
            continue;
        }
        if (live_parts(live, &writes, &reads) < 0)
            goto access_error;
        PyObject *reason;
        if (a.write) {
            if (PyDict_GET_SIZE(reads) && !st.drop_war
                    && scan_reads(reads, a.lo, a.hi, a.label, found) < 0)
                goto access_error;
            reason = reason_waw;
        } else if (st.drop_raw) {
            goto next;
        } else {
            reason = reason_raw;
        }
        if (PyList_GET_SIZE(writes) == 1) {
            PyObject *elo, *ehi, *node;
            if (unpack_entry(PyList_GET_ITEM(writes, 0), &elo, &ehi, &node) < 0)
                goto access_error;
            int f = finished(node);
            if (f < 0)
                goto access_error;
            if (f) {
                if (PyList_SetSlice(writes, 0, 1, NULL) < 0)
                    goto access_error;
            } else {
                int o = overlaps(elo, ehi, a.lo, a.hi);
                if (o < 0 || (o && add_reason(found, node, reason, a.label) < 0))
                    goto access_error;
            }
        } else if (PyList_GET_SIZE(writes)
                   && scan_writes(writes, a.lo, a.hi, reason, a.label, found) < 0) {
            goto access_error;
        }
next:
        Py_DECREF(writes);
        Py_DECREF(reads);
        release_fields(&a);
        Py_CLEAR(acc);
        continue;
access_error:
        Py_XDECREF(writes);
        Py_XDECREF(reads);
        release_fields(&a);
        goto error;
    }
    if (PyErr_Occurred())
        goto error;
    items_end(&it);
    Py_DECREF(st.live_map);
    return found;
error:
    Py_XDECREF(acc);
    items_end(&it);
    Py_XDECREF(found);
    Py_DECREF(st.live_map);
    return NULL;
}

static PyObject *
new_entry(PyObject *lo, PyObject *hi, PyObject *node)
{
    return PyTuple_Pack(3, lo, hi, node);
}

/* the write's part of commit: writes and reads it covers are dropped, then it is added */
static int
commit_write(PyObject *writes, PyObject *reads, PyObject *lo, PyObject *hi, PyObject *node)
{
    PyObject *entry = new_entry(lo, hi, node);
    if (entry == NULL)
        return -1;
    if (PyList_GET_SIZE(writes) == 1) {
        PyObject *elo, *ehi, *enode;
        if (unpack_entry(PyList_GET_ITEM(writes, 0), &elo, &ehi, &enode) < 0)
            goto error;
        int c = covers(lo, hi, elo, ehi);
        if (c < 0)
            goto error;
        if (c) {
            if (PyList_SetItem(writes, 0, entry) < 0)      /* steals entry */
                return -1;
            entry = NULL;
        } else if (PyList_Append(writes, entry) < 0) {
            goto error;
        }
    } else {
        if (PyList_GET_SIZE(writes) && filter_entries(writes, 1, lo, hi) < 0)
            goto error;
        if (PyList_Append(writes, entry) < 0)
            goto error;
    }
    Py_XDECREF(entry);
    if (!PyDict_GET_SIZE(reads))
        return 0;
    /* for s, entries in list(reads.items()) */
    PyObject *items = PyDict_Items(reads);
    if (items == NULL)
        return -1;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(items); i++) {
        PyObject *item = PyList_GET_ITEM(items, i);
        PyObject *stream = PyTuple_GET_ITEM(item, 0), *entries = PyTuple_GET_ITEM(item, 1);
        if (!PyList_Check(entries)) {
            PyErr_SetString(PyExc_TypeError, "dependency tracker: reads of a stream not a list");
            goto items_error;
        }
        if (PyList_GET_SIZE(entries) == 1) {
            PyObject *elo, *ehi, *enode;
            if (unpack_entry(PyList_GET_ITEM(entries, 0), &elo, &ehi, &enode) < 0)
                goto items_error;
            int c = covers(lo, hi, elo, ehi);
            if (c < 0 || (c && PyDict_DelItem(reads, stream) < 0))
                goto items_error;
            continue;
        }
        if (filter_entries(entries, 1, lo, hi) < 0
                || (!PyList_GET_SIZE(entries) && PyDict_DelItem(reads, stream) < 0))
            goto items_error;
    }
    Py_DECREF(items);
    return 0;
items_error:
    Py_DECREF(items);
    return -1;
error:
    Py_XDECREF(entry);
    return -1;
}

/* the read's part of commit: it replaces the reads of its own stream that it covers */
static int
commit_read(PyObject *reads, PyObject *stream, PyObject *lo, PyObject *hi, PyObject *node)
{
    PyObject *entry = new_entry(lo, hi, node);
    if (entry == NULL)
        return -1;
    PyObject *mine = PyDict_GetItemWithError(reads, stream);      /* borrowed */
    int r;
    if (mine == NULL) {
        if (PyErr_Occurred())
            goto error;
        PyObject *list = PyList_New(1);
        if (list == NULL)
            goto error;
        PyList_SET_ITEM(list, 0, entry);        /* steals */
        r = PyDict_SetItem(reads, stream, list);
        Py_DECREF(list);
        return r;
    }
    if (!PyList_Check(mine)) {
        PyErr_SetString(PyExc_TypeError, "dependency tracker: reads of a stream not a list");
        goto error;
    }
    Py_INCREF(mine);
    if (PyList_GET_SIZE(mine) == 1) {
        PyObject *elo, *ehi, *enode;
        int c, f = 0;
        if (unpack_entry(PyList_GET_ITEM(mine, 0), &elo, &ehi, &enode) < 0
                || (c = covers(lo, hi, elo, ehi)) < 0 || (!c && (f = finished(enode)) < 0))
            goto mine_error;
        if (c || f) {
            Py_INCREF(entry);
            if (PyList_SetItem(mine, 0, entry) < 0)
                goto mine_error;
        } else if (PyList_Append(mine, entry) < 0) {
            goto mine_error;
        }
    } else {
        if (filter_entries(mine, 2, lo, hi) < 0 || PyList_Append(mine, entry) < 0)
            goto mine_error;
    }
    Py_DECREF(mine);
    Py_DECREF(entry);
    return 0;
mine_error:
    Py_DECREF(mine);
error:
    Py_DECREF(entry);
    return -1;
}

static PyObject *
tracker_commit(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "commit(node, accesses)");
        return NULL;
    }
    PyObject *node = args[0], *accesses = args[1], *stream = NULL, *acc = NULL;
    Items it = {NULL, NULL, 0};
    TrackerState st;
    if (live_layout.type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "asyncgpu._speedups: configure_tracker not called");
        return NULL;
    }
    if ((stream = get(node, &node_layout, 1, s_stream)) == NULL)
        return NULL;
    if (tracker_state(self, &st) < 0) {
        Py_DECREF(stream);
        return NULL;
    }
    /* self.version += 1 */
    PyObject *version = get(self, &tracker_layout, 3, s_version), *bumped;
    if (version == NULL)
        goto error;
    bumped = PyNumber_Add(version, one);
    Py_DECREF(version);
    if (bumped == NULL)
        goto error;
    int r = set(self, &tracker_layout, 3, s_version, bumped);
    Py_DECREF(bumped);
    if (r < 0)
        goto error;
    if (items_begin(&it, accesses) < 0)
        goto error;
    while ((acc = items_next(&it)) != NULL) {
        AccessFields a;
        PyObject *writes = NULL, *reads = NULL;
        if (access_fields(acc, &a, 0) < 0)
            goto error;
        int empty = less(a.lo, a.hi);
        if (empty < 0)
            goto access_error;
        if (!empty)
            goto next;                  /* lo >= hi */
        PyObject *live = PyDict_GetItemWithError(st.live_map, a.key);     /* borrowed */
        if (live == NULL) {
            if (PyErr_Occurred())
                goto access_error;
            live = PyObject_CallNoArgs((PyObject *)live_layout.type);
            if (live == NULL)
                goto access_error;
            r = PyDict_SetItem(st.live_map, a.key, live);
            Py_DECREF(live);            /* the dict holds it */
            if (r < 0)
                goto access_error;
        }
        if (live_parts(live, &writes, &reads) < 0)
            goto access_error;
        if (a.write ? commit_write(writes, reads, a.lo, a.hi, node) < 0
                    : commit_read(reads, stream, a.lo, a.hi, node) < 0)
            goto access_error;
next:
        Py_XDECREF(writes);
        Py_XDECREF(reads);
        release_fields(&a);
        Py_CLEAR(acc);
        continue;
access_error:
        Py_XDECREF(writes);
        Py_XDECREF(reads);
        release_fields(&a);
        goto error;
    }
    if (PyErr_Occurred())
        goto error;
    items_end(&it);
    Py_DECREF(stream);
    Py_DECREF(st.live_map);
    Py_RETURN_NONE;
error:
    Py_XDECREF(acc);
    items_end(&it);
    Py_XDECREF(stream);
    Py_DECREF(st.live_map);
    return NULL;
}

static Twin t_conflicts, t_commit;

static PyMethodDef tracker_methods[] = {
    {"conflicts", tracker_conflicts, METH_O,
     "conflicts(accesses): the unfinished nodes the accesses conflict with -> [(reason, "
     "label)], in issue order (compiled DependencyTracker.conflicts)."},
    {"commit", (PyCFunction)(void (*)(void))tracker_commit, METH_FASTCALL,
     "commit(node, accesses): record the node's accesses (compiled "
     "DependencyTracker.commit)."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot tracker_slots[] = {
    {Py_tp_methods, tracker_methods},
    {Py_tp_doc, "Base of asyncgpu's DependencyTracker: conflicts and commit, compiled."},
    {0, NULL},
};

static PyType_Spec tracker_spec = {
    "asyncgpu._speedups.TrackerBase",
    sizeof(PyObject),
    0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    tracker_slots,
};

PyObject *
configure_tracker(PyObject *module, PyObject *args)
{
    PyObject *tracker_type, *live_type, *node_type, *access_types, *raw, *war, *waw;
    static const char *const access_names[] = {"key", "lo", "hi", "write", "label"};
    static const char *const live_names[] = {"writes", "reads"};
    static const char *const node_names[] = {"finished", "stream"};
    static const char *const tracker_names[] = {"_live", "_drop_raw", "_drop_war", "version"};
    if (!PyArg_ParseTuple(args, "OOOO!UUU:configure_tracker", &tracker_type, &live_type,
                          &node_type, &PyTuple_Type, &access_types, &raw, &war, &waw))
        return NULL;
    if (PyTuple_GET_SIZE(access_types) > MAX_ACCESS_TYPES) {
        PyErr_SetString(PyExc_ValueError, "configure_tracker: too many access types");
        return NULL;
    }
    if (layout(&tracker_layout, tracker_type, tracker_names, 4) < 0
            || layout(&live_layout, live_type, live_names, 2) < 0
            || layout(&node_layout, node_type, node_names, 2) < 0)
        return NULL;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(access_types); i++)
        if (layout(&access_layouts[i], PyTuple_GET_ITEM(access_types, i), access_names, 5) < 0)
            return NULL;
    n_access_layouts = (int)PyTuple_GET_SIZE(access_types);
    Py_INCREF(raw);
    Py_XSETREF(reason_raw, raw);
    Py_INCREF(war);
    Py_XSETREF(reason_war, war);
    Py_INCREF(waw);
    Py_XSETREF(reason_waw, waw);
    Py_RETURN_NONE;
}

int
tracker_init(PyObject *module)
{
    if (intern(&s_key, "key") < 0 || intern(&s_lo, "lo") < 0 || intern(&s_hi, "hi") < 0
            || intern(&s_write, "write") < 0 || intern(&s_label, "label") < 0
            || intern(&s_writes, "writes") < 0 || intern(&s_reads, "reads") < 0
            || intern(&s_finished, "finished") < 0 || intern(&s_live, "_live") < 0
            || intern(&s_drop_raw, "_drop_raw") < 0 || intern(&s_drop_war, "_drop_war") < 0
            || intern(&s_version, "version") < 0 || intern(&s_stream, "stream") < 0)
        return -1;
    if (add_type(module, "TrackerBase", &tracker_spec) < 0
            || twin(&t_conflicts, module, "TrackerBase", "conflicts") < 0
            || twin(&t_commit, module, "TrackerBase", "commit") < 0)
        return -1;
    return 0;
}

PyObject *
call_conflicts(PyObject *tracker, PyObject *accesses)
{
    return call_twin(&t_conflicts, tracker, &accesses, 1);
}

PyObject *
call_commit(PyObject *tracker, PyObject *node, PyObject *accesses)
{
    return call_twin(&t_commit, tracker, (PyObject *[]){node, accesses}, 2);
}
