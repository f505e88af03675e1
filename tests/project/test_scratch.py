"""The tests' scratch directory (tests/support/scratch.py): a RAM file system where there is one, the caller's choice
otherwise."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

import pytest
from support import scratch


def test_a_callers_own_directory_is_kept(tmp_path):
    for chosen in ({"TMPDIR": str(tmp_path)}, {"PYTEST_DEBUG_TEMPROOT": str(tmp_path)}, {scratch.CHOICE_VARIABLE: "disk"}):
        environ = dict(chosen)
        assert scratch.use_ram_scratch(environ) is None
        assert environ == chosen


def test_a_directory_that_is_not_a_tmpfs_mount_is_not_used(tmp_path):
    assert scratch.ram_scratch_root(tmp_path) is None  # a directory inside a mount, whatever the mount is
    assert scratch.ram_scratch_root(tmp_path / "missing") is None


@pytest.mark.skipif(not scratch._is_tmpfs(scratch.RAM_ROOT), reason="no tmpfs at /dev/shm on this machine")
def test_on_a_tmpfs_the_run_and_what_it_starts_write_there(monkeypatch):
    root = scratch.ram_scratch_root()
    assert root == scratch.RAM_ROOT / scratch.DIRECTORY
    assert stat.S_IMODE(root.stat().st_mode) == 0o1777  # the PostgreSQL server runs as another user
    environ: dict[str, str] = {}
    assert scratch.use_ram_scratch(environ) == root
    assert environ == {"TMPDIR": str(root), "PYTEST_DEBUG_TEMPROOT": str(root), "SPARK_LOCAL_DIRS": str(root)}
    monkeypatch.setenv("TMPDIR", str(root))
    monkeypatch.setattr(tempfile, "tempdir", None)
    assert Path(tempfile.gettempdir()) == root
    assert os.statvfs(root).f_bavail * os.statvfs(root).f_frsize >= scratch.MIN_FREE_BYTES
