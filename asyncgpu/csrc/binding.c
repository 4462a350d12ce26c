#include "speedups.h"

/* ---- A kernel's argument binding -----------------------------------------------------------
   Kernel.bind of asyncgpu/runtime/kernel.py's PythonBinding, with the same answers: for each argument
   and its parameter slot, an asyncgpu array of this runtime becomes an ArrayArg (made here
   as ArrayArg.__init__ makes it), a plain number in a typed parameter's range is converted
   with the dtype's constructor, an untyped read-write number passes as it is; every other
   case calls the same Python method the Python bind calls (_check_array, _bind_scalar), which
   explains what is wrong or converts. */

static SlotLayout alloc_layout;
SlotLayout kernel_layout, launcher_layout;
static PyObject *numbers = NULL;        /* frozenset({int, float, bool, complex}) */
static PyObject *s_slots, *s_typed, *s_alloc_, *s_dtype, *s_contiguous, *s_lo_, *s_hi_,
    *s_freed, *s_runtime_attr, *s_id, *s_check_array, *s_bind_scalar, *s_params,
    *s_bind_in_python, *s_shape, *s_strides, *s_cai, *s_dlpack, *s_cuda_ndarray;

enum { AL_FREED, AL_RUNTIME, AL_ID };

/* set a slot of a new ArrayArg (steals value) */
static inline void
put(PyObject *obj, int field, PyObject *value)
{
    *(PyObject **)((char *)obj + arg_layout.off[field]) = value;
}

static PyObject *
new_array_arg(PyObject *index, PyObject *param, PyObject *array, PyObject *read,
              PyObject *write)
{
    PyObject *alloc = get(array, &array_layout, AR_ALLOC, s_alloc_), *key = NULL, *lo = NULL,
        *hi = NULL, *arg;
    if (alloc == NULL || (key = get(alloc, &alloc_layout, AL_ID, s_id)) == NULL
            || (lo = get(array, &array_layout, AR_LO, s_lo_)) == NULL
            || (hi = get(array, &array_layout, AR_HI, s_hi_)) == NULL
            || (arg = arg_layout.type->tp_alloc(arg_layout.type, 0)) == NULL) {
        Py_XDECREF(alloc);
        Py_XDECREF(key);
        Py_XDECREF(lo);
        Py_XDECREF(hi);
        return NULL;
    }
    Py_INCREF(index);
    put(arg, G_INDEX, index);
    Py_INCREF(param);
    put(arg, G_PARAM, param);
    Py_INCREF(array);
    put(arg, G_ARRAY, array);
    Py_INCREF(read);
    put(arg, G_READ, read);
    Py_INCREF(write);
    put(arg, G_WRITE, write);
    put(arg, G_KEY, key);
    put(arg, G_ALLOC, alloc);
    put(arg, G_LO, lo);
    put(arg, G_HI, hi);
    Py_INCREF(param);
    put(arg, G_LABEL, param);
    return arg;
}

/* whether the array needs the slow checks: not usable here, or not what a typed slot takes */
static int
needs_checks(PyObject *a, PyObject *runtime, int typed, PyObject *dtype, int is_array)
{
    PyObject *alloc = get(a, &array_layout, AR_ALLOC, s_alloc_), *v;
    if (alloc == NULL)
        return -1;
    int bad;
    if ((v = get(alloc, &alloc_layout, AL_FREED, s_freed)) == NULL)
        goto error;
    bad = truth(v);
    Py_DECREF(v);
    if (bad)
        goto done;
    if ((v = get(alloc, &alloc_layout, AL_RUNTIME, s_runtime_attr)) == NULL)
        goto error;
    bad = v != runtime;
    Py_DECREF(v);
    if (bad || !typed)
        goto done;
    if (!is_array) {
        bad = 1;
        goto done;
    }
    if (dtype != Py_None) {
        if ((v = get(a, &array_layout, AR_DTYPE, s_dtype)) == NULL)
            goto error;
        int same = v == dtype ? 1 : PyObject_RichCompareBool(v, dtype, Py_EQ);
        Py_DECREF(v);
        if (same < 0)
            goto error;
        if (!same) {
            bad = 1;
            goto done;
        }
    }
    if ((v = get(a, &array_layout, AR_CONTIGUOUS, s_contiguous)) == NULL)
        goto error;
    bad = truth(v);
    Py_DECREF(v);
    bad = bad < 0 ? -1 : !bad;
done:
    Py_DECREF(alloc);
    return bad;
error:
    Py_DECREF(alloc);
    return -1;
}

