"""LogGPS (Ino, Fujimoto, Hagihara 2001; summarised in paper 004 §2): LogGP plus the threshold S.

Messages of k <= S bytes are eager, exactly as in ``loggp``. Above S the sender synchronises with the
receiver (paper 004 Fig. 1, costs T_2 and T_3): a request-to-send travels to the receiver, the
receiver answers when its receive is posted, then the data moves::

    t_s   = max(t, NIC of p free)                   sender posts (CPU busy o_s(k))
    ready = max(t_s + o_s(k) + L, receive posted)   request has arrived and the receive exists
    send completes     ready + L + (k-1)·G          clear-to-send back, then the data is injected
    arrival at q       ready + 2L + (k-1)·G
    receive completes  max(arrival, receive NIC free) + o_r(k)

Overheads follow paper 004: o = o'_a + o'_b·P + O·k, per side.

``progress`` says when "the receiver answers" (``replay.kernel.handshake_time``):

    async    ready = max(t_s + o_s(k) + L, receive posted)            (the rule above)
    in-call  the request finds a receive already posted: ready = receive posted;
             else ready = the first time >= t_s + o_s(k) + L the receiver is inside an MPI call

``in-call`` is how MPICH behaves without asynchronous progress (MPIR_CVAR_ASYNC_PROGRESS=0, its
default; MPI 4.0 §2.9 allows either): a rendezvous request that arrives while the receiver
computes waits for its next MPI call. ``hindsight calibrate`` measures which one the library
does (its progress probe) and writes it to the profile.
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
    RETIRED = {"semantics": "LogGOPSim's rules are a model of their own: --model loggopsim"}
