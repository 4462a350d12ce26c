"""Options and environment variables: one place, all documented."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

from asyncgpu.core.config import ENVIRONMENT, Options, options_from_env

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_every_environment_variable_is_documented():
    doc = (ROOT / "docs" / "reference" / "environment.md").read_text()
    documented = set(re.findall(r"`(ASYNCGPU_[A-Z_]+)`", doc))
    assert set(ENVIRONMENT) <= documented
    assert "ASYNCGPU_LOG_LEVEL" in documented


def test_environment_is_read_only_in_config():
    offenders = [
        str(p.relative_to(ROOT)) for p in (ROOT / "asyncgpu").rglob("*.py")
        if p.relative_to(ROOT).as_posix() != "asyncgpu/core/config.py"
        and re.search(r"os\.environ|getenv", p.read_text())
    ]
    assert offenders == []


def test_options_from_env_parses_and_rejects():
    opts = options_from_env({"ASYNCGPU_EXECUTION": "sync", "ASYNCGPU_MAX_STREAMS": "4"})
    assert opts.execution == "sync" and opts.max_streams == 4
    with pytest.raises(ValueError, match="ASYNCGPU_MAX_STREAMS='x' is not valid"):
        options_from_env({"ASYNCGPU_MAX_STREAMS": "x"})
    with pytest.raises(ValueError, match="parent_stream must be one of"):
        options_from_env({"ASYNCGPU_PARENT_STREAM": "nope"})


def test_a_variable_naming_a_choice_is_read_whatever_its_case_and_spaces():
    """As the flags and numbers are read (ASYNCGPU_MAX_STREAMS=' 4 ' is 4): SIM was refused."""
    opts = options_from_env({"ASYNCGPU_BACKEND": " SIM", "ASYNCGPU_MEMORY": "Explicit ",
                             "ASYNCGPU_GRAPH_ORDER": "IOS", "ASYNCGPU_MAX_STREAMS": " 4 "})
    assert (opts.backend, opts.memory, opts.graph_order, opts.max_streams) == (
        "sim", "explicit", "ios", 4)


@pytest.mark.parametrize("name", ["graph_read_back", "interference", "debug_hb"])
@pytest.mark.parametrize("value", ["False", 0, None])
def test_a_switch_given_anything_but_a_bool_is_refused_by_name(name, value):
    import asyncgpu as ag

    with pytest.raises(ValueError, match=f"option {name} must be True or False"):
        ag.configure(**{name: value})


@pytest.mark.parametrize("name,value", [
    ("sim_seed", "abc"), ("sim_seed", 2.5), ("sim_seed", -1), ("stress_seed", "x"),
    ("stress_seed", -1), ("sim_tick", "0.5"), ("sim_tick", True), ("device_data_threshold", None),
    ("copy_chunks", True), ("graph_cache", True), ("device", True), ("sim_devices", True),
    ("copy_chunks", np.True_), ("max_streams", np.float64(4.0)), ("sim_seed", np.False_),
])
def test_an_option_of_the_wrong_type_is_refused_by_name(name, value):
    """Seeds were taken whatever they were (and replay hints then named seeds the variables
    cannot take); a string for a number raised a bare TypeError; True passed as the integer 1."""
    with pytest.raises(ValueError, match=f"option {name} must be"):
        Options(**{name: value})


@pytest.mark.parametrize("name,value", [
    ("copy_chunks", np.int64(4)), ("max_streams", np.int32(4)), ("poll_threshold", np.uint16(8)),
    ("device", np.int64(0)), ("devices", np.int64(1)), ("sim_devices", np.int64(2)),
    ("sim_seed", np.int64(3)), ("stress_seed", np.uint32(5)), ("graph_cache", np.int64(16)),
    ("graph_max_streams", np.int8(0)), ("graph_ios_part", np.int64(12)),
])
def test_a_numpy_integer_is_taken_for_an_integer_option_as_a_python_int(name, value):
    """configure(copy_chunks=np.int64(4)) was refused as "must be a positive integer; got
    np.int64(4)", while devices=(np.int64(0),) was taken."""
    import asyncgpu as ag

    with ag.configure(backend="sim", **{name: value}):
        got = getattr(ag.options(), name)
        assert got == value and type(got) is int
        assert (ag.ones(3) + 1).tolist() == [2.0, 2.0, 2.0]


