"""Traced one-sided communication: `MPI.Win` in a traced program (docs/trace-format.md, "One-sided
communication").

A window is made collectively over a communicator and gets an id of its own, derived as a
communicator's is (`derived_comm_id` of the parent, the parent's creation count, the lowest
member), with the same members: its rows carry that id in `comm`, so fences and frees form that
window's collective sequence, apart from the parent's collectives. Recorded: the constructors
(`Win_create` on the parent, `peer` = the window's id, as a communicator's creation row), the
data operations (`Put`, `Get`, `Accumulate`, `Get_accumulate`,
`Fetch_and_op`, `Compare_and_swap`: `peer` = the target as a world rank, `nbytes` = the bytes
moved one way), the synchronisation (`Win_fence`, `Win_lock`/`Win_unlock` with the target,
`Win_lock_all`/`Win_unlock_all`, `Win_flush`, `Win_sync`), general active-target
synchronisation (`Post` and `Start`: one `Win_post`/`Win_start` row per member of their group,
`peer` = its world rank, all with the call's times; `Complete`, `Wait`: one row; `Test`: a
`Win_test` row when it returns true, none when it returns false, as a request's `Test`) and
`Win_free`. Request-based operations (`Rput`...) are counted (instrument.untraced), not
recorded, as is every call on a window made over a communicator the tracer does not know.
"""

from __future__ import annotations

from time import perf_counter_ns as _now
from typing import Any

from mpi4py import MPI

from hindsight.trace import core as tf
from instrument import completion as _completion
from instrument import untraced as _untraced
from instrument.sizes import nbytes as _nbytes
from instrument.tracer import RECORD as _ROW, pack as _pack

_W = MPI.Win
OP = tf.OP_CODE
#: constructor -> position of its `comm` argument
_CONSTRUCTORS = {"Create": 3, "Allocate": 3, "Allocate_shared": 3, "Create_dynamic": 1}
#: Window calls counted, not recorded (no row model).
UNRECORDED = ("Rput", "Rget", "Raccumulate", "Rget_accumulate")

#: windows made on COMM_SELF so far on this rank (a parent the tracer does not wrap)
_self_created = [0]
#: COMM_WORLD's group, made at the first Post or Start (the group's ranks are translated to it)
_world_group: list[MPI.Group] = []


class TracedWin(_W):
    """An RMA window whose calls are recorded (docs/trace-format.md)."""

    # _id: the window's id (-1: made on a communicator the tracer does not know: its calls are
    # counted, not recorded); _w: world rank of each window rank
    __slots__ = ("_id", "_w")

    def __new__(cls, win: MPI.Win | None = None):
        self = _W.__new__(cls, win)
        self._id = -1
        self._w = ()
        return self

    def _rec(self, op: int, t0: int, t1: int, target: int = -1, nbytes: int = -1) -> None:
        self._rec_world(op, t0, t1, self._w[target] if target >= 0 else -1, nbytes)

    def _rec_world(self, op: int, t0: int, t1: int, peer: int, nbytes: int = -1) -> None:
        """One row of this window; ``peer`` a world rank (-1: none)."""
        T = _completion._T     # the tracer of this process (``instrument.comm.set_tracer``)
        o = T.off
        _pack(T.buf, o, op, T.region, t0, -1, peer, -1, self._id, nbytes, -1, -1, t1)
        o += _ROW
        T.off = o
        if o >= T.end:
            T.roll()


def _make(name: str):
    real = _W.__dict__[name]
    at = _CONSTRUCTORS[name]

    def make(cls, *args: Any, **kwargs: Any) -> TracedWin:
        comm = kwargs.get("comm", args[at] if len(args) > at else MPI.COMM_SELF)
        t0 = _now()
        win = real.__get__(None, cls)(*args, **kwargs)
        t1 = _now()
        if getattr(comm, "_id", None) is not None:   # a traced communicator
            pid, members = comm._id, comm._members()
            index = comm._ncreated
            comm._ncreated += 1
        elif comm == MPI.COMM_SELF:
            pid, members = tf.COMM_SELF_ID, [MPI.COMM_WORLD.Get_rank()]
            index = _self_created[0]
            _self_created[0] += 1
        else:
            _untraced.count("Win." + name)
            return win
        wid = tf.derived_comm_id(pid, index, min(members))
        T = _completion._T
        T.add_communicator(wid, members)
        o = T.off
        _pack(T.buf, o, OP["Win_create"], T.region, t0, -1, wid, -1, pid, -1, -1, -1, t1)
        o += _ROW
        T.off = o
        if o >= T.end:
            T.roll()
        win._id = wid
        win._w = tuple(members)
        return win
    make.__name__ = name
    make.__doc__ = getattr(_W, name).__doc__
    return classmethod(make)


