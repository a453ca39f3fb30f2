"""Rule ``native_call_costs`` (replay.binding) and calibrate's native probe
(replay.calibration.native): a trace recorded below mpi4py pays the costs of calls made from C,
the profile's ``[native]`` section, instead of the mpi4py costs less the binding's.

The hand-computed cases take the profile of conftest.hand_profile (us: o_send 3, o_recv 2, L 1)
with [native] o_send 0.5, o_recv 0.25, one_way 1.25 (so L = 0.5). An eager 8-byte Send from
rank 0 to rank 1, both at 0: below mpi4py rank 0 ends at 0.5 and rank 1 at 1.25; the Python
tracer's trace keeps the profile's 3 and 6."""

from __future__ import annotations

import os

import pytest

from replay import models as M
from replay.binding import NATIVE_KEYS, native_costs, with_native
from replay.calibration.native import fit_native, fit_native_flags, median_of_runs
from replay.recorder_rules import trace_rules
from conftest import hand_profile, rank_ends_ns, replay_json
from synthetic import simulate_to_dir

US = 1e-6
SEND_RECV = [[("send", 1, 8)], [("recv", 0)]]
NATIVE = {"o_send": 0.5 * US, "o_recv": 0.25 * US, "one_way": 1.25 * US, "o_irecv": 0.04 * US,
          "o_wait": 0.02 * US, "o_probe": 0.06 * US, "o_call": 0.05 * US}
BINDING = {"api": "buffer", "Send": 1 * US, "Recv": 0.5 * US}


def test_a_trace_below_mpi4py_pays_the_native_costs(tmp_path, run_hindsight):
    prof = hand_profile(tmp_path / "p.toml", binding=BINDING, native=NATIVE)
    python = simulate_to_dir(tmp_path / "py", SEND_RECV)
    pmpi = simulate_to_dir(tmp_path / "lib", SEND_RECV, manifest={"tracer": "pmpi"})
    doc = replay_json(run_hindsight, python, prof)
    assert rank_ends_ns(doc) == [3000, 6000] and "native_call_costs_s" not in doc
    doc = replay_json(run_hindsight, pmpi, prof)
    # the native costs, not the profile's less the binding's (2000, 4500)
    assert rank_ends_ns(doc) == [500, 1250]
    assert doc["native_call_costs_s"]["one_way"] == pytest.approx(1.25 * US)
    assert "binding_in_bursts_s" not in doc
    r = run_hindsight("replay", str(pmpi), "--profile", str(prof))
    assert r.returncode == 0 and "rule native_call_costs" in r.stdout
    assert "rule binding_in_bursts" not in r.stdout
    # --set is the model's own value, never changed: L stays the native one
    assert rank_ends_ns(replay_json(run_hindsight, pmpi, prof, "--set", "o_send=3us")) == [
        3000, 3750]
    # Hockney has no per-call cost: unchanged, and no line
    h = run_hindsight("replay", str(pmpi), "--profile", str(prof), "--model", "hockney")
    assert h.returncode == 0 and "native" not in h.stdout
    # the streamed replay applies it alike
    assert rank_ends_ns(replay_json(run_hindsight, pmpi, prof, "--window", "16")) == [500, 1250]
    # a Python program recorded by the PMPI library made its calls through mpi4py: the
    # profile's costs less the binding's (rule binding_in_bursts), not the native ones
    py = simulate_to_dir(tmp_path / "py-lib", SEND_RECV,
                         manifest={"tracer": "pmpi", "program": "/x/cg.py", "app": "cg.py"})
    doc = replay_json(run_hindsight, py, prof)
    assert rank_ends_ns(doc) == [2000, 4500] and "native_call_costs_s" not in doc
    r = run_hindsight("replay", str(py), "--profile", str(prof))
    assert "rule binding_in_bursts" in r.stdout and "native" not in r.stdout


