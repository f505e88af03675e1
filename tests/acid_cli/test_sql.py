"""`acid sql` end to end, on SQLite and on PostgreSQL: statements run through `acid_cli.sql` against a real metastore
and a real warehouse directory, rows read back with merge-on-read, and a few runs of the real `acid` process.

Expected texts and column names are Hive's (hive-acid-reference.md section 8): "Compaction enqueued with id N",
SHOW COMPACTIONS' headers and keys (typo `hightestwriteid` included), `' --- '` for a missing value.
"""

from __future__ import annotations

import datetime
import io
import json
import os
import subprocess
import sys
import threading
import time
from contextlib import closing
from decimal import Decimal
from pathlib import Path

import pytest

from acid_cli.hiveql import HiveQLSyntaxError, parse_statement
from acid_cli.sql import StatementError, execute, run_script
from acid_cli.sql.session import Session
from acid_core.metastore import Metastore
from acid_core.metastore.codes import CompactionState
from acid_core.metastore.locks import LockComponent, LockType
from acid_core.read.merge import read_snapshot

ROOT = Path(__file__).resolve().parents[2]
ACID = "TBLPROPERTIES ('transactional'='true')"
COMPACTION_HEADERS = ["CompactionId", "Database", "Table", "Partition", "Type", "State", "Worker host", "Worker",
                      "Enqueue Time", "Start Time", "Duration(ms)", "HadoopJobId", "Error message", "Initiator host",
                      "Initiator", "Pool name", "TxnId", "Next TxnId", "Commit Time", "Highest WriteId"]
COMPACTION_KEYS = ["compactionid", "dbname", "tabname", "partname", "type", "state", "workerhost", "workerid",
                   "enqueuetime", "starttime", "duration", "hadoopjobid", "errormessage", "initiatorhost",
                   "initiatorid", "poolname", "txnid", "nexttxnid", "committime", "hightestwriteid"]
LOCK_KEYS = ["lockid", "database", "table", "partition", "lock_state", "blocked_by", "lock_type", "transaction_id",
             "last_heartbeat", "acquired_at", "user", "hostname", "agent_info"]
LOCK_HEADERS = ["Lock ID", "Database", "Table", "Partition", "State", "Blocked By", "Type", "Transaction ID",
                "Last Heartbeat", "Acquired At", "User", "Hostname", "Agent Info"]  # Hive's ShowLocksOperation


# ---------------------------------------------------------------------------------------------------------------
# Helpers


@pytest.fixture
def metastore(metastore_url, tmp_path):
    store = Metastore(metastore_url, warehouse=str(tmp_path / "wh"))
    store.init()
    yield store
    store.close()


@pytest.fixture
def warehouse(tmp_path) -> Path:
    return tmp_path / "wh"


def sql(metastore: Metastore, text: str, *, output_format: str = "table") -> str:
    """Run a script; what it printed."""
    out = io.StringIO()
    assert run_script(text, metastore=metastore, out=out, output_format=output_format) == 0
    return out.getvalue()


def lines(metastore: Metastore, text: str) -> list[str]:
    return sql(metastore, text).splitlines()


def records(metastore: Metastore, text: str) -> list[dict]:
    """The JSON lines a script printed with --format jsonl."""
    return [json.loads(line) for line in sql(metastore, text, output_format="jsonl").splitlines()]


def failure(metastore: Metastore, text: str) -> str:
    """The message of the StatementError a script stops with."""
    with pytest.raises(StatementError) as info:
        sql(metastore, text)
    return str(info.value)


def parse_table(text: str) -> tuple[list[str], list[list[str]]]:
    """(headers, rows) of one aligned table as `write_table` prints it, cut at the header rule's columns."""
    header, rule, *body = text.splitlines()
    spans, start = [], 0
    for dashes in rule.split("  "):
        spans.append((start, start + len(dashes)))
        start += len(dashes) + 2

    def cut(line: str) -> list[str]:
        return [line[start:end].strip() for start, end in spans]

    return cut(header), [cut(line) for line in body]


def tree(path: Path) -> set[str]:
    """Every file and directory under `path`, relative."""
    return {str(p.relative_to(path)) for p in path.rglob("*")} if path.exists() else set()


def visible_rows(metastore: Metastore, database: str, table: str, partition: str | None = None) -> list[dict]:
    """The rows a reader sees now: the metastore's snapshot, then merge-on-read of the directory."""
    info = metastore.catalog.get_table(database, table)
    snapshot = metastore.txns.snapshot([info.full_name])
    table_rows = read_snapshot(info.partition_location(partition), write_ids=snapshot.write_ids[info.full_name],
                               txns=snapshot.txns, order_by_row_id=True, column_names=[c.name for c in info.columns])
    return table_rows.to_pylist()


def open_and_aborted(metastore: Metastore) -> list[tuple[int, str]]:
    return [(t.txn_id, t.state_name) for t in metastore.txns.show_transactions()]


def compaction_ids(metastore: Metastore, text: str) -> list[int]:
    return [row["compactionid"] for row in records(metastore, text)]


def session(metastore: Metastore, *, wait_timeout_ms: int = 10_000) -> tuple[Session, io.StringIO]:
    out = io.StringIO()
    return Session(metastore, out, "table", wait_poll_s=0.01, wait_timeout_ms=wait_timeout_ms), out


def run_in(session_: Session, *texts: str) -> None:
    for text in texts:
        execute(session_, parse_statement(text))


def two_deltas(metastore: Metastore, table: str, partition_spec: str = "") -> None:
    """Two inserts, so the table (or partition) has two deltas: something for a compaction to do."""
    sql(metastore, f"INSERT INTO {table} {partition_spec} VALUES (1); INSERT INTO {table} {partition_spec} VALUES (2)")


class Worker(threading.Thread):
    """A compactor worker in another thread, on its own metastore handle: claims compaction `compaction_id` once it
    is queued, then finishes it with `finish(queue, id)`. Its exception, if any, is re-raised by `check`."""

    def __init__(self, url: str, warehouse: Path, compaction_id: int, finish) -> None:
        super().__init__(daemon=True)
        self.store = Metastore(url, warehouse=str(warehouse))
        self.compaction_id, self.finish, self.error = compaction_id, finish, None

    def run(self) -> None:
        try:
            deadline = time.monotonic() + 10
            while self.store.compactions.get(self.compaction_id) is None:
                if time.monotonic() > deadline:
                    raise AssertionError(f"compaction {self.compaction_id} was never enqueued")
                time.sleep(0.01)
            self.store.compactions.claim(worker_id="host1-worker-7", compaction_id=self.compaction_id)
            time.sleep(0.05)
            self.finish(self.store.compactions, self.compaction_id)
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            self.error = exc
        finally:
            self.store.close()

    def check(self) -> None:
        self.join(timeout=20)
        if self.error is not None:
            raise self.error


# ---------------------------------------------------------------------------------------------------------------
# Databases


def test_create_show_and_use_databases(metastore, warehouse):
    assert lines(metastore, "CREATE DATABASE sales COMMENT 'money'; CREATE SCHEMA IF NOT EXISTS sales") == ["OK", "OK"]
    assert (warehouse / "sales.db").is_dir()
    assert metastore.catalog.get_database("sales").description == "money"
    assert records(metastore, "SHOW DATABASES") == [{"database_name": "default"}, {"database_name": "sales"}]
    assert records(metastore, "SHOW SCHEMAS LIKE 's*'") == [{"database_name": "sales"}]
    assert "database 'sales' already exists" in failure(metastore, "CREATE DATABASE sales")

    sql(metastore, f"USE sales; CREATE TABLE t (a int) {ACID}")
    assert metastore.catalog.list_tables("sales") == ["t"]
    assert metastore.catalog.list_tables("default") == []
    assert records(metastore, "USE sales; SHOW TABLES") == [{"message": "OK"}, {"tab_name": "t"}]
    assert records(metastore, "SHOW TABLES IN sales LIKE 'x*|t'") == [{"tab_name": "t"}]
    assert records(metastore, "SHOW TABLES") == []  # each script starts in `default`


