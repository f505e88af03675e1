"""Shared by the end-to-end compaction tests: a partitioned ACID table written in real metastore transactions, its rows
under a metastore snapshot, a directory fingerprint, and `acid compact run` as a real process.

Imported as `support.<module>` (tests/support/__init__.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from acid_core.format.rowid import RowId
from acid_core.metastore import Metastore
from acid_core.metastore.locks import LockType
from acid_core.metastore.txns import Operation, full_table_name
from acid_core.read.merge import read_snapshot
from acid_core.write.table_write import TableWrite
from support.processes import kill_session

ROOT = Path(__file__).resolve().parents[2]
COLUMNS = (("id", "bigint"), ("name", "string"), ("amount", "double"))
WORKER_TIMEOUT_MS = 86_400_000  # hive.compactor.worker.timeout: Hive's default, one day
ROW_ID_COLUMNS = ["row__id.writeid", "row__id.bucketid", "row__id.rowid"]


def make_rows(start: int, count: int) -> list[tuple]:
    return [(i, f"name-{i % 997:03d}", i / 8) for i in range(start, start + count)]


@dataclass
class PartitionedTestTable:
    """A transactional table partitioned by `p int`, written with the embedded writer inside metastore transactions."""

    metastore: Metastore
    name: str
    database: str = "default"

    @classmethod
    def create(cls, metastore: Metastore, name: str) -> PartitionedTestTable:
        metastore.catalog.create_table("default", name, list(COLUMNS), partition_keys=[("p", "int")],
                                       params={"transactional": "true"})
        return cls(metastore, name)

    @property
    def info(self):
        return self.metastore.catalog.get_table(self.database, self.name)

    @property
    def full_name(self) -> str:
        return full_table_name(self.database, self.name)

    def partition(self, p: int) -> str:
        return self.info.partition_name({"p": p})

    def location(self, p: int) -> Path:
        return Path(self.info.partition_location(self.partition(p)))

    def _write(self, p: int, operation: Operation, lock_type: LockType, write, *, abort: bool = False) -> int:
        """One write transaction on partition `p` (acid_core's TableWrite); committed unless `abort`."""
        with TableWrite.open(self.metastore, self.database, self.name, partition=self.partition(p),
                             agent_info=f"test {operation.name.lower()}", lock_timeout_ms=10_000,
                             lock_type=lock_type) as txn:
            write(txn)
            if abort:
                txn.abort()
        return txn.write_id

    def insert(self, p: int, rows: list[tuple], *, abort: bool = False) -> int:
        return self._write(p, Operation.INSERT, LockType.SHARED_WRITE,
                           lambda txn: txn.insert(rows, partition={"p": p}), abort=abort)

    def delete(self, p: int, row_ids: list[RowId]) -> int:
        return self._write(p, Operation.DELETE, LockType.EXCL_WRITE,
                           lambda txn: txn.delete(row_ids, partition={"p": p}))

    def rows(self, p: int) -> pa.Table:
        """The partition's rows with their ROW__IDs, under a snapshot taken from the metastore now, in ROW__ID order."""
        snapshot = self.metastore.txns.snapshot([self.full_name])
        table = read_snapshot(str(self.location(p)), write_ids=snapshot.write_ids[self.full_name], txns=snapshot.txns,
                              include_row_id=True).flatten()
        return table.sort_by([(name, "ascending") for name in ROW_ID_COLUMNS])

    def row_ids(self, p: int) -> list[RowId]:
        table = self.rows(p)
        return [RowId(*values) for values in zip(*(table.column(n).to_pylist() for n in ROW_ID_COLUMNS))]


def fingerprint(location: Path) -> dict[str, tuple[int, int]]:
    """Every file and directory under `location` (hidden ones included) with its size and modification time."""
    found = {}
    for path in sorted(location.rglob("*")):
        stat = path.stat()
        found[str(path.relative_to(location))] = (stat.st_size if path.is_file() else -1, stat.st_mtime_ns)
    return found


def hidden_entries(location: Path) -> list[str]:
    return sorted(path.name for path in location.iterdir() if path.name.startswith("."))


def compact_command(compaction_id: int, metastore_url: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "acid_cli.main", "compact", "run", str(compaction_id), "--metastore", metastore_url,
            *extra]


def compact_environment(acid_home: Path, *, master: str | None = "local[2]") -> dict[str, str]:
    """The CLI's environment: ACID_SPARK_MASTER set to `master` (removed when None), this Python for Spark."""
    environment = dict(os.environ)
    environment.pop("ACID_SPARK_MASTER", None)
    if master is not None:
        environment["ACID_SPARK_MASTER"] = master
    environment.update(PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable, ACID_HOME=str(acid_home),
                       SPARK_LOCAL_IP="127.0.0.1")
    return environment


def data_source_lookup_probe(environment: dict[str, str], directory: Path) -> Path:
    """Put a module on `environment`'s PYTHONPATH that leaves a marker file (returned) when Spark looks up the data
    sources installed in Python: once per application, at the first registration or use of a data source, a Python
    process imports every `pyspark_*` module on the path."""
    directory.mkdir(parents=True, exist_ok=True)
    marker = directory / "looked-up"
    (directory / "pyspark_lookup_probe.py").write_text(f"open({str(marker)!r}, 'a').close()\n")
    environment["PYTHONPATH"] = os.pathsep.join(filter(None, [str(directory), environment.get("PYTHONPATH")]))
    return marker


def run_compact(compaction_id: int, metastore_url: str, acid_home: Path, *extra: str,
                master: str | None = "local[2]", timeout: float = 300,
                environment: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`acid compact run ID --metastore URL` to the end, in its own session so that everything it starts can be
    ended afterwards (also on a time-out); in `environment` if given, else `compact_environment`."""
    environment = environment if environment is not None else compact_environment(acid_home, master=master)
    process = subprocess.Popen(compact_command(compaction_id, metastore_url, *extra), cwd=ROOT, text=True,
                               env=environment, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_session(process.pid)
        stdout, stderr = process.communicate()
        message = f"acid compact run {compaction_id} did not finish in {timeout} s:\n{stderr[-4000:]}"
        raise AssertionError(message) from None
    finally:
        kill_session(process.pid)  # Spark's Python daemon has its own process group: whatever is left of the session
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)
