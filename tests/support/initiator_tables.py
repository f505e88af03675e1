"""Tables the initiator tests fill: each `write` is one real transaction of small rows; `compact_major` runs the real
worker. Shared by the initiator and ranking tests.
"""

from __future__ import annotations

from dataclasses import dataclass

from acid_core.compaction.worker import CompactionWorker
from acid_core.metastore import Metastore
from acid_core.metastore.catalog import TableInfo
from acid_core.metastore.compactions import CompactionType
from acid_core.metastore.txns import Operation
from acid_core.writer import EmbeddedWriter

MAJOR, MINOR = CompactionType.MAJOR, CompactionType.MINOR
COLUMNS = (("id", "int"), ("name", "string"))
HOUR_MS = 3600 * 1000


@dataclass
class Table:
    ms: Metastore
    info: TableInfo
    writer: EmbeddedWriter
    next_id: int = 0

    def write(self, count: int = 1, *, partition: dict | None = None, abort: bool = False) -> int:
        """One transaction inserting `count` rows; returns its write id."""
        txns, info = self.ms.txns, self.info
        txn_id = txns.open_txn()
        write_id = txns.allocate_write_ids([txn_id], info.database, info.name)[txn_id]
        txns.add_components(txn_id, info.database, info.name, [info.partition_name(partition or {})], Operation.INSERT)
        rows = [(self.next_id + i, f"row {self.next_id + i} " + "x" * 40) for i in range(count)]
        self.next_id += count
        self.writer.insert(rows, write_id=write_id, partition=partition)
        (txns.abort if abort else txns.commit)(txn_id)
        return write_id

    def compact_major(self) -> None:
        """A base from the real worker (then the initiator sees a base and no current deltas).

        One more small delta first: the worker refuses a MAJOR compaction of a single delta.
        """
        self.write(1)
        result = self.ms.compactions.enqueue(self.info.database, self.info.name, None, MAJOR)
        assert CompactionWorker(self.ms).run(result.compaction_id).result == "compacted"


def make_table(ms: Metastore, name: str, *, database: str = "default", partitioned: bool = False,
               params: dict | None = None) -> Table:
    info = ms.catalog.create_table(database, name, COLUMNS, partition_keys=[("p", "string")] if partitioned else (),
                                   params={"transactional": "true", **(params or {})})
    return Table(ms, info, EmbeddedWriter(info.location, columns=info.columns,
                                          partition_keys=[k.name for k in info.partition_keys]))