def test_use_of_an_unknown_database_fails_and_keeps_the_current_one(metastore):
    sql(metastore, "CREATE DATABASE sales")
    current, out = session(metastore)
    run_in(current, "USE sales")
    with pytest.raises(StatementError, match=r"statement \"USE nope\" failed: database 'nope' does not exist"):
        run_in(current, "USE nope")
    assert current.database == "sales"


def test_drop_database_needs_cascade_when_not_empty(metastore, warehouse):
    sql(metastore, f"CREATE DATABASE d; CREATE TABLE d.a (x int) {ACID}; INSERT INTO d.a VALUES (1)")
    before = tree(warehouse)
    message = failure(metastore, "DROP DATABASE d")
    assert "database 'd' is not empty (tables ['a']); use CASCADE" in message
    assert failure(metastore, "DROP DATABASE d RESTRICT").endswith("use CASCADE")
    assert metastore.catalog.list_tables("d") == ["a"]
    assert tree(warehouse) == before


def test_drop_database_cascade_moves_table_data_to_the_warehouse_trash(metastore, warehouse):
    sql(metastore, f"CREATE DATABASE d; USE d; CREATE TABLE a (x int) {ACID}; CREATE TABLE b (x int) {ACID}; "
                   "INSERT INTO a VALUES (1)")
    output = lines(metastore, "DROP DATABASE d CASCADE")
    assert output[-1] == "OK"
    moved = sorted(output[:-1])
    assert [line.split(": data moved to ")[0] for line in moved] == ["d.a", "d.b"]
    trash = warehouse / ".trash"
    assert sorted(p.name.rsplit("-", 1)[0] for p in trash.iterdir()) == ["d.a", "d.b"]
    assert all(Path(line.split(": data moved to ")[1]).parent == trash for line in moved)
    (a_trash,) = trash.glob("d.a-*")
    assert (a_trash / "delta_0000001_0000001_0000" / "bucket_00000").is_file()
    assert not (warehouse / "d.db" / "a").exists() and not (warehouse / "d.db" / "b").exists()
    assert "d" not in metastore.catalog.list_databases()
    assert [t.full_name for t in metastore.catalog.list_all_tables()] == []

    assert lines(metastore, "DROP DATABASE IF EXISTS d") == ["OK"]
    assert "database 'd' does not exist" in failure(metastore, "DROP DATABASE d")
    assert "the default database cannot be dropped" in failure(metastore, "DROP DATABASE default")


def test_dropping_the_current_database_returns_to_default(metastore):
    sql(metastore, f"CREATE DATABASE d; CREATE TABLE t_default (x int) {ACID}")
    current, out = session(metastore)
    run_in(current, "USE d", "DROP DATABASE d CASCADE")
    assert current.database == "default"
    current.output_format = "jsonl"
    run_in(current, "SHOW TABLES")
    assert out.getvalue().splitlines()[-1] == json.dumps({"tab_name": "t_default"})


# ---------------------------------------------------------------------------------------------------------------
# Tables


def test_create_table_records_partitions_buckets_properties_and_hive_defaults(metastore, warehouse):
    assert lines(metastore, "CREATE TABLE sales (id int COMMENT 'key', amount decimal(10,2), note varchar(20)) "
                            "COMMENT 'the sales' PARTITIONED BY (region string, day date) "
                            "CLUSTERED BY (id) INTO 4 BUCKETS STORED AS ORC "
                            "TBLPROPERTIES ('transactional'='true', 'owner_team'='x')") == ["OK"]
    table = metastore.catalog.get_table("default", "sales")
    assert [(c.name, c.type) for c in table.columns] == [("id", "int"), ("amount", "decimal(10,2)"),
                                                        ("note", "varchar(20)")]
    assert [(k.name, k.type) for k in table.partition_keys] == [("region", "string"), ("day", "date")]
    assert (table.bucket_columns, table.num_buckets, table.comment) == (("id",), 4, "the sales")
    assert dict(table.params) == {"transactional": "true", "owner_team": "x", "transactional_properties": "default",
                                  "bucketing_version": "2"}
    assert table.location == str(warehouse / "sales") and (warehouse / "sales").is_dir()

    assert records(metastore, "SHOW TBLPROPERTIES sales") == [
        {"prpt_name": "bucketing_version", "prpt_value": "2"}, {"prpt_name": "owner_team", "prpt_value": "x"},
        {"prpt_name": "transactional", "prpt_value": "true"},
        {"prpt_name": "transactional_properties", "prpt_value": "default"}]
    assert records(metastore, "SHOW TBLPROPERTIES sales ('TRANSACTIONAL')") == [
        {"prpt_name": "TRANSACTIONAL", "prpt_value": "true"}]
    assert "does not have property 'nope'" in failure(metastore, "SHOW TBLPROPERTIES sales ('nope')")

    headers, rows = parse_table(sql(metastore, "DESCRIBE sales"))
    assert headers == ["col_name", "data_type", "comment"]
    assert [row[:2] for row in rows] == [["id", "int"], ["amount", "decimal(10,2)"], ["note", "varchar(20)"],
                                         ["", "NULL"], ["# Partition Information", "NULL"],
                                         ["# col_name", "data_type"], ["region", "string"], ["day", "date"]]
    detail = {row["col_name"]: row["data_type"] for row in records(metastore, "DESCRIBE FORMATTED sales")
              if row["col_name"].endswith(":")}
    assert detail == {"Database:": "default", "Table:": "sales", "Owner:": table.owner,
                      "Location:": str(warehouse / "sales"), "Num Buckets:": "4", "Bucket Columns:": "['id']",
                      "Table Parameters:": None}
    parameters = [(row["data_type"], row["comment"]) for row in records(metastore, "DESC EXTENDED sales")
                  if row["col_name"] == "" and row["data_type"] is not None]
    assert parameters == sorted(table.params.items())


def test_create_table_keeps_the_properties_it_is_given(metastore):
    sql(metastore, "CREATE TABLE b (x int, y string) CLUSTERED BY (y) INTO 3 BUCKETS TBLPROPERTIES "
                   "('transactional'='true', 'bucketing_version'='1', 'Transactional_Properties'='DEFAULT'); "
                   "CREATE TABLE plain (x int)")
    assert dict(metastore.catalog.get_table("default", "b").params) == {
        "transactional": "true", "bucketing_version": "1", "Transactional_Properties": "DEFAULT"}
    assert dict(metastore.catalog.get_table("default", "plain").params) == {"bucketing_version": "2"}


def test_create_table_if_not_exists_and_errors(metastore):
    sql(metastore, f"CREATE TABLE t (a int) {ACID}")
    assert lines(metastore, "CREATE TABLE IF NOT EXISTS t (b string)") == ["OK"]
    assert [c.name for c in metastore.catalog.get_table("default", "t").columns] == ["a"]
    assert "table default.t already exists" in failure(metastore, "CREATE TABLE t (a int)")
    assert "database 'nope' does not exist" in failure(metastore, f"CREATE TABLE nope.t (a int) {ACID}")
    assert "property 'transactional' must be 'true' or 'false', got 'maybe'" in failure(
        metastore, "CREATE TABLE u (a int) TBLPROPERTIES ('transactional'='maybe')")
    assert metastore.catalog.list_tables("default") == ["t"]


