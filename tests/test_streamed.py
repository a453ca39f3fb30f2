"""Streamed replay and check (replay/segments.py, replay/streamed.py): a trace read a window of
rows per rank at a time, cut where nothing is in flight (eager messages may cross a cut, rule
``carried_message``), gives the in-memory replay's result and the in-memory check's lines."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import replay
from hindsight.check import check_trace
from replay import models as M
from replay.errors import ReplayError
from replay.segments import segments
from replay.streamed import run_streamed
from synthetic import ring_columns, simulate_to_dir, write_trace
from tests.conftest import hindsight
from tests.test_rma import _open, _trace, W

ROOT = Path(__file__).resolve().parents[1]
CORPUS = sorted(p for p in (ROOT / "tests" / "corpus").iterdir() if (p / "manifest.json").is_file())
SHM = ROOT / "docs" / "calibration" / "shm.toml"


def _same(a, b) -> None:
    """Two replays agree: per rank its end, compute, communication and waiting, and counts."""
    for name in ("rank_end_ns", "rank_compute_ns", "rank_comm_ns", "rank_wait_ns",
                 "measured_rank_end_ns"):
        np.testing.assert_allclose(getattr(b, name), getattr(a, name), rtol=1e-12, atol=1e-6,
                                   err_msg=name)
    assert (b.events, b.operations, b.messages) == (a.events, a.operations, a.messages)
    assert b.measured_makespan_ns == a.measured_makespan_ns


def _models():
    mod = M.get_model("loggps")
    profiled = M.resolve(mod, {}, M.load_profile(SHM, mod))   # in-call progress, ack_cells
    return [("loggps", {"S": "16KiB"}, None), ("measured", {}, None), ("hockney", {}, None),
            ("loggps", {}, profiled)]


@pytest.mark.parametrize("trace", CORPUS, ids=[p.name for p in CORPUS])
def test_streamed_replay_of_real_traces_equals_the_in_memory_one(trace: Path) -> None:
    prep = replay.prepare(trace, use_cache=False)
    for model, params, resolved in _models():
        whole = replay.run(prep, model, params, resolved=resolved, record=False)
        for window in (7, 40):
            part = run_streamed(trace, model, params, resolved=resolved, window=window)
            _same(whole, part)
            assert part.info["streamed"]["p2p_messages"] == len(prep.msgs.bytes)
    assert run_streamed(trace, "loggps", window=7).info["streamed"]["segments"] > 1


@st.composite
def in_flight_programs(draw):
    """Random valid programs where eager messages stay in flight across other calls: a send
    whose receive comes several steps later (after collectives and other messages), as a
    master's next task waits while its worker computes."""
    p = draw(st.integers(2, 4))
    progs = [[] for _ in range(p)]
    owed: list[tuple[int, int, int]] = []     # (receiver, sender, tag) of sends not yet received
    for _ in range(draw(st.integers(4, 30))):
        what = draw(st.sampled_from(["ahead", "ahead", "settle", "coll", "compute", "nb"]))
        if what == "compute":
            progs[draw(st.integers(0, p - 1))].append(("compute", draw(st.integers(1, 9000))))
        elif what == "coll":
            name = draw(st.sampled_from(["Barrier", "Allreduce", "Bcast"]))
            for r in range(p):
                progs[r].append(("coll", name, draw(st.sampled_from([8, 800])), 0))
        elif what == "ahead":
            a, b = draw(st.lists(st.integers(0, p - 1), min_size=2, max_size=2, unique=True))
            tag = draw(st.integers(0, 1))
            progs[a].append(("send", b, draw(st.sampled_from([0, 64, 4000])), tag))
            owed.append((b, a, tag))
        elif what == "nb":
            a, b = draw(st.lists(st.integers(0, p - 1), min_size=2, max_size=2, unique=True))
            qa = sum(1 for o in progs[a] if o[0] in ("isend", "irecv"))
            qb = sum(1 for o in progs[b] if o[0] in ("isend", "irecv"))
            nb = draw(st.sampled_from([8, 100_000]))           # eager or rendezvous
            progs[a] += [("isend", b, nb, 5), ("wait", [qa])]
            progs[b] += [("irecv", a, 5), ("compute", 100), ("wait", [qb])]
        if what == "settle" or what == "coll":
            for b, a, tag in owed:
                progs[b].append(("recv", a, tag))
            owed.clear()
    for b, a, tag in owed:
        progs[b].append(("recv", a, tag))
    return progs


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(in_flight_programs(), st.integers(2, 12), st.sampled_from(["loggps", "measured"]))
def test_streamed_replay_of_random_programs_equals_the_in_memory_one(progs, window, model):
    with tempfile.TemporaryDirectory(prefix="hs-stream-") as tmp:
        d = simulate_to_dir(Path(tmp) / "t", progs)
        params = {"S": "16KiB"}
        whole = replay.run(replay.prepare(d, use_cache=False), model, params, record=False)
        _same(whole, run_streamed(d, model, params, window=window))
        assert check_trace(d, window) == []


