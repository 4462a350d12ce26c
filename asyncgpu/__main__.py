"""Command line: ``asyncgpu bench ...`` (the benchmark suite), ``asyncgpu trace ...`` (one
workload traced: timeline, DAG, overlap metrics) and ``asyncgpu info``.

``python -m asyncgpu`` works the same as the installed ``asyncgpu`` command. This is an
application, so unlike the library it writes to the terminal (through ``rich``).
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import sys
from typing import Any

from .cli.bench import cmd_bench
from .cli.suite import ITERATIONS, SCALES, WARMUP, WORKLOAD_NAMES, bench_module
from .cli.tables import make_console, plain_table
from .cli.trace import cmd_trace

DESCRIPTION = """\
asyncgpu runs plain sequential CuPy and Numba GPU code asynchronously: every
kernel launch and library call becomes a node of a dependency graph, independent
work overlaps on CUDA streams, and the host waits only for the data it reads.

commands:
  bench   run the benchmark suite (the GrCUDA paper's workloads in every mode,
          each result checked) and print a table of times
  trace   run one workload traced; write the timeline, the DAG, pictures and
          overlap metrics
  info    show the backend, the device and the options in force

Without a usable NVIDIA GPU (or with ASYNCGPU_BACKEND=sim) everything runs on
the CPU simulator: results are checked, but times are not GPU times.
'asyncgpu COMMAND --help' gives each command's options. 'python -m asyncgpu'
works the same as 'asyncgpu'."""


def _backend_here() -> str:
    """The backend a run would use here, found without starting a runtime (for the help)."""
    from asyncgpu import backends
    from asyncgpu.runtime.current import current_options

    try:
        return backends.resolve(current_options())
    except ValueError:              # (a bad ASYNCGPU_* variable: said once the command runs)
        return "unknown"


def _version() -> str:
    try:
        from importlib.metadata import PackageNotFoundError, version

        return version("asyncgpu")
    except PackageNotFoundError:   # a source tree run without installing
        from asyncgpu import __version__

        return __version__


def _at_least(low: int, high: int | None = None) -> Any:
    """An argparse type: an int of at least ``low`` (and at most ``high``)."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = low - 1
        if value < low or high is not None and value > high:
            within = f"from {low} to {high}" if high is not None else f"of at least {low}"
            raise argparse.ArgumentTypeError(f"expected an integer {within}; got {text!r}")
        return value
    return parse


def _int_list(low: int, high: int, example: str) -> Any:
    """An argparse type: comma-separated ints from ``low`` to ``high``, kept as the text."""
    def parse(text: str) -> str:
        parts = [p.strip() for p in text.split(",")]
        if not all(p.isdigit() and low <= int(p) <= high for p in parts):
            raise argparse.ArgumentTypeError(f"expected comma-separated integers from {low} to "
                                             f"{high}, e.g. {example}; got {text!r}")
        return text
    return parse


def _period(text: str) -> float:
    """An argparse type: a finite number above 0 (``--period``)."""
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 0.0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a finite number above 0 (times a step "
                                         f"alone); got {text!r}")
    return value


