"""hindsight.compiling: one line when numba compiles (a cold cache), none when it loads."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT

PROGRAM = """
import io, sys
sys.path.insert(0, {folder!r})
from hindsight.compiling import announce
buf = io.StringIO()
announce(buf)
announce(buf)                       # twice: still one line
import numba_user
numba_user.f(1)
print(buf.getvalue(), end="")
"""


def test_a_compilation_is_said_once_and_a_cache_load_not_at_all(tmp_path):
    (tmp_path / "numba_user.py").write_text(
        "import numba\n\n@numba.njit(cache=True)\ndef f(x):\n    return x + 1\n\n"
        "@numba.njit(cache=True)\ndef g(x):\n    return f(x) * 2\n\nassert g(1) == 4\n")
    code = PROGRAM.format(folder=str(tmp_path))

    def run() -> str:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              cwd=ROOT, timeout=300)
        assert done.returncode == 0, done.stderr
        return done.stdout
    first = run()
    assert first.startswith("note: compiling hindsight's kernels") and first.count("\n") == 1
    assert run() == ""              # the functions come from the cache the first run wrote
