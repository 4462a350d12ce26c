/* asyncgpu._speedups: the launcher's call, compiled (optional).

The model
---------
Calling ``kernel[grid, block](...)`` enters ``Launcher.__call__`` once per launch. Inside a
recording whose previous run is remembered (``Recording.previous``, see asyncgpu/_recorder.py),
a launch that repeats the previous run's launch at the same position with the very same
argument objects is only appended to the recording: no validation, no keying. In Python that
check costs about as much as everything else a replayed kernel costs the host; here it is a
handful of pointer comparisons.

This module holds no state of its own and decides nothing the Python code does not: it reads
the same attributes (``asyncgpu._runtime._runtime``, ``Runtime.recording``,
``Recording.thread``/``launches``/``previous``, ``Launch.launcher``/``args``) and takes the
same fast path as ``asyncgpu._kernel.launch_in_python``. Everything else (no runtime yet, a
recording of another thread, an argument that is equal but not the same object, keyword
arguments) goes to that Python function, which is also the whole implementation when this
module is not built. So the two agree by construction on every case but the one fast path,
and tests/test_speedups.py runs the recorder's tests both ways.

Invariant: the fast path appends the remembered ``Launch`` object itself, exactly what
``Recording.remember`` appends, and only when ``Recording.remember`` would.

Example (what the fast path serves)::

    @ag.graph
    def step(x, y):
        k1[g, b](x, y)      # second call on: appended as the first call's launch
    step(x, y); step(x, y); step(x, y)

Built by ``pip install`` (setuptools, optional: a failed build leaves the Python path) or by
``python3 tools/build_speedups.py`` in a source tree. Plain CPython C API: no CUDA, no NumPy.
*/
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include "pythread.h"
#include <stdint.h>

/* Set by configure(): the globals of asyncgpu._runtime and the Python launch. */
static PyObject *runtime_globals = NULL;
static PyObject *launch_in_python = NULL;

static PyObject *s_runtime, *s_recording, *s_thread, *s_launches, *s_previous, *s_launcher,
    *s_args, *s_launch_kernel, *s_stream;

/* 1: the launch repeats the remembered one and was appended; 0: not; -1: error set. */
static int
remember(PyObject *rec, PyObject *self, PyObject *args)
{
    int hit = 0;
    PyObject *thread = NULL, *launches = NULL, *previous = NULL, *same = NULL;
    PyObject *launcher = NULL, *old = NULL;

    thread = PyObject_GetAttr(rec, s_thread);
    if (thread == NULL)
        goto error;
    if (!PyLong_CheckExact(thread))
        goto done;
    unsigned long ident = PyLong_AsUnsignedLong(thread);
    if (ident == (unsigned long)-1 && PyErr_Occurred())
        goto error;
    if (ident != PyThread_get_thread_ident())
        goto done;                     /* another thread's recording: the Python path */
    launches = PyObject_GetAttr(rec, s_launches);
    if (launches == NULL)
        goto error;
    previous = PyObject_GetAttr(rec, s_previous);
    if (previous == NULL)
        goto error;
    if (!PyList_CheckExact(launches) || !PyList_CheckExact(previous))
        goto done;                     /* () when nothing is remembered */
    Py_ssize_t position = PyList_GET_SIZE(launches);
    if (position >= PyList_GET_SIZE(previous))
        goto done;
    same = PyList_GET_ITEM(previous, position);
    Py_INCREF(same);
    launcher = PyObject_GetAttr(same, s_launcher);
    if (launcher == NULL)
        goto error;
    if (launcher != self)
        goto done;
    old = PyObject_GetAttr(same, s_args);
    if (old == NULL)
        goto error;
    if (!PyTuple_CheckExact(old) || PyTuple_GET_SIZE(old) != PyTuple_GET_SIZE(args))
        goto done;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(args); i++) {
        if (PyTuple_GET_ITEM(old, i) != PyTuple_GET_ITEM(args, i))
            goto done;                 /* maybe equal: Python's same_arguments decides */
    }
    if (PyList_Append(launches, same) < 0)
        goto error;
    hit = 1;
    goto done;
error:
    hit = -1;
done:
    Py_XDECREF(thread);
    Py_XDECREF(launches);
    Py_XDECREF(previous);
    Py_XDECREF(same);
    Py_XDECREF(launcher);
    Py_XDECREF(old);
    return hit;
}

