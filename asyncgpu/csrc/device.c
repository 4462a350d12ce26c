/* asyncgpu._speedups, device.c: the cuda backend's calls of every launch, compiled.

The model
---------
Each launch on the ``cuda`` backend enters small Python methods that only check and forward:
``CudaBackend.kernel_launch`` (the launcher's prepared target and the values it packs, when
the launcher was launched before with arguments of the same kinds), ``CudaBackend.launch``
(the capture tracker, the recent-launch ring, the launch object), ``CudaBackend.record``,
``wait`` and ``event_done`` (the completion event, the event wait and the poll, through
CuPy's ``cudaEventRecord``, ``cudaStreamWaitEvent`` and ``cudaEventQuery``),
``CudaBackend.graph_launch`` (a replayed graph's checks, ``cudaGraphLaunch`` and its completion
event), and the packed launch object's call (``PackedLaunch.__call__``: the parameters packed
into the plan's buffer, then CuPy's ``cuLaunchKernel``). Here each is a C method that makes
the same calls with the same arguments (``asyncgpu/backends/cuda/backend.py``'s ``PythonDeviceCalls``
and ``_cuda_kernels.py``'s ``PythonPackedCall`` are the references). A caller in C
(``issue.c``) then reaches the CUDA call without a Python frame on the way.

Invariants
----------
* Errors go where the Python twins send them: a CUDA error of ``record`` or ``wait`` becomes
  ``CudaBackend._device_error(exc)``, raised with ``exc`` as its context; a failed launch goes
  to ``CudaBackend._launch_failed``, which raises or launches again.
* A graph launch whose checks have anything to look at (another class, a destroyed graph,
  an array freed since, an open capture) calls ``check_launch``, which decides and raises.
* A plan with complex parameters (to be split into two floats) takes the Python call; a
  launcher without a target for this backend, or whose arrays' values are not cached yet,
  takes ``make_launch`` (which compiles, checks and caches).

Example: ``asyncgpu.core.compiled.use(False)`` puts the Python methods back.
*/
#include "speedups.h"
#include <math.h>
#include <stdint.h>
#include <string.h>

static SlotLayout launch_layout, target_layout, plan_layout, backend_layout, captures_layout,
    graph_layout;
enum { B_CAPTURES, B_RECENT, B_EVENT_RECORD, B_STREAM_WAIT, B_GRAPHS_IN_FLIGHT, B_EVENT_DONE,
       B_GRAPH_LAUNCH };
enum { GR_HANDLE, GR_DONE, GR_LAUNCHED, GR_DESTROYED, GR_FREES };
/* Set by configure_backend(): the Python functions the graph launch calls in their rare
   cases. */
static PyObject *check_launch, *forget_finished;
static Py_ssize_t graphs_kept;      /* backends/_cuda.py's GRAPHS_KEPT */
enum { PL_TARGET, PL_VALUES };
enum { T_PLAN, T_GRID, T_BLOCK, T_SHARED, T_BACKEND, T_KEY };
enum { P_HANDLE, P_STRUCT, P_BUF, P_EXTRA_PTR, P_SPLITS, P_LAUNCH_FN, P_LAYOUT, P_BUF_PTR };
static PyObject *python_packed_call;       /* PythonPackedCall.__call__ */
static PyObject *python_make_launch;       /* asyncgpu.backends.cuda.kernels.make_launch */
static PyObject *s_target, *s_values, *s_plan, *s_grid, *s_block, *s_shared, *s_handle,
    *s_struct, *s_buf, *s_extra_ptr, *s_splits, *s_launch_fn, *s_pack_into, *s_ptr,
    *s_captures, *s_engaged, *s_record, *s_wait, *s_launch, *s_recent,
    *s_launch_attr, *s_launch_failed, *s_event_record, *s_stream_wait, *s_device_error,
    *s_check_host_wait, *s_event_query, *s_done, *s_prepared, *s_backend, *s_key,
    *s_destroyed, *s_frees, *s_launched,
    *s_graphs_in_flight, *s_event_done_attr, *s_graph_launch, *s_layout, *s_buf_ptr;

