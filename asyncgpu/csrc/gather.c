#include "speedups.h"
#include <stdint.h>

/* ---- A packed launch's values --------------------------------------------------------------
   PackedTarget.numba_values and pointer_values of asyncgpu/backends/_cuda_kernels.py's
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

static PyObject *
target_numba_values(PyObject *self, PyObject *values)
{
    PyObject *key = PyObject_GetAttr(self, s_key_attr), *flat = NULL, *result = NULL;
    if (key == NULL)
        return NULL;
    if (!PyList_CheckExact(values) || !PyList_Check(key)
            || PyList_GET_SIZE(key) != PyList_GET_SIZE(values)) {
        Py_DECREF(key);
        Py_RETURN_NONE;
    }
    if ((flat = PyList_New(0)) == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(values); i++) {
        PyObject *v = PyList_GET_ITEM(values, i), *k = PyList_GET_ITEM(key, i), *want;
        int same;
        if (Py_TYPE(v) == array_layout.type) {
            PyObject *cache = array_cache(v);
            if (cache == NULL)
                goto done;
            PyObject *fields = PyDict_GetItemWithError(cache, s_nbf);      /* borrowed */
            Py_XINCREF(fields);
            Py_DECREF(cache);
            if (fields == NULL) {
                if (PyErr_Occurred())
                    goto done;
                goto miss;
            }
            if (!PyTuple_CheckExact(fields) || PyTuple_GET_SIZE(fields) != 2) {
                Py_DECREF(fields);
                goto miss;
            }
            want = PyTuple_GET_ITEM(fields, 0);
            same = want == k ? 1 : PyObject_RichCompareBool(want, k, Py_EQ);
            if (same > 0) {
                Py_ssize_t n = PyList_GET_SIZE(flat);
                same = PyList_SetSlice(flat, n, n, PyTuple_GET_ITEM(fields, 1)) < 0 ? -1 : 1;
            }
            Py_DECREF(fields);
        } else {
            want = (PyObject *)Py_TYPE(v);
            if (PyLong_CheckExact(v)) {
                int lo = PyObject_RichCompareBool(int64_min, v, Py_LE);
                int hi = lo > 0 ? PyObject_RichCompareBool(v, int64_max, Py_LE) : lo;
                if (hi < 0)
                    goto done;
                if (!hi)
                    want = s_bigint;
            }
            same = want == k ? 1 : PyObject_RichCompareBool(want, k, Py_EQ);
            if (same > 0 && PyList_Append(flat, v) < 0)
                same = -1;
        }
        if (same < 0)
            goto done;
        if (!same)
            goto miss;
    }
    result = PyList_AsTuple(flat);
    goto done;
miss:
    result = Py_None;
    Py_INCREF(result);
done:
    Py_DECREF(key);
    Py_XDECREF(flat);
    return result;
}

static PyObject *
target_pointer_values(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyList_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "pointer_values(values, arrays: list)");
        return NULL;
    }
    PyObject *out = PySequence_List(args[0]), *arrays = args[1];
    if (out == NULL)
        return NULL;
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
        if (PyList_SetItem(out, at, ptr) < 0)       /* steals ptr */
            goto error;
    }
    PyObject *result = PyList_AsTuple(out);
    Py_DECREF(out);
    return result;
error:
    Py_DECREF(out);
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
