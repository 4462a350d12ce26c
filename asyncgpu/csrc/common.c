/* asyncgpu._speedups: reading __slots__ at their offsets, and small helpers shared by the
   parts. */
#include <stdarg.h>

#include "speedups.h"

SlotLayout array_layout, arg_layout;

Py_ssize_t
slot_offset(PyTypeObject *type, const char *name)
{
    PyObject *descr = PyObject_GetAttrString((PyObject *)type, name);
    if (descr == NULL)
        return -1;
    if (Py_TYPE(descr) != &PyMemberDescr_Type
            || ((PyMemberDescrObject *)descr)->d_member->type != T_OBJECT_EX) {
        Py_DECREF(descr);
        PyErr_Format(PyExc_TypeError, "%s.%s is not a __slots__ attribute", type->tp_name, name);
        return -1;
    }
    Py_ssize_t off = ((PyMemberDescrObject *)descr)->d_member->offset;
    Py_DECREF(descr);
    return off;
}

/* a < b for Python ints (any other objects: Python's comparison). 1, 0 or -1 (error). */
int
less(PyObject *a, PyObject *b)
{
    if (PyLong_CheckExact(a) && PyLong_CheckExact(b)) {
        int oa, ob;
        long long x = PyLong_AsLongLongAndOverflow(a, &oa);
        long long y = PyLong_AsLongLongAndOverflow(b, &ob);
        if (!oa && !ob && !(x == -1 && PyErr_Occurred()) && !(y == -1 && PyErr_Occurred()))
            return x < y;
        PyErr_Clear();
    }
    return PyObject_RichCompareBool(a, b, Py_LT);
}

int
less_equal(PyObject *a, PyObject *b)
{
    int r = less(b, a);
    return r < 0 ? -1 : !r;
}

int
layout(SlotLayout *l, PyObject *type, const char *const *names, int n)
{
    if (!PyType_Check(type)) {
        PyErr_SetString(PyExc_TypeError, "configure_tracker: expected classes");
        return -1;
    }
    for (int i = 0; i < n; i++)
        if ((l->off[i] = slot_offset((PyTypeObject *)type, names[i])) < 0)
            return -1;
    Py_INCREF(type);
    Py_XSETREF(l->type, (PyTypeObject *)type);
    return 0;
}

int
truth(PyObject *v)
{
    return v == Py_True ? 1 : v == Py_False ? 0 : PyObject_IsTrue(v);
}

int
intern(PyObject **var, const char *text)
{
    *var = PyUnicode_InternFromString(text);
    return *var == NULL ? -1 : 0;
}

int
intern_all(const Name *names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (intern(names[i].var, names[i].text) < 0)
            return -1;
    return 0;
}

int
for_each(PyObject *iterable, int (*fn)(PyObject *item, void *context), void *context)
{
    Items items;
    PyObject *item;
    int r = 0;
    if (items_begin(&items, iterable) < 0)
        return -1;
    while (r == 0 && (item = items_next(&items)) != NULL) {
        r = fn(item, context);
        Py_DECREF(item);
    }
    items_end(&items);
    return r == 0 && PyErr_Occurred() ? -1 : r;
}

PyObject *
list_pop_last(PyObject *list)
{
    Py_ssize_t n = PyList_GET_SIZE(list);
    /* the list's reference passes to the caller; shrinking the size alone is what
       list.pop() does short of giving memory back (list_resize), which a later append reuses */
    PyObject *item = PyList_GET_ITEM(list, n - 1);
    Py_SET_SIZE(list, n - 1);
    return item;
}

static PyTypeObject *append_type;      /* the last type append_item looked up, and its method */
static PyObject *append_method, *s_append_name;