static Twin t_kernel_launch, t_launch, t_record, t_wait, t_event_done, t_graph_launch;

/* ---- PackedLaunch.__call__ ---------------------------------------------------------------- */

/* plan.struct.pack_into(plan.buf, 0, *values) */
static int
pack(PyObject *plan, PyObject *values)
{
    PyObject *st = get(plan, &plan_layout, P_STRUCT, s_struct), *buf = NULL, *r = NULL;
    PyObject *small[24], **stack = small;
    Py_ssize_t n = PyTuple_GET_SIZE(values);
    if (st == NULL || (buf = get(plan, &plan_layout, P_BUF, s_buf)) == NULL)
        goto done;
    if (n + 4 > (Py_ssize_t)(sizeof small / sizeof small[0])
            && (stack = PyMem_Malloc((size_t)(n + 4) * sizeof(PyObject *))) == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    stack[1] = st;          /* stack[0]: free for the callee (ARGUMENTS_OFFSET) */
    stack[2] = buf;
    stack[3] = zero;
    for (Py_ssize_t i = 0; i < n; i++)
        stack[4 + i] = PyTuple_GET_ITEM(values, i);
    r = PyObject_VectorcallMethod(s_pack_into, stack + 1,
                                  (size_t)(n + 3) | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
done:
    if (stack != small)
        PyMem_Free(stack);
    Py_XDECREF(st);
    Py_XDECREF(buf);
    Py_XDECREF(r);
    return r == NULL ? -1 : 0;
}

/* Pack one value at dst by its struct code, converting it as struct does (a float through
   __float__, an integer through __index__, so NumPy scalars too): 1 done, 0 not (no such
   conversion, out of range: struct decides and raises). */
static int
pack_one(char code, PyObject *v, char *dst)
{
    if (code == 'f' || code == 'd') {
        double x = PyFloat_CheckExact(v) ? PyFloat_AS_DOUBLE(v) : PyFloat_AsDouble(v);
        if (x == -1.0 && PyErr_Occurred()) {
            PyErr_Clear();
            return 0;
        }
        if (code == 'd') {
            memcpy(dst, &x, sizeof x);
            return 1;
        }
        float y = (float)x;
        if (isinf(y) && !isinf(x))
            return 0;
        memcpy(dst, &y, sizeof y);
        return 1;
    }
    PyObject *index = NULL;
    if (!PyLong_CheckExact(v)) {
        if (Py_TYPE(v)->tp_as_number == NULL || Py_TYPE(v)->tp_as_number->nb_index == NULL)
            return 0;
        if ((index = PyNumber_Index(v)) == NULL) {
            PyErr_Clear();
            return 0;
        }
        v = index;
    }
    int ok = 1, overflow = 0;
    long long x = 0;
    unsigned long long u = 0;
    if (code == 'Q') {
        u = PyLong_AsUnsignedLongLong(v);
        if (u == (unsigned long long)-1 && PyErr_Occurred())
            ok = 0;
    } else {
        x = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (overflow || (x == -1 && PyErr_Occurred()))
            ok = 0;
    }
    Py_XDECREF(index);
    if (!ok) {
        PyErr_Clear();
        return 0;
    }
#define PUT(type, lo, hi)                                                   \
    do {                                                                    \
        if (x < (lo) || x > (hi))                                           \
            return 0;                                                       \
        type y = (type)x;                                                   \
        memcpy(dst, &y, sizeof y);                                          \
        return 1;                                                           \
    } while (0)
    switch (code) {
    case 'Q':
        memcpy(dst, &u, sizeof u);
        return 1;
    case 'q':
        memcpy(dst, &x, sizeof x);
        return 1;
    case 'i': PUT(int32_t, INT32_MIN, INT32_MAX);
    case 'I': PUT(uint32_t, 0, UINT32_MAX);
    case 'h': PUT(int16_t, INT16_MIN, INT16_MAX);
    case 'H': PUT(uint16_t, 0, UINT16_MAX);
    case 'b': PUT(int8_t, INT8_MIN, INT8_MAX);
    case 'B': PUT(uint8_t, 0, UINT8_MAX);
    }
#undef PUT
    return 0;
}

/* Pack values into the plan's buffer through its layout (_packed.value_layout: per value a
   code byte, padding, a native 32-bit offset), or through plan.struct.pack_into wherever the
   layout does not apply; the bytes are the same either way. 0, or -1 with an error set. */
static int
pack_values(PyObject *plan, PyObject *values)
{
    PyObject *layout = get(plan, &plan_layout, P_LAYOUT, s_layout), *at = NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(values), i = 0;
    char *buf = NULL;
    if (layout == NULL)
        return -1;
    if (PyBytes_CheckExact(layout) && PyBytes_GET_SIZE(layout) == 8 * n) {
        if ((at = get(plan, &plan_layout, P_BUF_PTR, s_buf_ptr)) == NULL) {
            Py_DECREF(layout);
            return -1;
        }
        if (PyLong_CheckExact(at) && (buf = PyLong_AsVoidPtr(at)) == NULL)
            PyErr_Clear();
        const char *entry = PyBytes_AS_STRING(layout);
        for (; buf != NULL && i < n; i++, entry += 8) {
            uint32_t offset;
            memcpy(&offset, entry + 4, sizeof offset);
            if (!pack_one(entry[0], PyTuple_GET_ITEM(values, i), buf + offset))
                break;
        }
    }
    Py_DECREF(layout);
    Py_XDECREF(at);
    return buf != NULL && i == n ? 0 : pack(plan, values);
}

/* Item i of a launch dimension (a 3-tuple), borrowed. */
static PyObject *
dimension(PyObject *dims, Py_ssize_t i)
{
    if (!PyTuple_CheckExact(dims) || PyTuple_GET_SIZE(dims) != 3) {
        PyErr_SetString(PyExc_TypeError, "a packed launch's grid and block are 3-tuples");
        return NULL;
    }
    return PyTuple_GET_ITEM(dims, i);
}

static PyObject *
packed_call(PyObject *self, PyObject *args, PyObject *kwargs)
{
    if (!PyTuple_CheckExact(args) || PyTuple_GET_SIZE(args) != 1
            || (kwargs != NULL && PyDict_GET_SIZE(kwargs) != 0))
        goto python;
    PyObject *stream = PyTuple_GET_ITEM(args, 0), *result = NULL;
    PyObject *target = NULL, *values = NULL, *plan = NULL, *splits = NULL, *grid = NULL,
        *block = NULL, *shared = NULL, *handle = NULL, *ptr = NULL, *extra = NULL, *fn = NULL;
    int complex_values;
    if ((target = get(self, &launch_layout, PL_TARGET, s_target)) == NULL
            || (values = get(self, &launch_layout, PL_VALUES, s_values)) == NULL
            || (plan = get(target, &target_layout, T_PLAN, s_plan)) == NULL
            || (splits = get(plan, &plan_layout, P_SPLITS, s_splits)) == NULL
            || (complex_values = truth(splits)) < 0)
        goto done;
    if (complex_values || !PyTuple_CheckExact(values)) {
        result = PyObject_CallFunctionObjArgs(python_packed_call, self, stream, NULL);
        goto done;
    }
    if (pack_values(plan, values) < 0
            || (grid = get(target, &target_layout, T_GRID, s_grid)) == NULL
            || (block = get(target, &target_layout, T_BLOCK, s_block)) == NULL
            || (shared = get(target, &target_layout, T_SHARED, s_shared)) == NULL
            || (handle = get(plan, &plan_layout, P_HANDLE, s_handle)) == NULL
            || (extra = get(plan, &plan_layout, P_EXTRA_PTR, s_extra_ptr)) == NULL
            || (fn = get(plan, &plan_layout, P_LAUNCH_FN, s_launch_fn)) == NULL
            || (ptr = PyObject_GetAttr(stream, s_ptr)) == NULL)
        goto done;
    PyObject *call[11] = {handle, NULL, NULL, NULL, NULL, NULL, NULL, shared, ptr, zero, extra};
    for (int i = 0; i < 3; i++) {
        if ((call[1 + i] = dimension(grid, i)) == NULL
                || (call[4 + i] = dimension(block, i)) == NULL)
            goto done;
    }
    result = PyObject_Vectorcall(fn, call, 11, NULL);
done:
    Py_XDECREF(target);
    Py_XDECREF(values);
    Py_XDECREF(plan);
    Py_XDECREF(splits);
    Py_XDECREF(grid);
    Py_XDECREF(block);
    Py_XDECREF(shared);
    Py_XDECREF(handle);
    Py_XDECREF(ptr);
    Py_XDECREF(extra);
    Py_XDECREF(fn);
    return result;
python:
    if (PyTuple_GET_SIZE(args) != 1 || (kwargs != NULL && PyDict_GET_SIZE(kwargs) != 0)) {
        PyErr_SetString(PyExc_TypeError, "a packed launch takes one argument, the stream");
        return NULL;
    }
    return PyObject_CallFunctionObjArgs(python_packed_call, self, PyTuple_GET_ITEM(args, 0),
                                        NULL);
}

/* ---- CudaBackend.record, wait, launch ----------------------------------------------------- */

/* captures.<name>(a, b) when the capture tracker is engaged: 0, or -1 with an error set */
static int
tell_captures(PyObject *self, PyObject *name, PyObject *a, PyObject *b)
{
    PyObject *captures = get(self, &backend_layout, B_CAPTURES, s_captures), *engaged = NULL,
        *r = NULL;
    int on = captures == NULL || (engaged = get(captures, &captures_layout, 0, s_engaged)) == NULL
        ? -1 : truth(engaged);
    if (on > 0)
        on = (r = call_method(captures, name, 2, a, b)) == NULL ? -1 : 0;
    Py_XDECREF(captures);
    Py_XDECREF(engaged);
    Py_XDECREF(r);
    return on < 0 ? -1 : 0;
}

/* The CUDA call failed: raise self._device_error(exc) from inside the handler of exc (what
   ``except Exception as exc: raise self._device_error(exc)`` does); other exceptions pass. */
static PyObject *
device_error(PyObject *self)
{
    if (!PyErr_ExceptionMatches(PyExc_Exception))
        return NULL;
    SavedError saved;
    save_error(&saved);
    PyObject *exc = saved_exception(&saved);
    PyObject *mapped = call_method(self, s_device_error, 1, exc);
    if (mapped != NULL) {
        if (PyExceptionInstance_Check(mapped))
            PyErr_SetObject((PyObject *)Py_TYPE(mapped), mapped);
        else
            PyErr_SetString(PyExc_TypeError, "exceptions must derive from BaseException");
        Py_DECREF(mapped);
    }
    raise_in_cleanup(&saved);
    return NULL;
}

/* fn(first.ptr, second.ptr[, 0]) through the backend's attribute: the CUDA call */
static PyObject *
ptr_call(PyObject *self, int field, PyObject *fn_name, PyObject *first, PyObject *second,
         int flags)
{
    PyObject *fn = get(self, &backend_layout, field, fn_name), *a = NULL, *b = NULL, *r = NULL;
    if (fn != NULL && (a = PyObject_GetAttr(first, s_ptr)) != NULL
            && (b = PyObject_GetAttr(second, s_ptr)) != NULL) {
        PyObject *call[3] = {a, b, zero};
        r = PyObject_Vectorcall(fn, call, flags ? 3 : 2, NULL);
    }
    Py_XDECREF(fn);
    Py_XDECREF(a);
    Py_XDECREF(b);
    return r;
}

/* ptr_call, its CUDA error raised as self._device_error(exc) */
static PyObject *
cuda_call(PyObject *self, int field, PyObject *fn_name, PyObject *first, PyObject *second,
          int flags)
{
    PyObject *r = ptr_call(self, field, fn_name, first, second, flags);
    return r == NULL ? device_error(self) : r;
}

/* record(event, stream) and wait(stream, event): the capture tracker told (``told``), then
   the CUDA call (the backend's attribute ``field``/``fn_name``; ``flags``: pass a 0 third). */
static PyObject *
forward(PyObject *self, PyObject *const *args, Py_ssize_t nargs, const char *usage,
        PyObject *told, int field, PyObject *fn_name, int flags)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, usage);
        return NULL;
    }
    if (tell_captures(self, told, args[0], args[1]) < 0)
        return NULL;
    PyObject *r = cuda_call(self, field, fn_name, args[0], args[1], flags);
    if (r == NULL)
        return NULL;
    Py_DECREF(r);
    Py_RETURN_NONE;
}