def test_an_eager_message_in_flight_crosses_the_cut(tmp_path: Path) -> None:
    # rank 0 sends two tasks ahead (eager), rank 1 receives each one only after answering the
    # one before: a task is in flight most of the run; eager ones may cross a cut (rule
    # carried_message), which the segments take when they cut there
    n = 30
    master = [("send", 1, 100, 1), ("send", 1, 100, 1)]
    worker = []
    for i in range(n):
        worker += [("recv", 0, 1), ("compute", 5000), ("send", 0, 8, 2)]
        master += [("recv", 1, 2)] + ([("send", 1, 100, 1)] if i < n - 2 else [])
    d = simulate_to_dir(tmp_path / "t", [master, worker])
    segs = list(segments(d, 8, eager_limit=16384))
    assert len(segs) > 4
    assert sum(int(s.later.sum()) for s in segs) > 0          # receives stood in for
    whole = replay.run(replay.prepare(d, use_cache=False), "loggps", {"S": "16KiB"},
                       record=False)
    _same(whole, run_streamed(d, "loggps", {"S": "16KiB"}, window=8))
    # with every message above S (rendezvous) none crosses a cut
    assert not any(s.later.any() for s in segments(d, 8, eager_limit=4))


def test_a_ring_streams_in_bounded_windows(tmp_path: Path) -> None:
    d = write_trace(tmp_path / "ring", ring_columns(6, 400))
    segs = list(segments(d, 100))
    rows = [len(s.cols.arrays["rank"]) for s in segs]
    assert len(segs) >= 8 and max(rows) <= 6 * 100
    assert sum(rows) == sum(json.loads((d / "manifest.json").read_text())["events"])


def test_one_sided_communication_is_not_streamed(tmp_path: Path) -> None:
    prep = _trace(tmp_path, [_open() + [("Put", 1, W, 100), ("Win_fence", -1, W, -1)],
                             _open() + [("Win_fence", -1, W, -1)]])
    with pytest.raises(ReplayError, match="one-sided communication"):
        run_streamed(prep.path, "loggps", window=16)
    res = hindsight("replay", prep.path, "--window", "16")
    assert res.returncode == 1 and res.stderr.count("\n") == 1
    assert res.stderr.startswith("Error: ") and "in memory" in res.stderr


def test_streamed_check_says_what_the_in_memory_check_says(tmp_path: Path) -> None:
    ring = []
    for r in range(3):
        p = []
        for i in range(30):
            p += [("compute", 1000), ("isend", (r + 1) % 3, 100, 0), ("irecv", (r - 1) % 3, 0),
                  ("wait", [2 * i, 2 * i + 1])]
        ring.append(p)
    ring[0].insert(40, ("send", 1, 64, 99))         # never received
    d = simulate_to_dir(tmp_path / "t", ring)
    lines = check_trace(d)
    assert lines and "has no matching receive" in lines[0]
    for window in (10, 50):
        assert check_trace(d, window) == lines


