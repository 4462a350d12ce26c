"""One-node graph lanes (``single_node_graphs``, ``asyncgpu/csrc/graph_lanes.c``): each kernel
``DriverCalls.launchKernel`` enqueues goes through its stream's one-node graph, with C functions
(ctypes callbacks) standing in for the driver's entry points.

What a user relies on: every kernel is enqueued exactly once, on the stream it was meant for,
with its own function, dimensions and parameter buffer; whatever the driver refuses on the
graph path is launched the ordinary way (so the kernel's own error is the one raised); a lane
that fails where the ordinary launch works is not used again; lanes are off while a capture is
engaged; and destroying them waits for the device first.
"""

from __future__ import annotations

import ctypes
import math
import types

import pytest

from asyncgpu.core import compiled as _compiled
from asyncgpu.core.config import Options

pytestmark = pytest.mark.skipif(_compiled.speedups is None,
                                reason="asyncgpu._speedups is not built")

P, U, I, ULL, SZ = (ctypes.c_void_p, ctypes.c_uint, ctypes.c_int, ctypes.c_ulonglong,
                    ctypes.c_size_t)
PP = ctypes.POINTER(ctypes.c_void_p)


class NodeParams(ctypes.Structure):
    _fields_ = [("func", P), ("gx", U), ("gy", U), ("gz", U), ("bx", U), ("by", U),
                ("bz", U), ("shared", U), ("kernel_params", P), ("extra", P), ("kern", P),
                ("ctx", P)]

    def launch(self) -> tuple:
        return (self.func or self.kern or 0, self.gx, self.gy, self.gz, self.bx, self.by, self.bz,
                self.shared, self.kernel_params or 0, self.extra or 0)


class Driver:
    """The twelve entry points ``DriverCalls`` takes, logging what each is asked and returning
    ``status[name]``. Graph, node and executable handles are numbered from 0x100."""

    NAMES = ("launch", "record", "wait", "query", "graph_launch", "create", "add_node",
             "instantiate", "set_params", "exec_destroy", "graph_destroy", "ctx_sync")

    def __init__(self) -> None:
        self.log: list[tuple] = []
        self.status = dict.fromkeys(self.NAMES, 0)
        self.handles = 0x100
        # what each executable graph's node holds now: (func, dims..., params, extra)
        self.execs: dict[int, tuple] = {}
        self.nodes: dict[int, tuple] = {}
        # handles that are CUkernels: a kernel node takes them as ``kern``, never as ``func``
        self.kernels: set[int] = set()
        self.forms: list[str] = []      # "func" or "kern", per node parameters taken

        def new_handle(out) -> int:
            self.handles += 1
            out[0] = self.handles
            return self.handles

        def logged(name, fn=None):
            def call(*args):
                status = self.status[name]
                self.log.append((name, *args))
                if status == 0 and fn is not None:
                    fn(*args)
                return status
            return call

        def launch(*args):
            self.log.append(("launch", *[a or 0 for a in args]))
            return self.status["launch"]

        def graph_launch(exec_, stream):
            self.log.append(("graph_launch", exec_, stream,
                             self.execs.get(exec_)))
            return self.status["graph_launch"]

        def refused(params) -> bool:
            p = params.contents
            if p.func in self.kernels:
                return True
            self.forms.append("kern" if p.func is None else "func")
            return False

        def add_node(out, graph, deps, ndeps, params):
            if refused(params):
                self.log.append(("add_node", graph, "refused"))
                return 1
            node = new_handle(out)
            self.nodes[node] = params.contents.launch()
            self.log.append(("add_node", graph, node, self.nodes[node]))
            return 0

        def instantiate(out, graph, flags):
            exec_ = new_handle(out)
            self.execs[exec_] = next(v for k, v in reversed(self.nodes.items()))
            return 0

        def set_params(exec_, node, params):
            if refused(params):
                return 1
            self.execs[exec_] = params.contents.launch()

        entries = [
            (launch, ctypes.CFUNCTYPE(I, P, U, U, U, U, U, U, U, P, P, P)),
            (logged("record"), ctypes.CFUNCTYPE(I, P, P)),
            (logged("wait"), ctypes.CFUNCTYPE(I, P, P, U)),
            (logged("query"), ctypes.CFUNCTYPE(I, P)),
            (lambda e, s: graph_launch(e, s) if self.status["graph_launch"] == 0
             else (self.log.append(("graph_launch", e, s, "refused")) or
                   self.status["graph_launch"]), ctypes.CFUNCTYPE(I, P, P)),
            (logged("create", lambda out, flags: new_handle(out)), ctypes.CFUNCTYPE(I, PP, U)),
            (lambda *a: self.status["add_node"] or add_node(*a),
             ctypes.CFUNCTYPE(I, PP, P, P, SZ, ctypes.POINTER(NodeParams))),
            (logged("instantiate", instantiate), ctypes.CFUNCTYPE(I, PP, P, ULL)),
            (lambda e, n, p: (self.log.append(("set_params", e, n)) or
                              self.status["set_params"] or set_params(e, n, p) or 0),
             ctypes.CFUNCTYPE(I, P, P, ctypes.POINTER(NodeParams))),
            (logged("exec_destroy"), ctypes.CFUNCTYPE(I, P)),
            (logged("graph_destroy"), ctypes.CFUNCTYPE(I, P)),
            (logged("ctx_sync"), ctypes.CFUNCTYPE(I)),
        ]
        self.entries = [kind(fn) for fn, kind in entries]
        self.addresses = tuple(ctypes.cast(e, ctypes.c_void_p).value for e in self.entries)

    def names(self) -> list[str]:
        return [c[0] for c in self.log]

    def enqueued(self) -> list[tuple]:
        """What reached each stream, in order: (stream, func, dims..., params, extra)."""
        out = []
        for c in self.log:
            if c[0] == "launch":
                out.append((c[9], *c[1:9], c[10], c[11]))
            elif c[0] == "graph_launch" and c[3] != "refused":
                out.append((c[2], *c[3]))
        return out


