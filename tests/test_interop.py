"""Interoperability: OTF2, Perfetto JSON, GOAL schedules and the loggopsim model, pipit; the format
registries of `hindsight export`/`import`."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import replay
from hindsight import trace as tf
from hindsight.check import check_trace
from hindsight.interop import goal as G
from hindsight.interop.formats import EXPORTERS, IMPORTERS
from hindsight.interop.otf2 import COLLECTIVE_OPS_OTF2, UNDEFINED_ROOT, OtfError
from hindsight.interop.otf2_export import export_otf2
from hindsight.interop.otf2_import import import_otf2
from hindsight.interop.perfetto import to_perfetto
from hindsight.interop.pipit import to_pipit
from replay.frame import load
from replay.loggopsim import simulator as LG
from replay.loggopsim.goal import GoalError, format_goal, parse_goal, read_goal
from synthetic import simulate_to_dir
from tests.conftest import hindsight

HAND = """// the hand example
num_ranks 2
rank 0 {
  c: calc 1000
  s: send 1024b to 1 tag 0
  s requires c
}
rank 1 {
  r: recv 1024b from 0 tag 0
  c: calc 500
  c requires r
}
"""
HAND_PARAMS = {"L": "3000ns", "o": "1500ns", "g": "1000ns", "G": "6ns", "S": "65535B"}

PROGRAM = '''
import numpy as np
from mpi4py import MPI
import instrument

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
peer = (rank + 1) % size
buf = np.arange(1000, dtype=np.float64)
got = np.empty_like(buf)
for it in range(2):
    with instrument.region("work", size=1000):
        x = sum(i * i for i in range(5000))
    if rank == 0:
        comm.Send(buf, dest=peer, tag=it)
        comm.Recv(got, source=peer, tag=it)
    else:
        comm.Recv(got, source=MPI.ANY_SOURCE, tag=it)
        comm.Send(buf, dest=peer, tag=it)
    reqs = [comm.Irecv(got, source=MPI.ANY_SOURCE, tag=7),
            comm.Isend(buf[:100], dest=peer, tag=7)]
    MPI.Request.Waitall(reqs)
    comm.Sendrecv(buf[:10], dest=peer, sendtag=9, recvbuf=got[:10], source=peer, recvtag=9)
    comm.Allreduce(buf[:64], got[:64], op=MPI.SUM)
comm.Bcast(buf, root=1)
sub = comm.Split(color=0, key=rank)
sub.Allreduce(buf[:8], got[:8], op=MPI.SUM)
'''


def _synthetic(path: Path) -> Path:
    progs = [[("compute", 1000, "work"), ("isend", 1, 100000, 5), ("irecv", 1, 6),
              ("wait", [0, 1]), ("coll", "Allreduce", 64), ("compute", 500), ("recv", 1)],
             [("compute", 3000, "work"), ("irecv", 0, 5), ("isend", 0, 2000, 6),
              ("wait", [0, 1]), ("coll", "Allreduce", 64), ("send", 0, 10)]]
    return simulate_to_dir(path, progs)


@pytest.fixture(scope="module")
def real_trace(tmp_path_factory) -> Path:
    """A real 2-rank trace (mpiexec -n 2) with p2p, requests, Sendrecv, collectives, a split."""
    if shutil.which("mpiexec") is None:
        pytest.skip("mpiexec is not available")
    d = tmp_path_factory.mktemp("real")
    prog = d / "prog.py"
    prog.write_text(PROGRAM)
    out = d / "trace"
    p = hindsight("collect", "-n", "2", "--program", prog, "--out", out, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    return out


def _frame(path: Path):
    df = tf.read_trace(path).table.to_pandas()
    return {c: df[c].astype(object).where(df[c].notna(), None).tolist() for c in df.columns}


# ------------------------------------------------------------------------------------------------
# The loggopsim model (LogGOPSim's simulator)


def test_loggopsim_hand_example_kernel():
    s = parse_goal(HAND)
    sim = LG.simulate(s, LG.params_vector(L=3000, o_send=1500, o_recv=1500, O_send=0, O_recv=0,
                                          g=1000, G=6, S=65535))
    assert sim.rank_end.tolist() == [2500.0, 13638.0]


def test_loggopsim_hand_example_through_import_and_replay(tmp_path):
    src = tmp_path / "hand.goal"
    src.write_text(HAND)
    G.import_goal(src, tmp_path / "t")
    assert check_trace(tmp_path / "t") == []
    res = replay.run(replay.prepare(tmp_path / "t"), "loggopsim", HAND_PARAMS)
    assert res.rank_end_ns.tolist() == [2500.0, 13638.0]
    assert res.model == "loggopsim"
    assert res.summary()["schedule"] == "the GOAL schedule the trace was imported from"
    # per-row times: rank 1's Wait ends when the message was handled, its calc after it
    ev = res.events_frame()
    r1 = ev[ev["rank"] == 1]
    assert r1["end_ns"].tolist()[-1] == 13638.0
    assert r1[r1["op"] == "Wait"]["end_ns"].tolist() == [13138.0]


def test_goal_import_rows_alike_from_narrow_schedule_and_requests_delta_encoded(tmp_path):
    """The import's rows come from the schedule's own arrays: the cached schedule's narrow ones
    (int32 ranks, int8 kinds, int16 CPU and NIC indices) give the rows int64 ones (a trace's
    schedule) give; the rank files hold exactly those rows, their request ids delta-encoded."""
    import dataclasses

    import sys

    import pyarrow.parquet as pq
    from replay.loggopsim.schedule import sidecar_schedule
    from replay.models.loggopsim import params_from_values
    from replay import models as M

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from goal_schedules import make_schedule

    text, _ = make_schedule("allreduce", 3000, P=5)
    src = tmp_path / "a.goal"
    src.write_text(text)
    G.import_goal(src, tmp_path / "t")
    parsed = read_goal(src)
    parsed = dataclasses.replace(parsed, **{f: np.asarray(getattr(parsed, f), np.int64) for f in (
        "rank", "kind", "peer", "tag", "cpu", "nic", "dep_op", "dep_on")})
    narrow = sidecar_schedule(replay.prepare(tmp_path / "t"))
    assert narrow.kind.dtype == np.int8 and parsed.kind.dtype == np.int64
    assert narrow.cpu.dtype == narrow.nic.dtype == np.int16     # as the simulator reads them
    values = M.resolve(M.get_model("loggopsim"), list(G.LOGGOPSIM_DEFAULTS.items()))
    sim = LG.simulate(parsed, params_from_values(values, parsed.nranks))
    wide, thin = G.RankRows(parsed, sim), G.RankRows(narrow, sim)
    col = tf.COLUMNS.index("request")
    for r in range(parsed.nranks):
        a, b = wide[r], thin[r]
        assert np.array_equal(a.op, b.op) and np.array_equal(a.region, b.region)
        for c in a.ints:
            assert np.array_equal(a.ints[c], b.ints[c]), (r, c)
        f = pq.ParquetFile(tmp_path / "t" / tf.rank_file_name(r))
        assert f.read().equals(a.to_table()), r
        assert "DELTA_BINARY_PACKED" in f.metadata.row_group(0).column(col).encodings
    assert check_trace(tmp_path / "t") == []


def test_loggopsim_sidecar_schedule_is_cached_and_refreshed(tmp_path, monkeypatch):
    """The schedule kept beside an imported trace is parsed by the import, which caches it:
    replays read it back from the cache (same schedule, same replay); an edited schedule is
    parsed afresh."""
    from replay.loggopsim import schedule as S
    from replay.loggopsim.schedule import SIDECAR, sidecar_schedule

    src = tmp_path / "hand.goal"
    src.write_text(HAND)
    G.import_goal(src, tmp_path / "t")
    cached = list((tmp_path / "t" / ".replay-cache").glob("schedule-*"))
    assert len(cached) == 1 and (cached[0] / "kind.npy").is_file()
    prep = replay.prepare(tmp_path / "t")
    first = read_goal(tmp_path / "t" / SIDECAR)
    with monkeypatch.context() as m:
        m.setattr(S, "read_goal", lambda path: pytest.fail(f"{path} parsed again"))
        again = sidecar_schedule(prep)
    # read back as stored (narrow, memory-mapped), dependencies too: no widened copies
    assert isinstance(again.rank, np.ndarray) and again.rank.dtype == np.int32
    assert again.dep_op.dtype == np.int32 and again.dep_on.dtype == np.int32
    for name in ("rank", "kind", "size", "peer", "tag", "cpu", "nic", "dep_op", "dep_on",
                 "dep_start"):
        assert np.array_equal(getattr(first, name), getattr(again, name)), name
    assert [again.label(i) for i in range(again.nops)] == \
        [first.label(i) for i in range(first.nops)]
    res = replay.run(prep, "loggopsim", HAND_PARAMS)
    assert res.rank_end_ns.tolist() == [2500.0, 13638.0]
    # a longer calc on rank 1: the edited file is read, the old cache dropped
    (tmp_path / "t" / SIDECAR).write_text(HAND.replace("calc 500", "calc 1500"))
    edited = sidecar_schedule(prep)
    assert edited.size.sum() == first.size.sum() + 1000
    assert cached[0].exists() is False
    # a damaged cache is rebuilt, not trusted
    (next((tmp_path / "t" / ".replay-cache").glob("schedule-*")) / "kind.npy").write_bytes(b"x")
    assert np.array_equal(sidecar_schedule(prep).kind, edited.kind)


WILD = """num_ranks 3
rank 0 {
  a: recv 8b from -1 tag -1
  b: recv 8b from 2 tag -1
  c: recv 8b from -1 tag 5
  d: calc 100
  b requires a
  c requires b
  d requires c
}
rank 1 {
  s: send 8b to 0 tag 9
  t: send 8b to 0 tag 5
  t requires s
}
rank 2 {
  calc 700
  u: send 8b to 0 tag 4
}
"""


@pytest.mark.parametrize("text,calc", [(HAND, "calc 1000"), (WILD, "d: calc 100")],
                         ids=["no-wildcard", "wildcards"])
def test_goal_import_keeps_the_matching_buckets_a_replay_maps(tmp_path, text, calc):
    """The import numbers the simulator's matching buckets once and keeps them with the
    schedule (without a wildcard receive one array; with one, its candidates too); simulating
    with the kept buckets gives what numbering them afresh gives, operation by operation."""
    import dataclasses

    from replay.loggopsim.schedule import sidecar_schedule
    from replay.models.loggopsim import params_from_values
    from replay import models as M

    src = tmp_path / "s.goal"
    src.write_text(text)
    G.import_goal(src, tmp_path / "t")
    (cache,) = (tmp_path / "t" / ".replay-cache").glob("schedule-*")
    meta = json.loads((cache / "meta.json").read_text())
    wild = text is WILD
    assert meta["buckets"]["aliased"] is (not wild)
    assert (cache / "cand.npy").is_file() is wild
    kept = sidecar_schedule(replay.prepare(tmp_path / "t"))
    assert kept.buckets is not None and kept.buckets[0].dtype == np.int32
    values = M.resolve(M.get_model("loggopsim"), list(G.LOGGOPSIM_DEFAULTS.items()))
    prm = params_from_values(values, kept.nranks)
    a = LG.simulate(kept, prm)
    b = LG.simulate(dataclasses.replace(kept, buckets=None), prm)
    assert np.array_equal(a.op_end, b.op_end) and np.array_equal(a.match, b.match)
    assert np.array_equal(a.rank_end, b.rank_end) and a.not_done == 0
    # the text's whole sizes are kept as int32 and simulate as the parser's float64 sizes do
    parsed = read_goal(src)
    assert kept.size.dtype == np.int32 and np.array_equal(kept.size, parsed.size)
    c = LG.simulate(parsed, prm)
    assert np.array_equal(a.op_end, c.op_end) and np.array_equal(a.match, c.match)
    # a damaged bucket file (numbers past the queues) is not trusted: numbered afresh
    np.save(cache / "bucket.npy", np.full(kept.nops, 10**6, np.int32))
    fresh = sidecar_schedule(replay.prepare(tmp_path / "t"))
    assert np.array_equal(LG.simulate(fresh, prm).op_end, a.op_end)
    # a schedule edited after the import is parsed afresh, and its buckets kept again
    src2 = tmp_path / "t" / "schedule.goal"
    src2.write_text(text.replace(calc, calc + "0"))
    again = sidecar_schedule(replay.prepare(tmp_path / "t"))
    assert again.buckets is not None
    grown = float(calc.split()[-1]) * 9
    assert LG.simulate(again, prm).rank_end[0] == a.rank_end[0] + grown


@pytest.mark.parametrize("S,expect", [(100, [5100.0, 12638.0]), (65535, [1600.0, 12638.0])])
def test_loggopsim_rendezvous_and_unexpected_message(S, expect):
    """Rank 1 is busy until 5000 when the message arrives at 4500: it is handled at 5000 (CPU
    charged o + (s-1)G, no receive posted yet), the receive then matches it at once; above S the
    sender's request completes only then (its calc starts at 5000, not at 1500)."""
    text = """num_ranks 2
rank 0 {
s: send 1024b to 1 tag 3
c: calc 100
c requires s
}
rank 1 {
c: calc 5000
r: recv 1024b from -1 tag -1
r requires c
}
"""
    sim = LG.simulate(parse_goal(text), LG.params_vector(3000, 1500, 1500, 0, 0, 1000, 6, S))
    assert sim.rank_end.tolist() == expect


