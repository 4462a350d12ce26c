/* asyncgpu._speedups: what its parts share (see asyncgpu/csrc/module.c). */
#ifndef ASYNCGPU_SPEEDUPS_H
#define ASYNCGPU_SPEEDUPS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include "structmember.h"

/* Where a class's __slots__ attributes live: the offset of each field's slot, for objects of
   exactly ``type`` (found once by layout(); objects of other types are read by name). */
typedef struct {
    PyTypeObject *type;
    Py_ssize_t off[24];
} SlotLayout;

int layout(SlotLayout *l, PyObject *type, const char *const *names, int n);
/* The offset of type's __slots__ attribute name, or -1 with an error set. */
Py_ssize_t slot_offset(PyTypeObject *type, const char *name);

/* New reference to obj's attribute: at its slot offset when obj's exact type is the layout's,
   else through getattr. An unset slot raises AttributeError, as getattr would. */
static inline PyObject *
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

/* Set obj's attribute: at its slot offset when obj's exact type is the layout's, else through
   setattr. */
static inline int
set(PyObject *obj, const SlotLayout *layout, int field, PyObject *name, PyObject *value)
{
    if (layout != NULL && Py_TYPE(obj) == layout->type) {
        PyObject **slot = (PyObject **)((char *)obj + layout->off[field]);
        Py_INCREF(value);
        Py_XSETREF(*slot, value);
        return 0;
    }
    return PyObject_SetAttr(obj, name, value);
}
int truth(PyObject *v);
int less(PyObject *a, PyObject *b);
int less_equal(PyObject *a, PyObject *b);
int intern(PyObject **var, const char *text);

/* An attribute name a part interns once (see intern_all). */
typedef struct {
    PyObject **var;
    const char *text;
} Name;

int intern_all(const Name *names, size_t n);
#define INTERN_ALL(names) intern_all((names), sizeof(names) / sizeof((names)[0]))

/* The items of a list or tuple by index (no iterator object: the launch path walks a few
   short lists per launch; the size is read again at each step, as a list iterator does), or
   of any other iterable through its iterator. */
typedef struct {
    PyObject *seq, *it;
    Py_ssize_t i;
} Items;

static inline int
items_begin(Items *t, PyObject *seq)
{
    t->seq = seq;
    t->i = 0;
    t->it = NULL;
    if (PyList_CheckExact(seq) || PyTuple_CheckExact(seq))
        return 0;
    t->it = PyObject_GetIter(seq);
    return t->it == NULL ? -1 : 0;
}

/* The next item (a new reference), or NULL at the end or on an error (PyErr_Occurred). */
static inline PyObject *
items_next(Items *t)
{
    if (t->it != NULL)
        return PyIter_Next(t->it);
    if (t->i < PySequence_Fast_GET_SIZE(t->seq))
        return Py_NewRef(PySequence_Fast_GET_ITEM(t->seq, t->i++));
    return NULL;
}

static inline void
items_end(Items *t)
{
    Py_CLEAR(t->it);
}

/* fn(item, context) for each item of an iterable, until fn returns non-zero: that value
   (-1: an error is set), or 0 when every item was seen, or -1 if the iteration failed. */
int for_each(PyObject *iterable, int (*fn)(PyObject *item, void *context), void *context);
/* The last item of a non-empty exact list, removed (a new reference; cannot fail). */
PyObject *list_pop_last(PyObject *list);
/* seq.append(item), the method found once per type (a list's directly): 0, or -1 with an
   error set. */
int append_item(PyObject *seq, PyObject *item);

/* 0, 1 and -1, made once (common.c) */
extern PyObject *zero, *one, *minus_one;
int small_ints_init(void);
int add_to(PyObject *obj, PyObject *name, PyObject *amount);
int add_at(PyObject *obj, const SlotLayout *layout, int field, PyObject *name,
           PyObject *amount);
PyObject *call_method(PyObject *obj, PyObject *name, int nargs, ...);
/* lock.acquire() / lock.release() (the runtime's lock): 0, or -1 with an error set */
int lock_acquire(PyObject *lock);
int lock_release(PyObject *lock);
/* Release the lock after work that returned ``result`` (NULL: an error is set, which goes on,
   with a failed release's error raised from it); ``result`` or NULL. */
PyObject *unlocked(PyObject *lock, PyObject *result);

/* Whether objects of ``type`` have no instance dict, which could shadow a method of the
   class: only then may a method the class resolves be called without asking the object. */
static inline int
dictless(PyTypeObject *type)
{
    return type->tp_dictoffset == 0 && !(type->tp_flags & Py_TPFLAGS_MANAGED_DICT);
}

/* A compiled method that the compiled methods call directly, skipping the method call's
   lookups, when that is what the ordinary call would run: the object has no instance dict and
   its class resolves the name to this very method (so a subclass's override, a monkeypatch or
   asyncgpu.core.compiled.use(False) still wins). */
