/* asyncgpu._speedups, recording.c: a recording made, and the end of a recorded segment that
repeated its previous run, compiled.

The model
---------
``Recording.__init__`` sets the recording's fields and remembers its first segment's previous
run (``Recording._remember``). A recorded function's call ends each segment with ``Recording.end_segment`` (see
asyncgpu/recorder/recording.py). In the steady state every launch of the segment was the previous
run's (``Recording.previous``, appended by launcher.c without keying), so the segment's key is
the memo's, and ``replay_remembered`` (asyncgpu/recorder/finish.py) launches again the graph
that run replayed, after checking that nothing it relies on moved: the memo is still the
cache's, its key still holds the same graphs, the graph lives, and the host-current inputs are
the ones it copies in. That is a dozen attribute and dictionary steps in two Python frames per
call of a recorded function; here it is one C method. Anything else (a launch not remembered,
a key seen for the first time, another variant due) goes to the same Python ``finish``.

A steady memo's segment ends at its last launch, before the host operation: launcher.c calls
``Recording.repeated``, here too, which ends the segment under the runtime's lock.

``Recording._remember`` is here too (the previous run the next launches are matched against,
with ``LaunchMemo.usable``'s common case, no allocation freed since it last looked, inline), and
the variant check asks ``FrozenGraph.host_current`` and keys the variant in C (memory.c), so a
remembered replay runs no Python of asyncgpu's. Also here: the hash of ``RecordingKey``, which
the cache's dictionaries ask on every lookup; it was computed once, at construction, and a C
``tp_hash`` returns it without a Python frame.

Invariants: the same outcome, graph, cache order and side effects as
``_recorder.PythonRecording`` (the reference); ``rt.recording`` is restored on
every way out when the recording goes on. tests/test_recorder_compiled.py compares the two.

Example: ``asyncgpu.core.compiled.use(False)`` puts the Python methods back.
*/
#include "speedups.h"
#include "pythread.h"

static SlotLayout memo_layout, key_layout, frozen_layout;
SlotLayout rec_layout, rt_layout, deferred_layout;       /* (launcher.c reads them too) */
enum { M_REPLAYED, M_KEY, M_LAUNCHES, M_FREES, M_STEADY };
enum { K_PARTS, K_HASH };
enum { F_GRAPH, F_COPY_IN };
/* The globals of asyncgpu.recorder.recording, where end_segment finds ``finish`` and
   ``replay_remembered`` at each call (so a patched one is the one called), and the Python
   replay_remembered, which this file's stands for while it is the one there. */
static PyObject *recorder_globals, *python_replay_remembered;
static PyObject *s_runtime, *s_token, *s_name, *s_launches, *s_segment, *s_calls, *s_outcomes,
    *s_frozen, *s_memo, *s_previous, *s_replayed, *s_key, *s_parts, *s_hash, *s_graph,
    *s_copy_in, *s_recording, *s_graphs, *s_graph_config, *s_memory, *s_destroyed,
    *s_entries, *s_move_to_end, *s_get, *s_finish,
    *s_replay_remembered, *s_thread, *s_failed, *s_eager, *s_split, *s_frees, *s_steady,
    *s_cut, *s_lock, *s_usable, *empty_tuple;
static Twin t_remember, t_end_segment;

#define REC(o, f, n) get((o), &rec_layout, (f), (n))
#define RTA(o, f, n) get((o), &rt_layout, (f), (n))

/* d.get(key): a new reference (None when missing), or NULL with an error set */
static PyObject *
lookup(PyObject *d, PyObject *key)
{
    if (!PyDict_Check(d))       /* (the cache's are OrderedDicts) */
        return call_method(d, s_get, 1, key);
    PyObject *v = PyDict_GetItemWithError(d, key);
    if (v == NULL && PyErr_Occurred())
        return NULL;
    return Py_NewRef(v != NULL ? v : Py_None);
}