@pytest.mark.parametrize("text", [
    "CREATE TABLE io (a int) TBLPROPERTIES ('transactional'='true', 'transactional_properties'='insert_only')",
    "ALTER TABLE t SET TBLPROPERTIES ('transactional_properties'='INSERT_ONLY')",
])
def test_insert_only_tables_are_refused(metastore, warehouse, text):
    sql(metastore, f"CREATE TABLE t (a int) {ACID}")
    before = tree(warehouse)
    assert "transactional_properties='" in failure(metastore, text)
    assert "insert-only tables are not" in failure(metastore, text)
    assert metastore.catalog.list_tables("default") == ["t"]
    assert metastore.catalog.get_table("default", "t").param("transactional_properties") == "default"
    assert tree(warehouse) == before


def test_drop_table_moves_data_to_trash_and_purge_deletes_it(metastore, warehouse):
    sql(metastore, f"CREATE TABLE kept (a int) {ACID}; CREATE TABLE gone (a int) {ACID}; "
                   "INSERT INTO kept VALUES (1); INSERT INTO gone VALUES (1)")
    first, ok = lines(metastore, "DROP TABLE kept")
    assert ok == "OK" and first.startswith(f"default.kept: data moved to {warehouse / '.trash' / 'default.kept-'}")
    assert (Path(first.split(" to ")[1]) / "delta_0000001_0000001_0000").is_dir()
    assert lines(metastore, "DROP TABLE gone PURGE") == [f"default.gone: deleted {warehouse / 'gone'}", "OK"]
    assert not (warehouse / "kept").exists() and not (warehouse / "gone").exists()
    assert [p.name.rsplit("-", 1)[0] for p in (warehouse / ".trash").iterdir()] == ["default.kept"]
    assert metastore.catalog.list_tables("default") == []
    assert lines(metastore, "DROP TABLE IF EXISTS gone") == ["OK"]
    assert "table default.gone does not exist" in failure(metastore, "DROP TABLE gone")
    assert metastore.locks.show_locks() == []


def test_drop_table_forgets_its_transactions_and_compactions(metastore):
    """Hive's CleanupRecordsFunction on DROP TABLE: queue, history, write ids and components of the table go, so a
    new table of the same name starts at write id 1 and no worker compacts a table that is gone."""
    sql(metastore, f"CREATE TABLE t (a int) {ACID}")
    two_deltas(metastore, "t")
    sql(metastore, "ALTER TABLE t COMPACT 'major'; DROP TABLE t PURGE")
    assert records(metastore, "SHOW COMPACTIONS") == []
    sql(metastore, f"CREATE TABLE t (a int) {ACID}")
    assert lines(metastore, "INSERT INTO t VALUES (1)") == [
        "Inserted 1 row into default.t (transaction 3, write id 1)"]


def test_alter_table_set_and_unset_properties(metastore):
    sql(metastore, f"CREATE TABLE t (a int) {ACID}")
    assert lines(metastore, "ALTER TABLE t SET TBLPROPERTIES ('NO_AUTO_COMPACTION'='true', "
                            "'compactorthreshold.hive.compactor.delta.num.threshold'='4', "
                            "'compactorthreshold.hive.compactor.delta.pct.threshold'='0.5')") == ["OK"]
    table = metastore.catalog.get_table("default", "t")
    assert table.no_auto_compaction
    assert table.param("compactorthreshold.hive.compactor.delta.num.threshold") == "4"
    assert table.param("compactorthreshold.hive.compactor.delta.pct.threshold") == "0.5"

    sql(metastore, "ALTER TABLE t SET TBLPROPERTIES ('no_auto_compaction'='FALSE')")
    table = metastore.catalog.get_table("default", "t")
    assert not table.no_auto_compaction
    assert [k for k in table.params if k.lower() == "no_auto_compaction"] == ["no_auto_compaction"]

    assert lines(metastore, "ALTER TABLE t UNSET TBLPROPERTIES IF EXISTS ('nope', 'NO_AUTO_COMPACTION')") == ["OK"]
    assert metastore.catalog.get_table("default", "t").param("no_auto_compaction") is None
    assert "table default.t has no property 'nope'" in failure(metastore, "ALTER TABLE t UNSET TBLPROPERTIES ('nope')")
    assert "table default.nope does not exist" in failure(metastore, "ALTER TABLE nope SET TBLPROPERTIES ('a'='b')")


@pytest.mark.parametrize("properties, problem", [
    ("'NO_AUTO_COMPACTION'='yes'", "'no_auto_compaction' must be 'true' or 'false', got 'yes'"),
    ("'no_cleanup'='1'", "'no_cleanup' must be 'true' or 'false', got '1'"),
    ("'compactorthreshold.hive.compactor.delta.num.threshold'='-1'", "must be a whole number >= 0, got '-1'"),
    ("'compactorthreshold.hive.compactor.delta.num.threshold'='2.5'", "must be a whole number >= 0, got '2.5'"),
    ("'compactorthreshold.hive.compactor.delta.pct.threshold'='abc'", "must be a number >= 0, got 'abc'"),
    ("'compactorthreshold.hive.compactor.delta.pct.threshold'='-0.1'", "must be a number >= 0, got '-0.1'"),
    ("'transactional'='false'", "a transactional table cannot be made non-transactional"),
    ("'TRANSACTIONAL'='False'", "a transactional table cannot be made non-transactional"),
])
def test_alter_table_refuses_bad_property_values(metastore, properties, problem):
    sql(metastore, f"CREATE TABLE t (a int) {ACID}")
    before = dict(metastore.catalog.get_table("default", "t").params)
    message = failure(metastore, f"ALTER TABLE t SET TBLPROPERTIES ('other'='x', {properties})")
    assert message.startswith('statement "ALTER TABLE t SET TBLPROPERTIES') and problem in message
    assert dict(metastore.catalog.get_table("default", "t").params) == before


@pytest.mark.parametrize("key", ["transactional", "TRANSACTIONAL_PROPERTIES"])
def test_an_acid_table_cannot_lose_its_transactional_properties(metastore, key):
    sql(metastore, f"CREATE TABLE t (a int) {ACID}")
    assert "cannot unset 'transactional' or 'transactional_properties' of ACID table default.t" in failure(
        metastore, f"ALTER TABLE t UNSET TBLPROPERTIES ('{key}')")
    assert metastore.catalog.get_table("default", "t").is_transactional


def test_show_partitions(metastore):
    sql(metastore, f"CREATE TABLE p (a int) PARTITIONED BY (k string, n int) {ACID}; CREATE TABLE u (a int) {ACID}")
    assert records(metastore, "SHOW PARTITIONS p") == []
    sql(metastore, "INSERT INTO p PARTITION (k='b', n=2) VALUES (1); INSERT INTO p PARTITION (n=1, k='a') VALUES (1)")
    assert records(metastore, "SHOW PARTITIONS default.p") == [{"partition": "k=a/n=1"}, {"partition": "k=b/n=2"}]
    assert "table default.u is not a partitioned table" in failure(metastore, "SHOW PARTITIONS u")
    assert "table default.nope does not exist" in failure(metastore, "SHOW PARTITIONS nope")


# ---------------------------------------------------------------------------------------------------------------
# INSERT INTO ... VALUES


