/* asyncgpu._speedups, memory.c: the explicit memory model's booking before a launch, compiled.

The model
---------
Under ``memory="explicit"`` (the default), ``Runtime._issue`` calls
``ExplicitMemory.before_device(accesses)`` before every device node: allocations current only
on the host are copied in first (``make_device_current``, which issues copy nodes), and what
the node writes is booked ``DEVICE`` before the launch. In a loop of launches nothing is
host-current, so the call only books the writes; here it does that in C, and hands the rare
case with something to copy to the same Python method the Python twin calls
(``asyncgpu/_memory.py``'s ``PythonBooking`` is the reference).

Invariant: ``make_device_current`` is called exactly when it would do something (an
allocation of the accesses is at ``HOST`` and has bytes), and before the writes are booked.
*/
#include "speedups.h"

static SlotLayout alloc_layout;
enum { L_LOCATION, L_NBYTES };
static PyObject *host_flag, *device_flag;
static PyObject *s_alloc, *s_write, *s_location, *s_nbytes, *s_make_device_current;

/* 1: the access's allocation has bytes and (``host_only``) is current on the host only; 0 not;
   -1 error. */
static int
has_bytes(PyObject *alloc, int host_only)
{
    if (host_only) {
        PyObject *loc = get(alloc, &alloc_layout, L_LOCATION, s_location);
        int host = loc == NULL ? -1 : PyObject_RichCompareBool(loc, host_flag, Py_EQ);
        Py_XDECREF(loc);
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

static PyMethodDef memory_methods[] = {
    {"before_device", memory_before_device, METH_O,
     "before_device(accesses): copy in what the node needs, book what it writes DEVICE."},
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

PyObject *
configure_memory(PyObject *module, PyObject *args)
{
    PyObject *alloc, *host, *device;
    static const char *const alloc_names[] = {"location", "nbytes"};
    if (!PyArg_ParseTuple(args, "OOO:configure_memory", &alloc, &host, &device)
            || layout(&alloc_layout, alloc, alloc_names, 2) < 0)
        return NULL;
    Py_XSETREF(host_flag, Py_NewRef(host));
    Py_XSETREF(device_flag, Py_NewRef(device));
    Py_RETURN_NONE;
}

int
memory_init(PyObject *module)
{
    if (intern(&s_alloc, "alloc") < 0 || intern(&s_write, "write") < 0
            || intern(&s_location, "location") < 0 || intern(&s_nbytes, "nbytes") < 0
            || intern(&s_make_device_current, "make_device_current") < 0)
        return -1;
    if (add_type(module, "MemoryBase", &memory_spec) < 0
            || twin(&t_before_device, module, "MemoryBase", "before_device") < 0)
        return -1;
    return 0;
}

PyObject *
call_before_device(PyObject *memory, PyObject *accesses)
{
    return call_twin(&t_before_device, memory, &accesses, 1);
}