/* frozen.graph.destroyed (evicted from the cache): 1/0, or -1 with an error set */
int
frozen_destroyed(PyObject *frozen)
{
    PyObject *graph = get(frozen, &frozen_layout, F_GRAPH, s_graph), *destroyed = NULL;
    int t = graph == NULL || (destroyed = PyObject_GetAttr(graph, s_destroyed)) == NULL
        ? -1 : truth(destroyed);
    Py_XDECREF(graph);
    Py_XDECREF(destroyed);
    return t;
}

/* replay_remembered(rt, token, memo): the graph launched again (new reference), None when
   finish must decide, NULL on error. */
static PyObject *
replay_remembered(PyObject *rt, PyObject *token, PyObject *memo)
{
    PyObject *replayed = NULL, *key = NULL, *parts = NULL, *config = NULL, *cache = NULL,
        *memos = NULL, *entries = NULL, *memory = NULL,
        *current = NULL, *copy_in = NULL, *r = NULL, *result = NULL;
    PyObject *variants, *frozen;
    int t;
    if ((replayed = get(memo, &memo_layout, M_REPLAYED, s_replayed)) == NULL)
        return NULL;
    if (replayed == Py_None)
        goto none;
    if (!PyTuple_CheckExact(replayed) || PyTuple_GET_SIZE(replayed) != 2) {
        PyErr_SetString(PyExc_TypeError, "LaunchMemo.replayed must be (variants, frozen)");
        goto done;
    }
    variants = PyTuple_GET_ITEM(replayed, 0);
    frozen = PyTuple_GET_ITEM(replayed, 1);
    if ((key = get(memo, &memo_layout, M_KEY, s_key)) == NULL
            || (parts = get(key, &key_layout, K_PARTS, s_parts)) == NULL
            || (config = RTA(rt, RT_GRAPH_CONFIG, s_graph_config)) == NULL)
        goto done;
    if (!PyTuple_Check(parts) || PyTuple_GET_SIZE(parts) < 1) {
        PyErr_SetString(PyExc_TypeError, "RecordingKey.parts must be a tuple");
        goto done;
    }
    if ((t = PyObject_RichCompareBool(PyTuple_GET_ITEM(parts, 0), config, Py_NE)) != 0) {
        if (t > 0)
            goto none;
        goto done;
    }
    if ((cache = RTA(rt, RT_GRAPHS, s_graphs)) == NULL)
        goto done;
    if (cache == Py_None)
        goto none;
    if ((memos = PyObject_GetAttr(cache, s_memo)) == NULL)
        goto done;
    PyObject *m = lookup(memos, token);
    if (m == NULL)
        goto done;
    Py_DECREF(m);       /* (compared by identity only) */
    if (m != memo)
        goto none;
    if ((t = frozen_destroyed(frozen)) < 0)
        goto done;
    if (t)
        goto none;
    if ((entries = PyObject_GetAttr(cache, s_entries)) == NULL)
        goto done;
    PyObject *e = lookup(entries, key);
    if (e == NULL)
        goto done;
    Py_DECREF(e);
    if (e != variants)
        goto none;
    if ((memory = RTA(rt, RT_MEMORY, s_memory)) == NULL)
        goto done;
    if (memory != Py_None) {
        if ((current = call_host_current(frozen, rt)) == NULL
                || (copy_in = get(frozen, &frozen_layout, F_COPY_IN, s_copy_in)) == NULL
                || (t = PyObject_RichCompareBool(current, copy_in, Py_NE)) < 0)
            goto done;
        if (t)
            goto none;      /* another variant (or a new capture) is due */
    }
    if ((r = call_method(memos, s_move_to_end, 1, token)) == NULL)
        goto done;
    Py_SETREF(r, call_method(entries, s_move_to_end, 1, key));
    if (r == NULL)
        goto done;
    Py_ssize_t n = PyObject_Size(variants);
    if (n < 0)
        goto done;
    if (n > 1) {
        PyObject *ck;
        if (copy_in == NULL && (copy_in = get(frozen, &frozen_layout, F_COPY_IN, s_copy_in))
                == NULL)
            goto done;
        if ((ck = copy_key_of(copy_in)) == NULL)
            goto done;
        Py_SETREF(r, call_method(variants, s_move_to_end, 1, ck));
        Py_DECREF(ck);
        if (r == NULL)
            goto done;
    }
    Py_SETREF(r, call_launch_graph(rt, frozen));
    if (r == NULL)
        goto done;
    result = Py_NewRef(frozen);
    goto done;
none:
    result = Py_NewRef(Py_None);
done:
    Py_XDECREF(replayed);
    Py_XDECREF(key);
    Py_XDECREF(parts);
    Py_XDECREF(config);
    Py_XDECREF(cache);
    Py_XDECREF(memos);
    Py_XDECREF(entries);
    Py_XDECREF(memory);
    Py_XDECREF(current);
    Py_XDECREF(copy_in);
    Py_XDECREF(r);
    return result;
}

