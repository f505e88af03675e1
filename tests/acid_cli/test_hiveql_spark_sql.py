"""Engine statements read with sqlglot (acid_cli.hiveql.spark_sql): which names are tables, the clauses, the errors.

Pure: no Spark, no metastore. What Spark then does with the texts is in tests/spark_jobs/test_sql_engine.py.
"""

from __future__ import annotations

import pytest

from acid_cli.hiveql import HiveQLSyntaxError, parse_script
from acid_cli.hiveql.ast import (
    MergeDelete,
    MergeInsert,
    MergeUpdate,
    PartitionSpec,
    PartitionValue,
    SparkDelete,
    SparkInsert,
    SparkMerge,
    SparkQuery,
    SparkText,
    SparkUpdate,
    TableName,
)
from acid_cli.hiveql.spark_sql import SparkSyntaxError, parse_engine_statement
from acid_core.errors import UsageError


def view(name: TableName) -> str:
    return f"v_{name.database or 'cur'}_{name.table}"


def spark(text: SparkText | None) -> str | None:
    """The text Spark would run, views named v_<db>_<table> (`cur` for the current database)."""
    return None if text is None else text.render(view)


def query(text: str) -> str:
    statement = parse_engine_statement(text)
    assert isinstance(statement, SparkQuery)
    return spark(statement.query)


def tables(text: str) -> list[str]:
    return [str(reference.name) for reference in parse_engine_statement(text).query.tables]


# ---------------------------------------------------------------------------------------------------------------
# Which names are tables (the queries the issue names first)


@pytest.mark.parametrize("text, expected", [
    ("SELECT EXTRACT(year FROM d) AS y FROM e", "SELECT EXTRACT(year FROM d) AS y FROM v_cur_e AS `e`"),
    ("SELECT TRIM(BOTH ' ' FROM name) FROM e", "SELECT TRIM(BOTH ' ' FROM name) FROM v_cur_e AS `e`"),
    ("SELECT trim(LEADING 'x' FROM name), position('a' IN name) FROM e",
     "SELECT trim(LEADING 'x' FROM name), position('a' IN name) FROM v_cur_e AS `e`"),
    ("WITH x AS (SELECT id FROM e) SELECT count(*) FROM x",
     "WITH x AS (SELECT id FROM v_cur_e AS `e`) SELECT count(*) FROM x"),
])
def test_extract_trim_and_cte_names_are_not_tables(text, expected):
    assert query(text) == expected


def test_cte_names_are_visible_where_spark_sees_them():
    # inside a CTE, only the CTEs before it are visible: `a` in a's own body is the table a; `b` reads the CTE a
    assert tables("WITH a AS (SELECT * FROM a), b AS (SELECT * FROM a) SELECT * FROM b, c") == ["c", "a"]
    assert tables("WITH RECURSIVE r AS (SELECT 1 AS n UNION ALL SELECT n + 1 FROM r) SELECT * FROM r") == []
    # a CTE of a subquery is not visible outside it; a qualified name is never a CTE
    assert tables("SELECT * FROM (WITH q AS (SELECT 1) SELECT * FROM q) z, q") == ["q"]
    assert tables("WITH t AS (SELECT 1) SELECT * FROM t, db.t") == ["db.t"]


def test_quoted_names_joins_and_subqueries_resolve():
    text = ("SELECT a.id, u.v FROM `Db`.`T` AS a JOIN db2.u ON a.id = u.id "
            "WHERE a.id IN (SELECT id FROM w) AND EXISTS (SELECT 1 FROM (SELECT * FROM x) y WHERE y.id = a.id)")
    assert tables(text) == ["db.t", "db2.u", "w", "x"]
    assert query(text) == ("SELECT a.id, u.v FROM v_db_t AS a JOIN v_db2_u AS `u` ON a.id = u.id WHERE a.id IN "
                           "(SELECT id FROM v_cur_w AS `w`) AND EXISTS (SELECT 1 FROM (SELECT * FROM v_cur_x AS `x`) "
                           "y WHERE y.id = a.id)")


def test_columns_aliases_functions_and_strings_are_not_tables():
    text = ("SELECT t.id, row__id.writeid, 'FROM x' AS `from`, explode(array(1)) FROM t "
            "LATERAL VIEW explode(array(2)) lv AS c CROSS JOIN range(3)")
    assert tables(text) == ["t"]
    assert query(text).endswith("FROM v_cur_t AS `t` LATERAL VIEW explode(array(2)) lv AS c CROSS JOIN range(3)")


