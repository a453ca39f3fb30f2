"""The compiled OTF2 importer against the per-record one (``tests/otf2_import_reference.py``) on
hand-written archives of the kinds the exports and the Score-P-like archives of
``test_otf2_import_native`` leave out: deep call stacks, many records in one call and more rows
than a record chunk (the kernel's buffers grow and it resumes), probes with wildcards, calls with
no op, half a Sendrecv, nested MPI calls, records outside calls, sub-communicators and
COMM_SELF, an OpenMP thread with MPI regions, and the errors of each kind of damage: a Leave
without Enter or of another region, a region or communicator no definition gives, a
communicator of another paradigm, a peer outside its communicator, a completion of a request
never posted, an unknown collective op, a malformed ``hindsight::rows``, a new communicator
without its parent, regions left open."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from hindsight.interop.otf2 import ATTR_NEW_COMM, ATTR_ROWS, UNDEFINED_ROOT, OtfError
from hindsight.interop.otf2_import import read_otf2
from otf2_import_reference import read_otf2 as reference_read
from test_otf2_import_native import _assert_same_import


def _archive(path: Path, script, nranks: int = 2, threads: bool = False) -> Path:
    """An archive of ``nranks`` MPI ranks (and an OpenMP thread on rank 0's process with
    ``threads``) whose events ``script(a)`` writes: ``a.ev[r]`` the rank's event writer,
    ``a.reg(name)`` a region (MPI if named ``MPI_*``), ``a.world``, ``a.sub`` (ranks 1.. of
    world), ``a.self``, ``a.omp`` (an OpenMP team communicator), ``a.raw(ev, record, t,
    *fields)`` a record with plain refs (that no definition may give)."""
    import otf2

    MPI = otf2.Paradigm.MPI
    with otf2.writer.open(str(path), timer_resolution=10**9) as w:
        d = w.definitions
        node = d.system_tree_node("node")
        groups = [d.location_group(f"rank {r}", system_tree_parent=node) for r in range(nranks)]
        locs = [d.location("Master thread", group=g) for g in groups]
        d.group("COMM_LOCATIONS", group_type=otf2.GroupType.COMM_LOCATIONS, paradigm=MPI,
                members=locs)
        world = d.comm("MPI_COMM_WORLD", group=d.group(
            "world", group_type=otf2.GroupType.COMM_GROUP, paradigm=MPI,
            members=list(range(nranks))))
        sub = d.comm("sub", group=d.group("sub", group_type=otf2.GroupType.COMM_GROUP,
                                          paradigm=MPI, members=list(range(1, nranks))),
                     parent=world)
        self_comm = d.comm("MPI_COMM_SELF", group=d.group(
            "self", group_type=otf2.GroupType.COMM_SELF, paradigm=MPI, members=[]))
        thread = d.location("OpenMP thread 1", group=groups[0]) if threads else None
        omp_members = [locs[0], thread] if threads else [locs[0]]
        d.group("OMP locations", group_type=otf2.GroupType.COMM_LOCATIONS,
                paradigm=otf2.Paradigm.OPENMP, members=omp_members)
        omp = d.comm("omp team", group=d.group(
            "omp team", group_type=otf2.GroupType.COMM_GROUP, paradigm=otf2.Paradigm.OPENMP,
            members=list(range(len(omp_members)))))
        regions: dict[str, object] = {}

        def reg(name: str):
            if name not in regions:
                regions[name] = d.region(name, paradigm=MPI if name.startswith("MPI_")
                                         else otf2.Paradigm.USER)
            return regions[name]

        def raw(ev, record: str, t: int, *fields):
            ev._archive._update_timestamps(t)
            ev._location._number_of_events_written += 1
            getattr(ev, f"_{record}")(None, t, *fields)

        a = SimpleNamespace(otf2=otf2, d=d, world=world, sub=sub, self=self_comm, omp=omp,
                            ev=[w.event_writer_from_location(loc) for loc in locs], reg=reg,
                            raw=raw, thread=w.event_writer_from_location(thread) if threads
                            else None)
        script(a)
    return path / "traces.otf2"


def _call(ev, a, t: int, name: str, *records, dt: int = 10, attributes=None) -> int:
    """MPI_``name`` at ``t`` with ``records`` ((record, *fields) each) inside; its end."""
    ev.enter(t, a.reg(f"MPI_{name}"), attributes=attributes)
    for record, *fields in records:
        getattr(ev, record)(t + 1, *fields)
    ev.leave(t + dt, a.reg(f"MPI_{name}"))
    return t + dt + 1


def _growth(a) -> None:
    """Stacks 40 deep, a Waitall of 24 requests, 70 000 rows."""
    for r, ev in enumerate(a.ev):
        t = 10
        for k in range(40):
            ev.enter(t + k, a.reg(f"level {k}"))
        t += 40
        for q in range(24):
            t = _call(ev, a, t, "Isend", ("mpi_isend", 1 - r, a.world, 3, 8, 100 + q))
            t = _call(ev, a, t, "Irecv", ("mpi_irecv_request", 200 + q))
        t = _call(ev, a, t, "Waitall", *[("mpi_isend_complete", 100 + q) for q in range(24)],
                  *[("mpi_irecv", 1 - r, a.world, 3, 8, 200 + q) for q in range(24)])
        for k in reversed(range(40)):
            ev.leave(t, a.reg(f"level {k}"))
            t += 1
        for k in range(35000):
            ev.enter(t, a.reg("work"), attributes=None)
            ev.leave(t + 5, a.reg("work"))
            t += 7


def _kinds(a) -> None:
    """Most kinds of calls and records, on 3 ranks and a thread."""
    C = a.otf2.CollectiveOp
    undef = UNDEFINED_ROOT
    for r, ev in enumerate(a.ev):
        t = 100
        ev.enter(t, a.reg("main"))
        t = _call(ev, a, t + 1, "Init")                     # no op: computation
        t = _call(ev, a, t, "Barrier", ("mpi_collective_begin",),
                  ("mpi_collective_end", C.BARRIER, a.world, undef, 0, 0))
        if r == 0:
            t = _call(ev, a, t, "Ssend", ("mpi_send", 1, a.world, 5, 16))
            t = _call(ev, a, t, "Isend", ("mpi_isend", 2, a.world, 6, 32, 7))
            ev.mpi_request_test(t, 7)
            t = _call(ev, a, t + 1, "Test", ("mpi_request_test", 7))
            t = _call(ev, a, t, "Wait", ("mpi_isend_complete", 7))
            t = _call(ev, a, t, "Sendrecv", ("mpi_send", 1, a.world, 9, 4))   # half of one
        elif r == 1:
            t = _call(ev, a, t, "Probe", ("mpi_probe", undef, a.world, undef, 1))
            t = _call(ev, a, t, "Iprobe", ("mpi_probe", 0, a.world, 5, 2))
            t = _call(ev, a, t + 50, "Recv", ("mpi_recv", 0, a.world, 5, 16))
            t = _call(ev, a, t, "Bcast", ("mpi_collective_begin",),
                      ("mpi_collective_end", C.BCAST, a.sub, 0, 16, 16))
        else:
            t = _call(ev, a, t, "Irecv", ("mpi_irecv_request", 3))
            # a nested MPI call (a tool's wrapper calls MPI inside MPI)
            ev.enter(t, a.reg("MPI_Wait"))
            t = _call(ev, a, t + 1, "Test")
            ev.mpi_irecv(t + 300, 0, a.world, 6, 32, 3)
            ev.leave(t + 301, a.reg("MPI_Wait"))
            t += 302
            t = _call(ev, a, t, "Bcast", ("mpi_collective_begin",),
                      ("mpi_collective_end", C.BCAST, a.sub, 0, 0, 16))
            ev.non_blocking_collective_request(t, 9)           # outside any call
        t = _call(ev, a, t + 400, "Reduce", ("mpi_collective_begin",),
                  ("mpi_collective_end", C.REDUCE, a.self, 0, 8, 8))
        ev.enter(t, a.reg("MPI_Allreduce"))
        ev.enter(t + 1, a.reg("inner user region"))
        ev.leave(t + 2, a.reg("inner user region"))
        ev.mpi_collective_end(t + 3, C.ALLREDUCE, a.world, undef, 24, 24)
        ev.leave(t + 4, a.reg("MPI_Allreduce"))
        ev.leave(t + 5, a.reg("main"))
    th = a.thread
    th.enter(150, a.reg("omp parallel"))
    th.enter(151, a.reg("MPI_Comm_rank"))
    th.leave(152, a.reg("MPI_Comm_rank"))
    th.leave(153, a.reg("omp parallel"))


def test_kinds_and_growth_import_as_before(tmp_path):
    for name, script, nranks, threads in (("growth", _growth, 2, False),
                                          ("kinds", _kinds, 3, True)):
        anchor = _archive(tmp_path / name, script, nranks, threads)
        out = tmp_path / f"out-{name}"
        out.mkdir()
        assert _assert_same_import(anchor, out) == "ok", name


def _started(a) -> None:
    """Score-P's persistent requests: an MPI_Startall holding two sends' and two receives'
    posts, an MPI_Start with one, an MPI_Isend call holding two posts, and their Waitall."""
    for r, ev in enumerate(a.ev):
        peer, t = 1 - r, 10
        t = _call(ev, a, t, "Startall", ("mpi_isend", peer, a.world, 1, 8, 10),
                  ("mpi_isend", peer, a.world, 2, 8, 11), ("mpi_irecv_request", 12),
                  ("mpi_irecv_request", 13))
        t = _call(ev, a, t, "Start", ("mpi_irecv_request", 14))
        t = _call(ev, a, t, "Isend", ("mpi_isend", peer, a.world, 3, 4, 15),
                  ("mpi_isend", peer, a.world, 4, 4, 16))
        t = _call(ev, a, t, "Irecv", ("mpi_irecv_request", 17))
        _call(ev, a, t, "Waitall", *[("mpi_isend_complete", q) for q in (10, 11, 15, 16)],
              ("mpi_irecv", peer, a.world, 1, 8, 12), ("mpi_irecv", peer, a.world, 2, 8, 13),
              ("mpi_irecv", peer, a.world, 3, 4, 14), ("mpi_irecv", peer, a.world, 4, 4, 17))


def test_every_post_of_a_call_is_a_row(tmp_path):
    """Each post record of a call gives its row (a Start/Startall's as the Isend or Irecv it
    starts): a post without its row left its completion unpaired."""
    from hindsight import trace as tf
    from hindsight.interop.otf2_import import import_otf2

    anchor = _archive(tmp_path / "started", _started)
    (tmp_path / "cmp").mkdir()
    assert _assert_same_import(anchor, tmp_path / "cmp") == "ok"
    df = tf.read_trace(import_otf2(anchor, tmp_path / "t")).to_pandas()
    mine = df[df["rank"] == 0]
    anytag = tf.ANY_TAG           # OTF2 does not say what a receive named
    assert list(zip(mine["op"].astype(str), mine["tag"])) == [
        ("Isend", 1), ("Isend", 2), ("Irecv", anytag), ("Irecv", anytag), ("Irecv", anytag),
        ("Isend", 3), ("Isend", 4), ("Irecv", anytag)] + [("Waitall", -1)] * 4 + [
        ("Waitall", k) for k in range(1, 5)]


def _damage(kind: str):
    """A script of 2 ranks exchanging one message, with damage ``kind``."""
    def script(a) -> None:
        C = a.otf2.CollectiveOp
        e0, e1 = a.ev
        _call(e1, a, 5, "Recv", ("mpi_recv", 0, a.world, 1, 8))
        if kind == "leave without enter":
            e0.leave(1, a.reg("f"))
        elif kind == "leave of another":
            e0.enter(1, a.reg("f"))
            e0.leave(2, a.reg("g"))
        elif kind == "unknown region":
            a.raw(e0, "enter", 1, 999)
        elif kind == "unknown region on a thread":
            a.raw(a.thread, "enter", 1, 999)
        elif kind == "unknown comm":
            e0.enter(1, a.reg("MPI_Send"))
            a.raw(e0, "mpi_send", 2, 1, 99, 1, 8)
            e0.leave(3, a.reg("MPI_Send"))
        elif kind == "comm of threads":
            _call(e0, a, 1, "Send", ("mpi_send", 1, a.omp, 1, 8))
        elif kind == "peer outside":
            _call(e0, a, 1, "Send", ("mpi_send", 5, a.world, 1, 8))
        elif kind == "root outside" or kind == "root of sub":
            t = _call(e0, a, 1, "Send", ("mpi_send", 1, a.world, 1, 8))
            _call(e0, a, t, "Bcast", ("mpi_collective_end", C.BCAST, a.sub,
                                      7 if kind == "root outside" else 0, 8, 8))
        elif kind == "never posted":
            t = _call(e0, a, 1, "Send", ("mpi_send", 1, a.world, 1, 8))
            _call(e0, a, t, "Wait", ("mpi_isend_complete", 77))
        elif kind == "unknown collective op":
            t = _call(e0, a, 1, "Send", ("mpi_send", 1, a.world, 1, 8))
            e0.enter(t, a.reg("MPI_Iallreduce"))
            e0.non_blocking_collective_request(t, 4)
            e0.leave(t + 1, a.reg("MPI_Iallreduce"))
            e0.enter(t + 2, a.reg("MPI_Wait"))
            a.raw(e0, "non_blocking_collective_complete", t + 3, 200, a.world._ref,
                  UNDEFINED_ROOT, 8, 8, 4)
            e0.leave(t + 4, a.reg("MPI_Wait"))
        elif kind in ("malformed rows", "new comm without parent"):
            name, typ, value = (ATTR_ROWS, a.otf2.Type.STRING, "0:Send:1") \
                if kind == "malformed rows" else (ATTR_NEW_COMM, a.otf2.Type.UINT32, 3)
            attr = a.d.attribute(name, "", typ)
            _call(e0, a, 1, "Send", ("mpi_send", 1, a.world, 1, 8), attributes={attr: value})
        elif kind == "open regions":
            t = _call(e0, a, 1, "Send", ("mpi_send", 1, a.world, 1, 8))
            e0.enter(t, a.reg("f"))
    return script


# the damage, and what both importers make of it ("dangling": a record names a definition
# that does not exist; the per-record importer fails inside the otf2 package's reader, which
# builds an object per record, the compiled one names the reference, as it did before)
DAMAGE = {"leave without enter": "error", "leave of another": "error",
          "unknown region": "dangling 999", "unknown region on a thread": "dangling 999",
          "unknown comm": "dangling 99", "comm of threads": "error", "peer outside": "error",
          "root outside": "ok", "root of sub": "ok", "never posted": "error",
          "unknown collective op": "error", "malformed rows": "error",
          "new comm without parent": "error", "open regions": "error"}


@pytest.mark.parametrize("kind", DAMAGE)
def test_damaged_records_fail_as_before(kind, tmp_path):
    anchor = _archive(tmp_path / "a", _damage(kind), threads=True)
    out = tmp_path / "out"
    out.mkdir()
    expected = DAMAGE[kind]
    if expected.startswith("dangling"):
        with pytest.raises(OtfError) as new:
            read_otf2(anchor)
        with pytest.raises(OtfError) as old:
            reference_read(anchor)
        ref = expected.split()[1]
        assert str(new.value) == f"{anchor}: damaged OTF2 archive (KeyError: {ref})"
        assert str(old.value).startswith(f"{anchor}: damaged OTF2 archive (")
        return
    # a root outside its communicator is no root; root 0 of "sub" is world rank 1
    assert _assert_same_import(anchor, out) == expected
