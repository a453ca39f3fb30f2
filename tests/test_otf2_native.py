"""The compiled OTF2 exporter (``hindsight.interop.otf2_native``) writes the event files the
per-record exporter wrote (``tests/otf2_reference.py``) byte for byte, and the same definitions
(clock properties, strings, regions, locations with their event counts): on every corpus trace,
on replayed timelines (overlapping calls, clamped times) and on regions recorded after the calls
they enclose; and the same in fresh processes that load the numba cache."""

from __future__ import annotations

import gc
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import replay
from hindsight import trace as tf
from hindsight.interop.otf2_export import export_otf2
from otf2_reference import reference_export_otf2

CORPUS = Path(__file__).parent / "corpus"
TRACES = sorted(p.name for p in CORPUS.iterdir() if (p / "manifest.json").is_file())
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))


def _definitions(anchor: Path) -> tuple:
    import otf2

    with otf2.reader.open(str(anchor)) as t:
        d = t.definitions
        cp = d.clock_properties
        return ((cp.global_offset, cp.trace_length, cp.timer_resolution),
                [str(s) for s in d.strings], [(str(r.name), str(r.paradigm), str(r.region_role))
                                              for r in d.regions],
                [(str(loc.name), loc.number_of_events) for loc in d.locations],
                [(str(c.name), [str(m) for m in c.group.members]) for c in d.comms])


def _assert_same_archive(a: Path, b: Path) -> None:
    files = sorted(p.name for p in (a / "traces").iterdir())
    assert files == sorted(p.name for p in (b / "traces").iterdir())
    for name in files:
        assert (a / "traces" / name).read_bytes() == (b / "traces" / name).read_bytes(), name
    assert _definitions(a / "traces.otf2") == _definitions(b / "traces.otf2")


@pytest.mark.parametrize("name", TRACES)
def test_measured_timeline_as_the_reference(name, tmp_path):
    tr = tf.read_trace(CORPUS / name)
    reference_export_otf2(CORPUS / name, tmp_path / "ref", table=tr.table, manifest=tr.manifest)
    export_otf2(CORPUS / name, tmp_path / "new", table=tr.table, manifest=tr.manifest)
    _assert_same_archive(tmp_path / "ref", tmp_path / "new")
    # read from its files, rank by rank, the trace gives the same archive
    export_otf2(CORPUS / name, tmp_path / "by-rank")
    _assert_same_archive(tmp_path / "ref", tmp_path / "by-rank")


def test_a_trace_is_read_one_rank_at_a_time(tmp_path, monkeypatch):
    """Exported from its files, a trace is never read whole: each read holds one rank's rows
    (the export's memory is the largest rank's), and the archive is the whole trace's."""
    from interop_speed import synthetic_columns
    from hindsight.trace.write import write_trace

    src = write_trace(tmp_path / "src", synthetic_columns(4, 50), manifest={"app": "ranks"})
    tr = tf.read_trace(src)
    reference_export_otf2(src, tmp_path / "ref", table=tr.table, manifest=tr.manifest)
    read = []
    real = tf.read_rank

    def one_rank(source, columns=None):
        t = real(source, columns)
        read.append((source.rank, t.num_rows, columns))
        return t

    def whole(*a, **kw):
        raise AssertionError("the whole trace was read")

    monkeypatch.setattr(tf, "read_rank", one_rank)
    monkeypatch.setattr(tf, "read_trace", whole)
    export_otf2(src, tmp_path / "new")
    _assert_same_archive(tmp_path / "ref", tmp_path / "new")
    per_rank = np.bincount(tr.table.column("rank").to_numpy())
    # a first pass over two columns, then each rank's rows once
    assert [(r, n) for r, n, c in read if c is None] == list(enumerate(per_rank.tolist()))
    assert all(c == ["region", "t_start"] for _, _, c in read[:4])
    assert len(read) == 8



def _uneven(case: str) -> list[dict]:
    """4 ranks of the benchmark's rows, one of them made uneven by ``case``."""
    from interop_speed import synthetic_columns

    cols = synthetic_columns(4, 6)
    c = cols[2]
    rows = lambda keep: {k: (v if k == "region_names" else v[keep])  # noqa: E731
                         for k, v in c.items()}
    if case == "empty rank":
        cols[2] = rows(np.zeros(len(c["op"]), bool))
    elif case == "times before the epoch":
        c["t_start"] -= 10**6
        c["t_end"] -= 10**6
    elif case == "regions of one rank":
        c["region"][::16] = 1
        c["region_names"] = ["work", "solve"]
    elif case == "request ids far apart":        # (numbered by sorting: request_codes)
        has = c["request"] >= 0
        c["request"][has] = c["request"][has] * 2**33 + 7
    return cols


@pytest.mark.parametrize("case", ["empty rank", "rows out of order", "times before the epoch",
                                  "regions of one rank", "request ids far apart"])
