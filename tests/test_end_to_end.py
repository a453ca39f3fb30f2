"""End to end on the real workloads: every application on every paradigm is collected with
`hindsight collect`, passes `hindsight trace check`, and replays without deadlock; the
`measured` model reproduces the measured makespan (the engine's self-consistency check)."""

from __future__ import annotations

import pytest

from apps import APPS
from hindsight import trace as tf
from hindsight.check import check_trace
from tests.conftest import hindsight

TINY = {
    "sorting": ["--arrays", "8", "--array-size", "4096", "--block-size", "2048"],
    "components": ["--vertices", "4096", "--edges", "4096", "--edges-per-task", "1024"],
    "feature_extraction": ["--docs", "40", "--docs-per-task", "5"],
}
CELLS = [(app, paradigm) for app in sorted(APPS) for paradigm in APPS[app]]


@pytest.fixture(scope="module")
def app_traces(tmp_path_factory):
    root = tmp_path_factory.mktemp("apps")
    out = {}
    for app, paradigm in CELLS:
        d = root / f"{app}-{paradigm}"
        res = hindsight("collect", app, "-n", 4, "--paradigm", paradigm, "--out", d,
                        "--timeout", 120, "--", *TINY[app], timeout=200)
        assert res.returncode == 0, (app, paradigm, res.stdout, res.stderr)
        out[(app, paradigm)] = d
    return out


@pytest.mark.parametrize("app, paradigm", CELLS)
def test_app_trace_checks_and_replays(app_traces, app, paradigm):
    import replay

    d = app_traces[(app, paradigm)]
    trace = tf.read_trace(d)
    m = trace.manifest
    assert trace.complete and m["result_verified"] is True
    assert m["app"] == app and m["paradigm"] == paradigm
    regions = set(trace.to_pandas().query("op == 'region'")["region"].astype(str))
    assert regions, "applications mark their phases"
    assert check_trace(d) == []
    prep = replay.prepare(d)
    measured = replay.run(prep, "measured")
    assert measured.makespan_ns == pytest.approx(prep.measured_makespan_ns, rel=0.01)
    for model in ("loggps", "hockney", "mm1"):
        res = replay.run(prep, model)
        assert res.makespan_ns > 0
        # The critical path's per-rank shares tile [0, makespan].
        assert res.critical_rank_ns.sum() == pytest.approx(res.makespan_ns, rel=1e-6)
