"""``hindsight import goal`` checks and prepares the rows it made while their files are still
being written (``import_goal(behind=True)``, ``hindsight.trace.write.write_trace_behind``,
``hindsight.check.check_and_prepare(written=)``): the rows it holds must be exactly what reading
the files back gives, and the trace, its check and its prepared cache exactly what writing first
and reading back gives."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from hindsight import trace as tf
from hindsight.check import check_and_prepare
from hindsight.cli import main as cli
from hindsight.interop.goal import import_goal
from test_interop import HAND, WILD

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

REGIONS = """num_ranks 3
rank 0 {
l0: calc 500
l1: send 64b to 1 tag 2
l1 requires l0
}
rank 1 {
l0: recv 64b from 0 tag 2
}
rank 2 {
}
"""


def _schedules(tmp_path: Path) -> dict[str, Path]:
    from goal_schedules import write_schedule

    out = {}
    for name, text in (("hand", HAND), ("wild", WILD), ("regions", REGIONS)):
        out[name] = tmp_path / f"{name}.goal"
        out[name].write_text(text)
    for kind in ("pairwise", "allreduce", "backlog"):
        out[kind] = tmp_path / f"{kind}.goal"
        write_schedule(kind, 3000, out[kind], P=8)
    return out


def _prepared(trace: Path) -> dict[str, np.ndarray]:
    (cache,) = trace.glob(".replay-cache/prepared-*")
    return {p.name: np.load(p) for p in sorted(cache.glob("*.npy"))} | {
        "meta": (cache / "meta.json").read_text()}


def test_rows_held_are_the_rows_read_back_and_prepare_alike(tmp_path):
    for name, src in _schedules(tmp_path).items():
        first = import_goal(src, tmp_path / f"{name}-files")
        assert check_and_prepare(first) == []
        written = import_goal(src, tmp_path / f"{name}-behind", behind=True)
        held = {c: a.copy() for c, a in written.arrays.items()}
        names = list(written.region_names)
        assert check_and_prepare(tmp_path / f"{name}-behind", written) == []
        back = tf.read_columns(tmp_path / f"{name}-behind")
        assert names == back.region_names, name
        assert held.keys() == back.arrays.keys()
        for c, a in back.arrays.items():
            assert held[c].dtype == a.dtype and np.array_equal(held[c], a), (name, c)
        # the same files as an import that writes first, and the same prepared cache
        ta, tb = tf.read_trace(first), tf.read_trace(tmp_path / f"{name}-behind")
        assert ta.table.equals(tb.table), name
        assert {**ta.manifest, "run_id": None} == {**tb.manifest, "run_id": None}
        a, b = _prepared(first), _prepared(tmp_path / f"{name}-behind")
        assert a.keys() == b.keys()
        for k in a:
            if k != "meta":
                assert a[k].dtype == b[k].dtype and np.array_equal(a[k], b[k]), (name, k)


def test_a_failed_write_behind_is_one_error_and_leaves_nothing(tmp_path, monkeypatch, capsys):
    """A rank file that cannot be written (a full disk) while the rows are checked: one
    ``Error:`` line, exit 1, no trace and no temporary directory left."""
    import hindsight.trace.write as W

    src = tmp_path / "s.goal"
    src.write_text(HAND)
    real = W.write_rank_file

    def full(where, *a, **k):
        if str(where).endswith("rank-00001.parquet"):
            raise OSError(28, "No space left on device", str(where))
        return real(where, *a, **k)

    monkeypatch.setattr(W, "write_rank_file", full)
    with pytest.raises(SystemExit) as exc:
        cli(["import", "goal", str(src), "--out", str(tmp_path / "t")])
    err = capsys.readouterr().err
    assert exc.value.code == 1
    assert err.startswith("Error:") and err.count("\n") == 1 and "No space left" in err
    assert not (tmp_path / "t").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.goal"]
