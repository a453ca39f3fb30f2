"""The compiled GOAL scanner and writer (replay/loggopsim/goal_scan.py, goal.py) against the
regular-expression parser and the Python formatter they replace: same schedules, same text, the
same error messages (the scanner hands every error to the regular expressions)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from replay.loggopsim import goal_parts, goal_scan
from replay.loggopsim import simulator as LG
from replay.loggopsim.goal import (
    GoalError,
    _format_goal_slow,
    _parse_goal_slow,
    format_goal,
    parse_goal,
    read_goal,
    write_goal,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from goal_schedules import KINDS, make_schedule  # noqa: E402

FIELDS = ("rank", "kind", "size", "peer", "tag", "cpu", "nic", "dep_op", "dep_on", "dep_start")


def _fast(text: str, hmask=goal_scan.NO_MASK):
    """The scanner alone (no fallback): (code, schedule fields or None). Cut into parts scanned
    on threads (``goal_parts``), the text gives the same code and the same arrays."""
    b = np.frombuffer(text.encode(), np.uint8)
    code, nranks, arrays = goal_parts.scan(b, hmask, parts=1)
    for parts in (2, 3, 7):
        c, n, a = goal_parts.scan(b, hmask, parts=parts)
        assert (c, n) == (code, nranks), parts
        for x, y in zip(a or (), arrays or ()):
            assert x.dtype == y.dtype and np.array_equal(x, y), parts
    return code, (None if code else (nranks, arrays))


def assert_same(text: str) -> LG.Schedule:
    """The scanner takes the text and gives what the regular expressions give."""
    code, _ = _fast(text)
    assert code == 0, f"scanner refused it (code {code})"
    a, b = parse_goal(text), _parse_goal_slow(text)
    assert a.nranks == b.nranks
    for f in FIELDS:
        x, y = getattr(a, f), getattr(b, f)
        assert x.dtype == y.dtype, f
        assert np.array_equal(x, y), f
    assert [a.label(i) for i in range(a.nops)] == [b.label(i) for i in range(b.nops)]
    assert list(a.labels) == list(b.labels)
    return a


@pytest.mark.parametrize("kind,P", [(k, P) for k in KINDS for P in (8, 5)
                                     if k != "pairwise" or P == 8])    # pairwise: P a power of 2
def test_generated_schedules_parse_alike(kind, P):
    text, nops = make_schedule(kind, 3000, P=P)
    s = assert_same(text)
    assert s.nops == nops
    assert format_goal(s) == _format_goal_slow(s)
    assert format_goal(s, "a header\nof two lines") == _format_goal_slow(s, "a header\nof two lines")


HANDS = {
    "comments": """// leading comment
/* a block
   comment over lines */ num_ranks 2
rank 0 { // opening
  a: calc 10 /* inline */ cpu 1
  b: send 8b to 1 tag 3   // trailing
  /* whole line */
  b requires a
}
/* between */
rank 1 {
  r: recv 8b from 0 tag 3
}
""",
    "wildcards_irequires": """num_ranks 3
rank 0 {
  r1: recv 4b from -1 tag -1
  r2: recv 4b from 2 tag -1
  r3: recv 4b from -1 tag 7
  c: calc 5
  c irequires r1
  c requires r2
  r3 irequires c
}
rank 1 {
  s: send 4b to 0 tag 0
  t: send 4b to 0 tag 7 cpu 2 nic 1
  u: send 4b to 2 nic 3
  calc 9 cpu 4
}
rank 2 {
  send 4b to 0
  recv 4b from 1
}
""",
    "odd_labels": """num_ranks 1