def test_insert_into_static_partitions_and_read_back(metastore, warehouse):
    sql(metastore, "CREATE DATABASE s; CREATE TABLE s.t (id int, name string) PARTITIONED BY (region string) "
                   f"CLUSTERED BY (id) INTO 2 BUCKETS {ACID}")
    assert lines(metastore, "USE s; INSERT INTO TABLE t PARTITION (region='eu') VALUES (1, 'one'), (2, 'two'); "
                            "INSERT INTO s.t PARTITION (region='us') VALUES (3, NULL); "
                            "INSERT INTO t PARTITION (region='eu') VALUES (4, 'four')") == [
        "OK",
        "Inserted 2 rows into s.t partition region=eu (transaction 1, write id 1)",
        "Inserted 1 row into s.t partition region=us (transaction 2, write id 2)",
        "Inserted 1 row into s.t partition region=eu (transaction 3, write id 3)"]
    assert [p.name for p in metastore.catalog.list_partitions("s", "t")] == ["region=eu", "region=us"]
    assert sorted(visible_rows(metastore, "s", "t", "region=eu"), key=lambda r: r["id"]) == [
        {"id": 1, "name": "one"}, {"id": 2, "name": "two"}, {"id": 4, "name": "four"}]
    assert visible_rows(metastore, "s", "t", "region=us") == [{"id": 3, "name": None}]
    eu = warehouse / "s.db" / "t" / "region=eu"
    assert sorted(p.name for p in eu.iterdir()) == ["delta_0000001_0000001_0000", "delta_0000003_0000003_0000"]
    assert sorted(p.name for p in (eu / "delta_0000001_0000001_0000").iterdir()) == [
        "_orc_acid_version", "bucket_00000", "bucket_00001"]  # ids 1 and 2 hash to different buckets
    assert metastore.txns.valid_write_ids("s", "t").high_watermark == 3
    assert open_and_aborted(metastore) == [] and metastore.locks.show_locks() == []


def test_insert_with_a_column_list_sets_the_others_to_null(metastore):
    sql(metastore, f"CREATE TABLE t (a int, b string, c double) {ACID}")
    assert lines(metastore, "INSERT INTO t (c, a) VALUES (1.5, 1), (NULL, 2)") == [
        "Inserted 2 rows into default.t (transaction 1, write id 1)"]
    assert visible_rows(metastore, "default", "t") == [{"a": 1, "b": None, "c": 1.5}, {"a": 2, "b": None, "c": None}]


def test_insert_converts_literals_to_the_column_types(metastore):
    sql(metastore, "CREATE TABLE v (ti tinyint, si smallint, i int, bi bigint, f float, d double, dc decimal(10,2), "
                   "s string, vc varchar(3), c char(5), b boolean, dt date, ts timestamp, bn binary) " + ACID)
    sql(metastore, "INSERT INTO v VALUES "
                   "(1Y, 2S, '3', 4L, '1.5', 1e3, 1.5, 12, 'abcdef', 'ab', 'TRUE', '2024-01-02', "
                   " DATE '2024-01-03', 'xy'), "
                   "(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL), "
                   "(-128, -32768, -2147483648, -9223372036854775808, 0.5, -0.1, '-7.25', TRUE, 'ab', 'abcde', "
                   " false, TIMESTAMP '2024-01-02 03:04:05', '2024-01-02 03:04:05.000001', ''), "
                   "(CAST('7' AS int), CAST(8 AS smallint), CAST(9.0 AS int), 10BD, CAST('2.5' AS double), 2, "
                   " CAST(3 AS decimal(5,1)), DATE '2024-05-06', CAST(12345 AS string), 1.5, CAST('false' AS boolean),"
                   " CAST(TIMESTAMP '2024-07-08 09:10:11' AS date), CAST('2024-01-01' AS date), 'z')")
    assert visible_rows(metastore, "default", "v") == [
        {"ti": 1, "si": 2, "i": 3, "bi": 4, "f": 1.5, "d": 1000.0, "dc": Decimal("1.50"), "s": "12", "vc": "abc",
         "c": "ab   ", "b": True, "dt": datetime.date(2024, 1, 2), "ts": datetime.datetime(2024, 1, 3),
         "bn": b"xy"},
        dict.fromkeys(["ti", "si", "i", "bi", "f", "d", "dc", "s", "vc", "c", "b", "dt", "ts", "bn"]),
        {"ti": -128, "si": -32768, "i": -2147483648, "bi": -9223372036854775808, "f": 0.5, "d": -0.1,
         "dc": Decimal("-7.25"), "s": "true", "vc": "ab", "c": "abcde", "b": False,
         "dt": datetime.date(2024, 1, 2), "ts": datetime.datetime(2024, 1, 2, 3, 4, 5, 1), "bn": b""},
        {"ti": 7, "si": 8, "i": 9, "bi": 10, "f": 2.5, "d": 2.0, "dc": Decimal("3.00"), "s": "2024-05-06",
         "vc": "123", "c": "1.5  ", "b": False, "dt": datetime.date(2024, 7, 8),
         "ts": datetime.datetime(2024, 1, 1), "bn": b"z"},
    ]


def test_insert_casts_to_binary(metastore):
    sql(metastore, f"CREATE TABLE b (b binary, s string) {ACID}; "
                   "INSERT INTO b VALUES (CAST('z' AS binary), CAST(CAST('y' AS binary) AS string))")
    assert visible_rows(metastore, "default", "b") == [{"b": b"z", "s": "y"}]


def test_insert_rounds_decimals_half_up_as_hive_does(metastore):
    """HiveDecimal.enforcePrecisionScale rounds HALF_UP: 1.005 -> 1.01, 2.5 -> 3, -1.005 -> -1.01."""
    sql(metastore, f"CREATE TABLE d (two decimal(10,2), zero decimal(10,0)) {ACID}; "
                   "INSERT INTO d VALUES (1.005, 2.5), (-1.005, 0.5), (1.025, -2.5)")
    assert visible_rows(metastore, "default", "d") == [
        {"two": Decimal("1.01"), "zero": Decimal("3")}, {"two": Decimal("-1.01"), "zero": Decimal("1")},
        {"two": Decimal("1.03"), "zero": Decimal("-3")}]


def test_insert_casts_a_timestamp_to_string_as_hive_prints_it(metastore):
    """Hive's Timestamp.toString: no trailing zeros in the fraction, none at all for whole seconds."""
    sql(metastore, f"CREATE TABLE s (s string) {ACID}; INSERT INTO s VALUES "
                   "(CAST(TIMESTAMP '2024-01-02 03:04:05.123' AS string)), "
                   "(CAST(TIMESTAMP '2024-01-02 03:04:05' AS string))")
    assert visible_rows(metastore, "default", "s") == [{"s": "2024-01-02 03:04:05.123"}, {"s": "2024-01-02 03:04:05"}]


