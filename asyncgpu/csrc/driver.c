/* asyncgpu._speedups, driver.c: the CUDA calls of a launch, made straight into the driver.

The model
---------
Every launch on the ``cuda`` backend makes a few CUDA calls: ``cuLaunchKernel``, the event
record of its completion, perhaps a stream's wait for another stream's event, later an event
query; a graph replay makes ``cuGraphLaunch`` and a record. Through CuPy each is a Cython
wrapper that parses Python integers, releases the GIL and checks the status, and the record,
the wait and the query go through the CUDA runtime, a layer above the driver. ``DriverCalls``
is an object with the same callables (``launchKernel``, ``eventRecord``, ``streamWaitEvent``,
``eventDone``, ``graphLaunch``: the same arguments as CuPy's ``driver.launchKernel``,
``runtime.eventRecord``, ``runtime.streamWaitEvent``, ``Event.done`` and ``Graph.launch``)
that call the driver's entry points directly, through function pointers found in the
process's ``libcuda`` (asyncgpu/backends/cuda/driver.py hands over their addresses). The backend
puts them where it kept CuPy's, so its Python methods and their compiled twins make the
same calls either way.

Invariants
----------
* The same CUDA call with the same handles as CuPy would make (the driver function under the
  runtime one), and nothing else.
* A call the driver refuses is made again through CuPy's own callable, which raises what
  asyncgpu always saw (``CUDARuntimeError``, ``CUDADriverError``) or succeeds where the
  runtime layer repairs the cause (it makes the device's context current on a new thread).
  Nothing the driver refused was done, so the second call is the only one that acts.
* ``cuLaunchKernel`` and ``cuGraphLaunch`` run without the GIL, as CuPy's do: either blocks
  while the device's launch queue is full.
* Arguments that are not plain integers go to CuPy's callable too, which refuses them.

Example (what asyncgpu/backends/cuda/driver.py does)::

    calls = DriverCalls((launch, record, wait, query, graph_launch),   # addresses in libcuda
                        cupy.cuda.driver.launchKernel, cupy.cuda.runtime.eventRecord,
                        cupy.cuda.runtime.streamWaitEvent)
    calls.eventRecord(event.ptr, stream.ptr)
*/
#include "speedups.h"
#include "graph_lanes.h"

typedef int (*launch_fn)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                         unsigned, void *, void **, void **);
typedef int (*record_fn)(void *, void *);
typedef int (*wait_fn)(void *, void *, unsigned);
typedef int (*query_fn)(void *);
typedef int (*graph_launch_fn)(void *, void *);

enum { CUDA_ERROR_NOT_READY = 600 };

typedef struct {
    PyObject_HEAD
    launch_fn launch;
    record_fn record;
    wait_fn wait;
    query_fn query;
    graph_launch_fn graph_launch;
    PyObject *cupy_launch, *cupy_record, *cupy_wait;    /* CuPy's: the reference callables */
    GraphLanes lanes;       /* kernels enqueued as one-node graphs (graph_lanes.c) */
} DriverCalls;

static PyObject *s_ptr, *s_done, *s_graph_exec, *s_launch;