static PyObject *
backend_record(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    return forward(self, args, nargs, "record(event, stream)", s_record, B_EVENT_RECORD,
                   s_event_record, 0);
}

static PyObject *
backend_wait(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    return forward(self, args, nargs, "wait(stream, event)", s_wait, B_STREAM_WAIT,
                   s_stream_wait, 1);
}

static PyObject *
backend_launch(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "launch(node, stream)");
        return NULL;
    }
    PyObject *node = args[0], *stream = args[1], *recent = NULL, *launch = NULL, *r = NULL;
    if (tell_captures(self, s_launch, node, stream) < 0
            || (recent = get(self, &backend_layout, B_RECENT, s_recent)) == NULL
            || append_item(recent, node) < 0) {
        Py_XDECREF(recent);
        return NULL;
    }
    Py_DECREF(recent);
    if ((launch = PyObject_GetAttr(node, s_launch_attr)) == NULL)
        return NULL;
    r = PyObject_CallOneArg(launch, stream);
    Py_DECREF(launch);
    if (r == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_Exception))
            return NULL;
        SavedError saved;
        save_error(&saved);
        r = call_method(self, s_launch_failed, 3, node, stream, saved_exception(&saved));
        if (r == NULL) {
            raise_in_cleanup(&saved);
            return NULL;
        }
        forget_error(&saved);       /* launched again: handled */
    }
    Py_DECREF(r);
    Py_RETURN_NONE;
}

