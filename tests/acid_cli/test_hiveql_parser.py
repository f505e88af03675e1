"""The HiveQL parser of `acid sql`: every statement form, Hive's lexical rules, and exact error messages.

Grammar follows Hive's HiveParser.g / ShowStatementParser.g / AlterClauseParser.g (hive-acid-reference.md section 8);
error positions are line (from 1) and column (from 0), as in Hive's ParseException.
"""

from __future__ import annotations

import datetime
from decimal import Decimal

import pytest

from acid_cli.hiveql import (
    ENGINE_KINDS,
    AbortCompactions,
    AbortTransactions,
    AlterTableCompact,
    AlterTableSetProperties,
    AlterTableUnsetProperties,
    Cast,
    Column,
    CreateDatabase,
    CreateTable,
    DescribeTable,
    DropDatabase,
    DropTable,
    EngineStatement,
    HiveQLSyntaxError,
    InsertValues,
    OrderItem,
    PartitionSpec,
    PartitionValue,
    ShowCompactions,
    ShowDatabases,
    ShowLocks,
    ShowPartitions,
    ShowTableProperties,
    ShowTables,
    ShowTransactions,
    Statement,
    TableName,
    UseDatabase,
    parse_script,
    parse_statement,
)
from acid_cli.hiveql.tokens import TokenizeError, TokenKind, tokenize, unescape_string
from acid_core.errors import AcidError, UsageError

T = TableName("t")
DB_T = TableName("t", database="db")


def spec(*items: tuple[str, str, bool]) -> PartitionSpec:
    return PartitionSpec(tuple(PartitionValue(key, value, quoted) for key, value, quoted in items))


def error_of(text: str) -> str:
    with pytest.raises(HiveQLSyntaxError) as info:
        parse_script(text)
    return str(info.value)


# ---------------------------------------------------------------------------------------------------------------
# Every statement form


@pytest.mark.parametrize("text, expected", [
    ("CREATE DATABASE sales", CreateDatabase("sales")),
    ("create schema if not exists Sales", CreateDatabase("sales", if_not_exists=True)),
    ("CREATE DATABASE d COMMENT 'the d' LOCATION '/warehouse/d.db'",
     CreateDatabase("d", comment="the d", location="/warehouse/d.db")),
    ("CREATE DATABASE d WITH DBPROPERTIES ('no_auto_compaction'='true', 'hive.compactor.worker.pool'='p1')",
     CreateDatabase("d", properties=(("no_auto_compaction", "true"), ("hive.compactor.worker.pool", "p1")))),
    ("DROP DATABASE d", DropDatabase("d")),
    ("DROP SCHEMA IF EXISTS d CASCADE", DropDatabase("d", if_exists=True, cascade=True)),
    ("drop database d restrict", DropDatabase("d")),
    ("USE sales", UseDatabase("sales")),
    ("USE default", UseDatabase("default")),
    ("SHOW DATABASES", ShowDatabases()),
    ("SHOW SCHEMAS LIKE 'sa*'", ShowDatabases("sa*")),
    ("SHOW TABLES", ShowTables()),
    ("SHOW TABLES IN db", ShowTables("db")),
    ("SHOW TABLES FROM db LIKE 't*'", ShowTables("db", "t*")),
    ("SHOW TABLES 't*'", ShowTables(pattern="t*")),
    ("SHOW PARTITIONS db.t", ShowPartitions(DB_T)),
    ("DESCRIBE t", DescribeTable(T)),
    ("DESC db.t", DescribeTable(DB_T)),
    ("DESCRIBE FORMATTED db.t", DescribeTable(DB_T, formatted=True)),
    ("describe extended t", DescribeTable(T, extended=True)),
    ("DESCRIBE formatted", DescribeTable(TableName("formatted"))),
    ("SHOW TBLPROPERTIES db.t", ShowTableProperties(DB_T)),
    ("SHOW TBLPROPERTIES t ('transactional')", ShowTableProperties(T, "transactional")),
    ("DROP TABLE t", DropTable(T)),
    ("DROP TABLE IF EXISTS db.t PURGE", DropTable(DB_T, if_exists=True, purge=True)),
    ("SHOW TRANSACTIONS", ShowTransactions()),
    ("ABORT TRANSACTIONS 7", AbortTransactions((7,))),
    ("ABORT TRANSACTIONS 7 8 9000000000", AbortTransactions((7, 8, 9000000000))),
    ("abort compactions 1 2", AbortCompactions((1, 2))),
])
def test_simple_statements(text, expected):
    assert parse_statement(text) == expected


@pytest.mark.parametrize("text, expected", [
    ("ALTER TABLE t SET TBLPROPERTIES ('transactional'='true')",
     AlterTableSetProperties(T, (("transactional", "true"),))),
    ("ALTER TABLE db.t SET TBLPROPERTIES ('a'='1', \"b\"=\"2\")",
     AlterTableSetProperties(DB_T, (("a", "1"), ("b", "2")))),
    ("ALTER TABLE t UNSET TBLPROPERTIES ('a', 'b')", AlterTableUnsetProperties(T, ("a", "b"))),
    ("ALTER TABLE t UNSET TBLPROPERTIES IF EXISTS ('a')", AlterTableUnsetProperties(T, ("a",), if_exists=True)),
])
def test_alter_table_properties(text, expected):
    assert parse_statement(text) == expected


@pytest.mark.parametrize("text, expected", [
    ("ALTER TABLE t COMPACT 'major'", AlterTableCompact(T, "major")),
    ("ALTER TABLE t COMPACT 'MINOR'", AlterTableCompact(T, "minor")),
    ("alter table db.t compact \"Major\" and wait", AlterTableCompact(DB_T, "major", wait=True)),
    ("ALTER TABLE t PARTITION (ds='2024-01-01', hr=3) COMPACT 'minor' POOL 'etl'",
     AlterTableCompact(T, "minor", partition=spec(("ds", "2024-01-01", True), ("hr", "3", False)), pool="etl")),
    ("ALTER TABLE t COMPACT 'major' AND WAIT POOL 'p' WITH OVERWRITE TBLPROPERTIES "
     "('compactor.mapreduce.map.memory.mb'='2048')",
     AlterTableCompact(T, "major", wait=True, pool="p", properties=(("compactor.mapreduce.map.memory.mb", "2048"),))),
    ("ALTER TABLE t COMPACT 'major' WITH OVERWRITE TBLPROPERTIES ('a'='b')",
     AlterTableCompact(T, "major", properties=(("a", "b"),))),
    ("ALTER TABLE t COMPACT 'Rebalance' CLUSTERED INTO 16 BUCKETS AND WAIT POOL 'big'",
     AlterTableCompact(T, "rebalance", number_of_buckets=16, wait=True, pool="big")),
    ("ALTER TABLE t COMPACT 'rebalance'", AlterTableCompact(T, "rebalance")),
    # every clause, in Hive 4's order (tableImplBuckets? blocking? compactPool? WITH OVERWRITE TBLPROPERTIES?)
    ("ALTER TABLE t COMPACT 'rebalance' CLUSTERED INTO 4 BUCKETS AND WAIT POOL 'etl.nightly-2' "
     "WITH OVERWRITE TBLPROPERTIES ('compactor.spark.executor.memory'='4g')",
     AlterTableCompact(T, "rebalance", number_of_buckets=4, wait=True, pool="etl.nightly-2",
                       properties=(("compactor.spark.executor.memory", "4g"),))),
    ("ALTER TABLE t COMPACT 'minor' POOL \"Etl\"", AlterTableCompact(T, "minor", pool="Etl")),  # kept as written
])
def test_alter_table_compact(text, expected):
    assert parse_statement(text) == expected


