# C types of asyncgpu/runtime/recording_hook.py where Cython compiles it (setup.py); the .py is
# the code.

cpdef unsigned long this_thread()


cdef class RecordingHook:
    cdef public unsigned long thread

    cpdef bint remember(self, launcher, tuple args) except -1

    cpdef bint kernel(self, launcher, tuple args, site) except -1


cdef class Recordings(RecordingHook):
    cdef public dict by_thread


cpdef RecordingHook recording_of(rt, unsigned long thread)

cpdef start_recording(rt, RecordingHook recording)

cpdef stop_recording(rt, RecordingHook recording)
