"""What a ``collect --program`` is, read from its file: Python source (and whether it imports
``instrument``), or something `collect` cannot run as Python (a C source, another
interpreter's script, a syntax error)."""

from __future__ import annotations

from pathlib import Path


def imports_instrument(program: str) -> bool:
    """Whether the Python program's source imports ``instrument`` (or a module of it); a file
    that is not Python source counts as not importing it."""
    import ast

    try:
        tree = ast.parse(Path(program).read_bytes())
    except (OSError, SyntaxError, ValueError):
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names = [node.module or ""]
        else:
            continue
        if any(n == "instrument" or n.startswith("instrument.") for n in names):
            return True
    return False


#: suffixes of sources that are compiled before they run
_COMPILED_SOURCES = (".c", ".cc", ".cpp", ".cxx", ".C", ".f", ".f90", ".F90", ".for")


def not_executable(program: Path) -> str | None:
    """Why the compiled (ELF) ``program`` cannot be started (mpiexec's ``execvp`` would fail on
    every rank); None when it can."""
    import os

    if os.access(program, os.X_OK):
        return None
    return f"a compiled program without permission to run it (chmod +x {program})"


def not_python(program: Path) -> str | None:
    """Why ``program``, not a compiled (ELF) program, cannot be run as the Python program
    `collect` runs it as (``runpy.run_path``: source, a compiled ``.pyc`` or a zip application);
    None when it can."""
    import ast
    import zipfile
    from importlib.util import MAGIC_NUMBER

    try:
        data = program.read_bytes()
    except OSError as exc:
        return f"cannot read ({exc.strerror})"
    if data.startswith(MAGIC_NUMBER) or zipfile.is_zipfile(program):
        return None
    try:
        ast.parse(data)
        return None
    except (SyntaxError, ValueError) as exc:
        why = (f"line {exc.lineno}: {exc.msg}" if isinstance(exc, SyntaxError) and exc.lineno
               else str(exc))
    first = data.split(b"\n", 1)[0]
    if program.suffix in _COMPILED_SOURCES:
        cc = "mpicc" if program.suffix == ".c" else \
            "mpif90" if program.suffix.lower().startswith(".f") else "mpicxx"
        return (f"a source file, not a program: compile it first ({cc} {program} -o "
                f"{program.with_suffix('')}) and give the executable")
    if program.suffix == ".py" or (first.startswith(b"#!") and b"python" in first):
        return f"a Python syntax error ({why})"
    if first.startswith(b"#!"):
        return ("a script for another interpreter; collect runs Python programs and compiled "
                "(ELF) programs")
    return f"neither a compiled (ELF) program nor Python ({why})"
