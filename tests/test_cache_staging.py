"""The prepared cache an import's check writes while it checks (``replay.prepare.stage_prepared``,
``replay.cache.DirWriter``): it holds what a fresh preparing makes, its early arrays are written
before the preparing, and a check that finds a problem leaves nothing behind; and
``hindsight.system.keep_freed_memory``."""

from __future__ import annotations

import dataclasses
import importlib
import subprocess
import sys
import textwrap

import numpy as np

import replay
from hindsight.check import check_and_prepare
from hindsight.trace import write_trace
from hindsight.trace.write import EventRows
from replay import cache
from synthetic import simulate

# (the module: the package's ``replay.prepare`` is its function)
P = importlib.import_module("replay.prepare")

PROGRAMS = [[op for i in range(20) for op in (
    ("compute", 700 + 300 * ((i + r) % 3)),
    ("sendrecv", (r + 1) % 3, 32 * (1 + i % 3), (r - 1) % 3),
    ("coll", "Allreduce", 8))] for r in range(3)]


def _arrays(prep) -> dict[str, np.ndarray]:
    out = {"trail": prep.trail, "host_of_rank": prep.host_of_rank}
    for attr, prefix in cache.PREFIX.items():
        table = getattr(prep, attr)
        out.update({prefix + f.name: np.asarray(getattr(table, f.name))
                    for f in dataclasses.fields(table)})
    return out


def _cache_entries(trace):
    return sorted(p.name for p in (trace / ".replay-cache").iterdir())


def test_the_staged_cache_is_what_a_fresh_preparing_makes(tmp_path, monkeypatch):
    trace = write_trace(tmp_path / "t", simulate(PROGRAMS))
    events = []
    add_in_turn, prepare_rows = cache.DirWriter.add_in_turn, P.prepare_rows

    def adding(self, arrays):
        events.extend(arrays)
        return add_in_turn(self, arrays)

    def preparing(*a, **kw):
        events.append("preparing")
        return prepare_rows(*a, **kw)

    monkeypatch.setattr(cache.DirWriter, "add_in_turn", adding)
    monkeypatch.setattr(P, "prepare_rows", preparing)
    assert check_and_prepare(trace) == []
    # the columns kept as read and the messages were given to the writer before the preparing
    early = events[:events.index("preparing")]
    assert {"r_rank", "r_seq", "r_op", "r_t_start", "r_t_end", "r_nbytes", "m_src",
            "m_recv_row"} <= set(early)
    assert events.count("r_rank") == 1          # kept, not written anew
    (cached,) = trace.glob(".replay-cache/prepared-*")
    loaded = P.Prepared(path=trace, manifest={}, cache_dir=cached, **cache.load(cached))
    fresh = replay.prepare(trace, use_cache=False)
    got, want = _arrays(loaded), _arrays(fresh)
    assert got.keys() == want.keys()
    for name in want:
        assert got[name].dtype == want[name].dtype, name
        assert np.array_equal(got[name], want[name]), name


def test_a_check_that_finds_a_problem_leaves_no_cache(tmp_path):
    """The matching is clean (so the messages were staged too) but a row ends before it
    starts: the staged writing is abandoned, its temporary directory removed."""
    cols = simulate(PROGRAMS)
    cols[1]["t_end"][4] = cols[1]["t_start"][4] - 1
    trace = write_trace(tmp_path / "t", cols)
    problems = check_and_prepare(trace)
    assert any("is before t_start" in p for p in problems)
    assert _cache_entries(trace) == []


def test_a_staged_array_that_is_not_the_prepared_one_is_written_anew(tmp_path):
    trace = write_trace(tmp_path / "t", simulate(PROGRAMS))
    prep = replay.prepare(trace, use_cache=False)
    path = cache.cache_path(trace)
    staged = cache.stage(path)
    staged.add_in_turn({"r_rank": np.zeros_like(prep.rows.rank)})   # not prep's own array
    cache.save(prep, path, staged)
    loaded = cache.load(path)
    assert np.array_equal(loaded["rows"].rank, prep.rows.rank)
    assert _cache_entries(trace) == [path.name]


def test_a_writer_that_cannot_write_leaves_nothing(tmp_path, monkeypatch):
    """A full disk in the middle: neither the directory nor its temporary is left."""
    trace = write_trace(tmp_path / "t", simulate(PROGRAMS))
    real = cache._save_array

    def save_array(where, arr):
        if where.name == "b.npy":
            raise OSError(28, "No space left on device")
        real(where, arr)

    monkeypatch.setattr(cache, "_save_array", save_array)
    path = cache.cache_path(trace)
    staged = cache.stage(path)
    staged.add_in_turn({"a": np.arange(10), "b": np.arange(10)})
    staged.add("c", np.arange(10))
    staged.finish({"x": 1})
    assert _cache_entries(trace) == []