/* An address argument as a pointer; 0 with no error set when it is not a plain int. */
static int
address(PyObject *v, void **out)
{
    if (!PyLong_CheckExact(v))
        return 0;
    *out = PyLong_AsVoidPtr(v);
    if (*out == NULL && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    return 1;
}

static int
dimension(PyObject *v, unsigned *out)
{
    if (!PyLong_CheckExact(v))
        return 0;
    unsigned long x = PyLong_AsUnsignedLong(v);
    if (x == (unsigned long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    if (x > 0xffffffffUL)
        return 0;
    *out = (unsigned)x;
    return 1;
}

/* The same call through CuPy: its result, or its exception. */
static PyObject *
through_cupy(PyObject *fn, PyObject *const *args, Py_ssize_t nargs)
{
    return PyObject_Vectorcall(fn, args, (size_t)nargs, NULL);
}

static PyObject *
calls_launch_kernel(DriverCalls *self, PyObject *const *args, Py_ssize_t nargs)
{
    void *f, *stream, *params, *extra;
    unsigned d[7];
    if (nargs != 11 || self->launch == NULL || !address(args[0], &f)
            || !address(args[8], &stream) || !address(args[9], &params)
            || !address(args[10], &extra))
        return through_cupy(self->cupy_launch, args, nargs);
    for (int i = 0; i < 7; i++) {
        if (!dimension(args[1 + i], &d[i]))
            return through_cupy(self->cupy_launch, args, nargs);
    }
    int status;
    Lane *tried = NULL;
    if (self->lanes.enabled) {
        KernelNodeParams p = {f, d[0], d[1], d[2], d[3], d[4], d[5], d[6],
                              (void **)params, (void **)extra, NULL, NULL};
        if (lanes_launch(&self->lanes, &p, stream, &tried) == 0)
            Py_RETURN_NONE;
    }
    Py_BEGIN_ALLOW_THREADS
    status = self->launch(f, d[0], d[1], d[2], d[3], d[4], d[5], d[6], stream,
                          (void **)params, (void **)extra);
    Py_END_ALLOW_THREADS
    lanes_outcome(&self->lanes, tried, status);
    if (status != 0)
        return through_cupy(self->cupy_launch, args, nargs);
    Py_RETURN_NONE;
}

static PyObject *
calls_event_record(DriverCalls *self, PyObject *const *args, Py_ssize_t nargs)
{
    void *event, *stream;
    if (nargs != 2 || self->record == NULL || !address(args[0], &event)
            || !address(args[1], &stream) || self->record(event, stream) != 0)
        return through_cupy(self->cupy_record, args, nargs);
    Py_RETURN_NONE;
}

static PyObject *
calls_stream_wait(DriverCalls *self, PyObject *const *args, Py_ssize_t nargs)
{
    void *stream, *event;
    unsigned flags;
    if (nargs != 3 || self->wait == NULL || !address(args[0], &stream)
            || !address(args[1], &event) || !dimension(args[2], &flags)
            || self->wait(stream, event, flags) != 0)
        return through_cupy(self->cupy_wait, args, nargs);
    Py_RETURN_NONE;
}

/* obj.ptr as a pointer: 1, 0 (not a plain int: use CuPy), or -1 with an error set */
static int
ptr_of(PyObject *obj, void **out)
{
    PyObject *p = PyObject_GetAttr(obj, s_ptr);
    if (p == NULL)
        return -1;
    int ok = address(p, out);
    Py_DECREF(p);
    return ok;
}

static PyObject *
calls_event_done(DriverCalls *self, PyObject *event)
{
    void *e;
    int ok = self->query == NULL ? 0 : ptr_of(event, &e);
    if (ok < 0)
        return NULL;
    if (ok) {
        int status = self->query(e);
        if (status == 0)
            Py_RETURN_TRUE;
        if (status == CUDA_ERROR_NOT_READY)
            Py_RETURN_FALSE;
    }
    PyObject *done = PyObject_GetAttr(event, s_done);    /* CuPy's query: raises */
    if (done == NULL)
        return NULL;
    int t = truth(done);
    Py_DECREF(done);
    return t < 0 ? NULL : PyBool_FromLong(t);
}

static PyObject *
calls_graph_launch(DriverCalls *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "graphLaunch(graph, stream)");
        return NULL;
    }
    PyObject *graph = args[0], *stream = args[1];
    void *exec = NULL, *s;
    int ok = self->graph_launch == NULL ? 0 : ptr_of(stream, &s);
    if (ok < 0)
        return NULL;
    if (ok) {
        PyObject *ge = PyObject_GetAttr(graph, s_graph_exec);
        if (ge == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_AttributeError))
                return NULL;
            PyErr_Clear();
            ok = 0;
        } else {
            ok = address(ge, &exec) && exec != NULL;    /* (0: not instantiated yet) */
            Py_DECREF(ge);
        }
    }
    if (ok) {
        int status;
        Py_BEGIN_ALLOW_THREADS
        status = self->graph_launch(exec, s);
        Py_END_ALLOW_THREADS
        if (status == 0)
            Py_RETURN_NONE;
    }
    return call_method(graph, s_launch, 1, stream);     /* CuPy's Graph.launch */
}