@pytest.mark.parametrize("text, expected", [
    ("SHOW LOCKS", ShowLocks()),
    ("SHOW LOCKS EXTENDED", ShowLocks(extended=True)),
    ("SHOW LOCKS db.t", ShowLocks(table=DB_T)),
    ("SHOW LOCKS t PARTITION (p='x') EXTENDED", ShowLocks(table=T, partition=spec(("p", "x", True)), extended=True)),
    ("SHOW LOCKS DATABASE db", ShowLocks(database="db")),
    ("show locks schema db extended", ShowLocks(database="db", extended=True)),
])
def test_show_locks(text, expected):
    assert parse_statement(text) == expected


@pytest.mark.parametrize("text, expected", [
    ("SHOW COMPACTIONS", ShowCompactions()),
    ("SHOW COMPACTIONS COMPACTIONID = 12", ShowCompactions(compaction_id=12)),
    ("show compactions compactionid=12", ShowCompactions(compaction_id=12)),
    ("SHOW COMPACTIONS DATABASE db", ShowCompactions(database="db")),
    ("SHOW COMPACTIONS SCHEMA db POOL 'p' TYPE 'MAJOR' STATUS 'ready for cleaning' ORDER BY enqueuetime DESC, "
     "cc_id LIMIT 10",
     ShowCompactions(database="db", pool="p", compaction_type="MAJOR", status="ready for cleaning",
                     order_by=(OrderItem("enqueuetime", descending=True), OrderItem("cc_id")), limit=10)),
    ("SHOW COMPACTIONS db.t", ShowCompactions(table=DB_T)),
    ("SHOW COMPACTIONS t PARTITION (p=1) STATUS 'initiated' LIMIT 0",
     ShowCompactions(table=T, partition=spec(("p", "1", False)), status="initiated", limit=0)),
    ("SHOW COMPACTIONS POOL 'p'", ShowCompactions(pool="p")),
    ("SHOW COMPACTIONS TYPE 'minor' ORDER BY StartTime ASC", ShowCompactions(
        compaction_type="minor", order_by=(OrderItem("starttime"),))),
    ("SHOW COMPACTIONS LIMIT 3", ShowCompactions(limit=3)),
    ("SHOW COMPACTIONS `pool`", ShowCompactions(table=TableName("pool"))),
])
def test_show_compactions(text, expected):
    assert parse_statement(text) == expected


def test_create_table_with_every_clause():
    statement = parse_statement("""
        CREATE TABLE IF NOT EXISTS sales.Orders (
            id BIGINT COMMENT 'order id',
            amount DECIMAL(12,2),
            note STRING
        )
        COMMENT 'orders'
        PARTITIONED BY (ds STRING COMMENT 'day', region VARCHAR(8))
        CLUSTERED BY (id) INTO 4 BUCKETS
        STORED AS ORC
        LOCATION 'hdfs://nn/warehouse/sales.db/orders'
        TBLPROPERTIES ('transactional'='true', 'transactional_properties'='default')
    """)
    assert statement == CreateTable(
        TableName("orders", database="sales"),
        (Column("id", "bigint", "order id"), Column("amount", "decimal(12,2)"), Column("note", "string")),
        if_not_exists=True, comment="orders",
        partition_columns=(Column("ds", "string", "day"), Column("region", "varchar(8)")),
        bucket_columns=("id",), buckets=4, stored_as="orc", location="hdfs://nn/warehouse/sales.db/orders",
        properties=(("transactional", "true"), ("transactional_properties", "default")))


def test_create_table_minimal_leaves_every_option_unset():
    statement = parse_statement("CREATE TABLE t (a INT)")
    assert statement == CreateTable(T, (Column("a", "int"),))
    assert statement.stored_as is None and statement.buckets is None and statement.properties == ()


@pytest.mark.parametrize("written, normalized", [
    ("TINYINT", "tinyint"), ("smallint", "smallint"), ("Int", "int"), ("INTEGER", "int"), ("bigint", "bigint"),
    ("float", "float"), ("real", "float"), ("double", "double"), ("DOUBLE PRECISION", "double"),
    ("decimal", "decimal(10,0)"), ("DECIMAL(7)", "decimal(7,0)"), ("decimal( 38 , 38 )", "decimal(38,38)"),
    ("numeric(5,2)", "decimal(5,2)"), ("dec(3,1)", "decimal(3,1)"),
    ("string", "string"), ("VARCHAR(65535)", "varchar(65535)"), ("char(1)", "char(1)"), ("boolean", "boolean"),
    ("binary", "binary"), ("date", "date"), ("timestamp", "timestamp"),
    ("array<int>", "array<int>"), ("ARRAY < ARRAY<STRING> >", "array<array<string>>"),
    ("map<string,int>", "map<string,int>"), ("MAP<DECIMAL(4,2), ARRAY<DATE>>", "map<decimal(4,2),array<date>>"),
    ("struct<a:int, B:string>", "struct<a:int,b:string>"),
    ("struct<`x y`:map<int,struct<z:double precision>>>", "struct<x y:map<int,struct<z:double>>>"),
    ("uniontype<int, string, array<bigint>>", "uniontype<int,string,array<bigint>>"),
])
def test_column_types_are_normalized(written, normalized):
    statement = parse_statement(f"CREATE TABLE t (c {written})")
    assert statement.columns == (Column("c", normalized),)


def test_insert_values_keeps_literals_typed():
    statement = parse_statement(
        "INSERT INTO TABLE db.t PARTITION (ds='2024-01-01') (a, b, c, d, e, f, g, h, i) VALUES "
        "(1, -2.50, 'x', NULL, TRUE, false, DATE '2024-02-29', TIMESTAMP '2024-02-29 23:59:58.123456', "
        "CAST('7' AS BIGINT)), "
        "(+3, 1e3, \"y\", null, True, FALSE, date '1970-01-01', timestamp '2024-01-02', CAST(-1.5 AS DECIMAL(3,1)))")
    assert statement == InsertValues(
        DB_T,
        (
            (1, Decimal("-2.50"), "x", None, True, False, datetime.date(2024, 2, 29),
             datetime.datetime(2024, 2, 29, 23, 59, 58, 123456), Cast("7", "bigint")),
            (3, Decimal("1E+3"), "y", None, True, False, datetime.date(1970, 1, 1), datetime.datetime(2024, 1, 2),
             Cast(Decimal("-1.5"), "decimal(3,1)")),
        ),
        partition=spec(("ds", "2024-01-01", True)),
        columns=("a", "b", "c", "d", "e", "f", "g", "h", "i"))
    first = statement.rows[0]
    assert type(first[0]) is int and type(first[1]) is Decimal and type(first[4]) is bool


