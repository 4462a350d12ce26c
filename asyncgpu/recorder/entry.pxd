# C types of asyncgpu/recorder/entry.py where Cython compiles it (setup.py); the .py is the code.
cimport cython

from asyncgpu.recorder.keys cimport argument_key
from asyncgpu.recorder.recording cimport Recording
from asyncgpu.runtime.frozen cimport FrozenGraph, copy_key
from asyncgpu.runtime.issue cimport Issuing
from asyncgpu.runtime.recording_hook cimport (recording_of, start_recording, stop_recording,
                                              this_thread)


cdef class _Run:
    cdef public object token, name, outcome
    cdef public bint split

    @cython.locals(rt=Issuing, cur=Recording, rec=Recording)
    cpdef Recording _enter(self)

    cpdef Recording _exit(self, Recording rec, bint failed)

    @cython.locals(rt=Issuing, outcomes=list, launches=list)
    cpdef Recording _end(self, Recording rec, bint failed)

    @cython.locals(rt=Issuing, launches=list, ended=bint)
    cpdef _recover(self, Recording rec)


cdef class Recorder(_Run):
    cdef public dict _open


cdef class GraphFunction(_Run):
    cdef dict __dict__
    cdef object __weakref__
    cdef public object fn
    cdef public dict _static
    cdef public bint static

    @cython.locals(rt=Issuing, hit=tuple, frozen=FrozenGraph)
    cpdef tuple _replay_static(self, dict hits)
