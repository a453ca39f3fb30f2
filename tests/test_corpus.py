"""The fixed trace corpus replays to the same results as when it was written (tests/corpus)."""

import importlib.util
import json
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent / "corpus"
_spec = importlib.util.spec_from_file_location("corpus_digest", HERE / "digest.py")
digest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(digest)
EXPECTED = json.loads(digest.EXPECTED.read_text())


def test_corpus_is_complete():
    assert sorted(p.name for p in digest.traces()) == sorted(EXPECTED)
    assert len(EXPECTED) >= 10


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_replay_unchanged(name):
    got = digest.digest(HERE / name)
    assert digest.differences(got, EXPECTED[name]) == []


def test_differences_sees_a_change():
    name = sorted(EXPECTED)[0]
    changed = json.loads(json.dumps(EXPECTED[name]))
    changed["loggps"]["row_end"][1] *= 1 + 1e-9
    assert digest.differences(changed, EXPECTED[name]) == ["/loggps/row_end[1]: "
                                                          f"{changed['loggps']['row_end'][1]!r}"
                                                          f" != {EXPECTED[name]['loggps']['row_end'][1]!r}"]