def test_insert_values_without_table_keyword_or_column_list():
    assert parse_statement("insert into t values (1), (2)") == InsertValues(T, ((1,), (2,)))


@pytest.mark.parametrize("literal, value", [
    ("0", 0), ("-0", 0), ("007", 7), ("12345678901234567890", 12345678901234567890),
    ("10L", 10), ("10s", 10), ("10Y", 10), ("10BD", Decimal("10")), ("1.5D", Decimal("1.5")),
    ("3.", Decimal("3")), ("0.1", Decimal("0.1")), ("-1E-2", Decimal("-0.01")), ("- 4", -4),
    ("TIMESTAMP '2024-01-02T03:04'", datetime.datetime(2024, 1, 2, 3, 4)),
    ("TIMESTAMP '2024-01-02 03:04:05.100000000'", datetime.datetime(2024, 1, 2, 3, 4, 5, 100000)),
    ("DATE '2024-1-2'", datetime.date(2024, 1, 2)),
    ("CAST(CAST(1 AS INT) AS STRING)", Cast(Cast(1, "int"), "string")),
    ("CAST(DATE '2024-01-01' AS TIMESTAMP)", Cast(datetime.date(2024, 1, 1), "timestamp")),
])
def test_number_and_temporal_literals(literal, value):
    assert parse_statement(f"INSERT INTO t VALUES ({literal})").rows == ((value,),)


@pytest.mark.parametrize("text, kind", [
    ("SELECT * FROM t", "SELECT"),
    ("select a from t where s = 'x;y'", "SELECT"),
    ("WITH x AS (SELECT 1) SELECT * FROM x", "WITH"),
    ("FROM s INSERT INTO t SELECT a", "FROM"),
    ("INSERT INTO t SELECT * FROM s", "INSERT INTO"),
    ("INSERT INTO TABLE t PARTITION (p) SELECT a, p FROM s", "INSERT INTO"),
    ("INSERT INTO t (a, b) SELECT x, y FROM s", "INSERT INTO"),
    ("INSERT INTO t SELECT * FROM (VALUES (1), (2)) v", "INSERT INTO"),
    ("INSERT OVERWRITE TABLE t SELECT 1", "INSERT OVERWRITE"),
    ("UPDATE t SET a = a + 1 WHERE b >= 2 AND c <> 'z'", "UPDATE"),
    ("DELETE FROM t WHERE a IS NULL", "DELETE"),
    ("MERGE INTO t USING s ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = s.v "
     "WHEN NOT MATCHED THEN INSERT VALUES (s.id, s.v)", "MERGE"),
])
def test_engine_statements_are_recognized_not_parsed(text, kind):
    statement = parse_statement(text)
    assert statement == EngineStatement(kind, text)
    assert kind in ENGINE_KINDS


def test_engine_statement_compares_by_text_and_other_statements_do_not():
    assert EngineStatement("SELECT", "select 1") != EngineStatement("SELECT", "select 2")
    assert parse_statement("show   transactions") == parse_statement("SHOW TRANSACTIONS")


# ---------------------------------------------------------------------------------------------------------------
# Lexical rules: case, backquotes, strings, comments, scripts


def test_keywords_are_case_insensitive_and_names_lowercased():
    assert parse_statement("aLtEr TaBlE DB.T cOmPaCt 'MaJoR' aNd WaIt") == AlterTableCompact(DB_T, "major", wait=True)
    assert parse_statement("Create Table `Db`.`T` (`A` Int)") == CreateTable(DB_T, (Column("a", "int"),))


def test_backquoted_names_may_hold_reserved_words_spaces_and_backquotes():
    statement = parse_statement("CREATE TABLE `table`.`my ``odd`` t` (`date` DATE, `select` INT, `2024` STRING)")
    assert statement.table == TableName("my `odd` t", database="table")
    assert [c.name for c in statement.columns] == ["date", "select", "2024"]


def test_names_may_start_with_a_digit_as_in_hive():
    assert parse_statement("DROP TABLE 2024_sales.1t") == DropTable(TableName("1t", database="2024_sales"))


def test_non_reserved_keywords_are_names():
    statement = parse_statement("CREATE TABLE pool (type STRING, status STRING, comment STRING COMMENT 'c', limit INT)")
    assert [c.name for c in statement.columns] == ["type", "status", "comment", "limit"]


@pytest.mark.parametrize("literal, value", [
    (r"'plain'", "plain"),
    (r'"double"', "double"),
    (r"'it\'s'", "it's"),
    (r'"say \"hi\""', 'say "hi"'),
    (r"'a\nb\tc\rd'", "a\nb\tc\rd"),
    (r"'back\\slash'", "back\\slash"),
    (r"'\0\Z\b'", "\0\x1a\b"),
    (r"'\u00e9t\u00E9'", "été"),
    (r"'\101\012'", "A\n"),
    (r"'like \% and \_'", "like \\% and \\_"),
    (r"'unknown \q escape'", "unknown q escape"),
    (r"'semi;colon -- not a comment /* nor this */'", "semi;colon -- not a comment /* nor this */"),
    ("'multi\nline'", "multi\nline"),
    (r"'it''s'", "its"),
    (r"'one'" + r'"two"', "onetwo"),
    ("''", ""),
])
def test_string_literals_unescape_as_hive(literal, value):
    assert parse_statement(f"SHOW DATABASES LIKE {literal}") == ShowDatabases(value)


def test_unescape_string_works_on_a_literal_body():
    assert unescape_string(r"a\'b\u0041\\") == "a'bA\\"
    assert unescape_string("no escapes") == "no escapes"


def test_adjacent_string_literals_need_no_space_to_join():
    assert parse_statement("INSERT INTO t VALUES ('a''b', 'c', 'd')").rows == (("ab", "c", "d"),)
    assert error_of("INSERT INTO t VALUES ('a' 'b')") == (
        "syntax error in \"INSERT INTO t VALUES ('a' 'b')\" at 1:26: expected ')' or ',', found 'b'")


def test_script_splits_on_semicolons_outside_strings_names_and_comments():
    script = """-- a script; with a comment holding ';'
CREATE DATABASE IF NOT EXISTS sales COMMENT 'a; b';
/* block comment; /* nested; */ still comment; */
USE `sa;les`;;
;
SELECT 'x;y', "z;" -- trailing; comment
FROM t;
SHOW TRANSACTIONS
"""
    statements = parse_script(script)
    assert statements == [
        CreateDatabase("sales", if_not_exists=True, comment="a; b"),
        UseDatabase("sa;les"),
        EngineStatement("SELECT", "SELECT 'x;y', \"z;\" -- trailing; comment\nFROM t"),
        ShowTransactions(),
    ]
    assert [s.text for s in statements] == [
        "CREATE DATABASE IF NOT EXISTS sales COMMENT 'a; b'",
        "USE `sa;les`",
        "SELECT 'x;y', \"z;\" -- trailing; comment\nFROM t",
        "SHOW TRANSACTIONS",
    ]
    assert all(isinstance(s, Statement) for s in statements)