class CupyError(Exception):
    pass


def make_calls(drv: Driver, cupy_log: list, lanes: bool = True, cupy_fails: bool = False):
    def cupy_launch(*args):
        cupy_log.append(args)
        if cupy_fails:
            raise CupyError("launch refused")
        return "launch by cupy"

    calls = _compiled.speedups.DriverCalls(drv.addresses, cupy_launch, print, print)
    calls.single_node_graphs = lanes
    return calls


def launch_args(f: int, stream: int, extra: int, grid: int = 4) -> tuple:
    return (f, grid, 1, 1, 128, 1, 1, 0, stream, 0, extra)


def as_enqueued(args: tuple) -> tuple:
    return (args[8], *args[:8], args[9], args[10])


def test_each_kernel_is_enqueued_once_through_its_lane():
    drv, cupy_log = Driver(), []
    calls = make_calls(drv, cupy_log)
    sequence = [launch_args(0x10, 0xA, 0x500), launch_args(0x11, 0xA, 0x501, grid=7),
                launch_args(0x10, 0xB, 0x502), launch_args(0x10, 0xA, 0x503, grid=9),
                launch_args(0x11, 0xA, 0x504), launch_args(0x10, 0xB, 0x505)]
    for args in sequence:
        assert calls.launchKernel(*args) is None
    assert drv.enqueued() == [as_enqueued(a) for a in sequence]
    # one graph per function and stream, made on its first launch there; later launches set
    # the node's parameters
    assert drv.names().count("create") == 3 and drv.names().count("instantiate") == 3
    assert drv.names().count("set_params") == 3 and "launch" not in drv.names()
    assert calls.lane_launches == 6 and cupy_log == []


def test_a_library_kernel_handle_goes_in_the_node_as_kern():
    drv, cupy_log = Driver(), []
    calls = make_calls(drv, cupy_log)
    drv.kernels.add(0x77)           # (numba-cuda's kernels come from cuLibraryGetKernel)
    sequence = [launch_args(0x77, 0xA, 0x500), launch_args(0x77, 0xA, 0x501, grid=3),
                launch_args(0x10, 0xA, 0x502), launch_args(0x77, 0xA, 0x503)]
    for args in sequence:
        calls.launchKernel(*args)
    assert drv.enqueued() == [as_enqueued(a) for a in sequence]
    assert "launch" not in drv.names() and calls.lane_launches == 4
    assert drv.forms == ["kern", "kern", "func", "kern"]


def test_lanes_off_or_unavailable_launch_the_ordinary_way():
    drv, cupy_log = Driver(), []
    calls = make_calls(drv, cupy_log, lanes=False)
    calls.launchKernel(*launch_args(0x10, 0xA, 0x500))
    assert drv.names() == ["launch"] and calls.single_node_graphs is False
    five = _compiled.speedups.DriverCalls(drv.addresses[:5], print, print, print)
    five.single_node_graphs = True                  # no graph entry points: stays off
    assert five.single_node_graphs is False and five.lanes_available is False
    assert calls.lanes_available is True


def test_a_refused_lane_launch_goes_the_ordinary_way_and_the_lane_is_dropped():
    drv, cupy_log = Driver(), []
    calls = make_calls(drv, cupy_log)
    calls.launchKernel(*launch_args(0x10, 0xA, 0x500))
    drv.status["set_params"] = 1                    # the driver will not take this update
    second = launch_args(0x10, 0xA, 0x501)
    assert calls.launchKernel(*second) is None
    assert drv.enqueued()[-1] == as_enqueued(second)
    assert drv.names()[-4:] == ["set_params", "launch", "exec_destroy", "graph_destroy"]
    drv.status["set_params"] = 0
    drv.log.clear()
    third = launch_args(0x10, 0xA, 0x502)
    calls.launchKernel(*third)                      # the lane is not tried again
    assert drv.names() == ["launch"] and drv.enqueued() == [as_enqueued(third)]