def test_only_table_names_change_so_spark_reads_the_text_as_written():
    # sqlglot would read 'it''s' as two literals ("its") and write CONCAT('it', 's'); Spark reads "it's"
    text = "SELECT 'it''s', to_timestamp(s), CAST(x AS VARCHAR(3)), 1 DIV 2 -- note\nFROM t"
    assert query(text) == text.replace("FROM t", "FROM v_cur_t AS `t`")


def test_an_alias_goes_after_tablesample_so_none_is_added():
    assert query("SELECT * FROM t TABLESAMPLE (10 PERCENT)") == "SELECT * FROM v_cur_t TABLESAMPLE (10 PERCENT)"


def test_hive_from_first_query():
    assert query("FROM t SELECT id WHERE id > 1") == "FROM v_cur_t AS `t` SELECT id WHERE id > 1"


# ---------------------------------------------------------------------------------------------------------------
# INSERT ... SELECT, UPDATE, DELETE, MERGE


def test_insert_select_with_partition_and_columns():
    statement = parse_engine_statement("INSERT INTO TABLE `db`.t PARTITION (ds='x', h=-1, k) (a, `B`) "
                                       "SELECT a, b, k FROM src WHERE a IN (SELECT a FROM other)")
    assert isinstance(statement, SparkInsert)
    assert statement.table == TableName("t", database="db")
    assert statement.partition == PartitionSpec((PartitionValue("ds", "x", True), PartitionValue("h", "-1", False)))
    assert statement.dynamic_keys == ("k",)
    assert statement.columns == ("a", "b")
    assert spark(statement.query) == ("SELECT a, b, k FROM v_cur_src AS `src` WHERE a IN "
                                      "(SELECT a FROM v_cur_other AS `other`)")


def test_insert_with_a_cte_before_insert_keeps_it_with_the_query():
    statement = parse_engine_statement("WITH x AS (SELECT id FROM e) INSERT INTO t SELECT * FROM x")
    assert statement.table == TableName("t") and statement.partition is None and statement.columns == ()
    assert spark(statement.query) == "WITH x AS (SELECT id FROM v_cur_e AS `e`) SELECT * FROM x"


def test_update_assignments_and_condition_with_a_subquery():
    statement = parse_engine_statement(
        "UPDATE db.t SET name = upper(name), t.v = CASE WHEN v > 1 THEN 'a,b' ELSE NULL END "
        "WHERE id IN (SELECT id FROM s WHERE s.note = 'WHERE') -- done")
    assert isinstance(statement, SparkUpdate)
    assert statement.table == TableName("t", database="db")
    assert [(column, spark(expression)) for column, expression in statement.assignments] == [
        ("name", "upper(name)"), ("v", "CASE WHEN v > 1 THEN 'a,b' ELSE NULL END")]
    assert spark(statement.condition) == "id IN (SELECT id FROM v_cur_s AS `s` WHERE s.note = 'WHERE')"


def test_delete_with_and_without_where():
    assert parse_engine_statement("DELETE FROM t") == SparkDelete(TableName("t"))
    statement = parse_engine_statement("DELETE FROM t WHERE EXTRACT(year FROM d) = 2024 AND id NOT IN "
                                       "(WITH q AS (SELECT id FROM keep) SELECT id FROM q)")
    assert spark(statement.condition) == ("EXTRACT(year FROM d) = 2024 AND id NOT IN "
                                          "(WITH q AS (SELECT id FROM v_cur_keep AS `keep`) SELECT id FROM q)")


def test_merge_with_a_table_source_and_every_clause():
    statement = parse_engine_statement(
        "MERGE INTO t AS d USING src s ON d.id = CASE WHEN s.id > 0 THEN s.id END "
        "WHEN MATCHED AND s.op = 'u' THEN UPDATE SET name = s.name, d.v = coalesce(s.v, 0) "
        "WHEN MATCHED THEN DELETE "
        "WHEN NOT MATCHED AND s.op <> 'd' THEN INSERT VALUES (s.id, trim(BOTH FROM s.name), 'z')")
    assert isinstance(statement, SparkMerge)
    assert (statement.table, statement.target_alias) == (TableName("t"), "d")
    assert (statement.source, statement.source_alias) == (TableName("src"), "s")
    assert spark(statement.on) == "d.id = CASE WHEN s.id > 0 THEN s.id END"
    update, delete, insert = statement.clauses
    assert isinstance(update, MergeUpdate) and spark(update.condition) == "s.op = 'u'"
    assert [(c, spark(e)) for c, e in update.assignments] == [("name", "s.name"), ("v", "coalesce(s.v, 0)")]
    assert delete == MergeDelete()
    assert isinstance(insert, MergeInsert) and insert.columns == () and spark(insert.condition) == "s.op <> 'd'"
    assert [spark(v) for v in insert.values] == ["s.id", "trim(BOTH FROM s.name)", "'z'"]


