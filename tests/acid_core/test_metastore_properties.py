"""Table and database properties: what the catalog refuses on create and alter (Hive's TransactionalValidationListener
rules, and what the metastore's columns hold), and the setting values the statement front ends check first."""

from __future__ import annotations

import json
import re

import pytest
import sqlalchemy as sa

from acid_core.errors import InvalidPropertyError, MetastoreError, NoSuchObjectError
from acid_core.metastore import Metastore, schema
from acid_core.metastore.codes import CompactionType
from acid_core.metastore.properties import check_settings
from acid_deploy.job_conf import compaction_spark_conf

COLUMNS = [("id", "int")]
ACID = {"transactional": "true"}
NUM = "compactorthreshold.hive.compactor.delta.num.threshold"
PCT = "compactorthreshold.hive.compactor.delta.pct.threshold"


def catalog_rows(ms: Metastore) -> dict[str, list]:
    tables = (schema.dbs, schema.database_params, schema.tbls, schema.columns_v2, schema.table_params,
              schema.sequence_table)
    with ms.db.engine.connect() as connection:
        return {t.name: sorted(map(tuple, connection.execute(sa.select(t)).all()), key=repr) for t in tables}


# --- create --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("params, problem", [
    ({"transactional": "maybe"}, "table default.t: property 'transactional' must be 'true' or 'false', got 'maybe'"),
    ({"TRANSACTIONAL": "yes"}, "table default.t: property 'TRANSACTIONAL' must be 'true' or 'false', got 'yes'"),
    ({"transactional": "true", "transactional_properties": "bogus"},
     "table default.t: property 'transactional_properties' of a transactional table must be one of 'default', "
     "'insert_only', 'split_update', got 'bogus'"),
    ({"bucketing_version": "3"}, "table default.t: property 'bucketing_version' must be 1 or 2 (Hive's bucketing "
                                 "versions), got '3'"),
    ({"": "x"}, "table default.t: property key '' must be 1 to 256 characters"),
    ({"k" * 257: "x"}, "must be 1 to 256 characters"),
    ({"owner": None}, "table default.t: property 'owner' has no value"),
])
def test_create_table_refuses_what_hive_refuses_and_writes_nothing(ms, params, problem):
    before = catalog_rows(ms)
    with pytest.raises(InvalidPropertyError) as info:
        ms.catalog.create_table("default", "t", COLUMNS, params=params)
    assert problem in str(info.value) and "\n" not in str(info.value)
    assert catalog_rows(ms) == before


@pytest.mark.parametrize("params", [
    {"transactional": "FALSE"}, {"transactional": "true", "transactional_properties": "INSERT_ONLY"},
    {"transactional": "True", "transactional_properties": "split_update"},
    {"transactional_properties": "anything"},  # not transactional: Hive does not look at it
    {"no_auto_compaction": "yes", NUM: "many"},  # Hive stores any string; the Initiator reports a bad threshold
    {"transactional": "true", "transactional_properties": "default", "bucketing_version": "1"},
])
def test_create_table_accepts_what_hive_accepts(ms, params):
    assert dict(ms.catalog.create_table("default", "t", COLUMNS, params=params).params) == params


def test_two_spellings_of_one_key_keep_the_last(ms):
    table = ms.catalog.create_table("default", "t", COLUMNS, params={"owner": "a", "OWNER": "b"})
    assert dict(table.params) == {"OWNER": "b"}
    database = ms.catalog.create_database("d", params={"team": "a", "Team": "b"})
    assert dict(database.params) == {"Team": "b"}


def test_database_properties_must_fit_the_metastore(ms):
    before = catalog_rows(ms)
    with pytest.raises(InvalidPropertyError, match="database d: property key 'kkk.*' must be 1 to 180 characters"):
        ms.catalog.create_database("d", params={"k" * 181: "x"})
    with pytest.raises(InvalidPropertyError, match="database d: the value of property 'note' is 4001 characters"):
        ms.catalog.create_database("d", params={"note": "x" * 4001})
    assert catalog_rows(ms) == before
    ms.catalog.create_database("d")
    with pytest.raises(InvalidPropertyError, match="'note' has no value"):
        ms.catalog.set_database_params("d", {"note": None})
    assert ms.catalog.get_database("d").params == {}