/* every launch is the previous run's (identity), as many as before: 1/0 */
static int
all_remembered(PyObject *launches, PyObject *previous)
{
    if (!PyList_CheckExact(launches) || !PyList_CheckExact(previous)
            || PyList_GET_SIZE(launches) != PyList_GET_SIZE(previous))
        return 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(launches); i++)
        if (PyList_GET_ITEM(launches, i) != PyList_GET_ITEM(previous, i))
            return 0;
    return 1;
}

/* The segment's outcome and graph: (outcome, frozen) as new references, or -1. */
static int
finish_segment(PyObject *self, PyObject *rt, PyObject *token, PyObject *launches,
               PyObject *memo, PyObject **outcome, PyObject **frozen)
{
    *outcome = *frozen = NULL;
    if (memo != Py_None) {
        PyObject *replay = PyDict_GetItemWithError(recorder_globals, s_replay_remembered);
        if (replay == NULL) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_NameError, "replay_remembered");
            return -1;
        }
        if (replay == python_replay_remembered) {
            *frozen = replay_remembered(rt, token, memo);
        } else {
            PyObject *call[] = {rt, token, memo};
            *frozen = PyObject_Vectorcall(replay, call, 3, NULL);
        }
        if (*frozen == NULL)
            return -1;
        if (*frozen != Py_None) {
            *outcome = Py_NewRef(s_replayed);      /* (the outcome's name) */
            return 0;
        }
        Py_CLEAR(*frozen);
    }
    PyObject *finish = PyDict_GetItemWithError(recorder_globals, s_finish), *name, *pair;
    if (finish == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_NameError, "finish");
        return -1;
    }
    if ((name = REC(self, RC_NAME, s_name)) == NULL)
        return -1;
    PyObject *call[] = {rt, token, name, launches, memo};
    pair = PyObject_Vectorcall(finish, call, 5, NULL);
    Py_DECREF(name);
    if (pair == NULL)
        return -1;
    if (!PyTuple_CheckExact(pair) || PyTuple_GET_SIZE(pair) != 2) {
        Py_DECREF(pair);
        PyErr_SetString(PyExc_TypeError, "finish must return (outcome, frozen)");
        return -1;
    }
    *outcome = Py_NewRef(PyTuple_GET_ITEM(pair, 0));
    *frozen = Py_NewRef(PyTuple_GET_ITEM(pair, 1));
    Py_DECREF(pair);
    return 0;
}

