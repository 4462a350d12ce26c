import os, sys, faulthandler; faulthandler.enable()
sys.path.insert(0, "."); sys.path.insert(0, "tools"); sys.path.insert(0, "tools/fakecupy")
import numpy as np
import asyncgpu as ag
from asyncgpu.runtime import current
from asyncgpu.runtime.context import Runtime
from asyncgpu.core.config import Options
from asyncgpu.backends.cuda.multi import MultiCudaBackend
from benchmarks import replay
opts = Options(backend="cuda", devices=2, graph_measure=False, graph_lane_cost_us=0)
rt = Runtime(opts, backend=MultiCudaBackend(opts, (0, 1)))
current._runtime, current._options = rt, opts
inc = ag.cuda_kernel(replay.INC, "inc")
xs = [ag.zeros(32, np.float32) for _ in range(4)]
@ag.graph
def step():
    for i in range(8):
        inc[1, 32](xs[i % 4], 32)
for r in range(3):
    step()
    print(step.outcome, dict(ag.statistics().placed), ag.statistics().copies_peer, ag.statistics().graphs_replayed)
rt.synchronize()
