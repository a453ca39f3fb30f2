"""`replay --allow-partial` on a trace of which nothing can be replayed."""

from __future__ import annotations

from click.testing import CliRunner
from synthetic import simulate

from hindsight.cli import main
from hindsight.trace.write import write_trace

PROGS = [[("compute", 3000), ("send", 1, 1000), ("recv", 1), ("coll", "Allreduce", 64)],
         [("recv", 0), ("compute", 2000), ("send", 0, 1000), ("coll", "Allreduce", 64)]]


def test_allow_partial_refuses_an_empty_consistent_cut(tmp_path):
    """Rank 1 died before recording anything: rank 0's send is never received, so the cut
    keeps nothing; a replay of it would print `predicted 0 ns (-100.00 %)` as if a result."""
    cols = simulate(PROGS)
    cols[1] = {k: v[:0] for k, v in cols[1].items()}
    d = write_trace(tmp_path / "t", cols, incomplete_ranks=[1])
    for cmd in (["replay", str(d), "--allow-partial", "--model", "loggps"],
                ["sweep", str(d), "--allow-partial", "--model", "loggps", "--vary", "L=1us,2us",
                 "--json"]):
        r = CliRunner().invoke(main, cmd)
        assert r.exit_code == 1, r.output
        lines = r.output.strip().splitlines()
        assert lines == [f"Error: {d}: the consistent cut is empty (nothing to replay): "
                         "rank 1's records are not whole, and all 3 recorded events depend on "
                         "what they did not record"], r.output
