"""Unit tests of the applications' pieces that need no MPI launch: schedules, kernels, merges,
parser, tagger, extractor, graph readers."""
from __future__ import annotations

import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apps import APPS, PARADIGMS
from apps.components import graphs, kernels as cc
from apps.feature_extraction import dictionary as fd
from apps.feature_extraction import extractor, parser, tagger
from apps.skeletons.base import split_range
from apps.skeletons.pipeline import schedule
from apps.sorting import data, kernels as sk

PAPER_EDGES = [(1, 2), (2, 3), (1, 3), (4, 5), (5, 6), (6, 7), (4, 7), (5, 7), (8, 9)]


def test_apps_registry() -> None:
    assert set(APPS) == {"feature_extraction", "sorting", "components"}
    for paradigms in APPS.values():
        assert set(paradigms) <= set(PARADIGMS)


def test_paradigm_registry_keeps_its_contract() -> None:
    """Every registered skeleton module has ``run`` and, unless demand-driven, a pure
    ``schedule``; the registry is the one list of paradigm names."""
    from apps.skeletons import SKELETONS, analytic_paper, skeleton
    assert PARADIGMS == tuple(SKELETONS)
    for name, sk in SKELETONS.items():
        mod = sk.load()
        assert sk.paradigm == name and callable(mod.run)
        assert sk.demand_driven or callable(mod.schedule)
    assert analytic_paper("sorting", "master-worker") == "paper003"
    assert analytic_paper("components", "master-worker") == "paper004"
    assert analytic_paper("sorting", "tree") is None
    with pytest.raises(ValueError, match="choose from pipeline, master-worker, tree, hypercube"):
        skeleton("ring")


@pytest.mark.parametrize("n", range(1, 10))
@pytest.mark.parametrize("n_tasks", [0, 1, 2, 5, 17, 40])
def test_pipeline_schedule_runs_every_task_once_and_drains_to_root(n: int, n_tasks: int) -> None:
    acts = schedule(n, n_tasks)
    tasks = sorted(i for a in acts for k, i in a if k == "task")
    assert tasks == list(range(n_tasks))
    # replay the schedule with counts of task results as the data: everything must arrive
    # at rank n-1, and no rank may wait for a message that never comes
    from collections import deque
    count, pc = [0] * n, [0] * n
    queues: dict[tuple[int, int], deque] = {}
    progress = True
    while progress:
        progress = False
        for r in range(n):
            while pc[r] < len(acts[r]):
                kind, arg = acts[r][pc[r]]
                if kind == "task":
                    count[r] += 1
                elif kind == "send":
                    assert count[r] > 0  # only a rank holding data sends
                    queues.setdefault((r, arg), deque()).append(count[r])
                    count[r] = 0
                else:
                    q = queues.get((arg, r))
                    if not q:
                        break
                    count[r] += q.popleft()
                pc[r] += 1
                progress = True
    assert all(pc[r] == len(acts[r]) for r in range(n)), "deadlock in the schedule"
    assert count[n - 1] == n_tasks and sum(count) == n_tasks
    if n > 1 and n_tasks > 0:
        assert not any(k == "send" for k, _ in acts[n - 1])  # the root only merges


def test_pipeline_schedule_matches_fig4_for_eight_ranks() -> None:
    # Fig. 2: after step 0, ranks 0,2,4,6 send to 1,3,5,7 (first stage); rank 7 never computes
    acts = schedule(8, 64)
    first_sends = {r: a[1] for r, a in enumerate(acts) if len(a) > 1 and a[1][0] == "send"}
    assert first_sends == {0: ("send", 1), 2: ("send", 3), 4: ("send", 5), 6: ("send", 7)}
    assert [k for k, _ in acts[7]].count("task") == 1
    assert sum(1 for k, _ in acts[0] if k == "task") > sum(1 for k, _ in acts[5] if k == "task")


def test_split_range_covers_everything() -> None:
    for n in range(0, 30):
        for parts in range(1, 7):
            pieces = [split_range(n, parts, i) for i in range(parts)]
            assert pieces[0][0] == 0 and pieces[-1][1] == n
            assert all(a[1] == b[0] for a, b in zip(pieces, pieces[1:]))
            sizes = [b - a for a, b in pieces]
            assert max(sizes) - min(sizes) <= 1


def test_merge2_and_merge_many() -> None:
    rng = np.random.default_rng(0)
    runs = [np.sort(rng.integers(0, 50, size=k)) for k in (0, 1, 7, 100, 33)]
    assert np.array_equal(sk.merge_many(runs), np.sort(np.concatenate(runs)))
    a, b = runs[3], runs[4]
    assert np.array_equal(sk.merge2(a, b), np.sort(np.concatenate([a, b])))


def test_int_source_is_independent_of_slicing(tmp_path) -> None:
    src = data.IntSource(200_000, seed=3)
    whole = src.read(0, src.total)
    assert whole.size == 200_000
    assert np.array_equal(np.concatenate([src.read(s, 7001) for s in range(0, 200_000, 7001)]),
                          whole)
    assert not np.array_equal(whole, data.IntSource(200_000, seed=4).read(0, 200_000))
    f = tmp_path / "in.bin"
    data.write(str(f), whole[:1000])
    fs = data.IntSource(0, 0, str(f))
    assert fs.total == 1000 and np.array_equal(fs.read(10, 20), whole[10:30])


