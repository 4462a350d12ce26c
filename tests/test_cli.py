"""The ``asyncgpu`` command on the sim backend: help texts, version, the scale announcement,
tables that fit 80 columns, no meaningless ratios on the simulator, and Ctrl-C."""

from __future__ import annotations

import re

import pytest

from asyncgpu import __main__ as cli
from asyncgpu.cli import bench, suite, tables


def _run(capsys, monkeypatch, *argv):
    monkeypatch.setenv("COLUMNS", "80")
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _text(capsys, monkeypatch, *argv):
    """A run that succeeds: its output with the table's line breaks folded into spaces."""
    code, out, _ = _run(capsys, monkeypatch, *argv)
    assert code == 0
    return " ".join(out.split())


def _help(capsys, *argv):
    with pytest.raises(SystemExit) as exc:
        cli.main([*argv, "--help"])
    assert exc.value.code == 0
    return capsys.readouterr().out


def test_top_help_describes_every_command_in_plain_text(capsys):
    out = _help(capsys)
    for command in ("bench", "trace", "info"):
        assert f"  {command} " in out
    assert "``" not in out and ":class:" not in out     # no reStructuredText markup
    assert "times are not GPU times" in out
    assert "works the same as 'asyncgpu'." in out      # the whole description, not its start
    assert max(len(line) for line in out.splitlines()) <= 80


@pytest.mark.parametrize("command", ["bench", "trace"])
def test_every_option_has_help_text(capsys, command):
    parser = cli._parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices[command]
    missing = [a.dest for a in sub._actions if not a.help]
    assert missing == []
    out = _help(capsys, command)
    assert "--inputs" in out


def test_help_shows_the_defaults_of_the_backend_here(capsys):
    out = " ".join(_help(capsys, "bench").split())
    assert "here: sim" in out
    assert f"{suite.ITERATIONS[1]} on the simulator" in out
    assert "(default: 20)" not in out


def test_trace_out_has_a_default(capsys):
    args = cli._parser().parse_args(["trace", "vec"])
    assert args.out == "asyncgpu-trace"
    assert "default: ./asyncgpu-trace" in " ".join(_help(capsys, "trace").split())


@pytest.mark.parametrize("argv, message", [
    (["bench", "vec", "--block-sizes", "abc"], "--block-sizes: expected comma-separated "
                                               "integers from 1 to 1024"),
    (["bench", "vec", "--block-sizes", "32,"], "--block-sizes: expected"),
    (["bench", "vec", "--iterations", "-1"], "--iterations: expected an integer of at least 1"),
    (["bench", "vec", "--iterations", "0"], "--iterations: expected an integer of at least 1"),
    (["bench", "vec", "--warmup", "-1"], "--warmup: expected an integer of at least 0"),
    (["bench", "vec", "--rounds", "0"], "--rounds: expected"),
    (["bench", "multigpu", "--devices", ","], "--devices: expected comma-separated integers"),
    (["bench", "tenants", "--period", "inf"], "--period: expected a finite number above 0"),
    (["trace", "vec", "--block-size", "0"], "--block-size: expected an integer from 1 to 1024"),
])
def test_a_bad_option_value_is_refused_by_name_before_anything_runs(capsys, argv, message):
    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_trace_out_naming_a_file_is_refused_before_the_run(capsys, monkeypatch, tmp_path):
    taken = tmp_path / "taken"
    taken.write_text("")
    code, _, err = _run(capsys, monkeypatch, "trace", "vec", "--out", str(taken))
    assert code == 2 and "is a file; give a directory" in err


def test_json_keeps_every_benchmark_named(capsys, monkeypatch, tmp_path):
    import json

    path = tmp_path / "two.json"
    code, _, _ = _run(capsys, monkeypatch, "bench", "overlap", "overhead", "--json", str(path))
    assert code == 0
    assert sorted(json.loads(path.read_text())) == ["machine", "overhead", "overlap"]


