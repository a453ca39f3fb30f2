"""Rule ``shared_flag_meeting`` (replay.flags): the collectives MPICH runs on shared flags within
a node end at max(start + own(k), last awaited entry + after(k)), with per-role costs from the
profile's ``[shared_flag]`` table; hand-computed replays, the conditions under which the rule
applies, the profile table's checks, and a real calibration's probe on shared memory.

Costs of the hand-computed cases (us): Barrier root own 1, after 2, member own 3, after 4; Bcast
at 8 B and 1008 B: root own 1 / 2, member own 3 / 4, member after 5 / 6; Reduce root own 1,
after 2, member own 3 (one size); Allreduce root own 1, after 2, member own 3, after 4 at 8 B and
twice that at 1008 B. The traces have no point-to-point messages, so the network parameters do
not enter."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import replay
from hindsight.errors import DataError
from replay.flags import FlagCosts, flag_costs, flag_line
from replay.streamed import run_streamed
from conftest import run_mpi_script
from synthetic import simulate_to_dir

SETS = {"L": "2us", "o": "300ns", "G": "0.5ns", "g": "0", "S": "512B"}
US = 1e-6
TABLE = {
    "Barrier": {"bytes": (0,), "root_own_s": (1 * US,), "root_after_s": (2 * US,),
                "member_own_s": (3 * US,), "member_after_s": (4 * US,)},
    "Bcast": {"bytes": (8, 1008), "root_own_s": (1 * US, 2 * US), "member_own_s": (3 * US, 4 * US),
              "member_after_s": (5 * US, 6 * US)},
    "Reduce": {"bytes": (8,), "root_own_s": (1 * US,), "root_after_s": (2 * US,),
               "member_own_s": (3 * US,)},
    "Allreduce": {"bytes": (8, 1008), "root_own_s": (1 * US, 2 * US),
                  "root_after_s": (2 * US, 4 * US), "member_own_s": (3 * US, 6 * US),
                  "member_after_s": (4 * US, 8 * US)},
}
COSTS = FlagCosts(2, TABLE, "shm")
ONE_HOST = {"node0": [0, 1, 2]}


def _prep(tmp_path, progs, name, hosts=ONE_HOST, **kw):
    d = simulate_to_dir(tmp_path / name, progs, hosts=hosts, **kw)
    return replay.prepare(d, use_cache=False)


def _run(prep, flags=COSTS, **kw):
    return replay.run(prep, "loggps", SETS, flags=flags, record=True, **kw)


def test_bcast_member_waits_for_the_root_the_root_for_nobody(tmp_path):
    # root late: it enters at 10,000 and ends 11,000; the member, in since 0, ends at the
    # root's entry + after(8) = 15,000
    late_root = [[("compute", 10_000), ("coll", "Bcast", 8, 0)], [("coll", "Bcast", 8, 0)]]
    r = _run(_prep(tmp_path, late_root, "a"))
    assert list(r.rank_end_ns) == pytest.approx([11_000, 15_000])
    # the member waited for the root from 0 to 10,000 + 5,000 - 3,000 (its own part is not
    # waiting): the breakdown calls it wait
    assert list(r.rank_wait_ns) == pytest.approx([0, 12_000])
    # member late: the root does not wait (1,000); the member, entering at 10,000, ends at
    # max(10,000 + own 3,000, 0 + after 5,000) = 13,000
    late_member = [[("coll", "Bcast", 8, 0)], [("compute", 10_000), ("coll", "Bcast", 8, 0)]]
    r = _run(_prep(tmp_path, late_member, "b"))
    assert list(r.rank_end_ns) == pytest.approx([1_000, 13_000])
    assert r.info["shared_flag_meeting"]["calls"] == {"Bcast": 2}
    assert r.info["collective_algorithms_run"]["Bcast"] == {"release_gather": 1}
    assert list(r.rank_wait_ns) == pytest.approx([0, 0])


def test_reduce_root_waits_for_every_member(tmp_path):
    # ranks 1 and 2 enter at 4,000 and 10,000: they end at +3,000; the root, in since 0, ends at
    # the last member's entry + after 2,000 = 12,000
    progs = [[("coll", "Reduce", 8, 0)], [("compute", 4_000), ("coll", "Reduce", 8, 0)],
             [("compute", 10_000), ("coll", "Reduce", 8, 0)]]
    r = _run(_prep(tmp_path, progs, "r"))
    assert list(r.rank_end_ns) == pytest.approx([12_000, 7_000, 13_000])
    # three ranks, costs measured with two: said so
    info = r.info["shared_flag_meeting"]
    assert info["largest_communicator"] == 3 and info["probe_ranks"] == 2
    assert "measured with 2 ranks" in flag_line(r.info)


def test_barrier_and_allreduce_meet_with_interpolated_costs(tmp_path):
    # Barrier, member 10,000 late: root max(0 + 1,000, 10,000 + 2,000) = 12,000; member
    # max(10,000 + 3,000, 10,000 + 4,000) = 14,000
    progs = [[("coll", "Barrier", 0)], [("compute", 10_000), ("coll", "Barrier", 0)]]
    assert list(_run(_prep(tmp_path, progs, "b")).rank_end_ns) == pytest.approx([12_000, 14_000])
    # Allreduce of 508 B (half way): root own 1,500, after 3,000; member own 4,500, after
    # 6,000; the root 10,000 late (the last entry is its own): root max(11,500, 13,000),
    # member max(0 + 4,500, 10,000 + 6,000) = 16,000
    progs = [[("compute", 10_000), ("coll", "Allreduce", 508)], [("coll", "Allreduce", 508)]]
    r = _run(_prep(tmp_path, progs, "ar"))
    assert list(r.rank_end_ns) == pytest.approx([max(11_500, 13_000), 16_000])
    # beyond the probe's largest size the costs are not extrapolated: the instance keeps its
    # pattern (the model's messages), and the replay says so
    progs = [[("coll", "Allreduce", 2008)], [("compute", 20_000), ("coll", "Allreduce", 2008)]]
    r = _run(_prep(tmp_path, progs, "big"))
    info = r.info["shared_flag_meeting"]
    assert info["calls"] == {} and info["above_probe"] == {"Allreduce": [1, 1008]}
    assert flag_line(r.info) == ("flags      1 Allreduce calls with blocks above the probe's "
                                 "largest size (Allreduce 1008 B) keep their point-to-point "
                                 "patterns")
    assert r.info["collective_algorithms_run"]["Allreduce"] != {"release_gather": 1}
    # an instance the rule would not price at any size (an --algo) is not said to be above it
    r = _run(_prep(tmp_path, progs, "big-ring"), algorithms={"Allreduce": "ring"})
    assert "shared_flag_meeting" not in r.info


def test_rule_applies_only_under_its_conditions(tmp_path):
    progs = [[("compute", 10_000), ("coll", "Bcast", 8, 0)], [("coll", "Bcast", 8, 0)]]
    # ranks on two hosts: the pattern (a binomial message), not the meeting
    two = _prep(tmp_path, progs, "two", hosts={"a": [0], "b": [1]})
    assert "shared_flag_meeting" not in _run(two).info
    one = _prep(tmp_path, progs, "one")
    # a forced algorithm, the measured model, or no costs: the pattern
    forced = _run(one, algorithms={"Bcast": "binomial"})
    assert "shared_flag_meeting" not in forced.info
    assert "shared_flag_meeting" not in _run(one, flags=None).info
    assert "shared_flag_meeting" not in replay.run(one, "measured", flags=COSTS).info
    # a collective the table lacks keeps its pattern
    only_reduce = FlagCosts(2, {"Reduce": TABLE["Reduce"]})
    assert "shared_flag_meeting" not in _run(one, flags=only_reduce).info
    # the pattern's replay differs from the rule's (an eager message: o + L + o)
    assert _run(one).rank_end_ns[1] != _run(one, flags=None).rank_end_ns[1]


def test_streamed_replay_equals_the_whole_one(tmp_path):
    names = ("Bcast", "Reduce", "Barrier", "Allreduce")
    progs = [[op for i in range(40) for op in (("compute", 500 + 3_000 * ((i + r) % 3)),
                                               ("coll", names[i % 4], 8 * (1 + i % 5), 0))]
             for r in range(2)]
    d = simulate_to_dir(tmp_path / "s", progs, hosts=ONE_HOST)
    whole = replay.run(replay.prepare(d, use_cache=False), "loggps", SETS, flags=COSTS)
    parts = run_streamed(d, "loggps", SETS, flags=COSTS, window=12)
    assert parts.info["streamed"]["segments"] > 1
    assert parts.makespan_ns == pytest.approx(whole.makespan_ns)
    assert list(parts.rank_end_ns) == pytest.approx(list(whole.rank_end_ns))
    assert parts.info["shared_flag_meeting"]["calls"] == whole.info["shared_flag_meeting"]["calls"]


def test_profile_table_is_checked():
    good = {"shared_flag": {"ranks": 2, "Bcast": {k: list(v) for k, v in TABLE["Bcast"].items()}}}
    fc = flag_costs(good)
    assert fc.ops() == {"Bcast"}
    assert flag_costs({"loggps": {}}) is None
    for broken, what in (
            ({"ranks": 1}, "ranks"),
            ({"Gather": {}}, "Gather"),
            ({"Bcast": {**good["shared_flag"]["Bcast"], "bytes": [1008, 8]}}, "bytes"),
            ({"Bcast": {**good["shared_flag"]["Bcast"], "member_after_s": [1e-6]}},
             "member_after_s"),
            ({"Bcast": {**good["shared_flag"]["Bcast"], "root_after_s": [1e-6, 1e-6]}},
             "root_after_s")):
        doc = {"shared_flag": {**good["shared_flag"], **broken}}
        with pytest.raises(DataError, match=what):
            flag_costs(doc, "p.toml")


def test_cli_reads_the_table_and_says_what_it_priced(tmp_path):
    progs = [[("compute", 10_000), ("coll", "Bcast", 8, 0)], [("coll", "Bcast", 8, 0)]]
    d = simulate_to_dir(tmp_path / "t", progs, hosts=ONE_HOST)
    prof = tmp_path / "p.toml"
    lines = ['format = "hindsight-profile/1"', "[loggps]",
             *(f"{k} = {v}" for k, v in dict(L=2e-6, o_send=3e-7, o_recv=3e-7, g=0, G=5e-10,
                                              S=512, O=0, o_a=3e-7, o_b=0).items()),
             "[hockney]", "l = 2e-6", "g = 5e-10", "[mm1]", "C = 1e9", "tau = 2e-6",
             "[shared_flag]", "ranks = 2", "[shared_flag.Bcast]",
             *(f"{k} = {json.dumps(list(v))}" for k, v in TABLE["Bcast"].items())]
    prof.write_text("\n".join(lines) + "\n")
    out = subprocess.run([sys.executable, "-m", "hindsight.cli", "replay", str(d), "--profile",
                          str(prof)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "2 Bcast calls on shared flags" in out.stdout
    assert "predicted  15 us" in out.stdout
    prof.write_text(prof.read_text().replace("[shared_flag.Bcast]", "[shared_flag.Bcats]"))
    bad = subprocess.run([sys.executable, "-m", "hindsight.cli", "replay", str(d), "--profile",
                          str(prof)], capture_output=True, text=True)
    assert bad.returncode == 1 and bad.stderr.startswith("Error: ") and "Bcats" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1


@pytest.mark.skipif(os.environ.get("HINDSIGHT_SKIP_MPI") == "1", reason="no MPI")
def test_probe_measures_every_role_on_shared_memory(tmp_path):
    """A real probe under mpiexec -n 2 on shared memory: every collective and role gets a
    positive cost per size; a Bcast root's own part is shorter than what its member waits
    after it entered plus the member's own (the member copies the data out after the flag)."""
    from replay.calibration.flags import FLAG_OPS, FLAG_SIZES, fit_flags
    params, evidence, _ = fit_flags(run_mpi_script(tmp_path, 2, (
        "import json, sys, time\nimport numpy as np\nfrom mpi4py import MPI\n"
        "from replay.calibration.flags import flag_probe\n"
        "c = MPI.COMM_WORLD; r = c.rank; z = np.zeros(1, np.uint8)\n"
        "def sync():\n"
        "    c.Sendrecv([z, 0, MPI.BYTE], dest=1 - r, sendtag=1, recvbuf=[z, 0, MPI.BYTE],"
        " source=1 - r, recvtag=1)\n"
        "out = flag_probe(c, r, sync, lambda ns: time.sleep(ns * 1e-9))\n"
        "if r == 0:\n    json.dump(out, open(sys.argv[1], 'w'))\n")))
    assert set(params) == set(FLAG_OPS)
    assert params["Bcast"]["bytes"] == list(FLAG_SIZES) and params["Barrier"]["bytes"] == [0]
    for op, sec in params.items():
        names = [k for k in sec if k.endswith("_s")]
        assert ("Bcast" == op) == ("root_after_s" not in names)
        assert ("Reduce" == op) == ("member_after_s" not in names)
        for k in names:
            assert all(0 < x < 5e-3 for x in sec[k]), (op, k, sec[k])
    fc = flag_costs({"shared_flag": {"ranks": 2, **params}})
    assert fc.ops() == set(FLAG_OPS)