@pytest.mark.parametrize("script", ["", "   \n\t", ";;;", "-- only a comment", "/* only */ ; -- comments"])
def test_scripts_without_statements_are_empty(script):
    assert parse_script(script) == []


def test_statement_text_keeps_inner_comments_and_newlines_only():
    statement = parse_statement("  /* lead */ SHOW /* inner */ LOCKS\n  t -- tail\n ;  ")
    assert statement == ShowLocks(table=T)
    assert statement.text == "SHOW /* inner */ LOCKS\n  t"


def test_windows_line_endings():
    statements = parse_script("SHOW TRANSACTIONS;\r\nSHOW LOCKS\r\n  EXTENDED;\r\n")
    assert statements == [ShowTransactions(), ShowLocks(extended=True)]
    assert statements[1].text == "SHOW LOCKS\r\n  EXTENDED"


def test_parse_statement_allows_one_trailing_semicolon():
    assert parse_statement("SHOW TRANSACTIONS ;") == ShowTransactions()


def test_tokenizer_kinds_and_offsets():
    tokens = list(tokenize("a.`b` = 'c' 1.5e3 2x -- x\n;"))
    assert [(t.kind, t.value, t.start, t.end) for t in tokens] == [
        (TokenKind.WORD, "a", 0, 1), (TokenKind.SYMBOL, ".", 1, 2), (TokenKind.QUOTED_NAME, "b", 2, 5),
        (TokenKind.SYMBOL, "=", 6, 7), (TokenKind.STRING, "c", 8, 11), (TokenKind.NUMBER, "1.5e3", 12, 17),
        (TokenKind.WORD, "2x", 18, 20), (TokenKind.SYMBOL, ";", 26, 27), (TokenKind.END, "", 27, 27),
    ]


def test_tokenize_error_is_a_usage_error_with_offset():
    with pytest.raises(TokenizeError) as info:
        list(tokenize("ab 'cd"))
    assert info.value.offset == 3
    assert isinstance(info.value, UsageError)


# ---------------------------------------------------------------------------------------------------------------
# Errors: exact messages


@pytest.mark.parametrize("text, message", [
    # the brief's example: end of input is positioned just after the last token
    ("CREATE TABLE t (a int",
     "syntax error in \"CREATE TABLE t (a int\" at 1:21: expected ')' or ',', found end of input"),
    ("CREATE TABLE t (a int, b string",
     "syntax error in \"CREATE TABLE t (a int, b string\" at 1:31: expected ')' or ',', found end of input"),
    ("CREATE TABLE t a int)",
     "syntax error in \"CREATE TABLE t a int)\" at 1:15: expected '(' after the table name, found 'a'"),
    ("CREATE TABLE t",
     "syntax error in \"CREATE TABLE t\" at 1:14: expected '(' after the table name, found end of input"),
    ("INSERT INTO t VALUES (1, 2",
     "syntax error in \"INSERT INTO t VALUES (1, 2\" at 1:26: expected ')' or ',', found end of input"),
    ("ALTER TABLE t SET TBLPROPERTIES 'a'='b'",
     "syntax error in \"ALTER TABLE t SET TBLPROPERTIES 'a'='b'\" at 1:32: expected '(' after TBLPROPERTIES, "
     "found 'a'"),
])
def test_missing_parenthesis(text, message):
    assert error_of(text) == message


@pytest.mark.parametrize("text, message", [
    ("INSERT INTO t VALUES ('abc",
     "syntax error in \"INSERT INTO t VALUES ('abc\" at 1:22: unterminated string literal: expected a closing ', "
     "found end of input"),
    ('SHOW DATABASES LIKE "ab\\"',
     "syntax error in \"SHOW DATABASES LIKE \"ab\\\"\" at 1:20: unterminated string literal: expected a closing \", "
     "found end of input"),
    ("SHOW TRANSACTIONS;\nUSE `db",
     "syntax error in \"USE `db\" at 2:4: unterminated quoted name: expected a closing `, found end of input"),
    ("SHOW TRANSACTIONS /* never closed",
     "syntax error in \"SHOW TRANSACTIONS /* never closed\" at 1:18: unterminated comment: expected */, "
     "found end of input"),
    ("/* a /* nested */ comment",
     "syntax error in \"/* a /* nested */ comment\" at 1:0: unterminated comment: expected */, found end of input"),
])
def test_unterminated_tokens(text, message):
    assert error_of(text) == message


@pytest.mark.parametrize("text, message", [
    ("FOO BAR",
     "syntax error in \"FOO BAR\" at 1:0: expected a statement (CREATE, DROP, ALTER, SHOW, DESCRIBE, USE, INSERT, "
     "ABORT, SELECT, WITH, FROM, UPDATE, DELETE, MERGE), found 'FOO'"),
    ("SET hive.support.concurrency=true",
     "syntax error in \"SET hive.support.concurrency=true\" at 1:0: expected a statement (CREATE, DROP, ALTER, SHOW, "
     "DESCRIBE, USE, INSERT, ABORT, SELECT, WITH, FROM, UPDATE, DELETE, MERGE), found 'SET'"),
    ("(SELECT 1)",
     "syntax error in \"(SELECT 1)\" at 1:0: expected a statement (CREATE, DROP, ALTER, SHOW, DESCRIBE, USE, INSERT, "
     "ABORT, SELECT, WITH, FROM, UPDATE, DELETE, MERGE), found '('"),
    ("SHOW FUNCTIONS",
     "syntax error in \"SHOW FUNCTIONS\" at 1:5: expected TRANSACTIONS, LOCKS, COMPACTIONS, DATABASES, SCHEMAS, "
     "TABLES, PARTITIONS or TBLPROPERTIES, found 'FUNCTIONS'"),
    ("CREATE VIEW v AS SELECT 1",
     "syntax error in \"CREATE VIEW v AS SELECT 1\" at 1:7: expected DATABASE, SCHEMA or TABLE, found 'VIEW'"),
    ("CREATE EXTERNAL TABLE t (a int)",
     "syntax error in \"CREATE EXTERNAL TABLE t (a int)\" at 1:7: expected DATABASE, SCHEMA or TABLE, "
     "found 'EXTERNAL'"),
    ("ALTER DATABASE d SET DBPROPERTIES ('a'='b')",
     "syntax error in \"ALTER DATABASE d SET DBPROPERTIES ('a'='b')\" at 1:6: expected TABLE, found 'DATABASE'"),
    ("ALTER TABLE t RENAME TO u",
     "syntax error in \"ALTER TABLE t RENAME TO u\" at 1:14: expected SET, UNSET, COMPACT or PARTITION, "
     "found 'RENAME'"),
    ("ABORT QUERY 'q'",
     "syntax error in \"ABORT QUERY 'q'\" at 1:6: expected TRANSACTIONS or COMPACTIONS, found 'QUERY'"),
    ("INSERT t VALUES (1)",
     "syntax error in \"INSERT t VALUES (1)\" at 1:7: expected INTO or OVERWRITE, found 't'"),
])
def test_unknown_statements(text, message):
    assert error_of(text) == message