def test_merge_using_a_subquery():
    statement = parse_engine_statement(
        "MERGE INTO db.t USING (WITH q AS (SELECT * FROM src) SELECT * FROM q JOIN `db`.`other` o ON q.id = o.id) "
        "ON t.id = s.id WHEN NOT MATCHED THEN INSERT (id, name) VALUES (s.id, s.name)")
    assert (statement.target_alias, statement.source_alias) == ("t", "s")  # Hive's defaults: the name, and s
    assert spark(statement.source) == ("WITH q AS (SELECT * FROM v_cur_src AS `src`) SELECT * FROM q JOIN "
                                       "v_db_other o ON q.id = o.id")
    (insert,) = statement.clauses
    assert insert.columns == ("id", "name") and [spark(v) for v in insert.values] == ["s.id", "s.name"]


# ---------------------------------------------------------------------------------------------------------------
# Errors: one line, naming the problem


@pytest.mark.parametrize("text, problem", [
    ("INSERT OVERWRITE TABLE t SELECT 1", "INSERT OVERWRITE is not supported"),
    ("FROM s INSERT INTO t SELECT a", "multi-table insert"),
    ("SELECT * FROM spark_catalog.db.t", "a name with a catalog is not supported"),
    ("UPDATE t SET WHERE a = 1", "UPDATE needs SET column = expression"),
    ("UPDATE t SET u.a = 1", "UPDATE needs column = expression, not u.a = ..."),
    ("UPDATE t AS x SET a = 1", "AS alias is not supported"),
    ("DELETE FROM t AS x WHERE x.a = 1", "AS alias is not supported"),
    ("INSERT INTO t PARTITION (ds = concat('a', 'b')) SELECT 1", "a partition value must be a literal"),
    ("MERGE INTO t USING s ON t.id = s.id WHEN MATCHED THEN DELETE WHEN MATCHED AND s.x THEN DELETE",
     "at most one"),
    ("MERGE INTO t USING s ON t.id = s.id WHEN NOT MATCHED BY SOURCE THEN DELETE", "BY SOURCE is not supported"),
    ("MERGE INTO t USING s ON t.id = s.id WHEN MATCHED THEN UPDATE SET *", "THEN UPDATE SET column = expression"),
    ("MERGE INTO t USING s ON t.id = s.id WHEN NOT MATCHED THEN INSERT *", "THEN INSERT [(column, ...)] VALUES"),
    ("MERGE INTO t USING s ON t.id = s.id WHEN NOT MATCHED THEN INSERT (a, b) VALUES (1)", "1 values for 2 columns"),
])
def test_unsupported_forms_are_refused_by_name(text, problem):
    with pytest.raises(UsageError) as info:
        parse_engine_statement(text)
    assert problem in str(info.value) and "\n" not in str(info.value)


def test_a_statement_sqlglot_cannot_parse_gets_a_one_line_error_with_its_position():
    with pytest.raises(SparkSyntaxError) as info:
        parse_engine_statement("SELECT *\nFROM t\nWHERE a = = 2")
    assert str(info.value) == "Spark SQL syntax error at 3:10: incomplete EQ (no expression), found '='"


def test_a_bad_engine_statement_stops_the_script_at_parse_time_with_its_script_position():
    with pytest.raises(HiveQLSyntaxError) as info:
        parse_script("CREATE DATABASE a;\nSELECT * FORM t")
    assert str(info.value) == ('syntax error in "SELECT * FORM t" at 2:14: Invalid expression / Unexpected token, '
                               "found 't'")
    with pytest.raises(HiveQLSyntaxError, match=r'"INSERT INTO t SELECT FROM" at 1:21: .*end of input'):
        parse_script("INSERT INTO t SELECT FROM")