def test_uneven_ranks_read_one_at_a_time_as_the_reference(case, tmp_path):
    """Read rank by rank, a trace whose ranks differ (a rank without rows, a rank file out of
    seq order, times before the epoch on one rank, a region name only one rank has, request ids
    spread too wide to be offsets) gives the archive of the whole table."""
    from hindsight.trace.write import write_trace

    src = write_trace(tmp_path / "src", _uneven(case), manifest={"app": "uneven"})
    if case == "rows out of order":             # (the writer puts rows in seq order)
        import pyarrow.parquet as pq

        path = src / "rank-00002.parquet"
        t = pq.read_table(path)
        pq.write_table(t.take(np.random.default_rng(5).permutation(t.num_rows)), path)
        assert not tf.in_rank_seq_order(tf.read_trace(src).table.column("rank").to_numpy(),
                                        tf.read_trace(src).table.column("seq").to_numpy())
    tr = tf.read_trace(src)
    reference_export_otf2(src, tmp_path / "ref", table=tr.table, manifest=tr.manifest)
    export_otf2(src, tmp_path / "new")
    _assert_same_archive(tmp_path / "ref", tmp_path / "new")


@pytest.mark.parametrize("part", ["traces", "traces.def", "traces.otf2"])
def test_a_folder_holding_part_of_an_archive_is_refused_and_kept(part, tmp_path):
    """An archive's event folder, definitions or anchor (a dangling link) already in the
    folder: refused before anything is written, and what was there (and beside it) is left as
    it was."""
    from interop_speed import synthetic_columns
    from hindsight.interop.otf2 import OtfError
    from hindsight.trace.write import write_trace

    src = write_trace(tmp_path / "src", synthetic_columns(2, 2), manifest={"app": "kept"})
    out = tmp_path / "out"
    out.mkdir()
    (out / "beside.txt").write_text("mine")
    if part == "traces":
        (out / "traces").mkdir()
        (out / "traces" / "notes.txt").write_text("mine")
    elif part == "traces.def":
        (out / "traces.def").write_text("mine")
    else:                                       # (a dangling link: written through, else)
        (out / "traces.otf2").symlink_to(tmp_path / "elsewhere.otf2")
    before = sorted(p.relative_to(out) for p in out.rglob("*"))
    with pytest.raises(OtfError, match=f"{part}: exists already"):
        export_otf2(src, out)
    assert sorted(p.relative_to(out) for p in out.rglob("*")) == before
    assert not (tmp_path / "elsewhere.otf2").exists()


