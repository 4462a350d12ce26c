/* asyncgpu._speedups, graph_call.c: a recorded function's call, compiled.

The model
---------
Calling a function decorated with ``@asyncgpu.graph`` (not ``static``) enters the recording
(``_Run._enter``: under the runtime's lock, a new ``Recording`` made the runtime's), runs the
body with its launches deferred, and leaves it (``_Run._exit``: the last segment ended, which
in the steady state launches the remembered graph again, and the call's ``outcome`` set). In
Python that is three frames and a few dozen attribute steps around the body on every call;
here it is one C call around the body, and the segment's end is recording.c's.

A ``static`` function's call launches the graph captured for its arguments without running
the body (``GraphFunction._replay_static``): here too when the arguments are arrays and plain
numbers, strings or None (their key built in C as ``_recording_keys.argument_key`` builds it)
and that graph can launch now.

Whatever is unusual goes to the Python call (``_graph_function.PythonGraphCall.__call__``, the
reference) before anything is done: keyword arguments or others without a C key for a
``static`` function, no graph for them yet, no runtime yet, a runtime already recording
(nested, or another thread's). After the body, a recording that failed or fell back
to eager execution is handed to the Python ``_exit``; a body that raised gets the Python
``_exit(rec, True)`` and its own exception back (with the cleanup's as its context, as
``except: ...; raise`` gives).

Invariant: the same outcomes, graphs and exceptions as the Python call;
tests/test_recorder_compiled.py runs the recorder's unusual cases both ways.

Example: ``asyncgpu.core.compiled.use(False)`` puts the Python call back.
*/
#include "speedups.h"

static PyObject *python_graph_call;     /* PythonGraphCall.__call__ */
static PyObject *recording_type;        /* asyncgpu.recorder.recording.Recording */
/* GraphFunction._replay_static (the static call's C path runs while it is the class's own),
   and the key's tag */
static PyObject *python_replay_static, *array_tag,
    *no_args;
static PyObject *s_recording, *s_token, *s_name, *s_split, *s_failed, *s_eager, *s_lock,
    *s_static, *s_fn, *s_exit, *s_outcomes, *s_outcome, *s_empty,
    *s_plus, *s_static_graphs, *s_replay_static, *s_memory, *s_replayed, *s_id, *s_str, *s_hex;
static Twin t_end_segment;

#define REC(o, f, n) get((o), &rec_layout, (f), (n))
#define RTA(o, f, n) get((o), &rt_layout, (f), (n))

/* _Run._enter's common case: a new Recording made the runtime's (new reference); None when
   the runtime is already recording (the Python call decides: nested, or another thread's). */
static PyObject *
enter(PyObject *self, PyObject *rt)
{
    PyObject *lock = RTA(rt, RT_LOCK, s_lock), *cur, *rec = NULL, *token = NULL, *name = NULL,
        *split = NULL;
    if (lock == NULL || lock_acquire(lock) < 0) {
        Py_XDECREF(lock);
        return NULL;
    }
    if ((cur = RTA(rt, RT_RECORDING, s_recording)) != NULL && cur == Py_None
            && (token = PyObject_GetAttr(self, s_token)) != NULL
            && (name = PyObject_GetAttr(self, s_name)) != NULL
            && (split = PyObject_GetAttr(self, s_split)) != NULL) {
        PyObject *call[] = {rt, token, name, split};
        if ((rec = PyObject_Vectorcall(recording_type, call, 4, NULL)) != NULL
                && set(rt, &rt_layout, RT_RECORDING, s_recording, rec) < 0)
            Py_CLEAR(rec);
    } else if (cur != NULL && !PyErr_Occurred()) {
        rec = Py_NewRef(Py_None);
    }
    Py_XDECREF(cur);
    Py_XDECREF(token);
    Py_XDECREF(name);
    Py_XDECREF(split);
    rec = unlocked(lock, rec);
    Py_DECREF(lock);
    return rec;
}

/* _Run._exit(rec, False)'s common case, under the lock: 1 done (self.outcome set), 0 the
   recording failed or fell back to eager (the Python _exit decides), -1 error. */