static PyObject *
recording_end_segment(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                      PyObject *kwnames)
{
    PyObject *last_obj = Py_False;
    if (nargs > 1 || (kwnames != NULL && (PyTuple_GET_SIZE(kwnames) != 1 || nargs != 0
            || PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, 0), "last") != 0))) {
        PyErr_SetString(PyExc_TypeError, "end_segment(last=False)");
        return NULL;
    }
    if (nargs == 1 || kwnames != NULL)
        last_obj = args[0];
    int last = truth(last_obj);
    if (last < 0)
        return NULL;
    PyObject *launches = REC(self, RC_LAUNCHES, s_launches), *rt = NULL, *fresh = NULL,
        *previous = NULL, *memo = NULL, *token = NULL, *seg = NULL, *outcome = NULL,
        *frozen = NULL, *r = NULL, *list = NULL, *cache = NULL, *memos = NULL, *next = NULL,
        *result = NULL;
    if (launches == NULL)
        return NULL;
    int t = truth(launches);
    if (t <= 0) {
        Py_DECREF(launches);
        return t < 0 ? NULL : Py_NewRef(Py_None);
    }
    if ((rt = REC(self, RC_RUNTIME, s_runtime)) == NULL || (fresh = PyList_New(0)) == NULL
            || set(self, &rec_layout, RC_LAUNCHES, s_launches, fresh) < 0
            || (previous = REC(self, RC_PREVIOUS, s_previous)) == NULL)
        goto done;
    if (all_remembered(launches, previous)) {
        if ((memo = REC(self, RC_MEMO, s_memo)) == NULL
                || (memo != Py_None && set(memo, &memo_layout, M_STEADY, s_steady, Py_True) < 0))
            goto done;
    } else {
        memo = Py_NewRef(Py_None);
    }
    PyObject *tok = REC(self, RC_TOKEN, s_token);
    if (tok == NULL || (seg = REC(self, RC_SEGMENT, s_segment)) == NULL) {
        Py_XDECREF(tok);
        goto done;
    }
    token = PyTuple_Pack(2, tok, seg);
    Py_DECREF(tok);
    if (token == NULL || set(rt, &rt_layout, RT_RECORDING, s_recording, Py_None) < 0)
        goto done;
    int rc = finish_segment(self, rt, token, launches, memo, &outcome, &frozen);
    if (!last) {        /* (the finally: the recording goes on, whatever happened) */
        SavedError saved;
        if (rc < 0)
            save_error(&saved);
        int s = set(rt, &rt_layout, RT_RECORDING, s_recording, self);
        if (rc < 0) {
            if (s < 0)
                raise_in_cleanup(&saved);
            else
                restore_error(&saved);
        } else if (s < 0) {
            rc = -1;
        }
    }
    if (rc < 0
            || add_at(self, &rec_layout, RC_SEGMENT, s_segment, one) < 0
            || set(self, &rec_layout, RC_CALLS, s_calls, zero) < 0)
        goto done;
    if (!last) {
        PyObject *tok2 = REC(self, RC_TOKEN, s_token), *seg2 = REC(self, RC_SEGMENT, s_segment);
        if (tok2 != NULL && seg2 != NULL)
            next = PyTuple_Pack(2, tok2, seg2);
        Py_XDECREF(tok2);
        Py_XDECREF(seg2);
        if (next == NULL || (cache = RTA(rt, RT_GRAPHS, s_graphs)) == NULL
                || (memos = PyObject_GetAttr(cache, s_memo)) == NULL)
            goto done;
        PyObject *m = lookup(memos, next);
        if (m == NULL)
            goto done;
        r = call_twin(&t_remember, self, &m, 1);
        Py_DECREF(m);
        if (r == NULL)
            goto done;
    }
    if ((list = REC(self, RC_OUTCOMES, s_outcomes)) == NULL
            || PyList_Append(list, outcome) < 0)
        goto done;
    Py_CLEAR(list);
    if ((list = REC(self, RC_FROZEN, s_frozen)) == NULL || PyList_Append(list, frozen) < 0)
        goto done;
    result = Py_NewRef(Py_None);
