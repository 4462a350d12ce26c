/* asyncgpu._speedups, counters.c: the runtime's statistics counted in C integers.

The model
---------
Every launch counts a few things: the kernel, the node, its event record, an event wait, the
nodes a poll retired and the query that found them. In __slots__ each count is a Python int,
and past 256 every ``+= 1`` makes a new int object and frees the old one: about a thousand
instructions of an eager launch's thirty thousand went to that (measured with callgrind).
``CountersBase`` holds the counts as C integers instead. Python reads and writes them as
ordinary int attributes (member descriptors of the same names), and the compiled methods add to
them in place (``count_stat``). ``asyncgpu.core.statistics.Counters`` takes it as its base where
the module is built, and keeps its other fields (the edge and sync dicts, the set of streams
used, the listener) in __slots__.

Invariants
----------
* The same names and values as the Python slots: Python sees ints; a count must fit in 64
  signed bits (beyond that, setting it raises OverflowError).
* ``count_stat`` on any other counters object adds by name (``add_at``), as before.

Example::

    count_stat(stats, ST_KERNELS, one);     // stats.kernels += 1, no object made
*/
#include "speedups.h"

/* The counts in their order: first those the compiled methods add to (the ST_ fields), then
   those only Python code updates. */
static const char *const count_names[] = {
    "nodes", "kernels", "event_waits", "events_recorded", "nodes_retired", "retired_by_poll",
    "prefetches", "bytes_prefetched", "events_queried",
    "calls", "host_accesses", "streams_created", "events_created", "copies_to_device",
    "copies_to_host", "bytes_to_device", "bytes_to_host", "graphs_recorded", "graphs_replayed"};
#define N_COUNTS ((int)(sizeof count_names / sizeof count_names[0]))

typedef struct {
    PyObject_HEAD
    long long count[N_COUNTS];
} CountersBase;

static PyTypeObject *counters_base;     /* (set by counters_init) */
static PyMemberDef count_members[N_COUNTS + 1];

/* The ST_ fields: the first ST_COUNTS counts, then Counters' object slots. */
static const char *const object_names[] = {"streams_used", "edges"};
#define N_STATS (ST_COUNTS + (int)(sizeof object_names / sizeof object_names[0]))
PyObject *stats_attrs[N_STATS];
SlotLayout stats_layout;

static const char *
stat_name(int field)
{
    return field < ST_COUNTS ? count_names[field] : object_names[field - ST_COUNTS];
}

int
count_stat(PyObject *stats, int field, PyObject *amount)
{
    if (field < ST_COUNTS && PyObject_TypeCheck(stats, counters_base)) {
        long long add = amount == one ? 1 : PyLong_AsLongLong(amount);
        if (add == -1 && PyErr_Occurred())
            return -1;
        ((CountersBase *)stats)->count[field] += add;
        return 0;
    }
    return add_at(stats, &stats_layout, field, stats_attrs[field], amount);
}

/* The slots of asyncgpu.core.statistics.Counters: the object fields always, the counts when they
   are slots (a Counters without CountersBase as its base). */
int
stats_configure(PyObject *counters)
{
    for (int i = 0; i < N_STATS; i++)
        if (stats_attrs[i] == NULL && intern(&stats_attrs[i], stat_name(i)) < 0)
            return -1;
    if (!PyType_Check(counters)) {
        PyErr_SetString(PyExc_TypeError, "configure_issue: Counters is not a class");
        return -1;
    }
    int cells = PyType_IsSubtype((PyTypeObject *)counters, counters_base);
    for (int i = cells ? ST_COUNTS : 0; i < N_STATS; i++)
        if ((stats_layout.off[i] = slot_offset((PyTypeObject *)counters, stat_name(i))) < 0)
            return -1;
    Py_INCREF(counters);
    Py_XSETREF(stats_layout.type, (PyTypeObject *)counters);
    return 0;
}

static PyObject *
counters_counts(PyObject *cls, PyObject *unused)
{
    PyObject *names = PyTuple_New(N_COUNTS);
    for (int i = 0; names != NULL && i < N_COUNTS; i++) {
        PyObject *name = PyUnicode_FromString(count_names[i]);
        if (name == NULL)
            Py_CLEAR(names);
        else
            PyTuple_SET_ITEM(names, i, name);
    }
    return names;
}

static PyMethodDef counters_methods[] = {
    {"counts", counters_counts, METH_NOARGS | METH_CLASS,
     "counts(): the names of the counts kept as C integers, in their order."},
    {NULL, NULL, 0, NULL},
};

int
counters_init(PyObject *module)
{
    for (int i = 0; i < N_COUNTS; i++)
        count_members[i] = (PyMemberDef){(char *)count_names[i], T_LONGLONG,
                                         offsetof(CountersBase, count) + i * sizeof(long long),
                                         0, NULL};
    static PyType_Slot slots[] = {
        {Py_tp_members, count_members},
        {Py_tp_methods, counters_methods},
        {Py_tp_doc, "Base of asyncgpu's Counters: its counts as C integers (see "
                    "asyncgpu/csrc/counters.c)."},
        {0, NULL},
    };
    static PyType_Spec spec = {
        "asyncgpu._speedups.CountersBase", sizeof(CountersBase), 0,
        Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE, slots,
    };
    if (add_type(module, "CountersBase", &spec) < 0)
        return -1;
    PyObject *type = PyObject_GetAttrString(module, "CountersBase");
    if (type == NULL)
        return -1;
    counters_base = (PyTypeObject *)type;       /* (the module keeps it alive) */
    Py_DECREF(type);
    return 0;
}
