"""A rule-based part-of-speech tagger in the spirit of Brill (1992, 1994).

Three levels, as in HDDI's tagger:

1. **Lexicon**: the possible Penn Treebank tags of a word, from the English lexicon that the
   ``lemminflect`` package ships (about 40,000 lemmas of the SPECIALIST lexicon with all their
   inflected forms), plus a hand-written list of closed-class words (determiners, pronouns,
   prepositions, conjunctions, modals, auxiliaries), which the lemminflect data do not cover.
   A known word starts with its most likely tag; lacking corpus counts, "most likely" is a fixed
   preference order (nouns before adjectives before verbs), which contextual rules then correct.
2. **Unknown-word rules**: numbers, capitalisation, hyphens, code identifiers and suffixes.
3. **Contextual rules**: Brill-style transformations "change tag A to B when the neighbouring
   tags are ...", restricted to tags the lexicon allows for the word. They run in a numba loop
   over integer tag ids, the hot loop of the tagger.

The tag set is Penn Treebank's (the lexicon's), not the Brown tag set HDDI used.
"""
from __future__ import annotations

import gzip
import importlib.resources
import re
from functools import lru_cache

import numpy as np
from numba import njit

TAGS = ("NN", "NNS", "NNP", "NNPS", "JJ", "JJR", "JJS", "VB", "VBD", "VBG", "VBN", "VBP",
        "VBZ", "RB", "RBR", "RBS", "DT", "PDT", "IN", "CC", "PRP", "PRP$", "MD", "TO", "WDT",
        "WP", "WP$", "WRB", "EX", "RP", "CD", "POS", "UH", "SYM", ".", ",", ":")
T = {t: i for i, t in enumerate(TAGS)}
# initial-tag preference among a word's lexicon tags (no corpus counts are available)
_PREFERENCE = ("NN", "NNS", "JJ", "VBN", "VBG", "RB", "VBD", "VB", "VBZ", "VBP", "JJR",
               "JJS", "RBR", "RBS", "NNP", "NNPS")

_CLOSED = {
    "DT": "the a an this that these those each every some any no all both either neither "
          "another such",
    "PDT": "",
    "IN": "of in on at by for with from into onto upon about above below under over between "
          "among through during before after since until within without against along across "
          "behind beyond via per than whether if because while although though unless as "
          "like near toward towards throughout despite except",
    "CC": "and or but nor yet plus",
    "PRP": "i you he she it we they me him her us them itself themselves himself herself "
           "yourself ourselves one",
    "PRP$": "my your his its our their",
    "MD": "can could may might must shall should will would",
    "TO": "to",
    "WDT": "which whatever whichever",
    "WP": "who whom what whoever",
    "WP$": "whose",
    "WRB": "when where why how whenever wherever",
    "EX": "there",
    "RB": "not n't also only just very too then so however thus therefore hence otherwise "
          "instead already always never often usually still even again here now",
    "VBZ": "is has does",
    "VBP": "are am have do",
    "VBD": "was were had did",
    "VBN": "been",
    "VBG": "being having doing",
    "VB": "be",
}
_CLOSED_WORDS = {w: tag for tag, ws in _CLOSED.items() for w in ws.split()}