@pytest.mark.parametrize("var, raw", [("ASYNCGPU_BACKEND", "gpu"), ("ASYNCGPU_COPY_CHUNKS", "0"),
                                      ("ASYNCGPU_SIM_DEVICES", "65")])
def test_a_variable_whose_value_is_out_of_its_range_is_named(var, raw):
    with pytest.raises(ValueError, match=f"environment variable {var}='{raw}' is not valid"):
        options_from_env({var: raw, "ASYNCGPU_MAX_STREAMS": "8"})


@pytest.mark.parametrize("var, raw, allowed", [
    ("ASYNCGPU_MAX_STREAMS", "abc", rf"option max_streams must be a positive integer, at most "
                                    rf"{sys.maxsize}"),
    ("ASYNCGPU_STRESS_SEED", "1.5", r"option stress_seed must be an integer >= 0"),
    ("ASYNCGPU_SIM_DEVICES", "two", r"option sim_devices must be from 1 to 30"),
    ("ASYNCGPU_GRAPH_MAX_STREAMS", "x", r"option graph_max_streams must be 0 \(no limit\)"),
    ("ASYNCGPU_SIM_TICK", "half", r"option sim_tick must be a number in \[0, 1\]"),
])
def test_a_variable_that_is_no_number_is_refused_naming_the_variable_and_the_range(var, raw,
                                                                                  allowed):
    """The message was Python's own: "invalid literal for int() with base 10: 'abc'"."""
    with pytest.raises(ValueError, match=rf"environment variable {var}='{raw}' is not valid: "
                                         rf"{allowed}.*; got '{raw}'"):
        options_from_env({var: raw})


@pytest.mark.parametrize("raw", ["a,b", "0,,1", ",", "0,", "2.5"])
def test_devices_variable_with_an_entry_that_is_no_device_number_is_refused(raw):
    """An empty entry is refused wherever it is: "0,,1" was read as (0, 1) while "," was
    refused."""
    empty = "; an entry is empty" if "," in raw and "" in raw.split(",") else ""
    with pytest.raises(ValueError, match=rf"environment variable ASYNCGPU_DEVICES='{raw}' is not "
                                         rf"valid: expected all, a count from 1 to 30, or "
                                         rf"distinct device numbers >= 0 separated by commas "
                                         rf"\(0,2\){re.escape(empty)}$"):
        options_from_env({"ASYNCGPU_DEVICES": raw})
    assert options_from_env({"ASYNCGPU_DEVICES": " 0, 2 "}).devices == (0, 2)


def test_of_two_bad_variables_the_one_named_is_the_one_its_message_describes():
    with pytest.raises(ValueError, match=r"ASYNCGPU_COPY_CHUNKS='0' is not valid: option "
                                         r"copy_chunks must be"):
        options_from_env({"ASYNCGPU_COPY_CHUNKS": "0", "ASYNCGPU_MAX_STREAMS": "0"})


@pytest.mark.parametrize("name", ["max_streams", "poll_threshold", "copy_chunks", "graph_cache",
                                  "graph_max_streams", "graph_ios_max"])
def test_a_count_too_large_for_the_runtime_is_refused_naming_the_option_and_its_range(name):
    """2**70 streams passed (only >= 1 was checked); then configure failed halfway with a bare
    OverflowError, as the compiled launch path stores counts in a C ssize_t."""
    import asyncgpu as ag

    before = ag.options()
    with pytest.raises(ValueError, match=rf"option {name} must be .* at most {sys.maxsize} "
                                         rf"\(sys.maxsize\); got {2**70}"):
        ag.configure(**{name: 2**70})
    assert ag.options() == before
    assert getattr(Options(**{name: sys.maxsize}), name) == sys.maxsize


def test_a_variable_too_large_for_its_count_is_named_with_the_range():
    raw = "99999999999999999999999"
    with pytest.raises(ValueError, match=rf"environment variable ASYNCGPU_MAX_STREAMS='{raw}' is "
                                         rf"not valid: option max_streams must be .* at most "
                                         rf"{sys.maxsize}"):
        options_from_env({"ASYNCGPU_MAX_STREAMS": raw})