def test_an_instance_missing_a_member_keeps_its_pattern(tmp_path):
    """A partial trace (rank 1 stopped before its second Bcast) prepared whole, as the noise
    report prepares one: that Bcast's instance has its root only and keeps its pattern (the
    root's eager send, which waits for nobody); the complete first one is a meeting."""
    import pyarrow.parquet as pq

    progs = [[("coll", "Bcast", 8, 0), ("compute", 1_000), ("coll", "Bcast", 8, 0)],
             [("coll", "Bcast", 8, 0), ("compute", 1_000), ("coll", "Bcast", 8, 0)]]
    d = simulate_to_dir(tmp_path / "p", progs, hosts=ONE_HOST, incomplete_ranks=[1])
    f = d / "rank-00001.parquet"
    pq.write_table(pq.read_table(f).slice(0, 1), f)          # rank 1: its first Bcast only
    prep = replay.prepare(d, allow_partial=True, use_cache=False)
    r = replay.run(prep, "loggps", SETS, flags=COSTS)
    assert r.info["shared_flag_meeting"]["calls"] == {"Bcast": 2}
    assert r.info["collective_algorithms_run"]["Bcast"] == {"release_gather": 1, "binomial": 1}


def test_a_copy_placed_elsewhere_gets_its_own_stream(tmp_path):
    """validate replays a cross-network cell with the ranks placed as on the predicted network
    (``dataclasses.replace(prep, host_of_rank=...)``, which shares the built streams): the rule
    follows the placement of the copy, not the stream built for the original."""
    progs = [[("compute", 10_000), ("coll", "Bcast", 8, 0)], [("coll", "Bcast", 8, 0)]]
    one = _prep(tmp_path, progs, "one")
    assert "shared_flag_meeting" in _run(one).info
    two = dataclasses.replace(one, host_of_rank=np.array([0, 1]))
    assert "shared_flag_meeting" not in _run(two).info
    assert "shared_flag_meeting" in _run(one).info


def test_a_streamed_replay_sums_the_calls_above_the_probe():
    """Each segment's calls above the probe are added up, as its priced calls are."""
    from replay.streamed import _merge_info

    total = {"shared_flag_meeting": {"calls": {"Bcast": 2}, "largest_communicator": 2,
                                     "above_probe": {"Bcast": [3, 65536]}}}
    _merge_info(total, {"shared_flag_meeting": {
        "calls": {"Bcast": 1}, "largest_communicator": 2,
        "above_probe": {"Bcast": [4, 65536], "Allreduce": [1, 65536]}}})
    s = total["shared_flag_meeting"]
    assert s["calls"] == {"Bcast": 3}
    assert s["above_probe"] == {"Bcast": [7, 65536], "Allreduce": [1, 65536]}
