"""The bytes that work which faulted was to write, on the simulated device.

The model
---------
A kernel or library call that faults on ``sim`` writes nothing; the fault is raised at the
first host wait that meets it, maybe in another thread. What it was to write is *marked*
(:class:`FaultMarks`: buffer uid -> ``(lo, hi, fault)`` spans), so that a later host read of
those bytes raises too instead of passing the old bytes for the program's result. A later
kernel or call that overwrites every byte of a span, or a host write of every byte, clears it;
a copy moves the bytes as they are, marks included.

Invariant: a marked byte is never read by the host without a ``KernelFault`` naming the fault.

Example::

    marks = FaultMarks()
    marks.mark(launch, fault)            # its written_ranges() are marked
    marks.check(uid, 0, 8, "host read")  # KernelFault where [0, 8) of uid is marked
    marks.unmark(uid, 0, 8)              # overwritten: the program's again
"""

from __future__ import annotations

from typing import Any

from ...core.errors import KernelFault

Marks = dict[int, list[tuple[int, int, BaseException]]]


class FaultMarks(dict):
    """Buffer uid -> the ``(lo, hi, fault)`` spans a faulted kernel or call was to write."""

    def mark(self, payload: Any, fault: BaseException) -> None:
        """Mark what ``payload`` (a kernel, call or copy) was to write as ``fault``'s."""
        self.mark_spans([(uid, lo, hi) for uid, lo, hi, _ in payload.written_ranges()], fault)

    def mark_spans(self, spans: Any, fault: BaseException) -> None:
        """Mark each ``(uid, lo, hi)`` of ``spans`` as ``fault``'s."""
        for uid, lo, hi in spans:
            if lo < hi:
                self.setdefault(uid, []).append((lo, hi, fault))

    def unmark(self, uid: int, lo: int, hi: int) -> None:
        """Bytes ``[lo, hi)`` of buffer ``uid`` were overwritten: no longer a fault's."""
        kept = []
        for first, end, fault in self[uid]:
            if first < lo:
                kept.append((first, min(end, lo), fault))
            if hi < end:
                kept.append((max(first, hi), end, fault))
        if kept:
            self[uid] = kept
        else:
            del self[uid]

    def check(self, uid: int, lo: int, hi: int, label: str) -> None:
        """KernelFault if bytes ``[lo, hi)`` of buffer ``uid`` hold what a kernel or call that
        faulted was to write: they are not what the program computed (the fault itself was
        raised at the host wait that met it first; this read must not pass for a good one)."""
        for first, end, fault in self.get(uid, ()):
            if first < hi and lo < end:
                raise KernelFault(f"{label}: its contents were to be written by work that "
                                  f"faulted, and are not the program's ({fault}); write the "
                                  "array again before reading it") from fault

    def copied(self) -> Marks:
        """The marks, each buffer's list a copy of its own."""
        return {uid: list(spans) for uid, spans in self.items()}