TOKEN_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:['\u2019-][A-Za-z0-9_]+)*|\d+(?:[.,]\d+)*|\S")
_SENT_END = {".", "!", "?", ";"}


@lru_cache(maxsize=1)
def lexicon() -> dict[str, int]:
    """word (lower case) -> bit mask of its possible tags (bit i = TAGS[i])."""
    lex: dict[str, int] = {}
    res = importlib.resources.files("lemminflect") / "resources" / "infl_lu.csv.gz"
    forms_by_cat = {"noun": ("NNS",), "adj": ("JJR", "JJS"), "adv": ("RBR", "RBS"),
                    "verb": ("VBD", "VBN", "VBG", "VBZ")}
    base_by_cat = {"noun": ("NN",), "adj": ("JJ",), "adv": ("RB",), "verb": ("VB", "VBP")}
    with gzip.open(res, "rt", encoding="utf-8") as f:  # lemma,category,forms... (lemminflect)
        for line in f:
            parts = line.rstrip("\n").split(",")
            lemma, cat = parts[0], parts[1]
            if cat not in base_by_cat:
                continue
            proper = lemma[:1].isupper()
            entries = [(lemma, base_by_cat[cat])]
            for tag, spellings in zip(forms_by_cat[cat], parts[2:]):
                entries.extend((s, (tag,)) for s in spellings.split("/") if s)
            for word, tags in entries:
                if proper and cat == "noun":
                    tags = tuple("NNPS" if t == "NNS" else "NNP" for t in tags)
                key = word.lower()
                for t in tags:
                    lex[key] = lex.get(key, 0) | (1 << T[t])
    for w, tag in _CLOSED_WORDS.items():  # closed-class words: one fixed tag
        lex[w] = 1 << T[tag]
    return lex


def _initial(mask: int) -> int:
    for t in _PREFERENCE:
        if mask & (1 << T[t]):
            return T[t]
    return int(mask & -mask).bit_length() - 1  # lowest set bit


@lru_cache(maxsize=200_000)
def _lookup(word: str) -> tuple[int, int]:
    """(initial tag, allowed-tags mask) of a word without context; mask 0 = unknown word."""
    mask = lexicon().get(word.lower(), 0)
    if mask:
        return _initial(mask), mask
    return _unknown(word), 0


def _unknown(w: str) -> int:
    """Unknown-word rules (Brill's lexical rules, hand-written here)."""
    if w[0].isdigit():
        return T["CD"]
    if not (w[0].isalpha() or w[0] == "_"):
        return T["SYM"]
    low = w.lower()
    if "_" in w or any(c.isdigit() for c in w):
        return T["NN"]  # code identifiers in technical text behave like names
    if w[0].isupper():
        return T["NNPS"] if w.endswith("s") and len(w) > 3 and w[-2] != "s" else T["NNP"]
    if "-" in w:
        return T["JJ"]
    for suffix, tag in (("ing", "VBG"), ("ed", "VBN"), ("ly", "RB"), ("ness", "NN"),
                        ("tion", "NN"), ("sion", "NN"), ("ment", "NN"), ("ity", "NN"),
                        ("ance", "NN"), ("ence", "NN"), ("ism", "NN"), ("ist", "NN"),
                        ("able", "JJ"), ("ible", "JJ"), ("ful", "JJ"), ("ous", "JJ"),
                        ("ive", "JJ"), ("ic", "JJ"), ("less", "JJ"), ("ish", "JJ"),
                        ("al", "JJ"), ("ary", "JJ"), ("er", "NN"), ("or", "NN")):
        if low.endswith(suffix) and len(low) > len(suffix) + 2:
            return T[tag]
    if low.endswith("s") and not low.endswith(("ss", "us", "is")) and len(low) > 3:
        return T["NNS"]
    return T["NN"]


def _punct(tok: str) -> int:
    if tok in _SENT_END:
        return T["."]
    if tok == ",":
        return T[","]
    if tok in ":()[]{}\"'`-":
        return T[":"]
    return T["SYM"]


# Contextual rules run on integer ids; these constants are read by the numba kernel.
_NN, _NNS, _NNP, _JJ, _VB, _VBD, _VBG, _VBN, _VBP, _VBZ = (T[t] for t in (
    "NN", "NNS", "NNP", "JJ", "VB", "VBD", "VBG", "VBN", "VBP", "VBZ"))
_DT, _PRPS, _PRP, _TO, _MD, _IN, _CD, _PERIOD, _WDT, _RB = (T[t] for t in (
    "DT", "PRP$", "PRP", "TO", "MD", "IN", "CD", ".", "WDT", "RB"))


@njit(cache=True)
def _allowed(mask: np.int64, tag: int) -> bool:
    return mask == 0 or (mask >> tag) & 1 == 1  # unknown words may take any tag


@njit(cache=True)
def contextual(tags: np.ndarray, masks: np.ndarray) -> None:
    """Brill-style contextual transformations, applied left to right in one pass each."""
    n = tags.size
    for i in range(n):
        prev = tags[i - 1] if i > 0 else _PERIOD
        nxt = tags[i + 1] if i + 1 < n else _PERIOD
        t = tags[i]
        m = masks[i]
        noun_or_adj = t == _NN or t == _NNS or t == _JJ
        # NN/NNS/JJ -> VB after "to" or a modal ("to return", "can be used")
        if noun_or_adj and (prev == _TO or prev == _MD) and _allowed(m, _VB):
            tags[i] = _VB
        # NN -> VB at the start of a sentence before a determiner/pronoun/adjective:
        # imperatives ("Return the value", "Create a new socket")
        elif t == _NN and prev == _PERIOD and (nxt == _DT or nxt == _PRPS or nxt == _PRP
                                               or nxt == _JJ or nxt == _CD) \
                and _allowed(m, _VB):
            tags[i] = _VB
        # NNS -> VBZ after a singular subject and before an object ("the function returns a")
        elif t == _NNS and _allowed(m, _VBZ) and m != 0 and (
                prev == _PRP or prev == _WDT or
                ((prev == _NN or prev == _NNP) and (nxt == _DT or nxt == _PRPS or nxt == _TO
                                                    or nxt == _PRP or nxt == _RB))):
            tags[i] = _VBZ
        # VBN/VBD: a past form right after a noun or pronoun is a finite verb
        elif t == _VBN and (prev == _PRP or prev == _NNS or prev == _NNP) \
                and _allowed(m, _VBD) and nxt != _IN:
            tags[i] = _VBD
        # VBD -> VBN after a form of be/have ("is used", "has been")
        elif t == _VBD and (prev == _VBZ or prev == _VBP or prev == _VBD or prev == _VB) \
                and _allowed(m, _VBN):
            tags[i] = _VBN
        # a noun/adjective reading right after a subject pronoun is a verb ("they read")
        elif noun_or_adj and prev == _PRP and m != 0 and (_allowed(m, _VBP)
                                                           or _allowed(m, _VBD)):
            tags[i] = _VBP if _allowed(m, _VBP) else _VBD
        # JJ -> VBN after a form of be/have when the word is a participle ("is used")
        elif t == _JJ and m != 0 and (prev == _VBZ or prev == _VBP or prev == _VBD) \
                and _allowed(m, _VBN):
            tags[i] = _VBN
        # VB -> VBP after a plural subject or pronoun ("they return")
        elif t == _VB and (prev == _NNS or prev == _PRP) and _allowed(m, _VBP):
            tags[i] = _VBP
        # participles between a determiner and a noun modify it ("the given name")
        elif (t == _VBN or t == _VBG) and (prev == _DT or prev == _PRPS or prev == _JJ) \
                and (nxt == _NN or nxt == _NNS):
            tags[i] = _JJ


def tokenize(text: str) -> tuple[list[str], np.ndarray]:
    """Tokens and their character offsets in ``text``."""
    toks, offs = [], []
    for m in TOKEN_RE.finditer(text):
        toks.append(m.group())
        offs.append(m.start())
    return toks, np.asarray(offs, dtype=np.int32)


def tag(tokens: list[str]) -> np.ndarray:
    """Tag ids (indices into TAGS) of a token sequence."""
    n = len(tokens)
    tags = np.empty(n, dtype=np.int64)
    masks = np.zeros(n, dtype=np.int64)
    for i, tok in enumerate(tokens):
        c = tok[0]
        if c.isalpha() or c == "_":
            t, m = _lookup(tok)
            if m == 0 and c.isupper() and (i == 0 or tags[i - 1] == _PERIOD):
                # an unknown capitalised word at a sentence start need not be a name
                t = _unknown(tok.lower())
            tags[i], masks[i] = t, m
        elif c.isdigit():
            tags[i] = _CD
        else:
            tags[i] = _punct(tok)
    if n:
        contextual(tags, masks)
    return tags