def test_loggopsim_irequires_lets_operations_overlap():
    """Two sends with no dependency start together: the second waits only for CPU/NIC gap."""
    text = """num_ranks 3
rank 0 {
a: send 8b to 1
b: send 8b to 2
}
rank 1 {
r: recv 8b from 0
}
rank 2 {
r: recv 8b from 0
}
"""
    sim = LG.simulate(parse_goal(text), LG.params_vector(2500, 1500, 1500, 0, 0, 1000, 6, 65535))
    # send a at 0 (CPU to 1500, NIC to 1042); b at 1500; arrivals at 4000 and 5500
    assert sim.op_start[:2].tolist() == [0.0, 1500.0]
    assert sim.rank_end.tolist() == [3000.0, 4000.0 + 1500 + 42, 5500.0 + 1500 + 42]


def test_loggopsim_backlog_is_handled_in_stamp_order():
    """Three messages arrive at 4000 while rank 0 computes until 10000: they wait for its CPU
    and are handled one after another from 10000 in the order they were sent (rank 1's send
    was issued last, after its calc), each charging o = 1500; the receives, posted at 10000 in
    the opposite order, complete as their message is handled."""
    text = """num_ranks 4
rank 0 {
c: calc 10000
r3: recv 8b from 3
r2: recv 8b from 2
r1: recv 8b from 1
r3 requires c
r2 requires c
r1 requires c
}
rank 1 {
c: calc 100
s: send 8b to 0
s requires c
}
rank 2 {
s: send 8b to 0
}
rank 3 {
s: send 8b to 0
}
"""
    sim = LG.simulate(parse_goal(text), LG.params_vector(2500, 1500, 1500, 0, 0, 1000, 0, 65535))
    r3, r2, r1 = 1, 2, 3
    assert [sim.op_end[i] for i in (r2, r3, r1)] == [11500.0, 13000.0, 14500.0]
    assert sim.rank_end.tolist() == [14500.0, 1600.0, 1500.0, 1500.0]


def test_loggopsim_model_replays_a_trace(tmp_path):
    tr = _synthetic(tmp_path / "syn")
    prep = replay.prepare(tr)
    lg = replay.run(prep, "loggopsim")
    assert lg.makespan_ns > 0 and lg.row_start_ns is not None
    assert np.all(lg.row_end_ns >= lg.row_start_ns)
    assert lg.makespan_ns != replay.run(prep, "loggps").makespan_ns
    assert lg.summary()["schedule"] == "the trace's program order as a GOAL schedule"
    # same answer without per-row times
    assert replay.run(prep, "loggopsim", record=False).makespan_ns == lg.makespan_ns
    with pytest.raises(replay.ReplayError, match="injected delays"):
        replay.run(prep, "loggopsim", delay_ns=np.zeros(prep.nrows))


