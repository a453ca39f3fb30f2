"""hindsight.outputs: the one check every command makes on its output paths."""

import os

import pytest

from hindsight.errors import DataError, UsageError
from hindsight.outputs import check_output, write_failed


def test_new_file_in_existing_or_new_folder(tmp_path):
    assert check_output(tmp_path / "a.csv", "--out") == tmp_path / "a.csv"
    assert check_output(tmp_path / "new" / "deeper" / "a.csv", "--out")
    assert (tmp_path / "new" / "deeper").is_dir()


def test_existing_output_needs_force(tmp_path):
    f = tmp_path / "a.csv"
    f.write_text("x")
    with pytest.raises(UsageError, match=r"^--out .*a.csv: exists; use --force to replace it$"):
        check_output(f, "--out")
    assert check_output(f, "--out", force=True) == f
    d = tmp_path / "d"
    d.mkdir()
    assert check_output(d, "--out", directory=True, exists_ok=True) == d
    with pytest.raises(UsageError, match="is a folder"):
        check_output(d, "--plot")
    with pytest.raises(UsageError, match="not a folder"):
        check_output(f, "--out", directory=True, force=True)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_read_only_folder_is_a_data_error(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        with pytest.raises(DataError, match="is not writable"):
            check_output(ro / "a.csv", "--out")
    finally:
        ro.chmod(0o700)


def test_uncreatable_parent_and_write_errors(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(DataError, match="cannot create folder"):
        check_output(blocker / "sub" / "a.csv", "--out")
    with pytest.raises(DataError, match="does not exist"):
        check_output(tmp_path / "missing" / "a.csv", "--out", make_parent=False)
    err = write_failed(tmp_path / "a.csv", "--out", OSError(28, "No space left on device"))
    assert str(err).endswith("cannot write (No space left on device)")
