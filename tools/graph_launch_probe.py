"""Is one kernel cheaper to enqueue as a one-node graph than with ``cuLaunchKernel``?

Everything through ctypes into ``libcuda`` (so every way pays the same wrapper cost), one
stream, the overhead benchmark's 3-array kernel, alternating rounds, medians:

* ``ctypes_null``: ``cuCtxGetCurrent``, the cost of a ctypes call itself;
* ``launch``: ``cuLaunchKernel`` with a packed parameter buffer;
* ``direct_launch``: the same through asyncgpu's ``DriverCalls`` (no ctypes);
* ``graph``: ``cuGraphLaunch`` of one instantiated one-node graph;
* ``set``: ``cuGraphExecKernelNodeSetParams`` alone (the pointers of one of 64 argument sets);
* ``set_graph``: both, the way a launch would use a per-stream graph;
* ``*_wall``: the same loops' wall time including a final synchronize (device throughput).

usage: PYTHONPATH=. python3 tools/graph_launch_probe.py [rounds] [--json FILE]
"""

from __future__ import annotations

import ctypes
import json
import statistics
import sys
import time

import numpy as np

SRC = ('extern "C" __global__ void k3(const float* a0, const float* a1, float* out) '
       "{ out[threadIdx.x] = a0[threadIdx.x] + a1[threadIdx.x]; }")


class KernelNodeParams(ctypes.Structure):
    _fields_ = [("func", ctypes.c_void_p),
                ("gridDimX", ctypes.c_uint), ("gridDimY", ctypes.c_uint),
                ("gridDimZ", ctypes.c_uint),
                ("blockDimX", ctypes.c_uint), ("blockDimY", ctypes.c_uint),
                ("blockDimZ", ctypes.c_uint), ("sharedMemBytes", ctypes.c_uint),
                ("kernelParams", ctypes.c_void_p), ("extra", ctypes.c_void_p),
                ("kern", ctypes.c_void_p), ("ctx", ctypes.c_void_p)]


def _entry(lib, *names):
    for name in names:
        try:
            fn = getattr(lib, name)
        except AttributeError:
            continue
        fn.restype = ctypes.c_int
        return fn
    raise AttributeError(names)


