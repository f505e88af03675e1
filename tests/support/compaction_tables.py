"""Tables written through real metastore transactions and mirrored in `model.TableModel`, with the readers and checks
the compaction tests share: a table's rows under a snapshot, a compaction through CompactionWorker, a result directory
checked as Hive 3 writes it, and a six-write history of inserts, deletes, an update and a multi-statement transaction.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow.orc as pa_orc
import pyorc

from acid_core.compaction.worker import CompactionWorker, Outcome
from acid_core.format.bucketing import bucket_function
from acid_core.format.layout import parse_bucket_file
from acid_core.format.orc_events import DEFAULT_STRIPE_ROWS
from acid_core.format.rowid import RowId
from acid_core.format.validity import ValidWriteIdList
from acid_core.metastore import Metastore
from acid_core.metastore.catalog import TableInfo
from acid_core.metastore.codes import CompactionType
from acid_core.metastore.txns import Operation
from acid_core.read.merge import DEFAULT_MAX_DELETE_EVENTS_IN_MEMORY, read_snapshot
from acid_core.read.state import get_acid_state
from acid_core.write.table import AcidTable
from acid_core.write.table_write import TableWrite
from support.model import Snapshot, TableModel, table_by_row_id

MAJOR, MINOR = CompactionType.MAJOR, CompactionType.MINOR
COLUMNS = (("id", "int"), ("name", "string"))
KEY = ("originalTransaction", "bucket", "rowId")
WORKER_TIMEOUT_MS = 86_400_000  # hive.compactor.worker.timeout


# ---------------------------------------------------------------------------------------------------------------
# Tables written through real transactions, mirrored in an independent model


@dataclass
class Table:
    """A transactional table in the metastore, its writer, and a TableModel per partition.

    `writers=2` makes an unbucketed table that two parallel writers fill (bucket_00000 and bucket_00001): even ids
    go to writer 0, odd ids to writer 1, which is also the model's bucket of a row.
    """

    ms: Metastore
    info: TableInfo
    writers: int = 1
    stripe_rows: int = DEFAULT_STRIPE_ROWS
    models: dict[str | None, TableModel] = field(default_factory=dict)

    @property
    def full_name(self) -> str:
        return f"default.{self.info.name}"

    def partition_name(self, partition: dict | None) -> str | None:
        return self.info.partition_name(partition or {})

    def location(self, partition: dict | None = None) -> str:
        return self.info.partition_location(self.partition_name(partition))

    def model(self, partition: dict | None = None) -> TableModel:
        name = self.partition_name(partition)
        if name not in self.models:
            self.models[name] = TableModel(bucket_of=self.bucket_of)
        return self.models[name]

    @functools.cached_property
    def _hive_bucket(self) -> Callable[[tuple], int]:
        """Hive's bucket of a row of this bucketed table (made once, not per row)."""
        info = self.info
        return bucket_function(info.columns, info.bucket_columns, info.num_buckets, version=info.bucketing_version)

    def bucket_of(self, row: tuple) -> int:
        if self.info.num_buckets > 0:
            return self._hive_bucket(row) if self.info.num_buckets > 1 else 0
        return row[0] % self.writers

    @contextlib.contextmanager
    def transaction(self, partition: dict | None = None, *, operation: Operation = Operation.INSERT,
                    commit: bool = True, abort: bool = False) -> Iterator[Txn]:
        """One write (`AcidTable.new_write`) recording `operation`; then committed, or left open, or aborted as a
        killed writer's transaction is (timed out: its files stay for the cleaner)."""
        write = AcidTable(self.ms, self.info).new_write(agent_info="test write", partition=self.partition_name(partition),
                                                        stripe_rows=self.stripe_rows)
        write.record(self.partition_name(partition), operation)
        yield Txn(self, partition, write)
        if abort:
            self.ms.txns.abort(write.txn_id)
        elif commit:
            write.commit()

    def row_ids(self, ids: Sequence[int], partition: dict | None = None) -> list[RowId]:
        """The ROW__IDs (in the model) of the rows whose `id` column is in `ids`, newest version of each."""
        found = {}
        for row_id, row in sorted(self.model(partition).rows.items()):
            if row[0] in ids:
                found[row[0]] = RowId(*row_id)
        assert sorted(found) == sorted(ids), f"ids {ids} not all in the model"
        return [found[i] for i in ids]


