# C types of asyncgpu/recorder/finish.py where Cython compiles it (setup.py); the .py is the code.
cimport cython

from asyncgpu.recorder.keys cimport LaunchMemo, RecordingKey
from asyncgpu.runtime.frozen cimport FrozenGraph
from asyncgpu.runtime.issue cimport Issuing


@cython.locals(replayed=tuple, key=RecordingKey, frozen=FrozenGraph, memos=dict, entries=dict)
cpdef replay_remembered(Issuing rt, token, LaunchMemo memo)
