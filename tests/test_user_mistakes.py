"""What a new user meets first: a rank file removed after the run, a file given where a trace
folder is asked for, a source file or a script given to `collect`, a run disturbed by other work,
an imported timeline that no run measured. Each is said in one line, and nothing incomplete is
exported as if it were whole."""

from __future__ import annotations

import json
import shutil

import pytest

from synthetic import simulate_to_dir
from tests.conftest import hindsight

RING = [[("send", 1, 64), ("recv", 1)], [("recv", 0), ("send", 0, 64)]]


def _errors(r) -> list[str]:
    return [x for x in r.stderr.splitlines() if x.startswith("Error:")]


@pytest.fixture
def removed(tmp_path):
    """A complete trace whose rank 1 file was deleted after the run."""
    t = simulate_to_dir(tmp_path / "t", RING)
    (t / "rank-00001.parquet").unlink()
    return t


def test_a_removed_rank_file_is_named_as_removed(removed):
    r = hindsight("trace", "check", removed)
    assert r.returncode == 1
    assert (f"{removed}/rank-00001.parquet: missing, although the manifest says rank 1 "
            "finished (the file was removed or moved after the run)") in r.stdout
    r = hindsight("replay", removed)
    assert r.returncode == 1 and _errors(r) == [
        f"Error: {removed}: incomplete trace (the file of rank 1 is missing, although the rank "
        "finished); use --allow-partial to replay what was recorded"]


@pytest.mark.parametrize("fmt", ["perfetto", "otf2", "pipit"])
def test_an_incomplete_trace_is_exported_only_when_allowed(removed, tmp_path, fmt):
    out = tmp_path / f"out.{fmt}"
    r = hindsight("export", removed, "--format", fmt, "--out", out)
    assert r.returncode == 1 and not out.exists()
    assert _errors(r) == [f"Error: {removed}: incomplete trace (the file of rank 1 is missing, "
                          "although the rank finished); use --allow-partial to export what was "
                          "recorded"]
    r = hindsight("export", removed, "--format", fmt, "--out", out, "--allow-partial")
    assert r.returncode == 0, r.stderr
    assert out.exists() and "incomplete trace" in r.stderr and "note:" in r.stderr


def test_a_schedule_or_a_replayed_timeline_needs_a_complete_trace(removed, tmp_path):
    for extra in (["--format", "goal"], ["--format", "perfetto", "--model", "loggps"]):
        r = hindsight("export", removed, *extra, "--out", tmp_path / "o", "--allow-partial")
        assert r.returncode == 1 and len(_errors(r)) == 1
        assert "needs a complete trace" in r.stderr and not (tmp_path / "o").exists()


def test_a_file_is_not_a_trace_folder(tmp_path):
    t = simulate_to_dir(tmp_path / "t", RING)
    for args in (["trace", "check"], ["replay"], ["trace", "info"]):
        r = hindsight(*args, t / "rank-00000.parquet")
        assert r.returncode == 1 and _errors(r) == [
            f"Error: {t}/rank-00000.parquet: a file, not a trace directory (a trace is the "
            f"folder of manifest.json and the rank files: {t})"]
    # a file of no trace (a profile beside the user's traces) is not sent to its folder
    (tmp_path / "shm.toml").write_text("format = 1\n")
    r = hindsight("trace", "info", "shm.toml", cwd=tmp_path)
    assert r.returncode == 1 and _errors(r) == [
        "Error: shm.toml: a file, not a trace directory (a trace is the folder of manifest.json "
        "and the rank files)"], r.stderr