static int
exit_locked(PyObject *self, PyObject *rt, PyObject *rec)
{
    PyObject *cur = RTA(rt, RT_RECORDING, s_recording), *flag, *r = NULL, *outcomes = NULL,
        *outcome = NULL;
    int t, rc = -1;
    if (cur == NULL)
        return -1;
    Py_DECREF(cur);
    if (cur == rec && set(rt, &rt_layout, RT_RECORDING, s_recording, Py_None) < 0)
        return -1;
    static const int flags[] = {RC_FAILED, RC_EAGER};
    PyObject *const names[] = {s_failed, s_eager};
    for (int i = 0; i < 2; i++) {
        if ((flag = REC(rec, flags[i], names[i])) == NULL)
            return -1;
        t = truth(flag);
        Py_DECREF(flag);
        if (t != 0)
            return t < 0 ? -1 : 0;
    }
    PyObject *last = Py_True;
    if ((r = call_twin(&t_end_segment, rec, &last, 1)) == NULL
            || (outcomes = REC(rec, RC_OUTCOMES, s_outcomes)) == NULL)
        goto done;
    Py_ssize_t n = PyObject_Size(outcomes);
    if (n < 0)
        goto done;
    if (n == 1 && PyList_CheckExact(outcomes)) {
        outcome = Py_NewRef(PyList_GET_ITEM(outcomes, 0));
    } else if (n == 0) {
        outcome = Py_NewRef(s_empty);
    } else if ((outcome = PyUnicode_Join(s_plus, outcomes)) == NULL) {
        goto done;
    }
    if (PyObject_SetAttr(self, s_outcome, outcome) == 0)
        rc = 1;
done:
    Py_XDECREF(r);
    Py_XDECREF(outcomes);
    Py_XDECREF(outcome);
    return rc;
}

/* _recording_keys.value_key(v) for an exact Array, int, bool, str, None or float (a new
   reference); NULL with no error set for anything else (the Python key decides). */
static PyObject *
value_key(PyObject *v)
{
    if (Py_TYPE(v) == array_layout.type) {
        PyObject *alloc = get(v, &array_layout, AR_ALLOC, NULL), *dtype = NULL,
            *parts[7] = {Py_NewRef(array_tag)}, *key = NULL;
        if (alloc != NULL && (parts[1] = PyObject_GetAttr(alloc, s_id)) != NULL
                && (parts[2] = get(v, &array_layout, AR_LO, NULL)) != NULL
                && (parts[3] = get(v, &array_layout, AR_HI, NULL)) != NULL
                && (parts[4] = get(v, &array_layout, AR_SHAPE, NULL)) != NULL
                && (parts[5] = get(v, &array_layout, AR_STRIDES, NULL)) != NULL
                && (dtype = get(v, &array_layout, AR_DTYPE, NULL)) != NULL
                && (parts[6] = PyObject_GetAttr(dtype, s_str)) != NULL)
            key = PyTuple_Pack(7, parts[0], parts[1], parts[2], parts[3], parts[4], parts[5],
                               parts[6]);
        Py_XDECREF(alloc);
        Py_XDECREF(dtype);
        for (int i = 0; i < 7; i++)
            Py_XDECREF(parts[i]);
        return key;
    }
    if (PyLong_CheckExact(v) || PyBool_Check(v) || PyUnicode_CheckExact(v) || v == Py_None)
        return PyTuple_Pack(2, (PyObject *)Py_TYPE(v), v);
    if (PyFloat_CheckExact(v)) {       /* exact bits: -0.0 and 0.0 differ */
        PyObject *hex = PyObject_CallMethodNoArgs(v, s_hex), *key;
        if (hex == NULL)
            return NULL;
        key = PyTuple_Pack(2, (PyObject *)&PyFloat_Type, hex);
        Py_DECREF(hex);
        return key;
    }
    return NULL;
}

/* _recording_keys.argument_key(args, {}) (a new reference), or NULL: with an error set, or
   without one for arguments that only the Python key handles. */
static PyObject *
argument_key(PyObject *args)
{
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    PyObject *keys = PyTuple_New(n), *key = NULL;
    if (keys == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *k = value_key(PyTuple_GET_ITEM(args, i));
        if (k == NULL) {
            Py_DECREF(keys);
            return NULL;
        }
        PyTuple_SET_ITEM(keys, i, k);
    }
    key = PyTuple_Pack(2, keys, no_args);
    Py_DECREF(keys);
    return key;
}

/* ``hits[copy_key(frozen.host_current(rt))]`` for the first variant's graph ``frozen`` (a
   new reference, None if missing): the graph captured for where the inputs are now. */
static PyObject *
variant_now(PyObject *hits, PyObject *frozen, PyObject *rt)
{
    PyObject *current = call_host_current(frozen, rt), *ck, *hit;
    if (current == NULL)
        return NULL;
    ck = copy_key_of(current);
    Py_DECREF(current);
    if (ck == NULL)
        return NULL;
    hit = PyDict_GetItemWithError(hits, ck);
    Py_DECREF(ck);
    if (hit == NULL && PyErr_Occurred())
        return NULL;
    return Py_NewRef(hit != NULL ? hit : Py_None);
}

