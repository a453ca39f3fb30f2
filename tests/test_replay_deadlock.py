"""A replay that deadlocks under some parameter values only: an unsafe exchange (both ranks
send before they receive, as MPI allows only while the sends complete eagerly) deadlocks once
its messages exceed S. `replay` says so in its error; a sweep over S records those points as
failed, with the reason, and goes on (it stopped at the first, writing nothing)."""

from __future__ import annotations

import json
import math

import pandas as pd

from synthetic import simulate_to_dir

UNSAFE = [[("send", 1, 8192), ("recv", 1)], [("send", 0, 8192), ("recv", 0)]]


def test_replay_says_which_messages_went_by_rendezvous(tmp_path, run_hindsight):
    trace = simulate_to_dir(tmp_path / "t", UNSAFE)
    assert run_hindsight("replay", str(trace), "--set", "S=16KiB").returncode == 0
    r = run_hindsight("replay", str(trace), "--set", "S=4KiB")
    assert r.returncode == 1
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: replay deadlock"), r.stderr
    assert "2 messages are larger than S = 4096 B" in lines[0]
    # a model without an eager limit has nothing to add
    r = run_hindsight("replay", str(trace), "--model", "hockney")
    assert r.returncode == 0


def test_a_sweep_records_the_configurations_that_deadlock(tmp_path, run_hindsight):
    trace = simulate_to_dir(tmp_path / "t", UNSAFE)
    out = tmp_path / "s.csv"
    r = run_hindsight("sweep", str(trace), "--vary", "S=4KiB,16KiB", "--out", str(out))
    assert r.returncode == 0, r.stderr
    rows = pd.read_csv(out)
    assert len(rows) == 2
    stuck, fine = rows.iloc[0], rows.iloc[1]
    assert math.isnan(stuck["predicted_makespan_s"])
    assert "replay deadlock" in stuck["failed"] and "S = 4096 B" in stuck["failed"]
    assert fine["predicted_makespan_s"] > 0 and not isinstance(fine["failed"], str)
    doc = json.loads(run_hindsight("sweep", str(trace), "--vary", "S=4KiB,16KiB",
                                   "--json").stdout)
    rows = doc["rows"] if isinstance(doc, dict) else doc
    assert sum(isinstance(x.get("failed"), str) for x in rows) == 1


def test_only_a_deadlock_another_S_may_undo_is_a_failed_point():
    """A deadlock with messages above S is that configuration's answer (a sweep records it and
    goes on); one with none (a cycle, a partner missing) is the trace's, at every value, and
    stops a sweep as an error."""
    from replay.errors import NoPredictionError, ReplayError, deadlock

    rendezvous = deadlock(2, False, 4096.0, 3)
    assert isinstance(rendezvous, NoPredictionError) and "3 messages" in str(rendezvous)
    cycle = deadlock(2, False)
    assert isinstance(cycle, ReplayError) and not isinstance(cycle, NoPredictionError)
    assert "larger than S" not in str(cycle)
    # rule ack_cells' held acknowledgements: another ack_cells (or S) may undo it
    held = deadlock(2, False, where=" under rule ack_cells", by_values=True)
    assert isinstance(held, NoPredictionError) and "under rule ack_cells" in str(held)
