"""The tracer must not change the program: what a traced rank loads, how the program's memory
behaves, and the untraced run's wall time (docs/robustness.md, "No observer effect").

Timing comparisons live in benchmarks/observer_effect.py; these tests check deterministic
witnesses of the same effects (loaded modules, page faults) and the untraced mode's output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import PROGRAMS, ROOT


def _run(trace: str | None, untraced: bool = False) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("HINDSIGHT_UNTRACED", None)
    if untraced:
        env["HINDSIGHT_UNTRACED"] = "1"
    mpiexec = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    prog = [sys.executable, str(PROGRAMS / "temporaries.py")]
    if trace is not None:
        prog = [sys.executable, "-m", "instrument.run", "--trace", trace, str(PROGRAMS /
                                                                             "temporaries.py")]
    res = subprocess.run([mpiexec, "-n", "2", *prog], capture_output=True, text=True, env=env,
                         timeout=120, cwd=ROOT)
    assert res.returncode == 0, res.stderr
    line = [x for x in res.stdout.splitlines() if x.startswith("heavy=")][-1]
    return dict(kv.split("=", 1) for kv in line.split())


def test_traced_rank_loads_nothing_heavy_while_the_program_runs(tmp_path):
    assert _run(str(tmp_path / "t"))["heavy"] == "-"


def test_traced_program_reads_mpi_attributes_as_untraced(tmp_path):
    """`MPI.SUM` in a hot loop is one dict lookup traced as untraced: the program's `MPI` is a
    plain module holding the real one's namespace (a ModuleType subclass answering through
    __getattr__ cost 4.8 us an access here, +36 % on a loop of small collectives)."""
    traced = _run(str(tmp_path / "t"))
    assert traced["attrs"] == "plain" and traced["world"] == "TracedComm"
    assert _run(None)["attrs"] == "plain"


def test_traced_program_page_faults_like_the_untraced_one(tmp_path):
    """Untraced, this loop's temporaries are mmapped and faulted in afresh (about 160 faults an
    iteration); a tracer that freed one large block before makes them near zero (0.3 % of them,
    measured with the tracer that loaded pyarrow). Any change of the heap's layout moves the count
    by up to a third (importing a few standard-library modules first gives 31,552 against
    47,672), hence the bounds."""
    plain = int(_run(None)["faults"])
    traced = int(_run(str(tmp_path / "t"))["faults"])
    assert plain > 10_000, "the witness needs the untraced loop to fault (glibc's default)"
    assert 0.5 * plain <= traced <= 1.5 * plain + 2_000, (plain, traced)


def test_untraced_mode_writes_wall_time_and_conditions_only(tmp_path):
    out = tmp_path / "u"
    _run(str(out), untraced=True)
    assert sorted(p.name for p in out.iterdir()) == ["manifest.json"]
    m = json.loads((out / "manifest.json").read_text())
    assert m["traced"] is False and m["complete"] is True
    assert m["wall_ns"] > 0 and m["makespan_ns"] == m["wall_ns"]
    assert len(m["program_end_ns"]) == 2 and max(m["program_end_ns"]) == m["wall_ns"]
    cond = m["conditions"]
    assert cond["cores"] >= 1 and len(cond["rank_ctx_switches"]) == 2
    assert isinstance(cond["problems"], list)


def test_traced_manifest_records_wall_time_and_conditions(tmp_path):
    out = tmp_path / "t"
    _run(str(out))
    m = json.loads((out / "manifest.json").read_text())
    assert m["traced"] is True and m["complete"] is True
    # The wall time runs to the program's end, after its last recorded call.
    assert m["wall_ns"] >= m["makespan_ns"] > 0
    cond = m["conditions"]
    assert cond["loadavg_1m_before"] is None or cond["loadavg_1m_before"] >= 0
    assert all(len(c) == 2 and min(c) >= 0 for c in cond["rank_ctx_switches"])
    assert all(w is None or 0 <= w <= 1 for w in cond["rank_run_queue_wait"])
    assert len(cond["rank_run_queue_wait"]) == 2


def _staged_ranks_export_as_the_table_does(trace: Path, tmp_path: Path) -> None:
    """The OTF2 export of a killed job's staged records, read one rank at a time, writes the
    events the export of the whole table writes."""
    from hindsight import trace as tf
    from hindsight.interop.otf2_export import export_otf2
    from otf2_reference import reference_export_otf2

    tr = tf.read_trace(trace)
    assert tr.table.num_rows and all(s.staged is not None for s in tr.sources)
    reference_export_otf2(trace, tmp_path / "ref", table=tr.table, manifest=tr.manifest)
    export_otf2(trace, tmp_path / "by-rank")
    ref, new = tmp_path / "ref" / "traces", tmp_path / "by-rank" / "traces"
    names = sorted(p.name for p in ref.glob("*.evt"))
    assert len(names) == 2 and names == sorted(p.name for p in new.glob("*.evt"))
    assert all((ref / n).read_bytes() == (new / n).read_bytes() for n in names)


def test_trace_seal_refuses_a_live_job_and_seals_a_killed_one(tmp_path):
    """A job started with mpiexec directly leaves raw records when killed; `trace seal` writes
    them as rank files, but never while a rank's tracer still holds them."""
    import signal
    import time

    from tests.conftest import hindsight

    out = tmp_path / "t"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    mpiexec = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    job = subprocess.Popen([mpiexec, "-n", "2", sys.executable, "-m", "instrument.run",
                            "--trace", str(out), str(PROGRAMS / "hang.py")],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                           cwd=ROOT, start_new_session=True)
    try:
        deadline = time.time() + 60
        while time.time() < deadline and len(list(out.glob(".staging/rank-*/names.jsonl"))) < 2:
            time.sleep(0.2)
        time.sleep(2)                        # the ranks reach their receive that never completes
        live = hindsight("trace", "seal", out)
        assert live.returncode == 1 and "still running" in live.stderr
        assert not list(out.glob("rank-*.parquet"))
    finally:
        os.killpg(job.pid, signal.SIGKILL)
        job.wait()
        subprocess.run(["pkill", "-KILL", "-f", str(out)], check=False)
    time.sleep(0.5)
    _staged_ranks_export_as_the_table_does(out, tmp_path)
    sealed = hindsight("trace", "seal", out)
    assert sealed.returncode == 0 and "incomplete" in sealed.stdout, sealed.stderr
    m = json.loads((out / "manifest.json").read_text())
    assert m["complete"] is False and set(m["rank_status"]) == {"killed"}
    assert all(n > 0 for n in m["events"])
    check = hindsight("trace", "check", out)
    assert check.returncode == 1 and "status killed" in check.stdout