static PyObject *
calls_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    PyObject *addresses, *launch, *record, *wait;
    void *fn[5 + GRAPH_ENTRY_COUNT] = {NULL};
    if (kwargs != NULL && PyDict_GET_SIZE(kwargs) != 0) {
        PyErr_SetString(PyExc_TypeError, "DriverCalls takes no keyword arguments");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "O!OOO:DriverCalls", &PyTuple_Type, &addresses, &launch,
                          &record, &wait))
        return NULL;
    Py_ssize_t count = PyTuple_GET_SIZE(addresses);
    if (count != 5 && count != 5 + GRAPH_ENTRY_COUNT) {
        PyErr_SetString(PyExc_ValueError, "DriverCalls: five addresses (launch, record, "
                        "wait, query, graph launch; 0 for one that is missing), then "
                        "optionally the seven of the graph lanes (_driver.GRAPH_ENTRY_POINTS)");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *a = PyTuple_GET_ITEM(addresses, i);
        fn[i] = PyLong_Check(a) ? PyLong_AsVoidPtr(a) : NULL;
        if (PyErr_Occurred())
            return NULL;
        if (!PyLong_Check(a)) {
            PyErr_SetString(PyExc_TypeError, "DriverCalls: the addresses are ints");
            return NULL;
        }
    }
    DriverCalls *self = (DriverCalls *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    /* (a data pointer as a function pointer: what dlsym's callers do on every POSIX system) */
    self->launch = (launch_fn)fn[0];
    self->record = (record_fn)fn[1];
    self->wait = (wait_fn)fn[2];
    self->query = (query_fn)fn[3];
    self->graph_launch = (graph_launch_fn)fn[4];
    GraphEntries *g = &self->lanes.fn;
    g->create = (int (*)(void **, unsigned))fn[5];
    g->add_node = (int (*)(void **, void *, void *const *, size_t,
                           const KernelNodeParams *))fn[6];
    g->instantiate = (int (*)(void **, void *, unsigned long long))fn[7];
    g->set_params = (int (*)(void *, void *, const KernelNodeParams *))fn[8];
    g->exec_destroy = (int (*)(void *))fn[9];
    g->graph_destroy = (int (*)(void *))fn[10];
    g->ctx_synchronize = (int (*)(void))fn[11];
    self->lanes.graph_launch = self->graph_launch;
    self->lanes.available = self->graph_launch != NULL;
    for (int i = 5; i < 5 + GRAPH_ENTRY_COUNT; i++)
        self->lanes.available &= fn[i] != NULL;
    self->cupy_launch = Py_NewRef(launch);
    self->cupy_record = Py_NewRef(record);
    self->cupy_wait = Py_NewRef(wait);
    return (PyObject *)self;
}

static int
calls_traverse(DriverCalls *self, visitproc visit, void *arg)
{
    Py_VISIT(self->cupy_launch);
    Py_VISIT(self->cupy_record);
    Py_VISIT(self->cupy_wait);
#if PY_VERSION_HEX >= 0x03090000
    Py_VISIT(Py_TYPE(self));
#endif
    return 0;
}

static int
calls_clear(DriverCalls *self)
{
    Py_CLEAR(self->cupy_launch);
    Py_CLEAR(self->cupy_record);
    Py_CLEAR(self->cupy_wait);
    return 0;
}

static void
calls_dealloc(DriverCalls *self)
{
    PyTypeObject *type = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    lanes_release(&self->lanes);
    calls_clear(self);
    type->tp_free((PyObject *)self);
    Py_DECREF(type);
}

static PyObject *
calls_release_lanes(DriverCalls *self, PyObject *unused)
{
    lanes_release(&self->lanes);
    Py_RETURN_NONE;
}

