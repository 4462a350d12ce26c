/* asyncgpu._speedups, memory.c: the explicit memory model's booking of launches and graphs,
compiled.

The model
---------
Under ``memory="explicit"`` (the default), ``Runtime._issue`` calls
``ExplicitMemory.before_device(accesses)`` before every device node: allocations current only
on the host are copied in first (``make_device_current``, which issues copy nodes), and what
the node writes is booked ``DEVICE`` before the launch. In a loop of launches nothing is
host-current, so the call only books the writes; here it does that in C, and hands the rare
case with something to copy to the same Python method the Python twin calls
(``asyncgpu/runtime/memory.py``'s ``PythonBooking`` is the reference).

A replayed graph's share is here too: which of its inputs are host-current now
(``FrozenGraph.host_current``, which picks the variant to launch; the reference is
``asyncgpu.runtime.frozen.PythonFrozen``), the variant's key (``copy_key``), and the booking
around its launch (``before_graph``, ``after_graph``). After an untimed host step a replay
finds the host's caches cold, and each Python frame on its path then costs microseconds:
with these compiled, a replay of a recorded or static function runs no Python of asyncgpu's.

Invariants: ``make_device_current`` is called exactly when it would do something (an
allocation of the accesses is at ``HOST`` and has bytes), and before the writes are booked;
every compiled method returns and books what its Python twin does (tests/test_memory_compiled.py).
*/
#include "speedups.h"

static SlotLayout alloc_layout, frozen_layout;
enum { L_LOCATION, L_NBYTES, L_ID };
enum { F_SETTLED, F_INPUTS, F_COPY_IN, F_OVERWRITTEN, F_WRITTEN, F_COPY_ONLY, F_COPY_BYTES };
static PyObject *host_flag, *device_flag, *both_flag, *no_allocs;
static PyObject *alloc_class;     /* asyncgpu.runtime.array.Allocation */
static PyObject *s_alloc, *s_write, *s_location, *s_nbytes, *s_make_device_current, *s_id,
    *s_settled, *s_inputs, *s_copy_in, *s_overwritten, *s_written, *s_copy_only,
    *s_copy_bytes, *s_host_epoch, *s_runtime, *s_stats, *s_copies_to_device,
    *s_bytes_to_device, *s_explicit_frees;

/* 1: the allocation is current on the host only; 0 not; -1 error. */
static int
at_host(PyObject *alloc, int unused)
{
    PyObject *loc = get(alloc, &alloc_layout, L_LOCATION, s_location);
    int host = loc == NULL ? -1 : PyObject_RichCompareBool(loc, host_flag, Py_EQ);
    Py_XDECREF(loc);
    return host;
}

/* 1: the allocation has bytes and (``host_only``) is current on the host only; 0 not;
   -1 error. */
static int
has_bytes(PyObject *alloc, int host_only)
{
    if (host_only) {
        int host = at_host(alloc, 0);
        if (host <= 0)
            return host;
    }
    PyObject *nbytes = get(alloc, &alloc_layout, L_NBYTES, s_nbytes);
    int t = nbytes == NULL ? -1 : truth(nbytes);
    Py_XDECREF(nbytes);
    return t;
}

/* Whether acc's allocation needs copying in: 1 (stops the pass), 0, or -1. */
static int
needs_copy(PyObject *acc, void *unused)
{
    PyObject *alloc = get(acc, &arg_layout, G_ALLOC, s_alloc);
    int t = alloc == NULL ? -1 : has_bytes(alloc, 1);
    Py_XDECREF(alloc);
    return t;
}

/* A written allocation with bytes is booked DEVICE: 0, or -1. */
static int
book_write(PyObject *acc, void *unused)
{
    PyObject *write = get(acc, &arg_layout, G_WRITE, s_write), *alloc = NULL;
    int t = write == NULL ? -1 : truth(write);
    if (t > 0)
        t = (alloc = get(acc, &arg_layout, G_ALLOC, s_alloc)) == NULL ? -1 : has_bytes(alloc, 0);
    if (t > 0)
        t = set(alloc, &alloc_layout, L_LOCATION, s_location, device_flag);
    Py_XDECREF(write);
    Py_XDECREF(alloc);
    return t < 0 ? -1 : 0;
}