def test_the_formula_with_o_b_and_the_earliest_arrival():
    base = {"L": 1 * US, "o_send": 3 * US, "o_recv": 2 * US, "o_b_send": 0.1 * US,
            "o_b_recv": 0.05 * US, "o_irecv": 1 * US, "o_call": 1 * US, "G": 7.0}
    out = with_native(base, NATIVE)
    # the model adds o_b·P, the probe ran on 2 ranks: o_send 0.5 - 0.2, o_recv 0.25 - 0.1
    assert out["o_send"] == pytest.approx(0.3 * US) and out["o_recv"] == pytest.approx(0.15 * US)
    assert out["L"] == pytest.approx(0.5 * US)
    assert out["o_irecv"] == NATIVE["o_irecv"] and out["o_call"] == NATIVE["o_call"]
    assert "o_wait" not in out and out["G"] == 7.0
    # a one-way time below the calls' overheads: L no lower than -(o_send' + 2·o_b_send)
    low = with_native(base, {**NATIVE, "one_way": 0.2 * US})
    assert low["L"] == pytest.approx(-0.5 * US)
    # o_b·2 above the probe's o_send: o_send' floors at 0, and L takes the model's own 2-rank
    # overheads (2·0.4 send, 0.25 receive), so o_s + L + o_r is still the probe's 1.25 us
    big = with_native({**base, "o_b_send": 0.4 * US, "o_b_recv": 0.0}, NATIVE)
    assert big["o_send"] == 0.0
    assert big["L"] == pytest.approx((1.25 - 0.8 - 0.25) * US)
    # a model without L and o (Hockney's): nothing but the per-call costs it has
    assert with_native({"l": 5 * US, "g": 0.0}, NATIVE) == {"l": 5 * US, "g": 0.0}
    # the per-call overheads the model has, even where the profile's section had none
    assert with_native({"g": 0.0}, NATIVE, ("o_wait",)) == {"g": 0.0, "o_wait": NATIVE["o_wait"]}


def test_which_programs_made_their_calls_from_python():
    """The manifest's program_kind (the PMPI library writes it) decides; a library trace
    written before it, its program's name; an import's calls are C's."""
    from replay.binding import made_from_python

    assert made_from_python({"tracer": "pmpi", "program_kind": "python", "program": "/x/run"})
    assert not made_from_python({"tracer": "pmpi", "program_kind": "compiled",
                                 "program": "/x/odd.py"})
    assert made_from_python({"tracer": "pmpi", "program": "/x/cg.py"})
    assert not made_from_python({"tracer": "pmpi", "program": "/x/a.out"})
    assert not made_from_python({"origin": {"format": "goal"}, "app": "x.py"})


def test_load_profile_takes_the_native_section_only_below_mpi4py(tmp_path):
    prof = hand_profile(tmp_path / "p.toml", binding=BINDING, native=NATIVE)
    mod = M.get_model("loggps")
    assert M.load_profile(prof, mod)["o_send"] == pytest.approx(3 * US)
    below = M.load_profile(prof, mod, below_binding="C")
    assert (below["o_send"], below["o_recv"], below["L"]) == pytest.approx((0.5 * US,
                                                                            0.25 * US, 0.5 * US))
    # a Python program recorded below mpi4py: rule binding_in_bursts
    assert M.load_profile(prof, mod, below_binding="Python")["o_send"] == pytest.approx(2 * US)
    # LogGOPSim's rules take L >= 0: a native one-way time below the calls' overheads gives 0
    fast = hand_profile(tmp_path / "f.toml", native={**NATIVE, "one_way": 0.5 * US})
    assert M.load_profile(fast, M.get_model("loggps"), below_binding="C")["L"] < 0
    assert M.load_profile(fast, M.get_model("loggopsim"), below_binding="C")["L"] == 0.0


def test_a_bad_native_section_is_one_error_line(tmp_path, run_hindsight):
    pmpi = simulate_to_dir(tmp_path / "lib", SEND_RECV, manifest={"tracer": "pmpi"})
    for bad, words in (({**NATIVE, "o_sendd": 1e-6}, "o_sendd: not one of"),
                       ({k: v for k, v in NATIVE.items() if k != "one_way"},
                        "one_way must be a time >= 0"),
                       ({**NATIVE, "o_call": -1e-6}, "o_call must be a time >= 0")):
        prof = hand_profile(tmp_path / "bad.toml", native=bad)
        r = run_hindsight("replay", str(pmpi), "--profile", str(prof))
        assert r.returncode == 1, r.stdout
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("Error:") and words in lines[0], lines
        assert "bad.toml" in lines[0] and "[native]" in lines[0]
    # the Python tracer's trace does not read the section
    python = simulate_to_dir(tmp_path / "py", SEND_RECV)
    assert run_hindsight("replay", str(python), "--profile", str(prof)).returncode == 0


