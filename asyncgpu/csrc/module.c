/* asyncgpu._speedups: compiled twins of hot methods of asyncgpu (optional).

The model
---------
A launch through asyncgpu runs a few hundred lines of Python. This extension has compiled
versions of the hottest methods on that path, each in its own file:

    launcher.c   Launcher.__call__: a launch a recording remembers, appended without Python
    tracker.c    DependencyTracker.conflicts and commit
    binding.c    Kernel.bind
    gather.c     PackedTarget.numba_values and pointer_values (the values a launch packs)
    issue.c      Runtime.launch_kernel and _issue (from the lock to the poll)
    graph_issue.c  Runtime.launch_graph: a replayed graph's node, booking and copies back
    device.c     CudaBackend's calls of a launch (record, wait, event_done, kernel_launch,
                 graph_launch, launch) and PackedLaunch.__call__
    streams.c    Node.__init__, the stream manager's per-launch methods, the policies' picks
    retire.c     the stream manager's retirement and polling (finished, poll)
    memory.c     ExplicitMemory.before_device, before_graph and after_graph (what a launch
                 or a replayed graph books) and FrozenGraph.host_current (its variant)
    recording.c  Recording.__init__, .end_segment (a remembered segment's graph launched
                 again), ._remember and RecordingKey's stored hash
    graph_call.c GraphFunction.__call__: a plain recorded function's entry and exit
    driver.c     DriverCalls: the CUDA calls of a launch, straight into the driver's entry
                 points (not a twin: the cuda backend's choice of callables)
    graph_lanes.c  DriverCalls' one-node graph per kernel and stream (single_node_graphs)
    counters.c   CountersBase: the runtime's statistics counted in C integers (Counters' base)
    common.c     reading __slots__ attributes at their offsets

Each is a method of a base class (LauncherBase, TrackerBase, KernelBase, TargetBase,
RuntimeBase, BackendBase, PackedCallBase, StreamsBase, ReuseBase, DisjointBase, NodeBase,
MemoryBase, FrozenBase, RecordingBase, KeyBase, GraphCallBase) that the Python class takes
before its Python twin (asyncgpu/core/compiled.py), which stays the reference and the whole
implementation where this is not built.

Invariants: the C code keeps no state of its own beyond the classes and callables the
configure functions hand it; it works on the very Python objects the Python code uses, and
gives the same answers, side effects and errors (unusual cases call the same Python methods).
tests/test_*_compiled.py compare each with its twin on random inputs.

Example: ``asyncgpu.core.compiled.use(False)`` makes every class use its Python methods again.

Built by ``pip install`` (setuptools, optional: a failed build leaves the Python methods) or by
``python3 tools/build_speedups.py`` in a source tree. Plain CPython C API: no CUDA headers or
libraries (driver.c calls functions whose addresses it is given), no NumPy.
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
     "configure_binding(kernel, launcher, array, allocation, array_arg, numbers, getitem): "
     "the classes "
     "whose __slots__ the compiled bind reads and writes, the plain number types, and the "
     "Python Kernel.__getitem__ an uncached configuration goes to."},
    {"configure_issue", configure_issue, METH_VARARGS,
     "configure_issue(runtime, counters, node, allocation, user_site, refuse_reentry, "
     "launch_kernel, reduce_parents, HOST, DEVICE, launch_graph, frozen_graph, graph_repeat): "
     "the classes whose __slots__ the compiled launch_kernel, launch_graph and _issue read, "
     "and what they create and call."},
    {"configure_device", configure_device, METH_VARARGS,
     "configure_device(packed_launch, packed_target, packed_plan, python_call, make_launch): "
     "the classes whose __slots__ the compiled packed launch reads, its Python twin, and the "
     "Python make_launch every unprepared launch goes to."},
    {"configure_backend", configure_backend, METH_VARARGS,
     "configure_backend(cuda_backend, capture_tracker, graph, check_launch, "
     "forget_finished, graphs_kept): the classes whose __slots__ the compiled backend methods "
     "read, the Python functions of a graph launch's rare cases, and how many launched graphs "
     "are kept before the finished ones are dropped."},
    {"configure_streams", configure_streams, METH_VARARGS,
     "configure_streams(node, stream_state, stream_manager, node_ids, no_nodes): the classes "
     "whose __slots__ the compiled stream methods read and write, the node id counter and the "
     "shared empty parents."},
    {"configure_memory", configure_memory, METH_VARARGS,
     "configure_memory(allocation, HOST, DEVICE, BOTH): the class whose __slots__ the compiled "
     "booking reads and writes, and the location flags."},
    {"configure_frozen", configure_frozen, METH_O,
     "configure_frozen(frozen_graph): the class whose __slots__ the compiled host_current, "
     "before_graph and after_graph read."},
    {"configure_recording", configure_recording, METH_VARARGS,
     "configure_recording(recording, launch_memo, recording_key, frozen_graph, runtime, "
     "launch, recorder_globals, replay_remembered, graph_call, replay_static): the classes whose __slots__ the "
     "compiled end_segment and launcher call read, where it finds finish and replay_remembered, and the "
     "Python replay_remembered it stands for."},
    {NULL, NULL, 0, NULL},
};

static int
exec_module(PyObject *module)
{
    if (small_ints_init() < 0 || launcher_init(module) < 0 || tracker_init(module) < 0
            || binding_init(module) < 0 || gather_init(module) < 0 || issue_init(module) < 0
            || device_init(module) < 0 || streams_init(module) < 0 || memory_init(module) < 0
            || driver_init(module) < 0 || recording_init(module) < 0 || counters_init(module) < 0
            || graph_call_init(module) < 0)
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
    "Compiled twins of hot methods of asyncgpu (optional; see asyncgpu/csrc/module.c).",
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
