#include "speedups.h"
#include <stdint.h>

/* ---- A packed launch's values --------------------------------------------------------------
   PackedTarget.numba_values and pointer_values of asyncgpu/backends/cuda/kernels.py's
   PythonGathering: the values one cuLaunchKernel packs, from what earlier launches cached on
   each array (``_cache["nbf"]``: Numba's type token and ABI fields; ``_cache["ptr"]``: the
   device pointer). None when something is not cached or not what the target was built for:
   the Python path then builds it. */

static PyObject *s_nbf, *s_ptr, *s_key_attr, *s_bigint, *s_cache, *s_array_attr, *s_index,
    *int64_min, *int64_max;

static Twin t_pointer_values, t_numba_values;

static PyObject *
array_cache(PyObject *array)
{
    PyObject *cache = get(array, &array_layout, AR_CACHE, s_cache);
    if (cache != NULL && !PyDict_Check(cache)) {
        Py_DECREF(cache);
        PyErr_SetString(PyExc_TypeError, "an array's _cache is not a dict");
        return NULL;
    }
    return cache;
}

/* One value of a Numba launch checked against the type token the target was built for:
   its flat values as a new reference (the array's cached ABI fields, a tuple; or the number
   itself), NULL with no error set when it does not match, NULL with an error set on error. */
static PyObject *
numba_value(PyObject *v, PyObject *k)
{
    PyObject *want, *out;
    int same;
    if (Py_TYPE(v) == array_layout.type) {
        PyObject *cache = array_cache(v), *fields;
        if (cache == NULL)
            return NULL;
        fields = PyDict_GetItemWithError(cache, s_nbf);     /* borrowed */
        Py_XINCREF(fields);
        Py_DECREF(cache);
        if (fields == NULL || !PyTuple_CheckExact(fields) || PyTuple_GET_SIZE(fields) != 2
                || !PyTuple_CheckExact(PyTuple_GET_ITEM(fields, 1))) {
            Py_XDECREF(fields);
            return NULL;            /* (not cached yet, or an error, which stays set) */
        }
        want = PyTuple_GET_ITEM(fields, 0);
        same = want == k ? 1 : PyObject_RichCompareBool(want, k, Py_EQ);
        out = same > 0 ? Py_NewRef(PyTuple_GET_ITEM(fields, 1)) : NULL;
        Py_DECREF(fields);
        return out;
    }
    want = (PyObject *)Py_TYPE(v);
    if (PyLong_CheckExact(v)) {
        int lo = PyObject_RichCompareBool(int64_min, v, Py_LE);
        int hi = lo > 0 ? PyObject_RichCompareBool(v, int64_max, Py_LE) : lo;
        if (hi < 0)
            return NULL;
        if (!hi)
            want = s_bigint;
    }
    same = want == k ? 1 : PyObject_RichCompareBool(want, k, Py_EQ);
    return same > 0 ? Py_NewRef(v) : NULL;
}

static PyObject *
target_numba_values(PyObject *self, PyObject *values)
{
    PyObject *key = PyObject_GetAttr(self, s_key_attr), *result = NULL;
    PyObject *small[16], **parts = small;
    Py_ssize_t n = 0, total = 0, done = 0;
    if (key == NULL)
        return NULL;
    if (!PyList_CheckExact(values) || !PyList_Check(key)
            || PyList_GET_SIZE(key) != PyList_GET_SIZE(values)) {
        Py_DECREF(key);
        Py_RETURN_NONE;
    }
    n = PyList_GET_SIZE(values);
    if (n > (Py_ssize_t)(sizeof small / sizeof small[0])
            && (parts = PyMem_Malloc((size_t)n * sizeof(PyObject *))) == NULL) {
        Py_DECREF(key);
        return PyErr_NoMemory();
    }
    /* first each value checked and its part found, then the flat tuple made at its size */
    for (; done < n; done++) {
        PyObject *v = PyList_GET_ITEM(values, done);
        if ((parts[done] = numba_value(v, PyList_GET_ITEM(key, done))) == NULL)
            break;
        total += Py_TYPE(v) == array_layout.type ? PyTuple_GET_SIZE(parts[done]) : 1;
    }
    if (done < n) {
        if (!PyErr_Occurred())
            result = Py_NewRef(Py_None);    /* a miss: the Python path decides */
    } else if ((result = PyTuple_New(total)) != NULL) {
        Py_ssize_t at = 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            if (Py_TYPE(PyList_GET_ITEM(values, i)) == array_layout.type) {
                for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(parts[i]); j++)
                    PyTuple_SET_ITEM(result, at++, Py_NewRef(PyTuple_GET_ITEM(parts[i], j)));
            } else {
                PyTuple_SET_ITEM(result, at++, Py_NewRef(parts[i]));
            }
        }
    }
    for (Py_ssize_t i = 0; i < done; i++)
        Py_DECREF(parts[i]);
    if (parts != small)
        PyMem_Free(parts);
    Py_DECREF(key);
    return result;
}