/* plain = (types, lowest, highest, conversion): 1 and *out set when a converts plainly */
static int
plain_convert(PyObject *plain, PyObject *a, PyObject **out)
{
    if (plain == Py_None)
        return 0;
    if (!PyTuple_CheckExact(plain) || PyTuple_GET_SIZE(plain) != 4) {
        PyErr_SetString(PyExc_TypeError, "bind: malformed plain-scalar rule");
        return -1;
    }
    int r = PySet_Contains(PyTuple_GET_ITEM(plain, 0), (PyObject *)Py_TYPE(a));
    if (r <= 0)
        return r;
    r = PyObject_RichCompareBool(PyTuple_GET_ITEM(plain, 1), a, Py_LE);
    if (r <= 0)
        return r;
    r = PyObject_RichCompareBool(a, PyTuple_GET_ITEM(plain, 2), Py_LE);
    if (r <= 0)
        return r;
    *out = PyObject_CallOneArg(PyTuple_GET_ITEM(plain, 3), a);
    return *out == NULL ? -1 : 1;
}

static PyObject *
kernel_bind(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3 || !PyTuple_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "bind(runtime, args: tuple, site)");
        return NULL;
    }
    PyObject *runtime = args[0], *argv = args[1], *site = args[2];
    if (arg_layout.type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "asyncgpu._speedups: configure_binding not called");
        return NULL;
    }
    PyObject *slots = get(self, &kernel_layout, K_SLOTS, s_slots), *typed_obj = NULL;
    PyObject *arrays = NULL, *values = NULL, *params = NULL;
    if (slots == NULL)
        return NULL;
    if (!PyTuple_CheckExact(slots) || PyTuple_GET_SIZE(slots) != PyTuple_GET_SIZE(argv)) {
        /* (a wrong count: the Python bind writes the error) */
        Py_DECREF(slots);
        return PyObject_CallMethodObjArgs(self, s_bind_in_python, runtime, argv, site, NULL);
    }
    if ((typed_obj = get(self, &kernel_layout, K_TYPED, s_typed)) == NULL)
        goto error;
    int typed = truth(typed_obj);
    Py_DECREF(typed_obj);
    if (typed < 0 || (arrays = PyList_New(0)) == NULL
            || (values = PySequence_List(argv)) == NULL)
        goto error;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(argv); i++) {
        PyObject *slot = PyTuple_GET_ITEM(slots, i), *a = PyTuple_GET_ITEM(argv, i);
        if (!PyTuple_CheckExact(slot) || PyTuple_GET_SIZE(slot) != 7) {
            PyErr_SetString(PyExc_TypeError, "bind: malformed parameter slot");
            goto error;
        }
        PyObject *index = PyTuple_GET_ITEM(slot, 0), *name = PyTuple_GET_ITEM(slot, 1),
            *read = PyTuple_GET_ITEM(slot, 2), *write = PyTuple_GET_ITEM(slot, 3),
            *dtype = PyTuple_GET_ITEM(slot, 4), *plain = PyTuple_GET_ITEM(slot, 6);
        int is_array = truth(PyTuple_GET_ITEM(slot, 5));
        if (is_array < 0)
            goto error;
        int array = Py_TYPE(a) == array_layout.type ? 1
                                                    : PyObject_IsInstance(a, (PyObject *)array_layout.type);
        if (array < 0)
            goto error;
        if (array) {
            int bad = needs_checks(a, runtime, typed, dtype, is_array);
            if (bad < 0)
                goto error;
            if (bad) {
                if (params == NULL && (params = get(self, &kernel_layout, K_PARAMS, s_params)) == NULL)
                    goto error;
                PyObject *p = PySequence_GetItem(params, i);
                if (p == NULL)
                    goto error;
                PyObject *r = PyObject_CallMethodObjArgs(self, s_check_array, runtime, index, p,
                                                         a, site, NULL);
                Py_DECREF(p);
                if (r == NULL)
                    goto error;
                Py_DECREF(r);
            }
            PyObject *arg = new_array_arg(index, name, a, read, write);
            if (arg == NULL)
                goto error;
            int r = PyList_Append(arrays, arg);
            Py_DECREF(arg);
            if (r < 0)
                goto error;
            continue;
        }
        PyObject *converted = NULL;
        int plainly = plain_convert(plain, a, &converted);
        if (plainly < 0)
            goto error;
        if (!plainly) {
            int number = PySet_Contains(numbers, (PyObject *)Py_TYPE(a));
            int rw = truth(read);
            if (rw > 0)
                rw = truth(write);
            if (number < 0 || rw < 0)
                goto error;
            if (!(typed || !number || !rw))
                continue;               /* an untyped read-write number passes as it is */
            if (!number) {
                /* Another library's array (asyncgpu.runtime.interop.is_foreign asks the same three
                   attributes, and decides): the Python bind imports it, from the start, so
                   that nothing is enqueued before every argument is checked. */
                int foreign = PyObject_HasAttr(a, s_cai) || PyObject_HasAttr(a, s_dlpack)
                              || PyObject_HasAttr(a, s_cuda_ndarray);
                if (foreign) {
                    Py_DECREF(slots);
                    Py_XDECREF(params);
                    Py_DECREF(arrays);
                    Py_DECREF(values);
                    return PyObject_CallMethodObjArgs(self, s_bind_in_python, runtime, argv,
                                                      site, NULL);
                }
            }
            if (params == NULL && (params = get(self, &kernel_layout, K_PARAMS, s_params)) == NULL)
                goto error;
            PyObject *p = PySequence_GetItem(params, i);
            if (p == NULL)
                goto error;
            converted = PyObject_CallMethodObjArgs(self, s_bind_scalar, index, p, a, site, NULL);
            Py_DECREF(p);
            if (converted == NULL)
                goto error;
        }
        if (PyList_SetItem(values, i, converted) < 0)      /* steals */
            goto error;
    }
    Py_DECREF(slots);
    Py_XDECREF(params);
    PyObject *result = PyTuple_Pack(2, arrays, values);
    Py_DECREF(arrays);
    Py_DECREF(values);
    return result;