rank 0 {
  x: calc 1
  send: calc 2
  requires: calc 3
  irequires :calc 4
  A_1_b2:calc 5
  l00: calc 6
  Z9_: calc 7
  send requires x
  requires requires irequires
  irequires irequires A_1_b2
  Z9_   requires   l00
}
""",
    "spacing_blank_lines_out_of_order": "\n\n  num_ranks\t4  \n\nrank 3{\n\tcalc 007\n}\n"
    "rank  1 {\n  a: send 16 b  to  3  tag  0002\n\n}\nrank 0   {\n}\n"
    "rank 3{\n",  # (fixed below: the last block is closed)
    "crlf": "num_ranks 2\r\nrank 0 {\r\n  a: send 8b to 1\r\n  b: calc 5\r\n  b requires a\r\n}\r\n"
            "rank 1 {\r\n  recv 8b from 0\r\n}\r\n",
    "other_whitespace": "num_ranks 1\x0b\nrank\x0c0 {\n\x1ca:\x1dcalc\x1e5\x1f\n}",
    "big_numbers": "num_ranks 2\nrank 1 {\n  calc 999999999999999999\n"
                   "  send 123456789012345678b to 0 tag 2147483647 cpu 999999999999999999\n}\n",
    "empty": "num_ranks 3\n",
}
HANDS["spacing_blank_lines_out_of_order"] = HANDS["spacing_blank_lines_out_of_order"].replace(
    "rank 3{\n\tcalc 007\n}\n", "rank 2{\n\tcalc 007\n}\n").replace("rank 3{\n", "rank 3 {\n}")


@pytest.mark.parametrize("name", sorted(HANDS))
def test_hand_written_schedules_parse_alike(name):
    s = assert_same(HANDS[name])
    assert format_goal(s) == _format_goal_slow(s)


def test_blocks_come_out_in_rank_order_and_unlabelled_ops_are_named():
    s = assert_same(HANDS["spacing_blank_lines_out_of_order"])
    assert s.rank.tolist() == [1, 2] and s.size.tolist() == [16.0, 7.0]
    assert s.label(0) == "a" and s.label(1) == "r2op0" and s.labels[1] is None


BAD = [
    ("", "no 'num_ranks'"),
    ("rank 0 {\n}\n", "before 'num_ranks'"),
    ("num_ranks 0\n", "at least 1"),
    ("num_ranks 2\nnum_ranks 2\n", "given twice"),
    ("num_ranks 1\nrank 1 {\n}\n", "rank 1 but num_ranks is 1"),
    ("num_ranks 2\nrank 1 {\n}\nrank 1 {\n}\n", "rank 1 defined twice"),
    ("num_ranks 1\nrank 0 {\na: calc 5\nb requires a\n}\n", "label 'b'"),
    ("num_ranks 1\nrank 0 {\na: calc 5\na: calc 6\n}\n", "label 'a' defined twice"),
    ("num_ranks 2\nrank 0 {\na: calc 5\n}\nrank 1 {\nb requires a\nb: calc 1\n}\n", "label 'a'"),
    ("num_ranks 1\nrank 0 {\na: send 8b to 3\n}\n", "send to rank 3"),
    ("num_ranks 1\nrank 0 {\na: recv 8b from 1\n}\n", "recv from rank 1"),
    ("num_ranks 2\nrank 0 {\na: send 8b to 1 tag -1\n}\n", "wildcard tag"),
    ("num_ranks 1\nrank 0 {\na: calc 5 tag 1\n}\n", "calc takes only 'cpu'"),
    ("num_ranks 1\nrank 0 {\na: calc 5 nic 1\n}\n", "calc takes only 'cpu'"),
    ("num_ranks 2\nrank 0 {\na: send 8b to 1 tag 2147483648\n}\n", "int32"),
    ("num_ranks 1\nrank 0 {\na: frobnicate 8\n}\n", "cannot parse"),
    ("num_ranks 2\nrank 0 {\na: send 8b to 1 cpu 1 tag 2\n}\n", "cannot parse"),
    ("num_ranks 2\nrank 0 {\na: recv 8b from -10\n}\n", "cannot parse"),
    ("num_ranks 2\nrank 0 {\na: send 8bto 1\n}\n", "cannot parse"),
    ("num_ranks 1\nrank 0 {\na requires b c\n}\n", "cannot parse"),
    ("num_ranks 1\nrank 0 {\nnum_ranks 1\n}\n", "cannot parse"),
    ("num_ranks 1\nrank 0 {\n}}\n", "cannot parse"),
    ("num_ranks 1\nrank 0 {\na: calc 5\n", "not closed"),
    ("num_ranks 1\n/* open\n", "unterminated"),
    ("num_ranks 1\n//**/*\n", "unterminated"),         # the removal forms a new /*
    ("num_ranks 1\nrank 0 {\n*/\n}\n", "cannot parse"),
    ("{\"traceEvents\": []}\n", "expected 'num_ranks N'"),
    ("num_ranks 1\nfoo\n", "expected 'rank N {'"),
]


@pytest.mark.parametrize("text,needle", BAD)
def test_errors_fall_back_to_the_regular_expressions_message(text, needle):
    assert _fast(text)[0] != 0
    with pytest.raises(GoalError, match=needle) as fast:
        parse_goal(text, "f.goal")
    with pytest.raises(GoalError) as slow:
        _parse_goal_slow(text, "f.goal")
    assert str(fast.value) == str(slow.value)
    assert str(fast.value).startswith("f.goal")


def _blocks(first: int, last: int, body: str = "a: calc 1\nb: calc 2\nb requires a\n") -> str:
    return "".join(f"rank {r} {{\n{body}}}\n" for r in range(first, last))


# each error sits in a later part than the first when the text is cut in 2 or 3
ACROSS_PARTS = [
    ("num_ranks 40\n" + _blocks(0, 30) + "num_ranks 40\n" + _blocks(30, 40), "given twice"),
    ("num_ranks 40\n" + _blocks(0, 30) + "}\n" + _blocks(30, 40), "expected 'rank N {'"),
    ("num_ranks 40\n" + _blocks(0, 39) + _blocks(5, 6), "rank 5 defined twice"),
    ("num_ranks 40\n" + _blocks(0, 39) + "rank 39 {\nb requires a\n}\n", "label 'b'"),
    ("num_ranks 40\n" + _blocks(0, 39) + "rank 39 {\na: send 1b to 40\n}\n", "send to rank 40"),
    ("num_ranks 40\n" + _blocks(0, 39) + "rank 40 {\n}\n", "rank 40 but num_ranks is 40"),
    ("num_ranks 40\n" + _blocks(0, 39) + "rank 39 {\n", "not closed"),
    ("num_ranks 40\n" + _blocks(0, 20) + "rank 20 {\nx: calc 1\n" + _blocks(21, 40), "cannot"),
]


@pytest.mark.parametrize("text,needle", ACROSS_PARTS)
def test_errors_in_later_parts_are_the_whole_texts(text, needle):
    b = np.frombuffer(text.encode(), np.uint8)
    assert len(goal_parts._cuts(b, 3)) == 4                 # (the text is cut)
    test_errors_fall_back_to_the_regular_expressions_message(text, needle)


def test_parts_are_cut_after_closing_lines_and_join_in_rank_order(monkeypatch):
    # blocks out of rank order, with comments and labels, across parts
    text = ("// header\nnum_ranks 50 // ranks\n" + _blocks(25, 50, "x: calc 3\ny: send 4b to 0 tag 9"
            "\ny irequires x\n")
            + _blocks(0, 25, "r: recv 4b from -1 tag 9\nc: calc 1 cpu 2\nc requires r\n"))
    # commented out, a } closes nothing and is no place for a cut
    text = text.replace("rank 40 {\n", "rank 40 {\n // }\n  /* } */\n")
    b = np.frombuffer(text.encode(), np.uint8)
    for parts in (2, 5, 11):
        cuts = goal_parts._cuts(b, parts)
        assert len(cuts) == parts + 1
        for c in cuts[1:-1]:
            assert text[:c].rstrip().endswith("}")
    assert_same(text)
    # read_goal cuts a text of PART_BYTES or more a CPU
    monkeypatch.setattr(goal_parts, "PART_BYTES", 64)
    monkeypatch.setattr(goal_parts, "usable_cores", lambda: 4)
    seen = []
    real = goal_parts._scan_parts
    monkeypatch.setattr(goal_parts, "_scan_parts", lambda b, bounds, *a: seen.append(len(bounds))
                        or real(b, bounds, *a))
    s, ref = parse_goal(text), _parse_goal_slow(text)
    assert seen == [5]
    for f in FIELDS:
        assert np.array_equal(getattr(s, f), getattr(ref, f)), f


@pytest.mark.parametrize("text", [
    "num_ranks 1\nrank 0 {\n  calc 1234567890123456789\n}\n",      # 19 digits
    "num_ranks 1\nrank 0 {\n  a: calc\u00a05\u00a0\n}\n",           # Unicode whitespace
    "num_ranks 1\nrank 0 {\n  a: calc \u0665\n}\n",                  # a Unicode digit
    "num_ranks 1\nrank 0 {\n  a:/**/calc 5\n  b: cal/**/c 6\n}\n",   # comments inside words
])
def test_what_the_scanner_refuses_but_the_expressions_take_is_theirs(text):
    s, ref = parse_goal(text), _parse_goal_slow(text)
    for f in FIELDS:
        assert np.array_equal(getattr(s, f), getattr(ref, f)), f


def test_comments_inside_a_statement_are_removed_first():
    # "/* */" goes before "//" is looked for, and joins what surrounds it
    s = parse_goal("num_ranks 1\nrank 0 {\n  a: calc 1/* x */0 // 99\n  /* x */ b: calc 2\n}\n")
    assert s.size.tolist() == [10.0, 2.0]
    assert_same("num_ranks 1\nrank 0 {\n  a: calc 1/* x */0 // 99\n}\n")


@pytest.mark.parametrize("hmask", [0, 1, 3])
def test_label_hash_collisions_cannot_misresolve(hmask):
    text, _ = make_schedule("allreduce", 2000, P=6)
    text += "rank 6 {\n" + "".join(f"v{k}: calc {k}\n" for k in range(40)) + \
        "".join(f"v{k} requires v{39 - k}\n" for k in range(20)) + "}\n"
    text = text.replace("num_ranks 6", "num_ranks 7")
    ref = _parse_goal_slow(text)
    code, (nranks, arrays) = _fast(text, np.uint64(hmask))
    assert code == 0 and nranks == 7
    for f, x in zip(FIELDS, arrays):
        assert np.array_equal(x, getattr(ref, f)), f
    # with every hash equal, a duplicate or an undefined label is still found by its bytes
    assert _fast("num_ranks 1\nrank 0 {\nab: calc 1\nba: calc 2\nab requires ba\n}\n",
                 np.uint64(hmask))[0] == 0
    assert _fast("num_ranks 1\nrank 0 {\nab: calc 1\nab: calc 2\n}\n", np.uint64(hmask))[0] == 20
    assert _fast("num_ranks 1\nrank 0 {\nab: calc 1\nab requires ba\n}\n",
                 np.uint64(hmask))[0] == 21


def test_read_goal_maps_the_file_and_checks_utf8(tmp_path):
    p = tmp_path / "s.goal"
    text = HANDS["wildcards_irequires"].replace("num_ranks 3", "// caf\u00e9\nnum_ranks 3")
    p.write_text(text, encoding="utf-8")
    s, ref = read_goal(p), _parse_goal_slow(text)
    for f in FIELDS:
        assert np.array_equal(getattr(s, f), getattr(ref, f)), f
    p.write_bytes(b"// caf\xe9\nnum_ranks 1\n")          # Latin-1 in a comment: not UTF-8
    with pytest.raises(GoalError, match="not UTF-8"):
        read_goal(p)
    p.write_bytes(b"")
    with pytest.raises(GoalError, match=f"{p}: no 'num_ranks'"):
        read_goal(p)
    p.write_bytes(b"num_ranks 1\n\0\n")
    with pytest.raises(GoalError, match="binary file"):
        read_goal(p)


def test_format_goal_writes_what_python_writes():
    s = LG.Schedule(
        3, np.array([0, 0, 0, 2, 2]), np.array([LG.CALC, LG.SEND, LG.RECV, LG.CALC, LG.SEND]),
        np.array([2.5, 1024.9, 8.0, 3.5, 0.0]), np.array([-1, 2, -1, -1, 0]),
        np.array([0, 5, -1, 0, 2**31 - 1]), np.array([0, 1, 0, 7, 0]),
        np.array([0, 2, 0, 9, 0]), np.array([1, 2, 4]), np.array([0, 1, 3]),
        np.array([False, True, False]))
    text = format_goal(s, "h\u00e9ader")
    assert text == _format_goal_slow(s, "h\u00e9ader")
    assert "l0: calc 2 cpu" not in text and "l0: calc 2\n" in text      # 2.5 rounds to even
    assert "l1: send 1024b to 2 tag 5 cpu 1 nic 2\n" in text
    assert "l1 requires l0\nl2 irequires l1\n}\nrank 1 {\n}\n" in text
    big = LG.Schedule(1, np.array([0]), np.array([LG.CALC]), np.array([1e30]), np.array([-1]),
                      np.array([0]), np.array([0]), np.array([0]), np.zeros(0, np.int64),
                      np.zeros(0, np.int64), np.zeros(0, bool))
    assert format_goal(big) == _format_goal_slow(big)       # too large for int64: Python's


def test_write_goal_streams_the_text_format_goal_returns(tmp_path):
    # about 4 MB of text: several of the writer's 1 MiB chunks, lines cut at none of them
    text, _ = make_schedule("ring", 150_000, P=7)
    s = parse_goal(text)
    out = tmp_path / "s.goal"
    write_goal(s, out, "h\u00e9ader\nline 2")
    data = out.read_bytes()
    assert len(data) > 3 * 2**20
    assert data == _format_goal_slow(s, "h\u00e9ader\nline 2").encode()
    assert data.decode() == format_goal(s, "h\u00e9ader\nline 2")
    big = LG.Schedule(1, np.array([0]), np.array([LG.CALC]), np.array([1e30]), np.array([-1]),
                      np.array([0]), np.array([0]), np.array([0]), np.zeros(0, np.int64),
                      np.zeros(0, np.int64), np.zeros(0, bool))
    write_goal(big, out)                                    # too large for int64: Python's
    assert out.read_text() == _format_goal_slow(big)


def test_simulation_errors_name_operations_by_label():
    s = parse_goal("num_ranks 2\nrank 0 {\n  send 8b to 1 tag 1\n}\nrank 1 {\n"
                   "  got: recv 8b from 0 tag 2\n  recv 8b from 0 tag 3\n}\n")
    with pytest.raises(LG.ScheduleError, match=r"first: rank 1 recv got, rank 1 recv r1op1\)"):
        LG.simulate(s, LG.params_vector(10, 1, 1, 0, 0, 1, 0, 100))
    # a replay that keeps no operation's times names them alike
    with pytest.raises(LG.ScheduleError, match=r"first: rank 1 recv got, rank 1 recv r1op1\)"):
        LG.simulate(s, LG.params_vector(10, 1, 1, 0, 0, 1, 0, 100), times=False)


def test_an_unmatched_eager_message_alone_is_said_without_unfinished_operations():
    """An eager send completes when issued: a message no receive takes leaves every operation
    done, and the error says only that (no "0 operation(s) never complete")."""
    s = parse_goal("num_ranks 2\nrank 0 {\n  send 8b to 1 tag 1\n}\nrank 1 {\n}\n")
    with pytest.raises(LG.ScheduleError) as err:
        LG.simulate(s, LG.params_vector(10, 1, 1, 0, 0, 1, 0, 100))
    assert str(err.value) == ("schedule cannot finish: 1 message(s) arrived that no receive "
                              "matches")