static Twin t_before_device;

static PyObject *
memory_before_device(PyObject *self, PyObject *accesses)
{
    int copies = for_each(accesses, needs_copy, NULL);
    if (copies < 0)
        return NULL;
    if (copies) {
        PyObject *r = call_method(self, s_make_device_current, 1, accesses);
        if (r == NULL)
            return NULL;
        Py_DECREF(r);
    }
    if (for_each(accesses, book_write, NULL) < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* Set ``location`` on every allocation of a tuple: 0, or -1. */
static int
book_all(PyObject *allocs, PyObject *location)
{
    if (!PyTuple_CheckExact(allocs)) {
        PyErr_SetString(PyExc_TypeError, "a graph's allocations must be a tuple");
        return -1;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(allocs); i++)
        if (set(PyTuple_GET_ITEM(allocs, i), &alloc_layout, L_LOCATION, s_location, location)
                < 0)
            return -1;
    return 0;
}

#define FROZEN(o, f, n) get((o), &frozen_layout, (f), (n))

/* The allocations of a tuple that ``keep(alloc, flag)`` keeps: a new tuple, or NULL. */
static PyObject *
select_allocs(PyObject *allocs, int (*keep)(PyObject *, int), int flag)
{
    if (!PyTuple_CheckExact(allocs)) {
        PyErr_SetString(PyExc_TypeError, "a graph's allocations must be a tuple");
        return NULL;
    }
    PyObject *list = PyList_New(0);
    if (list == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(allocs); i++) {
        PyObject *a = PyTuple_GET_ITEM(allocs, i);
        int t = keep(a, flag);
        if (t < 0 || (t && PyList_Append(list, a) < 0)) {
            Py_DECREF(list);
            return NULL;
        }
    }
    PyObject *r = PyList_AsTuple(list);
    Py_DECREF(list);
    return r;
}

static Twin t_before_graph, t_after_graph;

/* before_graph(frozen): its copy_in (and the host-current allocations it overwrites whole)
   booked BOTH, what it writes DEVICE; returns what was booked from HOST. */
static PyObject *
memory_before_graph(PyObject *self, PyObject *frozen)
{
    PyObject *booked = FROZEN(frozen, F_COPY_IN, s_copy_in), *over = NULL, *extra = NULL,
        *written = NULL;
    if (booked == NULL || (over = FROZEN(frozen, F_OVERWRITTEN, s_overwritten)) == NULL)
        goto fail;
    int t = truth(over);
    if (t < 0)
        goto fail;
    if (t) {
        if ((extra = select_allocs(over, at_host, 0)) == NULL)
            goto fail;
        if (PyTuple_GET_SIZE(extra) != 0) {
            Py_SETREF(booked, PySequence_Concat(booked, extra));
            if (booked == NULL)
                goto fail;
        }
    }
    if (book_all(booked, both_flag) < 0
            || (written = FROZEN(frozen, F_WRITTEN, s_written)) == NULL
            || book_all(written, device_flag) < 0)
        goto fail;
    Py_DECREF(over);
    Py_XDECREF(extra);
    Py_DECREF(written);
    return booked;
fail:
    Py_XDECREF(booked);
    Py_XDECREF(over);
    Py_XDECREF(extra);
    Py_XDECREF(written);
    return NULL;
}

/* after_graph(frozen): its copies that no launch overwrites are current on both sides; the
   copies counted in the runtime's statistics. */
static PyObject *
memory_after_graph(PyObject *self, PyObject *frozen)
{
    PyObject *only = FROZEN(frozen, F_COPY_ONLY, s_copy_only), *copy_in = NULL, *n = NULL,
        *nbytes = NULL, *rt = NULL, *stats = NULL, *result = NULL;
    if (only == NULL || book_all(only, both_flag) < 0
            || (copy_in = FROZEN(frozen, F_COPY_IN, s_copy_in)) == NULL
            || (nbytes = FROZEN(frozen, F_COPY_BYTES, s_copy_bytes)) == NULL
            || (rt = PyObject_GetAttr(self, s_runtime)) == NULL
            || (stats = PyObject_GetAttr(rt, s_stats)) == NULL)
        goto done;
    Py_ssize_t count = PyObject_Size(copy_in);
    if (count < 0 || (n = PyLong_FromSsize_t(count)) == NULL
            || add_to(stats, s_copies_to_device, n) < 0
            || add_to(stats, s_bytes_to_device, nbytes) < 0)
        goto done;
    result = Py_NewRef(Py_None);
done:
    Py_XDECREF(only);
    Py_XDECREF(copy_in);
    Py_XDECREF(n);
    Py_XDECREF(nbytes);
    Py_XDECREF(rt);
    Py_XDECREF(stats);
    return result;
}

static PyMethodDef memory_methods[] = {
    {"before_device", memory_before_device, METH_O,
     "before_device(accesses): copy in what the node needs, book what it writes DEVICE."},
    {"before_graph", memory_before_graph, METH_O,
     "before_graph(frozen): book a replayed graph's copies and writes; what was at HOST."},
    {"after_graph", memory_after_graph, METH_O,
     "after_graph(frozen): book the graph's copies current on both sides; count them."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot memory_slots[] = {
    {Py_tp_methods, memory_methods},
    {Py_tp_doc, "Base of asyncgpu's ExplicitMemory: before_device, compiled."},
    {0, NULL},
};

static PyType_Spec memory_spec = {
    "asyncgpu._speedups.MemoryBase", sizeof(PyObject), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE, memory_slots,
};

/* ---- FrozenGraph.host_current and copy_key ------------------------------------------------ */

static Twin t_host_current;

/* host_current(rt): the inputs at HOST with bytes, or () while the runtime's host epoch is the
   one the graph's last launch settled at. */
static PyObject *
frozen_host_current(PyObject *self, PyObject *rt)
{
    PyObject *settled = FROZEN(self, F_SETTLED, s_settled), *epoch = NULL, *inputs;
    int same = settled == NULL || (epoch = PyObject_GetAttr(rt, s_host_epoch)) == NULL
        ? -1 : PyObject_RichCompareBool(settled, epoch, Py_EQ);
    Py_XDECREF(settled);
    Py_XDECREF(epoch);
    if (same != 0)
        return same < 0 ? NULL : Py_NewRef(no_allocs);
    if ((inputs = FROZEN(self, F_INPUTS, s_inputs)) == NULL)
        return NULL;
    PyObject *r = select_allocs(inputs, has_bytes, 1);   /* (host_only) */
    Py_DECREF(inputs);
    return r;
}

PyObject *
call_host_current(PyObject *frozen, PyObject *rt)
{
    return call_twin(&t_host_current, frozen, &rt, 1);
}

PyObject *
copy_key_of(PyObject *allocs)
{
    if (!PyTuple_CheckExact(allocs)) {
        PyErr_SetString(PyExc_TypeError, "copy_key: the allocations must be a tuple");
        return NULL;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(allocs);
    if (n == 0)
        return Py_NewRef(no_allocs);
    PyObject *key = PyTuple_New(n);
    for (Py_ssize_t i = 0; key != NULL && i < n; i++) {
        PyObject *id = get(PyTuple_GET_ITEM(allocs, i), &alloc_layout, L_ID, s_id);
        if (id == NULL)
            Py_CLEAR(key);
        else
            PyTuple_SET_ITEM(key, i, id);
    }
    return key;
}

static PyMethodDef frozen_methods[] = {
    {"host_current", frozen_host_current, METH_O,
     "host_current(rt): the graph's inputs current only on the host now."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot frozen_slots[] = {
    {Py_tp_methods, frozen_methods},
    {Py_tp_doc, "Base of asyncgpu's FrozenGraph: host_current, compiled."},
    {0, NULL},
};

static PyType_Spec frozen_spec = {
    "asyncgpu._speedups.FrozenBase", sizeof(PyObject), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE, frozen_slots,
};

PyObject *
configure_memory(PyObject *module, PyObject *args)
{
    PyObject *alloc, *host, *device, *both;
    static const char *const alloc_names[] = {"location", "nbytes", "id"};
    if (!PyArg_ParseTuple(args, "OOOO:configure_memory", &alloc, &host, &device, &both)
            || layout(&alloc_layout, alloc, alloc_names, 3) < 0)
        return NULL;
    Py_XSETREF(alloc_class, Py_NewRef(alloc));
    Py_XSETREF(host_flag, Py_NewRef(host));
    Py_XSETREF(device_flag, Py_NewRef(device));
    Py_XSETREF(both_flag, Py_NewRef(both));
    Py_RETURN_NONE;
}

PyObject *
configure_frozen(PyObject *module, PyObject *frozen)
{
    static const char *const frozen_names[] = {"settled", "inputs", "copy_in", "overwritten",
                                               "written", "copy_only", "copy_bytes"};
    if (layout(&frozen_layout, frozen, frozen_names, 7) < 0)
        return NULL;
    Py_RETURN_NONE;
}

int
memory_init(PyObject *module)
{
    static const Name names[] = {
        {&s_alloc, "alloc"}, {&s_write, "write"}, {&s_location, "location"},
        {&s_nbytes, "nbytes"}, {&s_make_device_current, "make_device_current"}, {&s_id, "id"},
        {&s_settled, "settled"}, {&s_inputs, "inputs"}, {&s_copy_in, "copy_in"},
        {&s_overwritten, "overwritten"}, {&s_written, "written"}, {&s_copy_only, "copy_only"},
        {&s_copy_bytes, "copy_bytes"}, {&s_host_epoch, "host_epoch"},
        {&s_runtime, "runtime"}, {&s_stats, "stats"},
        {&s_copies_to_device, "copies_to_device"}, {&s_bytes_to_device, "bytes_to_device"},
        {&s_explicit_frees, "explicit_frees"},
    };
    if (INTERN_ALL(names) < 0 || (no_allocs = PyTuple_New(0)) == NULL
            || add_type(module, "MemoryBase", &memory_spec) < 0
            || add_type(module, "FrozenBase", &frozen_spec) < 0
            || twin(&t_before_device, module, "MemoryBase", "before_device") < 0
            || twin(&t_before_graph, module, "MemoryBase", "before_graph") < 0
            || twin(&t_after_graph, module, "MemoryBase", "after_graph") < 0
            || twin(&t_host_current, module, "FrozenBase", "host_current") < 0)
        return -1;
    return 0;
}

int
no_frees_since(PyObject *frees)
{
    if (alloc_class == NULL)        /* (asyncgpu.runtime.memory not configured yet: look further) */
        return 0;
    PyObject *now = PyObject_GetAttr(alloc_class, s_explicit_frees);
    int same = now == NULL ? -1 : PyObject_RichCompareBool(frees, now, Py_EQ);
    Py_XDECREF(now);
    return same;
}

PyObject *
call_before_device(PyObject *memory, PyObject *accesses)
{
    return call_twin(&t_before_device, memory, &accesses, 1);
}

PyObject *
call_before_graph(PyObject *memory, PyObject *frozen)
{
    return call_twin(&t_before_graph, memory, &frozen, 1);
}

PyObject *
call_after_graph(PyObject *memory, PyObject *frozen)
{
    return call_twin(&t_after_graph, memory, &frozen, 1);
}
