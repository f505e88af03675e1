"""Partition pruning without Spark: which of a table's partitions a condition can hold in (acid_core.read.pruning), read
from Spark SQL text (spark_jobs.pruning) and from the query blocks of an `acid sql` statement (acid_cli.hiveql).

What Spark then reads, and that the answers are right, is in tests/spark_jobs/test_partition_pruning_spark.py.
"""

from __future__ import annotations

import datetime

import pytest

from acid_cli.hiveql.ast import SparkDelete, SparkMerge, SparkQuery, SparkUpdate, TableName
from acid_cli.hiveql.spark_sql import parse_engine_statement
from acid_core.errors import UsageError
from acid_core.format.layout import DEFAULT_PARTITION_NAME
from acid_core.read.pruning import AllOf, AnyOf, Comparison, Literal, PartitionPruner, all_of, any_of
from spark_jobs.pruning import condition_predicate

FIRST_DAY = datetime.date(2026, 1, 1)
DAYS = [str(FIRST_DAY + datetime.timedelta(days=offset)) for offset in range(200)]  # 2026-01-01 .. 2026-07-19
DAY_PARTITIONS = [{"day": day} for day in DAYS] + [{"day": DEFAULT_PARTITION_NAME}]


def kept(condition: str, partitions=DAY_PARTITIONS, *, key_types=None, qualifiers=("t",),
         unqualified: bool = True) -> list[str]:
    """The partitions (as `k=v/...`) a condition's predicate keeps."""
    pruner = PartitionPruner(condition_predicate(condition, qualifiers=qualifiers, unqualified=unqualified),
                             key_types or {"day": "date"})
    return ["/".join(f"{k}={v}" for k, v in spec.items()) for spec in partitions if pruner.matches(spec)]


EVERY_DAY = [f"day={day}" for day in DAYS] + [f"day={DEFAULT_PARTITION_NAME}"]


# ---------------------------------------------------------------------------------------------------------------
# =, IN, ranges and their AND / OR


@pytest.mark.parametrize("condition", [
    "day = '2026-03-01'", "'2026-03-01' = day", "t.day = '2026-03-01'", "day = DATE '2026-03-01'",
    "day = CAST('2026-03-01' AS DATE)", "(day = '2026-03-01')", "day IN ('2026-03-01')",
    "day BETWEEN '2026-03-01' AND '2026-03-01'", "id > 5 AND day = '2026-03-01'",
    "day = '2026-03-01' AND (name = 'x' OR amount > 2)", "day >= '2026-03-01' AND day < '2026-03-02'",
])
def test_one_partition_of_200_is_kept(condition):
    assert kept(condition) == ["day=2026-03-01"]


@pytest.mark.parametrize("condition, expected", [
    ("day IN ('2026-03-01', '2026-01-05', '2031-01-01')", ["2026-01-05", "2026-03-01"]),
    ("day < '2026-01-03'", ["2026-01-01", "2026-01-02"]),
    ("day <= '2026-01-03'", ["2026-01-01", "2026-01-02", "2026-01-03"]),
    ("day > '2026-07-17'", ["2026-07-18", "2026-07-19"]),
    ("day >= '2026-07-18'", ["2026-07-18", "2026-07-19"]),
    ("'2026-01-02' >= day", ["2026-01-01", "2026-01-02"]),  # the literal first: read the other way round
    ("day BETWEEN '2026-02-27' AND '2026-03-02'", ["2026-02-27", "2026-02-28", "2026-03-01", "2026-03-02"]),
    ("day = '2026-01-01' OR day = '2026-07-19'", ["2026-01-01", "2026-07-19"]),
    ("(day = '2026-01-01' OR day > '2026-07-18') AND id = 3", ["2026-01-01", "2026-07-19"]),
    ("day > '2026-07-18' AND day < '2026-01-02'", []),
    ("day = '2027-01-01'", []),
])
def test_in_ranges_and_combinations(condition, expected):
    assert kept(condition) == [f"day={day}" for day in expected]