static PyObject *
launcher_call(PyObject *self, PyObject *args, PyObject *kwargs)
{
    if ((kwargs != NULL && PyDict_Size(kwargs) != 0) || runtime_globals == NULL)
        goto python;
    PyObject *rt = PyDict_GetItemWithError(runtime_globals, s_runtime);     /* borrowed */
    if (rt == NULL) {
        if (PyErr_Occurred())
            return NULL;
        goto python;
    }
    if (rt == Py_None)
        goto python;                   /* no runtime yet: Python creates it */
    Py_INCREF(rt);
    PyObject *rec = PyObject_GetAttr(rt, s_recording);
    if (rec == NULL) {
        Py_DECREF(rt);
        return NULL;
    }
    if (rec == Py_None) {              /* eager: straight to the runtime */
        Py_DECREF(rec);
        PyObject *r = PyObject_CallMethodObjArgs(rt, s_launch_kernel, self, args, NULL);
        Py_DECREF(rt);
        return r;
    }
    Py_DECREF(rt);
    int hit = remember(rec, self, args);
    Py_DECREF(rec);
    if (hit < 0)
        return NULL;
    if (hit)
        Py_RETURN_NONE;
python:
    if (launch_in_python == NULL) {
        PyErr_SetString(PyExc_RuntimeError,
                        "asyncgpu._speedups was not configured (import asyncgpu first)");
        return NULL;
    }
    if (kwargs != NULL && PyDict_Size(kwargs) != 0) {
        PyObject *pair = PyTuple_Pack(2, self, args);
        if (pair == NULL)
            return NULL;
        PyObject *r = PyObject_Call(launch_in_python, pair, kwargs);     /* raises */
        Py_DECREF(pair);
        return r;
    }
    return PyObject_CallFunctionObjArgs(launch_in_python, self, args, NULL);
}

static PyType_Slot launcher_slots[] = {
    {Py_tp_call, launcher_call},
    {Py_tp_doc, "Base of asyncgpu's Launcher: its call, compiled."},
    {0, NULL},
};

static PyType_Spec launcher_spec = {
    "asyncgpu._speedups.LauncherBase",
    sizeof(PyObject),
    0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    launcher_slots,
};

/* ---- The dependency tracker's conflicts and commit ----------------------------------------
   The same algorithm as asyncgpu/_deps.py's PythonTracking, over the same Python objects (a
   dict of allocation key -> _Live, whose ``writes`` is a list and ``reads`` a dict of stream ->
   list of (lo, hi, node) tuples), with the same answers, the same side effects on stale
   entries, and the same order of the parents found. What makes it cheaper is reading
   ``__slots__`` attributes at their offsets (found once, per exact type, by
   configure_tracker) instead of through the attribute protocol; an object of another type is
   read through the protocol. */

#include "structmember.h"

typedef struct {
    PyTypeObject *type;
    Py_ssize_t off[10];     /* per field, the offset of its slot */
} SlotLayout;

enum { A_KEY, A_LO, A_HI, A_WRITE, A_LABEL };
#define MAX_ACCESS_TYPES 4

static SlotLayout access_layouts[MAX_ACCESS_TYPES];
static int n_access_layouts = 0;
static SlotLayout live_layout, node_layout, tracker_layout;    /* writes, reads / finished /
                                                                   _live, _drop_raw, _drop_war,
                                                                   version */
static PyObject *s_key, *s_lo, *s_hi, *s_write, *s_label, *s_writes, *s_reads, *s_finished,
    *s_live, *s_drop_raw, *s_drop_war, *s_version;
static PyObject *reason_raw, *reason_war, *reason_waw, *one;

static Py_ssize_t
slot_offset(PyTypeObject *type, const char *name)
{
    PyObject *descr = PyObject_GetAttrString((PyObject *)type, name);
    if (descr == NULL)
        return -1;
    if (Py_TYPE(descr) != &PyMemberDescr_Type
            || ((PyMemberDescrObject *)descr)->d_member->type != T_OBJECT_EX) {
        Py_DECREF(descr);
        PyErr_Format(PyExc_TypeError, "%s.%s is not a __slots__ attribute", type->tp_name, name);
        return -1;
    }
    Py_ssize_t off = ((PyMemberDescrObject *)descr)->d_member->offset;
    Py_DECREF(descr);
    return off;
}

/* New reference to obj's attribute: at its slot offset when obj's exact type is the layout's,
   else through getattr. An unset slot raises AttributeError, as getattr would. */
static PyObject *
get(PyObject *obj, const SlotLayout *layout, int field, PyObject *name)
{
    if (layout != NULL && Py_TYPE(obj) == layout->type) {
        PyObject *v = *(PyObject **)((char *)obj + layout->off[field]);
        if (v != NULL) {
            Py_INCREF(v);
            return v;
        }
    }
    return PyObject_GetAttr(obj, name);
}

