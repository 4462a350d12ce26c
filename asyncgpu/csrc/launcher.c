/* asyncgpu._speedups, launcher.c: the launcher's call, compiled.

The model
---------
Calling ``kernel[grid, block](...)`` enters ``Launcher.__call__`` once per launch. Inside a
recording whose previous run is remembered (``Recording.previous``, see asyncgpu/recorder/recording.py),
a launch that repeats the previous run's launch at the same position with the very same
arguments (the same objects, numbers of the same value, views of the same bytes) is only
appended to the recording: no validation, no keying. In Python that check costs about as
much as everything else a replayed kernel costs the host; here it is a handful of pointer
comparisons.

This module holds no state of its own and decides nothing the Python code does not: it reads
the same attributes (``asyncgpu.runtime.current._runtime``, ``Runtime.recording``,
``Recording.thread``/``launches``/``previous``, ``Launch.launcher``/``args``) and takes the
same fast path as ``asyncgpu.runtime.kernel.launch_in_python``. Everything else (no runtime yet, a
recording of another thread, an argument that is equal but not the same object, keyword
arguments) goes to that Python function, which is also the whole implementation when this
module is not built. So the two agree by construction on every case but the one fast path,
and tests/test_speedups.py runs the recorder's tests both ways.

Invariant: the fast path appends the remembered ``Launch`` object itself, exactly what
``Recording.remember`` appends, and only when ``Recording.remember`` would: each argument the
very same object, or a plain int or float equal to the remembered one, or the same view of a
live allocation, as ``same_arguments`` compares them.
When that launch is the previous run's last and every launch of the segment was remembered,
it calls ``Recording.repeated`` (which ends the segment) as ``Recording.remember`` does.

Example (what the fast path serves)::

    @ag.graph
    def step(x, y):
        k1[g, b](x, y)      # second call on: appended as the first call's launch
    step(x, y); step(x, y); step(x, y)
*/
#include "speedups.h"
#include "pythread.h"

/* Set by configure(): the globals of asyncgpu.runtime.current and the Python launch. */
static PyObject *runtime_globals = NULL;
static PyObject *launch_in_python = NULL;

static PyObject *s_runtime, *s_recording, *s_thread, *s_launches, *s_previous, *s_launcher,
    *s_args, *s_repeated;

/* Whether a launch argument passes what the remembered one passed, in the cases decided
   here: the very same object, a plain int of the same value, a plain float of the same
   nonzero value (equal and nonzero: the same bits), or another view object of the same bytes
   of a live allocation, as same_arguments decides them (a size computed at every call,
   ``n * n``, is a new int each time; ``w[0]`` a new view). 1 yes, 0 not decided here, -1
   error. */
static int
same_number(PyObject *a, PyObject *b)
{
    if (a == b)
        return 1;
    if (PyLong_CheckExact(a) && PyLong_CheckExact(b))
        return PyObject_RichCompareBool(a, b, Py_EQ);
    if (PyFloat_CheckExact(a) && PyFloat_CheckExact(b)) {
        double x = PyFloat_AS_DOUBLE(a);
        return x == PyFloat_AS_DOUBLE(b) && x != 0.0;
    }
    if (array_layout.type != NULL && Py_TYPE(a) == array_layout.type
            && Py_TYPE(b) == array_layout.type)
        return same_view(a, b);     /* ``w[0]``, made again at each call */
    return 0;
}

/* 1: the launch repeats the remembered one and was appended; 0: not; -1: error set. */
static int
remember(PyObject *rec, PyObject *self, PyObject *args)
{
    int hit = 0;
    PyObject *thread = NULL, *launches = NULL, *previous = NULL, *same = NULL;
    PyObject *launcher = NULL, *old = NULL;

    thread = get(rec, &rec_layout, RC_THREAD, s_thread);
    if (thread == NULL)
        goto error;
    if (!PyLong_CheckExact(thread))
        goto done;
    unsigned long ident = PyLong_AsUnsignedLong(thread);
    if (ident == (unsigned long)-1 && PyErr_Occurred())
        goto error;
    if (ident != PyThread_get_thread_ident())
        goto done;                     /* another thread's recording: the Python path */
    launches = get(rec, &rec_layout, RC_LAUNCHES, s_launches);
    if (launches == NULL)
        goto error;
    previous = get(rec, &rec_layout, RC_PREVIOUS, s_previous);
    if (previous == NULL)
        goto error;
    if (!PyList_CheckExact(launches) || !PyList_CheckExact(previous))
        goto done;                     /* () when nothing is remembered */
    Py_ssize_t position = PyList_GET_SIZE(launches);
    if (position >= PyList_GET_SIZE(previous))
        goto done;
    same = PyList_GET_ITEM(previous, position);
    Py_INCREF(same);
    launcher = get(same, &deferred_layout, LA_LAUNCHER, s_launcher);
    if (launcher == NULL)
        goto error;
    if (launcher != self)
        goto done;
    old = get(same, &deferred_layout, LA_ARGS, s_args);
    if (old == NULL)
        goto error;
    if (!PyTuple_CheckExact(old) || PyTuple_GET_SIZE(old) != PyTuple_GET_SIZE(args))
        goto done;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(args); i++) {
        int same_value = same_number(PyTuple_GET_ITEM(old, i), PyTuple_GET_ITEM(args, i));
        if (same_value <= 0) {
            if (same_value < 0)
                goto error;
            goto done;                 /* maybe equal: Python's same_arguments decides */
        }
    }
    if (PyList_Append(launches, same) < 0)
        goto error;
    hit = 1;
    if (position + 1 == PyList_GET_SIZE(previous)) {
        /* the previous run's last launch: if every one came again, the segment ends here */
        for (Py_ssize_t i = 0; i < position; i++)
            if (PyList_GET_ITEM(launches, i) != PyList_GET_ITEM(previous, i))
                goto done;
        PyObject *r = PyObject_CallMethodNoArgs(rec, s_repeated);
        if (r == NULL)
            goto error;
        Py_DECREF(r);
    }
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

PyObject *
current_runtime(void)
{
    PyObject *rt = runtime_globals == NULL
        ? NULL : PyDict_GetItemWithError(runtime_globals, s_runtime);
    return rt == Py_None ? NULL : rt;
}

static PyObject *
launcher_call(PyObject *self, PyObject *args, PyObject *kwargs)
{
    if (kwargs != NULL && PyDict_Size(kwargs) != 0)
        goto python;
    PyObject *rt = current_runtime();
    if (rt == NULL) {
        if (PyErr_Occurred())
            return NULL;
        goto python;                   /* no runtime yet: Python creates it */
    }
    Py_INCREF(rt);
    PyObject *rec = get(rt, &rt_layout, RT_RECORDING, s_recording);
    if (rec == NULL) {
        Py_DECREF(rt);
        return NULL;
    }
    if (rec == Py_None) {              /* eager: straight to the runtime */
        Py_DECREF(rec);
        PyObject *r = call_launch_kernel(rt, self, args);
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

PyObject *
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

int
launcher_init(PyObject *module)
{
    if (intern(&s_runtime, "_runtime") < 0 || intern(&s_recording, "recording") < 0
            || intern(&s_thread, "thread") < 0 || intern(&s_launches, "launches") < 0
            || intern(&s_previous, "previous") < 0 || intern(&s_launcher, "launcher") < 0
            || intern(&s_args, "args") < 0 || intern(&s_repeated, "repeated") < 0)
        return -1;
    return add_type(module, "LauncherBase", &launcher_spec);
}
