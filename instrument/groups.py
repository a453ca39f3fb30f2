"""Communicators made from a group, with no parent communicator (MPI 4, the sessions model):
`MPI.Intracomm.Create_from_group` and `MPI.Intercomm.Create_from_groups`.

Both are class methods of mpi4py's extension types, which cannot be patched, so the traced
program's `MPI.Intracomm` and `MPI.Intercomm` (instrument/run.py) are the subclasses below:
their `Create_from_group(s)` are traced, and `isinstance`/`issubclass` against them answer as
against mpi4py's own classes (a traced communicator, any real one), so a program sees no
difference. `Intracomm.Create_from_group` returns a traced communicator, recorded and numbered
as a `Create_group`'s (a `Comm_create` row on itself, its id derived from COMM_WORLD's and its
members: instrument.comm._adopt_by_members); `Intercomm.Create_from_groups` is counted
(`untraced_calls`) and returns an intercommunicator whose traffic is counted, as
`Create_intercomm` does (instrument.untraced).
"""

from __future__ import annotations

from mpi4py import MPI

from hindsight.trace import core as tf
from instrument import comm as _comm
from instrument import untraced as _untraced
from instrument.matched import SameAs

#: `base` of the ids of communicators made from a group (instrument.comm._adopt_by_members):
#: apart from Create_group's (-1 ...) and Merge's (-2^20 ...)
_FROM_GROUP_BASE = -(1 << 21)


class Intracomm(MPI.Intracomm, metaclass=SameAs):
    """The traced program's `MPI.Intracomm`."""

    @classmethod
    def Create_from_group(cls, group: MPI.Group, stringtag: str = "org.mpi4py",
                          info: MPI.Info = MPI.INFO_NULL, errhandler=None):
        t0 = _comm._now()
        new = MPI.Intracomm.Create_from_group(group, stringtag, info, errhandler)
        t1 = _comm._now()
        if new == MPI.COMM_NULL:
            return new
        return _comm._adopt_by_members(new, tf.COMM_WORLD_ID, _FROM_GROUP_BASE, t0, t1)


class Intercomm(MPI.Intercomm, metaclass=SameAs):
    """The traced program's `MPI.Intercomm`."""

    @classmethod
    def Create_from_groups(cls, local_group: MPI.Group, local_leader: int,
                           remote_group: MPI.Group, remote_leader: int,
                           stringtag: str = "org.mpi4py", info: MPI.Info = MPI.INFO_NULL,
                           errhandler=None):
        _untraced.count("Intercomm.Create_from_groups")
        return _untraced.TracedIntercomm(MPI.Intercomm.Create_from_groups(
            local_group, local_leader, remote_group, remote_leader, stringtag, info, errhandler))
