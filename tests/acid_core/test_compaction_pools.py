"""Hive 4's compaction pools as values: pool names, the pool a table's properties choose (Initiator.getPoolName), and
the labelled pools of ACID_COMPACTION_POOLS. Pure functions; the queue, the initiator, `acid sql` and the DAGs are
tested where they use them."""

from __future__ import annotations

import pytest

from acid_core.errors import AcidError, InvalidPoolNameError, UsageError
from acid_core.metastore.pools import PoolSetting, check_pool_name, parse_pools, pool_of


@pytest.mark.parametrize("name", ["etl", "Etl", "etl.nightly", "a-b_c.9", "default", "x" * 128])
def test_good_pool_names_are_kept_as_written(name):
    assert check_pool_name(name) == name


@pytest.mark.parametrize("name", ["", " etl", "etl pool", "etl/x", "a'b", "ünï", "x" * 129, None, 7])
def test_a_bad_pool_name_is_one_line_naming_the_value(name):
    with pytest.raises(InvalidPoolNameError) as info:
        check_pool_name(name)
    assert isinstance(info.value, (AcidError, ValueError))
    message = str(info.value)
    assert "\n" not in message and repr(name) in message and "1 to 128 letters, digits, '_', '-' or '.'" in message


@pytest.mark.parametrize("table, database, expected", [
    ({"hive.compactor.worker.pool": "etl"}, {"hive.compactor.worker.pool": "db"}, "etl"),  # the table's first
    ({}, {"hive.compactor.worker.pool": "db"}, "db"),
    ({"hive.compactor.worker.pool": " "}, {"hive.compactor.worker.pool": "db"}, "db"),  # blank: Hive's isBlank
    ({"HIVE.COMPACTOR.WORKER.POOL": "etl"}, {}, "etl"),  # keys match case-insensitively, as the catalog's
    ({"transactional": "true"}, {}, None),
    ({}, None, None),
])
def test_pool_of_is_the_tables_property_then_the_databases(table, database, expected):
    assert pool_of(table, database) == expected


def test_pool_of_refuses_a_property_no_pool_may_have():
    with pytest.raises(InvalidPoolNameError, match=r"its database: property 'hive.compactor.worker.pool' = 'a b'"):
        pool_of({}, {"hive.compactor.worker.pool": "a b"}, table="d.t")


@pytest.mark.parametrize("text, expected", [
    (None, ()),
    ("", ()),
    (" , ", ()),
    ("etl", (PoolSetting("etl"),)),
    ("etl:4, hot ,nightly.batch:1", (PoolSetting("etl", 4), PoolSetting("hot"), PoolSetting("nightly.batch", 1))),
])
def test_compaction_pools_variable(text, expected):
    assert parse_pools(text) == expected


@pytest.mark.parametrize("text, message", [
    ("etl pool", "ACID_COMPACTION_POOLS: compaction pool name 'etl pool' is not valid"),
    ("etl,etl:2", "ACID_COMPACTION_POOLS: pool 'etl' is listed twice"),
    ("default:2", "ACID_COMPACTION_POOLS: 'default' is the default pool"),
    ("etl:0", "ACID_COMPACTION_POOLS: the slots of pool 'etl' must be a whole number in 1..1024, got '0'"),
    ("etl:two", "got 'two'"),
    ("etl:", "got ''"),
    (":3", "compaction pool name '' is not valid"),
])
def test_a_bad_compaction_pools_variable_names_the_entry(text, message):
    with pytest.raises(UsageError) as info:
        parse_pools(text)
    assert message in str(info.value) and str(info.value).startswith("ACID_COMPACTION_POOLS: ")
