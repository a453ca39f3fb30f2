"""The kernel streams kept beside a trace's prepared cache (``replay.cache.save_stream``, on a
thread behind the replay that built them: ``save_stream_behind``): a
replay from a kept stream equals one from a stream built afresh, each form (network, measured,
another algorithm, rule shared_flag_meeting) is kept apart, and a kept stream whose form or
layout is not the one asked for is never used."""

from __future__ import annotations

import errno
import json
import os

import numpy as np
import pytest

import replay
from replay import blockwrite, cache
from replay.flags import FlagCosts
from synthetic import simulate_to_dir

SETS = {"L": "2us", "o": "300ns", "G": "0.5ns", "g": "0", "S": "512B"}
US = 1e-6
COSTS = FlagCosts(2, {"Allreduce": {"bytes": (8,), "root_own_s": (1 * US,),
                                    "root_after_s": (2 * US,), "member_own_s": (3 * US,),
                                    "member_after_s": (4 * US,)}}, "shm")


def _trace(tmp_path):
    progs = [[op for i in range(30) for op in (
        ("compute", 500 + 1_000 * ((i + r) % 3)),
        ("sendrecv", (r + 1) % 3, 64 * (1 + i % 4), (r - 1) % 3),
        ("coll", "Allreduce", 8), ("coll", "Bcast", 16 * (1 + i % 3), 0))]
        for r in range(3)]
    return simulate_to_dir(tmp_path / "t", progs, hosts={"node0": [0, 1, 2]})


def _runs(prep):
    return [replay.run(prep, "loggps", SETS).summary(),
            replay.run(prep, "measured").summary(),
            replay.run(prep, "loggps", SETS, algorithms={"Bcast": "binomial"}).summary(),
            replay.run(prep, "loggps", SETS, flags=COSTS).summary()]


def _kept(trace):
    cache.flush_streams()           # (a replay writes its stream on a thread)
    return sorted(trace.glob(".replay-cache/prepared-*/stream-*"))


def test_a_kept_stream_replays_as_a_fresh_one(tmp_path, monkeypatch):
    trace = _trace(tmp_path)
    fresh = _runs(replay.prepare(trace, use_cache=False))
    monkeypatch.setattr(cache, "MAX_STREAMS", 4)
    first = _runs(replay.prepare(trace))            # builds each form and keeps it
    assert len(_kept(trace)) == 4
    again = replay.prepare(trace)                   # a later replay: maps the kept forms
    assert again.cache_dir is not None
    st = again.stream(True)
    assert isinstance(st.kind, np.memmap)           # read from the cache, not built
    assert _runs(again) == first == fresh
    assert "shared_flag_meeting" in first[3] and first[3] != first[0]


def test_only_the_latest_streams_are_kept(tmp_path, monkeypatch):
    trace = _trace(tmp_path)
    monkeypatch.setattr(cache, "MAX_STREAMS", 2)
    _runs(replay.prepare(trace))
    assert len(_kept(trace)) == 2


def test_a_stream_of_another_layout_is_rebuilt(tmp_path):
    trace = _trace(tmp_path)
    want = replay.run(replay.prepare(trace), "loggps", SETS).summary()
    (kept,) = _kept(trace)
    meta = json.loads((kept / "meta.json").read_text())
    meta["version"] = -1
    (kept / "meta.json").write_text(json.dumps(meta))
    np.save(kept / "burst.npy", np.zeros(3))        # would be wrong if it were trusted
    prep = replay.prepare(trace)
    assert replay.run(prep, "loggps", SETS).summary() == want
    assert not isinstance(prep.stream(True).kind, np.memmap)