def test_kept_freed_memory_is_reused_without_new_pages():
    """After ``keep_freed_memory`` a freed 64 MB array's pages serve the next one: allocating
    it again takes (almost) no page faults, where glibc would otherwise unmap and map anew."""
    code = textwrap.dedent("""
        import resource, sys
        import numpy as np
        from hindsight.system import keep_freed_memory
        if sys.argv[1] == "keep":
            assert keep_freed_memory()
        def faults():
            return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        a = np.ones(64 << 20, np.uint8); del a
        before = faults()
        a = np.ones(64 << 20, np.uint8)
        print(faults() - before)
    """)
    got = {how: int(subprocess.run([sys.executable, "-c", code, how], capture_output=True,
                                   text=True, check=True).stdout)
           for how in ("keep", "default")}
    pages = (64 << 20) // 4096
    assert got["keep"] < pages // 20
    # (without it the pages come anew: as 4 KB pages, or as fewer huge pages)
    assert got["default"] > got["keep"]


def test_an_interrupted_staging_leaves_nothing(tmp_path, monkeypatch):
    """On one core the early arrays are written as they are added: a Ctrl-C then leaves no
    temporary directory behind."""
    from hindsight import trace as tf

    trace = write_trace(tmp_path / "t", simulate(PROGRAMS))
    cols = tf.read_columns(trace)

    def interrupted(where, arr):
        raise KeyboardInterrupt

    monkeypatch.setattr(cache, "usable_cores", lambda: 1)
    monkeypatch.setattr(cache, "_save_array", interrupted)
    try:
        P.stage_prepared(cols)
    except KeyboardInterrupt:
        pass
    else:
        raise AssertionError("the interrupt was lost")
    assert _cache_entries(trace) == []


def test_the_staged_cache_holds_one_sided_epochs_probes_and_polls(tmp_path, monkeypatch):
    """The staged cache equals a fresh preparing's on a trace with a window (fence and lock
    epochs), a poll run, an Iprobe and a Test of a request, whose tables (``coll``, ``rma``,
    the rows' poll columns) a two-sided trace leaves empty; its early arrays were kept, not
    written again."""
    saved = []
    save_array = cache._save_array

    def saving(where, arr):
        saved.append(where.name)
        return save_array(where, arr)

    monkeypatch.setattr(cache, "_save_array", saving)
    w = 77
    r0, r1 = EventRows(), EventRows()
    for ev in (r0, r1):
        ev.append("Win_create", 0, 100, comm=w)
        ev.append("Win_fence", 200, 300, comm=w)
    r0.append("Put", 400, 500, peer=1, comm=w, nbytes=1000)
    r0.append("Win_fence", 600, 700, comm=w)
    r1.append("Win_fence", 600, 700, comm=w)
    r0.append("Irecv", 800, 800, peer=1, tag=5, nbytes=8, request=0)
    r0.append("Poll", 1000, 9000, nbytes=8)
    r0.append("Test", 11000, 11100, peer=1, tag=5, nbytes=8, request=0)
    r1.append("Send", 10000, 10100, peer=0, tag=5, nbytes=8)
    r1.append("Send", 10200, 10300, peer=0, tag=6, nbytes=16)
    r0.append("Iprobe", 11200, 11300, peer=1, tag=6, nbytes=16)
    r0.append("Recv", 11400, 11500, peer=1, tag=6, nbytes=16)
    r1.append("Win_lock", 11600, 11700, peer=0, comm=w)
    r1.append("Get", 11800, 11900, peer=0, comm=w, nbytes=400)
    r1.append("Win_unlock", 12000, 12100, peer=0, comm=w)
    trace = write_trace(tmp_path / "t", [r0.events(0), r1.events(1)],
                        communicators={w: [0, 1]})
    assert check_and_prepare(trace) == []
    assert saved.count("r_rank.npy") == saved.count("m_src.npy") == 1    # staged, and kept
    (cached,) = trace.glob(".replay-cache/prepared-*")
    loaded = P.Prepared(path=trace, manifest={}, cache_dir=cached, **cache.load(cached))
    fresh = replay.prepare(trace, use_cache=False)
    assert len(fresh.rma.kind) and len(fresh.coll.xfer_src) and (fresh.rows.poll_row >= 0).any()
    got, want = _arrays(loaded), _arrays(fresh)
    assert got.keys() == want.keys()
    for name in want:
        assert got[name].dtype == want[name].dtype, name
        assert np.array_equal(got[name], want[name]), name