def test_hives_default_partition_holds_null_which_no_comparison_matches():
    default = f"day={DEFAULT_PARTITION_NAME}"
    assert default not in kept("day < '2099-01-01'") and default not in kept("day IN ('2026-01-01')")
    assert default in kept("id = 1")  # nothing known of day: kept


# ---------------------------------------------------------------------------------------------------------------
# What cannot be read (or is not sure) keeps every partition


@pytest.mark.parametrize("condition", [
    "day = '2026-03-01' OR id = 5",  # OR with a column that is not a partition column
    "upper(day) = '2026-03-01'", "date_add(day, 1) = '2026-03-02'", "cast(day AS string) = '2026-03-01'",  # functions
    "NOT day = '2026-03-01'", "day <> '2026-03-01'", "day != '2026-03-01'", "day NOT IN ('2026-03-01')",
    "day NOT BETWEEN '2026-01-01' AND '2026-07-18'", "day <=> '2026-03-01'",
    "day IN (SELECT d FROM other)", "day = (SELECT max(d) FROM other)", "day = other_column", "day = NULL",
    "day IS NULL", "day = '2026-03-' || '01'", "day = 'it''s'",  # adjacent string pieces: Spark reads them otherwise
    "day = '2026\\-03-01'",  # a backslash escape
    "s.day = '2026-03-01'",  # another table's column
    "this is not ((( sql", "", "id > 5",
])
def test_predicates_that_cannot_be_read_keep_every_partition(condition):
    assert kept(condition) == EVERY_DAY


def test_unqualified_columns_are_the_tables_only_when_the_caller_says_so():
    assert kept("day = '2026-03-01'", unqualified=False) == EVERY_DAY  # MERGE's ON: two tables in scope
    assert kept("t.day = '2026-03-01' AND t.id = s.id", unqualified=False) == ["day=2026-03-01"]
    assert kept("T.DAY = '2026-03-01'", qualifiers=("t",)) == ["day=2026-03-01"]  # Spark's names ignore case


# ---------------------------------------------------------------------------------------------------------------
# Values compared as the partition column's type


def test_integer_partition_columns_compare_numbers():
    partitions = [{"hour": text} for text in ("0", "5", "05", "10", "-3", "x", "300", DEFAULT_PARTITION_NAME)]
    key_types = {"hour": "tinyint"}
    # "05" is 5 as its type reads it; "x" and "300" (outside tinyint) do not read as a tinyint: kept, not guessed
    assert kept("hour = 5", partitions, key_types=key_types) == ["hour=5", "hour=05", "hour=x", "hour=300"]
    assert kept("hour >= 5.5", partitions, key_types=key_types) == ["hour=10", "hour=x", "hour=300"]
    assert kept("hour < -2", partitions, key_types=key_types) == ["hour=-3", "hour=x", "hour=300"]
    assert kept("hour IN (0, 10)", partitions, key_types=key_types) == ["hour=0", "hour=10", "hour=x", "hour=300"]
    # a string literal against a number column: Spark's coercion differs by mode, so only NULL is pruned
    not_null = [f"hour={spec['hour']}" for spec in partitions[:-1]]
    assert kept("hour = '5'", partitions, key_types=key_types) == not_null
    # a number in a form Spark reads as a double: not pruned on
    assert kept("hour = 1e1", partitions, key_types=key_types) == [f"hour={spec['hour']}" for spec in partitions]


def test_string_partition_columns_compare_strings():
    partitions = [{"region": text} for text in ("eu", "us", "EU", "10", "9", DEFAULT_PARTITION_NAME)]
    key_types = {"region": "varchar(10)"}
    assert kept("region = 'eu'", partitions, key_types=key_types) == ["region=eu"]  # case matters
    assert kept("region < '9'", partitions, key_types=key_types) == ["region=10"]  # string order, not numeric
    assert kept("region = 10", partitions, key_types=key_types) == [f"region={s['region']}" for s in partitions[:-1]]


