"""The commands' outputs, flags and exit codes: an output path is checked before any work, an
existing output needs --force, a flag typed wrong is exit 2, --json and --quiet, every example
in a --help works, and `hindsight --help` imports no heavy module."""

from __future__ import annotations

import errno
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from hindsight.cli import LazyGroup, main
from synthetic import simulate_to_dir
from tests.conftest import ROOT, hindsight

PROGS = [[("compute", 3000), ("send", 1, 1000), ("recv", 1), ("coll", "Allreduce", 64)],
         [("recv", 0), ("compute", 2000), ("send", 0, 1000), ("coll", "Allreduce", 64)]]


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    return simulate_to_dir(tmp_path_factory.mktemp("outputs") / "t", PROGS)


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def one_error_line(r, *needles):
    """The output is one `Error:` line naming each of ``needles``, no traceback."""
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), r.output
    for n in needles:
        assert n in lines[0], r.output
    assert r.exception is None or isinstance(r.exception, SystemExit)


# ---------------------------------------------------------------------------------------------
# outputs checked before the work


def test_replay_out_refuses_an_existing_trace_unless_force(trace, tmp_path):
    out = tmp_path / "o"
    assert invoke("replay", trace, "--model", "measured", "--out", out).exit_code == 0
    before = (out / "manifest.json").read_text()
    r = invoke("replay", trace, "--model", "measured", "--out", out)
    assert r.exit_code == 2
    one_error_line(r, "--out", "--force")
    assert (out / "manifest.json").read_text() == before
    r = invoke("replay", trace, "--model", "hockney", "--out", out, "--force")
    assert r.exit_code == 0, r.output
    assert json.loads((out / "manifest.json").read_text())["replay"]["model"] == "hockney"


