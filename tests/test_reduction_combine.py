"""Rule reduction_combine: a reduction's member combines the k bytes a step received in γ·k once
that step's waits are done (Thakur, Rabenseifner and Gropp 2005: α + nβ + nγ per step).
Synthetic traces of four ranks, Hockney l = 1 µs, g = 0.5 ns/B, no compute: the makespan of one
collective is its steps' costs, and γ adds each rank's combined bytes times γ where the ranks are
symmetric."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from synthetic import simulate_to_dir

import replay
from hindsight.cli import main

L, G = 1000.0, 0.5


def _prep(tmp_path, name, progs):
    return replay.prepare(simulate_to_dir(tmp_path / name, progs), use_cache=False)


def _makespan(prep, model="hockney", gamma="0ns", **kw):
    params = {"l": "1000ns", "g": "0.5ns"} if model == "hockney" else {
        "L": "1000ns", "o": "0ns", "G": "0.5ns"}
    return replay.run(prep, model, {**params, "gamma": gamma}, compute_scale=0.0,
                      **kw).makespan_ns


@pytest.mark.parametrize("model", ["hockney", "loggps", "loggp"])
def test_allreduce_pays_gamma_per_byte_combined(tmp_path, model):
    prep = _prep(tmp_path, "rab", [[("coll", "Allreduce", 32)] for _ in range(4)])
    # 32 bytes, 4 ranks: Rabenseifner, each rank combines 16 then 8 bytes
    base = _makespan(prep, model)
    if model == "hockney":
        assert base == pytest.approx(4 * L + 2 * (16 + 8) * G)
    assert _makespan(prep, model, "2ns") == pytest.approx(base + 2.0 * (16 + 8))
    # recursive doubling: two exchanges of the whole block, both combined
    rd = _prep(tmp_path, "rd", [[("coll", "Allreduce", 24)] for _ in range(4)])
    assert _makespan(rd, model, "2ns") - _makespan(rd, model) == pytest.approx(2 * 2.0 * 24)


def test_what_reduces_nothing_pays_nothing(tmp_path):
    for op in ("Bcast", "Allgather", "Alltoall", "Barrier"):
        prep = _prep(tmp_path, op, [[("coll", op, 4096)] for _ in range(4)])
        assert _makespan(prep, gamma="5ns") == _makespan(prep), op
    # the measured model keeps every call's measured time, combining included: no γ to set
    from replay.models import ParamError
    prep = _prep(tmp_path, "m", [[("coll", "Allreduce", 4096)] for _ in range(4)])
    with pytest.raises(ParamError, match="unknown parameter 'gamma' for model measured"):
        replay.run(prep, "measured", {"gamma": "5ns"})


def test_reduce_pays_on_the_tree_path_only(tmp_path):
    # binomial Reduce to rank 0 of 4: rank 0 combines rank 2's block while rank 1 combines
    # rank 3's, then rank 0 combines rank 1's: the root's chain is two combines of the block
    k = 1000
    prep = _prep(tmp_path, "red", [[("coll", "Reduce", k, 0)] for _ in range(4)])
    algos = {"Reduce": "binomial"}
    gap = _makespan(prep, gamma="1ns", algorithms=algos) - _makespan(prep, algorithms=algos)
    assert gap == pytest.approx(2 * k)


def test_a_nonblocking_reduction_combines_at_its_completion(tmp_path):
    # Iallreduce posted, then waited: rule nonblocking_split runs the steps after the first
    # post at the Wait; the combines land on the same steps as the blocking collective's
    progs = [[("icoll", "Iallreduce", 32), ("wait", [0])] for _ in range(4)]
    nb = _prep(tmp_path, "nb", progs)
    blocking = _prep(tmp_path, "b", [[("coll", "Allreduce", 32)] for _ in range(4)])
    for gamma in ("0ns", "3ns"):
        assert _makespan(nb, gamma=gamma) == pytest.approx(_makespan(blocking, gamma=gamma))
    assert _makespan(nb, gamma="3ns") - _makespan(nb) == pytest.approx(3.0 * (16 + 8))


def test_streamed_replay_combines_as_in_memory(tmp_path):
    progs = [[("coll", "Allreduce", 32 << 10), ("compute", 5000)] * 40 for _ in range(4)]
    trace = simulate_to_dir(tmp_path / "s", progs)
    args = ["replay", str(trace), "--model", "hockney", "--set", "gamma=0.25ns", "--json"]
    import json
    whole = json.loads(CliRunner().invoke(main, args).output)
    streamed = CliRunner().invoke(main, args + ["--window", "16"])
    assert streamed.exit_code == 0, streamed.output
    got = json.loads(streamed.output[streamed.output.index("{"):])
    assert got["predicted_makespan_s"] == pytest.approx(whole["predicted_makespan_s"])
    assert whole["params"]["gamma"] == pytest.approx(0.25e-9)
    # what the rule did, said in both: 40 Allreduce of 32 KiB on 4 ranks (Rabenseifner: each
    # rank combines 16 KiB then 8 KiB)
    want = {"steps": 40 * 4 * 2, "bytes": 40 * 4 * (16 + 8) * 1024.0}
    for doc in (whole, got):
        comb = doc["reduction_combine"]
        assert {k: comb[k] for k in want} == want
        assert comb["seconds"] == pytest.approx(want["bytes"] * 0.25e-9)
    text = CliRunner().invoke(main, args[:-1]).output
    assert "reduce     320 reduction steps combined 3.93 MB in 0.983 ms over all ranks" in text
    # off: no line (the same replay without --set gamma)
    off = CliRunner().invoke(main, ["replay", str(trace), "--model", "hockney"])
    assert off.exit_code == 0 and "predicted" in off.output and "reduce " not in off.output


def test_profile_reduction_section_is_checked(tmp_path):
    from replay import models as M

    p = tmp_path / "p.toml"
    base = ('format = "hindsight-profile/1"\n[hockney]\nl = 1e-6\ng = 1e-10\n'
            '[reduction]\n')
    p.write_text(base + "gamma = 2e-10\n")
    mod = M.get_model("hockney")
    assert M.resolve(mod, {}, M.load_profile(p, mod))["gamma"] == pytest.approx(0.2)
    p.write_text(base + "gama = 2e-10\n")
    with pytest.raises(M.ProfileParamError, match=r"\[reduction\] gama.*did you mean 'gamma'"):
        M.load_profile(p, mod)
    p.write_text(base + "gamma = -1e-10\n")
    with pytest.raises(M.ParamError, match="gamma"):
        M.resolve(mod, {}, M.load_profile(p, mod))


def test_a_profiles_gamma_applies_and_loggopsim_says_it_does_not(tmp_path):
    root = Path(__file__).resolve().parents[1]
    prof = tmp_path / "p.toml"
    text = (root / "docs" / "calibration" / "shm.toml").read_text()
    if "[reduction]" not in text:
        text += "\n[reduction]\ngamma = 1e-10\n"
    prof.write_text(text)
    trace = simulate_to_dir(tmp_path / "t", [[("coll", "Allreduce", 1 << 20)] for _ in range(2)])
    out = CliRunner().invoke(main, ["replay", str(trace), "--profile", str(prof)]).output
    assert "reduce     2 reduction steps combined" in out, out
    out = CliRunner().invoke(main, ["replay", str(trace), "--profile", str(prof),
                                    "--model", "loggopsim"]).output
    assert "reduce     rule reduction_combine not applied: --model loggopsim" in out, out
    # nor is γ one of its parameters, so a --set of it is refused, not ignored
    r = CliRunner().invoke(main, ["replay", str(trace), "--model", "loggopsim", "--set",
                                  "gamma=1ns"])
    assert r.exit_code == 2 and "gamma" in r.output and "predicted" not in r.output, r.output