@pytest.mark.parametrize("text, message", [
    ("ALTER TABLE t COMPACT 'medium'",
     "syntax error in \"ALTER TABLE t COMPACT 'medium'\" at 1:22: expected compaction type 'major', 'minor' or "
     "'rebalance', found 'medium'"),
    ("ALTER TABLE t COMPACT 'rebalance' ORDER BY id",
     "syntax error in \"ALTER TABLE t COMPACT 'rebalance' ORDER BY id\" at 1:40: ORDER BY in a compaction request is "
     "not supported: a rebalance keeps every row's write id, so rows stay in ROW__ID order"),
    ("ALTER TABLE t COMPACT 'rebalance' CLUSTERED INTO 0 BUCKETS",
     "syntax error in \"ALTER TABLE t COMPACT 'rebalance' CLUSTERED INTO 0 BUCKETS\" at 1:49: a rebalance "
     "compaction takes 1..4096 buckets, got 0"),
    ("ALTER TABLE t COMPACT major",
     "syntax error in \"ALTER TABLE t COMPACT major\" at 1:22: expected compaction type 'major', 'minor' or "
     "'rebalance', found 'major'"),
    ("ALTER TABLE t COMPACT",
     "syntax error in \"ALTER TABLE t COMPACT\" at 1:21: expected compaction type 'major', 'minor' or "
     "'rebalance', found end of input"),
    ("ALTER TABLE t COMPACT 'major' POOL 'p' AND WAIT",
     "syntax error in \"ALTER TABLE t COMPACT 'major' POOL 'p' AND WAIT\" at 1:39: expected WITH OVERWRITE "
     "TBLPROPERTIES, ORDER BY or end of statement, found 'AND'"),
    ("ALTER TABLE t COMPACT 'major' WITH OVERWRITE TBLPROPERTIES ('a'='b') POOL 'p'",
     "syntax error in \"ALTER TABLE t COMPACT 'major' WITH OVERWRITE TBLPROPERTIES ('a'='b') POOL 'p'\" at 1:69: "
     "expected ORDER BY or end of statement, found 'POOL'"),
    ("ALTER TABLE t COMPACT 'rebalance' POOL 'p' ORDER BY id",  # Hive's place for ORDER BY: refused there too
     "syntax error in \"ALTER TABLE t COMPACT 'rebalance' POOL 'p' ORDER BY id\" at 1:49: ORDER BY in a compaction "
     "request is not supported: a rebalance keeps every row's write id, so rows stay in ROW__ID order"),
    ("ALTER TABLE t COMPACT 'major' AND",
     "syntax error in \"ALTER TABLE t COMPACT 'major' AND\" at 1:33: expected WAIT, found end of input"),
    ("ALTER TABLE t COMPACT 'major' CLUSTERED INTO 4 BUCKETS",
     "syntax error in \"ALTER TABLE t COMPACT 'major' CLUSTERED INTO 4 BUCKETS\" at 1:45: CLUSTERED INTO 4 BUCKETS "
     "applies to a 'rebalance' compaction only"),
    ("ALTER TABLE t COMPACT 'major' POOL etl",
     "syntax error in \"ALTER TABLE t COMPACT 'major' POOL etl\" at 1:35: expected a pool name (a string literal) "
     "after POOL, found 'etl'"),
    ("ALTER TABLE t PARTITION (p=1) SET TBLPROPERTIES ('a'='b')",
     "syntax error in \"ALTER TABLE t PARTITION (p=1) SET TBLPROPERTIES ('a'='b')\" at 1:30: expected COMPACT, "
     "found 'SET'"),
])
def test_compaction_errors(text, message):
    assert error_of(text) == message


@pytest.mark.parametrize("text, message", [
    ("CREATE TABLE t (a int(3))",
     "syntax error in \"CREATE TABLE t (a int(3))\" at 1:21: type int does not take parameters, found '('"),
    ("CREATE TABLE t (a string(10))",
     "syntax error in \"CREATE TABLE t (a string(10))\" at 1:24: type string does not take parameters, found '('"),
    ("CREATE TABLE t (a varchar)",
     "syntax error in \"CREATE TABLE t (a varchar)\" at 1:25: expected '(' after varchar (varchar needs a length, as "
     "in varchar(10)), found ')'"),
    ("CREATE TABLE t (a char, b int)",
     "syntax error in \"CREATE TABLE t (a char, b int)\" at 1:22: expected '(' after char (char needs a length, as "
     "in char(10)), found ','"),
    ("CREATE TABLE t (a varchar(0))",
     "syntax error in \"CREATE TABLE t (a varchar(0))\" at 1:26: varchar length 0 is outside the allowed range "
     "1..65535"),
    ("CREATE TABLE t (a varchar(65536))",
     "syntax error in \"CREATE TABLE t (a varchar(65536))\" at 1:26: varchar length 65536 is outside the allowed "
     "range 1..65535"),
    ("CREATE TABLE t (a char(256))",
     "syntax error in \"CREATE TABLE t (a char(256))\" at 1:23: char length 256 is outside the allowed range 1..255"),
    ("CREATE TABLE t (a decimal(39))",
     "syntax error in \"CREATE TABLE t (a decimal(39))\" at 1:26: decimal precision 39 is outside the allowed range "
     "1..38"),
    ("CREATE TABLE t (a decimal(0,0))",
     "syntax error in \"CREATE TABLE t (a decimal(0,0))\" at 1:26: decimal precision 0 is outside the allowed range "
     "1..38"),
    ("CREATE TABLE t (a decimal(5,6))",
     "syntax error in \"CREATE TABLE t (a decimal(5,6))\" at 1:28: decimal scale 6 is larger than the precision 5"),
    ("CREATE TABLE t (a decimal(5.5))",
     "syntax error in \"CREATE TABLE t (a decimal(5.5))\" at 1:26: expected a decimal precision, found 5.5"),
    ("CREATE TABLE t (a decimal(5,2)",
     "syntax error in \"CREATE TABLE t (a decimal(5,2)\" at 1:30: expected ')' or ',', found end of input"),
    ("CREATE TABLE t (a text)",
     "syntax error in \"CREATE TABLE t (a text)\" at 1:18: expected a column type, found 'text'"),
    ("CREATE TABLE t (a)",
     "syntax error in \"CREATE TABLE t (a)\" at 1:17: expected a column type, found ')'"),
    ("CREATE TABLE t (a datetime)",
     "syntax error in \"CREATE TABLE t (a datetime)\" at 1:18: expected a column type, found 'datetime'"),
    ("CREATE TABLE t (a array<int)",
     "syntax error in \"CREATE TABLE t (a array<int)\" at 1:27: expected '>' after array<int, found ')'"),
    ("CREATE TABLE t (a array(int))",
     "syntax error in \"CREATE TABLE t (a array(int))\" at 1:23: expected '<' after array, found '('"),
    ("CREATE TABLE t (a map<string>)",
     "syntax error in \"CREATE TABLE t (a map<string>)\" at 1:28: expected ',' after map<string, found '>'"),
    ("CREATE TABLE t (a map<array<int>,int>)",
     "syntax error in \"CREATE TABLE t (a map<array<int>,int>)\" at 1:22: map key type array<int> is not a "
     "primitive type"),
    ("CREATE TABLE t (a struct<x int>)",
     "syntax error in \"CREATE TABLE t (a struct<x int>)\" at 1:27: expected ':' after struct field 'x', "
     "found 'int'"),
    ("CREATE TABLE t (a struct<x:int,X:string>)",
     "syntax error in \"CREATE TABLE t (a struct<x:int,X:string>)\" at 1:31: struct field 'x' is given twice"),
    ("CREATE TABLE t (a struct<x:int;y:int>)",
     "syntax error in \"CREATE TABLE t (a struct<x:int\" at 1:30: expected '>' or ',', found end of input"),
])
def test_type_errors(text, message):
    assert error_of(text) == message