def test_replay_force_never_replaces_a_folder_that_is_not_a_trace(trace, tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    r = invoke("replay", trace, "--out", out, "--force")
    assert r.exit_code == 2
    one_error_line(r, "--out", "not a trace directory")
    assert (out / "notes.txt").read_text() == "keep me"
    # a manifest.json among the user's files does not make the folder a trace
    (out / "manifest.json").write_text("{}")
    (out / "sub").mkdir()
    r = invoke("replay", trace, "--out", out, "--force")
    assert r.exit_code == 2
    one_error_line(r, "--out", "holds notes.txt and 1 more, which no trace writes")
    assert (out / "notes.txt").read_text() == "keep me" and (out / "sub").is_dir()


def test_an_output_under_a_file_is_one_line_exit_1_and_no_work(trace, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    for args, flag in ((["replay", trace, "--out", blocker / "o"], "--out"),
                       (["sweep", trace, "--vary", "L=1us,2us", "--out", blocker / "s.csv"],
                        "--out"),
                       (["export", trace, "--format", "perfetto", "--out", blocker / "p.json"],
                        "--out"),
                       (["calibrate", "--out", blocker / "p.toml"], "--out")):
        r = invoke(*args)
        assert r.exit_code == 1, (args, r.output)
        one_error_line(r, flag, str(blocker))


def test_sweep_checks_the_plot_before_writing_the_csv(trace, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    csv = tmp_path / "s.csv"
    r = invoke("sweep", trace, "--vary", "L=1us,2us", "--out", csv, "--plot", blocker / "s.png")
    assert r.exit_code == 1
    one_error_line(r, "--plot")
    assert not csv.exists()
    png = tmp_path / "s.png"
    png.write_bytes(b"old")
    r = invoke("sweep", trace, "--vary", "L=1us,2us", "--out", csv, "--plot", png)
    assert r.exit_code == 2
    one_error_line(r, "--plot", "--force")
    assert not csv.exists() and png.read_bytes() == b"old"
    r = invoke("sweep", trace, "--vary", "L=1us,2us", "--out", csv, "--plot", png, "--force")
    assert r.exit_code == 0, r.output
    assert csv.is_file() and png.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize("fmt", ["perfetto", "otf2", "goal", "pipit"])
def test_export_refuses_an_existing_output_unless_force(trace, tmp_path, fmt):
    out = tmp_path / f"x-{fmt}"
    r = invoke("export", trace, "--format", fmt, "--out", out)
    assert r.exit_code == 0, r.output
    snapshot = sorted(p.name for p in out.iterdir()) if out.is_dir() else out.read_bytes()
    r = invoke("export", trace, "--format", fmt, "--out", out)
    assert r.exit_code == 2
    one_error_line(r, "--out", "--force")
    r = invoke("export", trace, "--format", fmt, "--out", out, "--force")
    assert r.exit_code == 0, r.output
    after = sorted(p.name for p in out.iterdir()) if out.is_dir() else out.read_bytes()
    assert after == snapshot


def test_export_default_output_is_checked_too(trace):
    default = trace.parent / (trace.name + ".perfetto.json")
    default.write_text("{}")
    try:
        r = invoke("export", trace, "--format", "perfetto")
        assert r.exit_code == 2
        one_error_line(r, str(default), "--force")
        assert default.read_text() == "{}"
    finally:
        default.unlink()


def test_predict_checks_its_out_before_reading_traces(tmp_path):
    out = tmp_path / "pred"
    out.mkdir()
    r = invoke("predict", tmp_path / "no-such-trace", "--out", out)
    assert r.exit_code == 2
    one_error_line(r, "--out", "--force")


def test_calibrate_checks_profile_and_plot_before_measuring(tmp_path):
    prof = tmp_path / "p.toml"
    prof.write_text("old")
    r = invoke("calibrate", "--out", prof)
    assert r.exit_code == 2
    one_error_line(r, "--out", "--force")
    png = tmp_path / "q.png"
    png.write_bytes(b"old")
    r = invoke("calibrate", "--out", tmp_path / "q.toml")
    assert r.exit_code == 2
    one_error_line(r, "--plot", "--force")
    r = invoke("calibrate", "--out", tmp_path / "r.toml", "--plot", tmp_path / "r.toml")
    assert r.exit_code == 2
    one_error_line(r, "--plot", "same file")


def test_a_failed_write_is_one_line_naming_the_flag(trace, tmp_path, monkeypatch):
    from replay.engine import Result

    def full(self, out):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Result, "write", full)
    r = invoke("replay", trace, "--out", tmp_path / "o")
    assert r.exit_code == 1
    one_error_line(r, "--out", "cannot write", "No space left on device")


# ---------------------------------------------------------------------------------------------
# exit codes


@pytest.mark.parametrize("args,flag", [
    (["replay", "{t}", "--algo", "Allreduce=bogus"], "--algo"),
    (["replay", "{t}", "--algo", "Allredce=ring"], "Allredce is not a collective"),
    (["sweep", "{t}", "--algo", "Allreduce=bogus", "--vary", "L=1us,2us", "--json"], "--algo"),
    (["export", "{t}", "--format", "goal", "--algo", "Allreduce=bogus", "--out", "{o}"],
     "--algo"),
    (["replay", "{t}", "--compute-scale", "-1"], "--compute-scale"),
    (["sweep", "{t}", "--compute-scale", "-1", "--vary", "L=1us,2us", "--json"],
     "--compute-scale"),
    (["export", "{t}", "--format", "perfetto", "--compute-scale", "-1", "--out", "{o}"],
     "--compute-scale"),
    (["export", "{t}", "--format", "perfetto", "--model", "loggps", "--compute-scale", "nan",
      "--out", "{o}"], "--compute-scale"),
    (["replay", "{t}", "--region-scale", "nosuch=2"], "--region-scale"),
    (["replay", "{t}", "--set", "G=abc"], "--set"),
    (["collect", "-n", "2", "--program", "{o}"], "--program"),
    (["collect", "-n", "2", "nosuchapp"], "--program nosuchapp"),
    (["collect", "-n", "2", "sorting", "--paradigm", "nosuch"], "paradigm"),
    (["collect", "-n", "2"], "name an application"),
])
def test_flag_errors_exit_2(trace, tmp_path, args, flag):
    out = tmp_path / "none"
    r = invoke(*[a.format(t=trace, o=out) for a in args])
    assert r.exit_code == 2, r.output
    one_error_line(r, flag)
    assert not out.exists()


@pytest.mark.parametrize("args", [
    ["replay", "{t}", "--profile", "{p}"],
    ["sweep", "{t}", "--profile", "{p}", "--vary", "L=1us,2us", "--json"],
    ["trace", "info", "{t}", "--profile", "{p}"],
    ["predict", "{t}", "--ranks", "1..4", "--profile", "{p}"],
])
def test_a_profile_the_model_cannot_use_is_a_data_error(trace, tmp_path, args):
    """A profile whose content is wrong (a parameter the model does not know) is one line naming
    the file, exit 1 like any input file that cannot be used; a missing one too."""
    prof = tmp_path / "x.json"
    prof.write_text(json.dumps({"a": 1}))
    r = invoke(*[a.format(t=trace, p=prof) for a in args])
    assert r.exit_code == 1, r.output
    one_error_line(r, "--profile", str(prof), "unknown parameter 'a'")
    r = invoke(*[a.format(t=trace, p=tmp_path / "none.toml") for a in args])
    assert r.exit_code == 1, r.output
    one_error_line(r, "--profile", str(tmp_path / "none.toml"))


# ---------------------------------------------------------------------------------------------
# --json and --quiet


def test_sweep_json_prints_the_rows(trace, tmp_path):
    r = CliRunner().invoke(main, ["sweep", str(trace), "--vary", "L=1us,5us", "--json"])
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)
    assert [round(x["L"] * 1e6) for x in rows] == [1, 5]
    assert all(x["predicted_makespan_s"] > 0 for x in rows)


def test_sweep_needs_out_or_json(trace):
    r = invoke("sweep", trace, "--vary", "L=1us,5us")
    assert r.exit_code == 2
    one_error_line(r, "--out", "--json")


def test_quiet_prints_only_the_written_paths(trace, tmp_path):
    r = invoke("replay", trace, "--quiet", "--out", tmp_path / "o")
    assert r.exit_code == 0 and r.output == f"{tmp_path / 'o'}\n"
    r = invoke("sweep", trace, "--vary", "L=1us,5us", "-q", "--out", tmp_path / "s.csv",
               "--plot", tmp_path / "s.png")
    assert r.exit_code == 0 and r.output == f"{tmp_path / 's.csv'}\n{tmp_path / 's.png'}\n"
    r = invoke("export", trace, "--format", "perfetto", "--model", "hockney", "--quiet",
               "--out", tmp_path / "p.json")
    assert r.exit_code == 0 and r.output == f"{tmp_path / 'p.json'}\n"
    r = invoke("replay", trace, "--quiet")
    assert r.exit_code == 0 and r.output == ""


def test_quiet_prints_no_notes_either(trace, tmp_path):
    """Notes (an oversubscribed run, untraced calls, a time without a unit) go to stderr, and
    not at all under --quiet."""
    import shutil

    t = tmp_path / "t"
    shutil.copytree(trace, t)
    m = json.loads((t / "manifest.json").read_text())
    m.update(oversubscribed=True, untraced_calls={"Iallreduce": 2})
    (t / "manifest.json").write_text(json.dumps(m))
    runs = [["replay", t, "--set", "L=5", "--out", tmp_path / "o"],
            ["sweep", t, "--vary", "L=1,2", "--out", tmp_path / "s.csv"],
            ["export", t, "--format", "pipit", "--out", tmp_path / "p.csv"]]
    for args in runs:
        r = invoke(*args, "--force")
        assert r.exit_code == 0 and "note: " in r.output, (args, r.output)
        r = invoke(*args, "--force", "--quiet")
        assert r.exit_code == 0 and r.output == f"{args[-1]}\n", (args, r.output)
    r = invoke("sweep", t, "--vary", "L=1..2:lin:2", "--json")
    assert "note: --vary L=1: a number without a unit is in s" in r.output, r.output


def test_sweep_plot_has_a_title_and_units(trace, tmp_path, monkeypatch):
    import matplotlib.figure

    seen = {}

    def savefig(fig, path, **kw):
        ax = fig.axes[0]
        seen.update(title=ax.get_title(), x=ax.get_xlabel(), y=ax.get_ylabel())
        path.write_bytes(b"png")

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", savefig)
    r = invoke("sweep", trace, "--vary", "G=0.01ns..1ns:log:3", "--out", tmp_path / "s.csv",
               "--plot", tmp_path / "s.png")
    assert r.exit_code == 0, r.output
    assert seen["x"] == "G (s/byte)" and seen["y"] == "predicted makespan (s)"
    assert "t under loggps" in seen["title"] and "G" in seen["title"]


def test_a_sweep_of_three_parameters_plots_a_line_per_combination(trace, tmp_path, monkeypatch):
    """--vary L, G and o: a line per (G, o), each in L's order, labelled with both (the
    plot drew G's lines only, each zig-zagging over the values of o), and the measured line."""
    import matplotlib.figure

    seen = {}

    def savefig(fig, path, **kw):
        ax = fig.axes[0]
        seen["lines"] = [(ln.get_label(), list(ln.get_xdata()), list(ln.get_ydata()))
                         for ln in ax.get_lines()]
        path.write_bytes(b"png")

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", savefig)
    r = invoke("sweep", trace, "--vary", "L=1us,2us", "--vary", "G=0.1ns,1ns", "--vary", "o=0,1us",
               "--out", tmp_path / "s.csv", "--plot", tmp_path / "s.png")
    assert r.exit_code == 0, r.output
    lines = {label: (x, y) for label, x, y in seen["lines"]}
    assert set(lines) == {"G=1e-10, o=0", "G=1e-10, o=1e-06", "G=1e-09, o=0",
                          "G=1e-09, o=1e-06", "measured"}
    df = pd.read_csv(tmp_path / "s.csv")
    for label, (x, y) in lines.items():
        if label != "measured":
            g = df[(df.G == float(label.split(", ")[0][2:])) &
                   (df.o == float(label.split(", ")[1][2:]))].sort_values("L")
            assert x == g.L.tolist() and y == g.predicted_makespan_s.tolist()


# ---------------------------------------------------------------------------------------------
# --help: its examples work, it imports nothing heavy


OWN = ["collect", "replay", "sweep", "predict", "export", "calibrate"]


def examples(name: str) -> list[list[str]]:
    """The example command lines of `hindsight NAME --help` (a description after two spaces
    is not part of the line)."""
    text = invoke(name, "--help").output
    return [shlex.split(re.split(r"\s{2,}", line.strip())[0])[1:]
            for line in text.splitlines() if line.strip().startswith("hindsight ")]


@pytest.mark.parametrize("name", OWN)
def test_every_help_example_parses(name, trace):
    lines = examples(name)
    assert lines, f"`hindsight {name} --help` shows no example"
    ctx = main.make_context("hindsight", [name, "--help"], resilient_parsing=True)
    cmd = main.get_command(ctx, name)
    for args in lines:
        assert args[0] == name
        with cmd.make_context(name, [str(trace) if a == "TRACE" else a for a in args[1:]]):
            pass


def test_the_cheap_help_examples_run(trace, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    names = {"TRACE": str(trace), "DIR": str(tmp_path / "otf2"), "s.goal": "s.goal"}
    ran = 0
    for name in ("export", "sweep", "replay"):
        for args in examples(name):
            if "--profile" in args:
                continue                # needs a calibrated profile
            r = invoke(*[names.get(a, a) for a in args])
            assert r.exit_code == 0, (args, r.output)
            ran += 1
    assert ran >= 6


def test_collect_help_examples_run_with_a_tiny_input(tmp_path):
    assert examples("collect")
    for i, args in enumerate(examples("collect")):
        if "--" in args and "--array-size" in args:
            args[args.index("--array-size") + 1] = "500"
        args = args[:args.index("--")] + ["--out", str(tmp_path / f"t{i}")] + \
            args[args.index("--"):]
        r = hindsight(*args)
        assert r.returncode == 0, (args, r.stderr)


def test_lazy_command_summaries_match_their_help():
    ctx = main.make_context("hindsight", ["--help"], resilient_parsing=True)
    for name, summary in LazyGroup.summaries.items():
        words = " ".join(main.get_command(ctx, name).help.split())
        assert words.startswith(summary.rstrip(".").rstrip(".")), name
    assert set(LazyGroup.summaries) == set(LazyGroup.lazy)


@pytest.mark.parametrize("flag", ["--version", "--help"])
def test_version_and_help_import_no_heavy_module(flag):
    code = ("import sys\n"
            f"sys.argv = ['hindsight', '{flag}']\n"
            "import hindsight.cli\n"
            "try:\n    hindsight.cli.main()\nexcept SystemExit:\n    pass\n"
            "heavy = {'numpy', 'pandas', 'pyarrow', 'matplotlib', 'numba'}\n"
            "print(sorted(heavy & {m.split('.')[0] for m in sys.modules}), file=sys.stderr)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stderr.strip().splitlines()[-1] == "[]"


# ---------------------------------------------------------------------------------------------
# calibrate: oversubscription and no orphaned benchmark


def test_calibrate_does_not_bind_oversubscribed_ranks_and_says_so(monkeypatch):
    from replay.calibration import run as R
    from hindsight.system import usable_cores

    cores = usable_cores()
    assert R.oversubscribed(cores + 1) and not R.oversubscribed(cores)
    bound = R.bench_command("mpiexec", 2, ["prog"], bind=True)
    assert bound == ["mpiexec", "-bind-to", "core", "-n", "2", "prog"]
    assert R.bench_command("mpiexec", 9, ["prog"], bind=False) == ["mpiexec", "-n", "9", "prog"]

    seen = []

    def bench(nprocs, transport, sizes, repeat, **kw):
        seen.append(nprocs)
        raise R.CalibrationError("stop here")

    monkeypatch.setattr(R, "run_bench", bench)
    warnings = []
    with pytest.raises(R.CalibrationError, match="stop here"):
        R.calibrate(cores + 1, overhead_ranks=[cores + 1], warn=warnings.append)
    assert seen == [cores + 1]
    assert len(warnings) == 1 and "not bound to cores" in warnings[0]


FAKE_MPIEXEC = """
import subprocess, sys, time
# like hydra's proxy: a child in a session of its own, which a signal to the group misses
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"],
                         start_new_session=True)
open(sys.argv[1], "w").write(str(child.pid))
time.sleep(300)
"""

DRIVER = """
import os, sys
from replay.calibration.run import run_job
run_job([sys.executable, "-c", sys.argv[1], sys.argv[2]], dict(os.environ), 300, "fake")
"""


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
def test_a_stopped_calibration_leaves_no_job_running(tmp_path, sig):
    import os
    import signal
    import time

    marker = tmp_path / "child.pid"
    driver = subprocess.Popen([sys.executable, "-c", DRIVER, FAKE_MPIEXEC, str(marker)], cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 30
    while not (marker.is_file() and marker.read_text()) and time.monotonic() < deadline:
        time.sleep(0.1)
    child = int(marker.read_text())
    driver.send_signal(getattr(signal, sig))
    driver.communicate(timeout=30)
    assert driver.returncode != 0
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        if "Z" in open(f"/proc/{child}/stat").read().rsplit(")", 1)[1].split()[0]:
            break                        # a zombie waiting for init: gone
        time.sleep(0.1)
    else:
        os.kill(child, signal.SIGKILL)
        pytest.fail("the benchmark's child outlived calibrate")


def test_import_refuses_an_existing_trace_without_force(tmp_path):
    """import treats its --out as every other command does: an existing output is refused
    without --force, and --force replaces a trace directory, never another folder."""
    from hindsight.cli import main

    goal = tmp_path / "t.goal"
    corpus = Path(__file__).resolve().parent / "corpus" / "requests-n2"
    run = lambda *a: CliRunner().invoke(main, [str(x) for x in a])  # noqa: E731
    assert run("export", corpus, "--format", "goal", "--out", goal).exit_code == 0
    out = tmp_path / "imp"
    assert run("import", "goal", goal, "--out", out).exit_code == 0
    again = run("import", "goal", goal, "--out", out)
    assert again.exit_code == 2 and again.output.strip() == \
        f"Error: --out {out}: exists; use --force to replace it"
    assert run("import", "goal", goal, "--out", out, "--force").exit_code == 0
    other = tmp_path / "other"
    other.mkdir()
    (other / "keep.txt").write_text("x")
    r = run("import", "goal", goal, "--out", other, "--force")
    assert r.exit_code == 2 and "not a trace directory" in r.output
    assert (other / "keep.txt").is_file()
    (other / "manifest.json").write_text("{}")
    r = run("import", "goal", goal, "--out", other, "--force")
    assert r.exit_code == 2 and "holds keep.txt, which no trace writes" in r.output
    assert (other / "keep.txt").is_file()
    # a trace that replay and --model loggopsim have used (cache, schedule) is still a trace
    assert run("replay", out, "--model", "loggopsim").exit_code == 0
    assert run("import", "goal", goal, "--out", out, "--force").exit_code == 0


def test_force_never_removes_what_the_command_did_not_write(tmp_path):
    """--force replaces the command's own earlier output only: not the input trace, not a
    folder that merely has the name an output would have, not an unrelated traces/ folder."""
    import shutil as sh

    from hindsight.cli import main

    run = lambda *a: CliRunner().invoke(main, [str(x) for x in a])  # noqa: E731
    corpus = Path(__file__).resolve().parent / "corpus" / "requests-n2"
    trace = tmp_path / "work" / "traces" / "t"
    sh.copytree(corpus, trace)
    notes = tmp_path / "work" / "traces" / "notes.txt"
    notes.write_text("mine")
    # export otf2 into a folder whose traces/ is the user's
    r = run("export", trace, "--format", "otf2", "--out", tmp_path / "work", "--force")
    assert r.exit_code == 2 and notes.is_file() and (trace / "manifest.json").is_file()
    # replay --out onto the trace itself, or a folder holding it
    for out in (trace, tmp_path / "work"):
        r = run("replay", trace, "--model", "loggps", "--out", out, "--force")
        assert r.exit_code == 2 and "being replayed" in r.output, r.output
        assert (trace / "manifest.json").is_file()
    # import --force from a source that cannot be read keeps the old trace
    goal = tmp_path / "t.goal"
    assert run("export", trace, "--format", "goal", "--out", goal).exit_code == 0
    imported = tmp_path / "imp"
    assert run("import", "goal", goal, "--out", imported).exit_code == 0
    r = run("import", "goal", tmp_path / "missing.goal", "--out", imported, "--force")
    assert r.exit_code != 0 and (imported / "manifest.json").is_file()
    # validate --out on a folder that holds no validation results
    r = run("validate", Path(__file__).resolve().parents[1] / "specs" / "default.toml",
            "--out", tmp_path / "work", "--no-progress")
    assert r.exit_code != 0 and "holds no validation results" in r.output, r.output
    assert notes.is_file() and not (tmp_path / "work" / "stale").exists()


def test_mm1_says_when_its_network_parameters_do_not_apply():
    """A trace whose ranks share one host: M/M/1's messages all take the host-internal path,
    so C changes nothing; the replay says so instead of printing the same number silently."""
    corpus = Path(__file__).resolve().parent / "corpus" / "requests-n2"

    def replay(*sets):
        return CliRunner().invoke(
            main, ["replay", str(corpus), "--model", "mm1", *sets])
    slow, fast = replay("--set", "C=1kbit/s", "--json"), replay("--set", "C=1Gbit/s", "--json")
    assert slow.exit_code == 0 and fast.exit_code == 0, slow.output
    assert json.loads(slow.stdout)["predicted_makespan_s"] == \
        json.loads(fast.stdout)["predicted_makespan_s"]
    text = replay("--set", "C=1kbit/s")
    assert "note: M/M/1: every message is between ranks of one host" in text.stderr
    assert "(here free)" in text.stderr
    assert "(here as set)" in replay("--set", "C_host=1kbit/s").stderr


def test_trace_info_of_a_replayed_timeline_says_it_is_one(tmp_path):
    """`replay --out`'s timeline ran on no MPI: info names its model and run, and its makespan
    is the replayed one, not a traced run's."""
    corpus = Path(__file__).resolve().parent / "corpus" / "requests-n2"
    assert invoke("replay", corpus, "--model", "hockney", "--out", tmp_path / "r").exit_code == 0
    text = invoke("trace", "info", tmp_path / "r").output
    assert "replayed    hockney " in text and "not a measured run" in text, text
    assert "makespan (replayed) " in text and "traced run" not in text and "mpi " not in text


def test_trace_info_of_a_program_prints_no_empty_fields():
    """A program's run (not one of the applications) has no paradigm and checks no result:
    info leaves both out (it printed "paradigm=None" and "verified    None"); an application
    that checked its result still says so."""
    corpus = Path(__file__).resolve().parent / "corpus"
    text = invoke("trace", "info", corpus / "requests-n2").output
    assert "app=requests.py" in text and "paradigm=" not in text and "None" not in text, text
    assert "verified" not in text
    app = invoke("trace", "info", corpus / "sort-pipeline-n3").output
    assert "paradigm=pipeline" in app and "verified    True" in app, app


def test_predict_refuses_a_program_without_a_skeleton():
    """predict synthesises the applications' schedules; a program's trace (here a corpus trace
    of requests.py) is one line saying so and what to do, exit 1."""
    corpus = Path(__file__).resolve().parent / "corpus" / "requests-n2"
    r = invoke("predict", corpus, "--ranks", "2..4")
    assert r.exit_code == 1
    one_error_line(r, "app 'requests.py' is not one of", "replay this trace instead")


def test_check_output_probe_refuses_a_folder_that_takes_no_entry(tmp_path):
    """/proc passes the permission bits for root but takes no new entry: only the probe sees it;
    a writable folder passes and keeps nothing of the probe."""
    from hindsight.errors import DataError
    from hindsight.outputs import check_output

    with pytest.raises(DataError, match=r"^--out /proc/x: (cannot create anything in folder "
                                        r"/proc|folder /proc is not writable)"):
        check_output("/proc/x", "--out", directory=True, exists_ok=True)
    assert check_output(tmp_path / "x", "--out", directory=True) == tmp_path / "x"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("args", [
    ["calibrate", "--out", "/proc/c.toml", "--sizes", "1B..1KiB", "--repeat", "10"],
    ["import", "goal", "{goal}", "--out", "/proc/imp"],
    ["collect", "-n", "2", "--program", "{goal}", "--out", "/proc/run"]])
def test_every_command_probes_its_out_folder(tmp_path, args):
    """The probe is every command's (check_output's default): calibrate refuses before it
    measures, import before it writes a temporary folder next to --out."""
    goal = tmp_path / "s.goal"
    goal.write_text("num_ranks 1\nrank 0 {\n  c: calc 10\n}\n")
    r = invoke(*[a.format(goal=goal) for a in args])
    assert r.exit_code == 1
    one_error_line(r, "--out /proc/")


def test_validate_and_report_check_out_before_any_run(tmp_path, monkeypatch):
    """An --out validate or report cannot write is one line, exit 1, before any run or read."""
    from validation.errors_table import write_errors

    (tmp_path / "prof.toml").write_text('[loggps]\nL = 5e-6\no_send = 2e-6\no_recv = 2e-6\n'
                                        'g = 0.0\nG = 2e-9\nS = 65536.0\n')
    spec = tmp_path / "spec.toml"
    spec.write_text('name = "t"\nrepetitions = 1\n[networks.shm]\ntransport = "shm"\n'
                    'profile = "prof.toml"\n[predictors]\nreplay = ["loggps"]\n[[experiment]]\n'
                    'app = "sorting"\nparadigms = ["pipeline"]\nranks = [2]\nbaseline = false\n'
                    '[experiment.sizes]\n"s" = ["--arrays", "2"]\n')
    blocker = tmp_path / "afile"
    blocker.write_text("x")
    vdir = tmp_path / "v"                   # a validation folder with one cell's results
    (vdir / "cells").mkdir(parents=True)
    (vdir / "cells" / "c.json").write_text(json.dumps(
        {"app": "sorting", "paradigm": "pipeline", "ranks": 2, "size": "s", "network": "shm",
         "actual_s": 1.0, "actual_sd_s": 0.0, "predictions": [
             {"predictor": "replay:loggps", "predicted_s": 1.1, "rel_error_pct": 10.0}]}))
    write_errors(vdir)
    for args, where in ((["validate", spec, "--out", "/proc/val"], "/proc"),
                        (["validate", spec, "--out", blocker / "val"], str(blocker)),
                        (["report", vdir, "--out", "/proc/rep"], "/proc"),
                        (["report", vdir, "--out", blocker / "rep"], str(blocker))):
        r = invoke(*args)
        assert r.exit_code == 1, (args, r.output)
        one_error_line(r, f"--out {args[-1]}: ", where)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile", "prof.toml", "spec.toml", "v"]
    assert sorted(p.name for p in vdir.iterdir()) == ["cells", "errors.csv"]

    # a write that fails half-way (a full disk) in --out is one line too
    import validation.report as R

    def full(vdir, out, results=None):
        raise OSError(errno.ENOSPC, "No space left on device", str(Path(out) / "report.md"))
    monkeypatch.setattr(R, "report", full)
    r = invoke("report", vdir, "--out", tmp_path / "rep")
    assert r.exit_code == 1
    one_error_line(r, f"--out {tmp_path / 'rep'}: cannot write (No space left on device)")


@pytest.mark.parametrize("args,advice", [
    (["--format", "perfetto"], "--format otf2 reads one rank at a time"),
    (["--format", "pipit"], "--format otf2 reads one rank at a time"),
    (["--format", "goal"], "the GOAL export prepares the whole trace"),
    (["--format", "otf2", "--model", "loggps"], "`hindsight replay` without --out streams"),
])
def test_an_export_that_cannot_fit_in_memory_is_refused_at_once(trace, tmp_path, monkeypatch,
                                                                 args, advice):
    """With less memory available than the export holds (here: 1 KiB), one line says so
    before anything is read or written; the OTF2 export of the measured timeline, which reads
    a rank at a time, still runs."""
    import hindsight.system

    monkeypatch.setattr(hindsight.system, "available_memory", lambda: 1024)
    out = tmp_path / "x"
    r = invoke("export", trace, *args, "--out", out)
    assert r.exit_code == 1
    one_error_line(r, str(trace), "holds its 6 events in memory", "1.0 KiB are available",
                   advice)
    assert not out.exists()
    r = invoke("export", trace, "--format", "otf2", "--out", tmp_path / "o")
    assert r.exit_code == 0, r.output


def test_a_sweep_that_cannot_fit_in_memory_is_refused_at_once(trace, tmp_path, monkeypatch):
    import hindsight.system

    monkeypatch.setattr(hindsight.system, "available_memory", lambda: 1024)
    r = invoke("sweep", trace, "--vary", "L=1us,2us", "--out", tmp_path / "s.csv")
    assert r.exit_code == 1
    one_error_line(r, str(trace), "a sweep holds its", "`hindsight replay` streams")
    assert not (tmp_path / "s.csv").exists()


def test_a_log_range_gives_round_values_and_report_names_a_missing_folder(tmp_path):
    from replay import models as M
    from replay.sweeps import parse_vary

    assert parse_vary("L=1us..8us:log:4", M.get_model("loggps"))[1] == [1e3, 2e3, 4e3, 8e3]
    r = invoke("report", tmp_path / "nowhere")
    assert r.exit_code == 1
    one_error_line(r, str(tmp_path / "nowhere"), "no such folder")