static const SlotLayout *
access_layout(PyObject *acc)
{
    for (int i = 0; i < n_access_layouts; i++)
        if (Py_TYPE(acc) == access_layouts[i].type)
            return &access_layouts[i];
    return NULL;
}

/* a < b for Python ints (any other objects: Python's comparison). 1, 0 or -1 (error). */
static int
less(PyObject *a, PyObject *b)
{
    if (PyLong_CheckExact(a) && PyLong_CheckExact(b)) {
        int oa, ob;
        long long x = PyLong_AsLongLongAndOverflow(a, &oa);
        long long y = PyLong_AsLongLongAndOverflow(b, &ob);
        if (!oa && !ob && !(x == -1 && PyErr_Occurred()) && !(y == -1 && PyErr_Occurred()))
            return x < y;
        PyErr_Clear();
    }
    return PyObject_RichCompareBool(a, b, Py_LT);
}

static int
less_equal(PyObject *a, PyObject *b)
{
    int r = less(b, a);
    return r < 0 ? -1 : !r;
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
    PyObject *found = PyDict_New(), *it = NULL, *acc = NULL;
    if (found == NULL || (it = PyObject_GetIter(accesses)) == NULL)
        goto error;
    while ((acc = PyIter_Next(it)) != NULL) {
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
    Py_DECREF(it);
    Py_DECREF(st.live_map);
    return found;
error:
    Py_XDECREF(acc);
    Py_XDECREF(it);
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
        PyObject *kept = PyList_New(0);
        if (kept == NULL)
            goto items_error;
        for (Py_ssize_t j = 0; j < PyList_GET_SIZE(entries); j++) {
            PyObject *e = PyList_GET_ITEM(entries, j), *elo, *ehi, *enode;
            int c;
            if (unpack_entry(e, &elo, &ehi, &enode) < 0 || (c = covers(lo, hi, elo, ehi)) < 0
                    || (!c && PyList_Append(kept, e) < 0)) {
                Py_DECREF(kept);
                goto items_error;
            }
        }
        int r = PyList_GET_SIZE(kept) ? PyDict_SetItem(reads, stream, kept)
                                      : PyDict_DelItem(reads, stream);
        Py_DECREF(kept);
        if (r < 0)
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
    PyObject *node = args[0], *accesses = args[1], *stream = NULL, *it = NULL, *acc = NULL;
    TrackerState st;
    if (live_layout.type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "asyncgpu._speedups: configure_tracker not called");
        return NULL;
    }
    if ((stream = PyObject_GetAttr(node, s_stream)) == NULL)
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
    int r = PyObject_SetAttr(self, s_version, bumped);
    Py_DECREF(bumped);
    if (r < 0)
        goto error;
    if ((it = PyObject_GetIter(accesses)) == NULL)
        goto error;
    while ((acc = PyIter_Next(it)) != NULL) {
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
    Py_DECREF(it);
    Py_DECREF(stream);
    Py_DECREF(st.live_map);
    Py_RETURN_NONE;
error:
    Py_XDECREF(acc);
    Py_XDECREF(it);
    Py_XDECREF(stream);
    Py_DECREF(st.live_map);
    return NULL;
}

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

static int
layout(SlotLayout *l, PyObject *type, const char *const *names, int n)
{
    if (!PyType_Check(type)) {
        PyErr_SetString(PyExc_TypeError, "configure_tracker: expected classes");
        return -1;
    }
    for (int i = 0; i < n; i++)
        if ((l->off[i] = slot_offset((PyTypeObject *)type, names[i])) < 0)
            return -1;
    Py_INCREF(type);
    Py_XSETREF(l->type, (PyTypeObject *)type);
    return 0;
}

static PyObject *
configure_tracker(PyObject *module, PyObject *args)
{
    PyObject *tracker_type, *live_type, *node_type, *access_types, *raw, *war, *waw;
    static const char *const access_names[] = {"key", "lo", "hi", "write", "label"};
    static const char *const live_names[] = {"writes", "reads"};
    static const char *const node_names[] = {"finished"};
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
            || layout(&node_layout, node_type, node_names, 1) < 0)
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

/* ---- A kernel's argument binding -----------------------------------------------------------
   Kernel.bind of asyncgpu/_kernel.py's PythonBinding, with the same answers: for each argument
   and its parameter slot, an asyncgpu array of this runtime becomes an ArrayArg (made here
   as ArrayArg.__init__ makes it), a plain number in a typed parameter's range is converted
   with the dtype's constructor, an untyped read-write number passes as it is; every other
   case calls the same Python method the Python bind calls (_check_array, _bind_scalar), which
   explains what is wrong or converts. */

static SlotLayout kernel_layout, array_layout, alloc_layout, arg_layout;
static PyObject *numbers = NULL;        /* frozenset({int, float, bool, complex}) */
static PyObject *s_slots, *s_typed, *s_alloc_, *s_dtype, *s_contiguous, *s_lo_, *s_hi_,
    *s_freed, *s_runtime_attr, *s_id, *s_check_array, *s_bind_scalar, *s_params,
    *s_bind_in_python, *s_cache, *s_array_attr, *s_index;

enum { K_SLOTS, K_TYPED, K_PARAMS };
enum { AR_ALLOC, AR_DTYPE, AR_CONTIGUOUS, AR_LO, AR_HI, AR_CACHE };
enum { AL_FREED, AL_RUNTIME, AL_ID };
enum { G_INDEX, G_PARAM, G_ARRAY, G_READ, G_WRITE, G_KEY, G_ALLOC, G_LO, G_HI, G_LABEL };

static int
truth(PyObject *v)
{
    return v == Py_True ? 1 : v == Py_False ? 0 : PyObject_IsTrue(v);
}

/* set a slot of a new ArrayArg (steals value) */
static inline void
put(PyObject *obj, int field, PyObject *value)
{
    *(PyObject **)((char *)obj + arg_layout.off[field]) = value;
}

static PyObject *
new_array_arg(PyObject *index, PyObject *param, PyObject *array, PyObject *read,
              PyObject *write)
{
    PyObject *alloc = get(array, &array_layout, AR_ALLOC, s_alloc_), *key = NULL, *lo = NULL,
        *hi = NULL, *arg;
    if (alloc == NULL || (key = get(alloc, &alloc_layout, AL_ID, s_id)) == NULL
            || (lo = get(array, &array_layout, AR_LO, s_lo_)) == NULL
            || (hi = get(array, &array_layout, AR_HI, s_hi_)) == NULL
            || (arg = arg_layout.type->tp_alloc(arg_layout.type, 0)) == NULL) {
        Py_XDECREF(alloc);
        Py_XDECREF(key);
        Py_XDECREF(lo);
        Py_XDECREF(hi);
        return NULL;
    }
    Py_INCREF(index);
    put(arg, G_INDEX, index);
    Py_INCREF(param);
    put(arg, G_PARAM, param);
    Py_INCREF(array);
    put(arg, G_ARRAY, array);
    Py_INCREF(read);
    put(arg, G_READ, read);
    Py_INCREF(write);
    put(arg, G_WRITE, write);
    put(arg, G_KEY, key);
    put(arg, G_ALLOC, alloc);
    put(arg, G_LO, lo);
    put(arg, G_HI, hi);
    Py_INCREF(param);
    put(arg, G_LABEL, param);
    return arg;
}

/* whether the array needs the slow checks: not usable here, or not what a typed slot takes */
static int
needs_checks(PyObject *a, PyObject *runtime, int typed, PyObject *dtype, int is_array)
{
    PyObject *alloc = get(a, &array_layout, AR_ALLOC, s_alloc_), *v;
    if (alloc == NULL)
        return -1;
    int bad;
    if ((v = get(alloc, &alloc_layout, AL_FREED, s_freed)) == NULL)
        goto error;
    bad = truth(v);
    Py_DECREF(v);
    if (bad)
        goto done;
    if ((v = get(alloc, &alloc_layout, AL_RUNTIME, s_runtime_attr)) == NULL)
        goto error;
    bad = v != runtime;
    Py_DECREF(v);
    if (bad || !typed)
        goto done;
    if (!is_array) {
        bad = 1;
        goto done;
    }
    if (dtype != Py_None) {
        if ((v = get(a, &array_layout, AR_DTYPE, s_dtype)) == NULL)
            goto error;
        int same = v == dtype ? 1 : PyObject_RichCompareBool(v, dtype, Py_EQ);
        Py_DECREF(v);
        if (same < 0)
            goto error;
        if (!same) {
            bad = 1;
            goto done;
        }
    }
    if ((v = get(a, &array_layout, AR_CONTIGUOUS, s_contiguous)) == NULL)
        goto error;
    bad = truth(v);
    Py_DECREF(v);
    bad = bad < 0 ? -1 : !bad;
done:
    Py_DECREF(alloc);
    return bad;
error:
    Py_DECREF(alloc);
    return -1;
}

/* plain = (types, lowest, highest, conversion): 1 and *out set when a converts plainly */
static int
plain_convert(PyObject *plain, PyObject *a, PyObject **out)
{
    if (plain == Py_None)
        return 0;
    if (!PyTuple_CheckExact(plain) || PyTuple_GET_SIZE(plain) != 4) {
        PyErr_SetString(PyExc_TypeError, "bind: malformed plain-scalar rule");
        return -1;
    }
    int r = PySet_Contains(PyTuple_GET_ITEM(plain, 0), (PyObject *)Py_TYPE(a));
    if (r <= 0)
        return r;
    r = PyObject_RichCompareBool(PyTuple_GET_ITEM(plain, 1), a, Py_LE);
    if (r <= 0)
        return r;
    r = PyObject_RichCompareBool(a, PyTuple_GET_ITEM(plain, 2), Py_LE);
    if (r <= 0)
        return r;
    *out = PyObject_CallOneArg(PyTuple_GET_ITEM(plain, 3), a);
    return *out == NULL ? -1 : 1;
}

static PyObject *
kernel_bind(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3 || !PyTuple_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "bind(runtime, args: tuple, site)");
        return NULL;
    }
    PyObject *runtime = args[0], *argv = args[1], *site = args[2];
    if (arg_layout.type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "asyncgpu._speedups: configure_binding not called");
        return NULL;
    }
    PyObject *slots = get(self, &kernel_layout, K_SLOTS, s_slots), *typed_obj = NULL;
    PyObject *arrays = NULL, *values = NULL, *params = NULL;
    if (slots == NULL)
        return NULL;
    if (!PyTuple_CheckExact(slots) || PyTuple_GET_SIZE(slots) != PyTuple_GET_SIZE(argv)) {
        /* (a wrong count: the Python bind writes the error) */
        Py_DECREF(slots);
        return PyObject_CallMethodObjArgs(self, s_bind_in_python, runtime, argv, site, NULL);
    }
    if ((typed_obj = get(self, &kernel_layout, K_TYPED, s_typed)) == NULL)
        goto error;
    int typed = truth(typed_obj);
    Py_DECREF(typed_obj);
    if (typed < 0 || (arrays = PyList_New(0)) == NULL
            || (values = PySequence_List(argv)) == NULL)
        goto error;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(argv); i++) {
        PyObject *slot = PyTuple_GET_ITEM(slots, i), *a = PyTuple_GET_ITEM(argv, i);
        if (!PyTuple_CheckExact(slot) || PyTuple_GET_SIZE(slot) != 7) {
            PyErr_SetString(PyExc_TypeError, "bind: malformed parameter slot");
            goto error;
        }
        PyObject *index = PyTuple_GET_ITEM(slot, 0), *name = PyTuple_GET_ITEM(slot, 1),
            *read = PyTuple_GET_ITEM(slot, 2), *write = PyTuple_GET_ITEM(slot, 3),
            *dtype = PyTuple_GET_ITEM(slot, 4), *plain = PyTuple_GET_ITEM(slot, 6);
        int is_array = truth(PyTuple_GET_ITEM(slot, 5));
        if (is_array < 0)
            goto error;
        int array = Py_TYPE(a) == array_layout.type ? 1
                                                    : PyObject_IsInstance(a, (PyObject *)array_layout.type);
        if (array < 0)
            goto error;
        if (array) {
            int bad = needs_checks(a, runtime, typed, dtype, is_array);
            if (bad < 0)
                goto error;
            if (bad) {
                if (params == NULL && (params = get(self, &kernel_layout, K_PARAMS, s_params)) == NULL)
                    goto error;
                PyObject *p = PySequence_GetItem(params, i);
                if (p == NULL)
                    goto error;
                PyObject *r = PyObject_CallMethodObjArgs(self, s_check_array, runtime, index, p,
                                                         a, site, NULL);
                Py_DECREF(p);
                if (r == NULL)
                    goto error;
                Py_DECREF(r);
            }
            PyObject *arg = new_array_arg(index, name, a, read, write);
            if (arg == NULL)
                goto error;
            int r = PyList_Append(arrays, arg);
            Py_DECREF(arg);
            if (r < 0)
                goto error;
            continue;
        }
        PyObject *converted = NULL;
        int plainly = plain_convert(plain, a, &converted);
        if (plainly < 0)
            goto error;
        if (!plainly) {
            int number = PySet_Contains(numbers, (PyObject *)Py_TYPE(a));
            int rw = truth(read);
            if (rw > 0)
                rw = truth(write);
            if (number < 0 || rw < 0)
                goto error;
            if (!(typed || !number || !rw))
                continue;               /* an untyped read-write number passes as it is */
            if (params == NULL && (params = get(self, &kernel_layout, K_PARAMS, s_params)) == NULL)
                goto error;
            PyObject *p = PySequence_GetItem(params, i);
            if (p == NULL)
                goto error;
            converted = PyObject_CallMethodObjArgs(self, s_bind_scalar, index, p, a, site, NULL);
            Py_DECREF(p);
            if (converted == NULL)
                goto error;
        }
        if (PyList_SetItem(values, i, converted) < 0)      /* steals */
            goto error;
    }
    Py_DECREF(slots);
    Py_XDECREF(params);
    PyObject *result = PyTuple_Pack(2, arrays, values);
    Py_DECREF(arrays);
    Py_DECREF(values);
    return result;
