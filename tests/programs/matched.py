"""Matched probes and their messages' receives, every form (run with 2 ranks): rank 0 sends
six messages of known sizes and tags; rank 1 takes each with another matched-probe form."""
import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
if comm.rank == 0:
    for tag, n in ((1, 10), (2, 20), (3, 30), (4, 40)):
        comm.Send(np.full(n, tag, np.int32), 1, tag)
    comm.send({"five": 5}, 1, 5)
    comm.send([6] * 6, 1, 6)
    comm.Barrier()
else:
    st = MPI.Status()
    buf = np.empty(10, np.int32)
    comm.Mprobe(0, 1, st).Recv(buf)                   # Probe + Recv
    assert st.Get_count(MPI.BYTE) == 40 and (buf == 1).all()
    buf = np.empty(20, np.int32)
    msg = None
    while msg is None:
        msg = comm.Improbe(0, 2)                      # Iprobe (once found) + Recv
    msg.Recv(buf)
    assert (buf == 2).all()
    buf = np.empty(30, np.int32)
    req = MPI.Message.Probe(comm, 0, 3).Irecv(buf)    # Probe + Irecv post + Wait
    req.Wait()
    assert (buf == 3).all()
    msg = comm.Mprobe(0, 4)
    assert isinstance(msg, MPI.Message)
    buf = np.empty(40, np.int32)
    msg.Irecv(buf).Wait()
    assert (buf == 4).all()
    assert comm.mprobe(0, 5).recv() == {"five": 5}   # Probe + Recv, unpickled after
    assert comm.improbe(0, 99) is None                # nothing there: a Poll row
    assert comm.mprobe(0, 6).irecv().wait() == [6] * 6
    comm.Barrier()
    print("matched: all received")