def test_replay_cli_streams_with_window_and_refuses_what_needs_memory(tmp_path: Path) -> None:
    trace = CORPUS[0]
    whole = json.loads(hindsight("replay", trace, "--json").stdout)
    res = hindsight("replay", trace, "--window", "16", "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["streamed"]["segments"] > 1
    assert doc["predicted_makespan_s"] == pytest.approx(whole["predicted_makespan_s"], rel=1e-12)
    text = hindsight("replay", trace, "--window", "16")
    assert text.returncode == 0 and "streamed" in text.stdout and "predicted" in text.stdout
    for extra, flag in ((["--out", tmp_path / "o"], "--out"), (["--cpu-time"], "--cpu-time"),
                        (["--model", "mm1"], "mm1"), (["--noise", "trace"], "--noise")):
        bad = hindsight("replay", trace, "--window", "16", *extra)
        assert bad.returncode == 2, (extra, bad.stderr)
        assert bad.stderr.startswith("Error: ") and flag in bad.stderr
        assert bad.stderr.count("\n") == 1 and not bad.stdout


@pytest.mark.parametrize("name", ["requests-n2", "stencil-n4"])
def test_a_streamed_replay_says_what_the_in_memory_one_says_of_the_run(name) -> None:
    """Its trace line (point-to-point messages apart from the model's patterns' ones) and the
    run's warnings and notes (disturbed, oversubscribed) are the in-memory replay's; a window
    that makes over a thousand segments is noted."""
    trace = next(p for p in CORPUS if p.name == name)
    mem, part = hindsight("replay", trace), hindsight("replay", trace, "--window", "16")
    assert mem.returncode == part.returncode == 0, part.stderr
    assert part.stdout.splitlines()[0] == mem.stdout.splitlines()[0]
    assert "point-to-point messages" in mem.stdout.splitlines()[0]
    assert part.stderr.splitlines() == mem.stderr.splitlines() and mem.stderr
    from replay.budget import small_window_note
    assert small_window_note({"ranks": 2, "events": [40_000, 10]}, 16).startswith(
        "--window 16: about 2500 segments (its largest rank has 40000 events)")
    assert small_window_note({"ranks": 2, "events": [40_000, 10]}, 40) is None


def test_a_trace_too_big_for_memory_streams_on_its_own() -> None:
    trace = CORPUS[0]
    small = {"HINDSIGHT_MEMORY": "1000"}
    res = hindsight("replay", trace, env=small)
    assert res.returncode == 0, res.stderr
    assert "note: " in res.stderr and "streamed" in res.stderr
    assert "streamed" in res.stdout
    check = hindsight("trace", "check", trace, env=small)
    assert check.returncode == 0 and check.stdout.strip().endswith(": ok")
    assert "streamed" in check.stderr
    bad = hindsight("replay", trace, env={"HINDSIGHT_MEMORY": "lots"})
    assert bad.returncode == 2 and bad.stderr.startswith("Error: HINDSIGHT_MEMORY=lots")


def test_freed_sends_do_not_hold_the_cuts(tmp_path: Path) -> None:
    # every task is an Isend freed at once (as mpi4py.futures does): no row completes it, yet
    # the trace still has consistent cuts (the free ends the request)
    master, worker = [], []
    for i in range(40):
        master += [("isend", 1, 64, 1), ("free", i), ("compute", 3000), ("recv", 1, 2)]
        worker += [("recv", 0, 1), ("compute", 2000), ("send", 0, 8, 2)]
    d = simulate_to_dir(tmp_path / "t", [master, worker])
    assert len(list(segments(d, 10, eager_limit=16384))) > 4
    whole = replay.run(replay.prepare(d, use_cache=False), "loggps", {"S": "16KiB"},
                       record=False)
    _same(whole, run_streamed(d, "loggps", {"S": "16KiB"}, window=10))
    assert check_trace(d, 10) == check_trace(d) == []


def test_a_stretch_without_a_cut_grows_the_window_up_to_the_memory_there_is(tmp_path):
    # each rank completes its Iallreduce one iteration later (workloads/overlap.py): a
    # collective is in flight at every point, so no cut is consistent; the window grows, and
    # past the memory there is the replay says why in one line instead of running out of it
    progs = []
    for r in range(3):
        p = [("icoll", "Iallreduce", 8)]
        for i in range(1, 60):
            p += [("icoll", "Iallreduce", 8), ("compute", 1000), ("wait", [i - 1])]
        progs.append(p + [("wait", [59])])
    d = simulate_to_dir(tmp_path / "t", progs)
    whole = replay.run(replay.prepare(d, use_cache=False), "loggps", record=False)
    _same(whole, run_streamed(d, "loggps", window=8))                 # read whole
    with pytest.raises(ReplayError, match="no consistent cut within 32 rows"):
        run_streamed(d, "loggps", window=8, max_window=40)


def test_the_first_event_is_found_without_footer_statistics(tmp_path, monkeypatch):
    # a region row holds the trace's first event at the end of its file (written when the
    # region ends); without statistics in the footers the column itself is read
    progs = [[("compute", 500, "solve"), ("send", 1, 8)], [("compute", 900), ("recv", 0)]]
    d = simulate_to_dir(tmp_path / "t", progs)
    t0 = replay.prepare(d, use_cache=False).t0
    assert next(iter(segments(d, 16))).t0 == t0
    from replay import segments as S

    monkeypatch.setattr(S, "_footer_min", lambda path, column: None)
    assert next(iter(segments(d, 16))).t0 == t0


def test_a_rank_that_ends_early_keeps_its_trail(tmp_path):
    # rank 0's region after its last call ends it long before rank 1's last segment
    progs = [[("send", 1, 8), ("recv", 1), ("compute", 7000, "tail")],
             [("recv", 0), ("send", 0, 8), ("compute", 50, "x"), ("compute", 50, "y"),
              ("compute", 50, "z")]]
    d = simulate_to_dir(tmp_path / "t", progs)
    whole = replay.run(replay.prepare(d, use_cache=False), "loggps", {"S": "16KiB"},
                       record=False)
    for window in (2, 3, 4):
        _same(whole, run_streamed(d, "loggps", {"S": "16KiB"}, window=window))


def test_a_send_of_unknown_size_never_crosses_a_cut(tmp_path):
    # nbytes -1 (a buffer the tracer could not size): matching sizes it by its receive, so
    # whether it is eager is known only there
    from synthetic import simulate
    progs = [[("send", 1, 100000, 1), ("compute", 100)],
             [("send", 2, 8, 0), ("recv", 2, 0)] * 6 + [("recv", 0, 1)],
             [("recv", 1, 0), ("send", 1, 8, 0)] * 6]
    cols = simulate(progs)
    cols[0]["nbytes"][0] = -1
    d = write_trace(tmp_path / "t", cols)
    whole = replay.run(replay.prepare(d, use_cache=False), "loggps", {"S": "16KiB"},
                       record=False)
    for window in range(2, 12):
        _same(whole, run_streamed(d, "loggps", {"S": "16KiB"}, window=window))


def test_one_sided_traces_are_not_checked_streamed_but_say_so(tmp_path):
    prep = _trace(tmp_path, [_open() + [("Put", 1, W, 100), ("Win_fence", -1, W, -1)],
                             _open() + [("Win_fence", -1, W, -1)]])
    assert check_trace(prep.path) == []
    res = hindsight("trace", "check", prep.path, "--window", "16")
    assert res.returncode == 1 and res.stderr.startswith("Error: ")
    assert "without --window" in res.stderr and res.stderr.count("\n") == 1
