"""Options of the runtime, and the one place where ``ASYNCGPU_*`` environment variables are read.

:class:`Options` is a frozen dataclass; :func:`options_from_env` builds the defaults from the
environment once, and :func:`asyncgpu.configure` derives new instances with
:func:`dataclasses.replace`. Every variable is documented in ``docs/reference/environment.md``.
"""

from __future__ import annotations

import dataclasses
import numbers
import operator
import os
import sys
from dataclasses import dataclass
from typing import Any, Literal

Backend = Literal["auto", "cuda", "sim"]
Execution = Literal["async", "sync"]
Dependency = Literal["with-const", "no-const"]
NewStream = Literal["reuse", "always-new"]
ParentStream = Literal["disjoint", "same-as-parent"]
Prefetch = Literal["auto", "off"]
Memory = Literal["managed", "explicit"]
SimStrategy = Literal["random", "pct", "reverse", "starve", "eager", "lazy"]
DevicePolicy = Literal["round-robin", "stream-aware", "min-transfer-size", "min-min", "min-max"]
#: The most devices one runtime spreads work over: where an allocation's current copies are is
#: a bit set in a C int of the compiled launch path (the host's bit and one per device).
MAX_DEVICES = 30
#: The largest value of a count option (``max_streams``, ``poll_threshold``, ``copy_chunks``,
#: the recorder's): what a C ``ssize_t`` holds (``sys.maxsize``), the type the compiled launch
#: path keeps counts in (``asyncgpu.core.streams``, ``asyncgpu.runtime.chunks``). A larger one
#: would pass every other check and fail only as ``configure`` builds the runtime's parts.
MAX_COUNT = sys.maxsize

#: What ``devices`` may be: a count (the devices from ``device`` on), the device numbers, or
#: every device of the host.
Devices = int | tuple[int, ...] | Literal["all"]

_CHOICES: dict[str, tuple[str, ...]] = {
    "backend": ("auto", "cuda", "sim"),
    "execution": ("async", "sync"),
    "dependency": ("with-const", "no-const"),
    "new_stream": ("reuse", "always-new"),
    "parent_stream": ("disjoint", "same-as-parent"),
    "prefetch": ("auto", "off"),
    "memory": ("managed", "explicit"),
    "sim_strategy": ("random", "pct", "reverse", "starve", "eager", "lazy"),
    "graph_streams": ("opara", "nimble", "single"),
    "graph_order": ("topological", "opara", "ios"),
    "device_policy": ("round-robin", "stream-aware", "min-transfer-size", "min-min", "min-max"),
    "step_timing": ("sampled", "every"),
}

#: The integer options (``devices`` where it is a count): NumPy's integers are taken for them,
#: as Python ints.
_INTEGERS = ("copy_chunks", "max_streams", "poll_threshold", "device", "devices", "sim_devices",
             "stress_seed", "sim_seed", "graph_cache", "graph_max_streams", "graph_ios_group",
             "graph_ios_groups", "graph_ios_part", "graph_ios_max")

#: The options a backend object is built from: changing one gives the runtime a new backend, and
#: its arrays move to it (``asyncgpu.runtime.switch``). ``backend``, ``device``, ``devices`` and
#: ``sim_devices`` are not among them: changing those retires the runtime and its arrays.
BACKEND_BUILD = ("memory", "sim_seed", "sim_strategy", "sim_tick", "debug_hb", "packed_launch",
                 "direct_driver", "single_node_graphs", "stress", "stress_seed")

