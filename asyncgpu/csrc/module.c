/* asyncgpu._speedups: compiled twins of hot methods of asyncgpu (optional).

The model
---------
A launch through asyncgpu runs a few hundred lines of Python. This extension has compiled
versions of the hottest methods on that path, each in its own file:

    launcher.c   Launcher.__call__: a launch a recording remembers, appended without Python
    tracker.c    DependencyTracker.conflicts and commit
    binding.c    Kernel.bind
    gather.c     PackedTarget.numba_values and pointer_values (the values a launch packs)
    common.c     reading __slots__ attributes at their offsets

Each is a method of a base class (LauncherBase, TrackerBase, KernelBase, TargetBase) that the
Python class takes before its Python twin (asyncgpu/_compiled.py), which stays the reference
and the whole implementation where this is not built.

Invariants: the C code keeps no state of its own beyond the classes and callables the
configure functions hand it; it works on the very Python objects the Python code uses, and
gives the same answers, side effects and errors (unusual cases call the same Python methods).
tests/test_*_compiled.py compare each with its twin on random inputs.

Example: ``asyncgpu._compiled.use(False)`` makes every class use its Python methods again.

Built by ``pip install`` (setuptools, optional: a failed build leaves the Python methods) or by
``python3 tools/build_speedups.py`` in a source tree. Plain CPython C API: no CUDA, no NumPy.
*/
#include "speedups.h"

static PyMethodDef methods[] = {
    {"configure", configure, METH_VARARGS,
     "configure(runtime_globals, launch_in_python): where the runtime is found (None: not "
     "imported yet), and the Python launch every case but the remembered one goes to."},
    {"configure_tracker", configure_tracker, METH_VARARGS,
     "configure_tracker(tracker, live, node, access_types, RAW, WAR, WAW): the classes whose "
     "__slots__ the compiled tracker reads at their offsets, and the reasons it reports."},
    {"configure_binding", configure_binding, METH_VARARGS,
     "configure_binding(kernel, array, allocation, array_arg, numbers): the classes whose "
     "__slots__ the compiled bind reads and writes, and the plain number types."},
    {NULL, NULL, 0, NULL},
};

static int
exec_module(PyObject *module)
{
    if (launcher_init(module) < 0 || tracker_init(module) < 0 || binding_init(module) < 0
            || gather_init(module) < 0)
        return -1;
    return 0;
}

static PyModuleDef_Slot module_slots[] = {
    {Py_mod_exec, exec_module},
    {0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    "asyncgpu._speedups",
    "Compiled twins of five hot methods of asyncgpu (optional; see asyncgpu/csrc/module.c).",
    0,
    methods,
    module_slots,
    NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    return PyModuleDef_Init(&module_def);
}
