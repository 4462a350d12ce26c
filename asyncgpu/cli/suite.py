"""What the commands share about the benchmark suite: where its modules are, the scale a run
uses, the iterations per mode, the JSON a micro-benchmark writes.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

SCALES = ("tiny", "small", "medium", "large")
WORKLOAD_NAMES = "vec bs img ml hits dl"
#: Timed and untimed iterations per mode: (on a GPU, on the simulator). Simulated times are not
#: GPU times, so the simulator runs each mode once, which is enough to check its results.
ITERATIONS = (20, 1)
WARMUP = (3, 0)


def bench_module(name: str) -> Any:
    """``benchmarks.<name>`` of the repository in a source tree (run as ``python -m asyncgpu``
    with the tree on the path), else ``asyncgpu.benchmarks.<name>`` of an installed wheel."""
    import importlib

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if os.path.isfile(os.path.join(root, "benchmarks", "harness.py")):
        if root not in sys.path:
            sys.path.insert(0, root)
        return importlib.import_module(f"benchmarks.{name}")
    return importlib.import_module(f"asyncgpu.benchmarks.{name}")


def write_json(path: str, results: dict[str, Any], machine: dict[str, Any]) -> None:
    """``--json``: every micro-benchmark's results by name, and the machine's details."""
    with open(path, "w") as f:
        json.dump({**results, "machine": machine}, f, indent=1)


def output_problem(flag: str, path: str | None) -> str | None:
    """Why ``path``, given as ``flag``, cannot be written (checked before any run); None if it
    can, or is not given."""
    if path is None:
        return None
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        return f"{flag} {path!r} is a directory; give a file path"
    if not os.path.isdir(folder):
        return f"{flag} {path!r}: the folder {folder!r} does not exist"
    if not os.access(folder, os.W_OK):
        return f"{flag} {path!r}: the folder {folder!r} is not writable"
    # (a try is the only sure test: root passes os.access where nothing can be made, /proc)
    existed = os.path.exists(path)
    try:
        with open(path, "a"):
            pass
    except OSError as exc:
        return f"{flag} {path!r} cannot be written: {exc.strerror or exc}"
    if not existed:
        os.remove(path)
    return None


def pick_scale(ag: Any, console: Any, requested: str | None) -> tuple[bool, str]:
    from asyncgpu.backends import resolve

    on_gpu = resolve(ag.options()) == "cuda"
    scale = requested or ("medium" if on_gpu else "tiny")
    if not on_gpu:
        console.print("[yellow]No usable GPU: running on the CPU simulator (sim backend). "
                      "Every result is checked, but times are simulator times, not GPU "
                      "times: no speedups are reported.[/]")
        if scale != "tiny":
            console.print(f"[yellow]The '{scale}' scale needs a GPU: running the 'tiny' scale "
                          "instead.[/]")
        scale = "tiny"
    return on_gpu, scale


def hand_schedule(rt: Any) -> Any:
    return bench_module("handopt").Hand(rt)