static PyObject *
backend_event_done(PyObject *self, PyObject *event)
{
    if (tell_captures(self, s_check_host_wait, event, s_event_query) < 0)
        return NULL;
    PyObject *query = get(self, &backend_layout, B_EVENT_DONE, s_event_done_attr), *done;
    if (query == NULL)
        return NULL;
    done = PyObject_CallOneArg(query, event);
    Py_DECREF(query);
    if (done == NULL)
        return device_error(self);
    int t = truth(done);
    Py_DECREF(done);
    if (t < 0)
        return device_error(self);
    return PyBool_FromLong(t);
}

/* ---- CudaBackend.kernel_launch: a launcher's prepared target, reused -------------------- */

/* The launcher's prepared target when it was made for this backend (new reference), or
   None. */
static PyObject *
prepared_target(PyObject *self, PyObject *launcher)
{
    PyObject *target = PyObject_GetAttr(launcher, s_prepared), *ref, *backend;
    if (target == NULL || target == Py_None)
        return target;
    if (Py_TYPE(target) != target_layout.type) {     /* (not ours to read: Python decides) */
        Py_DECREF(target);
        Py_RETURN_NONE;
    }
    if ((ref = get(target, &target_layout, T_BACKEND, s_backend)) == NULL) {
        Py_DECREF(target);
        return NULL;
    }
    backend = PyObject_CallNoArgs(ref);     /* (a weak reference) */
    Py_DECREF(ref);
    if (backend == NULL) {
        Py_DECREF(target);
        return NULL;
    }
    Py_DECREF(backend);
    if (backend != self)
        Py_SETREF(target, Py_NewRef(Py_None));
    return target;
}

