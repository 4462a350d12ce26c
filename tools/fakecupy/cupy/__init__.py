"""A stand-in for CuPy whose CUDA calls do nothing (``tools/host_paths.py``).

Only what asyncgpu's ``cuda`` backend calls on its launch, event, stream-capture and graph
paths; every device operation returns at once and every event is complete. It exists to
measure the host-side Python of those paths on a machine without a GPU, where timings are
stable; never put it on the path of a program that computes anything.
"""

import itertools
import types

_addresses = itertools.count(1 << 20, 1 << 12)


def _noop(*args, **kwargs):
    return None


class _Memory:
    def __init__(self, nbytes):
        self.ptr = next(_addresses)
        self.nbytes = nbytes


class MemoryPool:
    def __init__(self, *args):
        pass

    def malloc(self, nbytes):
        return _Memory(nbytes)

    def free_bytes(self):
        return 0

    def free_all_blocks(self):
        pass


class _Graph:
    def __init__(self):
        self.graphExec = next(_addresses)

    def launch(self, stream):
        pass


_current = [0]     # the current device (cudaSetDevice)


class Stream:
    null = None

    def __init__(self, non_blocking=True, priority=0):
        self.ptr = next(_addresses)
        self.device_id = _current[0]
        self.priority = priority

    def synchronize(self):
        pass

    def begin_capture(self, mode=None):
        pass

    def end_capture(self):
        return _Graph()


class Event:
    done = True

    def __init__(self, block=False, disable_timing=True):
        self.ptr = next(_addresses)

    def synchronize(self):
        pass

    def record(self, stream=None):
        pass


class RawKernel:
    max_threads_per_block = 1024
    num_regs = 16
    shared_size_bytes = 0

    def __init__(self, code, name, options=()):
        self.kernel = types.SimpleNamespace(ptr=next(_addresses))

    def compile(self):
        pass

    def __call__(self, grid, block, args, stream=None, shared_mem=0):
        # (what a test may check: the device current at the launch, and the stream's device)
        launched.append((self, _current[0], getattr(stream, "device_id", None)))


#: every RawKernel call: (kernel, current device, the stream's device)
launched = []


class CUDADriverError(Exception):
    pass


class CUDARuntimeError(RuntimeError):
    pass


def _set_device(device):
    _current[0] = device


runtime = types.SimpleNamespace(
    getDeviceCount=lambda: 4, setDevice=_set_device, CUDARuntimeError=CUDARuntimeError, getDevice=lambda: _current[0],
    deviceCanAccessPeer=lambda a, b: 1, deviceEnablePeerAccess=_noop, memcpyPeerAsync=_noop, deviceGetAttribute=lambda *a: 1,
    getDeviceProperties=lambda device: {"name": b"stand-in", "multiProcessorCount": 132},
    eventRecord=_noop, streamWaitEvent=_noop, memGetInfo=lambda: (1 << 40, 1 << 40),
    memcpyAsync=_noop, deviceSynchronize=_noop, memPrefetchAsync=_noop,
    streamSynchronize=_noop, streamQuery=lambda stream: 0,
    eventElapsedTime=lambda start, end: 0.0,  # (events time nothing)
    cudaDevAttrConcurrentManagedAccess=1, streamCaptureModeRelaxed=2)
driver = types.SimpleNamespace(launchKernel=_noop, CUDADriverError=CUDADriverError)
cuda = types.SimpleNamespace(MemoryPool=MemoryPool, Stream=Stream, Event=Event, runtime=runtime,
                             driver=driver, malloc_managed=None,
                             get_elapsed_time=lambda start, end: 0.0,   # (events time nothing)
                             alloc_pinned_memory=lambda n: bytearray(n))