def test_configuring_the_cuda_backend_without_a_gpu_is_refused_and_changes_nothing():
    import numpy as np

    import asyncgpu as ag
    from asyncgpu.backends import cuda_usable

    if cuda_usable():
        pytest.skip("a GPU is usable here")
    with ag.configure(backend="sim"):
        a = ag.array(np.arange(3.0))
        with pytest.raises(ag.BackendUnavailableError, match="needs CuPy .* and a visible"):
            ag.configure(backend="cuda")
        assert ag.options().backend == "sim"
        assert (a + 1).tolist() == [1.0, 2.0, 3.0]      # (the runtime was not retired)


def test_a_device_the_simulator_lacks_is_refused_by_configure_and_changes_nothing():
    import numpy as np

    import asyncgpu as ag

    with ag.configure(backend="sim", sim_devices=2):
        a = ag.array(np.arange(3.0))
        with pytest.raises(ag.DeviceError, match=r"device=5 \(the option device, or "
                           r"ASYNCGPU_DEVICE\): this machine has 2 virtual devices"):
            ag.configure(device=5)
        assert ag.options().device == 0
        assert (a + 1).tolist() == [1.0, 2.0, 3.0]
        with ag.configure(device=1):
            b = ag.zeros(2) + 1
            assert b.device.id == 1 and repr(b.device) == "<asyncgpu sim device 1>"
        with pytest.raises(ag.DeviceError, match=r"device=1 .* has 1 virtual device"):
            with ag.configure(device=1), ag.configure(sim_devices=1):
                pass


@pytest.mark.parametrize("value,pattern", [
    (3, r"option trace must be the path of the file .* got 3"),
    ("", r"option trace must be the path"),
    ("/no/such/folder/t.json", r"option trace: '/no/such/folder/t.json' is in no folder that "
                               r"exists \('/no/such/folder'\)"),
    ("/tmp", r"option trace: '/tmp' is a folder; name the file"),
])
def test_a_trace_path_that_cannot_be_written_is_refused_at_once(value, pattern):
    import asyncgpu as ag

    with pytest.raises(ValueError, match=pattern):
        ag.configure(trace=value)
    assert ag.options().trace is None


def test_core_modules_import_no_cuda_library():
    code = ("import sys, asyncgpu.core.dag, asyncgpu.core.deps, asyncgpu.core.policies, "
            "asyncgpu.core.streams, asyncgpu.core.hb, asyncgpu.observe.trace, "
            "asyncgpu.observe.metrics, asyncgpu.core.instrument, asyncgpu.observe.draw; "
            "bad = {'cupy', 'numba'} & {m.split('.')[0] for m in sys.modules}; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


@pytest.mark.parametrize("chosen,seen", [(None, "32"), ("4", "4")])
def test_importing_asyncgpu_gives_cuda_32_hardware_queues_unless_the_program_chose(chosen, seen):
    """The driver reads CUDA_DEVICE_MAX_CONNECTIONS once, in cuInit: it is set on import, as
    early as asyncgpu can, not when the backend is made (a workload's imports, compiling its
    kernels for the device, may call cuInit in between); a program's own value is kept."""
    import os

    env = {k: v for k, v in os.environ.items() if k != "CUDA_DEVICE_MAX_CONNECTIONS"}
    if chosen is not None:
        env["CUDA_DEVICE_MAX_CONNECTIONS"] = chosen
    code = "import os, asyncgpu; print(os.environ['CUDA_DEVICE_MAX_CONNECTIONS'])"
    out = subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, env=env,
                         capture_output=True, text=True).stdout
    assert out.strip() == seen


FAKE_DRIVER = """
int answer;   /* what cuDeviceGetCount returns: 0 once cuInit ran, 3 (not initialized) before */
int cuDeviceGetCount(int* count) { *count = 1; return answer; }
"""


