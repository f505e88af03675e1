"""`acid sql` statements that run on Spark SQL: SELECT (with row__id), INSERT ... SELECT, UPDATE, DELETE, MERGE."""

from __future__ import annotations

import io
import json

import pytest

from acid_cli.sql import StatementError, execute
from acid_cli.sql.session import Session
from acid_core.metastore import Metastore

pytestmark = pytest.mark.spark


@pytest.fixture
def session(spark, tmp_path):
    store = Metastore(f"sqlite:///{tmp_path}/metastore.db", warehouse=str(tmp_path / "warehouse"))
    store.init()
    out = io.StringIO()
    session = Session(store, out, "jsonl")
    session.engine()._spark = spark  # share the test session instead of building another
    yield session
    session._engine._spark = None
    store.close()


def run(session: Session, text: str) -> list[dict]:
    from acid_cli.hiveql import parse_script

    session.out.seek(0)
    session.out.truncate()
    for statement in parse_script(text):
        execute(session, statement)
    return [json.loads(line) for line in session.out.getvalue().splitlines()]


def test_dml_round_trip(session):
    run(session, "CREATE TABLE t (id int, name string) PARTITIONED BY (ds string) STORED AS ORC "
                 "TBLPROPERTIES ('transactional'='true'); "
                 "CREATE TABLE src (id int, name string) STORED AS ORC TBLPROPERTIES ('transactional'='true'); "
                 "INSERT INTO src VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    run(session, "INSERT INTO t PARTITION (ds='x') SELECT id, name FROM src WHERE id < 3")
    run(session, "INSERT INTO t SELECT id + 10, name, 'y' FROM default.src")
    rows = run(session, "SELECT id, name, ds FROM t ORDER BY id")
    assert [(r["id"], r["name"], r["ds"]) for r in rows] == [(1, "a", "x"), (2, "b", "x"), (11, "a", "y"),
                                                               (12, "b", "y"), (13, "c", "y")]
    run(session, "UPDATE t SET name = upper(name) WHERE id > 11")
    run(session, "DELETE FROM t WHERE id = 2")
    run(session, "MERGE INTO t AS d USING src AS s ON d.id = s.id "
                 "WHEN MATCHED THEN UPDATE SET name = 'merged' "
                 "WHEN NOT MATCHED THEN INSERT VALUES (s.id, s.name, 'z')")
    rows = run(session, "SELECT id, name, ds FROM t ORDER BY id")
    assert [(r["id"], r["name"], r["ds"]) for r in rows] == [(1, "merged", "x"), (2, "b", "z"), (3, "c", "z"),
                                                               (11, "a", "y"), (12, "B", "y"), (13, "C", "y")]
    (row,) = run(session, "SELECT row__id, id FROM t WHERE id = 11")
    assert set(row["row__id"]) == {"writeid", "bucketid", "rowid"}


def test_engine_errors_name_the_statement(session):
    with pytest.raises(StatementError, match="nope"):
        run(session, "SELECT * FROM nope")
    with pytest.raises(StatementError, match="not supported"):
        run(session, "INSERT OVERWRITE TABLE x SELECT 1")