def test_dates_that_do_not_parse_are_kept():
    partitions = [{"day": text} for text in ("2026-03-01", "2026-03-02", "2026-3-1", "yesterday", "2026-02-30")]
    assert kept("day = '2026-03-01'", partitions) == ["day=2026-03-01", "day=2026-3-1", "day=yesterday",
                                                      "day=2026-02-30"]
    assert len(kept("day = '2026-3-01'", partitions)) == len(partitions)  # not a plain date: not read as one


@pytest.mark.parametrize("key_type", ["char(10)", "decimal(10,2)", "double", "float", "timestamp", "boolean"])
def test_types_whose_coercions_are_not_reproduced_are_never_pruned(key_type):
    partitions = [{"k": "1"}, {"k": "2"}]
    assert kept("k = 1", partitions, key_types={"k": key_type}) == ["k=1", "k=2"]
    assert kept("k = '1'", partitions, key_types={"k": key_type}) == ["k=1", "k=2"]


def test_several_partition_columns():
    partitions = [{"day": day, "hour": str(hour)} for day in DAYS[:3] for hour in range(3)]
    key_types = {"day": "date", "hour": "int"}
    assert kept("day = '2026-01-02' AND hour > 0", partitions, key_types=key_types) == [
        "day=2026-01-02/hour=1", "day=2026-01-02/hour=2"]
    assert kept("hour = 2", partitions, key_types=key_types) == [f"day={day}/hour=2" for day in DAYS[:3]]
    assert len(kept("day = '2026-01-02' OR hour = 2", partitions, key_types=key_types)) == 5


def test_the_predicate_model():
    a = Comparison("a", "=", (Literal("number", "1"),))
    b = Comparison("b", "<", (Literal("string", "x"),))
    assert all_of([a, None, b]) == AllOf((a, b)) and all_of([None, None]) is None and all_of([a]) == a
    assert any_of([a, b]) == AnyOf((a, b)) and any_of([a, None]) is None and any_of([AnyOf((a, b)), a]) == \
        AnyOf((a, b, a))
    assert Comparison("a", "<", (Literal("number", "1"),)).flipped().operator == ">"
    with pytest.raises(UsageError):
        Literal("number", "1e3")
    with pytest.raises(UsageError):
        Comparison("a", "<>", (Literal("number", "1"),))
    with pytest.raises(UsageError):
        Comparison("a", "=", ())
    assert PartitionPruner(None, {"day": "date"}).matches({"day": "2026-01-01"})
    with pytest.raises(UsageError, match="takes no values"):
        Comparison("a", "is null", (Literal("number", "1"),))


@pytest.mark.parametrize("operator, kept_days", [("is null", [DEFAULT_PARTITION_NAME]), ("is not null", DAYS)])
def test_null_tests_keep_the_default_partition_or_every_other(operator, kept_days):
    """IS NULL holds only in Hive's default partition (the column is NULL in all of it, and nowhere else); IS NOT
    NULL everywhere else. Combined with a comparison as any other part."""
    pruner = PartitionPruner(Comparison("day", operator, ()), {"day": "date"})
    assert [spec["day"] for spec in DAY_PARTITIONS if pruner.matches(spec)] == kept_days
    assert pruner.matches({"day": None}) == (operator == "is null")
    third = Comparison("day", "=", (Literal("date", DAYS[3]),))
    either = PartitionPruner(AnyOf((Comparison("day", operator, ()), third)), {"day": "date"})
    assert [spec["day"] for spec in DAY_PARTITIONS if either.matches(spec)] == (
        [DAYS[3], DEFAULT_PARTITION_NAME] if operator == "is null" else DAYS)
    assert PartitionPruner(Comparison("id", operator, ()), {"day": "date"}).matches({"day": DAYS[0]})  # not a key


# ---------------------------------------------------------------------------------------------------------------
# The tables an `acid sql` statement reads, with what their query block's WHERE says of them


def reads(text: str) -> dict[str, list[str]]:
    """Each table read (qualified as written) -> per read, the first five day partitions it may take rows from."""
    return reads_of(parse_engine_statement(text))