error:
    Py_XDECREF(slots);
    Py_XDECREF(params);
    Py_XDECREF(arrays);
    Py_XDECREF(values);
    return NULL;
}

static Twin t_bind;
static PyObject *s_launchers, *s_getitem, *python_getitem;

/* kernel[config]: the launcher cached for this configuration (the lookup Kernel.__getitem__
   tries first); any other case (not cached yet, unhashable) goes to that Python method, which
   parses, checks and caches. */
static PyObject *
kernel_subscript(PyObject *self, PyObject *config)
{
    PyObject *launchers = get(self, &kernel_layout, K_LAUNCHERS, s_launchers);
    if (launchers == NULL)
        return NULL;
    if (PyDict_CheckExact(launchers)) {
        PyObject *launcher = PyDict_GetItemWithError(launchers, config);     /* borrowed */
        if (launcher != NULL) {
            Py_INCREF(launcher);
            Py_DECREF(launchers);
            return launcher;
        }
        if (PyErr_Occurred()) {
            if (!PyErr_ExceptionMatches(PyExc_TypeError)) {
                Py_DECREF(launchers);
                return NULL;        /* (what the Python lookup lets through) */
            }
            PyErr_Clear();          /* unhashable: Python's TypeError path decides */
        }
    }
    Py_DECREF(launchers);
    if (python_getitem == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "asyncgpu._speedups: Kernel.__getitem__ unset");
        return NULL;
    }
    return PyObject_CallFunctionObjArgs(python_getitem, self, config, NULL);
}

