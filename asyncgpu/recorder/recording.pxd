# C types of asyncgpu/recorder/recording.py where Cython compiles it (setup.py); the .py is the
# code. ``finish`` and ``replay_remembered`` stay module globals, looked up at each segment's end
# (one per segment, not per launch), so a test may wrap them.
cimport cython

from asyncgpu.recorder.keys cimport Launch, LaunchMemo, same_arguments
from asyncgpu.runtime.allocation cimport explicit_frees
from asyncgpu.runtime.issue cimport Issuing
from asyncgpu.runtime.recording_hook cimport (RecordingHook, recording_of, start_recording,
                                              stop_recording, this_thread)


cdef class Recording(RecordingHook):
    cdef public Issuing runtime
    cdef public object token, name
    cdef public list launches, outcomes, frozen, previous
    cdef public bint failed, eager, split, keyed, placed
    cdef public Py_ssize_t segment, calls, frees
    cdef public LaunchMemo memo, cut

    @cython.locals(rt=Issuing, launches=list, memo=LaunchMemo, token=tuple, tenanted=bint)
    cpdef end_segment(self, bint last=*)

    @cython.locals(memo=LaunchMemo, rt=Issuing)
    cpdef repeated(self)

    cpdef _remember(self, LaunchMemo memo)

    @cython.locals(launch=Launch, rt=Issuing)
    cpdef bint kernel(self, launcher, tuple args, site) except -1

    @cython.locals(launches=list, previous=list, position=Py_ssize_t, same=Launch, old=tuple,
                   n=Py_ssize_t, i=Py_ssize_t)
    cpdef bint remember(self, launcher, tuple args) except -1

    cpdef went_on(self)

    cpdef refuse(self, what, array=*)

    @cython.locals(rt=Issuing)
    cpdef tuple library_call(self, call, site)