def test_all_beside_a_micro_benchmark_runs_the_suite_too(capsys, monkeypatch):
    text = _text(capsys, monkeypatch, "bench", "all", "overlap", "--iterations", "1",
                 "--warmup", "0", "--block-sizes", "32", "--modes", "serial")
    assert "overlap of two independent" in text and "unknown workload" not in text
    assert all(f" {w} " in f" {text} " for w in ("vec", "bs", "img", "ml", "hits", "dl"))


def test_a_bad_log_level_is_named_in_one_line(capsys, monkeypatch):
    monkeypatch.setenv("ASYNCGPU_LOG_LEVEL", "bogus")
    assert cli.main(["info"]) == 2
    assert capsys.readouterr().err.strip() == (
        "asyncgpu: ASYNCGPU_LOG_LEVEL='bogus' is not a logging level; use one of DEBUG, INFO, "
        "WARNING, ERROR, CRITICAL")


def test_version(capsys):
    import asyncgpu

    with pytest.raises(SystemExit) as exc:
        cli.main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"asyncgpu {asyncgpu.__version__}"


def test_bench_announces_the_scale_it_runs_instead(capsys, monkeypatch):
    text = _text(capsys, monkeypatch, "bench", "vec", "--scale", "large", "--modes", "parallel")
    assert "The 'large' scale needs a GPU: running the 'tiny' scale instead." in text
    assert text.count("not GPU times") == 1


def test_bench_on_sim_fits_80_columns_and_shows_no_speedup(capsys, monkeypatch):
    code, out, _ = _run(capsys, monkeypatch, "bench", "vec", "--modes",
                        "serial,parallel,handopt,cudagraph,recorded,recorded_static")
    assert code == 0
    assert max(len(line) for line in out.splitlines()) <= 80
    assert "PASS" in out
    assert "nan" not in out.lower()
    table = out.split("no speedups are reported.", 1)[1]
    assert "speedup" not in table and "geometric mean" not in table


def test_bench_json_on_sim_keeps_every_ratio_key_with_null(capsys, monkeypatch, tmp_path):
    """The console says no speedups are reported on the simulator; the JSON had the summary's
    speedup and vs_handopt, and bench tenants' per-mode speedup, as numbers."""
    import json

    path = tmp_path / "b.json"
    code, _, _ = _run(capsys, monkeypatch, "bench", "vec", "--modes", "serial,parallel,handopt",
                      "--iterations", "1", "--warmup", "0", "--block-sizes", "32", "--json",
                      str(path))
    assert code == 0
    row, = json.loads(path.read_text())["summary"]
    assert row["serial"] and row["parallel"] and row["handopt"]        # (the times stay)
    ratios = {key: row[key] for key in ("speedup", "vs_handopt", "vs_cudagraph",
                                        "recorded_vs_parallel", "vs_other_memory")}
    assert ratios == dict.fromkeys(ratios)
    code, _, _ = _run(capsys, monkeypatch, "bench", "tenants", "--workloads", "vec",
                      "--iterations", "1", "--warmup", "0", "--json", str(path))
    assert code in (0, None)
    result = json.loads(path.read_text())["tenants"]
    assert [r["speedup"] for r in result["rows"]] == [None] * len(result["rows"])
    assert result["bound"]["speedup"] is None and result["bound"]["ms"] > 0
    code, _, _ = _run(capsys, monkeypatch, "bench", "multigpu", "--devices", "1,2",
                      "--iterations", "1", "--warmup", "0", "--workloads", "mv", "--json",
                      str(path))
    assert code in (0, None)
    rows = json.loads(path.read_text())["multigpu"]["speedups"]
    assert {(r["devices"], r["over_one_gpu"], r["of_cupy"], r["over_bound"]) for r in rows} == {
        (1, None, None, None), (2, None, None, None)}


