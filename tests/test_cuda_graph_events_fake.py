"""A replayed graph's completion event on the ``cuda`` backend, run on the CPU.

``CudaBackend.graph_launch`` returns ``graph.done``, recorded right after the launch, and the
runtime takes it as the node's completion event instead of recording a pooled one. The pool
must never hand that event to another node (its next launch records it again). This runs the
real backend over the stand-in CuPy of ``tools/fakecupy`` in a separate interpreter, so the
stand-in never reaches this test process; the GPU tests run the same paths for real.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SCRIPT = textwrap.dedent(r"""
    import numpy as np
    import asyncgpu as ag
    from asyncgpu._array import HOST, new_array
    from asyncgpu._graph_cache import graphs_of
    from benchmarks import replay
    from tools.host_paths import stand_in_runtime

    rt = stand_in_runtime()
    inc = ag.cuda_kernel(replay.INC, "inc")
    xs = [new_array(rt, (32,), np.dtype(np.float32), HOST) for _ in range(3)]

    @ag.graph(static=True)
    def step():
        for x in xs:
            inc[1, 32](x, 32)

    step(); step(); step()
    done = graphs_of(rt, step.token)[0].graph.done
    created = rt.stats.events_created
    for i in range(200):
        step()
        inc[1, 32](xs[i % 3], 32)          # eager nodes take pooled events meanwhile
        assert all(e is not done for e in rt.streams._events)
        for s in rt.streams.streams:
            for node in s.inflight:
                assert (node.event is done) == (node.kind == "graph"), node
        if i % 50 == 49:
            rt.synchronize()
    rt.synchronize()
    assert all(e is not done for e in rt.streams._events)
    # replays recorded no pooled event: the pool grew only for the eager launches in flight
    assert rt.stats.events_created - created <= rt.options.poll_threshold + 2
    print("ok", rt.stats.graphs_replayed)
""")


def test_a_replay_takes_the_graphs_own_event_and_the_pool_never_hands_it_out():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.path.join(ROOT, "tools", "fakecupy"), ROOT]))
    env.pop("ASYNCGPU_BACKEND", None)
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split()[:1] == ["ok"]
    assert int(done.stdout.split()[1]) >= 200
