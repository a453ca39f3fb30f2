"""Finite-state extraction of maximal noun phrases from tagged text.

A phrase is a maximal run of pre-modifiers (adjectives, numbers) and nouns that ends in a noun,
possibly continued through "of" or a possessive "'s" when another noun group follows
("the size of the buffer" gives "size", and "buffer": a determiner after "of" ends the phrase;
"list of file names" gives "list of file names"). Determiners and possessive pronouns are not
part of a phrase. The automaton runs over tag classes in a numba loop.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from apps.feature_extraction import tagger

OTHER, MOD, NOUN, OF, POS = 0, 1, 2, 3, 4
CLASS = np.zeros(len(tagger.TAGS), dtype=np.int8)
for _t in ("JJ", "JJR", "JJS", "CD"):
    CLASS[tagger.T[_t]] = MOD
for _t in ("NN", "NNS", "NNP", "NNPS"):
    CLASS[tagger.T[_t]] = NOUN
CLASS[tagger.T["POS"]] = POS


@njit(cache=True)
def noun_phrases(cls: np.ndarray) -> np.ndarray:
    """(k, 2) array of [first, last] token indices of the maximal noun phrases."""
    out = np.empty((cls.size, 2), dtype=np.int64)
    k = 0
    start = -1       # first token of the phrase being built
    last_noun = -1   # its last noun so far: the phrase ends there unless it grows
    for i in range(cls.size + 1):
        c = cls[i] if i < cls.size else OTHER
        if c == MOD or c == NOUN:
            if start < 0:
                start = i
            if c == NOUN:
                last_noun = i
            continue
        if (c == OF or c == POS) and start >= 0 and last_noun == i - 1 and i + 1 < cls.size \
                and (cls[i + 1] == MOD or cls[i + 1] == NOUN):
            continue  # "of" / "'s" between two noun groups: the phrase goes on
        if start >= 0 and last_noun >= start:
            out[k, 0] = start
            out[k, 1] = last_noun
            k += 1
        start = -1
        last_noun = -1
    return out[:k]


MAX_PHRASE_BYTES = 80  # longer "phrases" are run-ons (code, lists of names), not features


def extract(text: str) -> list[tuple[str, int]]:
    """(phrase, character offset) of every maximal noun phrase of a text. The phrase is the
    lower-cased tokens joined by single spaces (the dictionary key); phrases longer than
    MAX_PHRASE_BYTES in UTF-8 are dropped."""
    tokens, offsets = tagger.tokenize(text)
    if not tokens:
        return []
    tags = tagger.tag(tokens)
    cls = CLASS[tags]
    for i, tok in enumerate(tokens):  # "of" and "'s" are words, not tags, in this automaton
        low = tok.lower()
        if low == "of":
            cls[i] = OF
        elif low in ("'s", "\u2019s"):
            cls[i] = POS
    out = []
    for a, b in noun_phrases(cls):
        phrase = " ".join(t.lower() for t in tokens[a:b + 1])
        if len(phrase.encode("utf-8")) <= MAX_PHRASE_BYTES:
            out.append((phrase, int(offsets[a])))
    return out
