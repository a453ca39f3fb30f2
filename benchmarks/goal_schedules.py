"""Generated GOAL schedules (LogGOPSim's input language) for the side-by-side benchmarks.

Four patterns of the kind LogGOPSim is used for, each repeated until the schedule has about the
requested number of operations (send, recv, calc):

* ``pairwise``: every round, each rank exchanges with ``r XOR s`` for s = 1..P-1 (P a power of 2);
* ``ring``: every round, P-1 steps of send to r+1 / receive from r-1;
* ``allreduce``: binomial-tree reduce to rank 0 then binomial broadcast, round after round;
* ``backlog``: binomial-tree reduce, round after round, where a rank sends its round's result as
  soon as it has it: leaves run ahead, and every parent's unexpected queue grows with the rounds,
  so a simulator that scans its queues for a match spends time quadratic in the rounds.

Each rank's operations form one dependency chain (a send and a receive of one step may run
together; the step's ``calc`` requires both). ``python benchmarks/goal_schedules.py KIND OPS OUT``
writes one.
"""

from __future__ import annotations

import argparse
from pathlib import Path

KINDS = ("pairwise", "ring", "allreduce", "backlog")


def _steps_pairwise(P: int, r: int):
    """One round's steps of rank r: (sends, receives) as lists of (peer, tag)."""
    return [([(r ^ s, s)], [(r ^ s, s)]) for s in range(1, P)]


def _steps_ring(P: int, r: int):
    return [([((r + 1) % P, s)], [((r - 1) % P, s)]) for s in range(P - 1)]


def _children(P: int, r: int) -> list[int]:
    """Binomial-tree children of r (rooted at 0), nearest first: r+1, r+2, r+4, ..."""
    out, k = [], 1
    while k < P and not r & k:
        if r + k < P:
            out.append(r + k)
        k <<= 1
    return out


def _parent(r: int) -> int:
    return r - (r & -r) if r else -1


def _steps_reduce(P: int, r: int):
    steps = [([], [(c, 1)]) for c in _children(P, r)]
    if r:
        steps.append(([(_parent(r), 1)], []))
    return steps


def _steps_allreduce(P: int, r: int):
    down = [([(c, 2)], []) for c in reversed(_children(P, r))]
    up = ([], [(_parent(r), 2)]) if r else None
    return _steps_reduce(P, r) + ([up] if up else []) + down


def _rank_block(steps, rounds: int, nbytes: int, calc_ns: int, out: list[str]) -> None:
    """Append one rank's operations: each step's sends and receives, then a calc requiring them,
    which the next step's operations require."""
    prev = None
    n = 0
    for rnd in range(rounds):
        for sends, recvs in steps:
            ops = []
            for peer, tag in sends:
                out.append(f"l{n}: send {nbytes}b to {peer} tag {tag + 8 * rnd}")
                ops.append(n)
                n += 1
            for peer, tag in recvs:
                out.append(f"l{n}: recv {nbytes}b from {peer} tag {tag + 8 * rnd}")
                ops.append(n)
                n += 1
            out.append(f"l{n}: calc {calc_ns}")
            if prev is not None:
                out.extend(f"l{o} requires l{prev}" for o in ops)
            out.extend(f"l{n} requires l{o}" for o in ops)
            prev = n
            n += 1


def make_schedule(kind: str, target_ops: int, P: int = 64, nbytes: int = 1024,
                  calc_ns: int = 1000) -> tuple[str, int]:
    """GOAL text of about ``target_ops`` operations and the exact count."""
    step_of = {"pairwise": _steps_pairwise, "ring": _steps_ring, "allreduce": _steps_allreduce,
               "backlog": _steps_reduce}[kind]
    steps = [step_of(P, r) for r in range(P)]
    per_round = sum(sum(len(s) + len(v) + 1 for s, v in st) for st in steps)
    rounds = max(1, round(target_ops / per_round))
    lines = [f"// {kind}, {P} ranks, {rounds} rounds, {nbytes} B messages", f"num_ranks {P}"]
    for r in range(P):
        lines.append(f"rank {r} {{")
        _rank_block(steps[r], rounds, nbytes, calc_ns, lines)
        lines.append("}")
    return "\n".join(lines) + "\n", per_round * rounds


def write_schedule(kind: str, target_ops: int, out: Path | str, **kw) -> int:
    text, nops = make_schedule(kind, target_ops, **kw)
    Path(out).write_text(text)
    return nops


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kind", choices=KINDS)
    ap.add_argument("ops", type=float)
    ap.add_argument("out")
    ap.add_argument("-P", type=int, default=64)
    ap.add_argument("--bytes", type=int, default=1024)
    a = ap.parse_args()
    n = write_schedule(a.kind, int(a.ops), a.out, P=a.P, nbytes=a.bytes)
    print(f"{a.out}: {a.kind}, {n} operations")


if __name__ == "__main__":
    main()