def test_paper002_example_step_by_step() -> None:
    """Paper 002, Fig. 3 on four processors: the root vectors after conquer and after each
    combine, as printed in the paper (vertex ids 1..9, vector index 0 unused)."""
    e = np.array(PAPER_EDGES, dtype=np.int64)
    parts = [e[0:3], e[3:5], e[5:7], e[7:9]]  # halving with the extra edge in the first half
    leaves = [cc.conquer(10, p)[1:].tolist() for p in parts]
    assert leaves[1] == [1, 2, 3, 4, 4, 4, 7, 8, 9]
    assert leaves[2] == [1, 2, 3, 4, 5, 4, 4, 8, 9]
    assert leaves[3] == [1, 2, 3, 4, 5, 6, 5, 8, 8]
    r = [cc.conquer(10, p) for p in parts]
    first = [cc.combine(r[0], r[1]), cc.combine(r[2], r[3])]
    assert first[0][1:].tolist() == [1, 1, 1, 4, 4, 4, 7, 8, 9]
    assert first[1][1:].tolist() == [1, 2, 3, 4, 4, 4, 4, 8, 8]
    assert cc.combine(first[0], first[1])[1:].tolist() == [1, 1, 1, 4, 4, 4, 4, 8, 8]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_union_find_matches_scipy(seed: int) -> None:
    e = graphs.gnm(300, 250, seed)
    ref = graphs.reference_roots(300, e)
    assert np.array_equal(cc.conquer(300, e), ref)
    halves = np.array_split(e, 5)
    acc = cc.conquer(300, halves[0])
    for h in halves[1:]:
        acc = cc.combine(cc.conquer(300, h), acc)
    assert np.array_equal(acc, ref)


def test_rmat_shape_and_skew() -> None:
    e = graphs.rmat(10, 16, seed=1)
    assert e.shape == (16 * 1024, 2) and e.min() >= 0 and e.max() < 1024
    deg = np.bincount(e.ravel(), minlength=1024)
    assert deg.max() > 8 * deg.mean()  # R-MAT is skewed, unlike G(n, m)


def test_edge_list_reader(tmp_path) -> None:
    f = tmp_path / "g.txt"
    f.write_text("# comment\n% other\n1 2 0.5\n\n3\t4\n")
    assert graphs.read_edge_list(str(f)).tolist() == [[1, 2], [3, 4]]
    bad = tmp_path / "bad.txt"
    bad.write_text("1 x\n")
    from apps.common import InputError
    with pytest.raises(InputError):
        graphs.read_edge_list(str(bad))


def test_parser_fields_and_malformed_markup() -> None:
    html = ("<html><head><title>Fast &amp; simple sorting</title><script>var x;</script>"
            "</head><body><p>The merge step<b>combines runs</p> <i>unclosed</body>")
    assert parser.parse(html) == ("Fast & simple sorting", "The merge step combines runs unclosed")
    sgml = "<DOC><DOCNO>x1</DOCNO><TITLE>A title</TITLE><TEXT>Body text & more</TEXT></DOC>"
    assert parser.parse(sgml) == ("A title", "Body text & more")
    xml = "<?xml version='1.0'?><item><headline>Head</headline><content>Some content</content>"
    assert parser.parse(xml) == ("Head", "Some content")
    assert parser.parse("First line\nsecond  line\nthird", markup=False) == (
        "First line", "second line third")


def test_tagger_and_noun_phrases() -> None:
    toks, _ = tagger.tokenize("This function returns a list of file names.")
    tags = [tagger.TAGS[t] for t in tagger.tag(toks)]
    assert tags == ["DT", "NN", "VBZ", "DT", "NN", "IN", "NN", "NNS", "."]
    got = extractor.extract("Return the size of the buffer. They read the configuration file.")
    assert [p for p, _ in got] == ["size", "buffer", "configuration file"]
    text = "Create a new socket object."
    (phrase, off), = extractor.extract(text)
    assert phrase == "new socket object" and text[off:].lower().startswith("new socket")


def _dict(items):
    return fd.from_occurrences(items)


occ = st.tuples(st.sampled_from(["a", "b c", "zeta", "\u00e9t\u00e9", "b"]),
                st.integers(0, 5), st.integers(0, 1), st.integers(0, 50))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(occ, max_size=8), min_size=1, max_size=5))
def test_dictionary_merge_is_order_independent(groups) -> None:
    # a document occurs in one task only: make doc ids unique per group
    groups = [[(p, d + 10 * g, f, o) for p, d, f, o in items] for g, items in enumerate(groups)]
    all_items = sorted(set(x for items in groups for x in items))
    groups = [sorted(set(items)) for items in groups]
    dicts = [_dict(items) for items in groups]
    left = fd.empty()
    for d in dicts:
        left = fd.merge(left, d)
    right = fd.empty()
    for d in reversed(dicts):
        right = fd.merge(d, right)
    whole = _dict(all_items)
    assert fd.equal(left, whole) and fd.equal(right, whole)
    assert int(whole.freq.sum()) == len(all_items)
    assert list(whole.phrases) == sorted(set(whole.phrases))
    assert fd.equal(pickle.loads(pickle.dumps(whole)), whole)


def test_application_time_says_what_it_measures() -> None:
    """The applications' own time (rank 0, from the start barrier to its end of the parallel
    phase) is labelled, never a bare number next to the traced makespan's label."""
    from apps.common import wall_time_text
    from hindsight.info import MAKESPAN_LABEL

    text = wall_time_text(0.3114)
    assert text == "wall time on rank 0, start barrier to end of the parallel phase 0.311 s"
    assert MAKESPAN_LABEL not in text
