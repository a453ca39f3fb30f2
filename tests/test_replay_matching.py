"""Message matching (replay.matching.match_messages) on small synthetic traces."""

from __future__ import annotations


from hindsight.trace import read_trace
from replay.matching import match_messages
from synthetic import ANY, simulate, simulate_to_dir, write_trace


def _rows(table, idx):
    d = table.to_pydict()
    return [(d["rank"][i], d["seq"][i]) for i in idx]


def test_fifo_per_channel_and_tags(tmp_path):
    # Rank 0 sends three messages to rank 1: tags 5, 7, 5. Rank 1 receives tag 7 first, then the
    # two tag-5 messages: non-overtaking holds per tag, not across tags.
    progs = [
        [("send", 1, 10, 5), ("send", 1, 20, 7), ("send", 1, 30, 5)],
        [("recv", 0, 7), ("recv", 0, 5), ("recv", 0, 5)],
    ]
    t = read_trace(simulate_to_dir(tmp_path / "t", progs)).table
    m, problems = match_messages(t)
    assert problems == []
    assert len(m) == 3
    got = sorted(zip(_rows(t, m.send_row), _rows(t, m.recv_row), m.nbytes.tolist()))
    assert got == [((0, 0), (1, 1), 10), ((0, 1), (1, 0), 20), ((0, 2), (1, 2), 30)]


def test_irecv_wildcard_resolved_from_completion_row(tmp_path):
    progs = [
        [("compute", 5000), ("send", 2, 8, 3)],
        [("send", 2, 16, 3)],
        [("irecv", ANY, 3), ("irecv", ANY, 3), ("wait", [0, 1])],
    ]
    t = read_trace(simulate_to_dir(tmp_path / "t", progs)).table
    m, problems = match_messages(t)
    assert problems == []
    assert len(m) == 2
    d = t.to_pydict()
    for s, r, done in zip(m.send_row, m.recv_row, m.recv_done_row):
        assert d["op"][r] == "Irecv" and d["peer"][r] == ANY
        assert d["op"][done] == "Waitall" and d["peer"][done] == d["rank"][s]
        assert d["request"][done] == d["request"][r]
    # the completion pairing is exposed for every completed request
    assert sorted(m.completion_post_row.tolist()) == sorted(
        i for i, o in enumerate(d["op"]) if o == "Irecv")


def test_unmatched_and_oversized_are_reported(tmp_path):
    cols = simulate([[("send", 1, 10, 5)], [("recv", 0, 5)]])
    # Corrupt: the receive says tag 6 (so nothing matches), then add a receive that gets too much.
    cols[1]["tag"][0] = 6
    write_trace(tmp_path / "t", cols)
    t = read_trace(tmp_path / "t").table
    m, problems = match_messages(t)
    assert len(m) == 0
    assert "rank 1 seq 0: Recv from 0 tag 6 comm 0 has no matching send" in problems
    assert "rank 0 seq 0: Send to 1 tag 5 comm 0 has no matching receive" in problems

    cols = simulate([[("send", 1, 10, 5)], [("recv", 0, 5)]])
    cols[1]["nbytes"][0] = 11
    write_trace(tmp_path / "u", cols)
    m, problems = match_messages(read_trace(tmp_path / "u").table)
    assert len(m) == 1
    assert len(problems) == 1 and "receives 11 bytes" in problems[0] and "sent 10" in problems[0]


def test_request_problems(tmp_path):
    cols = simulate([[("isend", 1, 10, 0), ("wait", [0])], [("irecv", 0, 0), ("wait", [0])]])
    cols[1]["request"][1] = 9  # the Wait now completes a request that was never posted
    write_trace(tmp_path / "t", cols)
    m, problems = match_messages(read_trace(tmp_path / "t").table)
    text = "\n".join(problems)
    assert "rank 1 seq 1: Wait completes request 9 that was never posted" in text
    assert "rank 1 seq 0: Irecv request 0 is never completed" in text
    # the Irecv named a concrete source and tag, so the message is still matched
    assert len(m) == 1


def test_problem_cap():
    n = 50
    cols = simulate([[("send", 1, 1, i) for i in range(n)], [("recv", 0, i) for i in range(n)]])
    cols[1]["tag"] = [t + 1000 for t in cols[1]["tag"]]
    import tempfile, pathlib
    with tempfile.TemporaryDirectory() as d:
        write_trace(pathlib.Path(d) / "t", cols)
        m, problems = match_messages(read_trace(pathlib.Path(d) / "t").table, max_problems=10)
    assert len(problems) == 11 and problems[-1] == "... and 90 more problems"