int
append_item(PyObject *seq, PyObject *item)
{
    if (PyList_CheckExact(seq))
        return PyList_Append(seq, item);
    PyTypeObject *type = Py_TYPE(seq);
    if (type != append_type) {
        if (s_append_name == NULL && intern(&s_append_name, "append") < 0)
            return -1;
        PyObject *m = dictless(type) ? _PyType_Lookup(type, s_append_name) : NULL;  /* borrowed */
        if (m == NULL || !PyObject_TypeCheck(m, &PyMethodDescr_Type)) {
            /* an instance dict could shadow it, or it is not a C method: by name */
            PyObject *r = call_method(seq, s_append_name, 1, item);
            Py_XDECREF(r);
            return r == NULL ? -1 : 0;
        }
        Py_XSETREF(append_method, Py_NewRef(m));
        Py_XSETREF(append_type, (PyTypeObject *)Py_NewRef(type));
    }
    PyObject *r = PyObject_Vectorcall(append_method, (PyObject *[]){seq, item}, 2, NULL);
    Py_XDECREF(r);
    return r == NULL ? -1 : 0;
}

PyObject *zero, *one, *minus_one;

int
small_ints_init(void)
{
    if ((zero = PyLong_FromLong(0)) == NULL || (one = PyLong_FromLong(1)) == NULL
            || (minus_one = PyLong_FromLong(-1)) == NULL)
        return -1;
    return 0;
}

int
add_type(PyObject *module, const char *name, PyType_Spec *spec)
{
    PyObject *type = PyType_FromSpec(spec);
    if (type == NULL)
        return -1;
    if (PyModule_AddObject(module, name, type) < 0) {
        Py_DECREF(type);
        return -1;
    }
    return 0;
}

/* obj.name += amount */
int
add_to(PyObject *obj, PyObject *name, PyObject *amount)
{
    PyObject *v = PyObject_GetAttr(obj, name);
    if (v == NULL)
        return -1;
    PyObject *sum = PyNumber_InPlaceAdd(v, amount);
    Py_DECREF(v);
    if (sum == NULL)
        return -1;
    int r = PyObject_SetAttr(obj, name, sum);
    Py_DECREF(sum);
    return r;
}