@pytest.mark.parametrize("values, problem", [
    ("PARTITION (k='x') VALUES (128, NULL, 1)", "row 0, column 'ti': 128 is outside the tinyint range -128..127"),
    ("PARTITION (k='x') VALUES (1, NULL, 1), (1, '2024-01-01', 123456789.5)",
     "row 1, column 'dc': 123456789.5 has more than 8 integer digits for decimal(10,2)"),
    ("PARTITION (k='x') VALUES (1.5, NULL, 1)", "column 'ti' (tinyint): cannot use Decimal('1.5')"),
    ("PARTITION (k='x') (ti, dt) VALUES (1, '2024-02-30')", "column 'dt' (date): cannot use '2024-02-30'"),
    ("PARTITION (k='x') (ti, dt) VALUES (1, 12)", "column 'dt' (date): cannot use 12"),
    ("PARTITION (k='x') (ti) VALUES (CAST('x' AS int))", "column 'ti' (int): cannot use 'x'"),
    ("PARTITION (k='x') (nope) VALUES (1)", "default.t has no columns ['nope']; its columns are ['ti', 'dt', 'dc']"),
    ("VALUES (1, NULL, 1)", "default.t is partitioned: give PARTITION (k = ...)"),
    ("PARTITION (region='x') VALUES (1, NULL, 1)", "must give exactly the partition keys ['k']"),
])
def test_a_refused_insert_changes_nothing(metastore, warehouse, values, problem):
    sql(metastore, f"CREATE TABLE t (ti tinyint, dt date, dc decimal(10,2)) PARTITIONED BY (k string) {ACID}")
    before = tree(warehouse)
    message = failure(metastore, f"INSERT INTO t {values}")
    assert message.startswith('statement "INSERT INTO t ') and problem in message
    assert tree(warehouse) == before
    assert metastore.catalog.list_partitions("default", "t") == []
    assert open_and_aborted(metastore) == [] and metastore.locks.show_locks() == []
    assert metastore.txns.valid_write_ids("default", "t").high_watermark == 0


def test_insert_into_a_non_transactional_table_is_refused(metastore, warehouse):
    sql(metastore, "CREATE TABLE plain (a int)")
    before = tree(warehouse)
    assert "table default.plain is not a full ACID table" in failure(metastore, "INSERT INTO plain VALUES (1)")
    assert tree(warehouse) == before and open_and_aborted(metastore) == []


@pytest.fixture
def blocked_partition(metastore, warehouse) -> Path:
    """A partitioned table whose partition directory k=x cannot be made: a file has its name."""
    sql(metastore, f"CREATE TABLE p (a int) PARTITIONED BY (k string) {ACID}")
    blocker = warehouse / "p" / "k=x"
    blocker.write_text("in the way")
    return blocker


def test_an_insert_failing_while_writing_aborts_and_shows_nothing(metastore, blocked_partition):
    message = failure(metastore, "INSERT INTO p PARTITION (k='x') VALUES (1)")
    assert "cannot create directory" in message and "k=x" in message
    assert open_and_aborted(metastore) == [(1, "ABORTED")]  # its transaction was aborted, not left open
    assert metastore.txns.valid_write_ids("default", "p").aborted_ids == (1,)  # ... so write id 1 is never read
    assert metastore.catalog.list_partitions("default", "p") == [] and metastore.locks.show_locks() == []
    assert blocked_partition.read_text() == "in the way"


def test_an_insert_failing_while_writing_leaves_no_staged_files(metastore, blocked_partition):
    failure(metastore, "INSERT INTO p PARTITION (k='x') VALUES (1)")
    assert tree(blocked_partition.parent) == {"k=x"}


# ---------------------------------------------------------------------------------------------------------------
# ALTER TABLE ... COMPACT


def test_compact_enqueues_once(metastore):
    sql(metastore, f"CREATE TABLE t (a int) {ACID}")
    assert lines(metastore, "ALTER TABLE t COMPACT 'MAJOR'") == ["Compaction enqueued with id 1"]
    assert lines(metastore, "ALTER TABLE default.t COMPACT 'minor'") == [
        "Compaction already enqueued with id 1; State is initiated"]
    (entry,) = records(metastore, "SHOW COMPACTIONS")
    assert entry["type"] == "MAJOR" and entry["state"] == "initiated" and entry["initiatorid"] == "manual"


def test_compact_a_partition(metastore):
    sql(metastore, f"CREATE TABLE p (a int) PARTITIONED BY (k string) {ACID}; "
                   "INSERT INTO p PARTITION (k='one') VALUES (1)")
    assert lines(metastore, "ALTER TABLE p PARTITION (k='one') COMPACT 'minor' POOL 'fast'") == [
        "Compaction enqueued with id 1"]
    assert "table default.p has no partition 'k=nope'" in failure(
        metastore, "ALTER TABLE p PARTITION (k='nope') COMPACT 'major'")
    assert "must give exactly the partition keys ['k']" in failure(
        metastore, "ALTER TABLE p PARTITION (x='one') COMPACT 'major'")
    assert [(e["compactionid"], e["partname"], e["type"], e["poolname"]) for e in records(metastore, "SHOW COMPACTIONS")
            ] == [(1, "k=one", "MINOR", "fast")]


def test_compact_without_pool_takes_the_table_or_database_property(metastore):
    """Hive 4's AlterTableCompactOperation: POOL 'name', else the table's hive.compactor.worker.pool, else the
    database's, else default; SHOW COMPACTIONS shows and filters the pool."""
    sql(metastore, f"CREATE DATABASE etl WITH DBPROPERTIES ('hive.compactor.worker.pool'='etl'); "
                   f"CREATE TABLE etl.inherits (a int) {ACID}; "
                   f"CREATE TABLE own (a int) {ACID[:-1]}, 'hive.compactor.worker.pool'='hot'); "
                   f"CREATE TABLE plain (a int) {ACID}; "
                   "ALTER TABLE etl.inherits COMPACT 'major'; ALTER TABLE own COMPACT 'major'; "
                   "ALTER TABLE plain COMPACT 'major' POOL 'adhoc'")
    assert {e["tabname"]: e["poolname"] for e in records(metastore, "SHOW COMPACTIONS")} == {
        "inherits": "etl", "own": "hot", "plain": "adhoc"}
    assert [e["tabname"] for e in records(metastore, "SHOW COMPACTIONS POOL 'hot'")] == ["own"]


def test_a_bad_pool_name_is_refused_before_anything_is_queued(metastore):
    sql(metastore, f"CREATE TABLE p (a int) PARTITIONED BY (k string) {ACID}; "
                   "INSERT INTO p PARTITION (k='one') VALUES (1); INSERT INTO p PARTITION (k='one') VALUES (2); "
                   "INSERT INTO p PARTITION (k='two') VALUES (1); INSERT INTO p PARTITION (k='two') VALUES (2)")
    message = failure(metastore, "ALTER TABLE p COMPACT 'major' POOL 'etl pool'")
    assert "compaction pool name 'etl pool' is not valid: use 1 to 128 letters, digits, '_', '-' or '.'" in message
    assert records(metastore, "SHOW COMPACTIONS") == []
    message = failure(metastore, "ALTER TABLE p SET TBLPROPERTIES ('hive.compactor.worker.pool'='etl/pool')")
    assert "property 'hive.compactor.worker.pool': pool name 'etl/pool' is not valid" in message
    message = failure(metastore, "CREATE DATABASE d WITH DBPROPERTIES ('hive.compactor.worker.pool'='a b')")
    assert "pool name 'a b' is not valid" in message


def test_compact_rebalance_into_n_buckets(metastore):
    sql(metastore, f"CREATE TABLE t (a int) {ACID}; CREATE TABLE b (a int) CLUSTERED BY (a) INTO 2 BUCKETS {ACID}")
    assert lines(metastore, "ALTER TABLE t COMPACT 'rebalance' CLUSTERED INTO 8 BUCKETS") == [
        "Compaction enqueued with id 1"]
    (entry,) = records(metastore, "SHOW COMPACTIONS TYPE 'rebalance'")
    assert entry["type"] == "REBALANCE" and metastore.compactions.get(1).number_of_buckets == 8
    assert failure(metastore, "ALTER TABLE b COMPACT 'rebalance'").endswith(
        "cannot rebalance default.b: Cannot execute rebalancing compaction on bucketed tables.")


