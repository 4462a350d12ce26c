"""Memory of dropped arrays on the ``cuda`` backend, run on the CPU over the stand-in CuPy of
``tools/fakecupy`` (in a separate interpreter): a device whose memory holds two temporaries.

A dropped array's memory is held by its unfinished kernels until they retire; an allocation
the device refuses first waits for the work in flight and frees what that released
(``Runtime.allocating``), so a loop that drops a temporary each step fits where its serial run
fits. The stand-in's events complete at once, but nothing retires them before a host wait or
a poll (over 32 nodes in flight), as on a GPU whose work is still queued.
"""

from __future__ import annotations

import json
import textwrap

import stand_in

SCRIPT = textwrap.dedent(r"""
    import json, weakref
    import cupy

    LIMIT = 64 << 20
    live = {"bytes": 0}

    def gone(nbytes):
        live["bytes"] -= nbytes

    class Counted(cupy._Memory):
        def __init__(self, nbytes):
            super().__init__(nbytes)
            live["bytes"] += nbytes
            weakref.finalize(self, gone, nbytes)

    # (before the backend is made: it keeps the calls it finds)
    cupy.cuda.MemoryPool.malloc = lambda self, nbytes: Counted(nbytes)
    cupy.cuda.runtime.memGetInfo = lambda: (LIMIT - live["bytes"], LIMIT)

    import asyncgpu as ag
    from tools.host_paths import stand_in_runtime

    rt = stand_in_runtime()
    ag.configure(memory="explicit")
    k = ag.cuda_kernel('extern "C" __global__ void head(const double* t, double* out, int i)'
                       ' { out[i] = t[0]; }', "head")
    out = ag.empty(16)
    refused = None
    for i in range(12):
        t = ag.empty((24 << 20) // 8)        # two fit beside out, three do not
        k[1, 1](t, out, i)
        del t
    try:
        held = [ag.empty((24 << 20) // 8) for _ in range(3)]
    except ag.OutOfMemoryError as exc:      # live arrays: nothing to reclaim
        refused = str(exc)
    print(json.dumps({"syncs": dict(ag.statistics().host_syncs), "refused": refused}))
""")


def test_a_loop_dropping_a_temporary_each_step_fits_a_device_of_two_on_the_cuda_backend():
    out = json.loads(stand_in.run(SCRIPT).strip().splitlines()[-1])
    assert out["syncs"].get("allocation", 0) >= 5
    assert "cannot allocate 24.0 MiB of device memory" in out["refused"]