def test_collect_names_what_it_cannot_run(tmp_path):
    cases = {"halo.c": ("int main(void) { return 0; }\n", "a source file, not a program: "
                        "compile it first (mpicc {p} -o {stem}) and give the executable"),
             "solver.cpp": ("int main() { return 0; }\n", "a source file, not a program: "
                            "compile it first (mpicxx {p} -o {stem}) and give the executable"),
             "run.sh": ("#!/bin/sh\necho hi\n", "a script for another interpreter"),
             "bad.py": ("def f(:\n", "a Python syntax error (line 1: "),
             "notes.txt": ("some notes\n", "neither a compiled (ELF) program nor Python (line 1: ")}
    for name, (text, words) in cases.items():
        p = tmp_path / name
        p.write_text(text)
        r = hindsight("collect", "-n", 1, "--program", p, "--out", tmp_path / "t")
        assert r.returncode == 2 and not (tmp_path / "t").exists()
        want = words.format(p=p, stem=p.with_suffix(""))
        assert _errors(r) and _errors(r)[0].startswith(f"Error: --program {p}: {want}"), r.stderr
        assert len(r.stderr.strip().splitlines()) == 1
    # what runpy runs besides source, a zip application and compiled bytecode, is taken
    import py_compile
    import zipapp

    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "__main__.py").write_text("print('hi')\n")
    zipapp.create_archive(tmp_path / "app", tmp_path / "app.pyz")
    (tmp_path / "m.py").write_text("print('hi')\n")
    py_compile.compile(str(tmp_path / "m.py"), str(tmp_path / "m.pyc"))
    from hindsight.programs import not_python as _not_python
    assert _not_python(tmp_path / "app.pyz") is None and _not_python(tmp_path / "m.pyc") is None
    assert _not_python(tmp_path / "m.py") is None
    exe = shutil.which("true")
    r = hindsight("collect", "-n", 1, "--recorder", "python", "--program", exe,
                  "--out", tmp_path / "t")
    assert r.returncode == 2 and _errors(r) == [
        f"Error: --recorder python: {exe} is a compiled program, which the PMPI library records "
        "(leave --recorder out)"]


@pytest.mark.parametrize("recorder", ["auto", "python"])
def test_a_crashing_programs_traceback_is_its_own(tmp_path, recorder):
    """As `python prog.py` prints it: from the program's first frame, without the launcher's
    (instrument/run.py, runpy)."""
    prog = tmp_path / "boom.py"
    prog.write_text("from mpi4py import MPI\n\n\ndef work(r):\n    if r == 1:\n"
                    "        raise ValueError('boom on rank 1')\n    MPI.COMM_WORLD.Barrier()\n"
                    "\n\nwork(MPI.COMM_WORLD.Get_rank())\n")
    shown = 0
    for attempt in range(3):
        r = hindsight("collect", "-n", 2, "--program", prog, "--out", tmp_path / "t",
                      "--recorder", recorder, "--force")
        assert r.returncode == 1
        # the rank's error is in collect's own line whatever mpiexec forwarded
        assert r.stderr.strip().endswith("rank 1: ValueError: boom on rank 1"), r.stderr
        assert "runpy" not in r.stderr
        assert "instrument" not in r.stderr.replace(str(tmp_path), "")
        # (mpiexec may end the job before it forwards the rank's lines, or put its own abort
        # message on the exception's line: the frames are checked when they came)
        frames = [x for x in r.stderr.splitlines() if x.startswith('  File "')]
        if frames:
            assert frames[0].startswith(f'  File "{prog}", line 10, in <module>'), r.stderr
            assert all(f.startswith(f'  File "{prog}"') for f in frames), r.stderr
            shown += 1
            break
    assert shown, "no traceback forwarded in 3 runs"