@pytest.mark.parametrize("text, message", [
    ("CREATE TABLE t (a int, A string)",
     "syntax error in \"CREATE TABLE t (a int, A string)\" at 1:23: duplicate column name 'a'"),
    ("CREATE TABLE t (`a` int, a string)",
     "syntax error in \"CREATE TABLE t (`a` int, a string)\" at 1:25: duplicate column name 'a'"),
    ("CREATE TABLE t (a int) PARTITIONED BY (a string)",
     "syntax error in \"CREATE TABLE t (a int) PARTITIONED BY (a string)\" at 1:39: duplicate column name 'a': a "
     "partition column cannot have the name of a data column"),
    ("CREATE TABLE t (a int) PARTITIONED BY (p string, P int)",
     "syntax error in \"CREATE TABLE t (a int) PARTITIONED BY (p string, P int)\" at 1:49: duplicate column name 'p'"),
    ("CREATE TABLE t (a int) PARTITIONED BY (p map<string,int>)",
     "syntax error in \"CREATE TABLE t (a int) PARTITIONED BY (p map<string,int>)\" at 1:39: partition column 'p' "
     "has type map<string,int>; partition columns must have a primitive type"),
    ("CREATE TABLE t (a int) CLUSTERED BY (b) INTO 2 BUCKETS",
     "syntax error in \"CREATE TABLE t (a int) CLUSTERED BY (b) INTO 2 BUCKETS\" at 1:37: bucketing column 'b' is "
     "not a column of the table (columns: a)"),
    ("CREATE TABLE t (a int) CLUSTERED BY (a, a) INTO 2 BUCKETS",
     "syntax error in \"CREATE TABLE t (a int) CLUSTERED BY (a, a) INTO 2 BUCKETS\" at 1:40: column 'a' is given "
     "twice"),
    ("CREATE TABLE t (a int) CLUSTERED BY (a) INTO 0 BUCKETS",
     "syntax error in \"CREATE TABLE t (a int) CLUSTERED BY (a) INTO 0 BUCKETS\" at 1:45: the number of buckets must "
     "be at least 1"),
    ("CREATE TABLE t (a int) CLUSTERED BY (a) SORTED BY (a) INTO 2 BUCKETS",
     "syntax error in \"CREATE TABLE t (a int) CLUSTERED BY (a) SORTED BY (a) INTO 2 BUCKETS\" at 1:40: expected "
     "INTO, found 'SORTED'"),
    ("CREATE TABLE t (a int) STORED AS PARQUET",
     "syntax error in \"CREATE TABLE t (a int) STORED AS PARQUET\" at 1:33: expected ORC, found 'PARQUET' "
     "(transactional tables are stored as ORC)"),
    ("create table t (a int) stored as textfile",
     "syntax error in \"create table t (a int) stored as textfile\" at 1:33: expected ORC, found 'textfile' "
     "(transactional tables are stored as ORC)"),
    ("CREATE TABLE t (a int) LOCATION '/x' COMMENT 'late'",
     "syntax error in \"CREATE TABLE t (a int) LOCATION '/x' COMMENT 'late'\" at 1:37: expected TBLPROPERTIES or end "
     "of statement, found 'COMMENT'"),
    ("CREATE TABLE t (a int) ROW FORMAT DELIMITED",
     "syntax error in \"CREATE TABLE t (a int) ROW FORMAT DELIMITED\" at 1:23: expected COMMENT, PARTITIONED BY, "
     "CLUSTERED BY, STORED AS, LOCATION, TBLPROPERTIES or end of statement, found 'ROW'"),
    ("CREATE TABLE t (a int) AS SELECT 1",
     "syntax error in \"CREATE TABLE t (a int) AS SELECT 1\" at 1:23: expected COMMENT, PARTITIONED BY, CLUSTERED BY, "
     "STORED AS, LOCATION, TBLPROPERTIES or end of statement, found 'AS'"),
    ("CREATE TABLE t (a int) TBLPROPERTIES ('a'='1', 'a'='2')",
     "syntax error in \"CREATE TABLE t (a int) TBLPROPERTIES ('a'='1', 'a'='2')\" at 1:47: property 'a' is given "
     "twice"),
    ("CREATE TABLE t (a int) TBLPROPERTIES ('transactional'=true)",
     "syntax error in \"CREATE TABLE t (a int) TBLPROPERTIES ('transactional'=true)\" at 1:54: expected a string "
     "value for property 'transactional', found 'true'"),
    ("CREATE TABLE t (a int) TBLPROPERTIES (transactional='true')",
     "syntax error in \"CREATE TABLE t (a int) TBLPROPERTIES (transactional='true')\" at 1:38: expected a property "
     "key (a string literal), found 'transactional'"),
    ("CREATE TABLE t (date date)",
     "syntax error in \"CREATE TABLE t (date date)\" at 1:16: expected a column name, found reserved word 'date' "
     "(write `date` to use it as a name)"),
    ("CREATE TABLE table (a int)",
     "syntax error in \"CREATE TABLE table (a int)\" at 1:13: expected a table name, found reserved word 'table' "
     "(write `table` to use it as a name)"),
    ("CREATE TABLE `` (a int)",
     "syntax error in \"CREATE TABLE `` (a int)\" at 1:13: expected a table name, found an empty quoted name ``"),
    ("CREATE TABLE db. (a int)",
     "syntax error in \"CREATE TABLE db. (a int)\" at 1:17: expected a table name after '.', found '('"),
    ("CREATE TABLE 'db.t' (a int)",
     "syntax error in \"CREATE TABLE 'db.t' (a int)\" at 1:13: expected a table name, found 'db.t'"),
    ("CREATE TABLE IF EXISTS t (a int)",
     "syntax error in \"CREATE TABLE IF EXISTS t (a int)\" at 1:16: expected NOT, found 'EXISTS'"),
    ("CREATE DATABASE d LOCATION '/a' COMMENT 'c'",
     "syntax error in \"CREATE DATABASE d LOCATION '/a' COMMENT 'c'\" at 1:32: expected WITH DBPROPERTIES or end of "
     "statement, found 'COMMENT'"),
])
def test_create_errors(text, message):
    assert error_of(text) == message


