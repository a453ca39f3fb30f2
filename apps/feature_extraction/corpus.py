"""Document collections: a directory of text/HTML/XML/SGML files, or the built-in default
corpus, the docstrings of Python's standard library (one document per module, class or
function), written once as SGML files to a cache directory so that every paradigm reads the
same files the same way (real file I/O) and nothing needs to be downloaded."""
from __future__ import annotations

import ast
import html
import os
import sys
import sysconfig
import tempfile

from apps.common import InputError

EXTENSIONS = (".txt", ".text", ".html", ".htm", ".xml", ".sgml", ".sgm", ".xhtml")
_SKIP_DIRS = {"test", "tests", "site-packages", "idlelib", "lib2to3", "__pycache__",
              "turtledemo", "ensurepip", "pydoc_data"}
_VERSION = "v1"
MIN_DOC_CHARS = 80  # shorter docstrings are one-liners with hardly any noun phrase


def default_dir() -> str:
    base = os.environ.get("HINDSIGHT_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "hindsight")
    tag = f"stdlib-docstrings-py{sys.version_info[0]}.{sys.version_info[1]}-{_VERSION}"
    return os.path.join(base, tag)


def _docstrings() -> list[tuple[str, str]]:
    """(qualified name, docstring) for the standard library, in a fixed order."""
    root = sysconfig.get_paths()["stdlib"]
    out: list[tuple[str, str]] = []
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(x for x in dirs if x not in _SKIP_DIRS)
        for f in sorted(files):
            if not f.endswith(".py"):
                continue
            path = os.path.join(d, f)
            module = os.path.relpath(path, root)[:-3].replace(os.sep, ".")
            try:
                with open(path, encoding="utf-8") as fh:
                    tree = ast.parse(fh.read())
            except (SyntaxError, UnicodeDecodeError, ValueError):
                continue
            stack = [(tree, module)]
            while stack:  # depth-first in source order
                node, name = stack.pop()
                doc = ast.get_docstring(node)
                if doc and len(doc) >= MIN_DOC_CHARS:
                    out.append((name, doc))
                children = [c for c in ast.iter_child_nodes(node)
                            if isinstance(c, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))]
                stack.extend((c, f"{name}.{c.name}") for c in reversed(children))
    return out


def build_default(path: str) -> None:
    """Write the docstring corpus as SGML documents (TREC style: DOCNO, TITLE = the summary
    line, TEXT = the rest). Written to a temporary directory and renamed, so concurrent
    builders cannot leave a half-written corpus."""
    parent = os.path.dirname(path)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".building-", dir=parent)
    for i, (name, doc) in enumerate(_docstrings()):
        title, _, rest = doc.partition("\n")
        with open(os.path.join(tmp, f"{i:06d}.sgml"), "w", encoding="utf-8") as f:
            f.write(f"<DOC>\n<DOCNO>{html.escape(name)}</DOCNO>\n"
                    f"<TITLE>{html.escape(title.strip())}</TITLE>\n"
                    f"<TEXT>\n{html.escape(rest.strip())}\n</TEXT>\n</DOC>\n")
    try:
        os.rename(tmp, path)
    except OSError:  # another process won the race: use its corpus
        for f in os.listdir(tmp):
            os.unlink(os.path.join(tmp, f))
        os.rmdir(tmp)


def list_documents(directory: str) -> list[str]:
    """The documents of a collection: files with a known extension, recursively, sorted by
    relative path (the document id is the index in this list)."""
    if not os.path.isdir(directory):
        raise InputError(f"corpus directory {directory} does not exist")
    found = []
    for d, dirs, files in os.walk(directory):
        dirs[:] = sorted(x for x in dirs if not x.startswith("."))
        for f in sorted(files):
            if f.lower().endswith(EXTENSIONS):
                found.append(os.path.relpath(os.path.join(d, f), directory))
    if not found:
        raise InputError(f"corpus directory {directory} has no documents "
                         f"({', '.join(EXTENSIONS)})")
    return sorted(found)