def test_a_disturbed_run_is_said_by_replay_and_trace_info(tmp_path):
    problems = ["rank 1 waited for a core 54.5 % of the time"]
    t = simulate_to_dir(tmp_path / "t", RING, manifest={"conditions": {"problems": problems}})
    r = hindsight("replay", t)
    assert r.returncode == 0
    # no region has CPU samples here, so --cpu-time would change nothing: it is not offered
    assert [x for x in r.stderr.splitlines() if x.startswith("warning:")] == [
        "warning: the traced run was disturbed (rank 1 waited for a core 54.5 % of the time): "
        "its measured times, and the bursts replayed as compute, include other work's"]
    sampled = simulate_to_dir(
        tmp_path / "s", [[("compute", 20000, "work", 10000), ("send", 1, 64), ("recv", 1)],
                         [("recv", 0), ("send", 0, 64)]],
        manifest={"conditions": {"problems": problems}})
    r = hindsight("replay", sampled)
    assert r.returncode == 0 and [x for x in r.stderr.splitlines()
                                  if x.startswith("warning:")] == [
        "warning: the traced run was disturbed (rank 1 waited for a core 54.5 % of the time): "
        "its measured times, and the bursts replayed as compute, include other work's; "
        "--cpu-time takes regions' CPU time"], r.stderr
    r = hindsight("replay", sampled, "--cpu-time")
    assert [x for x in r.stderr.splitlines() if x.startswith("warning:")] == [
        "warning: the traced run was disturbed (rank 1 waited for a core 54.5 % of the time): "
        "its measured times, and the bursts replayed as compute, include other work's"]
    assert "warning" not in hindsight("replay", t, "--quiet").stderr
    info = hindsight("trace", "info", t)
    assert ("disturbed   rank 1 waited for a core 54.5 % of the time: the measured times "
            "include other work's") in info.stdout
    # a record from elsewhere that is not a list of texts is no record, never a traceback
    for i, cond in enumerate(("busy", {"problems": "rank 1 waited"}, {"problems": [{"r": 1}]})):
        odd = simulate_to_dir(tmp_path / f"odd{i}", RING, manifest={"conditions": cond})
        for args in (["replay"], ["trace", "info"]):
            r = hindsight(*args, odd)
            assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
            assert "disturbed" not in r.stdout.replace(str(tmp_path), "") + r.stderr
    # a quiet run says nothing
    quiet = simulate_to_dir(tmp_path / "q", RING)
    assert "warning" not in hindsight("replay", quiet).stderr
    assert "\ndisturbed " not in hindsight("trace", "info", quiet).stdout


def test_an_imported_timeline_keeps_its_origin_and_program(tmp_path):
    t = simulate_to_dir(tmp_path / "t", RING, manifest={"app": "halo"})
    goal, otf2 = tmp_path / "t.goal", tmp_path / "t.otf2"
    assert hindsight("export", t, "--format", "goal", "--out", goal).returncode == 0
    assert hindsight("import", "goal", goal, "--out", tmp_path / "g").returncode == 0
    info = hindsight("trace", "info", tmp_path / "g").stdout
    assert f"origin      GOAL {goal}  (simulated with LogGOPSim rules; not a measured run)" \
        in info
    assert "makespan (simulated)" in info and "traced run" not in info
    assert hindsight("export", t, "--format", "otf2", "--out", otf2).returncode == 0
    assert hindsight("import", "otf2", otf2, "--out", tmp_path / "o").returncode == 0
    m = json.loads((tmp_path / "o" / "manifest.json").read_text())
    assert m["app"] == "halo"
    info = hindsight("trace", "info", tmp_path / "o", "--json")
    assert json.loads(info.stdout)["origin"]["format"] == "otf2"


def test_flag_errors_name_the_flag_once(tmp_path):
    t = simulate_to_dir(tmp_path / "t", RING)
    r = hindsight("replay", t, "--set", "L")
    assert r.returncode == 2 and _errors(r) == ["Error: --set: L: expected NAME=VALUE"]
    r = hindsight("sweep", t, "--vary", "L=1us..2us:lin:0", "--json")
    assert r.returncode == 2 and _errors(r) == [
        "Error: --vary: L=1us..2us:lin:0: N must be at least 2 (for one value: NAME=VALUE)"]
    # a range of one value, or with equal ends, sweeps nothing; a parameter set and varied
    for vary, words in (("L=1us..1us:log:3", "LO and HI are the same value"),
                        ("L=1us..10us:lin:1", "N must be at least 2")):
        r = hindsight("sweep", t, "--vary", vary, "--json")
        assert r.returncode == 2 and len(_errors(r)) == 1 and words in _errors(r)[0], r.stderr
    r = hindsight("sweep", t, "--set", "o=1us", "--vary", "o_send=1us,2us", "--json")
    assert r.returncode == 2 and _errors(r) == ["Error: --vary o_send: --set o gives it too; "
                                                "keep one"]
    # trace info's --model is --profile's: alone, it was ignored without a word
    r = hindsight("trace", "info", t, "--model", "mm1")
    assert r.returncode == 2 and len(_errors(r)) == 1 and "give --profile too" in _errors(r)[0]
    goal = tmp_path / "t.goal"
    assert hindsight("export", t, "--format", "goal", "--out", goal).returncode == 0
    for bad, words in (("L=abc", "--set: L: 'abc' is not a number"),
                       ("Q=1", "--set: unknown parameter 'Q' for model loggopsim")):
        r = hindsight("import", "goal", goal, "--out", tmp_path / "g", "--set", bad)
        assert r.returncode == 2 and not (tmp_path / "g").exists()
        assert len(_errors(r)) == 1 and _errors(r)[0].startswith(f"Error: {words}"), r.stderr