def test_bench_tenants_served_json_on_sim_has_no_share_of_alone(capsys, monkeypatch, tmp_path):
    """A served run's others' of_alone (a ratio of two step rates) is null on the simulator."""
    import json

    tenants = suite.bench_module("tenants")
    served = {"service": "vec", "mix": ["vec", "bs"], "rows": {"tenants": {
        "service": {"p50_ms": 1.0, "p99_ms": 2.0},
        "others": {"bs": {"steps_per_s": 3.0, "of_alone": 0.5}}}}}
    # (a served run takes most of a minute on the simulator: its result's shape is what counts)
    monkeypatch.setattr(tenants, "measure_served", lambda *args, **kwargs: served)
    path = tmp_path / "s.json"
    code, _, _ = _run(capsys, monkeypatch, "bench", "tenants", "--workloads", "vec,bs",
                      "--period", "2", "--json", str(path))
    assert code in (0, None)
    others = json.loads(path.read_text())["tenants_served"]["rows"]["tenants"]["others"]
    assert others == {"bs": {"steps_per_s": 3.0, "of_alone": None}}


def test_bench_tenants_balanced_on_sim_runs_one_step_of_each_and_says_why(capsys, monkeypatch):
    text = _text(capsys, monkeypatch, "bench", "tenants", "--workloads", "vec,bs", "--balance",
                 "--no-priority")
    assert "a round here is one step of each workload" in text
    assert "vec, bs checked in every mode" in text


def test_bench_without_serial_prints_no_nan(capsys, monkeypatch):
    code, out, _ = _run(capsys, monkeypatch, "bench", "vec", "--modes", "parallel,handopt")
    assert code == 0
    assert "nan" not in out.lower()


def test_ctrl_c_ends_with_one_line(capsys, monkeypatch):
    harness = suite.bench_module("harness")

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(harness, "bench_workload", interrupted)
    code, out, err = _run(capsys, monkeypatch, "bench", "vec")
    assert code == 130
    assert err.strip() == "asyncgpu bench: interrupted"
    assert "Traceback" not in out + err


def test_info_names_the_backend_once(capsys, monkeypatch, caplog):
    code, out, err = _run(capsys, monkeypatch, "info")
    assert code == 0
    assert "sim" in out and "options in force" in out
    assert "asyncgpu: asyncgpu:" not in out + err
    assert max(len(line) for line in out.splitlines()) <= 80


def test_the_log_level_is_asyncgpus_alone(capsys, monkeypatch):
    import logging

    monkeypatch.setenv("ASYNCGPU_LOG_LEVEL", "INFO")
    root, ours = logging.getLogger(), logging.getLogger("asyncgpu")
    saved = root.level, ours.level, list(root.handlers)
    try:
        _run(capsys, monkeypatch, "info")
        assert ours.getEffectiveLevel() == logging.INFO
        # (Numba's INFO lines, its module unloads among them, stay out)
        assert logging.getLogger("numba.cuda.cudadrv.driver").getEffectiveLevel() == \
            logging.WARNING
    finally:
        root.setLevel(saved[0])
        ours.setLevel(saved[1])
        root.handlers[:] = saved[2]


def test_log_lines_name_their_logger_once():
    import logging

    f = cli._Prefixed("%(message)s")
    mk = lambda name, msg: logging.LogRecord(name, logging.WARNING, __file__, 1, msg, (), None)
    assert f.format(mk("asyncgpu", "asyncgpu: no usable GPU")) == "asyncgpu: no usable GPU"
    assert f.format(mk("asyncgpu.bench", "vec failed")) == "asyncgpu.bench: vec failed"


def test_gpu_results_fit_80_columns_without_cutting_a_number(capsys, monkeypatch):
    """A GPU run's table with every mode, the ratios and the bounds: every number is printed
    whole in an 80-column terminal."""
    import argparse

    monkeypatch.setenv("COLUMNS", "80")
    modes = ("serial", "parallel", "handopt", "cudagraph", "recorded", "recorded_static")
    row = {"workload": "hits", "block": "256", "memory": "explicit", "ok": True,
           "speedup": 1.19, "vs_handopt": 0.72,
           "bounds": {"transfer_bound_s": 0.012345, "compute_bound_s": 0.054321,
                      "parallel_over_bound": 1.14}}
    row.update({m: 0.0101234 * (i + 1) for i, m in enumerate(modes)})
    args = argparse.Namespace(inputs="streaming", metrics=False)
    bench.print_results(tables.make_console(), args, [row], modes, ("explicit",), "medium", 20,
                       on_gpu=True, want_bounds=True)
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= 80
    assert "…" not in out
    for text in ("10.123", "60.740", "1.19", "0.72", "12.345", "54.321", "1.14"):
        assert text in out