@dataclass(frozen=True)
class Options:
    """Every option of the runtime (see ``docs/reference/environment.md`` for each one's variable).

    Policies follow GrCUDA's names: ``dependency`` (``with-const`` lets readers of the same
    array run concurrently; ``no-const`` treats every array argument as written),
    ``new_stream`` (where a node without parents goes), ``parent_stream`` (whether the first
    child inherits its parent's stream, ``disjoint``, or all children do, ``same-as-parent``),
    ``execution`` (``sync`` runs each node and waits for it on one stream: the serial oracle),
    ``prefetch`` (``auto`` prefetches host-current managed arrays before a kernel),
    ``memory`` (``explicit``, the default: device memory with a pinned host mirror and copies
    as DAG nodes, see ``asyncgpu.runtime.memory``; ``managed``: unified memory, prefetched, GrCUDA's
    model). The default was chosen by measurement: explicit was faster in ``parallel`` on all
    six workloads on the H100 (docs/benchmarks.md, "Memory models").

    An integer option takes NumPy's integers too, kept as Python ints (not its bools, nor
    floats); a count is at most :data:`MAX_COUNT`.
    """

    backend: Backend = "auto"
    execution: Execution = "async"
    dependency: Dependency = "with-const"
    new_stream: NewStream = "reuse"
    parent_stream: ParentStream = "disjoint"
    prefetch: Prefetch = "auto"
    memory: Memory = "explicit"
    #: Explicit memory on one device: chunks a large host-to-device copy feeding an
    #: ``elementwise`` kernel is split into, so the kernel's chunks overlap the later copies
    #: (1: never split; on several devices launches run whole).
    copy_chunks: int = 8
    #: Upper bound on streams per device; beyond it work shares the least recently used stream.
    max_streams: int = 32
    #: ``parallel`` mode on one device: two heavy launches (memory-bound, or filling the
    #: device) about to run side by side are timed once together and one after the other, and
    #: kept apart when together is slower (``asyncgpu.core.interference``); off: always side by
    #: side.
    interference: bool = True
    #: Tenants' steps (``asyncgpu.tenant``): ``sampled`` times every step of a tenant whose
    #: steps come 10 ms apart or more, and a random sample, about a hundred a second, of one
    #: whose steps come closer (a timed step's work takes the device longer:
    #: ``asyncgpu.core.tenants``); ``every`` times each step.
    step_timing: Literal["sampled", "every"] = "sampled"
    #: In-flight nodes beyond which each launch polls events to retire finished work.
    poll_threshold: int = 32
    device: int = 0
    #: The GPUs one runtime spreads work over: a count (that many devices from ``device`` on:
    #: 1 is one GPU), a sequence of device numbers, or ``"all"`` (every GPU of the host; on
    #: ``sim``, its ``sim_devices`` virtual devices). A sequence is kept as a tuple.
    devices: Devices = 1
    #: Several devices: how a kernel's device is chosen (GrCUDA's policies): ``round-robin``;
    #: ``stream-aware`` (the device with the fewest busy streams); ``min-transfer-size`` (the
    #: device already holding the most bytes of the kernel's inputs, when that is more than
    #: ``device_data_threshold`` of them; else round-robin); ``min-min`` and ``min-max`` (the
    #: least estimated transfer time, each input taken over its best or its worst link).
    #: Library calls run where most of their inputs' bytes are, whatever the policy.
    device_policy: DevicePolicy = "min-transfer-size"
    #: ``min-transfer-size``: the share of a kernel's input bytes a device must already hold to
    #: be chosen for it (GrCUDA's default, 10%).
    device_data_threshold: float = 0.1
    #: The number of virtual devices of the ``sim`` backend, each with a memory of its own.
    sim_devices: int = 1
    #: Launch kernels with one driver call and a prebuilt parameter buffer (``cuda`` backend);
    #: ``False`` goes through Numba's and CuPy's own launch paths (slower; for diagnosis).
    packed_launch: bool = True
    #: Make a launch's CUDA calls (kernel launch, event record, stream wait, event query,
    #: graph launch) straight into the driver's entry points instead of through CuPy's
    #: wrappers (``cuda`` backend, with ``asyncgpu.backends.cuda.cudriver`` compiled; a refused
    #: call goes through CuPy).
    direct_driver: bool = True
    #: With ``direct_driver``: enqueue each kernel as its stream's one-node CUDA graph (the
    #: node's parameters set, then ``cuGraphLaunch``), which costs the host about half of a
    #: ``cuLaunchKernel`` on the H100 machine; off while a capture is under way.
    single_node_graphs: bool = True
    #: Attach the happens-before checker to the ``cuda`` backend (always on for ``sim``).
    debug_hb: bool = False
    #: Stress mode: random stream assignment and (``cuda``) random spin kernels before nodes,
    #: so that a missing dependency shows as a wrong answer instead of hiding behind timing.
    stress: bool = False
    #: Seed of stress mode's random choices (one seed reproduces one choice sequence).
    stress_seed: int = 0
    sim_seed: int | None = None
    sim_strategy: SimStrategy = "random"
    #: Probability that the simulator takes a step of queued work at each API call.
    sim_tick: float = 0.3
    #: Trace the whole process and write a Chrome trace JSON to this path at exit.
    trace: str | None = None
    #: Recorder: stream allocation of captured graphs (Opara's Algorithm 1, or Nimble's
    #: minimum path cover, or ``single``: one stream, the sequential-graph baseline), launch
    #: order inside them, and the number of keys/graphs kept.
    graph_streams: Literal["opara", "nimble", "single"] = "opara"
    graph_order: Literal["topological", "opara", "ios"] = "topological"
    graph_cache: int = 64
    #: Recorder: at most this many streams inside a captured graph (0: as many as the stream
    #: allocation asks for); beyond it lanes are folded round-robin, which adds edges between
    #: launches that could have run side by side and makes a wide graph cheaper to launch.
    graph_max_streams: int = 0
    #: Recorder: what one more stream inside a graph costs each launch of it, in microseconds
    #: (0.8-1 on the H100 machine: the driver starts every branch on its own). When the
    #: launches are measured short, a graph's lanes are folded to the count that minimizes this
    #: cost plus the estimated run time of the graph. None: measured once on the GPU (1 on
    #: ``sim``); 0 keeps every lane the allocation asks for.
    graph_lane_cost_us: float | None = None
    #: Recorder: time launches when a graph is captured (``opara``: each launch's
    #: memory/compute class; ``ios``: the candidate stages); off: classes from kernel
    #: attributes, and ``ios`` falls back to ``opara``.
    graph_measure: bool = True
    #: Recorder, explicit memory: a replayed graph copies back to the host, right behind it,
    #: the allocations it wrote that the host fetched whole after its previous replay (so the
    #: host's reads then wait for the graph once, not for one fetch each); an allocation the
    #: host then leaves unread is dropped from the list.
    graph_read_back: bool = True
    #: Recorder, ``ios`` order: IOS's pruning, at most ``graph_ios_group`` launches per group
    #: (r) and ``graph_ios_groups`` groups per stage (s); recordings are searched in parts of
    #: ``graph_ios_part`` consecutive launches; beyond ``graph_ios_max`` launches the ``opara``
    #: order is used.
    graph_ios_group: int = 3
    graph_ios_groups: int = 8
    graph_ios_part: int = 24
    graph_ios_max: int = 256

    def __post_init__(self) -> None:
        for name in _INTEGERS:
            # (a count or seed computed with NumPy is one of its integers, which int's
            # isinstance check refuses)
            value = getattr(self, name)
            if type(value) is not int:
                object.__setattr__(self, name, _index(value))
        for field in dataclasses.fields(self):
            # (a string such as "False" would read as true)
            if field.type == "bool" and not isinstance(getattr(self, field.name), bool):
                raise ValueError(f"option {field.name} must be True or False; got "
                                 f"{getattr(self, field.name)!r}")
        for name, choices in _CHOICES.items():
            value = getattr(self, name)
            if value not in choices:
                raise ValueError(
                    f"option {name} must be one of {', '.join(choices)}; got {value!r}"
                )
        for name in ("max_streams", "poll_threshold", "graph_cache", "graph_ios_group",
                     "graph_ios_groups", "graph_ios_part", "graph_ios_max", "copy_chunks"):
            value = getattr(self, name)
            if not _whole(value) or not 1 <= value <= MAX_COUNT:
                raise ValueError(f"option {name} must be a positive integer, at most "
                                 f"{MAX_COUNT} (sys.maxsize); got {value!r}")
        if not _whole(self.graph_max_streams) or not 0 <= self.graph_max_streams <= MAX_COUNT:
            raise ValueError("option graph_max_streams must be 0 (no limit) or a positive "
                             f"integer, at most {MAX_COUNT} (sys.maxsize); got "
                             f"{self.graph_max_streams!r}")
        cost = self.graph_lane_cost_us
        if cost is not None and (not _real(cost) or not 0.0 <= cost < float("inf")):
            raise ValueError("option graph_lane_cost_us must be None (measured) or a finite "
                             f"number of microseconds >= 0; got {cost!r}")
        devices = self.devices
        if isinstance(devices, (list, range)) or (
                isinstance(devices, tuple) and not all(type(d) is int for d in devices)):
            # (a range, or NumPy's integers: device numbers as Python ints)
            devices = tuple(_index(d) for d in devices)
            object.__setattr__(self, "devices", devices)
        if isinstance(devices, tuple):
            if (not devices or any(not _whole(d) or d < 0 for d in devices)
                    or len(set(devices)) != len(devices)):
                raise ValueError("option devices must be a count, \"all\" or distinct device "
                                 f"numbers >= 0; got {self.devices!r}")
        elif devices != "all" and (not _whole(devices) or devices < 1):
            raise ValueError("option devices must be a positive count, \"all\" or a sequence "
                             f"of device numbers; got {devices!r}")
        count = len(devices) if isinstance(devices, tuple) else None if devices == "all" \
            else devices
        if count is not None and count > MAX_DEVICES:
            raise ValueError(f"option devices asks for more than {MAX_DEVICES} devices, the most "
                             f"one runtime spreads work over; got {self.devices!r}")
        if not _whole(self.device) or self.device < 0:
            raise ValueError(f"option device must be a device number >= 0; got {self.device!r}")
        if not _whole(self.sim_devices) or not 1 <= self.sim_devices <= MAX_DEVICES:
            raise ValueError(f"option sim_devices must be from 1 to {MAX_DEVICES}; got "
                             f"{self.sim_devices!r}")
        for name in ("device_data_threshold", "sim_tick"):
            value = getattr(self, name)
            if not _real(value) or not 0.0 <= value <= 1.0:
                raise ValueError(f"option {name} must be a number in [0, 1]; got {value!r}")
        if not _whole(self.stress_seed) or self.stress_seed < 0:
            raise ValueError("option stress_seed must be an integer >= 0 (what "
                             f"ASYNCGPU_STRESS_SEED takes); got {self.stress_seed!r}")
        if self.sim_seed is not None and (not _whole(self.sim_seed) or self.sim_seed < 0):
            raise ValueError("option sim_seed must be None (a new seed each run) or an integer "
                             f">= 0 (what ASYNCGPU_SIM_SEED takes); got {self.sim_seed!r}")
        trace = self.trace
        if trace is not None:
            if not isinstance(trace, (str, os.PathLike)) or not os.fspath(trace):
                raise ValueError("option trace must be the path of the file to write the "
                                 f"process's trace to, or None; got {trace!r}")
            folder = os.path.dirname(os.path.abspath(os.fspath(trace)))
            if not os.path.isdir(folder):
                raise ValueError(f"option trace: {os.fspath(trace)!r} is in no folder that "
                                 f"exists ({folder!r}); make the folder, or name another path")
            if os.path.isdir(os.fspath(trace)):
                raise ValueError(f"option trace: {os.fspath(trace)!r} is a folder; name the "
                                 "file to write the trace to (a .json path in it)")
            object.__setattr__(self, "trace", os.fspath(trace))

    def replace(self, **changes: Any) -> Options:
        """Return a copy with ``changes`` applied; unknown names raise ``TypeError``."""
        names = {f.name for f in dataclasses.fields(self)}
        unknown = set(changes) - names
        if unknown:
            raise TypeError(
                f"unknown option(s) {', '.join(sorted(unknown))}; known: {', '.join(sorted(names))}"
            )
        return dataclasses.replace(self, **changes)