static PyObject *
backend_kernel_launch(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError,
                        "kernel_launch(kernel, launcher, arrays, values, site)");
        return NULL;
    }
    PyObject *arrays = args[2], *values = args[3], *key = NULL, *flat = NULL, *launch;
    PyObject *target = prepared_target(self, args[1]);
    if (target == NULL)
        return NULL;
    if (target != Py_None) {
        /* (a CUDA C target has no key; a Numba one the argument types it was built for) */
        if ((key = get(target, &target_layout, T_KEY, s_key)) == NULL)
            goto error;
        flat = key == Py_None ? call_pointer_values(target, values, arrays)
                              : call_numba_values(target, values);
        if (flat == NULL)
            goto error;
        if (PyTuple_CheckExact(flat)) {     /* made as PackedLaunch.__init__ makes it */
            if ((launch = launch_layout.type->tp_alloc(launch_layout.type, 0)) == NULL)
                goto error;
            *(PyObject **)((char *)launch + launch_layout.off[PL_TARGET]) = target;
            *(PyObject **)((char *)launch + launch_layout.off[PL_VALUES]) = flat;
            Py_DECREF(key);
            return launch;
        }
        Py_CLEAR(flat);
        Py_CLEAR(key);
    }
    Py_DECREF(target);
    PyObject *call[] = {self, args[0], args[1], arrays, values, args[4]};
    return PyObject_Vectorcall(python_make_launch, call, 6, NULL);