def test_laid_out_in_parts_the_stream_is_the_same(tmp_path, monkeypatch):
    # replay.layout fills the operations PART_ROWS rows at a time, handing each part's pages of
    # the mapped rows back: parts of 1, 5 and 7 rows (Sendrecv halves and collectives across
    # their edges) give the stream and the replays of the whole.
    from dataclasses import fields

    from replay import layout
    from replay.stream import Stream

    trace = _trace(tmp_path)
    replay.prepare(trace)                           # (cached: its rows are mapped now)

    def built():
        prep = replay.prepare(trace)
        assert isinstance(prep.rows.kind, np.memmap)
        return [prep._build_stream(True, {}, ()), prep._build_stream(False, {}, ())], _runs(prep)

    monkeypatch.setattr(layout, "PART_ROWS", 10**9)
    (whole, whole_m), runs = built()
    for part in (1, 5, 7):
        monkeypatch.setattr(layout, "PART_ROWS", part)
        (st, st_m), got = built()
        assert got == runs
        for a, b in ((st, whole), (st_m, whole_m)):
            for f in fields(Stream):
                x, y = getattr(a, f.name), getattr(b, f.name)
                if isinstance(x, np.ndarray):
                    assert x.dtype == y.dtype and np.array_equal(x, y), (part, f.name)


def test_page_out_part_keeps_what_the_pages_hold(tmp_path):
    from hindsight.system import page_out_part

    a = np.arange(3 * 4096, dtype=np.int64)
    np.save(tmp_path / "a.npy", a)
    for mode in ("r", "c"):
        m = np.load(tmp_path / "a.npy", mmap_mode=mode)
        assert int(m.sum()) == int(a.sum())         # every page touched
        page_out_part(100, 9000, m, a)              # (a: not mapped, left alone)
        assert np.array_equal(m, a)
    m = np.load(tmp_path / "a.npy", mmap_mode="c")
    m[5000] = -1                                    # a private copy of that page
    page_out_part(0, len(m), m)
    assert m[5000] == -1 and np.array_equal(np.delete(m, 5000), np.delete(a, 5000))


def test_a_cache_write_that_fails_leaves_nothing(tmp_path, monkeypatch):
    """The arrays are written on threads (``cache._write_dir``): one write failing (a full
    disk) leaves no cache and no temporary directory, the others are not begun, and the
    replay goes on from the rows."""
    trace = _trace(tmp_path)
    written = []
    real = cache._save_array

    def save_array(where, arr):
        if where.name == "r_t_start.npy":
            raise OSError(28, "No space left on device")
        written.append(where.name)
        real(where, arr)

    monkeypatch.setattr(cache, "_save_array", save_array)
    monkeypatch.setattr(cache, "usable_cores", lambda: 1)    # (so the order is the queue's)
    prep = replay.prepare(trace)
    assert prep.cache_dir is None
    assert list((trace / ".replay-cache").iterdir()) == []
    # largest first: what came before the failing array was written, nothing after it
    assert 0 < len(written) < 10
    assert _runs(prep) == _runs(replay.prepare(trace, use_cache=False))


def test_abandoned_temporary_directories_are_swept(tmp_path):
    """A writer killed before its rename leaves its temporary directory: the next write removes
    it once its process is gone and it has been left for ``ABANDONED_S``; a live process's,
    or a recent one, stays."""
    import os
    import subprocess
    import sys
    import time

    trace = _trace(tmp_path)
    root = trace / ".replay-cache"
    root.mkdir()
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    dead = int(gone.stdout)
    old = time.time() - cache.ABANDONED_S - 60
    made = {}
    for name, pid, stamp in (("abandoned", dead, old), ("recent", dead, None),
                             ("live", os.getpid(), old)):
        d = root / f".prepared-{name}.{pid}-1.tmp"
        (d / "x").mkdir(parents=True)
        if stamp is not None:
            os.utime(d, (stamp, stamp))
        made[name] = d
    replay.prepare(trace)
    assert not made["abandoned"].exists()
    assert made["recent"].exists() and made["live"].exists()


def test_a_replay_command_leaves_its_stream_written(tmp_path):
    """The stream is written on a thread behind the replay (``save_stream_behind``): the
    command ends only once it is in place, so the next command maps it."""
    from tests.conftest import hindsight

    trace = _trace(tmp_path)
    r = hindsight("replay", trace)
    assert r.returncode == 0, r.stderr
    (kept,) = sorted(trace.glob(".replay-cache/prepared-*/stream-*"))
    assert (kept / "meta.json").is_file() and not list(kept.parent.glob(".*.tmp"))
    st = replay.prepare(trace).stream(True)
    assert isinstance(st.kind, np.memmap)