def _index(value: Any) -> Any:
    """An integer (NumPy's integers among them) as a Python int; anything else as it is, for
    the checks to refuse: a bool (NumPy's too: ``True`` is no count) or a float."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return operator.index(value)
    return value


def _whole(value: Any) -> bool:
    """An integer option's value: an int, not a bool (``True`` is an int to Python)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _real(value: Any) -> bool:
    """A number option's value: an int or a float, not a bool."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _flag(text: str) -> bool:
    value = text.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"expected 1/0, true/false, yes/no or on/off; got {text!r}")


def _word(text: str) -> str:
    """A variable naming one of an option's choices, read as the flags and numbers are: case
    and surrounding spaces aside (``ASYNCGPU_BACKEND=SIM`` is ``sim``)."""
    return text.strip().lower()


def _integer(text: str) -> Any:
    """An integer variable's value; text that is no integer (``abc``, ``1.5``) is passed on
    as it is, for the option's check to refuse naming the variable and the option's range."""
    try:
        return int(text)
    except ValueError:
        return text


def _number(text: str) -> Any:
    """A number variable's value; text that is no number is passed on as :func:`_integer`'s."""
    try:
        return float(text)
    except ValueError:
        return text


def _devices(text: str) -> Devices:
    """``ASYNCGPU_DEVICES``: ``all``, a count (``2``) or device numbers (``0,2``)."""
    value = text.strip().lower()
    if value == "all":
        return "all"
    parts = [part.strip() for part in value.split(",")]
    try:
        # (an empty entry is refused: "0,,1" is no list of devices, as "," alone is not)
        numbers = [int(part) for part in parts]
    except ValueError:
        empty = "; an entry is empty" if "," in value and "" in parts else ""
        raise ValueError(f"expected all, a count from 1 to {MAX_DEVICES}, or distinct device "
                         f"numbers >= 0 separated by commas (0,2){empty}") from None
    return tuple(numbers) if "," in value else numbers[0]


#: Environment variable -> (option name, parser). Documented in docs/reference/environment.md.
ENVIRONMENT: dict[str, tuple[str, Any]] = {
    "ASYNCGPU_BACKEND": ("backend", _word),
    "ASYNCGPU_EXECUTION": ("execution", _word),
    "ASYNCGPU_DEPENDENCY": ("dependency", _word),
    "ASYNCGPU_NEW_STREAM": ("new_stream", _word),
    "ASYNCGPU_PARENT_STREAM": ("parent_stream", _word),
    "ASYNCGPU_PREFETCH": ("prefetch", _word),
    "ASYNCGPU_MEMORY": ("memory", _word),
    "ASYNCGPU_COPY_CHUNKS": ("copy_chunks", _integer),
    "ASYNCGPU_MAX_STREAMS": ("max_streams", _integer),
    "ASYNCGPU_INTERFERENCE": ("interference", _flag),
    "ASYNCGPU_STEP_TIMING": ("step_timing", _word),
    "ASYNCGPU_POLL_THRESHOLD": ("poll_threshold", _integer),
    "ASYNCGPU_DEVICE": ("device", _integer),
    "ASYNCGPU_DEVICES": ("devices", lambda s: _devices(s)),
    "ASYNCGPU_DEVICE_POLICY": ("device_policy", _word),
    "ASYNCGPU_DEVICE_DATA_THRESHOLD": ("device_data_threshold", _number),
    "ASYNCGPU_SIM_DEVICES": ("sim_devices", _integer),
    "ASYNCGPU_DEBUG_HB": ("debug_hb", _flag),
    "ASYNCGPU_STRESS": ("stress", _flag),
    "ASYNCGPU_STRESS_SEED": ("stress_seed", _integer),
    "ASYNCGPU_PACKED_LAUNCH": ("packed_launch", _flag),
    "ASYNCGPU_DIRECT_DRIVER": ("direct_driver", _flag),
    "ASYNCGPU_SINGLE_NODE_GRAPHS": ("single_node_graphs", _flag),
    "ASYNCGPU_SIM_SEED": ("sim_seed", _integer),
    "ASYNCGPU_SIM_STRATEGY": ("sim_strategy", _word),
    "ASYNCGPU_SIM_TICK": ("sim_tick", _number),
    "ASYNCGPU_TRACE": ("trace", str),
    "ASYNCGPU_GRAPH_STREAMS": ("graph_streams", _word),
    "ASYNCGPU_GRAPH_ORDER": ("graph_order", _word),
    "ASYNCGPU_GRAPH_CACHE": ("graph_cache", _integer),
    "ASYNCGPU_GRAPH_MAX_STREAMS": ("graph_max_streams", _integer),
    "ASYNCGPU_GRAPH_LANE_COST_US": ("graph_lane_cost_us",
                                    lambda s: None if s.strip().lower() == "auto" else _number(s)),
    "ASYNCGPU_GRAPH_MEASURE": ("graph_measure", _flag),
    "ASYNCGPU_GRAPH_READ_BACK": ("graph_read_back", _flag),
    "ASYNCGPU_GRAPH_IOS_GROUP": ("graph_ios_group", _integer),
    "ASYNCGPU_GRAPH_IOS_GROUPS": ("graph_ios_groups", _integer),
    "ASYNCGPU_GRAPH_IOS_PART": ("graph_ios_part", _integer),
    "ASYNCGPU_GRAPH_IOS_MAX": ("graph_ios_max", _integer),
}


def options_from_env(environ: dict[str, str] | None = None) -> Options:
    """Build :class:`Options` from ``ASYNCGPU_*`` variables (the defaults where unset)."""
    env = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    given: dict[str, tuple[str, str]] = {}      # option -> (variable, its text)
    for var, (name, parse) in ENVIRONMENT.items():
        raw = env.get(var)
        if raw is None or raw == "":
            continue
        try:
            values[name] = parse(raw)
        except ValueError as exc:
            raise ValueError(f"environment variable {var}={raw!r} is not valid: {exc}") from None
        given[name] = (var, raw)
    try:
        return Options(**values)
    except ValueError as exc:
        for name, value in values.items():     # (which variable: each alone, on the defaults)
            try:
                Options(**{name: value})
            except ValueError as alone:     # (its own check's message: exc may be another's)
                var, raw = given[name]
                raise ValueError(f"environment variable {var}={raw!r} is not valid: {alone}"
                                 ) from None
        raise ValueError(f"{exc} (from the ASYNCGPU_* environment: "
                         f"{', '.join(v for v, _ in given.values())})") from None


def cli_log_level() -> str:
    """Logging level of the ``asyncgpu`` command (``ASYNCGPU_LOG_LEVEL``, default WARNING);
    ValueError naming the variable for a level ``logging`` does not have."""
    raw = os.environ.get("ASYNCGPU_LOG_LEVEL", "WARNING")
    level = raw.strip().upper()
    if level not in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
        raise ValueError(f"ASYNCGPU_LOG_LEVEL={raw!r} is not a logging level; use one of "
                         "DEBUG, INFO, WARNING, ERROR, CRITICAL")
    return level


def numba_simulator_requested() -> bool:
    """Whether the user asked Numba for its CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``)."""
    return os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")


def enable_numba_simulator() -> None:
    """Ask Numba for its CUDA simulator; effective only before ``numba.cuda`` is imported.

    The ``sim`` backend runs Numba kernels in Numba's simulator. Setting the variable before
    ``numba.cuda`` is first imported makes ``@cuda.jit`` device functions simulator functions too,
    which kernels that call them need.
    """
    os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")


def cuda_device_max_connections() -> bool:
    """Give CUDA enough hardware queues for the stream pool; whether this set the variable
    (False: the program had). Called as ``asyncgpu`` is imported
    (``asyncgpu.backends.cuda.queues``), since the driver reads the variable once, in
    ``cuInit``, which importing a workload's kernels or making the backend may already call.

    CUDA maps streams onto ``CUDA_DEVICE_MAX_CONNECTIONS`` hardware queues (8 by default); more
    streams than queues creates false dependencies between unrelated streams: on an H200, with
    8, kernels of a tenant joining two of its streams started up to 21 ms late, as another
    tenant's long kernel on a stream sharing their queue ended.
    """
    if "CUDA_DEVICE_MAX_CONNECTIONS" in os.environ:
        return False
    os.environ["CUDA_DEVICE_MAX_CONNECTIONS"] = "32"
    return True
