"""hindsight testbed: namespaces + veth + tbf, and `collect`/`calibrate --testbed` across them.

The integration tests need root and iproute2 (`ip`, `tc`); elsewhere they skip with the reason.
Every testbed created here has a unique name and is removed in a finally block."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from hindsight import testbed as tb
from hindsight.cli import main

ROOT = Path(__file__).resolve().parent.parent
HAVE_TOOLS = all(tb._tool(t) for t in ("ip", "tc"))
needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or not HAVE_TOOLS,
    reason="the testbed needs root and iproute2 (ip, tc): "
           + ("not root" if os.geteuid() != 0 else "ip/tc not found"))


def _name() -> str:
    return "t" + secrets.token_hex(3)          # unique per test: parallel runs never collide


def _netns() -> list[str]:
    return tb.list_netns()


# -- without root or tools: units and messages ---------------------------------------------------


@pytest.mark.parametrize("text,bps", [("100mbit", 10**8), ("1gbit", 10**9), ("10GBIT", 10**10),
                                      ("1.5gbit", 15 * 10**8), ("500kbit", 5 * 10**5)])
def test_parse_rate(text, bps):
    assert tb.parse_rate(text) == bps


@pytest.mark.parametrize("text", ["", "fast", "100", "100mbps", "1 gbit", "-1gbit", "0mbit",
                                  "1tbit", "200gbit", "1gbit;rm"])
def test_bad_rate_is_one_line_error(text):
    r = CliRunner().invoke(main, ["testbed", "up", "--rate", text, "--name", "tzz"])
    assert r.exit_code == 2 and "Traceback" not in r.output     # a flag's value: usage
    assert "--rate" in r.output and len(r.output.strip().splitlines()) == 1


@pytest.mark.parametrize("args,msg", [(["--nodes", "1"], "--nodes"), (["--nodes", "65"], "--nodes"),
                                      (["--name", "Bad Name"], "--name"),
                                      (["--name", "x" * 13], "--name")])
def test_bad_nodes_and_names(args, msg):
    r = CliRunner().invoke(main, ["testbed", "up"] + args)
    assert r.exit_code == 2 and msg in r.output and "Traceback" not in r.output


def test_placement():
    assert tb.node_of_rank(4, 2) == [0, 0, 1, 1]
    assert tb.node_of_rank(3, 2) == [0, 0, 1]
    assert tb.node_of_rank(3, 2, "cyclic") == [0, 1, 0]


def test_not_root_is_one_clear_message(monkeypatch):
    monkeypatch.setattr(tb.os, "geteuid", lambda: 1000)
    for cmd in (["up"], ["down"], ["status"]):
        r = CliRunner().invoke(main, ["testbed"] + cmd)
        assert r.exit_code == 1 and "needs root" in r.output and "Traceback" not in r.output
    r = CliRunner().invoke(main, ["collect", "-n", "2", "--testbed", "hs", "sorting"])
    assert r.exit_code == 1 and "needs root" in r.output and "Traceback" not in r.output


def test_mpmd_command_one_segment_per_rank():
    state = {"name": "x", "nodes": 2, "node": [{"ns": "x-n0"}, {"ns": "x-n1"}]}
    cmd = tb.mpmd_command(["mpiexec"], ["python", "app.py"], state, 3)
    segs = " ".join(cmd[1:]).split(" : ")
    assert len(segs) == 3
    assert segs[0].endswith("netns exec x-n0 python app.py") and "x-n1" in segs[2]


# -- as root: the real thing ---------------------------------------------------------------------


@needs_root
def test_down_is_idempotent_and_up_detects_leftovers():
    name = _name()
    try:
        assert tb.down(name) == []                      # nothing there: fine
        tb.up(name, 2, "1gbit")
        # a crash leaves namespaces and no state file: `up` refuses, `down` still cleans up
        tb.state_path(name).unlink()
        assert tb.status(name)["status"] == "leftovers"
        r = CliRunner().invoke(main, ["testbed", "up", "--name", name])
        assert r.exit_code == 1 and "earlier run left" in r.output
        assert sorted(tb.down(name)) == [f"{name}-br", f"{name}-n0", f"{name}-n1"]
        assert tb.down(name) == []
        assert not [ns for ns in _netns() if ns.startswith(name + "-")]
    finally:
        tb.down(name)


@needs_root
def test_down_spares_foreign_namespaces_of_the_same_pattern():
    """Without a state file, a namespace named like ours but holding a device we did not create
    is not deleted."""
    name = _name()
    ns = f"{name}-n0"
    try:
        subprocess.run(["ip", "netns", "add", ns], check=True)
        subprocess.run(["ip", "-n", ns, "link", "add", "d0", "type", "veth", "peer", "name", "d1"],
                       check=True)
        assert tb.down(name) == [] and ns in _netns()
    finally:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


@needs_root
def test_collect_across_a_two_node_testbed(tmp_path):
    name = _name()
    links_before = subprocess.run(["ip", "-br", "link"], capture_output=True, text=True).stdout
    out = tmp_path / "trace"
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    try:
        r = CliRunner().invoke(main, ["testbed", "up", "--name", name, "--nodes", "2",
                                      "--rate", "100mbit"])
        assert r.exit_code == 0, r.output
        st = json.loads(CliRunner().invoke(main, ["testbed", "status", "--name", name,
                                                  "--json"]).output)
        assert st["status"] == "up" and [n["addr"] for n in st["node"]] == ["10.77.0.1",
                                                                             "10.77.0.2"]
        qd = subprocess.run(["tc", "-n", f"{name}-n0", "qdisc", "show", "dev", "eth0"],
                            capture_output=True, text=True).stdout
        assert "tbf" in qd and "100Mbit" in qd
        # 8 x 64 Ki integers through a 2-stage pipeline: about 2 MB cross the link
        p = subprocess.run([sys.executable, "-m", "hindsight.cli", "collect", "sorting", "-n", "2",
                            "--paradigm", "pipeline", "--testbed", name, "--out", str(out), "--",
                            "--arrays", "8", "--array-size", "65536", "--block-size", "65536"],
                           capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
        assert p.returncode == 0, p.stderr[-2000:]
        m = json.loads((out / "manifest.json").read_text())
        net = m["network"]
        assert net["testbed"] == name and net["transport"] == "tcp" and net["nodes"] == 2
        assert net["rate"] == "100mbit" and net["ranks_per_node"] == [1, 1]
        assert m["transport"]["FI_TCP_IFACE"] == "eth0" and m["transport"]["MPIR_CVAR_NOLOCAL"] == "1"
        assert net["node_of_rank"] == [0, 1] and len(m["hosts"]) == 1   # one machine, one clock
        # the kernel counted the application's bytes on the veth of both nodes
        tx = [v["tx"] for v in net["veth_bytes"].values()]
        assert sum(tx) > 2_000_000, net["veth_bytes"]
        # ... through the shaper, at no more than its rate (full duplex: the busier direction
        # bounds the run from below; 1 MB at 100 Mbit/s is 84 ms)
        assert m["makespan_ns"] / 1e9 > 0.9 * max(tx) * 8 / 1e8
        # and the link calibrates to its rate: G from the longest messages near 80 ns/B
        prof = tmp_path / "tb.toml"
        p = subprocess.run([sys.executable, "-m", "hindsight.cli", "calibrate", "--testbed", name,
                            "--api", "pickle", "--sizes", "1B..1MiB:4", "--repeat", "20",
                            "--overhead-ranks", "2", "--out", str(prof),
                            # what is checked here is the link's rate; a token-bucket link's
                            # small sizes sit far off the LogGPS line (median residual 74-79 %)
                            "--accept-noisy"],
                           capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
        assert p.returncode == 0, p.stderr[-2000:]
        from replay.profile import read_profile
        pr = read_profile(prof)
        assert pr["measured_on"]["network"]["testbed"] == name
        assert pr["measured_on"]["api"] == "pickle"
        assert 65e-9 < pr["loggps"]["G"] < 100e-9 and 65e-9 < pr["hockney"]["g"] < 100e-9
    finally:
        r = CliRunner().invoke(main, ["testbed", "down", "--name", name])
    assert r.exit_code == 0, r.output
    assert not [ns for ns in _netns() if ns.startswith(name + "-")]
    assert not tb.state_path(name).exists()
    links_after = subprocess.run(["ip", "-br", "link"], capture_output=True, text=True).stdout
    assert sorted(l.split()[0] for l in links_after.splitlines()) == \
        sorted(l.split()[0] for l in links_before.splitlines())


@pytest.mark.skipif(not shutil.which("mpiexec") and not (Path(sys.executable).parent /
                                                        "mpiexec").exists(),
                    reason="no mpiexec")
def test_collect_testbed_not_up_is_one_line(tmp_path):
    if os.geteuid() != 0 or not HAVE_TOOLS:
        pytest.skip("needs root and iproute2 to ask whether the testbed is up")
    r = CliRunner().invoke(main, ["collect", "-n", "2", "--testbed", _name(), "--out",
                                  str(tmp_path / "t"), "sorting"])
    assert r.exit_code == 1 and "is not up" in r.output and "Traceback" not in r.output
    # a compiled program (the PMPI library's run is staged at --out): nothing is left there,
    # so the same command runs once the testbed is up
    from instrument import native
    exe = tmp_path / "nap"
    subprocess.run([native.find_mpicc(), "-O2", "-o", str(exe),
                    str(Path(__file__).parent / "programs" / "nap.c")], check=True)
    r = CliRunner().invoke(main, ["collect", "-n", "2", "--testbed", _name(), "--out",
                                  str(tmp_path / "c"), "--program", str(exe)])
    assert r.exit_code == 1 and "is not up" in r.output and not (tmp_path / "c").exists()


def test_calibrate_says_a_testbed_is_down_before_it_measures(tmp_path):
    """Before its first progress line: a testbed that is down (exit 1), a name no testbed has
    (exit 2); nothing is written."""
    cases = [("Bad_Name", 2, "--testbed 'Bad_Name'")]      # (no root needed to say so)
    if os.geteuid() == 0 and HAVE_TOOLS:                    # (to ask whether it is up)
        cases.append((_name(), 1, "is not up"))
    for name, code, words in cases:
        r = CliRunner().invoke(main, ["calibrate", "-n", "2", "--testbed", name, "--out",
                                      str(tmp_path / "p.toml")])
        assert r.exit_code == code and r.output.startswith("Error: ") and words in r.output
        assert len(r.output.strip().splitlines()) == 1 and not (tmp_path / "p.toml").exists()


def test_collect_testbed_with_a_name_no_testbed_has_is_usage(tmp_path):
    r = CliRunner().invoke(main, ["collect", "-n", "2", "--testbed", "Bad_Name", "--out",
                                  str(tmp_path / "t"), "sorting"])
    assert r.exit_code == 2 and r.output.startswith("Error: --testbed 'Bad_Name': 1-12 "
                                                    "characters")
    assert not (tmp_path / "t").exists()


# -- cross-network bookkeeping in validation (no MPI, no root) -----------------------------------

XSPEC = """
name = "x"
[networks.shm]
transport = "shm"
[networks.slow]
testbed = { nodes = 2, rate = "100mbit" }
[[experiment]]
app = "sorting"
paradigms = ["pipeline"]
ranks = [2]
baseline = false
networks = ["shm"]
predict_on = ["slow"]
[experiment.sizes]
"s" = ["--arrays", "4"]
"""


def test_spec_predict_on_and_testbed_network(tmp_path):
    from validation.spec import SpecError, load_spec

    (tmp_path / "s.toml").write_text(XSPEC)
    spec = load_spec(tmp_path / "s.toml")
    by_net = {c.network: c for c in spec.cells}
    assert set(by_net) == {"shm", "slow"}                 # predict_on networks are run too
    assert by_net["shm"].predict_on == ["slow"] and by_net["slow"].predict_on == []
    net = spec.networks["slow"]
    assert net["transport"] == "tcp" and net["testbed_name"] == "vslow" and net["testbed_managed"]
    for bad, msg in [('rate = "100mbit"', "--rate"), ('predict_on = ["slow"]', "unknown network")]:
        text = XSPEC.replace('rate = "100mbit"', 'rate = "fast"') if msg == "--rate" else \
            XSPEC.replace('predict_on = ["slow"]', 'predict_on = ["nope"]')
        (tmp_path / "b.toml").write_text(text)
        with pytest.raises(SpecError, match=msg):
            load_spec(tmp_path / "b.toml")


def test_cross_rows_in_errors_csv_and_report(tmp_path):
    import pandas as pd

    from validation.report import cross_summary, report, split_cross
    from validation.errors_table import ERRORS_COLUMNS, write_errors

    def cell(net, actual, preds):
        return {"app": "sorting", "paradigm": "pipeline", "ranks": 2, "size": "s", "network": net,
                "baseline": False, "actual_s": actual, "actual_sd_s": 0.01, "replayed_rep": 0,
                "traces": [], "profile": f"profiles/{net}.toml",
                "predictions": [{"predictor": k, "predicted_s": v,
                                 "rel_error_pct": (v - actual) / actual * 100}
                                for k, v in preds.items()]}
    (tmp_path / "cells").mkdir()
    (tmp_path / "cross").mkdir()
    for net, actual, pred in [("shm", 1.0, 1.1), ("slow", 4.0, 3.6)]:
        (tmp_path / "cells" / f"{net}.json").write_text(
            json.dumps(cell(net, actual, {"replay:loggps": pred})))
    x = cell("slow", 4.0, {"replay:loggps": 5.0})       # shm's trace predicts slow: +25 %
    x["trace_network"] = "shm"
    (tmp_path / "cross" / "shm--slow.json").write_text(json.dumps(x))
    write_errors(tmp_path)
    df = pd.read_csv(tmp_path / "errors.csv")
    assert list(df.columns) == ERRORS_COLUMNS and len(df) == 3
    same, cross = split_cross(df)
    assert len(same) == 2 and len(cross) == 1 and cross.iloc[0].trace_network == "shm"
    s = cross_summary(same, cross).iloc[0]
    assert s.same_mean_abs_pct == pytest.approx(10.0) and s.cross_mean_abs_pct == pytest.approx(25.0)
    report(tmp_path, tmp_path / "rep")
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "## Cross-network predictions" in md and "| LogGPS replay | 1 | 10.00 |" in md
    assert "| sorting | pipeline | 2 | s | shm | slow | 4.0000 | -10.0 | +25.0 |" in md
    # the same-network tables do not mix in the cross row
    assert "Cells worse than 15 %: 0 of 2 rows." in md


def test_cross_prediction_places_ranks_as_the_predicted_network_does(tmp_path):
    """A trace whose ranks shared a host, predicted onto a two-node testbed: M/M/1 must place
    the ranks on the testbed's nodes (messages cross the switch), as runs there did."""
    from types import SimpleNamespace

    from synthetic import simulate_to_dir
    from validation.matrix import replay_predictions

    progs = [[("send", 1, 100_000)] * 20, [("recv", 0)] * 20]
    trace = simulate_to_dir(tmp_path / "t", progs, hosts={"machine": [0, 1]})
    spec = SimpleNamespace(replay=["mm1"], replay_set={"mm1": ["C=1Gbit/s", "C_host=1Gbit/s",
                                                               "Tcomp=10ms"]})
    manifest = {"makespan_ns": 0}
    own = replay_predictions(trace, manifest, {}, spec)[0]["predicted_s"]
    testbed = {"network": {"node_of_rank": [0, 1]}}
    moved = replay_predictions(trace, manifest, {}, spec, placed_like=testbed)[0]["predicted_s"]
    # on one host a message is a pure delay k/C; across the switch its link is a queue
    # (analytic utilisation 8 / 10 ms x 800 us = 0.64: 2.2 ms per message)
    assert moved > 2 * own
