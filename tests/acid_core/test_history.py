"""A metastore after 20,000 transactions, on SQLite and PostgreSQL: housekeeping keeps only what Hive would keep, new
snapshots list only open and still-uncleaned aborted transactions, and no snapshot taken during the run (by the
writers, the compactor, the cleaner, housekeeping's checks) ever counts an aborted write id as valid while a directory
of that write still exists, or a committed write id as invalid.

Two unpartitioned tables: `hot` is compacted and cleaned at the end, `cold` never is, so its aborted writes (and their
transactions) must stay. 10% of the transactions abort; one in five of those wrote a delta first.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import sqlalchemy as sa

from acid_core.compaction.cleaner import clean
from acid_core.compaction.worker import CompactionWorker
from acid_core.metastore import Metastore
from acid_core.metastore import schema as s
from acid_core.metastore.codes import CompactionType
from acid_core.metastore.txns import Operation
from acid_core.operations.housekeeping import housekeep
from acid_core.read.merge import read_snapshot
from acid_core.write.writer import EmbeddedWriter

TXN_COUNT = 20_000
BATCH = 1000
COLUMNS = (("id", "int"), ("name", "string"))
DELTA = re.compile(r"^delta_(\d+)_(\d+)")


class Model:
    """What each table holds: rows by committed write id, and the write ids of aborted writes that left a delta."""

    def __init__(self, ms: Metastore) -> None:
        self.ms = ms
        self.tables = {name: ms.catalog.create_table("default", name, COLUMNS, params={"transactional": "true"})
                       for name in ("hot", "cold")}
        self.writers = {name: EmbeddedWriter(info.location, columns=info.columns) for name, info in self.tables.items()}
        self.committed: dict[str, dict[int, list[tuple]]] = {name: {} for name in self.tables}
        self.aborted: dict[str, set[int]] = {name: set() for name in self.tables}
        self.aborted_txns: dict[str, set[int]] = {name: set() for name in self.tables}
        self.snapshots_checked = 0

    def location(self, name: str) -> Path:
        return Path(self.tables[name].location)

    def write(self, txn_id: int, name: str, rows: list[tuple], *, abort: bool, operation=Operation.INSERT) -> int:
        txns = self.ms.txns
        write_id = txns.allocate_write_ids([txn_id], "default", name)[txn_id]
        if rows or not abort:  # an aborted one without rows failed before it recorded a write
            txns.add_components(txn_id, "default", name, [None], operation)
        if rows:
            self.writers[name].insert(rows, write_id=write_id)
        if abort:
            txns.abort(txn_id)
            if rows:
                self.aborted[name].add(write_id)
                self.aborted_txns[name].add(txn_id)
        else:
            txns.commit(txn_id)
            self.committed[name][write_id] = rows
        return write_id

    def check(self, snapshot) -> None:
        """Every aborted write with a directory on disk is invalid; every committed write id at or below the high
        watermark is valid; nothing else is decided here (open writes belong to the snapshot's time)."""
        for name in self.tables:
            full = f"default.{name}"
            if full not in snapshot.write_ids:
                continue
            write_ids = snapshot.write_ids[full]
            on_disk = set()
            for entry in self.location(name).iterdir():
                match = DELTA.match(entry.name)
                if match and match.group(1) == match.group(2):
                    on_disk.add(int(match.group(1)))
            for write_id in self.aborted[name] & on_disk:
                assert not write_ids.is_valid(write_id), (name, write_id, str(write_ids))
            for write_id in self.committed[name]:
                if write_id <= write_ids.high_watermark:
                    assert write_ids.is_valid(write_id), (name, write_id, str(write_ids))
        self.snapshots_checked += 1

    def rows(self, name: str) -> list[tuple]:
        full = f"default.{name}"
        snapshot = self.ms.txns.snapshot([full])
        table = read_snapshot(str(self.location(name)), write_ids=snapshot.write_ids[full], txns=snapshot.txns)
        if table.num_rows == 0:
            return []
        return sorted(zip(table.column("id").to_pylist(), table.column("name").to_pylist()))

    def expected(self, name: str) -> list[tuple]:
        return sorted(row for rows in self.committed[name].values() for row in rows)


def _watch_snapshots(ms: Metastore, model: Model) -> None:
    """Check every snapshot any component takes, when it is taken."""
    take = ms.txns.snapshot

    def checked(tables=(), **options):
        snapshot = take(tables, **options)
        model.check(snapshot)
        return snapshot

    ms.txns.snapshot = checked


def _run(ms: Metastore, model: Model, clock) -> int:
    """20,000 transactions; returns the id of one reader transaction left open from the middle of the run."""
    reader = None
    k = 0
    while k < TXN_COUNT:
        for txn_id in ms.txns.open_txns(BATCH):
            name = "hot" if (k // 100) % 2 else "cold"
            if k == TXN_COUNT // 2 + 5:
                reader = txn_id  # stays open: history above it must stay
            elif k % 10 == 0:  # 10% abort; one in five of those wrote a delta first
                model.write(txn_id, name, [(k, "lost")] if k % 50 == 0 else [], abort=True)
            elif k % 100 == 1:
                model.write(txn_id, name, [(k, f"r{k}")], abort=False)
            elif k % 100 == 3:
                ms.txns.commit(txn_id)  # an update in a transaction opened now: batch-mates would conflict
                model.write(ms.txns.open_txn(), name, [], abort=False, operation=Operation.UPDATE)  # WRITE_SET rows
            elif k % 100 == 7:
                model.write(txn_id, name, [], abort=False)  # a write id and nothing written
            else:
                ms.txns.commit(txn_id)
            k += 1
        if k % 5000 == 0:
            ms.txns.snapshot(["default.hot", "default.cold"])
            clock.advance(ms.txns.txn_timeout_ms // 2)
            if reader:
                ms.txns.heartbeat(reader)
            housekeep(ms)
    return reader


def _rows(ms: Metastore, table: sa.Table) -> list:
    return ms.db.run("read", lambda conn: conn.execute(sa.select(table)).all(), write=False)


@pytest.mark.slow
def test_history_after_20000_transactions_keeps_only_what_hive_keeps(ms, clock):
    model = Model(ms)
    _watch_snapshots(ms, model)
    reader = _run(ms, model, clock)
    for name in ("hot", "cold"):
        assert model.rows(name) == model.expected(name)

    # While the reader is open, history above it stays and snapshots still see exactly the committed rows.
    housekeep(ms)
    t2w = _rows(ms, s.txn_to_write_id)
    assert min(row.T2W_TXNID for row in t2w) < reader

    ms.txns.commit(reader)
    enqueued = ms.compactions.enqueue("default", "hot", None, CompactionType.MAJOR)
    CompactionWorker(ms).run(enqueued.compaction_id)
    [result] = clean(ms, log=lambda line: None)
    assert result.outcome == "cleaned", result
    assert not any(DELTA.match(p.name) for p in model.location("hot").iterdir())
    clock.advance(ms.txns.txn_timeout_ms + 1)
    report = housekeep(ms)
    assert report.changed

    # What Hive keeps: the aborted transactions whose writes are still on disk (cold's), TXN_TO_WRITE_ID from the
    # lowest of them, one COMPLETED_TXN_COMPONENTS row for cold's uncompacted writes, no WRITE_SET rows.
    cold_aborted = model.aborted_txns["cold"]
    txns = _rows(ms, s.txns)
    assert {(row.TXN_ID, row.TXN_STATE) for row in txns} == {(txn_id, "a") for txn_id in cold_aborted}
    lowest = min(cold_aborted)
    t2w = _rows(ms, s.txn_to_write_id)
    assert t2w and min(row.T2W_TXNID for row in t2w) == lowest
    ctc = _rows(ms, s.completed_txn_components)
    assert [(row.CTC_TABLE, row.CTC_WRITEID) for row in ctc] == [("cold", max(model.committed["cold"]))]
    assert _rows(ms, s.write_set) == []
    assert {row.TC_TXNID for row in _rows(ms, s.txn_components)} == cold_aborted

    # A new snapshot lists only the uncleaned aborted transactions; hot's write-id list has no exception left.
    snapshot = ms.txns.snapshot(["default.hot", "default.cold"])
    assert set(snapshot.txns.aborted_ids) == cold_aborted and not snapshot.txns.open_ids
    hot, cold = snapshot.write_ids["default.hot"], snapshot.write_ids["default.cold"]
    assert not hot.open_ids and not hot.aborted_ids
    assert set(cold.aborted_ids) == model.aborted["cold"] and not cold.open_ids
    assert len(str(snapshot.txns)) < 20 + 7 * len(cold_aborted)
    for name in ("hot", "cold"):
        assert model.rows(name) == model.expected(name)
    assert housekeep(ms).changed is False
    assert model.snapshots_checked > 10