# --- alter ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("change, problem", [
    ({"set_params": {"transactional": "false"}},
     "table default.t: a transactional table cannot be made non-transactional ('transactional'='false')"),
    ({"set_params": {"Transactional": "maybe"}}, "property 'Transactional' must be 'true' or 'false', got 'maybe'"),
    ({"unset": ["TRANSACTIONAL"]},
     "cannot unset 'transactional' or 'transactional_properties' of ACID table default.t"),
    ({"unset": ["transactional_properties"]}, "cannot unset 'transactional' or 'transactional_properties'"),
    ({"set_params": {"transactional_properties": "insert_only"}},
     "table default.t: 'transactional_properties' cannot change from 'default' to 'insert_only' after the table is "
     "created"),
    ({"set_params": {"transactional_properties": "split_update"}}, "cannot change from 'default' to 'split_update'"),
    ({"set_params": {"a": "1"}, "unset": ["A"]}, "table default.t: properties ['a'] are both set and unset"),
    ({"set_params": {"owner": "x", "bucketing_version": "0"}}, "property 'bucketing_version' must be 1 or 2"),
])
def test_alter_refuses_what_hive_refuses_and_changes_nothing(ms, change, problem):
    params = {**ACID, "transactional_properties": "default", "keep": "1"}
    ms.catalog.create_table("default", "t", COLUMNS, params=params)
    before = catalog_rows(ms)
    with pytest.raises(InvalidPropertyError) as info:
        ms.catalog.alter_table_params("default", "t", **change)
    assert problem in str(info.value)
    assert catalog_rows(ms) == before


def test_alter_sets_and_unsets_in_one_change(ms):
    ms.catalog.create_table("default", "t", COLUMNS, params={**ACID, "NO_AUTO_COMPACTION": "true", NUM: "4"})
    table = ms.catalog.alter_table_params("default", "t", set_params={"no_auto_compaction": "false", PCT: "0.5",
                                                                      "Transactional": "TRUE"},
                                          unset=[NUM.upper(), "missing"], if_exists=True)
    assert dict(table.params) == {"no_auto_compaction": "false", PCT: "0.5", "Transactional": "TRUE"}
    assert table.is_transactional
    with pytest.raises(NoSuchObjectError, match="table default.t has no property 'missing'"):
        ms.catalog.alter_table_params("default", "t", set_params={"x": "1"}, unset=["missing"])
    assert ms.catalog.get_table("default", "t").param("x") is None  # all or nothing
    with pytest.raises(NoSuchObjectError, match="default.nope"):
        ms.catalog.alter_table_params("default", "nope", set_params={"a": "b"})


def test_a_plain_table_can_become_transactional_with_a_known_kind(ms):
    ms.catalog.create_table("default", "plain", COLUMNS, params={"transactional_properties": "bogus"})
    with pytest.raises(InvalidPropertyError, match="'transactional_properties' of a transactional table must be"):
        ms.catalog.alter_table_params("default", "plain", set_params=ACID)
    ms.catalog.alter_table_params("default", "plain", unset=["transactional_properties"])
    assert ms.catalog.alter_table_params("default", "plain", set_params=ACID).is_transactional


def test_insert_only_tables_are_exempt_from_the_transitions_as_in_hive(ms):
    ms.catalog.create_table("default", "mm", COLUMNS, params={**ACID, "transactional_properties": "insert_only"})
    table = ms.catalog.alter_table_params("default", "mm", set_params={"transactional_properties": "default"})
    assert table.is_transactional


def test_the_stores_own_setters_check_values_but_not_transitions(ms):
    ms.catalog.create_table("default", "t", COLUMNS, params=ACID)
    with pytest.raises(InvalidPropertyError, match="'transactional' must be 'true' or 'false', got 'off'"):
        ms.catalog.set_table_params("default", "t", {"transactional": "off"})
    assert not ms.catalog.unset_table_params("default", "t", ["transactional"]).is_transactional


# --- the settings the front ends check ------------------------------------------------------------------------------

@pytest.mark.parametrize("params, problem", [
    ({"NO_AUTO_COMPACTION": "yes"}, "table property 'no_auto_compaction' must be 'true' or 'false', got 'yes'"),
    ({"no_cleanup": "1"}, "'no_cleanup' must be 'true' or 'false', got '1'"),
    ({"transactional": "maybe"}, "'transactional' must be 'true' or 'false', got 'maybe'"),
    ({"transactional_properties": "insert_only"}, "transactional_properties='insert_only' is not supported"),
    ({NUM: "-1"}, f"table property '{NUM}' must be a whole number >= 0, got '-1'"),
    ({NUM: "2.5"}, "must be a whole number >= 0, got '2.5'"),
    ({PCT: "abc"}, f"table property '{PCT}' must be a number >= 0, got 'abc'"),
    ({PCT: "-0.1"}, "must be a number >= 0, got '-0.1'"),
])
def test_check_settings_refuses_values_this_system_cannot_act_on(params, problem):
    with pytest.raises(InvalidPropertyError) as info:
        check_settings(params)
    assert problem in str(info.value)
    assert isinstance(info.value, MetastoreError)


def test_check_settings_accepts_good_values_and_names_databases():
    check_settings({"transactional": "TRUE", "transactional_properties": "Default", NUM: "0", PCT: "0.25",
                    "no_cleanup": "false", "owner": "anything"})
    with pytest.raises(InvalidPropertyError, match="database property 'no_auto_compaction'"):
        check_settings({"no_auto_compaction": "on"}, what="database")


