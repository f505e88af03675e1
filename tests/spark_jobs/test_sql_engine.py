"""`acid sql` statements that run on Spark SQL: SELECT (with row__id), INSERT ... SELECT, UPDATE, DELETE, MERGE."""

from __future__ import annotations

import io

import pytest
from support.sql_sessions import run

from acid_cli.sql import StatementError
from acid_cli.sql.session import Session
from acid_core.metastore import Metastore

pytestmark = pytest.mark.spark


@pytest.fixture
def session(spark, tmp_path):
    store = Metastore(f"sqlite:///{tmp_path}/metastore.db", warehouse=str(tmp_path / "warehouse"))
    store.init()
    out = io.StringIO()
    session = Session(store, out, "jsonl")
    yield session  # its engine uses the test session, which is running, and leaves it running
    store.close()


def test_a_script_run_in_a_process_with_a_session_uses_it_and_leaves_it_running(spark, tmp_path):
    from acid_cli.sql import run_script

    store = Metastore(f"sqlite:///{tmp_path}/metastore.db", warehouse=str(tmp_path / "warehouse"))
    store.init()
    out = io.StringIO()
    spark.conf.set("spark.sql.session.timeZone", "America/New_York")  # the caller's; acid sql runs in UTC
    try:
        status = run_script("CREATE TABLE t (id int) STORED AS ORC TBLPROPERTIES ('transactional'='true'); "
                            "INSERT INTO t VALUES (1), (2); UPDATE t SET id = 3 WHERE id = 2; SELECT id FROM t",
                            metastore=store, output_format="jsonl", out=out)
        zone = spark.conf.get("spark.sql.session.timeZone")
    finally:
        spark.conf.set("spark.sql.session.timeZone", "UTC")
        store.close()
    assert status == 0, out.getvalue()
    assert out.getvalue().splitlines()[-2:] == ['{"id": 1}', '{"id": 3}']
    assert spark.range(3).count() == 3  # the session the script found is still the caller's
    assert zone == "America/New_York"  # with the caller's settings back


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


ACID = "STORED AS ORC TBLPROPERTIES ('transactional'='true')"


def test_queries_with_extract_trim_ctes_quoted_names_and_joins(session):
    """The queries the token scanner read wrongly (issue 10): names inside EXTRACT/TRIM and CTE names are not tables."""
    run(session, f"CREATE TABLE e (id int, d date, name string) {ACID}; CREATE DATABASE s; "
                 f"CREATE TABLE s.u (id int, v string) {ACID}; "
                 "INSERT INTO e VALUES (1, DATE '2023-05-01', '  a '), (2, DATE '2024-01-02', 'b  '), "
                 "(3, DATE '2024-12-31', 'c'); INSERT INTO s.u VALUES (1, 'x'), (3, 'z')")
    assert run(session, "SELECT EXTRACT(year FROM d) AS y FROM e ORDER BY id") == [{"y": 2023}, {"y": 2024},
                                                                                   {"y": 2024}]
    assert run(session, "WITH x AS (SELECT id FROM e) SELECT count(*) AS n FROM x") == [{"n": 3}]
    assert run(session, "SELECT TRIM(BOTH ' ' FROM name) AS n FROM e ORDER BY id") == [{"n": "a"}, {"n": "b"},
                                                                                       {"n": "c"}]
    rows = run(session, "SELECT e.id, u.v, 'it''s' AS q FROM `default`.`e` JOIN `S`.u ON e.id = u.id "
                        "WHERE e.id IN (SELECT id FROM s.u WHERE v <> 'y') ORDER BY e.id")
    assert rows == [{"id": 1, "v": "x", "q": "it's"}, {"id": 3, "v": "z", "q": "it's"}]  # Spark reads 'it''s'
    assert run(session, "USE s; FROM u SELECT max(id) AS m")[-1] == {"m": 3}  # Hive's FROM-first form
    assert session.metastore.txns.show_transactions() == []  # every snapshot's transaction is committed


def test_dml_with_subqueries_ctes_and_a_merge_source_query(session):
    run(session, f"CREATE TABLE t (id int, name string) {ACID}; CREATE TABLE src (id int, name string) {ACID}; "
                 "INSERT INTO src VALUES (1, 'a'), (2, 'b'), (3, 'c'), (4, 'd')")
    run(session, "WITH q AS (SELECT id, name FROM src WHERE id <= 3) INSERT INTO t SELECT * FROM q")
    run(session, "DELETE FROM t WHERE id IN (SELECT id FROM src WHERE name = 'b')")
    run(session, "UPDATE t SET name = concat(name, '!') "
                 "WHERE id IN (WITH q AS (SELECT id FROM src) SELECT id FROM q WHERE EXTRACT(year FROM now()) > 2000 "
                 "AND id > 2)")
    assert run(session, "SELECT id, name FROM t ORDER BY id") == [{"id": 1, "name": "a"}, {"id": 3, "name": "c!"}]
    run(session, "MERGE INTO t USING (SELECT id, upper(name) AS name FROM src WHERE id <> 1) s ON t.id = s.id "
                 "WHEN MATCHED AND s.id = 3 THEN UPDATE SET name = CASE WHEN s.id = 3 THEN s.name END "
                 "WHEN NOT MATCHED THEN INSERT (id, name) VALUES (s.id, TRIM(LEADING 'x' FROM s.name))")
    assert run(session, "SELECT id, name FROM t ORDER BY id") == [
        {"id": 1, "name": "a"}, {"id": 2, "name": "B"}, {"id": 3, "name": "C"}, {"id": 4, "name": "D"}]
    assert session.metastore.txns.show_transactions() == []


def test_a_location_of_another_table_is_refused_on_the_spark_engine_too(session):
    """CREATE TABLE ... LOCATION through a session whose DML runs on Spark: the catalog refuses another table's
    location, inside it or around it, creates nothing, and DROP ... PURGE of neither takes the other's files."""
    run(session, f"CREATE TABLE a (id int) {ACID}; INSERT INTO a VALUES (1), (2)")
    where = session.metastore.catalog.get_table("default", "a").location
    for location, words in ((where, "is the location of table default.a"),
                            (f"{where}/inner", "is inside the location of table default.a"),
                            (where.rsplit("/", 1)[0], "contains the location of table default.a")):
        with pytest.raises(StatementError, match=words):
            run(session, f"CREATE TABLE b (id int) STORED AS ORC LOCATION '{location}' "
                         "TBLPROPERTIES ('transactional'='true')")
        assert session.metastore.catalog.list_tables("default") == ["a"]
    assert [r["id"] for r in run(session, "SELECT id FROM a ORDER BY id")] == [1, 2]
