"""hindsight.compiling: one line when numba compiles (a cold cache), none when it loads."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

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
    first = _run(code)
    assert first.startswith("note: compiling hindsight's kernels") and first.count("\n") == 1
    assert _run(code) == ""         # the functions come from the cache the first run wrote


def _run(code: str) -> str:
    """The stdout of ``python -c code`` in a fresh process, which must succeed."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_kernels_load_without_numbas_blas_check():
    """The CLI lets numba skip its BLAS check (scipy.linalg is 0.3-0.5 s of start-up): a replay
    then works, its kernels load or compile, and scipy.linalg is never imported."""
    code = ("import sys\nfrom hindsight.compiling import skip_blas_check\nskip_blas_check()\n"
            "import numpy as np, replay\nfrom synthetic import simulate_to_dir\n"
            "import tempfile\nd = simulate_to_dir(tempfile.mkdtemp() + '/t', "
            "[[('send', 1, 8), ('coll', 'Allreduce', 8)], [('recv', 0), "
            "('coll', 'Allreduce', 8)]])\n"
            "r = replay.run(replay.prepare(d, use_cache=False), 'loggps', {'L': '1us'})\n"
            "assert r.makespan_ns > 0\n"
            "assert 'scipy.linalg' not in sys.modules, 'scipy.linalg imported'\n"
            "import scipy.linalg.cython_blas\n"       # other code still imports it as usual
            "print('ok')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, timeout=600,
                          env={**__import__("os").environ, "PYTHONPATH": f"{ROOT}:{ROOT}/tests"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


LEAN = """
import sys
sys.path.insert(0, {folder!r})
from hindsight.compiling import lean_cache_loads
lean_cache_loads()
import numba_arrays
print(numba_arrays.h(5), 'numba.np.npyfuncs' in sys.modules)
"""


def test_a_cached_kernel_loads_without_numbas_registries(tmp_path):
    """lean_cache_loads: a cached function (allocating arrays through numba's runtime, a typed
    dict through its C helpers) loads and runs without numba installing its typing and
    lowering registries (numba.np.npyfuncs is one of the modules that installing imports); a
    compilation installs them as before."""
    (tmp_path / "numba_arrays.py").write_text(
        "import numba, numpy as np\nfrom numba import types\nfrom numba.typed import Dict\n\n"
        "@numba.njit(cache=True)\ndef h(n):\n    a = np.full(n, 2.0)\n"
        "    d = Dict.empty(types.int64, types.float64)\n    for i in range(n):\n"
        "        d[i] = a[i] * i\n    s = 0.0\n    for i in range(n):\n        s += d[i]\n"
        "    return s\n")
    code = LEAN.format(folder=str(tmp_path))
    assert _run(code).strip() == "20.0 True"     # compiled: the registries were installed
    assert _run(code).strip() == "20.0 False"    # loaded from the cache without them


STALE = """
import sys
# Python's own .pyc check is the source's modification second and size: K = 1 rewritten as
# K = 2 within a second would import the old module, whatever numba's cache does
sys.dont_write_bytecode = True
from pathlib import Path
sys.path.insert(0, {folder!r})
import hindsight, numba
import hindsight.sources as src, hindsight.kernel_cache as kc
# the project: pkg/ here
src.ROOT = kc.ROOT = Path({folder!r})
src.PACKAGES = kc.PACKAGES = ("pkg",)
import pkg.caller
print(pkg.caller.f(1))
"""


def test_a_cached_kernel_is_retired_when_a_callee_in_another_file_changes(tmp_path):
    """numba's cache checks a kernel's own file only; hindsight.kernel_cache stamps the
    project's kernels with a digest of all its files, so a changed callee (here a constant it
    inlines, in another file) is compiled in, never the old machine code loaded."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "caller.py").write_text(
        "import numba\nfrom pkg.callee import g\n\n"
        "@numba.njit(cache=True)\ndef f(x):\n    return g(x) * 10\n")

    def run(k: int) -> str:
        (pkg / "callee.py").write_text(f"import numba\nK = {k}\n\n"
                                       "@numba.njit(cache=True)\ndef g(x):\n    return x + K\n")
        done = subprocess.run([sys.executable, "-c", STALE.format(folder=str(tmp_path))],
                              capture_output=True, text=True, cwd=ROOT, timeout=300)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()
    assert run(1) == "20"
    assert run(1) == "20"           # loaded from the cache
    assert run(2) == "30"           # the callee changed: compiled again, not the stale 20
    # the project's own cache files: "-<line>h" where numba names them "-<line>"
    assert [p.name.split(".")[1] for p in (pkg / "__pycache__").glob("caller.*.nbi")] == ["f-4h"]


def test_the_kernel_digest_covers_every_package_with_kernels():
    """hindsight.kernel_cache leaves validation and predict out of its digest: no kernel may
    live there (nor, by the layers, take anything in from there)."""
    from hindsight.kernel_cache import PACKAGES
    for pkg in ("hindsight", "instrument", "replay", "apps", "workloads", "validation",
                "predict"):
        if pkg not in PACKAGES:
            users = [p for p in (ROOT / pkg).rglob("*.py") if "numba" in p.read_text()]
            assert not users, f"{users}: kernels outside hindsight.kernel_cache.PACKAGES"


def _aged(path, seconds: int = 60) -> None:
    """Set ``path``'s modification time ``seconds`` back (a file not changed just now)."""
    import os
    import time

    t = time.time_ns() - seconds * 10**9
    os.utime(path, ns=(t, t))


@pytest.fixture
def fake_project(tmp_path, monkeypatch):
    """hindsight.sources pointed at a project of two files under tmp_path (its memo there too);
    afterwards the process's other tests get the real project's digests back."""
    import hindsight.sources as src

    (tmp_path / "pkg").mkdir()
    for name, text in (("a.py", "X = 1\n"), ("b.py", "Y = 2\n")):
        (tmp_path / "pkg" / name).write_text(text)
        _aged(tmp_path / "pkg" / name)
    with monkeypatch.context() as m:
        m.setattr(src, "ROOT", tmp_path)
        m.setattr(src, "PACKAGES", ("pkg",))
        m.setattr(src, "MEMO", tmp_path / "memo.json")
        yield src
    src.file_digests.cache_clear()
    src.project_digest.cache_clear()


def test_the_project_digest_rereads_only_files_whose_stamp_changed(fake_project):
    """hindsight.sources keeps each file's sha1 with its size and modification time, and trusts
    it while both are unchanged: a file changed (another size or time) is read again, and the
    digest then changes; one added or removed changes it too. A file changed in the last
    seconds is hashed every time, not kept (another change in the same clock tick, of the same
    size, would not show in its stamp)."""
    src = fake_project
    a, b = src.ROOT / "pkg" / "a.py", src.ROOT / "pkg" / "b.py"

    def fresh() -> tuple[dict, str]:
        src.file_digests.cache_clear()
        src.project_digest.cache_clear()
        return src.file_digests(), src.project_digest()

    files, first = fresh()
    assert list(files) == ["pkg/a.py", "pkg/b.py"] and src.MEMO.exists()
    memo = json.loads(src.MEMO.read_text())
    assert memo["pkg/a.py"][2] == files["pkg/a.py"]
    # the memo's word is taken while the stamp holds (here: a digest it made up)
    memo["pkg/a.py"][2] = "f" * 40
    src.MEMO.write_text(json.dumps(memo))
    assert fresh()[0]["pkg/a.py"] == "f" * 40
    # changed just now: read again (digest changed), and not kept until it has settled
    a.write_text("X = 10\n")
    files, second = fresh()
    assert files["pkg/a.py"] not in ("f" * 40, memo["pkg/a.py"][2]) and second != first
    assert "pkg/a.py" not in json.loads(src.MEMO.read_text())
    _aged(a)
    assert fresh()[0] == files
    assert json.loads(src.MEMO.read_text())["pkg/a.py"][2] == files["pkg/a.py"]
    # same size, another time: read again
    b.write_text("Y = 3\n")
    _aged(b, 30)
    assert fresh()[0]["pkg/b.py"] != files["pkg/b.py"]
    (src.ROOT / "pkg" / "c.py").write_text("")
    assert fresh()[1] not in (first, second)
    # a memo that is not one (unreadable, or not a table) is made again; one that cannot be
    # written is not kept
    for bad in ("{not json", "null", "[1, 2]"):
        src.MEMO.write_text(bad)
        assert fresh()[0]["pkg/c.py"] and isinstance(json.loads(src.MEMO.read_text()), dict)
    src.MEMO = src.ROOT / "missing" / "deeper" / "memo.json"     # (the fixture puts it back)
    assert fresh()[0] and not src.MEMO.exists()


def test_a_command_with_the_memo_in_place_does_not_load_hashlib():
    """hashlib loads OpenSSL (3.7 MB, a few ms): a command whose project files are as the memo
    says computes the project's digest without it (skipped while a file of the project was
    changed in the last seconds: such a file is hashed each time)."""
    import time

    import hindsight.sources as src

    if max(m for _, _, m in src._stamps()) > time.time_ns() - src.SETTLE_NS:
        pytest.skip("a project file was changed in the last seconds: it is hashed, not kept")
    code = ("import sys; import hindsight.sources as s; s.project_digest(); "
            "print('hashlib' in sys.modules)")
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           cwd=ROOT, check=True).stdout.strip() for _ in range(2)]
    assert runs[1] == "False", runs