/* obj.name(*args): a new reference, or NULL with an error set. */
PyObject *
call_method(PyObject *obj, PyObject *name, int nargs, ...)
{
    PyObject *stack[9];         /* stack[0]: free for the callee (ARGUMENTS_OFFSET) */
    va_list ap;
    stack[1] = obj;
    va_start(ap, nargs);
    for (int i = 0; i < nargs && i < 7; i++)
        stack[i + 2] = va_arg(ap, PyObject *);
    va_end(ap);
    return PyObject_VectorcallMethod(
        name, stack + 1, (size_t)(nargs + 1) | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
}

void
raise_in_cleanup(SavedError *saved)
{
#if PY_VERSION_HEX >= 0x030C0000
    PyObject *now = PyErr_GetRaisedException();
    if (saved->value != NULL)
        PyException_SetContext(now, saved->value);     /* (steals) */
    PyErr_SetRaisedException(now);
#else
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    PyErr_NormalizeException(&type, &value, &traceback);
    if (saved->value != NULL) {
        PyErr_NormalizeException(&saved->type, &saved->value, &saved->traceback);
        if (saved->traceback != NULL)
            PyException_SetTraceback(saved->value, saved->traceback);
        PyException_SetContext(value, saved->value);   /* (steals) */
        Py_XDECREF(saved->type);
        Py_XDECREF(saved->traceback);
    }
    PyErr_Restore(type, value, traceback);
#endif
}

/* The runtime's lock: acquire() and release() through the methods its type has, looked up
   once per type (an RLock has no instance dict: nothing can shadow them). */
static PyTypeObject *lock_type;
static PyObject *lock_methods[2], *lock_names[2];

static int
lock_method_call(PyObject *lock, int which)
{
    if (Py_TYPE(lock) != lock_type) {
        for (int i = 0; i < 2; i++)
            if (lock_names[i] == NULL && intern(&lock_names[i], i ? "release" : "acquire") < 0)
                return -1;
        if (!dictless(Py_TYPE(lock))) {
            PyObject *r = PyObject_CallMethodNoArgs(lock, lock_names[which]);
            Py_XDECREF(r);
            return r == NULL ? -1 : 0;
        }
        for (int i = 0; i < 2; i++) {
            PyObject *m = _PyType_Lookup(Py_TYPE(lock), lock_names[i]);
            if (m == NULL) {
                PyErr_Format(PyExc_AttributeError, "'%.100s' object has no attribute '%U'",
                             Py_TYPE(lock)->tp_name, lock_names[i]);
                return -1;
            }
            Py_XSETREF(lock_methods[i], Py_NewRef(m));
        }
        Py_XSETREF(lock_type, (PyTypeObject *)Py_NewRef(Py_TYPE(lock)));
    }
    PyObject *r = PyObject_Vectorcall(lock_methods[which], &lock, 1, NULL);
    Py_XDECREF(r);
    return r == NULL ? -1 : 0;
}

int
lock_acquire(PyObject *lock)
{
    return lock_method_call(lock, 0);
}

int
lock_release(PyObject *lock)
{
    return lock_method_call(lock, 1);
}

PyObject *
unlocked(PyObject *lock, PyObject *result)
{
    SavedError saved;
    save_error(&saved);
    if (lock_release(lock) < 0) {
        raise_in_cleanup(&saved);
        Py_CLEAR(result);
    } else {
        restore_error(&saved);
    }
    return result;
}

PyObject *
call_twin(Twin *t, PyObject *obj, PyObject *const *args, Py_ssize_t nargs)
{
    if (direct(t, obj)) {
        PyMethodDef *m = ((PyMethodDescrObject *)t->descr)->d_method;
        switch (m->ml_flags & (METH_FASTCALL | METH_O | METH_NOARGS | METH_KEYWORDS)) {
        case METH_FASTCALL:
            return ((_PyCFunctionFast)(void (*)(void))m->ml_meth)(obj, args, nargs);
        case METH_FASTCALL | METH_KEYWORDS:
            return ((_PyCFunctionFastWithKeywords)(void (*)(void))m->ml_meth)(obj, args, nargs,
                                                                              NULL);
        case METH_O:
            if (nargs == 1)
                return m->ml_meth(obj, args[0]);
            break;
        case METH_NOARGS:
            if (nargs == 0)
                return m->ml_meth(obj, NULL);
            break;
        }
    }
    PyObject *stack[9];         /* stack[0]: free for the callee (ARGUMENTS_OFFSET) */
    if (nargs > 7) {
        PyErr_SetString(PyExc_SystemError, "call_twin: more than 7 arguments");
        return NULL;
    }
    stack[1] = obj;
    for (Py_ssize_t i = 0; i < nargs; i++)
        stack[i + 2] = args[i];
    return PyObject_VectorcallMethod(t->name, stack + 1,
                                     (size_t)(nargs + 1) | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
}

/* Find a compiled method's descriptor, once its type is in the module. */
int
twin(Twin *t, PyObject *module, const char *type_name, const char *method)
{
    PyObject *type = PyObject_GetAttrString(module, type_name);
    if (type == NULL)
        return -1;
    if (!PyType_Check(type) || intern(&t->name, method) < 0) {
        Py_DECREF(type);
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_TypeError, "%s is not a type", type_name);
        return -1;
    }
    t->descr = PyDict_GetItemWithError(((PyTypeObject *)type)->tp_dict, t->name);
    Py_XINCREF(t->descr);
    Py_DECREF(type);
    if (t->descr == NULL) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_AttributeError, "%s has no method %s", type_name, method);
        return -1;
    }
    return 0;
}

/* obj.<name> += amount, at the slot's offset when obj's exact type is the layout's */
int
add_at(PyObject *obj, const SlotLayout *layout, int field, PyObject *name, PyObject *amount)
{
    if (layout->type != NULL && Py_TYPE(obj) == layout->type) {
        PyObject **slot = (PyObject **)((char *)obj + layout->off[field]), *sum;
        if (*slot != NULL) {
            if ((sum = PyNumber_InPlaceAdd(*slot, amount)) == NULL)
                return -1;
            Py_SETREF(*slot, sum);
            return 0;
        }
    }
    return add_to(obj, name, amount);
}