@pytest.mark.parametrize("text, message", [
    ("SHOW COMPACTIONS LIMIT -1",
     "syntax error in \"SHOW COMPACTIONS LIMIT -1\" at 1:23: expected a non-negative integer after LIMIT, found '-'"),
    ("SHOW COMPACTIONS LIMIT 2.5",
     "syntax error in \"SHOW COMPACTIONS LIMIT 2.5\" at 1:23: expected a non-negative integer after LIMIT, "
     "found 2.5"),
    ("SHOW COMPACTIONS LIMIT ten",
     "syntax error in \"SHOW COMPACTIONS LIMIT ten\" at 1:23: expected a non-negative integer after LIMIT, "
     "found 'ten'"),
    ("SHOW COMPACTIONS COMPACTIONID 5",
     "syntax error in \"SHOW COMPACTIONS COMPACTIONID 5\" at 1:30: expected '=' after COMPACTIONID, found 5"),
    ("SHOW COMPACTIONS COMPACTIONID = 5 LIMIT 1",
     "syntax error in \"SHOW COMPACTIONS COMPACTIONID = 5 LIMIT 1\" at 1:34: expected end of statement, "
     "found 'LIMIT'"),
    ("SHOW COMPACTIONS LIMIT 1 POOL 'p'",
     "syntax error in \"SHOW COMPACTIONS LIMIT 1 POOL 'p'\" at 1:25: expected end of statement, found 'POOL'"),
    ("SHOW COMPACTIONS STATUS 'x' TYPE 'major'",
     "syntax error in \"SHOW COMPACTIONS STATUS 'x' TYPE 'major'\" at 1:28: expected ORDER BY, LIMIT or end of "
     "statement, found 'TYPE'"),
    ("SHOW COMPACTIONS ORDER enqueuetime",
     "syntax error in \"SHOW COMPACTIONS ORDER enqueuetime\" at 1:23: expected BY, found 'enqueuetime'"),
    ("SHOW COMPACTIONS DATABASE db PARTITION (p=1)",
     "syntax error in \"SHOW COMPACTIONS DATABASE db PARTITION (p=1)\" at 1:29: expected POOL, TYPE, STATUS, "
     "ORDER BY, LIMIT or end of statement, found 'PARTITION'"),
    ("SHOW COMPACTIONS t PARTITION (p)",
     "syntax error in \"SHOW COMPACTIONS t PARTITION (p)\" at 1:31: expected '=' after partition column 'p', "
     "found ')'"),
    ("SHOW COMPACTIONS t PARTITION (p=1, p=2)",
     "syntax error in \"SHOW COMPACTIONS t PARTITION (p=1, p=2)\" at 1:35: partition column 'p' is given twice"),
    ("SHOW COMPACTIONS t PARTITION (p=x)",
     "syntax error in \"SHOW COMPACTIONS t PARTITION (p=x)\" at 1:32: expected a partition value (a string or a "
     "number), found 'x'"),
    ("SHOW COMPACTIONS t PARTITION (p='')",
     "syntax error in \"SHOW COMPACTIONS t PARTITION (p='')\" at 1:32: partition value for 'p' is empty"),
    ("SHOW LOCKS DATABASE",
     "syntax error in \"SHOW LOCKS DATABASE\" at 1:19: expected a database name, found end of input"),
    ("SHOW LOCKS t EXTENDED PARTITION (p=1)",
     "syntax error in \"SHOW LOCKS t EXTENDED PARTITION (p=1)\" at 1:22: expected end of statement, "
     "found 'PARTITION'"),
    ("SHOW LOCKS t x",
     "syntax error in \"SHOW LOCKS t x\" at 1:13: expected PARTITION, EXTENDED or end of statement, found 'x'"),
    ("SHOW TRANSACTIONS t",
     "syntax error in \"SHOW TRANSACTIONS t\" at 1:18: expected end of statement, found 't'"),
    ("ABORT TRANSACTIONS",
     "syntax error in \"ABORT TRANSACTIONS\" at 1:18: expected a transaction id, found end of input"),
    ("ABORT TRANSACTIONS 1, 2",
     "syntax error in \"ABORT TRANSACTIONS 1, 2\" at 1:20: expected a transaction id, found ','"),
    ("ABORT COMPACTIONS -3",
     "syntax error in \"ABORT COMPACTIONS -3\" at 1:18: expected a compaction id, found '-'"),
    ("DROP TABLE t CASCADE",
     "syntax error in \"DROP TABLE t CASCADE\" at 1:13: expected PURGE or end of statement, found 'CASCADE'"),
    ("DROP DATABASE d PURGE",
     "syntax error in \"DROP DATABASE d PURGE\" at 1:16: expected RESTRICT, CASCADE or end of statement, "
     "found 'PURGE'"),
    ("USE",
     "syntax error in \"USE\" at 1:3: expected a database name, found end of input"),
    ("USE a.b",
     "syntax error in \"USE a.b\" at 1:5: expected end of statement, found '.'"),
    ("ALTER TABLE t UNSET TBLPROPERTIES ('a', 'a')",
     "syntax error in \"ALTER TABLE t UNSET TBLPROPERTIES ('a', 'a')\" at 1:40: property 'a' is given twice"),
    ("ALTER TABLE t SET TBLPROPERTIES ()",
     "syntax error in \"ALTER TABLE t SET TBLPROPERTIES ()\" at 1:33: expected a property key (a string literal), "
     "found ')'"),
    ("ALTER TABLE t SET TBLPROPERTIES ('a' 'b')",
     "syntax error in \"ALTER TABLE t SET TBLPROPERTIES ('a' 'b')\" at 1:37: expected '=' after property key 'a', "
     "found 'b'"),
    ("DESCRIBE",
     "syntax error in \"DESCRIBE\" at 1:8: expected a table name, found end of input"),
])
def test_show_and_other_errors(text, message):
    assert error_of(text) == message