@pytest.mark.parametrize("answer,initialized", [(0, True), (3, False)])
def test_cuda_initialized_before_asyncgpu_is_told_from_the_loaded_driver(
        answer, initialized, tmp_path):
    """The probe asks a driver library already loaded, loading nothing: a stand-in driver
    built here answers as CUDA's does before and after cuInit."""
    import ctypes
    import shutil

    from asyncgpu.backends.cuda import queues

    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("needs a C compiler to build the stand-in driver")
    library = tmp_path / f"libfakecuda{answer}.so"
    source = tmp_path / "fake.c"
    source.write_text(FAKE_DRIVER)
    subprocess.run([compiler, "-shared", "-fPIC", "-o", str(library), str(source)], check=True)
    assert not queues.initialized_already(str(library))        # not loaded: nothing asked
    driver = ctypes.CDLL(str(library))
    ctypes.c_int.in_dll(driver, "answer").value = answer
    assert queues.initialized_already(str(library)) is initialized


@pytest.mark.parametrize("chosen", [False, True])
def test_asyncgpu_imported_after_cuda_was_initialized_warns_once_as_the_backend_is_made(
        chosen, monkeypatch, caplog):
    from asyncgpu.backends.cuda import queues

    monkeypatch.setattr(queues, "initialized_already", lambda library=queues.DRIVER: True)
    if chosen:
        monkeypatch.setenv("CUDA_DEVICE_MAX_CONNECTIONS", "16")
    else:
        monkeypatch.delenv("CUDA_DEVICE_MAX_CONNECTIONS", raising=False)
    queues.claim()
    caplog.set_level("WARNING", logger="asyncgpu")
    queues.warn_if_late()
    queues.warn_if_late()
    warned = [r.getMessage() for r in caplog.records if "hardware queues" in r.getMessage()]
    if chosen:              # (the program chose its number: nothing to say)
        assert warned == []
    else:
        assert len(warned) == 1
        assert "import asyncgpu before the program's first CUDA call" in warned[0]
        assert "CUDA_DEVICE_MAX_CONNECTIONS=32" in warned[0]


def test_backend_auto_without_a_gpu_says_it_uses_the_simulator_once_a_process(monkeypatch,
                                                                                caplog):
    """Each backend a configure built again (memory=, sim_seed=...) said it again: four
    ``with configure(memory="managed")`` blocks printed the line 9 times."""
    import asyncgpu as ag
    from asyncgpu import backends

    monkeypatch.setattr(backends, "_cuda_usable", False)
    monkeypatch.setattr(backends, "_said_simulator", False, raising=False)
    caplog.set_level("WARNING", logger="asyncgpu")
    with ag.configure(backend="auto"):
        x = ag.ones(4)
        for seed in range(3):
            with ag.configure(memory="managed", sim_seed=seed):
                assert (x * 2).tolist() == [2.0] * 4
    said = [r.getMessage() for r in caplog.records if "no usable GPU" in r.getMessage()]
    assert said == ["asyncgpu: no usable GPU found; using the CPU simulator (sim backend)"]


def test_public_api_is_documented():
    import asyncgpu as ag
    from asyncgpu.core.compiled import compiled_modules

    for name in ag.__all__:
        obj = getattr(ag, name)
        assert obj.__doc__, name
        if isinstance(obj, type) or callable(obj):
            module = getattr(obj, "__module__", "asyncgpu")
            # (a compiled class's module is fixed by the compiler: the module defining it)
            assert module == "asyncgpu" or module in compiled_modules(), name


def test_a_replaced_backend_gives_its_caches_back():
    """Options that need another backend object give the runtime a new one: the old one
    finishes its work, then is closed (on ``cuda``: the device memory pool's free blocks go
    back)."""
    import numpy as np

    import asyncgpu as ag
    from asyncgpu.runtime.current import current_runtime

    with ag.configure(backend="sim", memory="explicit"):
        rt = current_runtime()
        backend = rt.backend
        closed = []
        backend.close = lambda: closed.append(rt.streams.inflight)
        x = ag.ones(8, np.float32)
        x += 1
        with ag.configure(execution="sync"):        # same backend: reconfigured in place
            assert current_runtime().backend is backend
        assert closed == []
        with ag.configure(memory="managed"):        # another backend for the same runtime
            assert current_runtime() is rt and rt.backend is not backend
            assert closed == [0]                    # closed once, after its work finished