def test_sweep_says_once_what_the_model_says_of_its_configurations(tmp_path):
    # every message between ranks of one host: M/M/1's C does not apply, said once, not per row
    t = simulate_to_dir(tmp_path / "t", RING, hosts={"node0": [0, 1]})
    r = hindsight("sweep", t, "--model", "mm1", "--vary", "C=1Mbit/s..10Gbit/s:log:3", "--json")
    assert r.returncode == 0, r.stderr
    notes = [x for x in r.stderr.splitlines() if "C, tau and the switch do not apply" in x]
    assert len(notes) == 1 and notes[0].startswith("note: M/M/1: every message is between")
    assert all("_note" not in row for row in json.loads(r.stdout))


def test_a_bad_calibration_size_range_stops_validate_before_any_run(tmp_path):
    spec = tmp_path / "spec.toml"
    spec.write_text('[networks.shm]\ntransport = "shm"\ncalibrate_sizes = "1MB..1KB"\n')
    r = hindsight("validate", spec, "--out", tmp_path / "v")
    assert r.returncode == 1 and not (tmp_path / "v").exists()
    assert _errors(r) == [f"Error: spec {spec}: network shm: calibrate_sizes '1MB..1KB': need "
                          "1 <= LO <= HI and a factor >= 2"]


def test_an_otf2_round_trip_keeps_the_untraced_calls(tmp_path, monkeypatch):
    """Calls the recorder counted but did not record stay known through OTF2 (the archive
    property HINDSIGHT::UNTRACED_CALLS): the imported trace's check says the traffic is
    incomplete, as the source's did, and the import says it in its one line."""
    t = simulate_to_dir(tmp_path / "t", RING, manifest={"untraced_calls": {"Win.Rput": 2}})
    assert hindsight("export", t, "--format", "otf2", "--out", tmp_path / "o").returncode == 0
    r = hindsight("import", "otf2", tmp_path / "o", "--out", tmp_path / "back")
    assert r.returncode == 0 and r.stdout.strip().endswith(
        "trace check: ok but for the traffic of 2 calls (Win.Rput 2) the source did not trace"), \
        r.stdout + r.stderr
    assert json.loads((tmp_path / "back" / "manifest.json").read_text())["untraced_calls"] == \
        {"Win.Rput": 2}
    check = hindsight("trace", "check", tmp_path / "back")
    assert check.returncode == 1 and "traffic incomplete: 2 calls (Win.Rput 2)" in check.stdout
    # a damaged property is named, not taken
    import hindsight.interop.otf2_archive as arch

    for text in ("[1, 2]", '{"Request.Cancel": true}', '{"X": -1}'):
        monkeypatch.setattr(arch, "archive_property", lambda trace, name, text=text: text)
        with pytest.raises(arch.OtfError, match="UNTRACED_CALLS is not a JSON object"):
            arch.untraced_calls(None, tmp_path / "o")