@dataclass
class Txn:
    table: Table
    partition: dict | None
    write: TableWrite

    @property
    def txn_id(self) -> int:
        return self.write.txn_id

    @property
    def write_id(self) -> int:
        return self.write.write_id

    def insert(self, rows: Sequence[tuple], *, statement: int = 0) -> None:
        table, rows = self.table, [tuple(r) for r in rows]
        for writer_id in range(table.writers):
            mine = [r for r in rows if table.bucket_of(r) == writer_id] if table.writers > 1 else rows
            if mine:
                self.write.insert(mine, statement_id=statement, partition=self.partition,
                                  writer_id=writer_id if table.writers > 1 else 0)
        table.model(self.partition).insert(rows, write_id=self.write_id, statement=statement)

    def delete(self, ids: Sequence[int], *, statement: int = 0) -> None:
        row_ids = self.table.row_ids(ids, self.partition)
        self.write.delete(row_ids, statement_id=statement, partition=self.partition)
        self.table.model(self.partition).delete([_key(r) for r in row_ids], write_id=self.write_id)

    def update(self, ids: Sequence[int], new_rows: Sequence[tuple], *, statement: int = 0) -> None:
        assert self.table.writers == 1, "updates here use writer 0 only"
        row_ids = self.table.row_ids(ids, self.partition)
        self.write.update(row_ids, list(new_rows), statement_id=statement, partition=self.partition)
        self.table.model(self.partition).update([_key(r) for r in row_ids], new_rows, write_id=self.write_id,
                                                statement=statement)


def _key(row_id: RowId) -> tuple[int, int, int]:
    return (row_id.write_id, row_id.bucket_property, row_id.row_id)


def make_table(ms: Metastore, name: str, *, partitioned: bool = False, buckets: int = 0, writers: int = 1,
               params: dict | None = None, stripe_rows: int | None = None) -> Table:
    info = ms.catalog.create_table(
        "default", name, COLUMNS, partition_keys=[("p", "string")] if partitioned else (),
        bucket_columns=["id"] if buckets else (), num_buckets=buckets or None,
        params={"transactional": "true", **(params or {})})
    return Table(ms, info, writers, stripe_rows or DEFAULT_STRIPE_ROWS)


# ---------------------------------------------------------------------------------------------------------------
# Reading, compacting, inspecting


def model_snapshot(write_ids: ValidWriteIdList) -> Snapshot:
    return Snapshot(write_ids.high_watermark, frozenset(write_ids.open_ids), frozenset(write_ids.aborted_ids))


def snapshot(table: Table):
    return table.ms.txns.snapshot([table.full_name])


def read_rows(table: Table, partition: dict | None = None, *, at=None,
              max_delete_events_in_memory: int = DEFAULT_MAX_DELETE_EVENTS_IN_MEMORY) -> dict[tuple, tuple]:
    """ROW__ID -> row, as a reader with metastore snapshot `at` (default: a new one) sees the partition."""
    at = at or snapshot(table)
    return table_by_row_id(read_snapshot(table.location(partition), write_ids=at.write_ids[table.full_name],
                                         txns=at.txns, include_row_id=True,
                                         max_delete_events_in_memory=max_delete_events_in_memory))


def expected_rows(table: Table, partition: dict | None = None, *, at=None) -> dict:
    at = at or snapshot(table)
    return table.model(partition).visible(model_snapshot(at.write_ids[table.full_name]))


def compact(table: Table, kind: CompactionType, partition: dict | None = None, **worker_options) -> Outcome:
    enqueued = table.ms.compactions.enqueue("default", table.info.name, table.partition_name(partition), kind)
    assert enqueued.accepted, enqueued.message
    return CompactionWorker(table.ms, **worker_options).run(enqueued.compaction_id)


def entry(table: Table, compaction_id: int):
    return table.ms.compactions.get(compaction_id)


def directories(location: str) -> list[str]:
    return sorted(name for name in os.listdir(location) if os.path.isdir(os.path.join(location, name)))


def acid_state(table: Table, partition: dict | None = None, *, at=None):
    at = at or snapshot(table)
    return get_acid_state(table.location(partition), write_ids=at.write_ids[table.full_name], txns=at.txns)


def events(path: str | Path) -> list[dict]:
    return pa_orc.read_table(str(path)).to_pylist()


