"""The compaction history's own reads and writes: SHOW COMPACTIONS over the queue and COMPLETED_COMPACTIONS, and
the purge of old history entries by Hive's retention settings (`HistoryRetention`). `CompactionQueue.show` and
`CompactionQueue.purge_history` are these.

Cost: SHOW filters and limits in SQL on each of the two tables; a purge since a time reads only the partitions with
new or ageing entries (by index), so neither grows with the whole history.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from acid_core import settings
from acid_core.metastore import schema as s
from acid_core.metastore.codes import CompactionState, CompactionType
from acid_core.metastore.compaction_rows import CompactionInfo, info_from_history, info_from_queue
from acid_core.metastore.engine import Database


@dataclass(frozen=True, slots=True)
class HistoryRetention:
    """How many history entries to keep per partition and state, and for how long (Hive's retention settings)."""

    succeeded: int = settings.HISTORY_SUCCEEDED.default
    failed: int = settings.HISTORY_FAILED.default
    did_not_initiate: int = settings.HISTORY_DID_NOT_INITIATE.default
    refused: int = settings.HISTORY_REFUSED.default
    timeout_ms: int = settings.HISTORY_TIMEOUT.default_ms


def show(db: Database, *, compaction_id: int | None = None, database: str | None = None,
         table: str | None = None, partition: str | None = None, pool: str | None = None, compaction_type: CompactionType | None = None,
         state: CompactionState | None = None, limit: int | None = None) -> list[CompactionInfo]:
    """SHOW COMPACTIONS: queue and history, newest activity first, then by enqueue time (Hive's default order).

    The filters and the limit run in SQL on each of the two tables, so a limited SHOW reads at most `limit` rows
    of each however long the history.
    """
    def query(table: sa.Table, prefix: str, history: bool):
        c = table.c
        times = [sa.func.coalesce(c[f"{prefix}_{name}"], 0) for name in (("END",) if history else ()) + ("START", "COMMIT_TIME")]
        activity = (sa.func.greatest if db.dialect == "postgresql" else sa.func.max)(*times, 0)
        where = []
        for value, column in ((compaction_id, "ID"), (database and database.lower(), "DATABASE"),
                              (table_name and table_name.lower(), "TABLE"), (partition, "PARTITION"),
                              (compaction_type and compaction_type.value, "TYPE"), (state and state.value, "STATE")):
            if value is not None:
                where.append(c[f"{prefix}_{column}"] == value)
        if pool is not None:
            where.append(sa.func.coalesce(c[f"{prefix}_POOL_NAME"], "default") == pool)
        select = sa.select(table).where(*where).order_by(activity.desc(), sa.func.coalesce(
            c[f"{prefix}_ENQUEUE_TIME"], 0), c[f"{prefix}_ID"])
        return select.limit(limit) if limit is not None else select

    table_name = table

    def read(conn: Connection) -> list[CompactionInfo]:
        found = [info_from_queue(r) for r in conn.execute(query(s.compaction_queue, "CQ", False)).all()]
        found += [info_from_history(r) for r in conn.execute(query(s.completed_compactions, "CC", True)).all()]
        return found

    wanted = db.run("show compactions", read, write=False, snapshot=True)
    wanted.sort(key=lambda e: (-(max(e.end_ms or 0, e.start_ms or 0, e.commit_ms or 0)), e.enqueue_ms or 0, e.id))
    return wanted[:limit] if limit is not None else wanted


def purge(db: Database, retention: HistoryRetention = HistoryRetention(), *, since_ms: int | None = None) -> int:
    """Keep the newest N history entries per partition and state; drop old failures superseded by a success.

    Args:
        since_ms: look only at partitions with an entry that ended since then, or with a failed, did-not-initiate
            or refused entry that started before the retention time-out (both found by index), instead of the
            whole history: a partition's counts grow only when it gets an entry, and its old failures age out
            in place. None looks at every partition (a changed retention then applies everywhere at once).
    """
    keep = {CompactionState.SUCCEEDED.value: retention.succeeded, CompactionState.FAILED.value: retention.failed,
            CompactionState.DID_NOT_INITIATE.value: retention.did_not_initiate,
            CompactionState.REFUSED.value: retention.refused}
    cc = s.completed_compactions.c
    columns = (cc.CC_ID, cc.CC_DATABASE, cc.CC_TABLE, cc.CC_PARTITION, cc.CC_STATE, cc.CC_TYPE, cc.CC_START)
    cutoff = db.clock.now_ms() - retention.timeout_ms
    aging = ("a", "f", "c")

    def history_rows(conn: Connection) -> list[Any]:  # rows of `columns`
        if since_ms is None:
            return list(conn.execute(sa.select(*columns).order_by(cc.CC_ID.desc())).all())
        where = {tuple(row) for row in conn.execute(sa.select(cc.CC_DATABASE, cc.CC_TABLE, cc.CC_PARTITION)
                                                    .where(cc.CC_END >= since_ms)).all()}
        where |= {tuple(row) for row in conn.execute(sa.select(cc.CC_DATABASE, cc.CC_TABLE, cc.CC_PARTITION)
                                                     .where(cc.CC_STATE.in_(aging), sa.func.coalesce(cc.CC_START, 0) < cutoff)).all()}
        rows: list[Any] = []
        for database, table, partition in where:
            rows += conn.execute(sa.select(*columns).where(
                cc.CC_DATABASE == database, cc.CC_TABLE == table,
                s.same_partition(cc.CC_PARTITION, partition))).all()
        return sorted(rows, key=lambda row: -row.CC_ID)

    def purge(conn: Connection) -> int:
        seen: dict[tuple, int] = {}
        newer_successes: dict[tuple, set[str]] = {}
        doomed = []
        for row in history_rows(conn):
            where = (row.CC_DATABASE, row.CC_TABLE, row.CC_PARTITION)

            count = seen.get((where, row.CC_STATE), 0) + 1
            seen[(where, row.CC_STATE)] = count
            limit = keep.get(row.CC_STATE)
            if limit is not None and count > limit:
                doomed.append(row.CC_ID)
                continue
            successes = newer_successes.setdefault(where, set())
            if (row.CC_STATE in aging and (row.CC_START or 0) < cutoff
                    and (CompactionType.MAJOR.value in successes or row.CC_TYPE in successes)):
                doomed.append(row.CC_ID)
            if row.CC_STATE == CompactionState.SUCCEEDED.value:
                successes.add(row.CC_TYPE)
        for start in range(0, len(doomed), 500):
            conn.execute(s.completed_compactions.delete().where(cc.CC_ID.in_(doomed[start:start + 500])))
        return len(doomed)

    return db.run("purge compaction history", purge)


__all__ = ["HistoryRetention", "purge", "show"]