def test_a_partial_export_stays_partial_through_otf2_and_perfetto(removed, tmp_path,
                                                                   monkeypatch):
    """``export --allow-partial``: the OTF2 archive says which ranks did not finish (property
    HINDSIGHT::INCOMPLETE_RANKS), and its import is as incomplete as the source (it came back
    as a complete trace, and with messages to the lost rank it was refused as unmatched); the
    Perfetto file says so in its ``otherData``."""
    r = hindsight("export", removed, "--format", "otf2", "--allow-partial", "--out",
                  tmp_path / "o")
    assert r.returncode == 0, r.stderr
    r = hindsight("import", "otf2", tmp_path / "o", "--out", tmp_path / "back")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().endswith(
        "an incomplete trace, as its source was (rank 1 did not finish cleanly; `hindsight "
        "trace check` lists its problems): `replay --allow-partial` replays it up to its last "
        "consistent cut"), r.stdout
    check = hindsight("trace", "check", tmp_path / "back")
    assert check.returncode == 1 and "rank 1 did not finish" in check.stdout, check.stdout
    m = json.loads((tmp_path / "back" / "manifest.json").read_text())
    assert m["complete"] is False and m["rank_status"] == ["complete", "missing"]
    r = hindsight("replay", tmp_path / "back")
    assert r.returncode == 1 and "incomplete trace (rank 1 did not finish cleanly)" in r.stderr
    r = hindsight("export", removed, "--format", "perfetto", "--allow-partial", "--out",
                  tmp_path / "p.json")
    assert r.returncode == 0, r.stderr
    other = json.loads((tmp_path / "p.json").read_text())["otherData"]
    assert other["incomplete_ranks"] == {"1": "file removed"}
    # a damaged property is named, not taken
    import hindsight.interop.otf2_archive as arch

    for text in ("[1]", '{"7": "missing"}', '{"1": ""}', '{"x": "missing"}'):
        monkeypatch.setattr(arch, "archive_property", lambda trace, name, text=text: text)
        with pytest.raises(arch.OtfError, match="INCOMPLETE_RANKS is not a JSON object of ranks "
                                               "below 2"):
            arch.incomplete_ranks(None, tmp_path / "o", 2)


def test_a_misspelled_vary_is_one_line_before_the_trace_is_read(tmp_path):
    """sweep checks --vary before reading the trace: no note about the trace precedes the
    error (an untraced-calls note did)."""
    t = simulate_to_dir(tmp_path / "t", RING, manifest={"untraced_calls": {"Win.Rput": 2}})
    r = hindsight("sweep", t, "--vary", "Q=1,2", "--json")
    assert r.returncode == 2 and r.stderr.splitlines() == [
        "Error: --vary: unknown parameter 'Q' for model loggps (known: G, L, O, O_recv, O_send, "
        "O_unexpected, S, ack_cells, g, gamma, o, o_a, o_b, o_b_recv, o_b_send, o_call, o_hop, "
        "o_irecv, o_probe, o_recv, o_send, o_unexpected, o_wait, progress)"], r.stderr


def test_what_a_command_line_gets_wrong_is_named(tmp_path):
    """A compiled program without execute permission is refused before mpiexec (it failed on
    every rank as `execvp error`); a parameter varied twice is named; a --set value that breaks
    a rule only with the profile's values says so."""
    exe = tmp_path / "solver"
    shutil.copy("/bin/true", exe)
    exe.chmod(0o644)
    r = hindsight("collect", "-n", 1, "--program", exe, "--out", tmp_path / "t")
    assert r.returncode == 2 and _errors(r) == [
        f"Error: --program {exe}: a compiled program without permission to run it "
        f"(chmod +x {exe})"], r.stderr
    assert not (tmp_path / "t").exists()
    trace = simulate_to_dir(tmp_path / "s", [[("send", 1, 64)], [("recv", 0)]])
    r = hindsight("sweep", trace, "--vary", "L=1us,2us", "--vary", "L=3us,4us", "--json")
    assert r.returncode == 2 and _errors(r)[0].endswith(
        "L: varied twice (give each parameter one --vary with all its values)"), r.stderr
    prof = tmp_path / "p.toml"
    from pathlib import Path
    prof.write_text((Path(__file__).resolve().parents[1] / "docs" / "calibration" /
                     "shm.toml").read_text())
    import tomllib
    L = tomllib.loads(prof.read_text())["loggps"]["L"]
    assert L < -0.3e-6         # the profile's L needs its own o_send
    r = hindsight("replay", trace, "--profile", prof, "--set", "o_send=0.3us")
    assert r.returncode == 2 and _errors(r)[0].startswith(
        f"Error: --set with --profile {prof}: L="), r.stderr
    r = hindsight("replay", trace, "--set", "L=-5us")
    assert r.returncode == 2 and _errors(r)[0].startswith("Error: --set: L="), r.stderr
    # a --set without a value is one line too (with or without a profile)
    for extra in ([], ["--profile", prof]):
        r = hindsight("replay", trace, "--set", "foo", *extra)
        assert r.returncode == 2 and _errors(r) == [
            "Error: --set: foo: expected NAME=VALUE"] and "Traceback" not in r.stderr, r.stderr
