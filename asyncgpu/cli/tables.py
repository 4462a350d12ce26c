"""The command line's terminal output: the console, the tables and how numbers are shown.

The command is an application, so unlike the library it writes to the terminal (through
``rich``); the tables fold their columns to the terminal's width.
"""

from __future__ import annotations

import math
from typing import Any


def make_console() -> Any:
    from rich.console import Console

    return Console()     # the terminal's width: the tables fold their columns to fit


def usage_error(command: str, message: str) -> int:
    """Say why ``command`` cannot run, in one line on the standard error (not folded to the
    terminal's width: a script reads it whole); the exit status to return, 2."""
    from rich.console import Console

    Console(stderr=True, soft_wrap=True).print(f"[red]{command}: {message}[/]",
                                               highlight=False)
    return 2


def plain_table(title: str) -> Any:
    from rich import box
    from rich.table import Table

    return Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False,
                 collapse_padding=True)


def fmt(v: Any, scale: float = 1.0, digits: int = 3) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "n/a"
    return f"{v * scale:.{digits}f}"


def metrics_table(rows: list[dict[str, Any]], title: str) -> Any:
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    for col in ("workload", "block", "mode", "CT", "TC", "CC", "TOT"):
        table.add_column(col, justify="right")
    for row in rows:
        for mode, m in row.get("metrics", {}).items():
            table.add_row(row["workload"], row["block"], mode,
                          *[fmt(m[k], digits=2) for k in ("CT", "TC", "CC", "TOT")])
    return table


def print_overhead(console: Any, m: dict[str, Any]) -> None:
    from rich.table import Table

    table = Table(title="host microseconds per launch (median, p10-p90)")
    for col in ("case", "median", "p10", "p90"):
        table.add_column(col, justify="left" if col == "case" else "right")
    for group in ("cases", "components", "options", "runtime_only"):
        for name, v in m.get(group, {}).items():
            label = name if group == "cases" else f"{group.replace('_', ' ')}: {name}"
            table.add_row(label, f"{v['median_us']:.2f}", f"{v['p10_us']:.2f}",
                          f"{v['p90_us']:.2f}")
    console.print(table)
    if m.get("threads"):
        table = Table(title="host threads launching at once (us per launch)")
        for col in ("case", "one thread", "threads", "ratio", "switches per launch"):
            table.add_column(col, justify="left" if col == "case" else "right")
        for name, v in m["threads"].items():
            table.add_row(name, f"{v['one_thread_us']:.2f}", f"{v['threads_us']:.2f}",
                          f"{v['ratio']:.2f}", f"{v['switches_per_launch']:.2f}")
        console.print(table)
    for group in ("event_waits_per_timed_launch", "event_queries_per_launch", "ratios", "floor",
                  "flat"):
        for name, v in m.get(group, {}).items():
            console.print(f"{group}: {name} = {v:.3f}")