@pytest.mark.parametrize("text, message", [
    ("INSERT INTO t VALUES (1), (1, 2)",
     "syntax error in \"INSERT INTO t VALUES (1), (1, 2)\" at 1:26: row 2 has 2 values but row 1 has 1"),
    ("INSERT INTO t (a, b) VALUES (1)",
     "syntax error in \"INSERT INTO t (a, b) VALUES (1)\" at 1:28: row 1 has 1 values but the column list names 2"),
    ("INSERT INTO t (a, A) VALUES (1, 2)",
     "syntax error in \"INSERT INTO t (a, A) VALUES (1, 2)\" at 1:18: column 'a' is given twice"),
    ("INSERT INTO t VALUES 1, 2",
     "syntax error in \"INSERT INTO t VALUES 1, 2\" at 1:21: expected '(' after VALUES, found 1"),
    ("INSERT INTO t VALUES (1), 2",
     "syntax error in \"INSERT INTO t VALUES (1), 2\" at 1:26: expected '(' after ',', found 2"),
    ("INSERT INTO t VALUES ()",
     "syntax error in \"INSERT INTO t VALUES ()\" at 1:22: expected a literal value, found ')'"),
    ("INSERT INTO t VALUES (upper('a'))",
     "syntax error in \"INSERT INTO t VALUES (upper('a'))\" at 1:22: expected a literal value, found 'upper' "
     "(VALUES takes literals only; use INSERT INTO ... SELECT for expressions)"),
    ("INSERT INTO t VALUES (1 + 2)",
     "syntax error in \"INSERT INTO t VALUES (1 + 2)\" at 1:24: expected ')' or ',', found '+'"),
    ("INSERT INTO t VALUES (-'1')",
     "syntax error in \"INSERT INTO t VALUES (-'1')\" at 1:22: expected a literal value, found '-'"),
    ("INSERT INTO t VALUES (1.5L)",
     "syntax error in \"INSERT INTO t VALUES (1.5L)\" at 1:25: expected ')' or ',', found 'L'"),
    ("INSERT INTO t VALUES (DATE 20240101)",
     "syntax error in \"INSERT INTO t VALUES (DATE 20240101)\" at 1:27: expected a string literal after DATE, "
     "found 20240101"),
    ("INSERT INTO t VALUES (DATE '2024-02-30')",
     "syntax error in \"INSERT INTO t VALUES (DATE '2024-02-30')\" at 1:27: invalid DATE literal '2024-02-30': day "
     "is out of range for month"),
    ("INSERT INTO t VALUES (DATE '01/02/2024')",
     "syntax error in \"INSERT INTO t VALUES (DATE '01/02/2024')\" at 1:27: expected a date as 'yyyy-mm-dd' after "
     "DATE, found '01/02/2024'"),
    ("INSERT INTO t VALUES (TIMESTAMP '2024-01-01 25:00:00')",
     "syntax error in \"INSERT INTO t VALUES (TIMESTAMP '2024-01-01 25:00:00')\" at 1:32: invalid TIMESTAMP literal "
     "'2024-01-01 25:00:00': hour must be in 0..23"),
    ("INSERT INTO t VALUES (TIMESTAMP '2024-01-01 00:00:00.1234567')",
     "syntax error in \"INSERT INTO t VALUES (TIMESTAMP '2024-01-01 00:00:00.1234567')\" at 1:32: TIMESTAMP literal "
     "'2024-01-01 00:00:00.1234567' is more precise than a microsecond, which is the finest this tool keeps"),
    ("INSERT INTO t VALUES (TIMESTAMP 'now')",
     "syntax error in \"INSERT INTO t VALUES (TIMESTAMP 'now')\" at 1:32: expected a timestamp as 'yyyy-mm-dd "
     "hh:mm:ss[.fffffffff]' after TIMESTAMP, found 'now'"),
    ("INSERT INTO t VALUES (CAST(1 INT))",
     "syntax error in \"INSERT INTO t VALUES (CAST(1 INT))\" at 1:29: expected AS, found 'INT'"),
    ("INSERT INTO t VALUES (CAST(1 AS varchar))",
     "syntax error in \"INSERT INTO t VALUES (CAST(1 AS varchar))\" at 1:39: expected '(' after varchar (varchar "
     "needs a length, as in varchar(10)), found ')'"),
    ("INSERT INTO t VALUES (CAST(1 AS int)",
     "syntax error in \"INSERT INTO t VALUES (CAST(1 AS int)\" at 1:36: expected ')' or ',', found end of input"),
    ("INSERT INTO t",
     "syntax error in \"INSERT INTO t\" at 1:13: expected PARTITION, '(', VALUES or a query, found end of input"),
    ("INSERT INTO t PARTITION (p='x')",
     "syntax error in \"INSERT INTO t PARTITION (p='x')\" at 1:31: expected '(', VALUES or a query, found end of "
     "input"),
    ("INSERT INTO t PARTITION (p='x') (a) VALUE (1)",
     "syntax error in \"INSERT INTO t PARTITION (p='x') (a) VALUE (1)\" at 1:36: expected VALUES or a query, "
     "found 'VALUE'"),
    ("INSERT INTO t PARTITION (p) VALUES (1)",
     "syntax error in \"INSERT INTO t PARTITION (p) VALUES (1)\" at 1:26: expected '=' after partition column 'p', "
     "found ')'"),
])
def test_insert_errors(text, message):
    assert error_of(text) == message


def test_error_in_a_script_names_that_statement_with_script_positions():
    script = "SHOW TRANSACTIONS;\n-- next one is wrong\nALTER TABLE t\n  COMPACT 'huge';\nSHOW LOCKS"
    with pytest.raises(HiveQLSyntaxError) as info:
        parse_script(script)
    error = info.value
    assert str(error) == ("syntax error in \"ALTER TABLE t COMPACT 'huge'\" at 4:10: expected compaction type 'major', "
                          "'minor' or 'rebalance', found 'huge'")
    assert (error.line, error.column) == (4, 10)
    assert error.statement == "ALTER TABLE t\n  COMPACT 'huge'"
    assert error.detail == "expected compaction type 'major', 'minor' or 'rebalance', found 'huge'"


def test_the_first_bad_statement_in_script_order_is_reported():
    assert error_of("USE;\nSHOW COMPACTIONS LIMIT 'x';\nSELECT 'unterminated") == (
        "syntax error in \"USE\" at 1:3: expected a database name, found end of input")


def test_long_statements_are_abbreviated_in_messages():
    columns = ", ".join(f"column_{i} int" for i in range(20))
    message = error_of(f"CREATE TABLE t ({columns}, bad)")
    quoted = message.split('"')[1]
    assert quoted == "CREATE TABLE t (column_0 int, column_1 int, column_2 int, column_3 int, colum..."
    assert len(quoted) == 80
    assert message.endswith("expected a column type, found ')'")


def test_parse_statement_needs_exactly_one_statement():
    with pytest.raises(HiveQLSyntaxError) as info:
        parse_statement("  -- nothing\n")
    assert str(info.value) == 'syntax error in "-- nothing" at 2:0: expected a statement, found end of input'
    with pytest.raises(HiveQLSyntaxError) as info:
        parse_statement("SHOW LOCKS; SHOW TRANSACTIONS")
    assert str(info.value) == ('syntax error in "SHOW LOCKS; SHOW TRANSACTIONS" at 1:12: expected end of input '
                               "after ';', found 'SHOW'")


def test_syntax_error_is_a_usage_error():
    with pytest.raises(UsageError):
        parse_statement("nonsense")
    assert issubclass(HiveQLSyntaxError, AcidError)


def test_statements_are_frozen_and_hashable():
    statement = parse_statement("ALTER TABLE t PARTITION (p='x') COMPACT 'major' "
                                "WITH OVERWRITE TBLPROPERTIES ('a'='b')")
    with pytest.raises(AttributeError):
        statement.wait = True
    assert hash(statement) == hash(AlterTableCompact(T, "major", partition=spec(("p", "x", True)),
                                                     properties=(("a", "b"),)))
    assert statement.partition.to_dict() == {"p": "x"}
    assert str(DB_T) == "db.t" and str(T) == "t"
    assert T.qualified("sales") == "sales.t" and DB_T.qualified("sales") == "db.t"


def test_partition_values_remember_quoting_and_keep_text():
    statement = parse_statement("SHOW LOCKS t PARTITION (a='01', b=01, c=-2, d=1.50, `E`=\"x y\")")
    assert statement.partition == spec(("a", "01", True), ("b", "01", False), ("c", "-2", False),
                                       ("d", "1.50", False), ("e", "x y", True))
