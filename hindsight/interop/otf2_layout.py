"""The layout of the OTF2 import's event records (``otf2_events``): the record kinds, the
fields of a record, the attributes it carries and the state array its callbacks (C,
``otf2_records.c``, or numba, ``otf2_cfuncs``) append through."""

from __future__ import annotations

from hindsight.interop.otf2 import (
    ATTR_COMM,
    ATTR_CPU,
    ATTR_IRECV_BYTES,
    ATTR_NBYTES,
    ATTR_NEW_COMM,
    ATTR_ROWS,
    ATTR_SIZE,
    ATTR_SOURCE,
    ATTR_TAG,
)

# record kinds
(ENTER, LEAVE, SEND, ISEND, ISEND_COMPLETE, IRECV_REQUEST, RECV, IRECV, REQUEST_TEST,
 COLL_BEGIN, COLL_END, NBC_REQUEST, NBC_COMPLETE, PROBE) = range(14)
# the OTF2 record type names of the kinds, as the ``otf2`` package names its event classes
KIND_NAMES = ("Enter", "Leave", "MpiSend", "MpiIsend", "MpiIsendComplete", "MpiIrecvRequest",
              "MpiRecv", "MpiIrecv", "MpiRequestTest", "MpiCollectiveBegin",
              "MpiCollectiveEnd", "NonBlockingCollectiveRequest",
              "NonBlockingCollectiveComplete", "MpiProbe")
# fields per kind: Enter/Leave F0 region; messages F0 peer, F1 comm, F2 tag, F3 length
# (unsigned), F4 request (unsigned); request records F4; collective ends F0 op, F1 comm, F2
# root, F3 sizeSent, F5 sizeReceived, F4 request; MpiProbe F0 sender, F1 comm, F2 tag
KIND, LOC, TIME, F0, F1, F2, F3, F4, F5, MASK, A0 = range(11)
# the attributes the importer reads, by name (their refs come from the definitions)
ATTRS = (ATTR_SIZE, ATTR_CPU, ATTR_NEW_COMM, ATTR_COMM, ATTR_ROWS, ATTR_SOURCE, ATTR_TAG,
         ATTR_IRECV_BYTES, ATTR_NBYTES)
WIDTH = A0 + len(ATTRS)
# the state array
_S_BUF, _S_CAP, _S_N, _S_NATTR, _S_GETATTR, _S_REFS = 0, 1, 2, 3, 4, 5
_S_SCRATCH = _S_REFS + len(ATTRS)       # ref, type, value of the attribute being read
_S_LEN = _S_SCRATCH + 3
_TYPE_STRING = 11
