"""Tables the initiator tests fill: each `write` is one real transaction of small rows; `compact_major` runs the real
worker. Shared by the initiator and ranking tests.
"""

from __future__ import annotations

from dataclasses import dataclass

from acid_core.compaction.worker import CompactionWorker
from acid_core.metastore import Metastore
from acid_core.metastore.catalog import TableInfo
from acid_core.metastore.codes import CompactionType
from acid_core.write.table import AcidTable
from acid_core.write.table_write import TableWrite

MAJOR, MINOR = CompactionType.MAJOR, CompactionType.MINOR
COLUMNS = (("id", "int"), ("name", "string"))
HOUR_MS = 3600 * 1000


@dataclass
class Table:
    ms: Metastore
    info: TableInfo
    next_id: int = 0

    def open_write(self, partition: dict | None = None) -> TableWrite:
        """One open write transaction on the table (or `partition`)."""
        return AcidTable(self.ms, self.info).new_write(agent_info="test write",
                                                       partition=self.info.partition_name(partition or {}))

    def write(self, count: int = 1, *, partition: dict | None = None, abort: bool = False) -> int:
        """One transaction inserting `count` rows, committed or aborted as a killed writer's is (its delta stays);
        returns its write id."""
        rows = [(self.next_id + i, f"row {self.next_id + i} " + "x" * 40) for i in range(count)]
        self.next_id += count
        write = self.open_write(partition)
        write.insert(rows, partition=partition)
        if abort:
            self.ms.txns.abort(write.txn_id)
        else:
            write.commit()
        return write.write_id

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
    return Table(ms, info)