done:
    Py_DECREF(launches);
    Py_XDECREF(rt);
    Py_XDECREF(fresh);
    Py_XDECREF(previous);
    Py_XDECREF(memo);
    Py_XDECREF(token);
    Py_XDECREF(seg);
    Py_XDECREF(outcome);
    Py_XDECREF(frozen);
    Py_XDECREF(r);
    Py_XDECREF(list);
    Py_XDECREF(cache);
    Py_XDECREF(memos);
    Py_XDECREF(next);
    return result;
}

/* ---- Recording.__init__ and _remember ------------------------------------------------------ */

/* memo.usable(), with its common case here: no allocation freed explicitly since it was last
   found usable. 1/0, or -1 with an error set. */
static int
memo_usable(PyObject *memo)
{
    PyObject *frees = get(memo, &memo_layout, M_FREES, s_frees);
    int same = frees == NULL ? -1 : no_frees_since(frees);
    Py_XDECREF(frees);
    if (same != 0)
        return same;
    PyObject *r = PyObject_CallMethodNoArgs(memo, s_usable);
    if (r == NULL)
        return -1;
    int t = truth(r);
    Py_DECREF(r);
    return t;
}

/* _remember(memo): the segment's previous run, which its launches are matched against
   (memo.launches while memo is a LaunchMemo none of whose arrays was freed; else none). */
static PyObject *
recording_remember(PyObject *self, PyObject *memo)
{
    PyObject *previous = NULL;
    int t = memo == Py_None ? 0 : memo_usable(memo);
    if (t < 0 || (t && (previous = get(memo, &memo_layout, M_LAUNCHES, s_launches)) == NULL))
        return NULL;
    int rc = set(self, &rec_layout, RC_MEMO, s_memo, t ? memo : Py_None) < 0
        || set(self, &rec_layout, RC_PREVIOUS, s_previous, t ? previous : empty_tuple) < 0;
    Py_XDECREF(previous);
    return rc ? NULL : Py_NewRef(Py_None);
}

static int
recording_new_init(PyObject *self, PyObject *args, PyObject *kwargs)
{
    PyObject *rt, *token, *name, *split, *cache = NULL, *memos = NULL, *key = NULL, *m = NULL,
        *r = NULL;
    if ((kwargs != NULL && PyDict_GET_SIZE(kwargs) != 0) || !PyTuple_CheckExact(args)
            || PyTuple_GET_SIZE(args) != 4) {
        PyErr_SetString(PyExc_TypeError, "Recording(runtime, token, name, split)");
        return -1;
    }
    rt = PyTuple_GET_ITEM(args, 0);
    token = PyTuple_GET_ITEM(args, 1);
    name = PyTuple_GET_ITEM(args, 2);
    split = PyTuple_GET_ITEM(args, 3);
    PyObject *thread = PyLong_FromUnsignedLong(PyThread_get_thread_ident());
    PyObject *launches = PyList_New(0), *outcomes = PyList_New(0), *frozen = PyList_New(0);
    int rc = -1;
    if (thread == NULL || launches == NULL || outcomes == NULL || frozen == NULL)
        goto done;
    struct { int field; PyObject *name, *value; } fields[] = {
        {RC_RUNTIME, s_runtime, rt}, {RC_TOKEN, s_token, token}, {RC_NAME, s_name, name},
        {RC_THREAD, s_thread, thread}, {RC_LAUNCHES, s_launches, launches},
        {RC_FAILED, s_failed, Py_False}, {RC_EAGER, s_eager, Py_False},
        {RC_SPLIT, s_split, split},
        {RC_SEGMENT, s_segment, zero}, {RC_CALLS, s_calls, zero},
        {RC_OUTCOMES, s_outcomes, outcomes}, {RC_FROZEN, s_frozen, frozen},
        {RC_MEMO, s_memo, Py_None}, {RC_PREVIOUS, s_previous, empty_tuple},
        {RC_CUT, s_cut, Py_None},
    };
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        if (set(self, &rec_layout, fields[i].field, fields[i].name, fields[i].value) < 0)
            goto done;
    }
    if ((cache = RTA(rt, RT_GRAPHS, s_graphs)) == NULL)
        goto done;
    if (cache != Py_None) {
        if ((memos = PyObject_GetAttr(cache, s_memo)) == NULL
                || (key = PyTuple_Pack(2, token, zero)) == NULL
                || (m = lookup(memos, key)) == NULL
                || (r = call_twin(&t_remember, self, &m, 1)) == NULL)
            goto done;
    }
    rc = 0;