def test_multigpu_on_sim_checks_every_count_and_shows_no_times(capsys, monkeypatch):
    code, out, _ = _run(capsys, monkeypatch, "bench", "multigpu", "--devices", "1,2",
                        "--iterations", "1", "--warmup", "0", "--workloads", "mv")
    assert code in (0, None)
    assert max(len(line) for line in out.splitlines()) <= 80
    assert "min-transfer-size" in out and "no times are reported" in out
    assert " ms" not in out and "x one GPU" not in out


def test_multigpu_refuses_an_unknown_workload_by_name(capsys, monkeypatch):
    code, out, err = _run(capsys, monkeypatch, "bench", "multigpu", "--workloads", "vec,hits")
    assert code == 2            # (a usage error, as every other; it exited with 1)
    assert re.search("unknown workload.*'hits'.*bs, vec, ml, mv, cg", err)


def test_multigpu_refuses_more_devices_than_the_host_has(capsys, monkeypatch):
    # (the simulator's host has as many virtual devices as it may have: 64; a GPU host, its
    # GPUs, which bench_multigpu asks CUDA for)
    with pytest.raises(SystemExit) as exc:
        _run(capsys, monkeypatch, "bench", "multigpu", "--devices", "1,65")
    assert exc.value.code == 2
    assert "--devices: expected comma-separated integers from 1 to 64" in capsys.readouterr().err


@pytest.mark.parametrize("argv,message", [
    (("bench", "replay", "nosuch"), "unknown workload(s) ['nosuch']"),
    (("bench", "vec", "--modes", "bogus"), "unknown mode(s) ['bogus']"),
    (("bench", "vec", "--modes", ","), "no modes"),
    (("bench", "vec", "--json", "/"), "--json '/' is a directory"),
    (("bench", "vec", "--plot", "/no/such/folder/p.png"), "the folder '/no/such/folder' does not"),
    (("trace", "vec", "--out", "/dev/null/x"), "the directory cannot be made"),
    (("bench", "vec", "--json", "/proc/asyncgpu.json"), "cannot be written"),
    (("bench", "vec", "--plot", "p.png"), "the simulator measures none"),
    (("bench", "tenants", "--workloads", ","), "--workloads names no workload"),
    (("trace", "nosuch"), "unknown workload 'nosuch'"),
    (("bench", "tenants", "--workloads", "vec,ml,vec:small"), "names vec more than once"),
], ids=["workload", "mode", "no-modes", "json-dir", "plot-folder", "trace-out", "json-proc",
        "plot-on-sim", "tenants-none", "trace-workload", "tenants-twice"])
def test_what_cannot_run_or_be_written_is_refused_before_anything_runs(capsys, monkeypatch,
                                                                       argv, message):
    ran = []
    monkeypatch.setattr(bench, "bench_module", lambda name: ran.append(name) or
                        suite.bench_module(name))
    code, out, err = _run(capsys, monkeypatch, *argv)
    # (one line on the standard error, whatever the terminal's width: a script reads it)
    assert code == 2 and message in err and err.count("\n") == 1, err
    assert not set(ran) - {"harness", "workloads", "tenants"}      # (no benchmark ran)


def test_plot_without_matplotlib_is_refused_before_anything_runs(capsys, monkeypatch):
    import importlib.util

    find = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "matplotlib" else find(name, *a))
    ran = []
    monkeypatch.setattr(bench, "bench_module", lambda name: ran.append(name) or
                        suite.bench_module(name))
    code, _, err = _run(capsys, monkeypatch, "bench", "vec", "--plot", "p.png")
    assert code == 2 and "pip install matplotlib" in err
    assert not set(ran) - {"harness", "workloads"}


