"""A stand-in verdict for the interference rule (``asyncgpu.core.interference``), for tests:
the simulator's clock is logical, so tests that need the rule to keep launches apart (or not)
give the verdict themselves."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from ..runtime.current import current_runtime


@contextlib.contextmanager
def slower_together(apart: bool = True, min_bytes: int = 0) -> Iterator[list[Any]]:
    """Within the block, every pair the current runtime's rule tries is judged ``apart`` (or
    side by side) on its first side-by-side run, whether the simulator's schedule overlapped
    the two or not, and launches moving at least ``min_bytes`` are suspects; yields the list
    of the tried pairs' spans (side by side, in sequence). Verdicts, trials and suspects are
    forgotten on entry and on exit."""
    rule = current_runtime().interference
    if rule is None:
        raise RuntimeError("the current runtime has no interference rule (sync mode, one "
                           "stream, several devices, or interference=False)")
    tried: list[Any] = []

    def verdict(together_s: float, in_sequence_s: float) -> bool:
        tried.append((together_s, in_sequence_s))
        return apart

    saved = rule.verdict, rule.min_bytes, rule.tries
    rule.verdict, rule.min_bytes, rule.tries = verdict, min_bytes, 1
    _forget(rule)
    try:
        yield tried
    finally:
        rule.verdict, rule.min_bytes, rule.tries = saved
        _forget(rule)


def _forget(rule: Any) -> None:
    for table in (rule.verdicts, rule._suspects, rule._seen, rule._trials):
        table.clear()
