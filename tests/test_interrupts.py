"""Real SIGINT during submission on sim: the runtime stays consistent (see tests/interrupts.py)."""

from __future__ import annotations

import pytest

import asyncgpu as ag
from interrupts import ctrl_c_raises, interrupted_chain


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # SIGINT in a gc hook
@pytest.mark.parametrize("seed", range(6))
def test_sigint_during_submission_leaves_the_runtime_consistent(seed):
    with ag.configure(backend="sim", sim_seed=seed, sim_strategy="random", execution="async"):
        interrupted_chain(ag, seed, max_delay_s=0.05)


def test_ctrl_c_inside_a_simulated_kernel_waits_for_its_end():
    """The simulated device finishes a kernel as a real one would: SIGINT arriving while the
    host thread runs the kernel's twin is raised after the kernel, whose writes are whole."""
    import signal

    _interrupted_kernel_ends_whole(_signalled_midway(signal.SIGINT))


@pytest.mark.parametrize("raised", [TimeoutError, SystemExit, KeyboardInterrupt])
def test_a_handler_raising_inside_a_simulated_kernel_waits_for_its_end(raised):
    """A timeout's SIGALRM handler (or a SIGTERM one) raising inside a simulated kernel: the
    kernel's writes were lost (``SystemExit``, ``KeyboardInterrupt``) or it was reported as
    the kernel's fault (any other exception). Now the handler runs after the kernel, as on a
    device, and its exception reaches the wait unchanged."""
    import signal

    def on_alarm(signum, frame):
        raise raised("the program's own")

    before = signal.signal(signal.SIGALRM, on_alarm)
    try:
        _interrupted_kernel_ends_whole(_signalled_midway(signal.SIGALRM), raised)
    finally:
        signal.signal(signal.SIGALRM, before)


def _signalled_midway(signum):
    """A kernel's twin adding 1 twice, with ``signum`` sent to the main thread between (as
    Ctrl-C reaches a program's only thread: a signal sent to the process may be taken by
    another thread, and Python then runs the handler in the main one at once)."""
    import signal
    import threading

    def twin(y, n):
        y[:n] += 1
        signal.pthread_kill(threading.main_thread().ident, signum)
        for _ in range(1000):       # bytecodes where the handler would run
            pass
        y[:n] += 1

    return twin


def _interrupted_kernel_ends_whole(twin, raised=KeyboardInterrupt):

    """Run a kernel whose ``twin`` adds 1 twice with a signal between: the handler's exception
    (``raised``) is raised by the synchronize that ran it, and both additions are in the
    result."""
    import numpy as np

    with ag.configure(backend="sim", sim_seed=0, sim_strategy="lazy", execution="async"):
        k = ag.cuda_kernel('extern "C" __global__ void k(float* y, int n) {}', "k", sim=twin)
        y = ag.zeros(8, np.float32)
        k[1, 8](y, 8)
        with ctrl_c_raises(), pytest.raises(raised):
            ag.synchronize()        # runs the kernel
        ag.synchronize()
        np.testing.assert_array_equal(y.numpy(), np.full(8, 2, np.float32))


def test_ctrl_c_that_another_thread_takes_still_waits_for_the_kernels_end():
    """A SIGINT sent to the process (Ctrl-C, ``kill -INT``) may be taken by any of its threads
    (NumPy's BLAS starts some); Python raises it in the main thread at once, and the simulated
    kernel the main thread is running still ends whole before it does."""
    import os
    import signal
    import threading
    import time

    stop = threading.Event()
    other = threading.Thread(target=stop.wait, daemon=True)
    other.start()

    def twin(y, n):
        y[:n] += 1
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})   # (so the other takes it)
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
        for _ in range(1000):       # bytecodes where the interrupt would land
            pass
        y[:n] += 1

    try:
        _interrupted_kernel_ends_whole(twin)
    finally:
        stop.set()


def test_ctrl_c_at_any_line_of_a_simulated_step_loses_no_operation():
    """The simulated device steps in the host thread, so Ctrl-C may land between any two lines
    of a step: whatever line it lands on, the operation the step took from its queue (a
    kernel's end, an event's record) still takes effect, the interrupt reaches the program
    after the step, and every launch's write is in the result."""
    import inspect
    import signal
    import sys
    import threading

    import numpy as np

    from asyncgpu.backends.sim.backend import SimBackend
    from interrupts import N, SRC, add1_twin

    main = threading.main_thread().ident
    steps = [SimBackend._step, SimBackend._advance]
    lines = [(f.__code__, line) for f in steps
             for line in sorted({at for _, _, at in f.__code__.co_lines() if at})]
    source, start = inspect.getsourcelines(SimBackend._advance)
    # (the lines of a kernel's end: where a lost operation would lose its write)
    ends = {start + i for i, text in enumerate(source)
            if "popleft" in text or "stream.running = stream.running" in text
            or "payload.end(state)" in text}
    interrupted = set()
    for code, line in lines:
        sent = []

        def local(frame, event, arg, line=line, sent=sent):
            if event == "line" and frame.f_lineno == line and not sent:
                sent.append(line)
                signal.pthread_kill(main, signal.SIGINT)
            return local

        def tracer(frame, event, arg, code=code, local=local):
            return local if frame.f_code is code else None

        with ag.configure(backend="sim", sim_seed=0, sim_strategy="random", sim_tick=0.0,
                          execution="async"):
            k = ag.cuda_kernel(SRC, "add1", sim=add1_twin)
            x, y, other = ag.ones(N), ag.zeros(N), ag.zeros(N)
            for _ in range(3):
                k[1, N](x, y, N)
                k[1, N](y, other, N)        # another stream: events recorded and waited for
            with ctrl_c_raises():
                sys.settrace(tracer)
                try:
                    ag.synchronize()
                except KeyboardInterrupt:
                    pass
                finally:
                    sys.settrace(None)
            ag.synchronize()
            np.testing.assert_array_equal(y.numpy(), np.full(N, 3.0), err_msg=f"line {line}")
            np.testing.assert_array_equal(other.numpy(), np.full(N, 6.0),
                                          err_msg=f"line {line}")
        interrupted.update(sent)
    assert ends <= interrupted          # (the sweep reached every line of a kernel's end)