typedef struct {
    PyObject *name;         /* interned */
    PyObject *descr;        /* the method descriptor in the compiled base class */
    PyTypeObject *type;     /* the last class found to resolve name to descr (no reference: */
    unsigned int version;   /* its version tag, which no other class ever has, says it holds) */
} Twin;

int twin(Twin *t, PyObject *module, const char *type_name, const char *method);

static inline int
direct(Twin *t, PyObject *obj)
{
    PyTypeObject *type = Py_TYPE(obj);
#ifdef Py_TPFLAGS_VALID_VERSION_TAG
    /* (CPython gives a class a new version tag, or none, whenever anything in it or in a base
       is set or deleted: an unchanged tag means an unchanged answer) */
    if (type == t->type && type->tp_version_tag == t->version
            && (type->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG))
        return 1;
#endif
    int yes = t->descr != NULL && dictless(type) && _PyType_Lookup(type, t->name) == t->descr;
#ifdef Py_TPFLAGS_VALID_VERSION_TAG
    if (yes && (type->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG)) {
        t->type = type;
        t->version = type->tp_version_tag;
    }
#endif
    return yes;
}

/* obj.<t's method>(*args): its C function called directly when direct(t, obj), else by name
   (at most 7 arguments). */
PyObject *call_twin(Twin *t, PyObject *obj, PyObject *const *args, Py_ssize_t nargs);

/* Calls of compiled methods from other files (each direct when it can be, see Twin). */
PyObject *call_conflicts(PyObject *tracker, PyObject *accesses);
PyObject *call_commit(PyObject *tracker, PyObject *node, PyObject *accesses);
PyObject *call_bind(PyObject *kernel, PyObject *runtime, PyObject *args, PyObject *site);
PyObject *call_choose(PyObject *manager, PyObject *node, PyObject *parents);
PyObject *call_wait_for_parents(PyObject *manager, PyObject *node, PyObject *parents);
PyObject *call_issued(PyObject *manager, PyObject *node, PyObject *recorded);
PyObject *call_poll(PyObject *manager);
int should_poll(PyObject *manager);
PyObject *call_kernel_launch(PyObject *backend, PyObject *const *args);   /* 5 arguments */
PyObject *call_launch(PyObject *backend, PyObject *node, PyObject *stream);
PyObject *call_record(PyObject *backend, PyObject *event, PyObject *stream);
PyObject *call_wait(PyObject *backend, PyObject *stream, PyObject *event);
PyObject *call_event_done(PyObject *backend, PyObject *event);
PyObject *call_graph_launch(PyObject *backend, PyObject *graph, PyObject *stream);
PyObject *call_pointer_values(PyObject *target, PyObject *values, PyObject *arrays);
PyObject *call_numba_values(PyObject *target, PyObject *values);
PyObject *call_before_device(PyObject *memory, PyObject *accesses);
PyObject *call_before_graph(PyObject *memory, PyObject *frozen);
PyObject *call_after_graph(PyObject *memory, PyObject *frozen);
/* frozen.host_current(rt), and _graph_cache.copy_key(allocs) (memory.c) */
PyObject *call_host_current(PyObject *frozen, PyObject *rt);
PyObject *copy_key_of(PyObject *allocs);
/* ``frees`` is Allocation.explicit_frees now: nothing was freed explicitly since it was read,
   so what was then found live still is (1/0/-1; memory.c) */
int no_frees_since(PyObject *frees);
PyObject *call_launch_graph(PyObject *runtime, PyObject *frozen);
PyObject *call_launch_kernel(PyObject *runtime, PyObject *launcher, PyObject *args);

/* An exception put aside while cleanup code calls Python (as a ``finally:`` block does). */
typedef struct {
    PyObject *type, *value, *traceback;
} SavedError;

static inline void
save_error(SavedError *e)
{
#if PY_VERSION_HEX >= 0x030C0000
    e->type = e->traceback = NULL;
    e->value = PyErr_GetRaisedException();
#else
    PyErr_Fetch(&e->type, &e->value, &e->traceback);
#endif
}

static inline void
restore_error(SavedError *e)
{
#if PY_VERSION_HEX >= 0x030C0000
    PyErr_SetRaisedException(e->value);
#else
    PyErr_Restore(e->type, e->value, e->traceback);
#endif
}

/* The saved exception object (borrowed). */
static inline PyObject *
saved_exception(SavedError *e)
{
#if PY_VERSION_HEX < 0x030C0000
    PyErr_NormalizeException(&e->type, &e->value, &e->traceback);
    if (e->traceback != NULL)
        PyException_SetTraceback(e->value, e->traceback);
#endif
    return e->value;
}

/* The saved exception was handled. */
static inline void
forget_error(SavedError *e)
{
    Py_XDECREF(e->type);
    Py_XDECREF(e->value);
    Py_XDECREF(e->traceback);
}