def test_compact_refuses_a_non_transactional_table(metastore):
    sql(metastore, "CREATE TABLE plain (a int)")
    assert "table default.plain is not a full ACID table" in failure(metastore, "ALTER TABLE plain COMPACT 'major'")
    assert "table default.nope does not exist" in failure(metastore, "ALTER TABLE nope COMPACT 'major'")
    assert records(metastore, "SHOW COMPACTIONS") == []


def test_compact_a_partitioned_table_enqueues_only_partitions_with_something_to_compact(metastore):
    sql(metastore, f"CREATE TABLE p (a int) PARTITIONED BY (k string) {ACID}; "
                   "INSERT INTO p PARTITION (k='single') VALUES (1)")
    assert lines(metastore, "ALTER TABLE p COMPACT 'major'") == ["No partition of default.p has anything to compact"]
    two_deltas(metastore, "p", "PARTITION (k='two')")
    two_deltas(metastore, "p", "PARTITION (k='also')")
    assert sorted(lines(metastore, "ALTER TABLE p COMPACT 'major'")) == [
        "Compaction enqueued with id 1 (k=also)", "Compaction enqueued with id 2 (k=two)"]
    assert sorted(e["partname"] for e in records(metastore, "SHOW COMPACTIONS")) == ["k=also", "k=two"]


@pytest.mark.parametrize("finish, status", [
    (lambda queue, compaction_id: queue.mark_compacted(compaction_id), "ready for cleaning"),
    (lambda queue, compaction_id: queue.mark_failed(compaction_id, "boom"), "failed"),
])
def test_compact_and_wait_returns_when_the_worker_is_done(metastore, metastore_url, warehouse, finish, status):
    sql(metastore, f"CREATE TABLE t (a int) {ACID}")
    worker = Worker(metastore_url, warehouse, 1, finish)
    worker.start()
    current, out = session(metastore)
    try:
        run_in(current, "ALTER TABLE t COMPACT 'major' AND WAIT")
    finally:
        worker.join(timeout=20)
    worker.check()
    assert out.getvalue().splitlines() == ["Compaction enqueued with id 1",
                                           f"Compaction with id 1 finished with status: {status}"]


def test_compact_and_wait_gives_up_after_the_wait_timeout(metastore):
    sql(metastore, f"CREATE TABLE t (a int) {ACID}")
    current, out = session(metastore, wait_timeout_ms=50)
    with pytest.raises(StatementError, match=r"compaction 1 is still initiated after 50 ms "
                                             r"\(hive.compactor.wait.timeout\); it stays queued"):
        run_in(current, "ALTER TABLE t COMPACT 'major' AND WAIT")
    assert out.getvalue() == "Compaction enqueued with id 1\n"
    assert metastore.compactions.get(1).state is CompactionState.INITIATED


# ---------------------------------------------------------------------------------------------------------------
# SHOW COMPACTIONS


def test_show_compactions_columns_and_missing_values(metastore):
    sql(metastore, f"CREATE TABLE t (a int) {ACID}; CREATE TABLE u (a int) {ACID}; "
                   "ALTER TABLE t COMPACT 'major'; ALTER TABLE u COMPACT 'minor'")
    headers, rows = parse_table(sql(metastore, "SHOW COMPACTIONS"))
    assert headers == COMPACTION_HEADERS
    first = dict(zip(headers, rows[0]))
    assert (first["CompactionId"], first["Database"], first["Table"], first["Type"], first["State"]) == (
        "1", "default", "t", "MAJOR", "initiated")
    assert all(first[h] == "---" for h in ("Partition", "Worker host", "Worker", "Start Time", "Duration(ms)",
                                           "HadoopJobId", "Error message", "TxnId", "Next TxnId", "Commit Time",
                                           "Highest WriteId"))
    assert (first["Initiator"], first["Pool name"]) == ("manual", "default")

    metastore.compactions.claim(worker_id="host1-worker-7", compaction_id=1)
    metastore.compactions.mark_failed(1, "it broke")
    metastore.compactions.claim(worker_id="host2-9", compaction_id=2)
    entries = {e["compactionid"]: e for e in records(metastore, "SHOW COMPACTIONS")}
    assert all(list(e) == COMPACTION_KEYS for e in entries.values())
    failed, working = entries[1], entries[2]
    assert (failed["state"], failed["workerhost"], failed["workerid"], failed["errormessage"]) == (
        "failed", "host1-worker", "7", "it broke")
    history = metastore.compactions.get(1)
    assert failed["duration"] == history.end_ms - history.start_ms
    assert failed["enqueuetime"] == history.enqueue_ms and failed["starttime"] == history.start_ms
    assert (working["state"], working["workerhost"], working["workerid"], working["duration"]) == (
        "working", "host2", "9", None)  # jsonl: null where the table shows " --- "
    assert working["initiatorhost"] == metastore.db.identity.host and working["initiatorid"] == "manual"
    assert working["partname"] is None and working["hightestwriteid"] is None


def test_show_compactions_prints_one_line_per_row_and_jsonl_nulls(metastore):
    """A failure recorded as a traceback by an earlier version still prints as its one-line cause."""
    sql(metastore, f"CREATE TABLE t (a int) {ACID}; ALTER TABLE t COMPACT 'major'")
    metastore.compactions.claim(worker_id="host1-7", compaction_id=1)
    metastore.compactions.mark_failed(1, "Traceback (most recent call last):\n  File \"x.py\", line 1, in f\n"
                                         "    raise OSError(2)\nFileNotFoundError: [Errno 2] No such file: 'b'\n")
    text = sql(metastore, "SHOW COMPACTIONS")
    assert len(text.splitlines()) == 3  # header, rule, the row
    assert "FileNotFoundError: [Errno 2] No such file: 'b'" in text and "Traceback" not in text
    [record] = records(metastore, "SHOW COMPACTIONS")
    assert record["errormessage"] == "FileNotFoundError: [Errno 2] No such file: 'b'"
    assert record["partname"] is None and record["hadoopjobid"] is None  # JSON null, not " --- "
    assert ' --- ' not in sql(metastore, "SHOW COMPACTIONS", output_format="jsonl")


def test_show_compactions_filters(metastore):
    sql(metastore, f"CREATE DATABASE other; CREATE TABLE other.o (a int) {ACID}; "
                   f"CREATE TABLE p (a int) PARTITIONED BY (k string) {ACID}; CREATE TABLE t (a int) {ACID}; "
                   "INSERT INTO p PARTITION (k='one') VALUES (1); INSERT INTO p PARTITION (k='two') VALUES (1); "
                   "ALTER TABLE p PARTITION (k='one') COMPACT 'major'; "                 # 1
                   "ALTER TABLE p PARTITION (k='two') COMPACT 'minor' POOL 'fast'; "     # 2
                   "ALTER TABLE t COMPACT 'minor'; "                                     # 3
                   "ALTER TABLE other.o COMPACT 'major'")                                # 4
    metastore.compactions.claim(worker_id="w-1", compaction_id=3)
    cases = {
        "SHOW COMPACTIONS": [3, 1, 2, 4],  # started ones first, then by enqueue time (Hive's default order)
        "SHOW COMPACTIONS COMPACTIONID=2": [2],
        "SHOW COMPACTIONS COMPACTIONID=99": [],
        "SHOW COMPACTIONS DATABASE other": [4],
        "SHOW COMPACTIONS SCHEMA default TYPE 'MINOR'": [3, 2],
        "SHOW COMPACTIONS p": [1, 2],
        "SHOW COMPACTIONS other.o": [4],
        "SHOW COMPACTIONS p PARTITION (k='two')": [2],
        "SHOW COMPACTIONS TYPE 'major'": [1, 4],
        "SHOW COMPACTIONS STATUS 'working'": [3],
        "SHOW COMPACTIONS STATUS 'initiated' ORDER BY id DESC": [4, 2, 1],
        "SHOW COMPACTIONS POOL 'fast'": [2],
        "SHOW COMPACTIONS ORDER BY tabname, compactionid DESC": [4, 2, 1, 3],
        "SHOW COMPACTIONS ORDER BY poolname DESC, id LIMIT 2": [2, 1],
        "SHOW COMPACTIONS DATABASE default STATUS 'initiated' ORDER BY id LIMIT 1": [1],
        "SHOW COMPACTIONS LIMIT 0": [],
    }
    assert {text: compaction_ids(metastore, text) for text in cases} == cases