# --- compactor.spark.executor.pyspark.memory: the compaction job's Python worker memory cap -----------------------
@pytest.mark.parametrize("value", ["2g", "768m", "2048", "4G", "1tb", "600MB"])
def test_pyspark_memory_property_takes_spark_memory_sizes(value):
    check_settings({"compactor.spark.executor.pyspark.memory": value})


@pytest.mark.parametrize("value, problem", [
    ("lots", "must be a Spark memory size such as '2g' or '768m', got 'lots'"),
    ("2 g", "must be a Spark memory size"),
    ("-1g", "must be a Spark memory size"),
    ("256m", "must be at least 512m (a Python worker needs that much address space to load pyarrow), got '256m'"),
    ("100", "must be at least 512m"),
])
def test_pyspark_memory_property_refuses_what_spark_or_python_cannot_use(ms, value, problem):
    with pytest.raises(InvalidPropertyError, match=re.escape(problem)):
        check_settings({"compactor.spark.executor.pyspark.memory": value})
    ms.catalog.create_table("default", "t", [("a", "int")], params={"transactional": "true"})
    with pytest.raises(InvalidPropertyError, match=re.escape(problem)):
        ms.catalog.alter_table_params("default", "t", set_params={"compactor.spark.executor.pyspark.memory": value})
    with pytest.raises(InvalidPropertyError, match="compaction request property 'compactor.spark.executor"):
        ms.compactions.enqueue("default", "t", None, CompactionType.MAJOR,
                               properties={"compactor.spark.executor.pyspark.memory": value})
    assert ms.compactions.show() == []
    assert ms.catalog.get_table("default", "t").param("compactor.spark.executor.pyspark.memory") is None


def test_the_compaction_job_memory_cap_comes_from_the_request_the_table_the_launcher_then_the_default():
    key, conf = "compactor.spark.executor.pyspark.memory", "spark.executor.pyspark.memory"
    assert compaction_spark_conf({}, None) == {conf: "2g"}
    assert compaction_spark_conf({}, None, configured={conf: "1g"}) == {conf: "1g"}
    assert compaction_spark_conf({key.upper(): "3g"}, None, configured={conf: "1g"}) == {conf: "3g"}
    assert compaction_spark_conf({key: "3g"}, json.dumps({key: "5g"}), configured={conf: "1g"}) == {conf: "5g"}
    with pytest.raises(InvalidPropertyError, match="table property 'compactor.spark.executor.pyspark.memory' must"):
        compaction_spark_conf({key: "tiny"}, None)


def test_compactor_spark_properties_and_the_job_queue_reach_the_job_request_over_table_over_database():
    database = {"compactor.spark.executor.memory": "4g", "hive.compactor.job.queue": "etl",
                "compactor.spark.dynamicallocation.maxExecutors": "20"}
    table = {"COMPACTOR.SPARK.EXECUTOR.MEMORY": "8g", "compactor.spark.executor.cores": "2", "comment": "x"}
    request = json.dumps({"compactor.spark.executor.cores": "4", "compactor.hive.compactor.job.queue": "urgent"})
    assert compaction_spark_conf(table, request, database_params=database, configured={"spark.x": "kept apart"}) == {
        "spark.dynamicAllocation.maxExecutors": "20", "spark.executor.cores": "4", "spark.executor.memory": "8g",
        "spark.executor.pyspark.memory": "2g", "spark.yarn.queue": "urgent"}


@pytest.mark.parametrize("key, value, message", [
    ("compactor.spark.driver.extraJavaOptions", "-javaagent:/evil.jar",
     "spark.driver.extrajavaoptions is not a Spark setting a table may choose"),
    ("compactor.spark.executorEnv.ACID_METASTORE_URL", "x", "is not a Spark setting a table may choose"),
    ("compactor.spark.jars", "s3://bucket/evil.jar", "spark.jars is not a Spark setting a table may choose"),
    ("compactor.spark.executor.memory", "4g\n--conf x", "must be 1 to 1000 printable characters"),
])
def test_a_spark_setting_a_table_may_not_choose_is_refused_where_it_is_set(ms, key, value, message):
    ms.catalog.create_table("default", "t", [("id", "int")], params={"transactional": "true"})
    with pytest.raises(InvalidPropertyError, match=re.escape(message)):
        check_settings({key: value})
    with pytest.raises(InvalidPropertyError, match=re.escape(message)):
        compaction_spark_conf({key: value}, None)
    with pytest.raises(InvalidPropertyError, match=re.escape(message)):
        ms.compactions.enqueue("default", "t", None, CompactionType.MAJOR, properties={key: value})
    assert ms.compactions.show() == []
