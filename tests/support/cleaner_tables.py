"""Tables the cleaner tests fill: each `write` is one real insert transaction, `compact` a real major compaction;
`three_writes` makes three deltas, `quiet` collects a cleaner's log lines. Shared by the cleaner, per-table cleaning and
reliability tests.
"""

from __future__ import annotations

from pathlib import Path

from acid_core.compaction.worker import CompactionWorker
from acid_core.metastore import Metastore
from acid_core.metastore.codes import CompactionState, CompactionType
from acid_core.read.merge import read_snapshot
from acid_core.write.table import AcidTable

COLUMNS = (("id", "int"), ("name", "string"))
MAJOR = CompactionType.MAJOR


class Table:
    """A transactional table and its writer; `write` runs one real transaction."""

    def __init__(self, ms: Metastore, name: str, params: dict | None = None) -> None:
        self.ms, self.name = ms, name
        params = {"transactional": "true", **(params or {})}
        self.info = ms.catalog.create_table("default", name, COLUMNS, params=params)

    @property
    def location(self) -> Path:
        return Path(self.info.location)

    @property
    def full_name(self) -> str:
        return f"default.{self.name}"

    def write(self, rows, *, abort: bool = False) -> int:
        """One insert transaction, committed or aborted as a killed writer's is (its delta stays); its write id."""
        write = AcidTable(self.ms, self.info).new_write(agent_info="test write")
        write.insert(rows)
        if abort:
            self.ms.txns.abort(write.txn_id)
        else:
            write.commit()
        return write.write_id

    def compact(self) -> int:
        compaction_id = self.ms.compactions.enqueue("default", self.name, None, MAJOR).compaction_id
        CompactionWorker(self.ms).run(compaction_id)
        return compaction_id

    def dirs(self) -> list[str]:
        return sorted(p.name for p in self.location.iterdir() if not p.name.startswith((".", "_")))

    def rows(self, snapshot=None) -> list[tuple]:
        snapshot = snapshot or self.ms.txns.snapshot([self.full_name])
        table = read_snapshot(str(self.location), write_ids=snapshot.write_ids[self.full_name], txns=snapshot.txns)
        return sorted(zip(table.column("id").to_pylist(), table.column("name").to_pylist()))


def three_writes(ms: Metastore, name: str = "t", **options) -> Table:
    table = Table(ms, name, **options)
    table.write([(1, "a")])
    table.write([(2, "b")])
    table.write([(3, "c")])
    return table


def state_of(ms: Metastore, compaction_id: int) -> CompactionState:
    return ms.compactions.get(compaction_id).state


def quiet(lines: list[str]):
    return lines.append
