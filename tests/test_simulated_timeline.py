"""A trace whose times no run measured (a GOAL import's simulation, a replayed timeline) is named
so by replay and trace info, and has no noise report: its unexplained time is another model's."""

from __future__ import annotations

import json

from conftest import hindsight
from hindsight.trace import read_manifest, simulated_timeline
from synthetic import simulate_to_dir

GOAL = """num_ranks 2
rank 0 {
  s: send 64b to 1 tag 3
}
rank 1 {
  r: recv 64b from 0 tag 3
}
"""


def test_goal_import_is_a_simulated_timeline_without_noise(tmp_path):
    src = tmp_path / "hand.goal"
    src.write_text(GOAL)
    trace = tmp_path / "t"
    assert hindsight("import", "goal", src, "--out", trace).returncode == 0
    why = simulated_timeline(read_manifest(trace))
    assert why == "simulated with LogGOPSim rules (imported from GOAL)"

    p = hindsight("replay", trace)
    assert p.returncode == 0, p.stderr
    assert f"noise: not analysed (the trace's timeline was {why}, not measured)" in p.stdout
    assert "vs the trace's timeline" in p.stdout and "measured  " not in p.stdout
    doc = json.loads(hindsight("replay", trace, "--json").stdout)
    assert doc["timeline_not_measured"] == why and "noise" not in doc

    for args in (("replay", trace, "--noise", "trace"), ("trace", "info", trace, "--noise")):
        p = hindsight(*args)
        assert p.returncode == 2 and p.stderr.startswith("Error: --noise: ")
        assert "not measured" in p.stderr and len(p.stderr.splitlines()) == 1

    # a timeline written by replay --out came from a model too
    out = tmp_path / "replayed"
    assert hindsight("replay", trace, "--model", "hockney", "--out", out).returncode == 0
    assert simulated_timeline(read_manifest(out)) == "replayed under hockney"
    assert "noise: not analysed (the trace's timeline was replayed under hockney" in \
        hindsight("replay", out).stdout


def test_a_measured_trace_keeps_its_noise_report(tmp_path):
    real_trace = simulate_to_dir(tmp_path / "t", [[("compute", 3000), ("send", 1, 1000)],
                                                  [("recv", 0), ("compute", 2000)]])
    assert simulated_timeline(read_manifest(real_trace)) is None
    p = hindsight("replay", real_trace, "--json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert "noise" in doc and "timeline_not_measured" not in doc
