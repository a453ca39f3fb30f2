"""Input parser: fields of interest (title, body) from text, HTML, XML or SGML documents.

Markup goes through the standard library's ``html.parser.HTMLParser``, which accepts HTML, XML
and SGML tag syntax and tolerates malformed markup (unclosed or stray tags, bare ``&``): text
inside a title tag is the title, text inside a body tag the body; without a body tag, all text
outside title/head/script/style/DOCNO tags is the body. Plain text: the first non-blank line is
the title, the rest the body. Offsets are character offsets within the extracted field text.
"""
from __future__ import annotations

from html.parser import HTMLParser

TITLE, BODY = 0, 1
FIELD_NAMES = ("title", "body")
_TITLE_TAGS = {"title", "headline", "hl", "head1"}
_BODY_TAGS = {"body", "text", "content", "abstract"}
_SKIP_TAGS = {"script", "style", "docno", "docid", "meta", "noscript"}


class _Fields(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.depth = {"title": 0, "body": 0, "skip": 0}
        self.title: list[str] = []
        self.body: list[str] = []
        self.other: list[str] = []
        self.saw_body = False

    def _kind(self, tag: str) -> str | None:
        if tag in _TITLE_TAGS:
            return "title"
        if tag in _BODY_TAGS:
            return "body"
        if tag in _SKIP_TAGS:
            return "skip"
        return None

    def handle_starttag(self, tag: str, attrs: list) -> None:
        kind = self._kind(tag)
        if kind:
            self.depth[kind] += 1
            self.saw_body |= kind == "body"
        elif tag in ("p", "br", "div", "li", "tr", "h1", "h2", "h3"):
            self._sink().append("\n")  # keep block boundaries as sentence-ish breaks

    def handle_endtag(self, tag: str) -> None:
        kind = self._kind(tag)
        if kind and self.depth[kind] > 0:  # a stray end tag is ignored
            self.depth[kind] -= 1

    def handle_startendtag(self, tag: str, attrs: list) -> None:
        pass  # <br/> etc.: nothing to open

    def _sink(self) -> list[str]:
        if self.depth["skip"]:
            return []
        if self.depth["title"]:
            return self.title
        if self.depth["body"]:
            return self.body
        return self.other

    def handle_data(self, data: str) -> None:
        self._sink().append(data)


def _clean(parts: list[str]) -> str:
    return " ".join(" ".join(parts).split())  # collapse whitespace: offsets are in this text


def parse(raw: str, markup: bool | None = None) -> tuple[str, str]:
    """(title, body) of one document."""
    if markup is None:
        markup = raw.lstrip().startswith("<")
    if not markup:
        lines = raw.strip().splitlines()
        if not lines:
            return "", ""
        return " ".join(lines[0].split()), " ".join(" ".join(lines[1:]).split())
    p = _Fields()
    p.feed(raw)
    p.close()
    body = p.body if p.saw_body else p.other
    return _clean(p.title), _clean(body)


def parse_file(path: str) -> tuple[str, str]:
    with open(path, encoding="utf-8", errors="replace") as f:
        raw = f.read()
    low = path.lower()
    markup = None if low.endswith((".txt", ".text")) else True
    return parse(raw, markup if markup else None)