def test_a_region_the_first_pass_did_not_meet_is_an_error(tmp_path, monkeypatch):
    """Rank 1's file read again holds a region name the first pass did not see (the file
    changed meanwhile): one TraceError naming it, no archive (its code would be taken for an
    op's)."""
    import pyarrow as pa
    from interop_speed import synthetic_columns
    from hindsight.trace.write import write_trace

    src = write_trace(tmp_path / "src", synthetic_columns(2, 3), manifest={"app": "changed"})
    real = tf.read_rank

    def changed(source, columns=None):
        t = real(source, columns)
        if source.rank == 1 and columns is None:
            i = t.schema.get_field_index("region")
            names = pa.array(["later"] * t.num_rows).dictionary_encode()
            t = t.set_column(i, "region", names.cast(t.schema.field(i).type))
        return t

    monkeypatch.setattr(tf, "read_rank", changed)
    with pytest.raises(tf.TraceError, match="rank-00001.parquet: region names the first read"):
        export_otf2(src, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_failure_while_writing_a_rank_keeps_its_error_and_leaves_nothing(tmp_path,
                                                                            monkeypatch):
    """The compiled writer failing on rank 1: its own error comes out (the rank's event
    writer is closed on the way, and the archive removed)."""
    from interop_speed import synthetic_columns
    from hindsight.interop import otf2_native as native
    from hindsight.trace.write import write_trace

    src = write_trace(tmp_path / "src", synthetic_columns(3, 3), manifest={"app": "failing"})
    real, calls = native.write_rank, []

    def failing(*args):
        calls.append(1)
        if len(calls) == 2:
            raise MemoryError("rank 1")
        return real(*args)

    monkeypatch.setattr(native, "write_rank", failing)
    with pytest.raises(MemoryError, match="rank 1"):
        export_otf2(src, tmp_path / "out")
    assert not (tmp_path / "out").exists()


@pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")
def test_the_libraries_own_failure_is_one_error_and_leaves_nothing(tmp_path, monkeypatch):
    """A definition the OTF2 library cannot write (a string of a call's rows longer than its
    4 MiB definition chunk): one OtfError naming the folder and the library's reason, no
    archive, and no second close of the writer when it is collected (which would print the
    library's error as a traceback)."""
    from hindsight.interop import otf2_export
    from hindsight.interop.otf2 import OtfError

    monkeypatch.setattr(otf2_export, "format_rows", lambda rows: "x" * (5 << 20))
    with pytest.raises(OtfError, match="the OTF2 library could not write the archive"):
        export_otf2(CORPUS / "stencil-n4", tmp_path / "out")     # (MPI_PROC_NULL neighbours)
    assert not (tmp_path / "out").exists()
    gc.collect()


@pytest.mark.parametrize("folder_there", [False, True])
def test_a_rank_found_damaged_midway_leaves_no_archive(folder_there, tmp_path, monkeypatch):
    """Rank 2's file fails to read after ranks 0 and 1 were written: the error is raised and
    no part of the archive is left (nor the folders the export made; a folder that was there
    keeps what it held)."""
    from interop_speed import synthetic_columns
    from hindsight.trace.write import write_trace

    src = write_trace(tmp_path / "src", synthetic_columns(4, 20), manifest={"app": "damaged"})
    real = tf.read_rank

    def damaged(source, columns=None):
        if source.rank == 2 and columns is None:
            raise tf.TraceError(f"{source.files[0]}: corrupt or truncated Parquet data")
        return real(source, columns)

    monkeypatch.setattr(tf, "read_rank", damaged)
    out = tmp_path / "made" / "out"
    if folder_there:
        out.mkdir(parents=True)
        (out / "beside.txt").write_text("mine")
    with pytest.raises(tf.TraceError, match="rank-00002"):
        export_otf2(src, out)
    if folder_there:
        assert [p.name for p in out.iterdir()] == ["beside.txt"]
    else:
        assert not (tmp_path / "made").exists()      # (and the parent it made)


@pytest.mark.parametrize("name", ["stencil-n4", "requests-n2"])
def test_replayed_timeline_as_the_reference(name, tmp_path):
    tr = tf.read_trace(CORPUS / name)
    res = replay.run(replay.prepare(CORPUS / name, use_cache=False), "loggps", {"L": "5us"})
    table = res.to_arrow()
    reference_export_otf2(CORPUS / name, tmp_path / "ref", table=table, manifest=tr.manifest)
    export_otf2(CORPUS / name, tmp_path / "new", table=table, manifest=tr.manifest)
    _assert_same_archive(tmp_path / "ref", tmp_path / "new")


def test_regions_recorded_after_their_calls_as_the_reference(tmp_path):
    """A region's row after the calls inside it (recorded when it ends), calls that overlap
    their predecessor: the compiled planner sorts and clamps as the reference did."""
    from interop_speed import ROWS_PER_ITER as K
    from interop_speed import synthetic_columns
    from hindsight.trace.write import write_trace

    cols = synthetic_columns(3, 30)
    for c in cols:
        c["t_end"][0::K] = c["t_end"][7::K] + 50            # the region encloses the calls
        order = np.arange(len(c["op"])).reshape(-1, K)[:, [*range(1, K), 0]].ravel()
        for key in c:
            if key != "region_names":
                c[key] = c[key][order]
        c["t_start"][1::3 * K] -= 30                       # an Isend starts inside the Irecv
    src = write_trace(tmp_path / "src", cols, manifest={"app": "nested"})
    reference_export_otf2(src, tmp_path / "ref")
    export_otf2(src, tmp_path / "new")
    _assert_same_archive(tmp_path / "ref", tmp_path / "new")


def test_fresh_processes_write_the_same(tmp_path):
    """The numba cache holds no address of the process that compiled it (the OTF2 C functions
    are passed in): two fresh processes, the second loading what the first cached, write what
    this one writes."""
    src = CORPUS / "hddi-pipeline-n4"
    export_otf2(src, tmp_path / "here")
    code = "import sys; from hindsight.interop.otf2_export import export_otf2; " \
        "export_otf2(sys.argv[1], sys.argv[2])"
    for k in range(2):
        p = subprocess.run([sys.executable, "-c", code, str(src), str(tmp_path / f"p{k}")],
                           capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr
        _assert_same_archive(tmp_path / "here", tmp_path / f"p{k}")


@pytest.mark.parametrize("comm, members, what", [(7, None, "which the manifest does not define"),
                                                 (7, [1, 2], "rank 0 is not a member of communicator 7")])
def test_bad_communicators_fail_as_the_reference(comm, members, what, tmp_path):
    """A row on a communicator the manifest does not define, or whose peer is not in it: one
    OtfError naming the trace, the same as the reference's."""
    from interop_speed import synthetic_columns
    from hindsight.interop.otf2 import OtfError
    from hindsight.trace.write import write_trace

    cols = synthetic_columns(3, 2)
    cols[2]["comm"][5] = comm            # rank 2's Sendrecv_send
    src = write_trace(tmp_path / "src", cols, manifest={"app": "bad"},
                      communicators={comm: members} if members else None)
    tr = tf.read_trace(src)
    errors = []
    for k, export in enumerate((reference_export_otf2, export_otf2)):
        with pytest.raises(OtfError, match=what) as e:
            export(src, tmp_path / f"o{k}", table=tr.table, manifest=tr.manifest)
        errors.append(str(e.value))
    assert errors[0] == errors[1]
