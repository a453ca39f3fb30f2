"""Output paths of the commands: checked before any long work, refused the same way everywhere.

Every command that writes a file or a folder calls ``check_output`` on it first (before it
measures, replays or prints anything), so that a read-only folder, a missing parent or an
existing output is one ``Error:`` line naming the flag, not a traceback after minutes of work:

- the parent folder must exist (or be creatable, with ``make_parent``) and be writable;
- an existing output is refused unless the command was given ``--force`` (``force=True``); a
  folder the command itself owns and can resume (``validate --out``) passes ``exists_ok=True``;
- it also creates and removes an entry in the folder the output goes into (``probe``, on unless
  a caller has a reason): a folder that passes the permission bits but refuses new entries
  (/proc, even for root; a read-only mount seen through a bind) is then refused too.

Standard library only.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from hindsight.errors import DataError, UsageError


def check_output(path: Path | str, flag: str, *, force: bool = False, directory: bool = False,
                 exists_ok: bool = False, make_parent: bool = True, probe: bool = True) -> Path:
    """``path`` if the command may write it; otherwise UsageError (an existing output without
    ``--force``, a file where a folder is wanted) or DataError (a folder that cannot be written),
    each naming ``flag``."""
    path = Path(path)
    if path.exists():
        if directory and not path.is_dir():
            raise UsageError(f"{flag} {path}: exists and is not a folder")
        if not directory and path.is_dir():
            raise UsageError(f"{flag} {path}: is a folder, expected a file name")
        if not (force or exists_ok):
            raise UsageError(f"{flag} {path}: exists; use --force to replace it")
        target = path if directory else path.parent
    else:
        target = path.parent
    target = target if str(target) else Path(".")
    if target.exists() and not target.is_dir():
        raise DataError(f"{flag} {path}: {target} is not a folder")
    if not target.exists():
        if not make_parent:
            raise DataError(f"{flag} {path}: folder {target} does not exist")
        try:
            target.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise DataError(f"{flag} {path}: cannot create folder {target} "
                            f"({exc.strerror or exc})") from None
    if not os.access(target, os.W_OK | os.X_OK):
        why = _probe_error(target)          # (the system's reason: a read-only file system)
        raise DataError(f"{flag} {path}: folder {target} is not writable"
                        + (f" ({why})" if why else ""))
    if probe:
        _probe(target, path, flag)
    return path


def _probe_error(target: Path) -> str | None:
    """Why a folder cannot be created in ``target`` (its ``strerror``), or None if it can."""
    import tempfile

    try:
        os.rmdir(tempfile.mkdtemp(prefix=".hindsight-probe-", dir=target))
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


def _probe(target: Path, path: Path, flag: str) -> None:
    """Create and remove a folder in ``target``; DataError naming ``flag`` if either fails."""
    why = _probe_error(target)
    if why:
        raise DataError(f"{flag} {path}: cannot create anything in folder {target} ({why})")


def check_trace_folder(out: Path, flag: str) -> None:
    """``--force`` replaces a trace directory, never another folder: an existing non-empty
    ``out`` must hold a manifest and nothing but what a trace holds (UsageError naming what
    else is there)."""
    from hindsight.trace.core import MANIFEST_NAME, foreign_entries

    if not out.is_dir() or not any(out.iterdir()):
        return
    if not (out / MANIFEST_NAME).is_file():
        raise UsageError(f"{flag} {out}: a folder that is not a trace directory; --force "
                         f"replaces a trace directory only: choose another {flag}")
    other = foreign_entries(out)
    if other:
        more = f" and {len(other) - 1} more" if len(other) > 1 else ""
        raise UsageError(f"{flag} {out}: holds {other[0]}{more}, which no trace writes; "
                         f"--force replaces a trace directory only: choose another {flag}")


#: The image formats matplotlib writes (``FigureCanvasBase.get_supported_filetypes``), by the
#: suffix of a plot's path; a path without one is a PNG.
PLOT_FORMATS = ("avif", "eps", "gif", "jpeg", "jpg", "pdf", "pgf", "png", "ps", "raw", "rgba",
                "svg", "svgz", "tif", "tiff", "webp")


def plot_format(path: Path | str, flag: str = "--plot") -> str:
    """The image format of the plot ``path`` names (its suffix, else png), given to matplotlib
    explicitly (a plot is written under a temporary name first); UsageError naming ``flag``
    for a suffix matplotlib cannot write."""
    fmt = Path(path).suffix[1:].lower() or "png"
    if fmt not in PLOT_FORMATS:
        raise UsageError(f"{flag} {path}: matplotlib writes no '.{fmt}' images (one of "
                         f"{', '.join('.' + f for f in PLOT_FORMATS)}, or no suffix for PNG)")
    return fmt


def write_failed(path: Path | str, flag: str, exc: OSError) -> DataError:
    """The one-line error for an OSError met while writing ``path`` (disk full, a folder removed
    meanwhile); ``raise write_failed(...) from None``."""
    return DataError(f"{flag} {path}: cannot write ({exc.strerror or exc})")


def replace_dir(out: Path | str, write: Callable[[Path], object]) -> object:
    """Run ``write(tmp)`` into a new sibling folder, then put it in place of ``out`` (an older
    folder there is removed only once the new one is complete). A failed write leaves ``out``
    as it was. Returns what ``write`` returned."""
    import shutil

    out = Path(out)
    tmp = out.with_name(f".{out.name}.new-{os.getpid()}")
    old = out.with_name(f".{out.name}.old-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        result = write(tmp)
        if out.exists():
            os.replace(out, old)
        os.replace(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    shutil.rmtree(old, ignore_errors=True)
    return result


def same_or_inside(path: Path | str, other: Path | str) -> bool:
    """Whether ``path`` is ``other`` or lies inside it (both resolved)."""
    p, o = Path(path).resolve(), Path(other).resolve()
    return p == o or o in p.parents
