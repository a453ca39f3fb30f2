"""A command's output file is whole or absent: whatever stops its writing (an error, a full
disk, Ctrl-C, the process killed) leaves an older file at that path as it was and no partial
one (``hindsight.system.write_atomic``)."""

from __future__ import annotations

import errno
import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from hindsight.cli import main
from hindsight.system import write_atomic
from synthetic import simulate_to_dir
from tests.conftest import ROOT

PROGS = [[("compute", 3000), ("send", 1, 1000), ("recv", 1), ("coll", "Allreduce", 64)],
         [("recv", 0), ("compute", 2000), ("send", 0, 1000), ("coll", "Allreduce", 64)]]


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if ".tmp" in p.name)


def test_a_failed_write_keeps_the_old_file_and_leaves_nothing(tmp_path):
    out = tmp_path / "a.csv"
    out.write_text("old\n")

    for stop in (OSError(errno.ENOSPC, "No space left on device"), KeyboardInterrupt()):
        def half(tmp: Path) -> None:
            tmp.write_text("half of the new")
            raise stop

        with pytest.raises(type(stop)):
            write_atomic(out, half)
        assert out.read_text() == "old\n" and _leftovers(tmp_path) == []
    assert write_atomic(out, lambda tmp: tmp.write_text("new\n")) == 4
    assert out.read_text() == "new\n" and _leftovers(tmp_path) == []


def test_the_temporary_name_hides_from_globs_and_a_link_keeps_pointing(tmp_path):
    seen = []
    target = tmp_path / "real.json"
    target.write_text("old")
    target.chmod(0o600)
    link = tmp_path / "link.json"
    link.symlink_to(target)
    write_atomic(link, lambda tmp: (seen.append(tmp), tmp.write_text("new")))
    assert seen[0].parent == tmp_path and not seen[0].match("*.json")
    assert link.is_symlink() and target.read_text() == "new"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600          # (its permission bits kept)
    # (for pandas, which infers a compression from the suffix)
    write_atomic(tmp_path / "s.csv.gz", lambda tmp: (seen.append(tmp), tmp.write_text("x")),
                 keep_suffix=True)
    assert seen[-1].suffix == ".gz" and (tmp_path / "s.csv.gz").read_text() == "x"


def test_a_path_that_is_no_regular_file_is_written_directly():
    write_atomic(os.devnull, lambda p: p.write_text("discarded"))
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)


def test_a_killed_writer_leaves_the_old_file(tmp_path):
    """SIGKILL (as the out-of-memory killer sends) while the new file is half written."""
    out = tmp_path / "t.json"
    out.write_text("old")
    code = ("import sys, time; from pathlib import Path; from hindsight.system import "
            "write_atomic\n"
            "def w(tmp):\n"
            "    tmp.write_text('half'); print('writing', flush=True); time.sleep(60)\n"
            f"write_atomic(Path({str(out)!r}), w)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout.readline().strip() == "writing"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    assert out.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir() if p.name != "t.json"] == [
        f".t.json.{proc.pid}.tmp"]       # (hidden, and never taken for the output)


@pytest.mark.parametrize("fmt,module,function", [
    ("perfetto", "hindsight.interop.perfetto", "export_perfetto"),
    ("pipit", "hindsight.interop.pipit", "export_pipit"),
    ("goal", "hindsight.interop.goal", "export_goal"),
])
def test_an_export_that_fails_half_way_keeps_the_old_file(tmp_path, monkeypatch, fmt, module,
                                                          function):
    import importlib

    trace = simulate_to_dir(tmp_path / "t", PROGS)
    out = tmp_path / f"t.{fmt}"
    ok = CliRunner().invoke(main, ["export", str(trace), "--format", fmt, "--out", str(out)])
    assert ok.exit_code == 0, ok.output
    before = out.read_bytes()

    def full(*args, **kw):
        Path(args[1]).write_text("the first half")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(importlib.import_module(module), function, full)
    r = CliRunner().invoke(main, ["export", str(trace), "--format", fmt, "--out", str(out),
                                  "--force"])
    assert r.exit_code == 1 and r.output.startswith("Error: --out") and \
        "No space left on device" in r.output, r.output
    assert out.read_bytes() == before and _leftovers(tmp_path) == []


def test_a_plot_without_a_suffix_is_a_png_and_an_unknown_suffix_a_usage_error(tmp_path):
    trace = simulate_to_dir(tmp_path / "t", PROGS)
    plot = tmp_path / "myplot"
    r = CliRunner().invoke(main, ["sweep", str(trace), "--vary", "L=1us,2us", "--json",
                                  "--plot", str(plot)])
    assert r.exit_code == 0, r.output
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and _leftovers(tmp_path) == []
    r = CliRunner().invoke(main, ["sweep", str(trace), "--vary", "L=1us,2us", "--json",
                                  "--plot", str(tmp_path / "p.xyz")])
    assert r.exit_code == 2 and r.output.startswith("Error: --plot") and "'.xyz'" in r.output
    assert not (tmp_path / "p.xyz").exists()