def _counted(name: str) -> None:
    """A window call on a window the tracer does not know: counted, as untraced calls are."""
    _untraced.count("Win." + name)


def _arg(args: tuple, kwargs: dict, at: int, keyword: str) -> Any:
    """Argument ``at`` of a call, given by position or by ``keyword`` (None: not given)."""
    return args[at] if len(args) > at else kwargs.get(keyword)


def _traced(name: str, record) -> Any:
    """The traced window call ``name``: timed, then ``record(self, args, kwargs, t0, t1,
    result)`` writes its rows; on a window the tracer does not know, counted instead."""
    real = getattr(_W, name)

    def method(self, *args: Any, **kwargs: Any) -> Any:
        if self._id < 0:
            _counted(name)
            return real(self, *args, **kwargs)
        t0 = _now()
        result = real(self, *args, **kwargs)
        t1 = _now()
        record(self, args, kwargs, t0, t1, result)
        return result
    method.__name__ = name
    method.__doc__ = real.__doc__
    return method


def _call(name: str, op_name: str, target: tuple[int, str] | None = None,
          size: tuple[int, str] | None = None):
    """The traced window call ``name``, recorded as ``op_name``: its target rank is the
    argument ``target`` (position, keyword), the bytes it moves one way those of the buffer
    ``size``; None: the row has none."""
    code = OP[op_name]

    def record(self, args, kwargs, t0, t1, _result) -> None:
        rank = -1 if target is None else _arg(args, kwargs, *target)
        nb = -1 if size is None else _nbytes(_arg(args, kwargs, *size))
        self._rec(code, t0, t1, -1 if rank is None else int(rank), nb)
    return _traced(name, record)


def _world_ranks(group: MPI.Group) -> list[int]:
    """The world ranks of ``group``'s members, in group rank order (-1: a process outside
    COMM_WORLD)."""
    if not _world_group:
        _world_group.append(MPI.COMM_WORLD.Get_group())
    ranks = group.Translate_ranks(None, _world_group[0])
    return [-1 if w == MPI.UNDEFINED else int(w) for w in ranks]


def _group_call(name: str, op_name: str):
    """``Post`` or ``Start``: one row per member of the group (its world rank in ``peer``), all
    with the call's times; one row with peer -1 for an empty group."""
    code = OP[op_name]

    def record(self, args, kwargs, t0, t1, _result) -> None:
        for w in _world_ranks(_arg(args, kwargs, 0, "group")) or [-1]:
            self._rec_world(code, t0, t1, w)
    return _traced(name, record)


def _test_record(self, args, kwargs, t0, t1, done) -> None:
    if done:     # the exposure epoch ended; a Test that returns false is not recorded
        self._rec_world(OP["Win_test"], t0, t1, -1)


for _name in _CONSTRUCTORS:
    setattr(TracedWin, _name, _make(_name))
_ORIGIN, _RESULT = (0, "origin"), (1, "result")
for _name, _target, _size in (
        ("Put", (1, "target_rank"), _ORIGIN), ("Get", (1, "target_rank"), _ORIGIN),
        ("Accumulate", (1, "target_rank"), _ORIGIN),
        ("Get_accumulate", (2, "target_rank"), _RESULT),
        ("Fetch_and_op", (2, "target_rank"), _RESULT),
        ("Compare_and_swap", (3, "target_rank"), (2, "result"))):
    setattr(TracedWin, _name, _call(_name, _name, _target, _size))
for _name, _op, _target in (
        ("Fence", "Win_fence", None), ("Lock", "Win_lock", (0, "rank")),
        ("Unlock", "Win_unlock", (0, "rank")), ("Lock_all", "Win_lock_all", None),
        ("Unlock_all", "Win_unlock_all", None), ("Flush", "Win_flush", (0, "rank")),
        ("Flush_local", "Win_flush", (0, "rank")), ("Flush_all", "Win_flush", None),
        ("Flush_local_all", "Win_flush", None), ("Sync", "Win_sync", None),
        ("Complete", "Win_complete", None), ("Wait", "Win_wait", None),
        ("Free", "Win_free", None)):
    setattr(TracedWin, _name, _call(_name, _op, _target))
TracedWin.Post = _group_call("Post", "Win_post")
TracedWin.Start = _group_call("Start", "Win_start")
TracedWin.Test = _traced("Test", _test_record)
_untraced.add_counters(TracedWin, _W, UNRECORDED, "Win.")