@pytest.mark.parametrize("text, problem", [
    ("SHOW COMPACTIONS STATUS 'bogus'", "compaction state 'bogus' is not one of ['initiated', 'working'"),
    ("SHOW COMPACTIONS TYPE 'medium'", "compaction type 'medium' is not 'major', 'minor' or 'rebalance'"),
    ("SHOW COMPACTIONS ORDER BY nope", "SHOW COMPACTIONS cannot order by 'nope'"),
    ("SHOW COMPACTIONS DATABASE nope", "database 'nope' does not exist"),
    ("SHOW COMPACTIONS nope", "table default.nope does not exist"),
    ("SHOW COMPACTIONS t PARTITION (k='x')", "table default.t is not partitioned"),
])
def test_show_compactions_refuses_bad_filters(metastore, text, problem):
    sql(metastore, f"CREATE TABLE t (a int) {ACID}")
    assert problem in failure(metastore, text)


# ---------------------------------------------------------------------------------------------------------------
# Transactions and locks


def test_show_transactions_lists_open_and_aborted(metastore):
    assert parse_table(sql(metastore, "SHOW TRANSACTIONS")) == (
        ["Transaction ID", "Transaction State", "Started Time", "Last Heartbeat Time", "User", "Hostname"], [])
    opened, aborted, committed = metastore.txns.open_txns(3)
    metastore.txns.abort(aborted)
    metastore.txns.commit(committed)
    shown = records(metastore, "SHOW TRANSACTIONS")
    assert [list(row) for row in shown] == [["txnid", "state", "startedtime", "lastheartbeattime", "user", "host"]] * 2
    assert [(row["txnid"], row["state"]) for row in shown] == [(opened, "OPEN"), (aborted, "ABORTED")]
    assert shown[0]["user"] == metastore.db.identity.user and shown[0]["host"] == metastore.db.identity.host
    assert isinstance(shown[0]["startedtime"], int)


def test_show_locks_with_locks_held(metastore):
    sql(metastore, f"CREATE TABLE p (a int) PARTITIONED BY (k string) {ACID}; CREATE TABLE t (a int) {ACID}")
    assert parse_table(sql(metastore, "SHOW LOCKS")) == (LOCK_HEADERS, [])
    table_lock = metastore.locks.acquire([LockComponent("default", "t", None, LockType.EXCLUSIVE)], timeout_ms=1000,
                                         agent_info="a test")
    txn = metastore.txns.open_txn()
    partition_lock = metastore.locks.acquire([LockComponent("default", "p", "k=one", LockType.SHARED_WRITE)],
                                             txn_id=txn, timeout_ms=1000)
    everything = records(metastore, "SHOW LOCKS")
    assert all(list(row) == LOCK_KEYS for row in everything)
    assert [(r["lockid"], r["table"], r["partition"], r["lock_state"], r["lock_type"], r["transaction_id"],
             r["agent_info"]) for r in everything] == [
        (table_lock, "t", None, "ACQUIRED", "EXCLUSIVE", None, "a test"),
        (partition_lock, "p", "k=one", "ACQUIRED", "SHARED_WRITE", txn, None)]
    assert everything[0]["blocked_by"] is None and everything[0]["user"] == metastore.db.identity.user
    assert [r["lockid"] for r in records(metastore, "SHOW LOCKS t")] == [table_lock]
    assert [r["lockid"] for r in records(metastore, "SHOW LOCKS default.p PARTITION (k='one') EXTENDED")] == [
        partition_lock]
    assert records(metastore, "SHOW LOCKS p PARTITION (k='two')") == []
    assert len(records(metastore, "SHOW LOCKS DATABASE default")) == 2
    assert records(metastore, "SHOW LOCKS SCHEMA other") == []

    sql(metastore, f"ABORT TRANSACTIONS {txn}")
    metastore.locks.unlock(table_lock)
    assert records(metastore, "SHOW LOCKS") == []


def test_abort_transactions_is_all_or_nothing(metastore):
    first, second, aborted = metastore.txns.open_txns(3)
    metastore.txns.abort(aborted)
    message = failure(metastore, f"ABORT TRANSACTIONS {first} 999 {second}")
    assert "cannot abort transactions 999 (not open); nothing was aborted" in message
    message = failure(metastore, f"ABORT TRANSACTIONS {first} {aborted}")
    assert f"cannot abort transactions {aborted} (aborted); nothing was aborted" in message
    assert open_and_aborted(metastore) == [(first, "OPEN"), (second, "OPEN"), (aborted, "ABORTED")]

    assert lines(metastore, f"ABORT TRANSACTIONS {first} {second}") == [f"Aborted transaction {first}",
                                                                         f"Aborted transaction {second}"]
    assert open_and_aborted(metastore) == [(first, "ABORTED"), (second, "ABORTED"), (aborted, "ABORTED")]


def test_abort_compactions_reports_each_id(metastore):
    sql(metastore, f"CREATE TABLE t (a int) {ACID}; CREATE TABLE u (a int) {ACID}; "
                   "ALTER TABLE t COMPACT 'major'; ALTER TABLE u COMPACT 'major'")
    metastore.compactions.claim(worker_id="w-1", compaction_id=2)
    headers, rows = parse_table(sql(metastore, "ABORT COMPACTIONS 1 2 99"))
    assert headers == ["CompactionId", "Status", "Message"]
    assert rows == [["1", "Success", "Successfully aborted compaction"],
                    ["2", "Error", "Error while aborting compaction as compaction is in state-working"],
                    ["99", "Error", "No Such Compaction Id Available"]]
    (aborted,) = records(metastore, "SHOW COMPACTIONS STATUS 'aborted'")
    assert (aborted["compactionid"], aborted["errormessage"]) == (1, "Compaction Aborted by Abort Comapction request.")
    assert records(metastore, "ABORT COMPACTIONS 1") == [
        {"compactionid": 1, "status": "Error",
         "message": "Error while aborting compaction as compaction is in state-aborted"}]


# ---------------------------------------------------------------------------------------------------------------
# Scripts: engine statements, syntax errors, hostile names


def test_insert_overwrite_is_refused_and_earlier_statements_stay_done(metastore):
    """SELECT, INSERT ... SELECT, UPDATE, DELETE and MERGE run on Spark SQL (tests/spark_jobs/test_sql_engine.py);
    INSERT OVERWRITE is refused before Spark starts."""
    text = "INSERT OVERWRITE TABLE t VALUES (1)"
    message = failure(metastore, f"CREATE DATABASE before_it; {text}; CREATE DATABASE after_it")
    assert message.startswith(f'statement "{text}" failed: INSERT OVERWRITE is not supported')
    assert metastore.catalog.list_databases() == ["before_it", "default"]  # earlier statements stay done