def test_a_stream_built_just_before_exit_is_written(tmp_path):
    """A program that builds a stream and ends at once still leaves it written: at exit no new
    thread can start, and the writing goes on in the thread it has."""
    import subprocess
    import sys

    trace = _trace(tmp_path)
    replay.prepare(trace)                           # (the prepared cache)
    code = ("import sys, replay; p = replay.prepare(sys.argv[1]); p.stream(True); "
            "p.stream(False)")
    subprocess.run([sys.executable, "-c", code, str(trace)], check=True)
    assert len(_kept(trace)) == 2
    for kept in _kept(trace):
        assert (kept / "meta.json").is_file()


def test_removing_a_replayed_trace_waits_for_its_stream(tmp_path, monkeypatch):
    """A trace removed in the process that replayed it (validate's rerun of a cell) while its
    stream is still being written behind the replay: ``remove_tree`` waits for the writing, so
    nothing is written into the directory while it is removed, and nothing is left."""
    import threading
    import time

    trace = _trace(tmp_path)
    replay.prepare(trace)                           # (the prepared cache)
    started = threading.Event()
    real = cache._save_array

    def slow_save(where, arr):
        started.set()
        time.sleep(0.05)
        real(where, arr)

    monkeypatch.setattr(cache, "_save_array", slow_save)
    replay.prepare(trace).stream(True)              # its writing begins behind it
    assert started.wait(10)
    cache.remove_tree(trace)
    assert not trace.exists()
    assert all(f.done() for f in cache._pending)


@pytest.mark.parametrize("block", [blockwrite.BLOCK, 7, 4096])
def test_a_cached_array_is_what_np_save_writes_in_any_block_size(tmp_path, monkeypatch, block):
    """``_save_array`` writes its data a block at a time: the file is byte for byte what
    ``np.save`` writes of the array made contiguous, whatever the block size against the array's
    and the header's (blocks of 7 bytes end inside elements), and reads back memory-mapped;
    arrays of records or objects are refused, never pickled."""
    monkeypatch.setattr(blockwrite, "BLOCK", block)
    arrays = [np.arange(100_003, dtype=np.int64), np.zeros(0, np.int32), np.array(2.5),
              np.arange(24, dtype=np.float32).reshape(4, 6)[:, ::2], np.array([True, False]),
              np.arange(-5, 70_000, dtype=np.int16),
              np.asfortranarray(np.arange(12.).reshape(3, 4)), np.arange(10, dtype=">i4")]
    for k, a in enumerate(arrays):
        ours, theirs = tmp_path / f"a{k}.npy", tmp_path / f"b{k}.npy"
        cache._save_array(ours, a)
        np.save(theirs, np.ascontiguousarray(a))
        assert ours.read_bytes() == theirs.read_bytes(), a
        back = np.load(ours, mmap_mode="c")
        assert back.dtype == a.dtype and np.array_equal(back, np.ascontiguousarray(a))
    for refused in (np.array([object()]), np.array([(1, 2.0)], "i4,f8")):
        with pytest.raises(ValueError, match="not cached"):
            cache._save_array(tmp_path / "r.npy", refused)


def test_a_block_write_that_fails_raises_the_systems_error(tmp_path):
    """A write the system refuses (here a descriptor open for reading) ends the compiled loop;
    the rest is written from Python, which raises the ``OSError`` naming the error."""
    target = tmp_path / "f"
    target.write_bytes(b"")
    fd = os.open(target, os.O_RDONLY)
    try:
        with pytest.raises(OSError) as err:
            blockwrite.write_blocks(fd, np.arange(1000, dtype=np.int64))
        assert err.value.errno == errno.EBADF
    finally:
        os.close(fd)