def main() -> None:
    import cupy

    from asyncgpu.backends._driver import driver_calls

    rounds = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 9
    lib = ctypes.CDLL("libcuda.so.1")
    stream = cupy.cuda.Stream(non_blocking=True)
    raw = cupy.RawKernel(SRC, "k3")
    ins = [cupy.ones(32, np.float32) for _ in range(2)]
    outs = [cupy.zeros(32, np.float32) for _ in range(64)]
    raw((1,), (32,), (ins[0], ins[1], outs[0]), stream=stream)
    stream.synchronize()
    fn = raw.kernel.ptr
    sp = stream.ptr

    bufs, extras, keep = [], [], []
    for o in outs:
        buf = (ctypes.c_uint64 * 3)(ins[0].data.ptr, ins[1].data.ptr, o.data.ptr)
        size = ctypes.c_size_t(24)
        extra = (ctypes.c_void_p * 5)(1, ctypes.addressof(buf), 2, ctypes.addressof(size), 0)
        keep.append((buf, size, extra))
        bufs.append(buf)
        extras.append(ctypes.addressof(extra))

    launch = _entry(lib, "cuLaunchKernel")
    launch.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3
    null = _entry(lib, "cuCtxGetCurrent")
    cur = ctypes.c_void_p()
    graph_create = _entry(lib, "cuGraphCreate")
    add_node = _entry(lib, "cuGraphAddKernelNode_v2", "cuGraphAddKernelNode")
    instantiate = _entry(lib, "cuGraphInstantiateWithFlags")
    graph_launch = _entry(lib, "cuGraphLaunch")
    graph_launch.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    set_params = _entry(lib, "cuGraphExecKernelNodeSetParams_v2",
                        "cuGraphExecKernelNodeSetParams")
    set_params.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]

    params = [KernelNodeParams(fn, 1, 1, 1, 32, 1, 1, 0, None, e, None, None) for e in extras]
    graph = ctypes.c_void_p()
    node = ctypes.c_void_p()
    exe = ctypes.c_void_p()
    assert graph_create(ctypes.byref(graph), 0) == 0
    rc = add_node(ctypes.byref(node), graph, None, ctypes.c_size_t(0), ctypes.byref(params[0]))
    assert rc == 0, rc
    assert instantiate(ctypes.byref(exe), graph, ctypes.c_ulonglong(0)) == 0
    ev, nd, pp = exe.value, node.value, [ctypes.addressof(p) for p in params]

    calls = driver_calls(cupy)

    # the same across several streams, each with its own one-node graph, taken in turn, and
    # each launch followed by an event record: the pattern of asyncgpu's independent launches
    lanes = int(next((a.split("=")[1] for a in sys.argv if a.startswith("--lanes=")), 16))
    streams = [cupy.cuda.Stream(non_blocking=True) for _ in range(lanes)]
    sps = [st.ptr for st in streams]
    execs, lane_nodes = [], []
    for _ in range(lanes):
        g, nd_, ex = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
        assert graph_create(ctypes.byref(g), 0) == 0
        assert add_node(ctypes.byref(nd_), g, None, ctypes.c_size_t(0),
                        ctypes.byref(params[0])) == 0
        assert instantiate(ctypes.byref(ex), g, ctypes.c_ulonglong(0)) == 0
        execs.append(ex.value)
        lane_nodes.append(nd_.value)
    events = [cupy.cuda.Event(block=False, disable_timing=True) for _ in range(64)]
    evs = [e.ptr for e in events]
    record = _entry(lib, "cuEventRecord")
    record.argtypes = [ctypes.c_void_p, ctypes.c_void_p]

    def check(rc):
        if rc:
            raise RuntimeError(rc)

    loops = {
        "ctypes_null": lambda n: [null(ctypes.byref(cur)) for _ in range(n)],
        "launch": lambda n: [launch(fn, 1, 1, 1, 32, 1, 1, 0, sp, None, extras[i & 63])
                             for i in range(n)],
        "graph": lambda n: [graph_launch(ev, sp) for _ in range(n)],
        "set": lambda n: [set_params(ev, nd, pp[i & 63]) for i in range(n)],
        "set_graph": lambda n: [(set_params(ev, nd, pp[i & 63]), graph_launch(ev, sp))
                                for i in range(n)],
    }
    m = lanes
    loops.update({
        "launch_rot": lambda n: [launch(fn, 1, 1, 1, 32, 1, 1, 0, sps[i % m], None,
                                        extras[i & 63]) for i in range(n)],
        "set_graph_rot": lambda n: [(set_params(execs[i % m], lane_nodes[i % m], pp[i & 63]),
                                     graph_launch(execs[i % m], sps[i % m]))
                                    for i in range(n)],
        "launch_rot_rec": lambda n: [(launch(fn, 1, 1, 1, 32, 1, 1, 0, sps[i % m], None,
                                             extras[i & 63]), record(evs[i & 63], sps[i % m]))
                                     for i in range(n)],
        "set_graph_rot_rec": lambda n: [(set_params(execs[i % m], lane_nodes[i % m],
                                                    pp[i & 63]),
                                         graph_launch(execs[i % m], sps[i % m]),
                                         record(evs[i & 63], sps[i % m])) for i in range(n)],
    })
    if calls is not None:
        loops["direct_launch"] = lambda n: [
            calls.launchKernel(fn, 1, 1, 1, 32, 1, 1, 0, sp, 0, extras[i & 63])
            for i in range(n)]
    for f in loops.values():
        f(100)
    cupy.cuda.Device().synchronize()
    # a result check: the graph with its parameters set writes the output it was given
    outs[5].fill(0)
    check(set_params(ev, nd, pp[5]))
    check(graph_launch(ev, sp))
    stream.synchronize()
    assert float(outs[5][0]) == 2.0, "graph launch with set parameters did not run"

    # the completion event's record (and the parent's wait) as nodes of the lane's graph,
    # their events set per launch, against the separate calls; two streams taken in turn
    add_rec = _entry(lib, "cuGraphAddEventRecordNode")
    add_wait = _entry(lib, "cuGraphAddEventWaitNode")
    set_rec = _entry(lib, "cuGraphExecEventRecordNodeSetEvent")
    set_wait = _entry(lib, "cuGraphExecEventWaitNodeSetEvent")
    for f_ in (set_rec, set_wait):
        f_.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    wait_event = _entry(lib, "cuStreamWaitEvent")
    wait_event.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint]

    def lane_graph(with_wait):
        g, k, r, w, ex = (ctypes.c_void_p() for _ in range(5))
        assert graph_create(ctypes.byref(g), 0) == 0
        deps = None
        ndeps = 0
        if with_wait:
            assert add_wait(ctypes.byref(w), g, None, ctypes.c_size_t(0),
                            ctypes.c_void_p(evs[0])) == 0
            deps, ndeps = ctypes.byref(w), 1
        assert add_node(ctypes.byref(k), g, deps, ctypes.c_size_t(ndeps),
                        ctypes.byref(params[0])) == 0
        assert add_rec(ctypes.byref(r), g, ctypes.byref(k), ctypes.c_size_t(1),
                       ctypes.c_void_p(evs[1])) == 0
        assert instantiate(ctypes.byref(ex), g, ctypes.c_ulonglong(0)) == 0
        return ex.value, k.value, r.value, w.value

    kr = [lane_graph(False) for _ in range(2)]
    wkr = [lane_graph(True) for _ in range(2)]
    s2 = sps[:2]
    loops.update({
        "k+rec": lambda n: [(set_params(execs[i & 1], lane_nodes[i & 1], pp[i & 63]),
                             graph_launch(execs[i & 1], s2[i & 1]),
                             record(evs[i & 63], s2[i & 1])) for i in range(n)],
        "[k,rec]": lambda n: [(set_params(kr[i & 1][0], kr[i & 1][1], pp[i & 63]),
                               set_rec(kr[i & 1][0], kr[i & 1][2], evs[i & 63]),
                               graph_launch(kr[i & 1][0], s2[i & 1])) for i in range(n)],
        "wait+k+rec": lambda n: [(wait_event(s2[i & 1], evs[(i - 1) & 63], 0),
                                  set_params(execs[i & 1], lane_nodes[i & 1], pp[i & 63]),
                                  graph_launch(execs[i & 1], s2[i & 1]),
                                  record(evs[i & 63], s2[i & 1])) for i in range(n)],
        "[wait,k,rec]": lambda n: [(set_wait(wkr[i & 1][0], wkr[i & 1][3], evs[(i - 1) & 63]),
                                    set_params(wkr[i & 1][0], wkr[i & 1][1], pp[i & 63]),
                                    set_rec(wkr[i & 1][0], wkr[i & 1][2], evs[i & 63]),
                                    graph_launch(wkr[i & 1][0], s2[i & 1]))
                                   for i in range(n)],
    })

    # may a node's function change? to another module's kernel, and to one of the same module
    other = cupy.RawKernel(SRC.replace("k3", "k3b"), "k3b")
    module = cupy.RawModule(code=SRC + SRC.replace("k3", "k3c"))
    same_a, same_b = module.get_function("k3"), module.get_function("k3c")
    for label, f1, f2 in (("another module", fn, other.kernel.ptr),
                          ("the same module", same_a.kernel.ptr, same_b.kernel.ptr)):
        g, nd_, ex = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
        p1 = KernelNodeParams(f1, 1, 1, 1, 32, 1, 1, 0, None, extras[0], None, None)
        p2 = KernelNodeParams(f2, 2, 1, 1, 64, 1, 1, 0, None, extras[1], None, None)
        graph_create(ctypes.byref(g), 0)
        add_node(ctypes.byref(nd_), g, None, ctypes.c_size_t(0), ctypes.byref(p1))
        instantiate(ctypes.byref(ex), g, ctypes.c_ulonglong(0))
        print(f"set_params to a function of {label}: status",
              set_params(ex.value, nd_.value, ctypes.addressof(p2)))
    p3 = KernelNodeParams(fn, 2, 1, 1, 64, 1, 1, 0, None, extras[2], None, None)
    print("set_params with other dimensions: status",
          set_params(execs[0], lane_nodes[0], ctypes.addressof(p3)))

    n = 1000
    host: dict[str, list[float]] = {k: [] for k in loops}
    wall: dict[str, list[float]] = {k: [] for k in loops}
    for _ in range(rounds):
        for name, f in loops.items():
            cupy.cuda.Device().synchronize()
            t0 = time.perf_counter()
            f(n)
            t1 = time.perf_counter()
            cupy.cuda.Device().synchronize()
            t2 = time.perf_counter()
            host[name].append((t1 - t0) / n * 1e6)
            wall[name].append((t2 - t0) / n * 1e6)
    result = {name: {"host_us": statistics.median(host[name]),
                     "wall_us": statistics.median(wall[name])} for name in loops}
    for name, r in result.items():
        print(f"{name:15s} host {r['host_us']:6.2f} us   wall {r['wall_us']:6.2f} us")
    if "--json" in sys.argv:
        with open(sys.argv[sys.argv.index("--json") + 1], "w") as fh:
            json.dump(result, fh, indent=1)


if __name__ == "__main__":
    main()