_AXPY = r'''
extern "C" __global__ void axpy(const double* x, double* y, double a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] += a * x[i];
}
'''
_BOOM = r'''extern "C" __global__ void boom(double* y, int n) {}'''


def _axpy_twin(x, y, a, n):
    y[:n] += a * x[:n]


def _interrupting_twin(y, n):
    raise KeyboardInterrupt         # (as if Ctrl-C hit while the kernel ran)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.parametrize("seed", range(1, 4))
def test_interrupts_during_a_launchs_recovery_leave_no_half_issued_launch(seed):
    """A twin raising KeyboardInterrupt lands in a later launch's step and again in the
    recovery's synchronize, which gave up half-way: the half-issued launch stayed in the DAG
    and later launches on its array raced with it (RaceError)."""
    with ag.configure(backend="sim", sim_seed=seed, sim_tick=1.0):
        boom = ag.cuda_kernel(_BOOM, "boom", sim=_interrupting_twin)
        axpy = ag.cuda_kernel(_AXPY, "axpy", sim=_axpy_twin)
        x, ones = ag.zeros(16), ag.ones(16)
        for i in range(60):
            try:
                if i % 3 == 0:
                    boom[1, 16](ag.zeros(16), 16)
                axpy[1, 16](ones, x, 1.0, 16)
            except (KeyboardInterrupt, ag.KernelFault):
                pass
        while True:
            try:
                ag.synchronize()
                break
            except (KeyboardInterrupt, ag.KernelFault):
                pass
        values = x.numpy()
        assert (values == values[0]).all() and 40 <= values[0] <= 60


def test_ctrl_c_as_a_graph_replay_records_its_events_does_not_deadlock_later_replays():
    """A Ctrl-C landing in the simulator's event record, after the event was given its new
    capture and before the record was enqueued, left the event waiting for a record that never
    came: a replay's ``done`` event, recorded again at each replay, made the next replay and
    every later synchronize raise DeadlockError. Now a record is whole (the signal acted on
    after it), wherever the Ctrl-C lands."""
    import signal
    import sys
    import threading

    import numpy as np

    from asyncgpu.backends.sim import backend as sim_backend

    main = threading.main_thread().ident
    inside = {"_record", "_record_whole"}

    def under_record(frame):
        for _ in range(4):
            if frame is None:
                return False
            if frame.f_code.co_name in inside:
                return True
            frame = frame.f_back
        return False

    def replay_signalled(step, x, at):
        """Replay ``step``, sending SIGINT at the ``at``-th line of the simulator run inside an
        event's record (None: none sent); returns how many such lines there were."""
        lines = [0]

        def local(frame, event, arg):
            if event == "line" and under_record(frame):
                lines[0] += 1
                if lines[0] == at:
                    signal.pthread_kill(main, signal.SIGINT)
            return local

        def tracer(frame, event, arg):
            return local if frame.f_code.co_filename == sim_backend.__file__ else None

        with ctrl_c_raises():
            sys.settrace(tracer)
            try:
                step(x)
            except KeyboardInterrupt:
                pass
            finally:
                sys.settrace(None)
        return lines[0]

    with ag.configure(backend="sim", sim_seed=1):
        k = ag.cuda_kernel('extern "C" __global__ void k(float* y, int n) {}', "k",
                           sim=lambda y, n: y.__setitem__(slice(0, n), y[:n] + 1))

        @ag.graph
        def step(x):
            k[1, 4](x, 4)

        x = ag.zeros(4, np.float32)
        step(x)
        step(x)                             # recorded, then captured and replayed
        points = replay_signalled(step, x, None)
        assert points >= 4, points
        for at in range(1, points + 1):
            ag.synchronize()
            before = x.numpy()[0]
            replay_signalled(step, x, at)
            ag.synchronize()
            got = x.numpy()[0]
            assert got in (before, before + 1), (at, before, got)
            step(x)
            ag.synchronize()
            np.testing.assert_array_equal(x.numpy(), np.full(4, got + 1), err_msg=f"line {at}")