def reads_of(statement) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for read in statement.reads:
        pruner = PartitionPruner(read.predicate, {"day": "date"})
        found.setdefault(str(read.name), []).append(
            ",".join(spec["day"] for spec in DAY_PARTITIONS[:5] if pruner.matches(spec)))
    return found


ALL5 = ",".join(DAYS[:5])


@pytest.mark.parametrize("text, expected", [
    ("SELECT * FROM t WHERE day = '2026-01-02'", {"t": ["2026-01-02"]}),
    ("SELECT * FROM db.t AS x WHERE x.day IN ('2026-01-02', '2026-01-04')", {"db.t": ["2026-01-02,2026-01-04"]}),
    ("SELECT * FROM t WHERE t.day > '2026-01-03' AND id = 1", {"t": ["2026-01-04,2026-01-05"]}),
    # a join: unqualified names may be either table's, qualified ones are told apart
    ("SELECT * FROM t JOIN u ON t.id = u.id WHERE day = '2026-01-02'", {"t": [ALL5], "u": [ALL5]}),
    ("SELECT * FROM t a JOIN u b ON a.id = b.id WHERE a.day = '2026-01-02' AND b.day < '2026-01-03'",
     {"t": ["2026-01-02"], "u": ["2026-01-01,2026-01-02"]}),
    ("SELECT * FROM t LEFT JOIN u ON t.id = u.id AND u.day = '2026-01-01'", {"t": [ALL5], "u": [ALL5]}),
    # each query block on its own; the view over a table serves them all (see the engine)
    ("SELECT * FROM t WHERE day = '2026-01-01' UNION ALL SELECT * FROM t WHERE day = '2026-01-05'",
     {"t": ["2026-01-01", "2026-01-05"]}),
    ("WITH x AS (SELECT * FROM t WHERE day = '2026-01-03') SELECT * FROM x, u WHERE day = '2026-01-01'",
     {"t": ["2026-01-03"], "u": [ALL5]}),
    ("SELECT * FROM (SELECT * FROM t) z WHERE day = '2026-01-01'", {"t": [ALL5]}),
    ("SELECT * FROM u WHERE id IN (SELECT id FROM t WHERE day = '2026-01-05')", {"u": [ALL5], "t": ["2026-01-05"]}),
    ("SELECT * FROM t AS x(a, b, day) WHERE day = '2026-01-01'", {"t": [ALL5]}),  # column aliases: not looked into
    ("SELECT * FROM t WHERE day = 'it''s' OR day = '2026-01-01'", {"t": [ALL5]}),  # a string Spark reads otherwise
])
def test_queries_read_each_table_with_its_blocks_where(text, expected):
    assert reads(text) == expected


def test_a_statements_target_is_not_among_its_reads():
    update = parse_engine_statement("UPDATE t SET x = 1 WHERE day = '2026-01-01' AND id IN "
                                    "(SELECT id FROM t WHERE day = '2026-01-02')")
    assert isinstance(update, SparkUpdate) and reads_of(update) == {"t": ["2026-01-02"]}
    delete = parse_engine_statement("DELETE FROM t WHERE day = '2026-01-01'")
    assert isinstance(delete, SparkDelete) and delete.reads == ()
    insert = parse_engine_statement("INSERT INTO t SELECT * FROM u WHERE day = '2026-01-03'")
    assert reads_of(insert) == {"u": ["2026-01-03"]}
    merge = parse_engine_statement("MERGE INTO t USING u AS s ON t.id = s.id AND t.day = '2026-01-01' "
                                   "WHEN MATCHED THEN DELETE")
    assert isinstance(merge, SparkMerge) and reads_of(merge) == {"u": [ALL5]}  # a source is read whole
    query = parse_engine_statement("SELECT 1")
    assert isinstance(query, SparkQuery) and query.reads == ()
    assert parse_engine_statement("SELECT * FROM t WHERE day = '2026-01-01'") == \
        parse_engine_statement("SELECT * FROM t WHERE day = '2026-01-01'")
    assert parse_engine_statement("DELETE FROM t").table == TableName("t")