/* Whether a static function's cached entry is (graph, result); 0 with an error set if not. */
static int
is_hit(PyObject *hit)
{
    if (PyTuple_CheckExact(hit) && PyTuple_GET_SIZE(hit) == 2)
        return 1;
    PyErr_SetString(PyExc_TypeError, "a static graph's hit is not (graph, result)");
    return 0;
}

/* Under the lock: GraphFunction._replay_static's launch (1: done, *result set; 0: it cannot
   launch now, the Python call decides; -1). */
static int
replay_static_locked(PyObject *rt, PyObject *hits, PyObject **result)
{
    PyObject *cur = RTA(rt, RT_RECORDING, s_recording), *memory = NULL, *hit = NULL, *r = NULL,
        *key, *value;
    Py_ssize_t pos = 0;
    int rc = -1, t;
    if (cur == NULL)
        return -1;
    Py_DECREF(cur);
    if (cur != Py_None || !PyDict_Next(hits, &pos, &key, &value))
        return 0;                       /* nested in a recording (or nothing to launch) */
    hit = Py_NewRef(value);
    if ((memory = RTA(rt, RT_MEMORY, s_memory)) == NULL)
        goto done;
    if (memory != Py_None) {
        /* (every variant has the same inputs: ask the one that copies nothing in) */
        PyObject *base = PyDict_GetItemWithError(hits, no_args);
        if (base == NULL && PyErr_Occurred())
            goto done;
        if (base != NULL)
            Py_SETREF(hit, Py_NewRef(base));
        if (!is_hit(hit))
            goto done;
        Py_SETREF(hit, variant_now(hits, PyTuple_GET_ITEM(hit, 0), rt));
        if (hit == NULL)
            goto done;
        if (hit == Py_None) {
            rc = 0;                     /* other inputs are host-current: record that case */
            goto done;
        }
    }
    if (!is_hit(hit))
        goto done;
    PyObject *frozen = PyTuple_GET_ITEM(hit, 0);
    if ((t = frozen_destroyed(frozen)) < 0)
        goto done;
    if (t) {
        rc = 0;                         /* evicted from the cache */
        goto done;
    }
    if ((r = call_launch_graph(rt, frozen)) == NULL)
        goto done;
    *result = Py_NewRef(PyTuple_GET_ITEM(hit, 1));
    rc = 1;
done:
    Py_XDECREF(memory);
    Py_XDECREF(hit);
    Py_XDECREF(r);
    return rc;
}

/* A static function's call that launches its graph without running the body (1, *result
   set), or 0 when the Python call decides (see the module's docstring), or -1. */
static int
replay_static(PyObject *self, PyObject *args, PyObject *kwargs, PyObject **result)
{
    if ((kwargs != NULL && PyDict_GET_SIZE(kwargs)) || python_replay_static == NULL
            || _PyType_Lookup(Py_TYPE(self), s_replay_static) != python_replay_static)
        return 0;
    PyObject *akey = argument_key(args), *graphs = NULL, *hits, *rt, *lock = NULL;
    int rc = -1;
    if (akey == NULL)
        return PyErr_Occurred() ? -1 : 0;
    if ((graphs = PyObject_GetAttr(self, s_static_graphs)) == NULL)
        goto done;
    if (!PyDict_Check(graphs) || (rt = current_runtime()) == NULL) {
        rc = PyErr_Occurred() ? -1 : 0;
        goto done;
    }
    /* (a borrowed lookup, as OrderedDict.get: no reordering) */
    if ((hits = PyDict_GetItemWithError(graphs, akey)) == NULL || !PyDict_CheckExact(hits)) {
        rc = PyErr_Occurred() ? -1 : 0;     /* not captured yet: the Python call records */
        goto done;
    }
    Py_INCREF(rt);
    Py_INCREF(hits);
    if ((lock = RTA(rt, RT_LOCK, s_lock)) != NULL && lock_acquire(lock) == 0) {
        rc = replay_static_locked(rt, hits, result);
        if (unlocked(lock, Py_NewRef(Py_None)) == NULL) {
            Py_CLEAR(*result);
            rc = -1;
        } else {
            Py_DECREF(Py_None);
        }
    }
    Py_DECREF(hits);
    Py_DECREF(rt);
    if (rc > 0 && PyObject_SetAttr(self, s_outcome, s_replayed) < 0) {
        Py_CLEAR(*result);
        rc = -1;
    }
done:
    Py_DECREF(akey);
    Py_XDECREF(graphs);
    Py_XDECREF(lock);
    return rc;
}

