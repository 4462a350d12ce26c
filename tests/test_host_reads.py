"""A host read of one element whose mirror is current takes a short path
(``HostAccess.read_element``), inside a split recording too (after ending its segment): the
same values, locations, statistics and errors as the full host access, and the full one
wherever anything is pending (a device writer, a copy back, a trace, the checker)."""

from __future__ import annotations

import numpy as np
import programs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recorder_kernels import N, kernels

OPS = st.lists(st.tuples(st.sampled_from(["inc", "read", "write", "numpy", "sync", "replay",
                                          "split", "refused"]),
                         st.integers(0, 1), st.integers(0, N - 1)), min_size=1, max_size=25)


def _program(ops, seed: int, plain: bool):
    import asyncgpu as ag
    from asyncgpu.runtime.current import current_runtime

    with ag.configure(backend="sim", sim_seed=seed, sim_strategy="random", memory="explicit"):
        rt = current_runtime()
        assert rt._short_reads
        rt._short_reads = plain
        scale, add, inc = kernels(ag)
        arrays = [ag.array(np.arange(N, dtype=np.float32)), ag.zeros(N, np.float32)]

        @ag.graph
        def step():
            inc[1, N](arrays[0], N)
            scale[1, N](arrays[0], arrays[1], np.float32(0.5), N)

        seen = []

        @ag.graph(split=True)
        def body(which, i):
            # reads inside the recording: each ends a segment, then reads
            inc[1, N](arrays[0], N)
            seen.append(float(arrays[which][i]))
            scale[1, N](arrays[0], arrays[1], np.float32(0.5), N)
            seen.append(float(arrays[1][i]))
            seen.append(float(arrays[1][N - 1 - i]))

        @ag.graph
        def unsplit(which, i):
            inc[1, N](arrays[which], N)
            seen.append(float(arrays[which][i]))        # refused: the recording's error

        for op, which, i in ops:
            a = arrays[which]
            if op == "inc":
                inc[1, N](a, N)
            elif op == "read":
                seen.append(float(a[i]))
            elif op == "write":
                a[i] = np.float32(i)
            elif op == "numpy":
                seen.append(a.numpy().tobytes())
            elif op == "sync":
                ag.synchronize()
            elif op == "split":
                body(which, i)
            elif op == "refused":
                try:
                    unsplit(which, i)
                except ag.RecordingError as exc:
                    seen.append(str(exc))
            else:
                step()
        s = ag.statistics()
        counts = (s.host_accesses, s.copies_to_host, s.copies_to_device, dict(s.host_syncs))
        result = seen, [a.numpy().tobytes() for a in arrays], counts
        rt._short_reads = True
        return result


@settings(max_examples=programs.examples(80), deadline=None)
@given(ops=OPS, seed=st.integers(0, 3))
def test_the_short_path_reads_what_the_full_host_access_reads(ops, seed):
    assert _program(ops, seed, True) == _program(ops, seed, False)


def test_reads_of_a_current_mirror_wait_for_nothing_and_count_once(sim):
    ag = sim
    scale, add, inc = kernels(ag)
    x = ag.array(np.arange(N, dtype=np.float32))
    before = ag.statistics()
    values = [float(x[i]) for i in range(N)]            # on the host: no copy, no wait
    after = ag.statistics()
    assert values == list(range(N))
    assert after.host_accesses - before.host_accesses == N
    assert after.copies_to_host == before.copies_to_host
    assert dict(after.host_syncs) == dict(before.host_syncs)
    inc[1, N](x, N)                                      # a device writer: the full path
    assert float(x[3]) == 4.0                            # waits, fetches x whole
    assert float(x[4]) == 5.0                            # then the mirror is current again
    assert ag.statistics().copies_to_host == after.copies_to_host + 1


@pytest.mark.parametrize("memory", ["managed", "explicit"])
def test_only_explicit_memory_takes_the_short_path_and_the_checker_still_sees_it(memory):
    import asyncgpu as ag
    from asyncgpu.runtime.current import current_runtime

    with ag.configure(backend="sim", sim_seed=0, memory=memory):
        rt = current_runtime()
        # explicit memory only; on sim the checker wraps the backend, so its hook still runs
        assert rt._short_reads == (memory == "explicit") and not rt._plain_reads


def test_reads_in_a_split_recording_end_the_segment_then_take_the_short_path(monkeypatch):
    """The first read of each call ends the segment and waits for it: a full access that
    fetches x while the graph has not learnt to copy x back (two calls), a wait for that copy
    on the short path once it has; the second read finds the mirror current."""
    import asyncgpu as ag
    from asyncgpu.runtime.context import Runtime

    with ag.configure(backend="sim", sim_seed=0, memory="explicit"):
        scale, add, inc = kernels(ag)
        x = ag.array(np.arange(N, dtype=np.float32))

        @ag.graph(split=True)
        def body():
            inc[1, N](x, N)
            return float(x[0]), float(x[1])

        full = []
        begin = Runtime.begin_host_access

        def counted(self, *args, **kwargs):
            full.append(args[0])
            return begin(self, *args, **kwargs)

        monkeypatch.setattr(Runtime, "begin_host_access", counted)
        copies = []
        for k in range(1, 7):
            assert body() == (k, k + 1)
            copies.append(ag.statistics().copies_to_host)
        assert len(full) == 2 and all(a is x for a in full)
        assert [b - a for a, b in zip(copies, copies[1:])] == [1] * 5   # a fetch, then copies back