def test_loggopsim_is_not_a_parameter_of_loggps(tmp_path):
    """LogGOPSim's rules are a model of their own: the parameter that once chose them is gone."""
    tr = _synthetic(tmp_path / "syn")
    p = hindsight("replay", tr, "--model", "loggps", "--set", "semantics=loggopsim")
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert p.stderr.strip() == ("Error: --set: parameter 'semantics' is gone from model loggps: "
                                "LogGOPSim's rules are a model of their own: --model loggopsim")


def test_loggopsim_simulator_imports_nothing_of_hindsight():
    """The simulator reads as the peer's algorithm: numpy, numba's ``njit`` (as
    ``hindsight.jit`` defers it, with its ``readonly`` views) and the standard library."""
    import ast
    import sys

    own = ("queues", "buckets", "codes")
    for path in (Path(LG.__file__), *(Path(LG.__file__).with_name(f"{m}.py") for m in own)):
        tree = ast.parse(path.read_text())
        top = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import)
               for a in n.names}
        # relative imports: only the simulator's own modules (its data structures, match
        # buckets and shared codes)
        top |= {n.module.split(".")[0] if not n.level else f".{n.module}"
                for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                and not (n.module == "hindsight.jit"
                         and {a.name for a in n.names} <= {"njit", "readonly"})}
        allowed = set(sys.stdlib_module_names) | {"__future__"} | {f".{m}" for m in own}
        assert top - {"numpy", "numba"} <= allowed, (path, top)


# ------------------------------------------------------------------------------------------------
# GOAL


def test_goal_format_parse_round_trip(tmp_path):
    tr = _synthetic(tmp_path / "syn")
    out = tmp_path / "s.goal"
    sched = G.export_goal(tr, out)
    text = out.read_text()
    again = parse_goal(text)
    assert format_goal(again) == "\n".join(text.splitlines()[1:]) + "\n"  # minus the header
    assert again.nops == sched.nops and again.kind.tolist() == sched.kind.tolist()


def test_goal_export_scales_bursts(real_trace, tmp_path):
    """At x1 the schedule takes the bursts as they are; another scale multiplies every calc
    (the two paths of schedule_from_trace)."""
    one = G.export_goal(real_trace, tmp_path / "one.goal")
    two = G.export_goal(real_trace, tmp_path / "two.goal", compute_scale=2.0)
    assert two.kind.tolist() == one.kind.tolist()
    calc = np.asarray(one.kind) == LG.CALC
    assert calc.any()
    np.testing.assert_array_equal(np.asarray(two.size)[calc], 2 * np.asarray(one.size)[calc])
    np.testing.assert_array_equal(np.asarray(two.size)[~calc], np.asarray(one.size)[~calc])


def test_goal_export_import_replays_identically(real_trace, tmp_path):
    out = tmp_path / "r.goal"
    G.export_goal(real_trace, out)
    G.import_goal(out, tmp_path / "back")
    assert check_trace(tmp_path / "back") == []
    m = tf.read_manifest(tmp_path / "back")
    assert m["origin"]["format"] == "goal"
    params = {"L": "2us", "G": "1ns"}
    a = replay.run(replay.prepare(real_trace), "loggopsim", params)
    b = replay.run(replay.prepare(tmp_path / "back"), "loggopsim", params)
    assert a.rank_end_ns.tolist() == b.rank_end_ns.tolist()
    # the kernel's models replay the imported (linearised) trace too
    assert replay.run(replay.prepare(tmp_path / "back"), "loggps").makespan_ns > 0
    # and exporting the imported trace gives its schedule back
    G.export_goal(tmp_path / "back", tmp_path / "again.goal")
    assert format_goal(read_goal(tmp_path / "again.goal")) == format_goal(read_goal(out))


@pytest.mark.parametrize("text,needle", [
    ("rank 0 {\n}\n", "before 'num_ranks'"),
    ("{\"traceEvents\": []}\n", "expected 'num_ranks N'"),
    ("num_ranks 1\nrank 0 {\na: calc 5\nb requires a\n}\n", "label 'b'"),
    ("num_ranks 1\nrank 0 {\na: send 8b to 3\n}\n", "send to rank 3"),
    ("num_ranks 1\nrank 0 {\na: frobnicate 8\n}\n", "cannot parse"),
    ("num_ranks 1\nrank 0 {\ncalc 5 cpu 99999999999999999\n}\n", "cpu index 9+: at most 1023"),
    ("num_ranks 1\nrank 0 {\ncalc 5 cpu 99999999999999999999\n}\n", "not a plausible index"),
    ("num_ranks 1\nrank 0 {\na: calc 5\n", "not closed"),
    ("num_ranks 2\nrank 0 {\na: send 8b to 1\n}\nrank 1 {\n}\n", "no receive matches"),
    ("num_ranks 1\nrank 0 {\na: calc 5\nb: calc 5\na requires b\nb requires a\n}\n", "cyclic"),
])
def test_goal_malformed_inputs(tmp_path, text, needle):
    p = tmp_path / "bad.goal"
    p.write_text(text)
    with pytest.raises(GoalError, match=needle) as ei:
        G.import_goal(p, tmp_path / "out")
    assert str(p) in str(ei.value)
    assert not (tmp_path / "out").exists()
    # into an empty folder given beforehand: the folder stays, empty (the text's copy, made
    # while the text was parsed, is gone too)
    (tmp_path / "given").mkdir()
    with pytest.raises(GoalError, match=needle):
        G.import_goal(p, tmp_path / "given")
    assert list((tmp_path / "given").iterdir()) == []


# ------------------------------------------------------------------------------------------------
# OTF2


def test_otf2_round_trip_real_trace(real_trace, tmp_path):
    anchor = export_otf2(real_trace, tmp_path / "otf2")
    assert anchor.name == "traces.otf2"
    import_otf2(tmp_path / "otf2", tmp_path / "back")
    assert check_trace(tmp_path / "back") == []
    assert _frame(real_trace) == _frame(tmp_path / "back")
    assert tf.read_manifest(tmp_path / "back")["origin"]["format"] == "otf2"
    a = replay.run(replay.prepare(real_trace), "loggps")
    b = replay.run(replay.prepare(tmp_path / "back"), "loggps")
    assert a.makespan_ns == b.makespan_ns