error:
    Py_XDECREF(slots);
    Py_XDECREF(params);
    Py_XDECREF(arrays);
    Py_XDECREF(values);
    return NULL;
}

static PyMethodDef kernel_methods[] = {
    {"bind", (PyCFunction)(void (*)(void))kernel_bind, METH_FASTCALL,
     "bind(runtime, args, site): validate the arguments; the array arguments and the values "
     "to pass (compiled Kernel.bind)."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot kernel_slots[] = {
    {Py_tp_methods, kernel_methods},
    {Py_tp_doc, "Base of asyncgpu's Kernel: bind, compiled."},
    {0, NULL},
};

static PyType_Spec kernel_spec = {
    "asyncgpu._speedups.KernelBase",
    sizeof(PyObject),
    0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    kernel_slots,
};

static PyObject *
configure_binding(PyObject *module, PyObject *args)
{
    PyObject *kernel_type, *array_type, *alloc_type, *arg_type, *number_types;
    static const char *const kernel_names[] = {"_slots", "typed", "params"};
    static const char *const array_names[] = {"_alloc", "dtype", "_contiguous", "_lo", "_hi",
                                              "_cache"};
    static const char *const alloc_names[] = {"freed", "runtime", "id"};
    static const char *const arg_names[] = {"index", "param", "array", "read", "write", "key",
                                            "alloc", "lo", "hi", "label"};
    if (!PyArg_ParseTuple(args, "OOOOO!:configure_binding", &kernel_type, &array_type,
                          &alloc_type, &arg_type, &PyFrozenSet_Type, &number_types))
        return NULL;
    if (layout(&kernel_layout, kernel_type, kernel_names, 3) < 0
            || layout(&array_layout, array_type, array_names, 6) < 0
            || layout(&alloc_layout, alloc_type, alloc_names, 3) < 0)
        return NULL;
    /* ArrayArg: every slot is set here, so its layout must hold exactly these */
    SlotLayout l = {0};
    if (layout(&l, arg_type, arg_names, 10) < 0)
        return NULL;
    if (l.type->tp_alloc != PyType_GenericAlloc || l.type->tp_dictoffset != 0) {
        Py_DECREF(l.type);
        PyErr_SetString(PyExc_TypeError,
                        "configure_binding: ArrayArg must be a plain class with __slots__ only");
        return NULL;
    }
    Py_XSETREF(arg_layout.type, l.type);
    memcpy(arg_layout.off, l.off, sizeof l.off);
    Py_INCREF(number_types);
    Py_XSETREF(numbers, number_types);
    Py_RETURN_NONE;
}

/* ---- A packed launch's values --------------------------------------------------------------
   PackedTarget.numba_values and pointer_values of asyncgpu/backends/_cuda_kernels.py's
   PythonGathering: the values one cuLaunchKernel packs, from what earlier launches cached on
   each array (``_cache["nbf"]``: Numba's type token and ABI fields; ``_cache["ptr"]``: the
   device pointer). None when something is not cached or not what the target was built for:
   the Python path then builds it. */

static PyObject *s_nbf, *s_ptr, *s_key_attr, *s_bigint, *int64_min, *int64_max;

static PyObject *
array_cache(PyObject *array)
{
    PyObject *cache = get(array, &array_layout, AR_CACHE, s_cache);
    if (cache != NULL && !PyDict_Check(cache)) {
        Py_DECREF(cache);
        PyErr_SetString(PyExc_TypeError, "an array's _cache is not a dict");
        return NULL;
    }
    return cache;
}

static PyObject *
target_numba_values(PyObject *self, PyObject *values)
{
    PyObject *key = PyObject_GetAttr(self, s_key_attr), *flat = NULL, *result = NULL;
    if (key == NULL)
        return NULL;
    if (!PyList_CheckExact(values) || !PyList_Check(key)
            || PyList_GET_SIZE(key) != PyList_GET_SIZE(values)) {
        Py_DECREF(key);
        Py_RETURN_NONE;
    }
    if ((flat = PyList_New(0)) == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(values); i++) {
        PyObject *v = PyList_GET_ITEM(values, i), *k = PyList_GET_ITEM(key, i), *want;
        int same;
        if (Py_TYPE(v) == array_layout.type) {
            PyObject *cache = array_cache(v);
            if (cache == NULL)
                goto done;
            PyObject *fields = PyDict_GetItemWithError(cache, s_nbf);      /* borrowed */
            Py_XINCREF(fields);
            Py_DECREF(cache);
            if (fields == NULL) {
                if (PyErr_Occurred())
                    goto done;
                goto miss;
            }
            if (!PyTuple_CheckExact(fields) || PyTuple_GET_SIZE(fields) != 2) {
                Py_DECREF(fields);
                goto miss;
            }
            want = PyTuple_GET_ITEM(fields, 0);
            same = want == k ? 1 : PyObject_RichCompareBool(want, k, Py_EQ);
            if (same > 0) {
                Py_ssize_t n = PyList_GET_SIZE(flat);
                same = PyList_SetSlice(flat, n, n, PyTuple_GET_ITEM(fields, 1)) < 0 ? -1 : 1;
            }
            Py_DECREF(fields);
        } else {
            want = (PyObject *)Py_TYPE(v);
            if (PyLong_CheckExact(v)) {
                int lo = PyObject_RichCompareBool(int64_min, v, Py_LE);
                int hi = lo > 0 ? PyObject_RichCompareBool(v, int64_max, Py_LE) : lo;
                if (hi < 0)
                    goto done;
                if (!hi)
                    want = s_bigint;
            }
            same = want == k ? 1 : PyObject_RichCompareBool(want, k, Py_EQ);
            if (same > 0 && PyList_Append(flat, v) < 0)
                same = -1;
        }
        if (same < 0)
            goto done;
        if (!same)
            goto miss;
    }
    result = PyList_AsTuple(flat);
    goto done;
miss:
    result = Py_None;
    Py_INCREF(result);
done:
    Py_DECREF(key);
    Py_XDECREF(flat);
    return result;
}

static PyObject *
target_pointer_values(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyList_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "pointer_values(values, arrays: list)");
        return NULL;
    }
    PyObject *out = PySequence_List(args[0]), *arrays = args[1];
    if (out == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(arrays); i++) {
        PyObject *a = PyList_GET_ITEM(arrays, i), *array, *index, *cache, *ptr;
        if ((array = get(a, &arg_layout, G_ARRAY, s_array_attr)) == NULL)
            goto error;
        cache = array_cache(array);
        Py_DECREF(array);
        if (cache == NULL)
            goto error;
        ptr = PyDict_GetItemWithError(cache, s_ptr);       /* borrowed */
        Py_XINCREF(ptr);
        Py_DECREF(cache);
        if (ptr == NULL) {
            if (PyErr_Occurred())
                goto error;
            Py_DECREF(out);
            Py_RETURN_NONE;             /* not cached yet: the Python path fills it */
        }
        if ((index = get(a, &arg_layout, G_INDEX, s_index)) == NULL) {
            Py_DECREF(ptr);
            goto error;
        }
        Py_ssize_t at = PyNumber_AsSsize_t(index, PyExc_IndexError);
        Py_DECREF(index);
        if (at == -1 && PyErr_Occurred()) {
            Py_DECREF(ptr);
            goto error;
        }
        if (PyList_SetItem(out, at, ptr) < 0)       /* steals ptr */
            goto error;
    }
    PyObject *result = PyList_AsTuple(out);
    Py_DECREF(out);
    return result;
error:
    Py_DECREF(out);
    return NULL;
}