static PyObject *
graph_call(PyObject *self, PyObject *args, PyObject *kwargs)
{
    PyObject *rt, *rec, *result, *is_static = PyObject_GetAttr(self, s_static);
    int t = is_static == NULL ? -1 : truth(is_static);
    Py_XDECREF(is_static);
    if (t < 0)
        return NULL;
    if (t) {
        result = NULL;
        t = replay_static(self, args, kwargs, &result);
        if (t != 0)
            return t < 0 ? NULL : result;
        goto python;
    }
    if (recording_type == NULL)
        goto python;
    if ((rt = current_runtime()) == NULL) {
        if (PyErr_Occurred())
            return NULL;
        goto python;            /* (no runtime yet: the Python call makes it) */
    }
    Py_INCREF(rt);
    if ((rec = enter(self, rt)) == NULL) {
        Py_DECREF(rt);
        return NULL;
    }
    if (rec == Py_None) {       /* already recording: the Python call decides */
        Py_DECREF(rec);
        Py_DECREF(rt);
        goto python;
    }
    PyObject *fn = PyObject_GetAttr(self, s_fn);
    result = fn == NULL ? NULL : PyObject_Call(fn, args, kwargs);
    Py_XDECREF(fn);
    if (result == NULL) {       /* the body raised: _exit(rec, True), then its exception */
        SavedError saved;
        save_error(&saved);
        PyObject *r = PyObject_VectorcallMethod(
            s_exit, (PyObject *[]){self, rec, Py_True}, 3 | PY_VECTORCALL_ARGUMENTS_OFFSET,
            NULL);
        if (r == NULL) {
            raise_in_cleanup(&saved);
        } else {
            Py_DECREF(r);
            restore_error(&saved);
        }
        goto out;
    }
    PyObject *lock = RTA(rt, RT_LOCK, s_lock);
    t = lock == NULL ? -1 : lock_acquire(lock);
    if (t == 0) {
        t = exit_locked(self, rt, rec);
        if (unlocked(lock, Py_NewRef(Py_None)) == NULL)
            t = -1;
        else
            Py_DECREF(Py_None);
    }
    Py_XDECREF(lock);
    if (t == 0) {               /* failed or eager: the Python _exit does the rest */
        PyObject *r = PyObject_VectorcallMethod(
            s_exit, (PyObject *[]){self, rec, Py_False}, 3 | PY_VECTORCALL_ARGUMENTS_OFFSET,
            NULL);
        t = r == NULL ? -1 : 1;
        Py_XDECREF(r);
    }
    if (t < 0)
        Py_CLEAR(result);
out:
    Py_DECREF(rec);
    Py_DECREF(rt);
    return result;
python:
    if (python_graph_call == NULL) {
        PyErr_SetString(PyExc_RuntimeError,
                        "asyncgpu._speedups was not configured (import asyncgpu first)");
        return NULL;
    }
    PyObject *pair = PyTuple_Pack(1, self), *full;
    if (pair == NULL)
        return NULL;
    full = PySequence_Concat(pair, args);
    Py_DECREF(pair);
    if (full == NULL)
        return NULL;
    result = PyObject_Call(python_graph_call, full, kwargs);
    Py_DECREF(full);
    return result;
}

static PyType_Slot graph_call_slots[] = {
    {Py_tp_call, graph_call},
    {Py_tp_doc, "Base of asyncgpu's GraphFunction: its call, compiled."},
    {0, NULL},
};

static PyType_Spec graph_call_spec = {
    "asyncgpu._speedups.GraphCallBase", sizeof(PyObject), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE, graph_call_slots,
};

int
graph_call_configure(PyObject *recording, PyObject *python_call, PyObject *replay_static)
{
    Py_XSETREF(recording_type, Py_NewRef(recording));
    Py_XSETREF(python_graph_call, Py_NewRef(python_call));
    Py_XSETREF(python_replay_static, Py_NewRef(replay_static));
    return 0;
}

int
graph_call_init(PyObject *module)
{
    static const Name names[] = {
        {&s_recording, "recording"}, {&s_token, "token"}, {&s_name, "name"},
        {&s_split, "split"}, {&s_failed, "failed"}, {&s_eager, "eager"}, {&s_lock, "_lock"},
        {&s_static, "static"},
        {&s_fn, "fn"}, {&s_exit, "_exit"}, {&s_outcomes, "outcomes"},
        {&s_outcome, "outcome"}, {&s_empty, "empty"}, {&s_plus, "+"},
        {&s_static_graphs, "_static"}, {&s_replay_static, "_replay_static"},
        {&s_memory, "memory"}, {&s_replayed, "replayed"}, {&s_id, "id"}, {&s_str, "str"},
        {&s_hex, "hex"}, {&array_tag, "A"},
    };
    if (INTERN_ALL(names) < 0 || (no_args = PyTuple_New(0)) == NULL
            || add_type(module, "GraphCallBase", &graph_call_spec) < 0
            || twin(&t_end_segment, module, "RecordingBase", "end_segment") < 0)
        return -1;
    return 0;
}