@pytest.mark.parametrize("argv,message", [
    (("bench", "overhead", "tenants", "--workloads", "nope"), "unknown workload(s) ['nope']"),
    (("bench", "overlap", "multigpu", "--workloads", "zz"), "unknown workload(s) ['zz']"),
    (("bench", "overhead", "tenants", "--period", "2", "--balance"),
     "--balance and --no-priority apply to workloads run back to back"),
], ids=["tenants-mix", "multigpu-workloads", "tenants-period"])
def test_a_micro_benchmarks_own_options_are_checked_before_any_benchmark_runs(
        capsys, monkeypatch, argv, message):
    ran = []
    monkeypatch.setattr(bench, "bench_module", lambda name: ran.append(name) or
                        suite.bench_module(name))
    code, out, err = _run(capsys, monkeypatch, *argv)
    assert code == 2 and message in " ".join((out + err).split())
    assert "overhead" not in ran and "overlap" not in ran      # (nothing ran first)


def test_a_bad_environment_variable_is_one_line_for_every_command(tmp_path):
    import os
    import subprocess
    import sys

    env = dict(os.environ, ASYNCGPU_MEMORY="foo", PYTHONPATH=os.getcwd())
    for command in (["info"], ["bench", "vec"]):
        done = subprocess.run([sys.executable, "-m", "asyncgpu", *command], env=env,
                              capture_output=True, text=True, timeout=120, cwd=tmp_path)
        assert done.returncode == 2, done.stderr
        assert done.stderr.strip().splitlines() == [
            f"asyncgpu {command[0]}: environment variable ASYNCGPU_MEMORY='foo' is not valid: "
            "option memory must be one of managed, explicit; got 'foo'"]


def test_an_option_nothing_of_the_run_reads_is_said_to_be_ignored(capsys, monkeypatch):
    code, out, _ = _run(capsys, monkeypatch, "bench", "vec", "--devices", "2", "--iterations",
                        "1", "--warmup", "0", "--modes", "serial", "--block-sizes", "32")
    text = " ".join(out.split())
    assert code == 0
    assert "--devices applies to multigpu, which this run does not include: it is ignored" in text
    assert "--plot" not in text and "--steps" not in text       # (not given: nothing said)
    code, out, _ = _run(capsys, monkeypatch, "bench", "overlap", "--modes", "serial",
                        "--metrics")
    text = " ".join(out.split())
    assert code in (0, None)
    assert "--modes applies to the suite's workloads, which this run does not include" in text
    assert "--metrics applies to the suite's workloads" in text


def test_a_1d_block_size_for_a_2d_workloads_trace_is_said_to_be_ignored(capsys, monkeypatch,
                                                                        tmp_path):
    code, out, _ = _run(capsys, monkeypatch, "trace", "img", "--scale", "tiny", "--block-size",
                        "1024", "--out", str(tmp_path))
    assert code == 0
    assert "img runs 2D blocks of (8, 8); the 1D size is ignored" in " ".join(out.split())


def test_trace_counts_the_streams_its_kernels_ran_on(capsys, monkeypatch, tmp_path):
    """vec's three kernels run on two streams; a copy on a third is not a kernel's stream."""
    code, out, _ = _run(capsys, monkeypatch, "trace", "vec", "--scale", "tiny", "--out",
                        str(tmp_path))
    assert code == 0
    assert "3 kernels on 2 streams, 4 copies," in " ".join(out.split())


def test_info_of_an_uncompiled_install_says_why_and_what_the_driver_calls_are(capsys,
                                                                              monkeypatch):
    """It showed ``compiled False`` without a reason, and no ``driver_calls`` row."""
    import asyncgpu.core.compiled

    monkeypatch.setattr(asyncgpu.core.compiled, "is_compiled", lambda: False)
    code, out, _ = _run(capsys, monkeypatch, "info")
    text = " ".join(out.split())
    assert code == 0
    assert "False (plain Python: not compiled at install" in text
    assert "driver_calls CuPy's (not compiled" in text
