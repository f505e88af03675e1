"""Where the tests' throwaway files go: a directory on a RAM file system (Linux's /dev/shm) when one is there with
room to spare, else the system's temporary directory as before.

Everything a test writes is thrown away, and on the disk of the machines this project is tested on a file's creation
alone costs about 0.3 ms of kernel time (tmpfs: 0.01 ms): a PostgreSQL `CREATE DATABASE` from the metastore template
(about 400 files) took 300 ms there and 11 ms here, and every test writes tables of small files, SQLite databases that
sync on commit and Airflow homes. `use_ram_scratch()` points the test run and everything it starts there: pytest's
`tmp_path` (PYTEST_DEBUG_TEMPROOT), Python's `tempfile` in this process and its children (TMPDIR: the PostgreSQL
servers, Airflow's home, the JVM archive's job), and Spark's scratch files (SPARK_LOCAL_DIRS). The file system is
still a real one: the same system calls, renames and hard links; only where the bytes sit differs.

Not switched on by `tests/conftest.py`: with it, two inotify checks of `test_datasource_read` (an unpruned read
must open nothing but the partitions) failed in two of four full runs, seeing the partitions' parent directories
opened; until that is understood the suite runs on the system's directory. A caller's own choice wins: with TMPDIR, PYTEST_DEBUG_TEMPROOT or ACID_TEST_SCRATCH set (ACID_TEST_SCRATCH=disk keeps
the system's directory), nothing is changed.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

RAM_ROOT = Path("/dev/shm")
DIRECTORY = "acid-tests"
MIN_FREE_BYTES = 4 << 30  # the suite writes well under 1 GiB at a time; leave the rest of the RAM to its processes
CHOICE_VARIABLE = "ACID_TEST_SCRATCH"
TMPFS_MAGIC = 0x01021994


def ram_scratch_root(root: Path = RAM_ROOT) -> Path | None:
    """`root`/acid-tests (made, sticky and world-writable like /tmp, since the PostgreSQL server runs as another user)
    if `root` is a writable tmpfs with MIN_FREE_BYTES free; None otherwise."""
    try:
        stats = os.statvfs(root)
    except OSError:
        return None
    if stats.f_bavail * stats.f_frsize < MIN_FREE_BYTES or not os.access(root, os.W_OK | os.X_OK):
        return None
    if not _is_tmpfs(root):
        return None
    path = root / DIRECTORY
    try:
        path.mkdir(exist_ok=True)
        if path.stat().st_uid == os.geteuid():
            path.chmod(0o1777)
    except OSError:
        return None
    return path if os.access(path, os.W_OK | os.X_OK) else None


def _is_tmpfs(path: Path) -> bool:
    """Whether `path` is mounted as tmpfs (by /proc/mounts; False where that cannot be read)."""
    try:
        mounts = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return False
    target = str(path.resolve())
    return any(fields[1] == target and fields[2] == "tmpfs" for fields in (line.split() for line in mounts)
               if len(fields) >= 3)


def use_ram_scratch(environ=os.environ) -> Path | None:
    """Point this process and what it starts at `ram_scratch_root()`, unless the caller chose a directory; returns
    the directory chosen (None: left as it was)."""
    if environ.get(CHOICE_VARIABLE) == "disk" or any(environ.get(name) for name in ("TMPDIR", "PYTEST_DEBUG_TEMPROOT")):
        return None
    root = ram_scratch_root()
    if root is None:
        return None
    environ["TMPDIR"] = str(root)
    environ["PYTEST_DEBUG_TEMPROOT"] = str(root)
    environ.setdefault("SPARK_LOCAL_DIRS", str(root))
    tempfile.tempdir = None  # gettempdir() reads TMPDIR again
    return root