def _parser() -> argparse.ArgumentParser:
    gpu = _backend_here() == "cuda"
    here = "here: cuda" if gpu else "here: sim, the CPU simulator"
    scale_help = (f"problem size; without a GPU only 'tiny' runs (default: medium on a GPU, "
                  f"tiny on the simulator; {here})")
    blocks_help = (f"blocks per launch (default: 4 x the SM count on a GPU, 2 on the simulator; "
                   f"{here})")
    inputs_help = ("streaming: the host rewrites the inputs before every iteration, so the "
                   "host-to-device transfer is timed; resident: the inputs are written and "
                   "moved once, so only the kernels are timed (default: streaming)")
    p = argparse.ArgumentParser(prog="asyncgpu", description=DESCRIPTION,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"asyncgpu {_version()}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    b = sub.add_parser("bench", help="run the benchmark suite (the GrCUDA paper's workloads)",
                       description="Run the benchmark workloads in every requested mode, check "
                                   "every result against serial and a reference, and print "
                                   "the median times.")
    b.add_argument("names", nargs="*", default=["all"],
                   help=f"workloads ({WORKLOAD_NAMES}) or 'all' (default), or the "
                        "micro-benchmarks 'overlap', 'overhead', 'inception', 'replay', "
                        "'multigpu', 'tenants'")
    b.add_argument("--scale", choices=SCALES, default=None, help=scale_help)
    b.add_argument("--modes", default="serial,parallel,handopt",
                   help="comma-separated, from: serial, parallel, handopt, cudagraph, recorded, "
                        "recorded_static (default: serial,parallel,handopt)")
    b.add_argument("--block-sizes", type=_int_list(1, 1024, "32,256"), default=None,
                   help="comma-separated 1D block sizes (default: 32,128,256,1024 on a GPU, 32 "
                        f"on the simulator; {here})")
    b.add_argument("--num-blocks", type=_at_least(1), default=None, help=blocks_help)
    b.add_argument("--inputs", choices=("streaming", "resident"), default="streaming",
                   help=inputs_help)
    b.add_argument("--iterations", type=_at_least(1), default=None,
                   help=f"timed iterations per mode (default: {ITERATIONS[0]} on a GPU, "
                        f"{ITERATIONS[1]} on the simulator; {here})")
    b.add_argument("--warmup", type=_at_least(0), default=None,
                   help=f"untimed iterations per mode before the timed ones (default: "
                        f"{WARMUP[0]} on a GPU, {WARMUP[1]} on the simulator; {here})")
    b.add_argument("--rounds", type=_at_least(1), default=None,
                   help="split each mode's timed iterations into this many blocks taken in "
                        "turn with the other modes' (default: 1, one mode after the other; "
                        "tenants: 3 on a GPU)")
    b.add_argument("--json", default=None, metavar="PATH",
                   help="write every iteration's time and the machine's details here")
    b.add_argument("--plot", default=None, metavar="PATH",
                   help="write a speedup plot (PNG) here (needs matplotlib)")
    b.add_argument("--metrics", action="store_true",
                   help="trace one extra untimed iteration per mode: overlap metrics CT/TC/CC/TOT")
    b.add_argument("--no-bounds", action="store_true",
                   help="skip the transfer and compute bounds (measured on a GPU, with the "
                        "serial and parallel modes)")
    b.add_argument("--workloads", default=None, metavar="NAMES",
                   help="multigpu: the workloads to run, e.g. bs,vec (default: all of bs, vec, "
                        "ml, mv, cg); tenants: the mix, of the suite's workloads and inception "
                        "(default: dl,img,ml; a workload may name its own scale: "
                        "dl,inception,ml:small)")
    b.add_argument("--steps", choices=("eager", "recorded"), default="eager",
                   help="tenants: each workload's step launches eagerly, or replays its "
                        "launches recorded as a graph")
    b.add_argument("--period", type=_period, default=None, metavar="P",
                   help="tenants: the first workload as a service whose steps arrive every P "
                        "times its step alone, the others back to back; compares threads, "
                        "tenants, regulated and an exclusive tenant (default: every workload "
                        "back to back, all modes)")
    b.add_argument("--partitions", action="store_true",
                   help="tenants: also the mode 'partitioned', each workload a tenant on SMs "
                        "of its own (asyncgpu.tenant(..., sms=N): an equal share of the "
                        "device each, in groups of 8)")
    b.add_argument("--balance", action="store_true",
                   help="tenants: each round runs as many steps of each workload as take about "
                        "as long alone as one step of the longest, so no workload is most of "
                        "the mix (default: one step of each)")
    b.add_argument("--no-priority", action="store_true",
                   help="tenants: no workload's tenant has priority high (default: the first "
                        "one's has); regulation then serves the mix's speed alone")
    b.add_argument("--devices", type=_int_list(1, 64, "1,2,4"), default=None, metavar="COUNTS",
                   help="multigpu: the GPU counts to compare, e.g. 1,2,4 (default: 1, 2, 4 "
                        "up to the GPUs of the host; on the simulator, virtual devices)")
    b.add_argument("--memory", choices=("managed", "explicit", "both"), default=None,
                   help="memory model(s) to measure, side by side with 'both' (default: the "
                        "one in force, ASYNCGPU_MEMORY)")
    t = sub.add_parser("trace", help="run one workload traced; write the trace, DAG, pictures "
                                     "and overlap metrics",
                       description="Run one iteration of a workload under asyncgpu.trace() "
                                   "(after an untraced one) and write its trace, DAG and "
                                   "pictures, and print its overlap metrics.")
    t.add_argument("name", help=f"workload ({WORKLOAD_NAMES})")
    t.add_argument("--scale", choices=SCALES, default=None, help=scale_help)
    t.add_argument("--mode", choices=("serial", "parallel", "handopt"), default="parallel",
                   help="serial: one launch after the other; parallel: asyncgpu's scheduler; "
                        "handopt: hand-chosen streams and events (default: parallel)")
    t.add_argument("--block-size", type=_at_least(1, 1024), default=None,
                   help="1D block size (default: 256; the 2D workloads, IMG and DL, run "
                        "(8, 8) blocks)")
    t.add_argument("--num-blocks", type=_at_least(1), default=None, help=blocks_help)
    t.add_argument("--inputs", choices=("streaming", "resident"), default="streaming",
                   help=inputs_help)
    t.add_argument("--out", default="asyncgpu-trace", metavar="DIR",
                   help="directory for the files (default: ./asyncgpu-trace)")
    sub.add_parser("info", help="show the backend, the device and the options in force",
                   description="Show the backend, the device and the options in force.")
    return p

def cmd_info() -> int:
    import asyncgpu as ag
    from asyncgpu.backends import resolve

    console = make_console()
    # the backend named outright: 'auto' would log its own "no usable GPU" line on top of ours
    ag.configure(backend=resolve(ag.options()))
    info = bench_module("harness").machine_info(ag)
    table = plain_table(f"asyncgpu {_version()}")
    table.show_header = False
    table.add_column("")
    table.add_column("")
    for key, value in info.items():
        table.add_row(key, str(value))
    console.print(table)
    options = plain_table("options in force")
    options.add_column("option")
    options.add_column("value")
    for field in dataclasses.fields(ag.options()):
        options.add_row(field.name, repr(getattr(ag.options(), field.name)))
    console.print(options)
    return 0


class _Prefixed(logging.Formatter):
    """``logger: message``, unless the message names asyncgpu already (the library's warnings
    carry the prefix for Python's last-resort handler, which prints the message alone)."""

    def format(self, record: logging.LogRecord) -> str:
        message = super().format(record)
        return message if message.startswith("asyncgpu") else f"{record.name}: {message}"


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``asyncgpu`` command."""
    args = _parser().parse_args(argv)
    from asyncgpu.core.config import cli_log_level

    handler = logging.StreamHandler()
    handler.setFormatter(_Prefixed("%(message)s"))
    # (the level is asyncgpu's own: at INFO, Numba's and CuPy's loggers would print their
    # module unloads and the like)
    logging.basicConfig(level=logging.WARNING, handlers=[handler], force=True)
    try:
        level = cli_log_level()
    except ValueError as exc:
        print(f"asyncgpu: {exc}", file=sys.stderr)
        return 2
    logging.getLogger("asyncgpu").setLevel(level)
    from asyncgpu.core.errors import BackendUnavailableError, DeviceError
    from asyncgpu.runtime.current import current_options
    try:
        current_options()           # (ASYNCGPU_* variables: one line, not a traceback)
        if args.command == "bench":
            return cmd_bench(args)
        if args.command == "trace":
            return cmd_trace(args)
        return cmd_info()
    except (BackendUnavailableError, DeviceError) as exc:
        print(f"asyncgpu {args.command}: {exc}", file=sys.stderr)
        return 2
    except ValueError as exc:
        if "environment variable" not in str(exc):
            raise
        print(f"asyncgpu {args.command}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        # one line, not the traceback of wherever the interrupt landed
        print(f"asyncgpu {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
