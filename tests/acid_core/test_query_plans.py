"""The hot metastore queries use indexes, on SQLite and PostgreSQL: every statement a snapshot, a commit, an
initiator poll and a housekeeping run send is captured and EXPLAINed, and none may scan a table that grows with the
history (TXN_TO_WRITE_ID, COMPLETED_TXN_COMPONENTS, WRITE_SET, COMPLETED_COMPACTIONS).

PostgreSQL runs the EXPLAIN with sequential scans disabled: a small test table would otherwise be scanned whatever
its indexes, and a plan that still scans then has no index it could use.
"""

from __future__ import annotations

import re
from contextlib import contextmanager

import pytest
from sqlalchemy import event

from acid_core.compaction.initiator import initiator_cycle
from acid_core.metastore.codes import CompactionType
from acid_core.metastore.txns import Operation
from acid_core.operations.alerts import consecutive_failures, working_too_long
from acid_core.operations.housekeeping import housekeep
from acid_core.operations.metrics import collect, collect_deltas

GROWING = ("TXN_TO_WRITE_ID", "COMPLETED_TXN_COMPONENTS", "WRITE_SET", "COMPLETED_COMPACTIONS")


@contextmanager
def captured(ms):
    statements: list[tuple[str, object]] = []

    def record(conn, cursor, statement, parameters, context, executemany):
        if not executemany and re.match(r"\s*(SELECT|DELETE|UPDATE|WITH)\b", statement, re.I):
            statements.append((statement, parameters))

    def observe(statement, parameters):  # the hot paths' plain statements, run on the driver's cursor
        record(None, None, statement, parameters, None, False)

    engines = [ms.db.engine] + ([ms.db._autocommit_engine] if ms.db.dialect == "postgresql" else [])
    for engine in engines:
        event.listen(engine, "before_cursor_execute", record)
    ms.db.statement_observers.append(observe)
    try:
        yield statements
    finally:
        ms.db.statement_observers.remove(observe)
        for engine in engines:
            event.remove(engine, "before_cursor_execute", record)


def scans(ms, statement: str, parameters) -> list[str]:
    """The growing tables the statement's plan reads without an index search."""
    raw = ms.db.engine.raw_connection()
    try:
        cursor = raw.cursor()
        if ms.db.dialect == "postgresql":
            cursor.execute("SET enable_seqscan = off")
            cursor.execute("EXPLAIN " + statement, parameters)
            plan = [row[0] for row in cursor.fetchall()]
            raw.rollback()
            return [table for line in plan for table in GROWING if re.search(rf'Seq Scan on "?{table}"?\b', line)]
        cursor.execute("EXPLAIN QUERY PLAN " + statement, parameters)
        plan = [row[-1] for row in cursor.fetchall()]
        return [table for line in plan for table in GROWING if re.match(rf"SCAN {table}\b", line)]
    finally:
        raw.close()


def history(ms) -> tuple[int, int]:
    """Some of everything: commits, an update, aborted writes, an open transaction; returns (open txn, table's)."""
    ms.catalog.create_table("default", "t", (("id", "int"),), params={"transactional": "true"})
    for operation in (Operation.INSERT, Operation.INSERT, Operation.UPDATE):
        txn_id = ms.txns.open_txn()
        ms.txns.allocate_write_ids([txn_id], "default", "t")
        ms.txns.add_components(txn_id, "default", "t", [None], operation)
        ms.txns.commit(txn_id)
    aborted = ms.txns.open_txn()
    ms.txns.allocate_write_ids([aborted], "default", "t")
    ms.txns.add_components(aborted, "default", "t", [None], Operation.INSERT)
    ms.txns.abort(aborted)
    for _ in range(2):  # history: a partition whose compactions did not initiate is retried by the initiator
        ms.compactions.record_did_not_initiate("default", "t", None, CompactionType.MAJOR, "boom", initiator_id="test")
    still_open = ms.txns.open_txn()
    return still_open, ms.txns.allocate_write_ids([still_open], "default", "t")[still_open]


@pytest.mark.parametrize("operation", ["snapshot", "commit", "initiator poll", "housekeeping", "worker listing",
                                       "metrics and alerts"])
def test_hot_queries_search_indexes(ms, operation):
    still_open, _ = history(ms)
    writer = ms.txns.open_txn()
    ms.txns.allocate_write_ids([writer], "default", "t")
    ms.txns.add_components(writer, "default", "t", [None], Operation.UPDATE)
    cursor = initiator_cycle(ms, cursor=None, fetch_size=10, dry_run=True).cursor
    if operation == "metrics and alerts":  # a queued partition for the delta gauges to list
        ms.compactions.enqueue("default", "t", None, CompactionType.MAJOR)
    with captured(ms) as statements:
        if operation == "snapshot":
            ms.txns.snapshot(["default.t"], current_txn=still_open)
            ms.txns.snapshot(["default.t"])
        elif operation == "commit":
            ms.txns.commit(writer)
        elif operation == "initiator poll":
            initiator_cycle(ms, cursor=cursor, fetch_size=10, dry_run=True)
        elif operation == "worker listing":  # the worker DAGs': one pool's entries, or all but the labelled pools'
            ms.compactions.initiated(limit=100, pool="etl")
            ms.compactions.initiated(limit=100, other_than=("etl", "hot"), pool_timeout_ms=43_200_000)
        elif operation == "metrics and alerts":  # the metrics task, the long-running check, a failure's threshold
            collect(ms)
            assert collect_deltas(ms).partitions
            working_too_long(ms, warning_ms=60_000)
            consecutive_failures(ms, "default", "t", None, limit=2)
        else:
            housekeep(ms)
    assert statements
    scanning = {statement: found for statement, parameters in statements
                if (found := scans(ms, statement, parameters))}
    assert scanning == {}, "\n\n".join(f"{tables}: {statement}" for statement, tables in scanning.items())