def test_a_kernel_refused_both_ways_raises_cupys_error_and_keeps_the_lane():
    drv, cupy_log = Driver(), []
    calls = make_calls(drv, cupy_log, cupy_fails=True)
    calls.launchKernel(*launch_args(0x10, 0xA, 0x500))
    drv.status.update(graph_launch=1, launch=1)      # the kernel itself is refused
    bad = launch_args(0x10, 0xA, 0x501, grid=0)
    with pytest.raises(CupyError, match="launch refused"):
        calls.launchKernel(*bad)
    assert cupy_log == [bad]
    drv.status.update(graph_launch=0, launch=0)
    drv.log.clear()
    good = launch_args(0x10, 0xA, 0x502)
    calls.launchKernel(*good)                       # the lane is still in use
    assert drv.names() == ["set_params", "graph_launch"]
    assert drv.enqueued() == [as_enqueued(good)]


def test_a_lane_that_cannot_be_made_is_not_tried_again_once_the_kernel_launches():
    drv, cupy_log = Driver(), []
    calls = make_calls(drv, cupy_log)
    drv.status["instantiate"] = 1
    first = launch_args(0x10, 0xA, 0x500)
    calls.launchKernel(*first)
    assert drv.enqueued() == [as_enqueued(first)]
    assert drv.names().count("graph_destroy") == 1  # the half-made graph is not leaked
    drv.status["instantiate"] = 0
    drv.log.clear()
    calls.launchKernel(*launch_args(0x10, 0xA, 0x501))
    assert drv.names() == ["launch"]
    calls.launchKernel(*launch_args(0x10, 0xB, 0x501))      # another stream gets its lane
    calls.launchKernel(*launch_args(0x11, 0xA, 0x501))      # and another function
    assert drv.names()[1:] == ["create", "add_node", "instantiate", "graph_launch"] * 2


def test_release_waits_for_the_device_then_destroys_every_lane():
    drv, cupy_log = Driver(), []
    calls = make_calls(drv, cupy_log)
    for stream in (0xA, 0xB, 0xC):
        calls.launchKernel(*launch_args(0x10, stream, 0x500))
    drv.log.clear()
    calls.release_lanes()
    assert drv.names() == ["ctx_sync"] + ["exec_destroy", "graph_destroy"] * 3
    drv.log.clear()
    calls.launchKernel(*launch_args(0x10, 0xA, 0x500))      # made again when needed
    assert drv.names() == ["create", "add_node", "instantiate", "graph_launch"]


def test_beyond_the_lane_table_kernels_launch_the_ordinary_way():
    drv, cupy_log = Driver(), []
    calls = make_calls(drv, cupy_log)
    lanes_max = _compiled.speedups.LANES_MAX       # the table's capacity
    extra = 16
    side = math.isqrt(lanes_max + extra - 1) + 1    # functions x streams, each pair a lane
    pairs = [(f, s) for f in range(0x10, 0x10 + side) for s in range(1, side + 1)]
    pairs = pairs[:lanes_max + extra]
    for f, stream in pairs:
        calls.launchKernel(*launch_args(f, stream, 0x500))
    assert drv.names().count("instantiate") == lanes_max
    assert drv.names().count("launch") == extra
    drv.log.clear()
    for f, stream in pairs:                         # every lane made is found again
        calls.launchKernel(*launch_args(f, stream, 0x501))
    assert drv.names().count("set_params") == lanes_max
    assert drv.names().count("launch") == extra
    assert len(drv.enqueued()) == lanes_max + extra and calls.lane_launches == 2 * lanes_max


def test_the_backend_turns_lanes_off_while_a_capture_is_engaged():
    from asyncgpu.backends.capture import CaptureError, CaptureTracker
    from asyncgpu.backends.cuda.backend import CudaBackend

    drv = Driver()
    calls = make_calls(drv, [])
    # the CUDA-free parts of a backend, with streams that only say what capture does
    backend = CudaBackend.__new__(CudaBackend)
    backend.captures = CaptureTracker()
    backend.single_node_graphs = Options().single_node_graphs
    backend.runtime = types.SimpleNamespace(streamCaptureModeRelaxed=1)
    backend.cupy = types.SimpleNamespace(cuda=types.SimpleNamespace(Event=lambda **kw: "done"))
    backend.use_calls(calls)
    assert calls.single_node_graphs is True

    class Stream:
        def __init__(self, ptr, refuse=False):
            self.ptr, self.refuse = ptr, refuse

        def begin_capture(self, mode):
            if self.refuse:
                raise CupyError("capture refused")

        def end_capture(self):
            return "g"

    stream = Stream

    origin = stream(0xA)
    backend.begin_capture(origin)
    assert calls.single_node_graphs is False
    calls.launchKernel(*launch_args(0x10, 0xA, 0x500))      # captured as a kernel
    assert drv.names() == ["launch"]
    assert backend.end_capture(origin).handle == "g"
    assert calls.single_node_graphs is True
    with pytest.raises(CaptureError, match="capture refused"):
        backend.begin_capture(stream(0xB, refuse=True))
    assert calls.single_node_graphs is True and not backend.captures.engaged
    backend.single_node_graphs = False              # (configure(single_node_graphs=False))
    backend.use_calls(calls)
    assert calls.single_node_graphs is False