def _probe(calls_ns: dict[str, float]) -> dict:
    """A native probe's output of known values: T(k) = 1 us + 0.75 ns/B·k + 0.1 ns/B·(k - 1),
    o_s(k) = 0.3 us + 0.5 ns/B·k, o_r(k) = 0.1 us + 0.25 ns/B·k; per call ``calls_ns`` a batch."""
    ks = [8, 64, 512]
    snd = {"batch": 100, "sizes": ks, "ranks": 2}
    rcv = {"batch": 100, "sizes": ks, "ranks": 2}
    for i, k in enumerate(ks):
        t = 1000 + 0.75 * k + 0.1 * (k - 1)
        snd[f"rt_ns_{i}"] = [2 * t - 40, 2 * t, 2 * t + 500]
        snd[f"os_ns_{i}"] = [300 + 0.5 * k] * 3
        rcv[f"or_ns_{i}"] = [100 + 0.25 * k - 10, 100 + 0.25 * k, 100 + 0.25 * k + 90]
    for name, v in calls_ns.items():
        snd[name] = [v] * 20
    return {"sender": snd, "receiver": rcv}


def test_fit_takes_the_per_byte_terms_off_and_the_loop_off_the_calls():
    main = {"O_send": 0.5e-9, "O_recv": 0.25e-9, "G": 0.1e-9}
    probe = _probe({"irecv_ns": 5000, "wait_ns": 200, "probe_ns": 6300, "iprobe_ns": 5300,
                    "loop_ns": 300})
    params, evidence, notes = fit_native(probe, main)
    assert set(params) == set(NATIVE_KEYS)
    assert params["o_send"] == pytest.approx(0.3 * US)
    assert params["o_recv"] == pytest.approx(0.1 * US)
    assert params["one_way"] == pytest.approx(1.0 * US)
    # per call: the batch's time / 100 less the empty loop's 3 ns; a wait below it is 0, noted
    assert params["o_irecv"] == pytest.approx(47e-9) and params["o_call"] == pytest.approx(50e-9)
    assert params["o_wait"] == 0.0 and any("o_wait" in n for n in notes)
    assert evidence["sizes"] == [8, 64, 512] and len(evidence["one_way_s"]) == 3
    assert native_costs({"native": params}) == params


def test_shared_flag_costs_below_mpi4py_are_the_native_table(tmp_path):
    """A trace recorded below mpi4py takes [native_shared_flag] as it is, not [shared_flag]
    less the binding's; the Python tracer's trace keeps [shared_flag]."""
    table = {"ranks": 2, "Bcast": {"bytes": [8], "root_own_s": [1 * US],
                                   "member_own_s": [3 * US], "member_after_s": [5 * US]}}
    native = {"ranks": 2, "Bcast": {"bytes": [8, 512], "root_own_s": [0.2 * US, 0.3 * US],
                                    "member_own_s": [0.4 * US, 0.5 * US],
                                    "member_after_s": [0.6 * US, 0.7 * US]}}
    prof = hand_profile(tmp_path / "p.toml", binding={**BINDING, "Bcast": 1 * US},
                        native=NATIVE, shared_flag=table, native_shared_flag=native)
    loggps = M.get_model("loggps")
    python = trace_rules(prof, {}).flags_for(loggps)
    pmpi = trace_rules(prof, {"tracer": "pmpi"}).flags_for(loggps)
    assert python.table["Bcast"]["member_own_s"] == pytest.approx((3 * US,))
    assert pmpi.table["Bcast"]["member_own_s"] == pytest.approx((0.4 * US, 0.5 * US))
    assert pmpi.table["Bcast"]["bytes"] == (8, 512)
    # a Python program's, recorded by the library: the binding rule's table
    py = trace_rules(prof, {"tracer": "pmpi", "app": "cg.py"}).flags_for(loggps)
    assert py.table["Bcast"]["member_own_s"] == pytest.approx((2 * US,))
    # without [native_shared_flag]: the binding rule's table, as before
    plain = hand_profile(tmp_path / "q.toml", binding={**BINDING, "Bcast": 1 * US},
                         native=NATIVE, shared_flag=table)
    less = trace_rules(plain, {"tracer": "pmpi"}).flags_for(loggps)
    assert less.table["Bcast"]["member_own_s"] == pytest.approx((2 * US,))
    # a malformed native table is an error naming its section
    bad = hand_profile(tmp_path / "b.toml", native=NATIVE,
                       native_shared_flag={"ranks": 2, "Bcastt": {"bytes": [8]}})
    with pytest.raises(Exception, match=r"\[native_shared_flag\]\.Bcastt: not one of"):
        trace_rules(bad, {"tracer": "pmpi"}).flags_for(loggps)