static PyMethodDef kernel_methods[] = {
    {"bind", (PyCFunction)(void (*)(void))kernel_bind, METH_FASTCALL,
     "bind(runtime, args, site): validate the arguments; the array arguments and the values "
     "to pass (compiled Kernel.bind)."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot kernel_slots[] = {
    {Py_tp_methods, kernel_methods},
    {Py_mp_subscript, kernel_subscript},
    {Py_tp_doc, "Base of asyncgpu's Kernel: bind and the cached launcher lookup, compiled."},
    {0, NULL},
};

static PyType_Spec kernel_spec = {
    "asyncgpu._speedups.KernelBase",
    sizeof(PyObject),
    0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    kernel_slots,
};

int
same_view(PyObject *a, PyObject *b)
{
    static const int fields[] = {AR_ALLOC, AR_LO, AR_HI, AR_SHAPE, AR_STRIDES, AR_DTYPE};
    static PyObject **const names[] = {&s_alloc_, &s_lo_, &s_hi_, &s_shape, &s_strides,
                                       &s_dtype};
    int same = 1;
    for (int i = 0; same > 0 && i < 6; i++) {
        PyObject *x = get(a, &array_layout, fields[i], *names[i]), *y;
        if (x == NULL)
            return -1;
        if ((y = get(b, &array_layout, fields[i], *names[i])) == NULL) {
            Py_DECREF(x);
            return -1;
        }
        /* the allocation by identity; the rest by value (dtype: identity first) */
        same = x == y ? 1 : fields[i] == AR_ALLOC ? 0 : PyObject_RichCompareBool(x, y, Py_EQ);
        if (same > 0 && fields[i] == AR_ALLOC) {
            PyObject *freed = get(x, &alloc_layout, AL_FREED, s_freed);
            same = freed == NULL ? -1 : !truth(freed);
            Py_XDECREF(freed);
        }
        Py_DECREF(x);
        Py_DECREF(y);
    }
    return same;
}

PyObject *
configure_binding(PyObject *module, PyObject *args)
{
    PyObject *kernel_type, *launcher_type, *array_type, *alloc_type, *arg_type, *number_types,
        *getitem;
    static const char *const kernel_names[] = {"_slots", "typed", "params", "_launchers",
                                               "name", "elementwise"};
    static const char *const launcher_names[] = {"kernel"};
    static const char *const array_names[] = {"_alloc", "dtype", "_contiguous", "_lo", "_hi",
                                              "_cache", "shape", "strides"};
    static const char *const alloc_names[] = {"freed", "runtime", "id"};
    static const char *const arg_names[] = {"index", "param", "array", "read", "write", "key",
                                            "alloc", "lo", "hi", "label"};
    if (!PyArg_ParseTuple(args, "OOOOOO!O:configure_binding", &kernel_type, &launcher_type,
                          &array_type, &alloc_type, &arg_type, &PyFrozenSet_Type,
                          &number_types, &getitem))
        return NULL;
    Py_XSETREF(python_getitem, Py_NewRef(getitem));
    if (layout(&kernel_layout, kernel_type, kernel_names, 6) < 0
            || layout(&launcher_layout, launcher_type, launcher_names, 1) < 0
            || layout(&array_layout, array_type, array_names, 8) < 0
            || layout(&alloc_layout, alloc_type, alloc_names, 3) < 0)
        return NULL;
    /* ArrayArg: every slot is set here, so its layout must hold exactly these */
    SlotLayout l = {0};
    if (layout(&l, arg_type, arg_names, 10) < 0)
        return NULL;
    if (l.type->tp_alloc != PyType_GenericAlloc || l.type->tp_dictoffset != 0) {
        Py_DECREF(l.type);
        PyErr_SetString(PyExc_TypeError,
                        "configure_binding: ArrayArg must be a plain class with __slots__ only");
        return NULL;
    }
    Py_XSETREF(arg_layout.type, l.type);
    memcpy(arg_layout.off, l.off, sizeof l.off);
    Py_INCREF(number_types);
    Py_XSETREF(numbers, number_types);
    Py_RETURN_NONE;
}

int
binding_init(PyObject *module)
{
    if (intern(&s_slots, "_slots") < 0 || intern(&s_typed, "typed") < 0
            || intern(&s_alloc_, "_alloc") < 0 || intern(&s_dtype, "dtype") < 0
            || intern(&s_contiguous, "_contiguous") < 0 || intern(&s_lo_, "_lo") < 0
            || intern(&s_hi_, "_hi") < 0 || intern(&s_freed, "freed") < 0
            || intern(&s_runtime_attr, "runtime") < 0 || intern(&s_id, "id") < 0
            || intern(&s_check_array, "_check_array") < 0
            || intern(&s_bind_scalar, "_bind_scalar") < 0 || intern(&s_params, "params") < 0
            || intern(&s_bind_in_python, "bind_in_python") < 0
            || intern(&s_cai, "__cuda_array_interface__") < 0
            || intern(&s_dlpack, "__dlpack__") < 0
            || intern(&s_cuda_ndarray, "__cuda_ndarray__") < 0)
        return -1;
    if (intern(&s_launchers, "_launchers") < 0 || intern(&s_getitem, "__getitem__") < 0
            || intern(&s_shape, "shape") < 0 || intern(&s_strides, "strides") < 0)
        return -1;
    if (add_type(module, "KernelBase", &kernel_spec) < 0
            || twin(&t_bind, module, "KernelBase", "bind") < 0)
        return -1;
    return 0;
}

PyObject *
call_bind(PyObject *kernel, PyObject *runtime, PyObject *args, PyObject *site)
{
    return call_twin(&t_bind, kernel, (PyObject *[]){runtime, args, site}, 3);
}
