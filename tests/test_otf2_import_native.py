"""The OTF2 importer (``hindsight.interop.otf2_import``, events read by compiled callbacks)
gives what the per-record importer it replaced (``tests/otf2_import_reference.py``, events as
``otf2`` package objects) gave, on every OTF2 archive the tests have: the exports of the corpus
traces and of synthetic ones (requests freed, a collective never completed, the interop
benchmark's trace), hand-written foreign and Score-P-like archives (non-blocking collectives,
collective sizes, RMA, GPU streams, OpenMP threads with counters, pthreads), and damaged or
incomplete ones. Same rows, communicators, hosts and skipped counts from ``read_otf2``; same
manifest and table from ``import_otf2``; or the same ``OtfError`` message."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from hindsight import trace as tf
from hindsight.interop.otf2 import OtfError
from hindsight.interop.otf2_export import export_otf2
from hindsight.interop.otf2_import import import_otf2, read_otf2
from otf2_import_reference import import_otf2 as reference_import
from otf2_import_reference import read_otf2 as reference_read
from synthetic import simulate_to_dir
from test_interop import (_foreign_archive, _scorep_collectives_archive, _scorep_nbc_archive,
                          _tiny_archive)
from test_otf2_hybrid import cuda_pthread_archive, openmp_archive

CORPUS = Path(__file__).parent / "corpus"
TRACES = sorted(p.name for p in CORPUS.iterdir() if (p / "manifest.json").is_file())
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))


def _outcome(fn, *args):
    try:
        return "ok", fn(*args)
    except OtfError as exc:
        return "error", str(exc)


def _assert_same_import(anchor: Path, tmp: Path) -> str:
    """Both importers on ``anchor``: the same result; returns "ok" or "error"."""
    new, old = _outcome(read_otf2, anchor), _outcome(reference_read, anchor)
    assert new == old
    a, b = (_outcome(f, anchor, tmp / name) for f, name in ((import_otf2, "new"),
                                                             (reference_import, "old")))
    assert a[0] == b[0], (a, b)
    if a[0] == "error":
        assert a[1] == b[1]
        return "error"
    ta, tb = tf.read_trace(tmp / "new"), tf.read_trace(tmp / "old")
    # a trace's run_id is drawn at random for each trace written
    assert {**ta.manifest, "run_id": None} == {**tb.manifest, "run_id": None}
    assert ta.table.equals(tb.table)
    return "ok"


@pytest.mark.parametrize("name", TRACES)
def test_corpus_exports_import_as_before(name, tmp_path):
    export_otf2(CORPUS / name, tmp_path / "otf2")
    assert _assert_same_import(tmp_path / "otf2", tmp_path) == "ok"


def test_synthetic_exports_import_as_before(tmp_path):
    from interop_speed import make_trace

    freed = [[("isend", 1, 4096, 3), ("free", 0), ("compute", 2000), ("send", 1, 64, 7),
              ("send", 1, 32, 7)],
             [("compute", 1000), ("irecv", 0, 7), ("free", 0), ("recv", 0, 3),
              ("recv", 0, 7)]]
    never = [[("icoll", "Iallreduce", 24), ("compute", 1000), ("wait", [0]),
              ("icoll", "Ibcast", 16, 1), ("wait", [1])],
             [("icoll", "Iallreduce", 24), ("compute", 1000), ("wait", [0]),
              ("icoll", "Ibcast", 16, 1)]]
    sources = [simulate_to_dir(tmp_path / "freed", freed),
               simulate_to_dir(tmp_path / "never", never),
               make_trace(tmp_path / "bench", 3000)]
    for k, src in enumerate(sources):
        export_otf2(src, tmp_path / f"otf2-{k}")
        assert _assert_same_import(tmp_path / f"otf2-{k}", tmp_path / f"out-{k}") == "ok"


def test_foreign_and_scorep_archives_import_as_before(tmp_path):
    archives = {
        "tiny": (_tiny_archive(tmp_path / "tiny", with_groups=True, with_recv=True), "ok"),
        "no groups": (_tiny_archive(tmp_path / "ng", with_groups=False, with_recv=False),
                      "error"),
        "unmatched": (_tiny_archive(tmp_path / "um", with_groups=True, with_recv=False),
                      "error"),
        "nbc": (_scorep_nbc_archive(tmp_path / "nbc", barrier_done=(0, 1)), "ok"),
        "nbc half": (_scorep_nbc_archive(tmp_path / "nbc1", barrier_done=(0,)), "ok"),
        "nbc op": (_scorep_nbc_archive(tmp_path / "nbc2", op_of_reduce="BCAST"), "error"),
        "sizes": (_scorep_collectives_archive(tmp_path / "sizes"), "ok"),
        "foreign": (_foreign_archive(tmp_path / "foreign"), "ok"),
        "openmp": (openmp_archive(tmp_path / "omp", 3, True), "ok"),
        "openmp bare": (openmp_archive(tmp_path / "omp1", 1, False), "ok"),
        "cuda": (cuda_pthread_archive(tmp_path / "cuda"), "ok"),
        "pthread send": (cuda_pthread_archive(tmp_path / "cuda1", send_on_pthread=True),
                         "error"),
    }
    for name, (anchor, expected) in archives.items():
        out = tmp_path / f"out-{name.replace(' ', '-')}"
        out.mkdir()
        assert _assert_same_import(anchor, out) == expected, name


def test_cut_event_files_are_refused(tmp_path):
    """An event file cut short (at several places) or emptied is refused with one error. Not
    compared with the per-record importer: whether the OTF2 C library notices a cut depends on
    bytes past the file's end (the same cut archive read ok in one process and failed in the
    next, under either importer), so the importer also counts the events the definitions
    announce against those it read."""
    export_otf2(CORPUS / "p2p-all-n3", tmp_path / "otf2")
    events = sorted((tmp_path / "otf2" / "traces").glob("*.evt"))
    size = events[0].stat().st_size
    for k, keep in enumerate((0, 22, 25, 64, size // 3, size // 2, size - 7)):
        copy = tmp_path / f"cut-{k}"
        shutil.copytree(tmp_path / "otf2", copy)
        target = copy / "traces" / events[0].name
        target.write_bytes(target.read_bytes()[:keep])
        outcome = _outcome(read_otf2, copy)
        assert outcome[0] == "error", (keep, size)
        assert str(copy) in outcome[1] and "\n" not in outcome[1]


def test_a_missing_event_file_is_named(tmp_path):
    """An archive whose event file of one location is gone: the error names that file (the C
    library said only INVALID_ARGUMENT)."""
    export_otf2(CORPUS / "p2p-all-n3", tmp_path / "otf2")
    gone = sorted((tmp_path / "otf2" / "traces").glob("*.evt"))[1]
    gone.unlink()
    outcome = _outcome(read_otf2, tmp_path / "otf2")
    assert outcome[0] == "error" and f"{gone}, the event file of location" in outcome[1]
    assert outcome[1].endswith("is missing")
    # the anchor and definitions copied without the event folder, or with an empty one
    shutil.rmtree(tmp_path / "otf2" / "traces")
    outcome = _outcome(read_otf2, tmp_path / "otf2")
    assert outcome[0] == "error" and f"its event folder {tmp_path / 'otf2' / 'traces'} is " \
        "missing" in outcome[1]
    (tmp_path / "otf2" / "traces").mkdir()
    outcome = _outcome(read_otf2, tmp_path / "otf2")
    assert outcome[0] == "error" and outcome[1].endswith("is empty")


def test_request_tables_that_start_tiny_grow_and_import_alike(tmp_path, monkeypatch):
    """The conversion's request tables (``pairtable``, in ``otf2_rows.Conversion``) start at 2
    slots: each of the four grows again and again through ``convert``'s NEED_TABLE stop, which
    resumes at the call that needed room, and archives with point-to-point requests,
    non-blocking collectives (completed and not) and ATTR_ROWS import as the per-record
    importer imports them."""
    from hindsight.interop import otf2_rows, pairtable

    real_new, real_grow = pairtable.new_table, otf2_rows.Conversion.grow
    monkeypatch.setattr(pairtable, "new_table", lambda width, capacity=2: real_new(width, capacity))
    grown = set()

    def grow(self, need):
        if need == otf2_rows.NEED_TABLE:
            n = int(self.aux[0])
            grown.update(j for j, t in enumerate(self.tables)
                         if not pairtable.room(t, self.tc, j, n))
        return real_grow(self, need)

    monkeypatch.setattr(otf2_rows.Conversion, "grow", grow)
    export_otf2(CORPUS / "p2p-all-n3", tmp_path / "otf2")
    archives = {"p2p": tmp_path / "otf2",
                "nbc": _scorep_nbc_archive(tmp_path / "nbc0"),
                "nbc half": _scorep_nbc_archive(tmp_path / "nbc1", barrier_done=(0,))}
    for name, anchor in archives.items():
        out = tmp_path / f"out-{name.replace(' ', '-')}"
        out.mkdir()
        assert _assert_same_import(anchor, out) == "ok", name
    assert grown == {0, 1, 2, 3}          # req, nbc, nbc_done, nbc_post


@pytest.mark.parametrize("chunk", [1, 7])
def test_archives_read_chunk_by_chunk_import_alike(chunk, tmp_path, monkeypatch):
    """The events are read a chunk ahead, on a thread, into two buffers in turn
    (``otf2_events.read_events``): read a few events at a time (every call, state and rare
    count crossing chunk edges, both buffers reused many times), archives import as the
    per-record importer imports them, and damaged ones fail with one error."""
    from hindsight.interop import otf2_events

    monkeypatch.setattr(otf2_events, "CHUNK", chunk)
    export_otf2(CORPUS / "p2p-all-n3", tmp_path / "otf2")
    archives = {"p2p": (tmp_path / "otf2", "ok"),
                "nbc half": (_scorep_nbc_archive(tmp_path / "nbc1", barrier_done=(0,)), "ok"),
                "openmp": (openmp_archive(tmp_path / "omp", 3, True), "ok"),
                "cuda": (cuda_pthread_archive(tmp_path / "cuda"), "ok"),
                "unmatched": (_tiny_archive(tmp_path / "um", with_groups=True,
                                            with_recv=False), "error")}
    for name, (anchor, expected) in archives.items():
        out = tmp_path / f"out-{name.replace(' ', '-')}"
        out.mkdir()
        assert _assert_same_import(anchor, out) == expected, name
    events = sorted((tmp_path / "otf2" / "traces").glob("*.evt"))
    copy = tmp_path / "cut"
    shutil.copytree(tmp_path / "otf2", copy)
    target = copy / "traces" / events[0].name
    target.write_bytes(target.read_bytes()[:target.stat().st_size // 2])
    outcome = _outcome(read_otf2, copy)
    assert outcome[0] == "error" and str(copy) in outcome[1] and "\n" not in outcome[1]


@pytest.mark.parametrize("one_pass", [True, False])
def test_records_fields_in_one_pass_or_by_column_import_alike(one_pass, tmp_path, monkeypatch):
    """A chunk's times, ranks, regions and communicators come from one compiled pass
    (``Tables.fields``), location refs of 2**20 and more (Score-P's threads and devices) and
    locations met for the first time looked up after it; or, where the pass cannot take the
    chunk, column by column: archives import as the per-record importer imports them either
    way."""
    from hindsight.interop import otf2_import, otf2_tables

    calls = {"pass": 0, "by column": 0}
    real = otf2_tables.Tables.fields

    def fields(self, recs, offset, res):
        got = real(self, recs, offset, res) if one_pass else None
        calls["pass" if got is not None else "by column"] += 1
        return got

    monkeypatch.setattr(otf2_import.Tables, "fields", fields)
    export_otf2(CORPUS / "p2p-all-n3", tmp_path / "otf2")
    archives = {"p2p": tmp_path / "otf2",
                "openmp": openmp_archive(tmp_path / "omp", 3, True),
                "cuda": cuda_pthread_archive(tmp_path / "cuda"),
                "foreign": _foreign_archive(tmp_path / "foreign")}
    for name, anchor in archives.items():
        out = tmp_path / f"out-{name}"
        out.mkdir()
        assert _assert_same_import(anchor, out) == "ok", name
    assert calls["pass" if one_pass else "by column"] > 0
    assert calls["by column" if one_pass else "pass"] == 0


def _records(anchor: Path, compiled: bool) -> list:
    """Every chunk's records and rare counts as ``otf2_events.read_events`` reads ``anchor``
    with the C callbacks (``compiled``) or numba's."""
    import otf2

    from hindsight.interop import otf2_events as EV

    got = []
    if anchor.is_dir():                     # (an export's folder)
        anchor = anchor / "traces.otf2"
    with otf2.reader.open(str(anchor)) as trace:
        refs = {str(a.name): a._ref for a in trace.definitions.attributes}
        with EV.read_events(trace, refs, compiled=compiled) as chunks:
            for recs, rare in chunks:
                # (an attribute's value column holds whatever the buffer held where its mask
                # bit is clear)
                recs = recs.copy()
                for j in range(len(EV.ATTRS)):
                    recs[(recs[:, EV.MASK] >> j & 1) == 0, EV.A0 + j] = 0
                got.append((recs.tolist(), sorted(rare.items())))
    return got


def test_c_callbacks_read_what_numbas_read(tmp_path, monkeypatch):
    """``otf2_records.c`` (what an import reads with wherever a C compiler builds it) and the
    numba callbacks (``otf2_cfuncs``, where none does) give the same records, attributes
    included, on archives with every record kind, hindsight's attributes and other paradigms;
    and an import where the C file cannot be built reads with numba's, alike."""
    from hindsight.interop import otf2_events as EV

    assert EV.records_library() is not None, "the test machine has a C compiler"
    export_otf2(CORPUS / "p2p-all-n3", tmp_path / "corpus")
    export_otf2(CORPUS / "requests-n2", tmp_path / "requests")
    archives = [tmp_path / "corpus", tmp_path / "requests",
                _scorep_nbc_archive(tmp_path / "nbc", barrier_done=(0,)),
                _scorep_collectives_archive(tmp_path / "sizes"), _foreign_archive(tmp_path / "f"),
                openmp_archive(tmp_path / "omp", 3, True), cuda_pthread_archive(tmp_path / "c")]
    for anchor in archives:
        c, nb = _records(anchor, True), _records(anchor, False)
        assert c == nb and sum(len(r) for r, _ in c) > 0, anchor
    # no compiler: the numba callbacks serve the import
    monkeypatch.setenv("CC", str(tmp_path / "no-such-compiler"))
    assert EV.records_library() is None
    EV.callback_addresses.cache_clear()
    try:
        out = tmp_path / "out"
        out.mkdir()
        assert _assert_same_import(tmp_path / "corpus", out) == "ok"
    finally:
        EV.callback_addresses.cache_clear()


def test_a_bound_no_mapping_can_hold_falls_back_to_a_growing_buffer():
    """The rows' buffer is mapped at the events the definitions announce; a count no mapping
    can hold (a damaged archive's, 2**62 or more) gives the buffer that grows as it fills."""
    from hindsight.interop.otf2_rows import Conversion

    for events in (2**62, 2**64):
        assert Conversion(2, events).rows.shape[1] == 1 << 22
