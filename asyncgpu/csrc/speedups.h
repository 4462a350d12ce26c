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
    Py_ssize_t off[10];
} SlotLayout;

int layout(SlotLayout *l, PyObject *type, const char *const *names, int n);
PyObject *get(PyObject *obj, const SlotLayout *layout, int field, PyObject *name);
int truth(PyObject *v);
int less(PyObject *a, PyObject *b);
int less_equal(PyObject *a, PyObject *b);
int intern(PyObject **var, const char *text);

/* asyncgpu.Array and asyncgpu._kernel.ArrayArg (set by configure_binding; read by gather.c) */
extern SlotLayout array_layout, arg_layout;
enum { AR_ALLOC, AR_DTYPE, AR_CONTIGUOUS, AR_LO, AR_HI, AR_CACHE };
enum { G_INDEX, G_PARAM, G_ARRAY, G_READ, G_WRITE, G_KEY, G_ALLOC, G_LO, G_HI, G_LABEL };

/* each part: its types added to the module, its strings interned */
int launcher_init(PyObject *module);
int tracker_init(PyObject *module);
int binding_init(PyObject *module);
int gather_init(PyObject *module);
int add_type(PyObject *module, const char *name, PyType_Spec *spec);

/* the configure functions of the parts (module-level) */
PyObject *configure(PyObject *module, PyObject *args);
PyObject *configure_tracker(PyObject *module, PyObject *args);
PyObject *configure_binding(PyObject *module, PyObject *args);

#endif