done:
    Py_XDECREF(thread);
    Py_XDECREF(launches);
    Py_XDECREF(outcomes);
    Py_XDECREF(frozen);
    Py_XDECREF(cache);
    Py_XDECREF(memos);
    Py_XDECREF(key);
    Py_XDECREF(m);
    Py_XDECREF(r);
    return rc;
}

/* repeated(): every launch of the segment's previous run came again (launcher.c calls this on
   the last one): if that memo is steady, end the segment here, under the runtime's lock, and
   keep the memo as ``cut`` (PythonRecording.repeated). */
static PyObject *
recording_repeated(PyObject *self, PyObject *unused)
{
    PyObject *memo = REC(self, RC_MEMO, s_memo), *steady = NULL, *rt = NULL, *lock = NULL,
        *cur = NULL, *r = NULL, *result = NULL;
    if (memo == NULL)
        return NULL;
    int t = memo == Py_None ? 0
        : (steady = get(memo, &memo_layout, M_STEADY, s_steady)) == NULL ? -1 : truth(steady);
    if (t <= 0) {
        if (t == 0)
            result = Py_NewRef(Py_None);
        goto done;
    }
    if ((rt = REC(self, RC_RUNTIME, s_runtime)) == NULL
            || (lock = RTA(rt, RT_LOCK, s_lock)) == NULL || lock_acquire(lock) < 0)
        goto done;
    if ((cur = RTA(rt, RT_RECORDING, s_recording)) != NULL) {
        if (cur != self)
            result = Py_NewRef(Py_None);
        else if ((r = call_twin(&t_end_segment, self, NULL, 0)) != NULL
                 && set(self, &rec_layout, RC_CUT, s_cut, memo) == 0)
            result = Py_NewRef(Py_None);
    }
    result = unlocked(lock, result);
done:
    Py_DECREF(memo);
    Py_XDECREF(steady);
    Py_XDECREF(rt);
    Py_XDECREF(lock);
    Py_XDECREF(cur);
    Py_XDECREF(r);
    return result;
}

