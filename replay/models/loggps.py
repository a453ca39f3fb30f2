"""LogGPS (Ino, Fujimoto, Hagihara 2001; summarised in paper 004 §2): LogGP plus the threshold S.

Messages of k <= S bytes are eager, exactly as in ``loggp``. Above S the sender synchronises with the
receiver (paper 004 Fig. 1, costs T_2 and T_3): a request-to-send travels to the receiver, the
receiver answers when its receive is posted, then the data moves::

    t_s   = max(t, NIC of p free)                   sender posts (CPU busy o_s(k))
    ready = max(t_s + o_s(k) + L, receive posted)   request has arrived and the receive exists
    send completes     ready + H + (k-1)·G          clear-to-send back, then the data is injected
    arrival at q       ready + 2H + (k-1)·G
    receive completes  max(arrival, receive NIC free) + o_r(k)

    H = max(L, 0) + o_hop                           a hop the library makes on its own
                                                    (``replay.rules.protocol_hop``)

LogGPS charges each hop L; a real library also works on each control message at both ends (its
progress engine takes the request, sends the clear to send, takes that and starts the data), and
where the calls' overheads exceed the small-message one-way time (L < 0, every MPI path of this
machine) max(L, 0) alone would make the handshake free. ``o_hop`` is that work: ``hindsight
calibrate`` measures it as half the step of the one-way time at S (the one-way time of the sizes
just above S less the eager line's; TCP over loopback here 4.2 us, shared memory 1.2 us), 0 when
not set: the hops take L⁺ alone, as before the parameter.

Overheads follow paper 004: o = o'_a + o'_b·P + O·k, per side.

``progress`` says when "the receiver answers" (``replay.kernel.handshake_time``):

    async    ready = max(t_s + o_s(k) + L, receive posted)            (the rule above)
    in-call  the request finds a receive already posted: ready = receive posted;
             else ready = the first time >= t_s + o_s(k) + L the receiver is inside an MPI call

``in-call`` is how MPICH behaves without asynchronous progress (MPIR_CVAR_ASYNC_PROGRESS=0, its
default; MPI 4.0 §2.9 allows either): a rendezvous request that arrives while the receiver
computes waits for its next MPI call. ``hindsight calibrate`` measures which one the library
does (its progress probe) and writes it to the profile.

``ack_cells`` (rule ``ack_cells``, ``replay.rules.ack_cells``; with ``in-call`` only): a
rendezvous send completes when its sender reads the receiver's acknowledgement, which travels
in one of the receiver's ``ack_cells`` cells (MPICH shared memory: 64,
MPIR_CVAR_CH4_SHM_POSIX_IQUEUE_NUM_CELLS). The sender reads acknowledgements only inside MPI
calls (not in Isend), so a receiver that completes more than ``ack_cells`` receives while the
sender computes holds the rest in its postponed queue, and those leave only in the receiver's
next call that waits: the sender's Wait lasts until then::

    a_j = e_j                                    a cell is free (fewer than ack_cells unread)
          first waiting call of the receiver >= the time one is         otherwise
    c_j = first call of the sender (not a post) >= a_j;  a held send ends no earlier than c_j

(e_j: the end of the receiver's j-th rendezvous receive, from any sender, in completion order;
the cells are the receiving process's; ``replay.rules.ack_cells`` has the full rule).
``hindsight calibrate``'s queue probe measures ``ack_cells`` (inf when no limit shows).

``o_unexpected``, ``O_unexpected`` (rule ``unexpected_copy``, ``replay.rules.unexpected_copy``):
an eager message (k <= S) whose data arrived before its receive was posted (in the replayed
timeline) waited in the library's unexpected queue; the call that completes its receive (Recv,
the Wait of an Irecv or of a Sendrecv's receive, a Recv after a Probe) copies it out and ends
u(k) = o_unexpected + O_unexpected·k later than an expected one::

    receive completes  max(arrival, receive NIC free) + o_r(k) + u(k)   if arrival <= posted

MPICH (ch4, ``MPIDIG_do_irecv`` -> ``MPIDIG_copy_from_unexp_req``) copies at the post; the
replay charges it at the completion. Both 0 (the default): off. ``hindsight calibrate``'s
unexpected probe measures them, and then stores o_recv as the expected receive's overhead (its
receive probe times a receive whose message is already there, an unexpected one): see
docs/calibration.md.
"""

from __future__ import annotations

from replay.models.base import Param, register
from replay.models.loggp import LogGP


@register
class LogGPS(LogGP):
    NAME = "loggps"
    PARAMS: dict[str, Param] = dict(LogGP.PARAMS)
    PARAMS["S"] = Param("bytes", "64KiB", "rendezvous threshold: larger messages synchronise",
                        allow_inf=True)
    PARAMS["progress"] = Param("choice", "async", "when a rendezvous handshake happens: async "
                               "(on arrival) or in-call (inside the receiver's next MPI call)",
                               choices=("async", "in-call"))
    PARAMS["ack_cells"] = Param("count", "inf", "rule ack_cells (progress in-call only): "
                                "rendezvous completions a receiver can acknowledge before the "
                                "sender reads them; more wait for the receiver's next waiting "
                                "call (inf: no limit)", minimum=1.0, allow_inf=True)
    PARAMS["o_hop"] = Param("time", 0.0, "the library's own work per protocol hop (a "
                            "rendezvous's clear to send and data, a passive target's reply), "
                            "on top of max(L, 0)")
    PARAMS["o_unexpected"] = Param("time", 0.0, "rule unexpected_copy: the extra time of a "
                                   "receive whose eager message arrived before it was posted "
                                   "(copy out of the unexpected queue), per message")
    PARAMS["O_unexpected"] = Param("time_per_byte", 0.0, "rule unexpected_copy: the same, "
                                   "per byte")
    RETIRED = {"semantics": "LogGOPSim's rules are a model of their own: --model loggopsim"}