def test_the_native_collectives_are_fitted_as_the_collective_probe():
    """Each case's entries and exits of both ranks are paired as flags.fit_flags reads them:
    the late rank's own = its exit - its entry, the early rank's after = its exit - the late
    rank's entry."""
    def case(op, late, t_in, t_out):
        return {"op": op, "bytes": 8, "late": late, "in": t_in, "out": t_out}
    # rank 0 (root) and rank 1 of an Allreduce: rank 0 late, then rank 1 late (ns)
    sender = [case("Allreduce", 0, [1000] * 60, [1400] * 60),
              case("Allreduce", 1, [0] * 60, [1900] * 60)]
    receiver = [case("Allreduce", 0, [0] * 60, [1700] * 60),
                case("Allreduce", 1, [1500] * 60, [2100] * 60)]
    params, _, _ = fit_native_flags({"sender": {"flag_cases": sender},
                                     "receiver": {"flag_cases": receiver}})
    a = params["Allreduce"]
    assert a["bytes"] == [8]
    assert a["root_own_s"] == pytest.approx([400e-9])       # 1400 - 1000
    assert a["member_own_s"] == pytest.approx([600e-9])     # 2100 - 1500
    assert a["member_after_s"] == pytest.approx([700e-9])   # 1700 - 1000
    assert a["root_after_s"] == pytest.approx([400e-9])     # 1900 - 1500


def test_each_value_is_the_median_of_the_runs():
    """One run in a slow phase of the VM (5x the others here) prices nothing: per key, and per
    element of a collective's lists, the median of the three runs; sizes stay as they are."""
    runs = [{"o_send": 0.3, "Bcast": {"bytes": [8, 512], "root_own_s": [1.0, 2.0]}},
            {"o_send": 1.5, "Bcast": {"bytes": [8, 512], "root_own_s": [5.0, 9.0]}},
            {"o_send": 0.25, "Bcast": {"bytes": [8, 512], "root_own_s": [1.2, 1.8]}}]
    assert median_of_runs(runs) == {"o_send": 0.3, "Bcast": {"bytes": [8, 512],
                                                             "root_own_s": [1.2, 2.0]}}
    # runs that measured different things are a fault (the probe's note), not a traceback
    odd = [runs[0], {**runs[1], "Bcast": {"bytes": [8], "root_own_s": [5.0]}}, runs[2]]
    with pytest.raises(RuntimeError, match="different things"):
        median_of_runs(odd)


@pytest.mark.skipif(os.environ.get("HINDSIGHT_SKIP_MPI") == "1", reason="no MPI")
def test_real_probe_on_two_ranks(tmp_path):
    """The probe built with the venv's mpicc and run under mpiexec -n 2 on shared memory: every
    cost is measured (above 0), and a message's one-way time is more than the time its two calls
    spend in the library (the data's way between them is the rest)."""
    from replay.calibration import run as R
    from replay.calibration.native import run_probe

    env, job = R.bench_job(2, "shm", None)
    probe = run_probe(job, R.run_job, env, [1, 8, 64, 512], 200)
    params, evidence, _ = fit_native(probe, {"O_send": 0.0, "O_recv": 0.0, "G": 0.0})
    for key in ("o_send", "o_recv", "one_way", "o_irecv", "o_probe", "o_call"):
        assert 0 < params[key] < 50e-6, (key, params[key])
    assert params["o_send"] + params["o_recv"] < params["one_way"], params
    assert len(probe["sender"]["rt_ns_0"]) == 200 and len(probe["receiver"]["or_ns_3"]) == 100
    # the collectives: Barrier, and three collectives at four sizes, each rank late in turn
    flags, _, _ = fit_native_flags(probe)
    assert sorted(flags) == ["Allreduce", "Barrier", "Bcast", "Reduce"]
    assert flags["Allreduce"]["bytes"] == [8, 512, 8192, 65536]
    assert all(0 < x < 1e-3 for x in flags["Allreduce"]["member_own_s"])