def check_result_directory(path: str | Path, *, operation: int) -> list[dict]:
    """A compactor result directory as Hive 3 writes it; returns its events.

    `_orc_acid_version` holding 2, one `bucket_N` file per bucket and nothing else; every file holds events of one
    operation sorted by key, each carrying its file's bucket, with hive.acid.key.index (one last key per stripe),
    hive.acid.stats and hive.acid.version read back through pyorc (not acid_core).
    """
    path = Path(path)
    names = sorted(os.listdir(path))
    assert names[0] == "_orc_acid_version" and (path / names[0]).read_bytes() == b"2", names
    assert names[1:] and all(parse_bucket_file(n) is not None and n == f"bucket_{parse_bucket_file(n).bucket:05d}"
                             for n in names[1:]), names
    found = []
    for name in names[1:]:
        bucket = parse_bucket_file(name).bucket
        orc = pa_orc.ORCFile(str(path / name))
        file_events = orc.read().to_pylist()
        assert file_events, f"{path.name}/{name} is empty"
        keys = [tuple(e[k] for k in KEY) for e in file_events]
        assert keys == sorted(keys) and len(set(keys)) == len(keys), f"{path.name}/{name}: keys not strictly sorted"
        assert {e["operation"] for e in file_events} == {operation}
        assert {(e["bucket"] >> 16) & 0xFFF for e in file_events} == {bucket}
        assert {e["bucket"] >> 29 for e in file_events} == {1}  # BucketCodec V1
        if operation == 0:
            assert all(e["originalTransaction"] == e["currentTransaction"] for e in file_events)
        else:
            assert all(e["row"] is None for e in file_events)
        last_keys = []
        for stripe in range(orc.nstripes):
            batch = orc.read_stripe(stripe, columns=list(KEY)).to_pylist()
            last_keys.append("{},{},{};".format(*(batch[-1][k] for k in KEY)))
        with open(path / name, "rb") as stream:
            metadata = pyorc.Reader(stream).user_metadata
        assert metadata["hive.acid.key.index"] == "".join(last_keys).encode()
        counts = [0, 0, 0]
        counts[operation] = len(file_events)
        assert metadata["hive.acid.stats"] == ",".join(map(str, counts)).encode()
        assert metadata["hive.acid.version"] == b"2"
        found.extend(file_events)
    return found


def insert_events_of(rows: dict) -> list[dict]:
    """The events a major compaction writes for surviving rows: operation 0, ROW__ID kept, currentTransaction =
    originalTransaction = the row's write id."""
    return sorted(({"operation": 0, "originalTransaction": w, "bucket": b, "rowId": r, "currentTransaction": w,
                    "row": dict(zip((c for c, _ in COLUMNS), row))} for (w, b, r), row in rows.items()),
                  key=lambda e: tuple(e[k] for k in KEY))


def by_key(found: list[dict]) -> list[dict]:
    return sorted(found, key=lambda e: tuple(e[k] for k in KEY))


# ---------------------------------------------------------------------------------------------------------------
# Major and minor on partitioned, bucketed and unbucketed tables


LAYOUTS = {
    "partitioned": {"partitioned": True},
    "bucketed": {"buckets": 2},
    "two-writers": {"writers": 2},
}


def write_history(table: Table, partition: dict | None) -> None:
    """Six write ids: inserts, an aborted insert+delete, deletes, a split-update, and one transaction of three
    statements (stmt 0 inserts, stmt 1 deletes one of those rows and an older one, stmt 2 inserts)."""
    with table.transaction(partition) as txn:                                  # 1
        txn.insert([(i, f"r{i}") for i in range(1, 11)])
    with table.transaction(partition) as txn:                                  # 2
        txn.insert([(i, f"r{i}") for i in range(11, 15)])
    with table.transaction(partition, operation=Operation.DELETE, abort=True) as txn:   # 3, aborted
        txn.insert([(100, "aborted"), (101, "aborted")])
        txn.delete([1], statement=1)
    with table.transaction(partition, operation=Operation.DELETE) as txn:      # 4
        txn.delete([2, 3])
    with table.transaction(partition, operation=Operation.UPDATE) as txn:      # 5
        if table.writers == 1:
            txn.update([11], [(11, "r11-new")])
        else:
            txn.delete([11])
            txn.insert([(11, "r11-new")], statement=1)
    with table.transaction(partition, operation=Operation.DELETE) as txn:      # 6
        txn.insert([(20, "s0"), (21, "s0")])
        txn.delete([20, 4], statement=1)
        txn.insert([(22, "s2"), (23, "s2")], statement=2)
