"""Pickle-API messages whose unpickling takes 60 ms: the traced recv/sendrecv rows must hold the MPI
receive only, the unpickling must follow in the receiver's compute (as pickling precedes a send)."""
import sys
import time

import instrument

UNPICKLE_S = 0.06


def _rebuild(payload):
    time.sleep(UNPICKLE_S)
    return Slow(payload)


class Slow:
    def __init__(self, payload):
        self.payload = payload

    def __reduce__(self):
        return (_rebuild, (self.payload,))


trace_dir = sys.argv[1]
comm = instrument.start(trace_dir, app="slow-unpickle-test", paradigm="pipeline")
rank = comm.Get_rank()
if rank == 0:
    comm.send(Slow(b"x" * 1000), dest=1, tag=1)
    got = comm.sendrecv(Slow(b"y" * 10), dest=1, sendtag=2, source=1, recvtag=3)
else:
    got = comm.recv(source=0, tag=1)
    assert got.payload == b"x" * 1000
    got = comm.sendrecv(Slow(b"z" * 10), dest=0, sendtag=3, source=0, recvtag=2)
instrument.finish(result_verified=isinstance(got, Slow))