error:
    Py_DECREF(target);
    Py_XDECREF(key);
    Py_XDECREF(flat);
    return NULL;
}

/* ---- CudaBackend.graph_launch ------------------------------------------------------------- */

/* Whether check_launch would find nothing to refuse without looking further: a graph of ours,
   not destroyed, nothing freed since its arrays were seen live, no capture open (1/0/-1). */
static int
launch_checked(PyObject *self, PyObject *graph)
{
    if (Py_TYPE(graph) != graph_layout.type)
        return 0;
    PyObject *destroyed = get(graph, &graph_layout, GR_DESTROYED, s_destroyed), *frees = NULL,
        *captures = NULL, *engaged = NULL;
    int ok = destroyed == NULL ? -1 : !truth(destroyed);
    if (ok > 0)
        ok = (frees = get(graph, &graph_layout, GR_FREES, s_frees)) == NULL
            ? -1 : no_frees_since(frees);
    if (ok > 0)
        ok = (captures = get(self, &backend_layout, B_CAPTURES, s_captures)) == NULL
            || (engaged = get(captures, &captures_layout, 0, s_engaged)) == NULL
            ? -1 : !truth(engaged);
    Py_XDECREF(destroyed);
    Py_XDECREF(frees);
    Py_XDECREF(captures);
    Py_XDECREF(engaged);
    return ok;
}

static PyObject *
backend_graph_launch(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "graph_launch(graph, stream)");
        return NULL;
    }
    PyObject *graph = args[0], *stream = args[1], *handle = NULL, *done = NULL, *r = NULL,
        *inflight = NULL, *key = NULL, *captures = NULL, *launch = NULL;
    int checked = launch_checked(self, graph);
    if (checked < 0)
        return NULL;
    if (!checked) {         /* (something to look at: check_launch decides and raises) */
        if ((captures = get(self, &backend_layout, B_CAPTURES, s_captures)) == NULL)
            return NULL;
        PyObject *call[] = {graph, stream, captures};
        r = PyObject_Vectorcall(check_launch, call, 3, NULL);
        Py_DECREF(captures);
        if (r == NULL)
            return NULL;
        Py_CLEAR(r);
    }
    if ((handle = get(graph, &graph_layout, GR_HANDLE, s_handle)) == NULL
            || (launch = get(self, &backend_layout, B_GRAPH_LAUNCH, s_graph_launch)) == NULL)
        goto error;
    PyObject *call[] = {handle, stream};
    if ((r = PyObject_Vectorcall(launch, call, 2, NULL)) == NULL)
        goto error;
    Py_CLEAR(r);
    if ((done = get(graph, &graph_layout, GR_DONE, s_done)) == NULL
            || (r = ptr_call(self, B_EVENT_RECORD, s_event_record, done, stream, 0)) == NULL)
        goto error;
    Py_CLEAR(r);
    /* the graph (and so its arrays) must outlive its running launches even if dropped */
    if (set(graph, &graph_layout, GR_LAUNCHED, s_launched, Py_True) < 0
            || (inflight = get(self, &backend_layout, B_GRAPHS_IN_FLIGHT, s_graphs_in_flight))
               == NULL
            || (key = PyLong_FromVoidPtr(graph)) == NULL
            || PyObject_SetItem(inflight, key, graph) < 0)
        goto error;
    Py_ssize_t kept = PyObject_Size(inflight);
    if (kept < 0)
        goto error;
    if (kept > graphs_kept && (r = PyObject_CallOneArg(forget_finished, inflight)) == NULL)
        goto error;
    Py_XDECREF(r);
    Py_DECREF(handle);
    Py_DECREF(launch);
    Py_DECREF(inflight);
    Py_DECREF(key);
    return done;