static PyObject *
lanes_get(DriverCalls *self, void *unused)
{
    return PyBool_FromLong(self->lanes.enabled);
}

static int
lanes_set(DriverCalls *self, PyObject *value, void *unused)
{
    int on = value == NULL ? -1 : PyObject_IsTrue(value);
    if (on < 0) {
        if (value == NULL)
            PyErr_SetString(PyExc_AttributeError, "single_node_graphs cannot be deleted");
        return -1;
    }
    self->lanes.enabled = on && self->lanes.available;
    return 0;
}

static PyObject *
lane_launches_get(DriverCalls *self, void *unused)
{
    return PyLong_FromUnsignedLongLong(self->lanes.launches);
}

static PyObject *
lanes_available_get(DriverCalls *self, void *unused)
{
    return PyBool_FromLong(self->lanes.available);
}

static PyGetSetDef calls_getset[] = {
    {"single_node_graphs", (getter)lanes_get, (setter)lanes_set,
     "Whether launchKernel enqueues each kernel as its stream's one-node graph "
     "(graph_lanes.c); setting it True has no effect where the entry points are missing.",
     NULL},
    {"lane_launches", (getter)lane_launches_get, NULL,
     "How many kernels launchKernel enqueued through a one-node graph.", NULL},
    {"lanes_available", (getter)lanes_available_get, NULL,
     "Whether every entry point of the one-node graphs was given.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef calls_methods[] = {
    {"release_lanes", (PyCFunction)calls_release_lanes, METH_NOARGS,
     "release_lanes(): wait for the device, then destroy the one-node graphs (later launches "
     "make them again)."},
    {"launchKernel", (PyCFunction)(void (*)(void))calls_launch_kernel, METH_FASTCALL,
     "launchKernel(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra): cuLaunchKernel "
     "(as cupy.cuda.driver.launchKernel)."},
    {"eventRecord", (PyCFunction)(void (*)(void))calls_event_record, METH_FASTCALL,
     "eventRecord(event, stream): cuEventRecord (as cupy.cuda.runtime.eventRecord)."},
    {"streamWaitEvent", (PyCFunction)(void (*)(void))calls_stream_wait, METH_FASTCALL,
     "streamWaitEvent(stream, event, flags): cuStreamWaitEvent (as "
     "cupy.cuda.runtime.streamWaitEvent)."},
    {"eventDone", (PyCFunction)calls_event_done, METH_O,
     "eventDone(event): whether a CuPy event completed, by cuEventQuery (as event.done)."},
    {"graphLaunch", (PyCFunction)(void (*)(void))calls_graph_launch, METH_FASTCALL,
     "graphLaunch(graph, stream): cuGraphLaunch of a CuPy graph (as graph.launch(stream))."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot calls_slots[] = {
    {Py_tp_new, calls_new},
    {Py_tp_dealloc, calls_dealloc},
    {Py_tp_traverse, calls_traverse},
    {Py_tp_clear, calls_clear},
    {Py_tp_methods, calls_methods},
    {Py_tp_getset, calls_getset},
    {Py_tp_doc, "DriverCalls(addresses, launch_kernel, event_record, stream_wait_event): the "
                "CUDA calls of a launch, made straight into the driver (see "
                "asyncgpu/csrc/driver.c)."},
    {0, NULL},
};

static PyType_Spec calls_spec = {
    "asyncgpu._speedups.DriverCalls", sizeof(DriverCalls), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC, calls_slots,
};

int
driver_init(PyObject *module)
{
    static const Name names[] = {
        {&s_ptr, "ptr"}, {&s_done, "done"}, {&s_graph_exec, "graphExec"}, {&s_launch, "launch"},
    };
    if (INTERN_ALL(names) < 0)
        return -1;
    /* the lane table's capacity, for tests that fill it */
    if (PyModule_AddIntConstant(module, "LANES_MAX", LANES_MAX) < 0)
        return -1;
    return add_type(module, "DriverCalls", &calls_spec);
}