def test_otf2_archive_passes_otf2_print(real_trace, tmp_path):
    if shutil.which("otf2-print") is None:
        pytest.skip("otf2-print (Debian otf2-tools) is not installed")
    anchor = export_otf2(real_trace, tmp_path / "otf2")
    p = subprocess.run(["otf2-print", str(anchor)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert "invalid" not in (p.stdout + p.stderr).lower()
    assert "MPI_SEND" in p.stdout and "MPI_IRECV" in p.stdout
    assert "MPI_COLLECTIVE_END" in p.stdout
    d = subprocess.run(["otf2-print", "-G", str(anchor)], capture_output=True, text=True,
                       timeout=60)
    assert d.returncode == 0, d.stderr
    assert "COMM_LOCATIONS" in d.stdout and "COMM_GROUP" in d.stdout


def _tiny_archive(path: Path, with_groups: bool, with_recv: bool) -> Path:
    import otf2
    with otf2.writer.open(str(path), timer_resolution=10**9) as w:
        d = w.definitions
        node = d.system_tree_node("node")
        locs = [d.location("Master thread", group=d.location_group(f"rank {r}",
                                                                   system_tree_parent=node))
                for r in range(2)]
        comm = None
        if with_groups:
            d.group("COMM_LOCATIONS", group_type=otf2.GroupType.COMM_LOCATIONS,
                    paradigm=otf2.Paradigm.MPI, members=locs)
            g = d.group("world", group_type=otf2.GroupType.COMM_GROUP,
                        paradigm=otf2.Paradigm.MPI, members=[0, 1])
            comm = d.comm("MPI_COMM_WORLD", group=g)
        send = d.region("MPI_Send", paradigm=otf2.Paradigm.MPI)
        recv = d.region("MPI_Recv", paradigm=otf2.Paradigm.MPI)
        w0, w1 = w.event_writer_from_location(locs[0]), w.event_writer_from_location(locs[1])
        w0.enter(100, send)
        if comm is not None:
            w0.mpi_send(100, 1, comm, 4, 64)
        w0.leave(200, send)
        w1.enter(100, recv)
        if comm is not None and with_recv:
            w1.mpi_recv(300, 0, comm, 4, 64)
        w1.leave(300, recv)
    return path / "traces.otf2"


def test_otf2_round_trip_keeps_a_timeline_no_run_measured(tmp_path):
    """A replayed timeline exported to OTF2 says so in the archive (``HINDSIGHT::TIMELINE``)
    and comes back from the import as a replayed one, whose noise is not analysed; a measured
    one comes back measured."""
    from click.testing import CliRunner

    import hindsight.cli

    run = lambda *a: CliRunner().invoke(hindsight.cli.main, [str(x) for x in a])  # noqa: E731
    trace = _synthetic(tmp_path / "t")
    for args, timeline in ((["--model", "loggps"], "replayed under loggps"), ([], None)):
        arch, back = tmp_path / f"a{len(args)}", tmp_path / f"b{len(args)}"
        assert run("export", trace, "--format", "otf2", *args, "--out", arch).exit_code == 0
        r = run("import", "otf2", arch, "--out", back)
        assert r.exit_code == 0, r.output
        assert tf.read_manifest(back)["origin"].get("timeline") == timeline
        assert tf.simulated_timeline(tf.read_manifest(back)) == (
            timeline and f"{timeline} (imported from OTF2)")
        line = [x for x in run("replay", back).output.splitlines() if x.startswith("noise")][0]
        assert ("not analysed" in line) == (timeline is not None), line
    # exported and imported once more, it still says it once
    r = run("export", tmp_path / "b2", "--format", "otf2", "--out", tmp_path / "a9")
    assert r.exit_code == 0, r.output
    assert run("import", "otf2", tmp_path / "a9", "--out", tmp_path / "b9").exit_code == 0
    assert tf.simulated_timeline(tf.read_manifest(tmp_path / "b9")) == \
        "replayed under loggps (imported from OTF2)"


def test_otf2_import_of_foreign_archive(tmp_path):
    anchor = _tiny_archive(tmp_path / "a", with_groups=True, with_recv=True)
    import_otf2(anchor, tmp_path / "t")
    rows = _frame(tmp_path / "t")
    assert rows["op"] == ["Send", "Recv"] and rows["peer"] == [1, 0]
    assert rows["t_start"] == [0, 0] and rows["t_end"] == [100, 200]   # relative to first event
    assert check_trace(tmp_path / "t") == []


def test_otf2_malformed_inputs(tmp_path):
    txt = tmp_path / "x.otf2"
    txt.write_text("num_ranks 2\n")
    with pytest.raises(OtfError, match="wrong magic"):
        import_otf2(txt, tmp_path / "o1")
    (tmp_path / "empty").mkdir()
    with pytest.raises(OtfError, match="no \\*.otf2 anchor"):
        import_otf2(tmp_path / "empty", tmp_path / "o2")
    garbage = tmp_path / "g.otf2"
    garbage.write_bytes(b"\x01\x02\x03" * 100)
    with pytest.raises(OtfError, match="not a readable OTF2 archive|wrong magic"):
        import_otf2(garbage, tmp_path / "o3")
    nogroups = _tiny_archive(tmp_path / "b", with_groups=False, with_recv=False)
    with pytest.raises(OtfError, match="missing definitions"):
        import_otf2(nogroups, tmp_path / "o4")
    unmatched = _tiny_archive(tmp_path / "c", with_groups=True, with_recv=False)
    with pytest.raises(OtfError, match="messages do not match"):
        import_otf2(unmatched, tmp_path / "o5")
    for k in range(1, 6):
        assert not (tmp_path / f"o{k}").exists()


def test_otf2_cli_import_matches_the_messages_once(tmp_path, monkeypatch):
    """`hindsight import otf2` matches the messages once, in the check of the written trace,
    and words an unmatched archive as the library import does, leaving nothing at --out."""
    from click.testing import CliRunner

    import hindsight.check
    import hindsight.cli
    from replay.matching import match_messages

    calls = []

    def counted(*a, **kw):
        calls.append(1)
        return match_messages(*a, **kw)

    monkeypatch.setattr(hindsight.check, "match_messages", counted)
    monkeypatch.setattr("hindsight.interop.otf2_import.match_messages", counted)
    good = _tiny_archive(tmp_path / "a", with_groups=True, with_recv=True)
    r = CliRunner().invoke(hindsight.cli.main, ["import", "otf2", str(good), "--out",
                                                str(tmp_path / "t")])
    assert r.exit_code == 0, r.output
    assert len(calls) == 1
    calls.clear()
    bad = _tiny_archive(tmp_path / "c", with_groups=True, with_recv=False)
    r = CliRunner().invoke(hindsight.cli.main, ["import", "otf2", str(bad), "--out",
                                                str(tmp_path / "u")])
    assert r.exit_code == 1
    assert r.output.startswith(f"Error: {bad}: messages do not match: rank 0 seq 0: Send to 1")
    assert not (tmp_path / "u").exists() and len(calls) == 1
    assert check_trace(tmp_path / "t") == []


# ------------------------------------------------------------------------------------------------
# Perfetto


def _check_perfetto(doc: dict, nranks: int, nmsg: int, timelines: int = 1) -> None:
    evs = doc["traceEvents"]
    procs = [e for e in evs if e["ph"] == "M" and e["name"] == "process_name"]
    assert len(procs) == nranks * timelines
    threads = [e for e in evs if e["ph"] == "M" and e["name"] == "thread_name"]
    assert {e["args"]["name"] for e in threads} == {"MPI", "regions"}
    xs = [e for e in evs if e["ph"] == "X"]
    assert xs and all(e["dur"] >= 0 and isinstance(e["ts"], (int, float)) for e in xs)
    assert {e["pid"] for e in xs} == {e["pid"] for e in procs}
    starts = {e["id"]: e for e in evs if e["ph"] == "s"}
    ends = {e["id"]: e for e in evs if e["ph"] == "f"}
    assert len(starts) == len(ends) == nmsg * timelines
    assert starts.keys() == ends.keys()
    for i, s in starts.items():
        f = ends[i]
        assert (s["cat"], s["name"]) == (f["cat"], f["name"])
        assert f["bp"] == "e"
        # each end lies inside an MPI slice of its thread (what "e" binds to)
        inside = [x for x in xs if x["pid"] == f["pid"] and x["tid"] == 0 and
                  x["ts"] <= f["ts"] <= x["ts"] + x["dur"]]
        assert inside
        # rule flow forward: Perfetto drops an arrow whose end comes before its start; only a
        # receiving call that ended before the send began (clocks apart) keeps its start
        if any(x["ts"] + x["dur"] >= s["ts"] for x in inside):
            assert f["ts"] >= s["ts"], (s, f)


def test_perfetto_structure_measured_and_replayed(real_trace, tmp_path):
    nmsg = len(replay.prepare(real_trace).msgs["send_row"])
    doc = to_perfetto([(None, tf.read_trace(real_trace).table)])
    _check_perfetto(doc, 2, nmsg)
    out = tmp_path / "both.json"
    p = hindsight("export", real_trace, "--format", "perfetto", "--model", "loggps",
                  "--set", "L=10us", "--with-measured", "--out", out)
    assert p.returncode == 0, p.stderr
    _check_perfetto(json.loads(out.read_text()), 2, nmsg, timelines=2)


# ------------------------------------------------------------------------------------------------
# pandas / pipit


def test_pipit_frame(real_trace):
    df = to_pipit(real_trace)
    assert list(df.columns) == ["Timestamp (ns)", "Event Type", "Name", "Thread", "Process",
                                "Attributes"]
    assert set(df["Event Type"].unique()) == {"Enter", "Leave", "Instant"}
    assert df["Timestamp (ns)"].is_monotonic_increasing
    nmsg = len(replay.prepare(real_trace).msgs["send_row"])
    sends = df[df["Name"].isin(["MpiSend", "MpiIsend"])]
    recvs = df[df["Name"].isin(["MpiRecv", "MpiIrecv"])]
    assert len(sends) == len(recvs) == nmsg
    assert all({"receiver", "msg_tag", "msg_length"} <= set(a) for a in sends["Attributes"])
    assert all({"sender", "msg_tag", "msg_length"} <= set(a) for a in recvs["Attributes"])
    for _, g in df.groupby("Process"):   # Enter/Leave nest properly per process
        stack = []
        for typ, name in zip(g["Event Type"], g["Name"]):
            if typ == "Enter":
                stack.append(name)
            elif typ == "Leave":
                assert stack.pop() == name
        assert not stack
    tidy = load(real_trace)
    assert {"rank", "seq", "op", "t_start", "duration_ns"} <= set(tidy.columns)
    assert replay.load is load


# ------------------------------------------------------------------------------------------------
# command line


def test_cli_errors_are_one_line(tmp_path):
    bad = tmp_path / "bad.goal"
    bad.write_text("num_ranks 1\nrank 0 {\na: calc x\n}\n")
    for args in (("import", "goal", bad, "--out", tmp_path / "o"),
                 ("import", "otf2", bad, "--out", tmp_path / "o"),
                 ("export", tmp_path / "missing", "--format", "perfetto")):
        p = hindsight(*args)
        assert p.returncode != 0
        assert "Traceback" not in p.stderr
        assert p.stderr.strip().startswith("Error:") and len(p.stderr.strip().splitlines()) == 1
        assert str(args[2] if args[0] == "import" else args[1]) in p.stderr


def test_cli_import_goal_then_replay(tmp_path):
    src = tmp_path / "hand.goal"
    src.write_text(HAND)
    p = hindsight("import", "goal", src, "--out", tmp_path / "t")
    assert p.returncode == 0 and "trace check: ok" in p.stdout, p.stderr
    p = hindsight("replay", tmp_path / "t", "--model", "loggopsim", "--json",
                  *[a for k, v in HAND_PARAMS.items() for a in ("--set", f"{k}={v}")])
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["breakdown"]["end_s"] == [2500e-9, 13638e-9]
    # the import simulated with LogGOPSim's defaults: a replay with other values says which
    p = hindsight("replay", tmp_path / "t", "--model", "loggopsim")
    assert p.returncode == 0 and "note: the trace's timeline was simulated at its import with " \
        "G=6ns L=2500ns" in p.stderr and "; this replay's are G=0.1ns L=1000ns" in p.stderr
    assert "--set them to replay it as imported" in p.stderr
    from hindsight.interop.goal import LOGGOPSIM_DEFAULTS
    p = hindsight("replay", tmp_path / "t", "--model", "loggopsim",
                  *[a for k, v in LOGGOPSIM_DEFAULTS.items() for a in ("--set", f"{k}={v}")])
    assert p.returncode == 0 and "simulated at its import" not in p.stderr
    assert "(+0.00 % vs the trace's timeline)" in p.stdout


def test_cli_import_caches_the_prepared_trace_the_first_replay_reads(tmp_path, monkeypatch):
    """The import's check of the new trace also prepares it for replay, from the check's own
    read and message matching, and caches that where ``prepare`` looks: the first replay reads
    no row and matches no message, and the cached form is the one a fresh preparation makes."""
    import dataclasses
    import sys

    import importlib

    from replay import cache

    P = importlib.import_module("replay.prepare")   # replay.prepare is also the function

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from goal_schedules import make_schedule

    text, _ = make_schedule("pairwise", 3000, P=8)
    src = tmp_path / "p.goal"
    src.write_text(text)
    p = hindsight("import", "goal", src, "--out", tmp_path / "t")
    assert p.returncode == 0 and "trace check: ok" in p.stdout, p.stderr
    assert cache.cache_path(tmp_path / "t").is_dir()
    fresh = replay.prepare(tmp_path / "t", use_cache=False)
    with monkeypatch.context() as m:
        m.setattr(P, "match_messages", lambda *a, **k: pytest.fail("matched again"))
        m.setattr(tf, "read_columns", lambda *a, **k: pytest.fail("rows read again"))
        cached = replay.prepare(tmp_path / "t")
    assert cached.nrows == fresh.nrows > 0 and cached.problems == fresh.problems
    for table in ("rows", "msgs", "coll", "rma"):
        a, b = getattr(cached, table), getattr(fresh, table)
        for f in dataclasses.fields(a):
            assert np.array_equal(getattr(a, f.name), getattr(b, f.name)), (table, f.name)
    assert np.array_equal(cached.trail, fresh.trail) and cached.t0 == fresh.t0
    a, b = replay.run(cached, "loggps"), replay.run(fresh, "loggps")
    assert a.makespan_ns == b.makespan_ns and np.array_equal(a.rank_end_ns, b.rank_end_ns)


def test_cli_formats_come_from_the_registries(tmp_path):
    from hindsight.interop.cli import export_cmd, import_cmd

    fmt = next(p for p in export_cmd.params if p.name == "fmt")
    assert list(fmt.type.choices) == list(EXPORTERS) == ["otf2", "perfetto", "goal", "pipit"]
    assert list(next(p for p in import_cmd.params if p.name == "fmt").type.choices) == \
        list(IMPORTERS) == ["otf2", "goal"]
    assert [e.name for e in EXPORTERS.values() if not e.timeline] == ["goal"]
    tr = _synthetic(tmp_path / "syn")
    p = hindsight("export", tr, "--format", "goal", "--model", "loggps")
    assert p.returncode == 2 and "writes the schedule, not a timeline" in p.stderr
    p = hindsight("export", tr, "--format", "otf2", "--with-measured")
    assert p.returncode == 2 and "--with-measured needs --format perfetto and --model" in p.stderr
    p = hindsight("import", "otf2", tmp_path / "x.otf2", "--out", tmp_path / "o", "--set", "L=1us")
    assert p.returncode == 2 and "--set applies to GOAL imports only" in p.stderr
    for name, exporter in EXPORTERS.items():
        p = hindsight("export", tr, "--format", name)
        assert p.returncode == 0, p.stderr
        out = Path(str(tr) + exporter.suffix)
        assert out.exists() and p.stdout.startswith(f"wrote {out}"), p.stdout


# ------------------------------------------------------------------------------------------------
# OTF2 round trips of the corpus: every op a trace holds (Probe, MPI_PROC_NULL peers, requests,
# derived communicators) comes back as it was

CORPUS = Path(__file__).resolve().parent / "corpus"
ROUND_TRIP = ["p2p-all-n3", "master-worker-n4", "stencil-n4", "requests-n2", "sort-hypercube-n4",
              "hddi-pipeline-n4", "collectives-n3"]


def _assert_same_rows(src: Path, back: Path) -> None:
    """Every row of ``src`` came back in ``back`` with all its columns, and the manifest's
    communicators and makespan; nothing was skipped."""
    a, b = _frame(src), _frame(back)
    assert b["op"] == a["op"]             # no row dropped (Probe rows were)
    for col in ("rank", "seq", "peer", "tag", "comm", "nbytes", "t_start", "t_end", "cpu_ns",
                "request", "root", "region"):
        assert b[col] == a[col], col
    ma, mb = tf.read_manifest(src), tf.read_manifest(back)
    assert mb["communicators"] == ma["communicators"]
    assert mb["makespan_ns"] == ma["makespan_ns"]
    assert mb["import"]["skipped"] == {}


def _assert_same_replays(src: Path, back: Path) -> None:
    """``back`` replays as ``src`` under every model configuration of the corpus digest."""
    from tests.corpus.digest import CONFIGS

    pa_, pb = replay.prepare(src, use_cache=False), replay.prepare(back, use_cache=False)
    for model, params, opts in CONFIGS.values():
        ra, rb = replay.run(pa_, model, params, **opts), replay.run(pb, model, params, **opts)
        assert rb.makespan_ns == ra.makespan_ns, model
        assert rb.rel_error_pct == ra.rel_error_pct, model


@pytest.mark.parametrize("name", ROUND_TRIP)
def test_otf2_round_trip_of_corpus_trace_is_exact(name, tmp_path):
    src = CORPUS / name
    export_otf2(src, tmp_path / "otf2")
    import_otf2(tmp_path / "otf2", tmp_path / "back")
    assert check_trace(tmp_path / "back") == []
    _assert_same_rows(src, tmp_path / "back")
    _assert_same_replays(src, tmp_path / "back")


def test_freed_requests_cross_every_format(tmp_path):
    """Request_free rows (format 1.2): a freed Isend and a freed Irecv that named its source and
    tag. The OTF2 round trip gives back every row (the free travels in its call's
    hindsight::rows, as OTF2 has no record for it) and replays the same; Perfetto, pipit and
    GOAL export every matched message, the freed ones included."""
    progs = [[("isend", 1, 4096, 3), ("free", 0), ("compute", 2000), ("send", 1, 64, 7),
              ("send", 1, 32, 7)],
             [("compute", 1000), ("irecv", 0, 7), ("free", 0), ("recv", 0, 3),
              ("recv", 0, 7)]]
    src = simulate_to_dir(tmp_path / "src", progs)
    assert check_trace(src) == []
    anchor = export_otf2(src, tmp_path / "otf2")
    recs = _records(anchor, 0)
    k = recs.index(("Enter", "MPI_Request_free"))
    assert recs[k + 1] == ("Leave", "MPI_Request_free")
    import_otf2(tmp_path / "otf2", tmp_path / "back")
    assert check_trace(tmp_path / "back") == []
    _assert_same_rows(src, tmp_path / "back")
    pa_, pb = (replay.prepare(x, use_cache=False) for x in (src, tmp_path / "back"))
    for model in ("measured", "loggps", "loggopsim"):
        assert replay.run(pb, model).makespan_ns == replay.run(pa_, model).makespan_ns
    _check_perfetto(to_perfetto([(None, tf.read_trace(src).table)]), 2, 3)
    df = to_pipit(src)
    assert len(df[df["Name"].isin(["MpiSend", "MpiIsend"])]) == 3
    assert len(df[df["Name"].isin(["MpiRecv", "MpiIrecv"])]) == 3
    assert (df["Name"] == "MPI_Request_free").sum() == 4       # Enter and Leave on each rank
    sched = G.export_goal(src, tmp_path / "s.goal")
    assert sum(k == LG.SEND for k in np.asarray(sched.kind).tolist()) == 3


# ------------------------------------------------------------------------------------------------
# OTF2 non-blocking collectives: NonBlockingCollectiveRequest in the MPI_I<collective> call,
# NonBlockingCollectiveComplete in the MPI_Wait*/MPI_Test* that completes it (as Score-P writes)

NBC_PROGRAM = Path(__file__).resolve().parent / "programs" / "nonblocking_collectives.py"


@pytest.fixture(scope="module")
def nbc_trace(tmp_path_factory) -> Path:
    """A real 3-rank trace with all 16 non-blocking collectives, completed by Wait, Waitall,
    Test and Waitany."""
    if shutil.which("mpiexec") is None:
        pytest.skip("mpiexec is not available")
    out = tmp_path_factory.mktemp("nbc") / "trace"
    p = hindsight("collect", "-n", "3", "--program", NBC_PROGRAM, "--out", out, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    return out


def _records(anchor: Path, rank: int) -> list[tuple]:
    """(record, region or request) of one rank's events, in order."""
    import otf2
    out = []
    with otf2.reader.open(str(anchor)) as t:
        for loc, ev in t.events:
            if loc.group.name == f"rank {rank}":
                what = ev.region.name if hasattr(ev, "region") else getattr(ev, "request_id", None)
                out.append((type(ev).__name__, what))
    return out


def test_otf2_round_trip_of_nonblocking_collectives_is_exact(nbc_trace, tmp_path):
    ops = set(_frame(nbc_trace)["op"])
    assert tf.NONBLOCKING_COLLECTIVE_OPS - tf.NEIGHBOR_OPS <= ops     # the trace has all 16
    anchor = export_otf2(nbc_trace, tmp_path / "otf2")
    recs = _records(anchor, 0)
    # the Request inside the post's region, the Complete inside the completing call's
    k = recs.index(("Enter", "MPI_Iallreduce"))
    assert recs[k + 1:k + 3] == [("NonBlockingCollectiveRequest", 0), ("Leave", "MPI_Iallreduce")]
    k = recs.index(("Enter", "MPI_Wait"))
    assert recs[k + 1:k + 3] == [("NonBlockingCollectiveComplete", 0), ("Leave", "MPI_Wait")]
    assert sum(r == "NonBlockingCollectiveRequest" for r, _ in recs) == 16
    assert sum(r == "NonBlockingCollectiveComplete" for r, _ in recs) == 16
    import_otf2(tmp_path / "otf2", tmp_path / "back")
    assert check_trace(tmp_path / "back") == []
    _assert_same_rows(nbc_trace, tmp_path / "back")
    _assert_same_replays(nbc_trace, tmp_path / "back")


def test_otf2_round_trip_of_a_collective_never_completed_is_exact(tmp_path):
    # rank 1 ends before completing its Ibcast (a partial trace): no Complete can give the
    # post's comm, root and size, so the post travels whole in hindsight::rows
    progs = [[("icoll", "Iallreduce", 24), ("compute", 1000), ("wait", [0]),
              ("icoll", "Ibcast", 16, 1), ("wait", [1])],
             [("icoll", "Iallreduce", 24), ("compute", 1000), ("wait", [0]),
              ("icoll", "Ibcast", 16, 1)]]
    src = simulate_to_dir(tmp_path / "src", progs)
    anchor = export_otf2(src, tmp_path / "otf2")
    assert [r for r, _ in _records(anchor, 1)].count("NonBlockingCollectiveRequest") == 1
    import_otf2(tmp_path / "otf2", tmp_path / "back")
    _assert_same_rows(src, tmp_path / "back")
    problems = [p.split(": ", 1)[1] for p in check_trace(tmp_path / "back")]
    assert problems == [p.split(": ", 1)[1] for p in check_trace(src)]
    assert problems == ["seq 2: Ibcast request 1 is never completed"]


def _scorep_nbc_archive(path: Path, barrier_done: tuple[int, ...] = (),
                        op_of_reduce: str = "REDUCE") -> Path:
    """2 ranks as Score-P records non-blocking collectives: a NonBlockingCollectiveRequest at
    the Enter of MPI_Iallreduce/MPI_Ireduce/MPI_Comm_idup/MPI_Ibarrier, a
    NonBlockingCollectiveComplete (op, comm, comm-local root, bytes sent/received, request)
    before the Leave of the MPI_Test/MPI_Waitall that completes it; Score-P's request ids (one
    counter per process); an MPI_Comm_idup's Complete is a CREATE_HANDLE on the parent; the
    Ibarrier is completed on the ranks ``barrier_done`` only."""
    import otf2
    C = otf2.CollectiveOp
    none = UNDEFINED_ROOT
    with otf2.writer.open(str(path), timer_resolution=10**9) as w:
        d = w.definitions
        node = d.system_tree_node("node")
        locs = [d.location("Master thread", group=d.location_group(f"rank {r}",
                                                                   system_tree_parent=node))
                for r in range(2)]
        d.group("COMM_LOCATIONS", group_type=otf2.GroupType.COMM_LOCATIONS,
                paradigm=otf2.Paradigm.MPI, members=locs)
        g = d.group("world", group_type=otf2.GroupType.COMM_GROUP, paradigm=otf2.Paradigm.MPI,
                    members=[0, 1])
        comm = d.comm("MPI_COMM_WORLD", group=g)
        reg = {n: d.region(f"MPI_{n}", paradigm=otf2.Paradigm.MPI)
               for n in ("Iallreduce", "Ireduce", "Comm_idup", "Ibarrier", "Test", "Waitall")}
        for r, loc in enumerate(locs):
            ev = w.event_writer_from_location(loc)
            t = 1000 * (r + 1)

            def call(name, *records, dt=100):
                nonlocal t
                ev.enter(t, reg[name])
                for rec, *args in records:
                    getattr(ev, rec)(t, *args)
                ev.leave(t + dt, reg[name])
                t += dt + 50

            call("Iallreduce", ("non_blocking_collective_request", 40 + r))
            call("Ireduce", ("non_blocking_collective_request", 41 + r))
            call("Comm_idup", ("non_blocking_collective_request", 42 + r))
            call("Ibarrier", ("non_blocking_collective_request", 43 + r))
            # sizes as Score-P computes them: 32-byte buffers, an Allreduce sends and receives
            # 2 x 32 on each rank, a Reduce's root (1) receives 2 x 32
            call("Test", ("non_blocking_collective_complete", C.ALLREDUCE, comm, none, 64, 64,
                          40 + r), dt=300)
            call("Waitall",
                 ("non_blocking_collective_complete", getattr(C, op_of_reduce), comm, 1, 32,
                  64 if r == 1 else 0, 41 + r),
                 ("non_blocking_collective_complete", C.CREATE_HANDLE, comm, none, 0, 0, 42 + r),
                 *([("non_blocking_collective_complete", C.BARRIER, comm, none, 0, 0, 43 + r)]
                   if r in barrier_done else []), dt=500)
    return path / "traces.otf2"


def test_otf2_import_of_scorep_nonblocking_collectives(tmp_path):
    anchor = _scorep_nbc_archive(tmp_path / "a")
    p = hindsight("import", "otf2", anchor, "--out", tmp_path / "t")
    assert p.returncode == 0, p.stdout + p.stderr
    rows = _frame(tmp_path / "t")
    assert rows["op"] == ["Iallreduce", "Ireduce", "Test", "Waitall"] * 2
    # post rows: comm, root (as a world rank) and bytes from their Complete; completion rows
    # name the request and the collective's communicator
    assert rows["comm"] == [0] * 8
    assert rows["nbytes"] == [32, 32, -1, -1] * 2
    assert rows["root"] == [-1, 1, -1, -1] * 2
    assert rows["request"] == [0, 1, 0, 1] * 2       # numbered per rank in post order
    assert rows["t_start"][:4] == [0, 150, 600, 950] and rows["t_end"][:4] == [100, 250, 900, 1450]
    # the Comm_idup (no op in a trace) and the Ibarrier no record completes are counted
    assert tf.read_manifest(tmp_path / "t")["import"]["skipped"] == {
        "MPI call without a trace op": 2, "non-blocking collective event": 4,
        "non-blocking collective without completion": 2}
    assert "2 non-blocking collectives without completion" in p.stdout
    assert check_trace(tmp_path / "t") == []
    assert replay.run(replay.prepare(tmp_path / "t"), "loggps").makespan_ns > 0
    # with the Ibarrier completed, it is a row too
    import_otf2(_scorep_nbc_archive(tmp_path / "b", barrier_done=(0, 1)), tmp_path / "u")
    assert _frame(tmp_path / "u")["op"][:4] == ["Iallreduce", "Ireduce", "Ibarrier", "Test"]
    assert tf.read_manifest(tmp_path / "u")["import"]["skipped"] == {
        "MPI call without a trace op": 2, "non-blocking collective event": 4}


# Collectives of 4 ranks: (op, comm-local root or None, MPI_IN_PLACE at the root (rooted) or
# everywhere, bytes per rank: one block for every rank, or per rank for the v-variants (for
# Alltoallv rank i sends COUNTS[i][j] bytes to j))
COUNTS = [[8, 16, 24, 32], [40, 8, 16, 24], [8, 8, 8, 8], [16, 32, 48, 64]]
SCOREP_CALLS = [
    ("Barrier", None, False, 0), ("Bcast", 1, False, 40), ("Reduce", 2, False, 24),
    ("Reduce", 0, True, 16), ("Allreduce", None, False, 8), ("Allreduce", None, True, 10),
    ("Gather", 3, False, 16), ("Gather", 1, True, 8), ("Scatter", 0, False, 24),
    ("Scatter", 2, True, 8), ("Allgather", None, False, 8), ("Alltoall", None, False, 4),
    ("Reduce_scatter_block", None, False, 8), ("Reduce_scatter_block", None, True, 6),
    ("Scan", None, False, 8), ("Scan", None, True, 16), ("Exscan", None, False, 8),
    ("Gatherv", 0, False, [8, 16, 24, 32]), ("Scatterv", 1, False, [16, 8, 24, 40]),
    ("Allgatherv", None, False, [8, 16, 24, 32]), ("Alltoallv", None, False, COUNTS),
    ("Reduce_scatter", None, False, [8, 16, 24, 32])]


def _scorep_sizes(op: str, n: int, me: int, root, in_place: bool, b) -> tuple[int, int]:
    """(sizeSent, sizeReceived) of one process as Score-P's MPI adapter computes them
    (scorep_mpi_coll.inc.c: coll_bytes_all_to_one and the others), b the bytes per rank."""
    at_root = me == root
    if op == "Barrier":
        return 0, 0
    if op in ("Gather", "Reduce"):
        if not at_root:
            return b, 0
        return (0, (n - 1) * b) if in_place else (b, n * b)
    if op == "Scatter":        # all_to_one with send and receive exchanged
        if not at_root:
            return 0, b
        return ((n - 1) * b, 0) if in_place else (n * b, b)
    if op == "Bcast":
        return (n * b, b) if at_root else (0, b)
    if op in ("Allreduce", "Allgather", "Alltoall", "Reduce_scatter_block"):
        k = n - 1 if in_place else n
        return k * b, k * b
    if op == "Scan":
        return ((n - me - 1) * b, me * b) if in_place else ((n - me) * b, (me + 1) * b)
    if op == "Exscan":
        return (n - me - 1) * b, me * b
    if op == "Gatherv":
        return (b[me], sum(b)) if at_root else (b[me], 0)
    if op == "Scatterv":
        return (sum(b), b[me]) if at_root else (0, b[me])
    if op == "Allgatherv":
        return n * b[me], sum(b)
    if op == "Alltoallv":
        return sum(b[me]), sum(row[me] for row in b)
    assert op == "Reduce_scatter"
    return sum(b), n * b[me]


def _hindsight_nbytes(op: str, me: int, root, b) -> int:
    """What hindsight records for the call (docs/trace-format.md)."""
    if op in ("Gatherv", "Allgatherv"):
        return b[me]
    if op == "Scatterv":
        return sum(b) if me == root else b[me]
    if op == "Alltoallv":
        return sum(b[me])
    if op == "Reduce_scatter":
        return sum(b)
    return b


def _scorep_collectives_archive(path: Path) -> Path:
    """4 ranks calling SCOREP_CALLS blocking (MpiCollectiveBegin/End in MPI_<op>), then
    non-blocking (NonBlockingCollectiveRequest in MPI_I<op>, its Complete in an MPI_Wait), with
    Score-P's sizes per rank."""
    import otf2
    n = 4
    with otf2.writer.open(str(path), timer_resolution=10**9) as w:
        d = w.definitions
        node = d.system_tree_node("node")
        locs = [d.location("Master thread", group=d.location_group(f"rank {r}",
                                                                   system_tree_parent=node))
                for r in range(n)]
        d.group("COMM_LOCATIONS", group_type=otf2.GroupType.COMM_LOCATIONS,
                paradigm=otf2.Paradigm.MPI, members=locs)
        g = d.group("world", group_type=otf2.GroupType.COMM_GROUP, paradigm=otf2.Paradigm.MPI,
                    members=list(range(n)))
        comm = d.comm("MPI_COMM_WORLD", group=g)
        post_of = {blocking: post for post, blocking in tf.BLOCKING_OF.items()}
        names = {op for op, *_ in SCOREP_CALLS}
        reg = {x: d.region(f"MPI_{x}", paradigm=otf2.Paradigm.MPI)
               for x in sorted(names | {post_of[x] for x in names} | {"Wait"})}
        for me, loc in enumerate(locs):
            ev = w.event_writer_from_location(loc)
            t = 1000
            for blocking in (True, False):
                for k, (op, root, in_place, b) in enumerate(SCOREP_CALLS):
                    sent, received = _scorep_sizes(op, n, me, root, in_place and (
                        root is None or me == root), b)
                    cop = getattr(otf2.CollectiveOp, COLLECTIVE_OPS_OTF2[op])
                    r = UNDEFINED_ROOT if root is None else root
                    if blocking:
                        ev.enter(t, reg[op]), ev.mpi_collective_begin(t)
                        ev.mpi_collective_end(t + 100, cop, comm, r, sent, received)
                        ev.leave(t + 100, reg[op])
                    else:
                        ev.enter(t, reg[post_of[op]])
                        ev.non_blocking_collective_request(t, 100 + k)
                        ev.leave(t + 50, reg[post_of[op]])
                        ev.enter(t + 60, reg["Wait"])
                        ev.non_blocking_collective_complete(t + 100, cop, comm, r, sent,
                                                            received, 100 + k)
                        ev.leave(t + 100, reg["Wait"])
                    t += 200
    return path / "traces.otf2"


def test_otf2_import_of_scorep_collective_sizes(tmp_path):
    """Score-P writes what each process sends and receives (a non-root Gather: the block and 0;
    its root: the block and 4 blocks), with MPI_IN_PLACE at the root or everywhere taking the
    own block out; the import gives back hindsight's nbytes on every rank, root or not, blocking
    or non-blocking."""
    import_otf2(_scorep_collectives_archive(tmp_path / "a"), tmp_path / "t")
    df = tf.read_trace(tmp_path / "t").table.to_pandas()
    post = {blocking: p for p, blocking in tf.BLOCKING_OF.items()}
    for me in range(4):
        rows = df[df["rank"] == me]
        calls = rows[rows["op"] != "Wait"]
        want = [(op if blocking else post[op], _hindsight_nbytes(op, me, root, b),
                 -1 if root is None else root)
                for blocking in (True, False) for op, root, _, b in SCOREP_CALLS]
        assert list(zip(calls["op"], calls["nbytes"], calls["root"])) == want, me
    assert check_trace(tmp_path / "t") == []
    assert tf.read_manifest(tmp_path / "t")["import"]["skipped"] == {}


def test_scorep_sizes_that_two_readings_fit_or_none_fits():
    """An in-place Allreduce whose sizes an ordinary one also writes is read as ordinary (12-byte
    blocks in place on 4 ranks: 36 and 36, also 9-byte blocks); an in-place one they do not fit
    is recognised; sizes that fit no reading give their total over the first's multiples."""
    from hindsight.interop.scorep_sizes import scorep_block

    assert scorep_block("Allreduce", 36, 36, 4, 0, False) == 9
    assert scorep_block("Allreduce", 30, 30, 4, 0, False) == 10
    assert scorep_block("Gather", 16, 16, 4, 1, True) == 6       # (16 + 16) // (1 + 4)
    assert scorep_block("Exscan", 0, 0, 1, 0, False) == 0


def test_otf2_import_of_a_collective_one_rank_never_completes_fails_trace_check(tmp_path):
    # rank 0 completes its Ibarrier, rank 1's archive ends before: skipped on rank 1, the
    # communicator's collective sequences differ, and trace check rejects the conversion
    anchor = _scorep_nbc_archive(tmp_path / "a", barrier_done=(0,))
    p = hindsight("import", "otf2", anchor, "--out", tmp_path / "t")
    assert p.returncode == 1 and p.stdout == ""
    assert p.stderr.startswith("Error: ") and len(p.stderr.splitlines()) == 1, p.stderr
    assert ("collective #2 on communicator 0: rank 1 has none (its collectives on it end "
            "before), rank 0 has Ibarrier") in p.stderr
    assert not (tmp_path / "t").exists()


def test_otf2_import_rejects_a_complete_of_another_collective(tmp_path):
    anchor = _scorep_nbc_archive(tmp_path / "a", op_of_reduce="BCAST")
    with pytest.raises(OtfError, match="completes request 41 of an MPI_Ireduce with a BCAST"):
        import_otf2(anchor, tmp_path / "t")
    assert not (tmp_path / "t").exists()


def test_cli_import_prints_the_traced_makespan_as_trace_info_does(tmp_path):
    """One makespan, one label: `import` of an exported trace and `trace info` of the trace
    print the same line, and an import that skipped nothing says nothing about skipping."""
    from hindsight.info import makespan_text

    src = CORPUS / "master-worker-n4"
    export_otf2(src, tmp_path / "otf2")
    p = hindsight("import", "otf2", tmp_path / "otf2", "--out", tmp_path / "back")
    assert p.returncode == 0, p.stderr
    line = makespan_text(tf.read_manifest(src)["makespan_ns"])
    assert line == "makespan (traced run) 196 ms"
    assert f"events, {line}; trace check: ok" in p.stdout
    assert "skipped" not in p.stdout
    for trace in (src, tmp_path / "back"):
        info = hindsight("trace", "info", trace)
        assert info.returncode == 0, info.stderr
        assert line in info.stdout.splitlines()


def _foreign_archive(path: Path) -> Path:
    """A 2-rank MPI archive with what a trace cannot hold: an MPI call without an op
    (MPI_Init), two RMA puts, and a non-MPI location (a GPU stream) with one kernel."""
    import otf2
    with otf2.writer.open(str(path), timer_resolution=10**9) as w:
        d = w.definitions
        node = d.system_tree_node("node")
        locs = [d.location("Master thread", group=d.location_group(f"rank {r}",
                                                                   system_tree_parent=node))
                for r in range(2)]
        gpu = d.location("CUDA stream", group=d.location_group("gpu", system_tree_parent=node))
        d.group("COMM_LOCATIONS", group_type=otf2.GroupType.COMM_LOCATIONS,
                paradigm=otf2.Paradigm.MPI, members=locs)
        g = d.group("world", group_type=otf2.GroupType.COMM_GROUP, paradigm=otf2.Paradigm.MPI,
                    members=[0, 1])
        comm = d.comm("MPI_COMM_WORLD", group=g)
        win = d.rma_win("win", comm)
        init, send, recv = (d.region(f"MPI_{n}", paradigm=otf2.Paradigm.MPI)
                            for n in ("Init", "Send", "Recv"))
        kernel = d.region("kernel")
        w0, w1, wg = (w.event_writer_from_location(loc) for loc in (*locs, gpu))
        w0.enter(10, init), w0.leave(50, init)
        w0.enter(100, send), w0.mpi_send(100, 1, comm, 4, 64), w0.leave(200, send)
        w0.rma_put(210, win, 1, 8, 0), w0.rma_put(220, win, 1, 8, 1)
        w1.enter(100, recv), w1.mpi_recv(300, 0, comm, 4, 64), w1.leave(300, recv)
        wg.enter(100, kernel), wg.leave(150, kernel)
    return path / "traces.otf2"


def test_otf2_import_counts_what_it_skipped(tmp_path):
    anchor = _foreign_archive(tmp_path / "a")
    p = hindsight("import", "otf2", anchor, "--out", tmp_path / "t")
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[-1] == ("skipped: 2 RMA events, 2 events on a non-MPI location, "
                                         "1 MPI call without a trace op, 1 non-MPI location")
    assert tf.read_manifest(tmp_path / "t")["import"]["skipped"] == {
        "RMA event": 2, "event on a non-MPI location": 2, "MPI call without a trace op": 1,
        "non-MPI location": 1}
    assert _frame(tmp_path / "t")["op"] == ["Send", "Recv"]


def test_goal_import_counts_what_the_rows_cannot_say(tmp_path):
    src = tmp_path / "h.goal"
    src.write_text(HAND.replace("c: calc 1000", "c: calc 1000 cpu 1"))
    p = hindsight("import", "goal", src, "--out", tmp_path / "t")
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[-1] == "skipped: 1 GOAL cpu/nic field"
    assert tf.read_manifest(tmp_path / "t")["import"]["skipped"] == {"GOAL cpu/nic field": 1}
    (tmp_path / "plain.goal").write_text(HAND)
    p = hindsight("import", "goal", tmp_path / "plain.goal", "--out", tmp_path / "u")
    assert p.returncode == 0 and "skipped" not in p.stdout, p.stdout + p.stderr
    assert tf.read_manifest(tmp_path / "u")["import"]["skipped"] == {}


def test_a_damaged_event_file_is_one_error_line(tmp_path):
    """Half an OTF2 event file: the OTF2 C library's own error lines are not printed, the
    import says one `Error:` line naming the archive, exit 1, and leaves no output."""
    corpus = Path(__file__).resolve().parent / "corpus" / "requests-n2"
    arch = tmp_path / "a"
    assert hindsight("export", corpus, "--format", "otf2", "--out", arch).returncode == 0
    evt = sorted(arch.rglob("*.evt"))[0]
    data = evt.read_bytes()
    evt.write_bytes(data[: len(data) // 2])
    res = hindsight("import", "otf2", arch, "--out", tmp_path / "imp")
    assert res.returncode == 1 and not (tmp_path / "imp").exists()
    assert res.stderr.count("\n") == 1 and res.stderr.startswith(f"Error: {arch}"), res.stderr
    assert "[OTF2]" not in res.stderr
