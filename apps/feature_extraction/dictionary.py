"""Feature dictionaries and their associative, commutative merge (paper 000 §V-A).

A dictionary is columnar: lexicographically sorted unique phrases (UTF-8 bytes, so byte order is
code-point order), their frequencies, and per phrase its occurrences (document, field, character
offset) in CSR form, sorted by (document, field, offset). Merging two dictionaries merges the
sorted phrase lists (searchsorted, no re-sort), adds frequencies and merges occurrences; the
result does not depend on the order of merges, so every paradigm and rank count gives the same
dictionary.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
from numba import njit
import pyarrow as pa
import pyarrow.parquet as pq

from apps.feature_extraction.parser import FIELD_NAMES


@dataclass(frozen=True)
class FeatureDict:
    phrases: np.ndarray   # dtype S (UTF-8), sorted, unique
    freq: np.ndarray      # int64 per phrase (= its number of occurrences)
    doc: np.ndarray       # int32 per occurrence, grouped by phrase
    field: np.ndarray     # int8 per occurrence (parser.TITLE / parser.BODY)
    offset: np.ndarray    # int32 per occurrence: character offset in the field

    def __len__(self) -> int:
        return int(self.phrases.size)

    def __reduce__(self):  # type: ignore[override]
        """Pickle (= the message) as a compact blob of the phrases' bytes plus lengths, not
        as the fixed-width array, so message sizes reflect the data."""
        width = self.phrases.dtype.itemsize
        u8 = self.phrases.view(np.uint8).reshape(-1, width)
        lengths = np.char.str_len(self.phrases).astype(np.int32)
        blob = u8[np.arange(width) < lengths[:, None]]
        return (_unpack, (blob, lengths, self.freq, self.doc, self.field, self.offset))

    @property
    def ptr(self) -> np.ndarray:
        return np.concatenate([[0], np.cumsum(self.freq)])


def _unpack(blob: np.ndarray, lengths: np.ndarray, freq: np.ndarray, doc: np.ndarray,
            field: np.ndarray, offset: np.ndarray) -> FeatureDict:
    width = max(1, int(lengths.max()) if lengths.size else 1)
    u8 = np.zeros((lengths.size, width), dtype=np.uint8)
    u8[np.arange(width) < lengths[:, None]] = blob
    return FeatureDict(u8.view(f"S{width}").ravel(), freq, doc, field, offset)


def empty() -> FeatureDict:
    return FeatureDict(np.empty(0, dtype="S1"), np.empty(0, np.int64), np.empty(0, np.int32),
                       np.empty(0, np.int8), np.empty(0, np.int32))


def _sorted_occurrences(idx: np.ndarray, doc: np.ndarray, field: np.ndarray,
                        offset: np.ndarray, n: int, phrases: np.ndarray) -> FeatureDict:
    order = np.lexsort((offset, field, doc, idx))
    freq = np.bincount(idx, minlength=n).astype(np.int64)
    return FeatureDict(phrases, freq, doc[order], field[order], offset[order])


def from_occurrences(items: list[tuple[str, int, int, int]]) -> FeatureDict:
    """The dictionary of (phrase, document, field, offset) occurrences."""
    if not items:
        return empty()
    keys = np.array([p.encode("utf-8") for p, _, _, _ in items])
    phrases, idx = np.unique(keys, return_inverse=True)
    k = len(items)
    doc = np.fromiter((d for _, d, _, _ in items), dtype=np.int32, count=k)
    field = np.fromiter((f for _, _, f, _ in items), dtype=np.int8, count=k)
    offset = np.fromiter((o for _, _, _, o in items), dtype=np.int32, count=k)
    return _sorted_occurrences(idx.astype(np.int64).ravel(), doc, field, offset,
                               phrases.size, phrases)


def merge(a: FeatureDict, b: FeatureDict) -> FeatureDict:
    """Merge two dictionaries: sorted-list merge of phrases, frequencies added, occurrences
    merged."""
    if len(a) == 0:
        return b
    if len(b) == 0:
        return a
    pos = np.searchsorted(a.phrases, b.phrases)  # where each b phrase goes in a
    clipped = np.minimum(pos, len(a) - 1)
    match = (pos < len(a)) & (a.phrases[clipped] == b.phrases)
    new_pos = pos[~match]  # b-only phrases, nondecreasing insertion points
    # final index of a[i]: i plus the b-only phrases inserted before it
    a_final = np.arange(len(a)) + np.searchsorted(new_pos, np.arange(len(a)), side="right")
    b_final = np.empty(len(b), dtype=np.int64)
    b_final[match] = a_final[pos[match]]
    b_final[~match] = new_pos + np.arange(new_pos.size)
    n = len(a) + new_pos.size
    width = max(a.phrases.dtype.itemsize, b.phrases.dtype.itemsize)
    phrases = np.empty(n, dtype=f"S{width}")
    phrases[a_final] = a.phrases
    phrases[b_final[~match]] = b.phrases[~match]
    ia, ib = np.repeat(a_final, a.freq), np.repeat(b_final, b.freq)
    # Both occurrence lists are sorted by (phrase, doc, field, offset) and the phrase
    # renumbering is monotonic, so a linear two-way merge keeps them sorted.
    order = _merge_order(ia, a.doc, a.field, a.offset, ib, b.doc, b.field, b.offset)
    freq = np.zeros(n, dtype=np.int64)
    freq[a_final] += a.freq
    freq[b_final] += b.freq
    return FeatureDict(phrases, freq, np.concatenate([a.doc, b.doc])[order],
                       np.concatenate([a.field, b.field])[order],
                       np.concatenate([a.offset, b.offset])[order])


@njit(cache=True)
def _merge_order(ia, da, fa, oa, ib, db, fb, ob):  # type: ignore[no-untyped-def]
    """Positions (into a ++ b) in merged (phrase, doc, field, offset) order."""
    na, nb = ia.size, ib.size
    out = np.empty(na + nb, dtype=np.int64)
    i = j = k = 0
    while i < na and j < nb:
        take_b = False
        if ib[j] != ia[i]:
            take_b = ib[j] < ia[i]
        elif db[j] != da[i]:
            take_b = db[j] < da[i]
        elif fb[j] != fa[i]:
            take_b = fb[j] < fa[i]
        else:
            take_b = ob[j] < oa[i]
        if take_b:
            out[k] = na + j
            j += 1
        else:
            out[k] = i
            i += 1
        k += 1
    while i < na:
        out[k] = i
        i += 1
        k += 1
    while j < nb:
        out[k] = na + j
        j += 1
        k += 1
    return out


def to_table(d: FeatureDict, documents: list[str]) -> pa.Table:
    ptr = pa.array(d.ptr.astype(np.int32))
    occ = pa.StructArray.from_arrays(
        [pa.array(d.doc), pa.array(np.asarray(FIELD_NAMES, dtype=object)[d.field]),
         pa.array(d.offset)], names=["doc", "field", "offset"])
    table = pa.table({
        "phrase": pa.array([p.decode("utf-8") for p in d.phrases], type=pa.string()),
        "frequency": pa.array(d.freq),
        "occurrences": pa.ListArray.from_arrays(ptr, occ),
    })
    return table.replace_schema_metadata({"documents": json.dumps(documents)})


def write_parquet(d: FeatureDict, documents: list[str], path: str) -> None:
    pq.write_table(to_table(d, documents), path)


def equal(a: FeatureDict, b: FeatureDict) -> bool:
    return (np.array_equal(a.phrases, b.phrases) and np.array_equal(a.freq, b.freq)
            and np.array_equal(a.doc, b.doc) and np.array_equal(a.field, b.field)
            and np.array_equal(a.offset, b.offset))