def test_pairing_is_mpis_rule_whatever_the_tag_order():
    # _pair_messages pairs on (source, destination, communicator) first and falls back to the
    # full channel when a pair's tags disagree; either way the result must be MPI's rule.
    import numpy as np

    from replay.matching import _pair_messages

    rng = np.random.default_rng(7)
    for trial in range(300):
        ns, nr = rng.integers(0, 12, 2)
        ntag = int(rng.integers(1, 4))
        s = [rng.integers(0, k, ns).astype(np.int32) for k in (2, 2, 2, ntag)]
        r = [rng.integers(0, k, nr).astype(np.int32) for k in (2, 2, 2, ntag)]
        if trial % 3 == 0 and ns:  # receives in send order (the coarse path's case)
            r = [x.copy() for x in s]
        if trial % 2:  # derived communicator ids are large: channel keys are hashed
            s[2], r[2] = (np.where(x == 1, 1_234_567_891, x).astype(np.int32) for x in (s[2], r[2]))
        got_s, got_r = _pair_messages(*s, *r, 2)
        want = np.full(ns, -1)
        taken = set()
        for i in range(ns):
            ch = tuple(x[i] for x in s)
            k = sum(tuple(x[j] for x in s) == ch for j in range(i))
            cands = [j for j in range(len(r[0])) if tuple(x[j] for x in r) == ch]
            if k < len(cands):
                want[i] = cands[k]
                taken.add(cands[k])
        assert got_s.tolist() == want.tolist()
        assert got_r.tolist() == [j in taken for j in range(len(r[0]))]


def test_request_ids_number_alike_however_they_are_spread(tmp_path, monkeypatch):
    # Request ids are the writer's: counted per rank from 0 (the tracer), offset per rank (an
    # import numbering operations), or spread over 64 bits (handles). Numbered by the ranks'
    # spans or hashed, they must give the same matching; only the spread ones are hashed.
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(3)
    progs = [[] for _ in range(4)]
    for _ in range(60):
        a, b = (int(x) for x in rng.choice(4, 2, replace=False))
        tag = int(rng.integers(0, 3))
        progs[a].append(("isend", b, int(rng.integers(1, 100)), tag))
        progs[b].append(("irecv", a, tag))
    for p in progs:
        p.append(("wait", list(range(len(p)))))
    hashed = []
    real = pd.factorize
    monkeypatch.setattr(pd, "factorize", lambda *a, **k: hashed.append(len(a[0])) or real(*a, **k))
    results = []
    for name, renumber in (("counted", lambda r, q: q), ("offset", lambda r, q: q + r * 10**12),
                           ("spread", lambda r, q: int(rng.integers(0, 2**62)))):
        cols = simulate(progs)
        for r, c in enumerate(cols):
            ids = {}
            c["request"] = [ids.setdefault(q, renumber(r, q)) if q >= 0 else q
                            for q in c["request"]]
        write_trace(tmp_path / name, cols)
        before = len(hashed)
        m, problems = match_messages(read_trace(tmp_path / name).table)
        assert problems == []
        assert (len(hashed) > before) == (name == "spread"), name
        results.append([np.asarray(x).tolist() for x in (
            m.send_row, m.recv_row, m.recv_done_row, m.send_done_row, m.completion_row,
            m.completion_post_row)])
    assert results[0] == results[1] == results[2]
    assert len(results[0][0]) == 60


def test_request_numbers_are_distinct_whatever_the_ids():
    # 64-bit ids near the limits, where a float width or a product of rank and id would round
    # or wrap: every (rank, id) pair gets its own number, below the count returned
    import numpy as np

    from replay.matching import _request_ids

    cases = [([0, 0, 1], [2**53 - 1, 2**53 + 1, 0]),
             ([0, 0, 1], [2**63 - 10, 2**63 - 1, 0]),
             ([0, 4, 0], [4, 0, 2**62]),
             ([0, 1, 1, 2], [-(2**63), 2**63 - 1, -5, 7]),
             ([3, 3, 0], [5, 5, 5])]
    for ranks, ids in cases:
        rank, req = np.array(ranks, np.int32), np.array(ids, np.int64)
        for split in range(len(ranks) + 1):     # posts, then completions
            rows = np.arange(len(ranks))
            rid, n = _request_ids(rank, req, rows[:split], rows[split:])
            pairs = list(zip(ranks, ids))
            assert all(0 <= r < n for r in rid.tolist()), (ranks, ids)
            for i in range(len(pairs)):
                for j in range(len(pairs)):
                    assert (rid[i] == rid[j]) == (pairs[i] == pairs[j]), (ranks, ids, i, j)