static PyObject *
target_pointer_values(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyList_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "pointer_values(values, arrays: list)");
        return NULL;
    }
    PyObject *values = PySequence_Fast(args[0], "pointer_values: values is not a sequence"),
        *arrays = args[1], *out = NULL;
    if (values == NULL)
        return NULL;
    /* (the tuple itself, filled in place while it is ours alone: no list to copy it from) */
    Py_ssize_t n = PySequence_Fast_GET_SIZE(values);
    if ((out = PyTuple_New(n)) == NULL)
        goto error;
    for (Py_ssize_t i = 0; i < n; i++)
        PyTuple_SET_ITEM(out, i, Py_NewRef(PySequence_Fast_GET_ITEM(values, i)));
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(arrays); i++) {
        PyObject *a = PyList_GET_ITEM(arrays, i), *array, *index, *cache, *ptr;
        if ((array = get(a, &arg_layout, G_ARRAY, s_array_attr)) == NULL)
            goto error;
        cache = array_cache(array);
        Py_DECREF(array);
        if (cache == NULL)
            goto error;
        ptr = PyDict_GetItemWithError(cache, s_ptr);       /* borrowed */
        Py_XINCREF(ptr);
        Py_DECREF(cache);
        if (ptr == NULL) {
            if (PyErr_Occurred())
                goto error;
            Py_DECREF(out);
            Py_DECREF(values);
            Py_RETURN_NONE;             /* not cached yet: the Python path fills it */
        }
        if ((index = get(a, &arg_layout, G_INDEX, s_index)) == NULL) {
            Py_DECREF(ptr);
            goto error;
        }
        Py_ssize_t at = PyNumber_AsSsize_t(index, PyExc_IndexError);
        Py_DECREF(index);
        if (at == -1 && PyErr_Occurred()) {
            Py_DECREF(ptr);
            goto error;
        }
        if (PyTuple_SetItem(out, at, ptr) < 0)      /* steals ptr; out of range: IndexError */
            goto error;
    }
    Py_DECREF(values);
    return out;
error:
    Py_XDECREF(out);
    Py_DECREF(values);
    return NULL;
}

static PyMethodDef target_methods[] = {
    {"numba_values", target_numba_values, METH_O,
     "numba_values(values): the flat values of a packed Numba launch, or None (compiled "
     "PackedTarget.numba_values)."},
    {"pointer_values", (PyCFunction)(void (*)(void))target_pointer_values, METH_FASTCALL,
     "pointer_values(values, arrays): the values of a packed CUDA C launch, or None "
     "(compiled PackedTarget.pointer_values)."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot target_slots[] = {
    {Py_tp_methods, target_methods},
    {Py_tp_doc, "Base of asyncgpu's PackedTarget: the launch values, gathered compiled."},
    {0, NULL},
};

static PyType_Spec target_spec = {
    "asyncgpu._speedups.TargetBase",
    sizeof(PyObject),
    0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    target_slots,
};

int
gather_init(PyObject *module)
{
    if (intern(&s_nbf, "nbf") < 0 || intern(&s_ptr, "ptr") < 0 || intern(&s_key_attr, "key") < 0
            || intern(&s_bigint, "bigint") < 0 || intern(&s_cache, "_cache") < 0
            || intern(&s_array_attr, "array") < 0 || intern(&s_index, "index") < 0)
        return -1;
    if ((int64_min = PyLong_FromLongLong(INT64_MIN)) == NULL
            || (int64_max = PyLong_FromLongLong(INT64_MAX)) == NULL)
        return -1;
    if (add_type(module, "TargetBase", &target_spec) < 0
            || twin(&t_pointer_values, module, "TargetBase", "pointer_values") < 0
            || twin(&t_numba_values, module, "TargetBase", "numba_values") < 0)
        return -1;
    return 0;
}

PyObject *
call_pointer_values(PyObject *target, PyObject *values, PyObject *arrays)
{
    return call_twin(&t_pointer_values, target, (PyObject *[]){values, arrays}, 2);
}

PyObject *
call_numba_values(PyObject *target, PyObject *values)
{
    return call_twin(&t_numba_values, target, &values, 1);
}