static PyMethodDef recording_methods[] = {
    {"repeated", recording_repeated, METH_NOARGS,
     "repeated(): end the segment at a steady memo's last launch (called by the launcher)."},
    {"end_segment", (PyCFunction)(void (*)(void))recording_end_segment,
     METH_FASTCALL | METH_KEYWORDS,
     "end_segment(last=False): finish the launches deferred so far (issue, capture or replay)."},
    {"_remember", recording_remember, METH_O,
     "_remember(memo): match the next launches against memo's (a usable LaunchMemo) or none."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot recording_slots[] = {
    {Py_tp_methods, recording_methods},
    {Py_tp_init, recording_new_init},
    {Py_tp_doc, "Base of asyncgpu's Recording: __init__, end_segment, _remember and repeated, "
                "compiled."},
    {0, NULL},
};

static PyType_Spec recording_spec = {
    "asyncgpu._speedups.RecordingBase", sizeof(PyObject), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE, recording_slots,
};

/* RecordingKey's hash: the one computed at construction (the ``hash`` slot). */
static Py_hash_t
key_hash(PyObject *self)
{
    PyObject *h = get(self, &key_layout, K_HASH, s_hash);
    if (h == NULL)
        return -1;
    Py_hash_t v = PyLong_AsSsize_t(h);
    Py_DECREF(h);
    if (v == -1 && !PyErr_Occurred())
        v = -2;         /* (-1 means an error; hash() never gives it) */
    return v;
}

static PyType_Slot key_slots[] = {
    {Py_tp_hash, key_hash},
    {Py_tp_doc, "Base of asyncgpu's RecordingKey: its stored hash, compiled."},
    {0, NULL},
};

static PyType_Spec key_spec = {
    "asyncgpu._speedups.KeyBase", sizeof(PyObject), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE, key_slots,
};

PyObject *
configure_recording(PyObject *module, PyObject *args)
{
    PyObject *recording, *memo, *key, *frozen, *runtime, *launch, *globals, *replay,
        *graph_call_python, *replay_static;
    static const char *const rec_names[] = {"runtime", "token", "name", "launches", "segment",
                                            "calls", "outcomes", "frozen", "memo", "previous",
                                            "thread", "failed", "eager", "split", "cut"};
    static const char *const launch_names[] = {"launcher", "args"};
    static const char *const memo_names[] = {"replayed", "key", "launches", "frees", "steady"};
    static const char *const key_names[] = {"parts", "hash"};
    static const char *const frozen_names[] = {"graph", "copy_in"};
    static const char *const rt_names[] = {"recording", "graphs", "graph_config", "memory",
                                           "_lock"};
    if (!PyArg_ParseTuple(args, "OOOOOOO!OOO:configure_recording", &recording, &memo, &key,
                          &frozen, &runtime, &launch, &PyDict_Type, &globals, &replay,
                          &graph_call_python, &replay_static)
            || layout(&rec_layout, recording, rec_names, 15) < 0
            || layout(&deferred_layout, launch, launch_names, 2) < 0
            || layout(&memo_layout, memo, memo_names, 5) < 0
            || layout(&key_layout, key, key_names, 2) < 0
            || layout(&frozen_layout, frozen, frozen_names, 2) < 0
            || layout(&rt_layout, runtime, rt_names, 5) < 0)
        return NULL;
    Py_XSETREF(recorder_globals, Py_NewRef(globals));
    Py_XSETREF(python_replay_remembered, Py_NewRef(replay));
    if (graph_call_configure(recording, graph_call_python, replay_static) < 0)
        return NULL;
    Py_RETURN_NONE;
}

int
recording_init(PyObject *module)
{
    static const Name names[] = {
        {&s_runtime, "runtime"}, {&s_token, "token"}, {&s_name, "name"},
        {&s_launches, "launches"}, {&s_segment, "segment"}, {&s_calls, "calls"},
        {&s_outcomes, "outcomes"}, {&s_frozen, "frozen"}, {&s_memo, "memo"},
        {&s_previous, "previous"}, {&s_replayed, "replayed"}, {&s_key, "key"},
        {&s_parts, "parts"}, {&s_hash, "hash"}, {&s_graph, "graph"}, {&s_copy_in, "copy_in"},
        {&s_recording, "recording"}, {&s_graphs, "graphs"}, {&s_graph_config, "graph_config"},
        {&s_memory, "memory"}, {&s_destroyed, "destroyed"}, {&s_entries, "entries"},
        {&s_move_to_end, "move_to_end"}, {&s_get, "get"},
        {&s_finish, "finish"},
        {&s_replay_remembered, "replay_remembered"}, {&s_thread, "thread"},
        {&s_failed, "failed"}, {&s_eager, "eager"}, {&s_split, "split"}, {&s_frees, "frees"},
        {&s_steady, "steady"}, {&s_cut, "cut"}, {&s_lock, "_lock"},
        {&s_usable, "usable"},
    };
    if (INTERN_ALL(names) < 0 || (empty_tuple = PyTuple_New(0)) == NULL
            || add_type(module, "RecordingBase", &recording_spec) < 0
            || add_type(module, "KeyBase", &key_spec) < 0
            || twin(&t_remember, module, "RecordingBase", "_remember") < 0
            || twin(&t_end_segment, module, "RecordingBase", "end_segment") < 0)
        return -1;
    return 0;
}