error:
    Py_XDECREF(handle);
    Py_XDECREF(launch);
    Py_XDECREF(done);
    Py_XDECREF(inflight);
    Py_XDECREF(key);
    return NULL;
}

static PyMethodDef backend_methods[] = {
    {"event_done", backend_event_done, METH_O,
     "event_done(event): whether the event completed (cudaEventQuery)."},
    {"graph_launch", (PyCFunction)(void (*)(void))backend_graph_launch, METH_FASTCALL,
     "graph_launch(graph, stream): launch the graph; its completion event, recorded after."},
    {"kernel_launch", (PyCFunction)(void (*)(void))backend_kernel_launch, METH_FASTCALL,
     "kernel_launch(kernel, launcher, arrays, values, site): prepare a launch (nothing is "
     "enqueued)."},
    {"record", (PyCFunction)(void (*)(void))backend_record, METH_FASTCALL,
     "record(event, stream): record the event on the stream (cudaEventRecord)."},
    {"wait", (PyCFunction)(void (*)(void))backend_wait, METH_FASTCALL,
     "wait(stream, event): make the stream wait for the event (cudaStreamWaitEvent)."},
    {"launch", (PyCFunction)(void (*)(void))backend_launch, METH_FASTCALL,
     "launch(node, stream): enqueue the node's launch object on the stream."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot backend_slots[] = {
    {Py_tp_methods, backend_methods},
    {Py_tp_doc, "Base of asyncgpu's CudaBackend: record, wait and launch, compiled."},
    {0, NULL},
};

static PyType_Spec backend_spec = {
    "asyncgpu._speedups.BackendBase", sizeof(PyObject), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE, backend_slots,
};

static PyType_Slot packed_slots[] = {
    {Py_tp_call, packed_call},
    {Py_tp_doc, "Base of asyncgpu's PackedLaunch: its call, compiled."},
    {0, NULL},
};

static PyType_Spec packed_spec = {
    "asyncgpu._speedups.PackedCallBase", sizeof(PyObject), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE, packed_slots,
};

PyObject *
configure_backend(PyObject *module, PyObject *args)
{
    PyObject *backend_type, *captures_type, *graph_type, *check, *forget;
    static const char *const backend_names[] = {"captures", "_recent", "_event_record",
                                                "_stream_wait", "_graphs_in_flight",
                                                "_event_done", "_graph_launch"};
    static const char *const captures_names[] = {"engaged"};
    static const char *const graph_names[] = {"handle", "done", "launched", "destroyed",
                                              "frees"};
    if (!PyArg_ParseTuple(args, "OOOOOn:configure_backend", &backend_type, &captures_type,
                          &graph_type, &check, &forget, &graphs_kept)
            || layout(&backend_layout, backend_type, backend_names, 7) < 0
            || layout(&captures_layout, captures_type, captures_names, 1) < 0
            || layout(&graph_layout, graph_type, graph_names, 5) < 0)
        return NULL;
    Py_XSETREF(check_launch, Py_NewRef(check));
    Py_XSETREF(forget_finished, Py_NewRef(forget));
    Py_RETURN_NONE;
}

PyObject *
configure_device(PyObject *module, PyObject *args)
{
    PyObject *launch_type, *target_type, *plan_type, *python_call, *make_launch;
    static const char *const launch_names[] = {"target", "values"};
    static const char *const target_names[] = {"plan", "grid", "block", "shared", "backend",
                                               "key"};
    static const char *const plan_names[] = {"handle", "struct", "buf", "extra_ptr", "splits",
                                             "launch_fn", "layout", "buf_ptr"};
    if (!PyArg_ParseTuple(args, "OOOOO:configure_device", &launch_type, &target_type,
                          &plan_type, &python_call, &make_launch))
        return NULL;
    if (layout(&launch_layout, launch_type, launch_names, 2) < 0
            || layout(&target_layout, target_type, target_names, 6) < 0
            || layout(&plan_layout, plan_type, plan_names, 8) < 0)
        return NULL;
    Py_XSETREF(python_packed_call, Py_NewRef(python_call));
    Py_XSETREF(python_make_launch, Py_NewRef(make_launch));
    Py_RETURN_NONE;
}

int
device_init(PyObject *module)
{
    static const Name names[] = {
        {&s_target, "target"}, {&s_values, "values"}, {&s_plan, "plan"}, {&s_grid, "grid"},
        {&s_block, "block"}, {&s_shared, "shared"}, {&s_handle, "handle"},
        {&s_struct, "struct"}, {&s_buf, "buf"}, {&s_extra_ptr, "extra_ptr"},
        {&s_splits, "splits"}, {&s_launch_fn, "launch_fn"}, {&s_pack_into, "pack_into"},
        {&s_ptr, "ptr"}, {&s_captures, "captures"}, {&s_engaged, "engaged"},
        {&s_record, "record"}, {&s_wait, "wait"}, {&s_launch, "launch"}, {&s_recent, "_recent"},
        {&s_launch_failed, "_launch_failed"},
        {&s_event_record, "_event_record"}, {&s_stream_wait, "_stream_wait"},
        {&s_device_error, "_device_error"}, {&s_check_host_wait, "check_host_wait"},
        {&s_event_query, "event query"}, {&s_done, "done"}, {&s_prepared, "prepared"},
        {&s_backend, "backend"}, {&s_key, "key"},
        {&s_destroyed, "destroyed"}, {&s_frees, "frees"},
        {&s_launched, "launched"},
        {&s_graphs_in_flight, "_graphs_in_flight"}, {&s_event_done_attr, "_event_done"},
        {&s_graph_launch, "_graph_launch"}, {&s_layout, "layout"}, {&s_buf_ptr, "buf_ptr"},
    };
    if (INTERN_ALL(names) < 0)
        return -1;
    s_launch_attr = s_launch;
    if (add_type(module, "BackendBase", &backend_spec) < 0
            || add_type(module, "PackedCallBase", &packed_spec) < 0)
        return -1;
    static const struct {
        Twin *twin;
        const char *method;
    } twins[] = {
        {&t_kernel_launch, "kernel_launch"}, {&t_launch, "launch"}, {&t_record, "record"},
        {&t_wait, "wait"}, {&t_event_done, "event_done"}, {&t_graph_launch, "graph_launch"},
    };
    for (size_t i = 0; i < sizeof twins / sizeof twins[0]; i++)
        if (twin(twins[i].twin, module, "BackendBase", twins[i].method) < 0)
            return -1;
    return 0;
}

/* ---- the calls of other files --------------------------------------------------------------- */

PyObject *
call_kernel_launch(PyObject *backend, PyObject *const *args)
{
    return call_twin(&t_kernel_launch, backend, args, 5);
}

PyObject *
call_launch(PyObject *backend, PyObject *node, PyObject *stream)
{
    return call_twin(&t_launch, backend, (PyObject *[]){node, stream}, 2);
}

PyObject *
call_record(PyObject *backend, PyObject *event, PyObject *stream)
{
    return call_twin(&t_record, backend, (PyObject *[]){event, stream}, 2);
}

PyObject *
call_wait(PyObject *backend, PyObject *stream, PyObject *event)
{
    return call_twin(&t_wait, backend, (PyObject *[]){stream, event}, 2);
}

PyObject *
call_event_done(PyObject *backend, PyObject *event)
{
    return call_twin(&t_event_done, backend, &event, 1);
}

PyObject *
call_graph_launch(PyObject *backend, PyObject *graph, PyObject *stream)
{
    return call_twin(&t_graph_launch, backend, (PyObject *[]){graph, stream}, 2);
}
