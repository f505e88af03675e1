"""`acid compact run` names its scratch directory for its process and removes those of runs that are gone (a run
killed with SIGKILL removes nothing): tests/spark_jobs/test_compact_job.py checks it on a real killed run."""

from __future__ import annotations

import os
import subprocess
import sys

from acid_cli.compact import SCRATCH_PREFIX, sweep_scratch


def _gone_pid() -> int:
    """The pid of a process that has ended (and been waited for)."""
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_only_the_directories_of_runs_that_are_gone_are_removed(tmp_path):
    gone = tmp_path / f"{SCRATCH_PREFIX}{_gone_pid()}-abc123"
    gone.mkdir()
    (gone / "result.json").write_text("{}")
    alive = tmp_path / f"{SCRATCH_PREFIX}{os.getpid()}-def456"
    alive.mkdir()
    older = tmp_path / f"{SCRATCH_PREFIX}x1y2z3"  # no process in its name: left alone
    older.mkdir()
    other = tmp_path / "unrelated"
    other.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep").write_text("x")
    link = tmp_path / f"{SCRATCH_PREFIX}{_gone_pid()}-link"
    link.symlink_to(elsewhere)  # never followed, never removed
    a_file = tmp_path / f"{SCRATCH_PREFIX}{_gone_pid()}-file"
    a_file.write_text("x")

    assert sweep_scratch(str(tmp_path)) == [str(gone)]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        p.name for p in (alive, older, other, elsewhere, link, a_file))
    assert (elsewhere / "keep").exists()
    assert sweep_scratch(str(tmp_path)) == []


def test_a_missing_root_removes_nothing(tmp_path):
    assert sweep_scratch(str(tmp_path / "missing")) == []