static PyMethodDef target_methods[] = {
    {"numba_values", target_numba_values, METH_O,
     "numba_values(values): the flat values of a packed Numba launch, or None (compiled "
     "PackedTarget.numba_values)."},
    {"pointer_values", (PyCFunction)(void (*)(void))target_pointer_values, METH_FASTCALL,
     "pointer_values(values, arrays): the values of a packed CUDA C launch, or None "
     "(compiled PackedTarget.pointer_values)."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot target_slots[] = {
    {Py_tp_methods, target_methods},
    {Py_tp_doc, "Base of asyncgpu's PackedTarget: the launch values, gathered compiled."},
    {0, NULL},
};

static PyType_Spec target_spec = {
    "asyncgpu._speedups.TargetBase",
    sizeof(PyObject),
    0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    target_slots,
};

static PyObject *
configure(PyObject *module, PyObject *const_args)
{
    PyObject *globals, *python_launch;
    if (!PyArg_ParseTuple(const_args, "OO:configure", &globals, &python_launch))
        return NULL;
    if (globals != Py_None && !PyDict_Check(globals)) {
        PyErr_SetString(PyExc_TypeError, "configure: runtime_globals must be a dict or None");
        return NULL;
    }
    Py_INCREF(python_launch);
    if (globals == Py_None) {
        Py_CLEAR(runtime_globals);
    } else {
        Py_INCREF(globals);
        Py_XSETREF(runtime_globals, globals);
    }
    Py_XSETREF(launch_in_python, python_launch);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"configure", configure, METH_VARARGS,
     "configure(runtime_globals, launch_in_python): where the runtime is found (None: not "
     "imported yet), and the Python launch every case but the remembered one goes to."},
    {"configure_tracker", configure_tracker, METH_VARARGS,
     "configure_tracker(tracker, live, node, access_types, RAW, WAR, WAW): the classes whose "
     "__slots__ the compiled tracker reads at their offsets, and the reasons it reports."},
    {"configure_binding", configure_binding, METH_VARARGS,
     "configure_binding(kernel, array, allocation, array_arg, numbers): the classes whose "
     "__slots__ the compiled bind reads and writes, and the plain number types."},
    {NULL, NULL, 0, NULL},
};

static int
exec_module(PyObject *module)
{
#define INTERN(var, text) \
    if ((var = PyUnicode_InternFromString(text)) == NULL) return -1;
    INTERN(s_runtime, "_runtime");
    INTERN(s_recording, "recording");
    INTERN(s_thread, "thread");
    INTERN(s_launches, "launches");
    INTERN(s_previous, "previous");
    INTERN(s_launcher, "launcher");
    INTERN(s_args, "args");
    INTERN(s_launch_kernel, "launch_kernel");
    INTERN(s_key, "key");
    INTERN(s_lo, "lo");
    INTERN(s_hi, "hi");
    INTERN(s_write, "write");
    INTERN(s_label, "label");
    INTERN(s_writes, "writes");
    INTERN(s_reads, "reads");
    INTERN(s_finished, "finished");
    INTERN(s_live, "_live");
    INTERN(s_drop_raw, "_drop_raw");
    INTERN(s_drop_war, "_drop_war");
    INTERN(s_version, "version");
    INTERN(s_stream, "stream");
    INTERN(s_slots, "_slots");
    INTERN(s_typed, "typed");
    INTERN(s_alloc_, "_alloc");
    INTERN(s_dtype, "dtype");
    INTERN(s_contiguous, "_contiguous");
    INTERN(s_lo_, "_lo");
    INTERN(s_hi_, "_hi");
    INTERN(s_freed, "freed");
    INTERN(s_runtime_attr, "runtime");
    INTERN(s_id, "id");
    INTERN(s_check_array, "_check_array");
    INTERN(s_bind_scalar, "_bind_scalar");
    INTERN(s_params, "params");
    INTERN(s_bind_in_python, "bind_in_python");
    INTERN(s_cache, "_cache");
    INTERN(s_array_attr, "array");
    INTERN(s_index, "index");
    INTERN(s_nbf, "nbf");
    INTERN(s_ptr, "ptr");
    INTERN(s_key_attr, "key");
    INTERN(s_bigint, "bigint");
    if ((int64_min = PyLong_FromLongLong(INT64_MIN)) == NULL
            || (int64_max = PyLong_FromLongLong(INT64_MAX)) == NULL)
        return -1;
    if ((one = PyLong_FromLong(1)) == NULL)
        return -1;
#undef INTERN
    PyObject *type = PyType_FromSpec(&launcher_spec);
    if (type == NULL)
        return -1;
    if (PyModule_AddObject(module, "LauncherBase", type) < 0) {
        Py_DECREF(type);
        return -1;
    }
    type = PyType_FromSpec(&tracker_spec);
    if (type == NULL)
        return -1;
    if (PyModule_AddObject(module, "TrackerBase", type) < 0) {
        Py_DECREF(type);
        return -1;
    }
    type = PyType_FromSpec(&kernel_spec);
    if (type == NULL)
        return -1;
    if (PyModule_AddObject(module, "KernelBase", type) < 0) {
        Py_DECREF(type);
        return -1;
    }
    type = PyType_FromSpec(&target_spec);
    if (type == NULL)
        return -1;
    if (PyModule_AddObject(module, "TargetBase", type) < 0) {
        Py_DECREF(type);
        return -1;
    }
    return 0;
}

static PyModuleDef_Slot module_slots[] = {
    {Py_mod_exec, exec_module},
    {0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    "asyncgpu._speedups",
    "The launcher's call, compiled (optional; see asyncgpu/_speedups.c).",
    0,
    methods,
    module_slots,
    NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    return PyModuleDef_Init(&module_def);
}