/* The cleanup raised: its exception goes on, with the saved one as its context (what
   Python does for an exception raised inside an ``except`` block). */
void raise_in_cleanup(SavedError *saved);

/* asyncgpu.Array and asyncgpu.runtime.kernel.ArrayArg (set by configure_binding; read by gather.c) */
extern SlotLayout array_layout, arg_layout;
enum { AR_ALLOC, AR_DTYPE, AR_CONTIGUOUS, AR_LO, AR_HI, AR_CACHE, AR_SHAPE, AR_STRIDES };
/* Two Array objects that are the same live view: the same allocation (not freed), byte
   extent, shape, strides and dtype (1/0/-1; binding.c) */
int same_view(PyObject *a, PyObject *b);
enum { G_INDEX, G_PARAM, G_ARRAY, G_READ, G_WRITE, G_KEY, G_ALLOC, G_LO, G_HI, G_LABEL };

/* asyncgpu.runtime.kernel.Kernel and Launcher (set by configure_binding) */
extern SlotLayout kernel_layout, launcher_layout;
enum { K_SLOTS, K_TYPED, K_PARAMS, K_LAUNCHERS, K_NAME, K_ELEMENTWISE };
enum { LN_KERNEL };

/* asyncgpu.core.streams.StreamState (set by configure_streams; read by issue.c) */
extern SlotLayout state_layout;
enum { S_INDEX, S_HANDLE, S_INFLIGHT, S_SEQ, S_WAITED };

/* asyncgpu.core.statistics.Counters (set by configure_issue; updated by issue.c and streams.c;
   counters.c): the counts first (C integers in a CountersBase), then two object slots */
extern SlotLayout stats_layout;
enum { ST_NODES, ST_KERNELS, ST_EVENT_WAITS, ST_EVENTS_RECORDED, ST_NODES_RETIRED,
       ST_RETIRED_BY_POLL, ST_PREFETCHES, ST_BYTES_PREFETCHED, ST_EVENTS_QUERIED, ST_COUNTS,
       ST_STREAMS_USED = ST_COUNTS, ST_EDGES };
/* stats.<field> += amount (a count) */
int count_stat(PyObject *stats, int field, PyObject *amount);
extern PyObject *stats_attrs[];
int stats_configure(PyObject *counters);

/* asyncgpu.recorder.recording.Recording, asyncgpu.runtime.context.Runtime (the recorder's fields) and
   asyncgpu.recorder.keys.Launch (set by configure_recording; read by launcher.c) */
extern SlotLayout rec_layout, rt_layout, deferred_layout;
enum { RC_RUNTIME, RC_TOKEN, RC_NAME, RC_LAUNCHES, RC_SEGMENT, RC_CALLS, RC_OUTCOMES, RC_FROZEN,
       RC_MEMO, RC_PREVIOUS, RC_THREAD, RC_FAILED, RC_EAGER, RC_SPLIT, RC_CUT };
enum { RT_RECORDING, RT_GRAPHS, RT_GRAPH_CONFIG, RT_MEMORY, RT_LOCK };
enum { LA_LAUNCHER, LA_ARGS };
/* The process's runtime (asyncgpu.runtime.current._runtime), borrowed; NULL with no error set when
   there is none yet (or configure has not run), NULL with an error set on failure. */
PyObject *current_runtime(void);

/* each part: its types added to the module, its strings interned */
int launcher_init(PyObject *module);
int tracker_init(PyObject *module);
int binding_init(PyObject *module);
int gather_init(PyObject *module);
int issue_init(PyObject *module);
int device_init(PyObject *module);
int streams_init(PyObject *module);
int memory_init(PyObject *module);
int driver_init(PyObject *module);
int recording_init(PyObject *module);
int graph_call_init(PyObject *module);
int counters_init(PyObject *module);
/* frozen.graph.destroyed, for a FrozenGraph (recording.c): 1/0, or -1 with an error set */
int frozen_destroyed(PyObject *frozen);
int graph_call_configure(PyObject *recording, PyObject *python_call, PyObject *replay_static);
int add_type(PyObject *module, const char *name, PyType_Spec *spec);

/* the configure functions of the parts (module-level) */
PyObject *configure(PyObject *module, PyObject *args);
PyObject *configure_tracker(PyObject *module, PyObject *args);
PyObject *configure_binding(PyObject *module, PyObject *args);
PyObject *configure_issue(PyObject *module, PyObject *args);
PyObject *configure_device(PyObject *module, PyObject *args);
PyObject *configure_backend(PyObject *module, PyObject *args);
PyObject *configure_streams(PyObject *module, PyObject *args);
PyObject *configure_memory(PyObject *module, PyObject *args);
PyObject *configure_frozen(PyObject *module, PyObject *frozen);
PyObject *configure_recording(PyObject *module, PyObject *args);

#endif