def test_changing_direct_driver_makes_a_new_backend():
    import asyncgpu as ag
    from asyncgpu.runtime import current as _runtime

    with ag.configure(backend="sim", direct_driver=True):
        first = _runtime.current_runtime().backend
        with ag.configure(direct_driver=False):
            assert _runtime.current_runtime().backend is not first


def test_changing_single_node_graphs_makes_a_new_backend():
    import asyncgpu as ag
    from asyncgpu.runtime import current as _runtime

    with ag.configure(backend="sim", single_node_graphs=True):
        first = _runtime.current_runtime().backend
        with ag.configure(single_node_graphs=False):
            assert _runtime.current_runtime().backend is not first


def test_a_change_of_devices_inside_a_device_pin_is_refused_and_changes_nothing():
    """A new runtime would not carry this thread's pin: its work would run wherever the new
    runtime's policy put it, silently."""
    import numpy as np

    import asyncgpu as ag

    with ag.configure(backend="sim", sim_devices=4, devices="all"):
        with ag.device(3):
            with pytest.raises(ag.DeviceError, match=r"inside asyncgpu.device\(3\).*leave the "
                               r"asyncgpu.device block first"):
                ag.configure(devices=[2, 3])
            assert ag.options().devices == "all"
            b = ag.array(np.ones(4)) + 1
            c = b * 2
            placed = dict(ag.statistics().placed)
        assert c.tolist() == [4.0] * 4
        assert placed == {3: 2}                         # (both calls where the pin says)


def test_a_change_of_devices_while_another_thread_is_pinned_is_refused():
    import threading

    import asyncgpu as ag

    inside, leave = threading.Event(), threading.Event()

    def pinned():
        with ag.device(3):
            inside.set()
            leave.wait(30)

    with ag.configure(backend="sim", sim_devices=4, devices="all"):
        other = threading.Thread(target=pinned)
        other.start()
        inside.wait(30)
        try:
            with pytest.raises(ag.DeviceError, match=r"while another thread is inside "
                               r"asyncgpu.device\(3\)"):
                ag.configure(devices=2)
        finally:
            leave.set()
            other.join()
        with ag.configure(devices=2):           # (every block left)
            assert ag.options().devices == 2


def test_leaving_a_configure_block_of_other_devices_while_pinned_is_refused_keeping_the_pin():
    """Restoring the devices makes a new runtime too: refused as the change is, so the pin is
    not dropped unseen (the thread's next launch ran on device 0 inside asyncgpu.device(1))."""
    import numpy as np

    import asyncgpu as ag

    def pinned():
        with ag.device(1):
            yield

    with ag.configure(backend="sim", sim_devices=4, devices=2):
        block = ag.configure(devices=4)
        block.__enter__()
        holder = pinned()
        next(holder)                        # (this thread inside asyncgpu.device(1))
        with pytest.raises(ag.DeviceError, match=r"leaving the block of asyncgpu.configure\("
                                                 r"devices=4\) inside asyncgpu.device\(1\)"):
            block.__exit__(None, None, None)
        assert ag.options().devices == 4
        y = ag.zeros(4) + 1
        assert y.device.id == 1             # (run where the pin says)
        holder.close()
        block.__exit__(None, None, None)    # (left now: the devices are restored)
        assert ag.options().devices == 2 and y.tolist() == [1.0] * 4


def test_a_thread_that_ended_inside_a_device_block_does_not_hold_later_changes(caplog):
    import threading

    import asyncgpu as ag

    with ag.configure(backend="sim", sim_devices=4, devices="all"):
        worker = threading.Thread(target=lambda: ag.device(2).__enter__())
        worker.start()
        worker.join()
        with caplog.at_level("WARNING", logger="asyncgpu"):
            with ag.configure(devices=2):                   # (not refused)
                assert ag.options().devices == 2
        assert "a thread ended inside asyncgpu.device(2)" in caplog.text


def test_leaving_a_device_block_never_entered_says_so():
    import asyncgpu as ag

    with ag.configure(backend="sim", sim_devices=2, devices="all"):
        with pytest.raises(RuntimeError, match=r"device\(1\) is left, and no thread is inside "
                                               r"it \(never entered"):
            ag.device(1).__exit__(None, None, None)
