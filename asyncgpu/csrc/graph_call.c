/* asyncgpu._speedups, graph_call.c: a plain recorded function's call, compiled.

The model
---------
Calling a function decorated with ``@asyncgpu.graph`` (not ``static``) enters the recording
(``_Run._enter``: under the runtime's lock, a new ``Recording`` made the runtime's), runs the
body with its launches deferred, and leaves it (``_Run._exit``: the last segment ended, which
in the steady state launches the remembered graph again, and the call's ``outcome`` set). In
Python that is three frames and a few dozen attribute steps around the body on every call;
here it is one C call around the body, and the segment's end is recording.c's.

Whatever is unusual goes to the Python call (``_recorder.PythonGraphCall.__call__``, the
reference) before anything is done: a ``static`` function, no runtime yet, a runtime already
recording (nested, or another thread's). After the body, a recording that failed or fell back
to eager execution is handed to the Python ``_exit``; a body that raised gets the Python
``_exit(rec, True)`` and its own exception back (with the cleanup's as its context, as
``except: ...; raise`` gives).

Invariant: the same outcomes, graphs and exceptions as the Python call;
tests/test_recorder_compiled.py runs the recorder's unusual cases both ways.

Example: ``asyncgpu._compiled.use(False)`` puts the Python call back.
*/
#include "speedups.h"

static PyObject *python_graph_call;     /* PythonGraphCall.__call__ */
static PyObject *recording_type;        /* asyncgpu._recorder.Recording */
static PyObject *s_recording, *s_token, *s_name, *s_split, *s_failed, *s_eager, *s_lock,
    *s_acquire, *s_release, *s_static, *s_fn, *s_exit, *s_outcomes, *s_outcome, *s_empty,
    *s_plus;
static Twin t_end_segment;

#define REC(o, f, n) get((o), &rec_layout, (f), (n))
#define RTA(o, f, n) get((o), &rt_layout, (f), (n))

/* lock.acquire() / lock.release(): 0 or -1 */
static int
lock_call(PyObject *lock, PyObject *method)
{
    PyObject *r = PyObject_CallMethodNoArgs(lock, method);
    Py_XDECREF(r);
    return r == NULL ? -1 : 0;
}

/* Release the lock after work that returned ``result`` (NULL: an error is set, which goes on,
   with a failed release's error raised from it). */
static PyObject *
unlocked(PyObject *lock, PyObject *result)
{
    SavedError saved;
    save_error(&saved);
    if (lock_call(lock, s_release) < 0) {
        raise_in_cleanup(&saved);
        Py_CLEAR(result);
    } else {
        restore_error(&saved);
    }
    return result;
}

/* _Run._enter's common case: a new Recording made the runtime's (new reference); None when
   the runtime is already recording (the Python call decides: nested, or another thread's). */
static PyObject *
enter(PyObject *self, PyObject *rt)
{
    PyObject *lock = RTA(rt, RT_LOCK, s_lock), *cur, *rec = NULL, *token = NULL, *name = NULL,
        *split = NULL;
    if (lock == NULL || lock_call(lock, s_acquire) < 0) {
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

static PyObject *
graph_call(PyObject *self, PyObject *args, PyObject *kwargs)
{
    PyObject *rt, *rec, *result, *is_static = PyObject_GetAttr(self, s_static);
    int t = is_static == NULL ? -1 : truth(is_static);
    Py_XDECREF(is_static);
    if (t < 0)
        return NULL;
    if (t || recording_type == NULL)
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
    t = lock == NULL ? -1 : lock_call(lock, s_acquire);
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
graph_call_configure(PyObject *recording, PyObject *python_call)
{
    Py_XSETREF(recording_type, Py_NewRef(recording));
    Py_XSETREF(python_graph_call, Py_NewRef(python_call));
    return 0;
}

int
graph_call_init(PyObject *module)
{
    static const Name names[] = {
        {&s_recording, "recording"}, {&s_token, "token"}, {&s_name, "name"},
        {&s_split, "split"}, {&s_failed, "failed"}, {&s_eager, "eager"}, {&s_lock, "_lock"},
        {&s_acquire, "acquire"}, {&s_release, "release"}, {&s_static, "static"},
        {&s_fn, "fn"}, {&s_exit, "_exit"}, {&s_outcomes, "outcomes"},
        {&s_outcome, "outcome"}, {&s_empty, "empty"}, {&s_plus, "+"},
    };
    if (INTERN_ALL(names) < 0 || add_type(module, "GraphCallBase", &graph_call_spec) < 0
            || twin(&t_end_segment, module, "RecordingBase", "end_segment") < 0)
        return -1;
    return 0;
}
