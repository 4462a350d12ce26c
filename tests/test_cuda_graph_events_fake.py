"""A replayed graph's completion event on the ``cuda`` backend, run on the CPU.

``CudaBackend.graph_launch`` returns ``graph.done``, recorded right after the launch, and the
runtime takes it as the node's completion event instead of recording a pooled one. The pool
must never hand that event to another node (its next launch records it again). This runs the
real backend over the stand-in CuPy of ``tools/fakecupy`` in a separate interpreter, so the
stand-in never reaches this test process; the GPU tests run the same paths for real.
"""

from __future__ import annotations

import textwrap

import stand_in

SCRIPT = textwrap.dedent(r"""
    import numpy as np
    import asyncgpu as ag
    from asyncgpu.runtime.array import HOST, new_array
    from asyncgpu.recorder.cache import graphs_of
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
        assert all(e is not done for pool in rt.streams._events for e in pool)
        for s in rt.streams.streams:
            for node in s.inflight:
                assert (node.event is done) == (node.kind == "graph"), node
        if i % 50 == 49:
            rt.synchronize()
    rt.synchronize()
    assert all(e is not done for pool in rt.streams._events for e in pool)
    # replays recorded no pooled event: the pool grew only for the eager launches in flight
    assert rt.stats.events_created - created <= rt.options.poll_threshold + 2
    print("ok", rt.stats.graphs_replayed)
""")


def test_a_replay_takes_the_graphs_own_event_and_the_pool_never_hands_it_out():
    out = stand_in.run(SCRIPT).split()
    assert out[:1] == ["ok"]
    assert int(out[1]) >= 200


LIFETIME = textwrap.dedent(r"""
    import gc, weakref
    import numpy as np
    import asyncgpu as ag
    from asyncgpu.runtime import current as _runtime
    from benchmarks import replay
    from tools.host_paths import stand_in_runtime

    inc = ag.cuda_kernel(replay.INC, "inc")          # its launchers outlive the runtime
    rt = stand_in_runtime()
    x = ag.zeros(32, np.float32)
    inc[1, 32](x, 32)
    rt.synchronize()
    backend = weakref.ref(rt.backend)
    del x, rt
    _runtime._runtime = None
    gc.collect()
    print("dropped" if backend() is None else "alive")
    rt = stand_in_runtime()                            # and the launcher works on a new one
    y = ag.zeros(32, np.float32)
    inc[1, 32](y, 32)
    rt.synchronize()
    print(rt.stats.kernels)
""")


def test_a_dropped_runtimes_backend_is_freed_though_its_kernels_launchers_stay():
    """A kernel caches its launchers, and a launcher its prepared launch target: that must not
    keep a dropped runtime's backend (and its device memory pool) alive."""
    assert stand_in.run(LIFETIME).split() == ["dropped", "1"]