def test_a_syntax_error_anywhere_runs_nothing(metastore, warehouse):
    before = tree(warehouse)
    with pytest.raises(HiveQLSyntaxError) as info:
        sql(metastore, f"CREATE DATABASE a;\nCREATE TABLE a.t (x int) {ACID};\nINSERT INTO a.t VALUES (1,;\n"
                       "CREATE DATABASE b")
    assert str(info.value) == ('syntax error in "INSERT INTO a.t VALUES (1," at 3:26: expected a literal value, '
                               "found end of input")
    assert metastore.catalog.list_databases() == ["default"]
    assert tree(warehouse) == before


def test_a_failing_statement_stops_the_script(metastore):
    message = failure(metastore, "CREATE DATABASE a; SHOW TABLES IN nope; CREATE DATABASE b")
    assert message == "statement \"SHOW TABLES IN nope\" failed: database 'nope' does not exist"
    assert metastore.catalog.list_databases() == ["a", "default"]


@pytest.mark.parametrize("text", [
    "CREATE DATABASE `../x`",
    "CREATE DATABASE `x; DROP TABLE \"TXNS\"`",
    f"CREATE TABLE `../x` (a int) {ACID}",
    f"CREATE TABLE `t'; DELETE FROM \"TBLS\"; --` (a int) {ACID}",
    f"CREATE TABLE t (`a/b` int) {ACID}",
    f"CREATE TABLE t (a int) PARTITIONED BY (`../k` string) {ACID}",
    "USE `../default`",
    "DROP TABLE `..`",
    "SHOW TABLES IN `x\"; DROP TABLE \"TBLS`",
    "INSERT INTO `../t` VALUES (1)",
    "DESCRIBE `../../t`",
])
def test_hostile_names_are_refused(metastore, tmp_path, text):
    sql(metastore, f"CREATE TABLE kept (a int) {ACID}")
    before = tree(tmp_path)
    assert "is not valid: use letters, digits and underscores" in failure(metastore, text)
    assert tree(tmp_path) == before
    assert metastore.catalog.list_databases() == ["default"] and metastore.catalog.list_tables("default") == ["kept"]
    assert [t.full_name for t in metastore.catalog.list_all_tables()] == ["default.kept"]


def test_hostile_partition_values_stay_inside_the_table(metastore, tmp_path, warehouse):
    sql(metastore, f"CREATE TABLE p (a int) PARTITIONED BY (k string) {ACID}")
    outside = tree(tmp_path) - {f"wh/{path}" for path in tree(warehouse)} - {"wh"}
    sql(metastore, "INSERT INTO p PARTITION (k='../../escape') VALUES (1); "
                   "INSERT INTO p PARTITION (k='x''; DROP TABLE \"TXNS\"; --') VALUES (2)")
    assert tree(tmp_path) - {f"wh/{path}" for path in tree(warehouse)} - {"wh"} == outside
    names = [p.name for p in metastore.catalog.list_partitions("default", "p")]
    assert len(names) == 2 and all("/" not in name for name in names)
    assert {p.name for p in (warehouse / "p").iterdir()} == set(names)
    assert [visible_rows(metastore, "default", "p", name) for name in names] in ([[{"a": 1}], [{"a": 2}]],
                                                                                [[{"a": 2}], [{"a": 1}]])
    assert open_and_aborted(metastore) == []  # the metastore's own tables are intact


# ---------------------------------------------------------------------------------------------------------------
# The `acid sql` process


def acid_sql(*args: str, home: Path) -> subprocess.CompletedProcess:
    environment = {**os.environ, "ACID_HOME": str(home)}
    environment.pop("ACID_METASTORE_URL", None)
    environment.pop("ACID_WAREHOUSE", None)
    return subprocess.run([sys.executable, "-m", "acid_cli.main", "sql", *args], capture_output=True, text=True,
                          cwd=ROOT, env=environment, timeout=60)


def test_cli_runs_a_script_given_as_an_argument(metastore_url, tmp_path):
    home = tmp_path / "home"
    result = acid_sql(f"CREATE TABLE t (a int) PARTITIONED BY (k string) {ACID}; "
                      "INSERT INTO t PARTITION (k='a') VALUES (1), (2); SHOW PARTITIONS t",
                      "--metastore", metastore_url, home=home)
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout.splitlines() == ["OK", "Inserted 2 rows into default.t partition k=a (transaction 1, write id 1)",
                                          "partition", "---------", "k=a"]
    assert (home / "warehouse" / "t" / "k=a" / "delta_0000001_0000001_0000").is_dir()


def test_cli_runs_a_file_prints_jsonl_and_exits_1_naming_the_failed_statement(metastore_url, tmp_path):
    home = tmp_path / "home"
    script = tmp_path / "script.hql"
    script.write_text("-- set up\nCREATE DATABASE d;\nSHOW DATABASES;\nDROP TABLE d.missing;\nCREATE DATABASE e;\n")
    result = acid_sql("-f", str(script), "--format", "jsonl", "--metastore", metastore_url, home=home)
    assert result.returncode == 1
    assert [json.loads(line) for line in result.stdout.splitlines()] == [
        {"message": "OK"}, {"database_name": "d"}, {"database_name": "default"}]
    assert result.stderr == 'acid sql: error: statement "DROP TABLE d.missing" failed: table d.missing does not exist\n'
    with closing(Metastore(metastore_url, warehouse=str(home / "warehouse"))) as store:
        assert store.catalog.list_databases() == ["d", "default"]


def test_cli_syntax_error_exits_2_and_runs_nothing(metastore_url, tmp_path):
    """A script that does not parse is bad usage (HiveQLSyntaxError is a UsageError): exit 2, nothing run."""
    home = tmp_path / "home"
    result = acid_sql("CREATE DATABASE d; SHOW OOPS", "--metastore", metastore_url, home=home)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert result.stdout == ""
    assert result.stderr.startswith('acid sql: error: syntax error in "SHOW OOPS" at 1:24: expected TRANSACTIONS')
    with closing(Metastore(metastore_url, warehouse=str(home / "warehouse"))) as store:
        store.init()
        assert store.catalog.list_databases() == ["default"]


@pytest.mark.parametrize("args", [(), ("SHOW DATABASES", "-f", "x.hql"), ("-f", "does-not-exist.hql")])
def test_cli_usage_errors_exit_2(tmp_path, args):
    result = acid_sql(*args, home=tmp_path / "home")
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert result.stderr.startswith("acid sql: error: ") and "Traceback" not in result.stderr
    assert not (tmp_path / "home").exists()



# ---------------------------------------------------------------------------------------------------------------
# Structure


def test_acid_cli_modules_import_one_way():
    """No import cycle among acid_cli's modules, counting imports inside functions (issue 10: engine <-> session)."""
    import ast as python_ast

    graph: dict[str, set[str]] = {}
    for path in sorted((ROOT / "acid_cli").rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        graph[module] = set()
        for node in python_ast.walk(python_ast.parse(path.read_text())):
            if isinstance(node, python_ast.ImportFrom) and node.module and node.level == 0:
                graph[module] |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
            elif isinstance(node, python_ast.Import):
                graph[module] |= {alias.name for alias in node.names}
    graph = {module: {d for d in imported if d in graph and d != module} for module, imported in graph.items()}

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        return any(d == goal or (d not in seen and not seen.add(d) and reaches(d, goal, seen)) for d in graph[start])

    assert sorted(m for m in graph if reaches(m, m, set())) == []
    assert "acid_cli.sql.session" not in graph["acid_cli.sql.engine"]
