"""The on-demand DAGs acid_table_settings and acid_compact, run with `dag.test()` against a real SQLite metastore."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.dag_support import COLUMNS, returned, task_states

pytestmark = pytest.mark.airflow

DELTA_NUM = "compactorthreshold.hive.compactor.delta.num.threshold"
# dag.test() keeps the previous run's conf values on the shared DAG object, so every run gives every param.
SETTINGS = {"database": "default", "no_auto_compaction": "leave", "delta_num_threshold": None,
            "delta_pct_threshold": None, "clear_thresholds": False}
COMPACT = {"database": "default", "partition": None, "type": "major", "number_of_buckets": None, "pyspark_memory": None, "properties": {},
           "pool": None, "wait": True}  # every param: dag.test() keeps the previous run's values on the shared DAG


def test_manual_dags_import_without_errors(dagbag):
    assert not {path: error for path, error in dagbag.import_errors.items()
                if Path(path).name in ("acid_table_settings.py", "acid_compact.py")}
    assert dagbag.import_errors == {}
    settings, compact = dagbag.get_dag("acid_table_settings"), dagbag.get_dag("acid_compact")
    assert set(settings.tags) == {"acid", "settings"} and set(compact.tags) == {"acid", "compaction"}
    assert settings.doc_md and compact.doc_md
    assert type(settings.timetable).__name__ == type(compact.timetable).__name__ == "NullTimetable"
    assert [t.task_id for t in compact.topological_sort()] == ["enqueue", "run_now", "compact"]


# --- acid_table_settings ---------------------------------------------------------------------------------------------
def test_settings_sets_no_auto_compaction_and_threshold(acid_connection, make_ms, dagbag):
    ms = make_ms()
    ms.catalog.create_table("default", "t", COLUMNS, params={"transactional": "true"})

    run = dagbag.get_dag("acid_table_settings").test(run_conf={**SETTINGS,
        "database": "default", "table": "t", "no_auto_compaction": "true", "delta_num_threshold": 4})

    assert run.state == "success"
    info = ms.catalog.get_table("default", "t")
    assert info.param("no_auto_compaction") == "true" and info.param(DELTA_NUM) == "4"
    assert returned(run, "apply_settings")[DELTA_NUM] == "4"

    run = dagbag.get_dag("acid_table_settings").test(run_conf={**SETTINGS,
        "database": "default", "table": "t", "no_auto_compaction": "clear", "clear_thresholds": True,
        "delta_num_threshold": None, "delta_pct_threshold": None})  # a dag.test() run keeps the last conf's values

    assert run.state == "success"
    info = ms.catalog.get_table("default", "t")
    assert info.param("no_auto_compaction") is None and info.param(DELTA_NUM) is None
    assert info.is_transactional


@pytest.mark.parametrize("table, expected", [("missing", "missing"), ("plain", "not a full ACID table")])
def test_settings_fails_for_unknown_or_plain_table(acid_connection, make_ms, dagbag, capfd, table, expected):
    ms = make_ms()
    ms.catalog.create_table("default", "plain", COLUMNS)
    before = dict(ms.catalog.get_table("default", "plain").params)

    run = dagbag.get_dag("acid_table_settings").test(run_conf={**SETTINGS,
        "database": "default", "table": table, "no_auto_compaction": "true", "delta_num_threshold": 2})

    assert run.state == "failed"
    assert task_states(run) == {"apply_settings": "failed"}
    output = "".join(capfd.readouterr())
    assert "refusing default." + table in output and expected in output
    assert dict(ms.catalog.get_table("default", "plain").params) == before


def test_settings_param_schema_refuses_values_outside_its_choices(acid_connection, make_ms, dagbag):
    from airflow.sdk.definitions.param import ParamValidationError

    ms = make_ms()
    ms.catalog.create_table("default", "t", COLUMNS, params={"transactional": "true"})
    before = dict(ms.catalog.get_table("default", "t").params)

    with pytest.raises(ParamValidationError):
        dagbag.get_dag("acid_table_settings").test(run_conf={**SETTINGS, "table": "t", "no_auto_compaction": "yes"})

    assert dict(ms.catalog.get_table("default", "t").params) == before


@pytest.mark.parametrize("conf, expected", [
    ({"table": "../x"}, "Invalid input for param table: '../x' does not match"),
    ({"table": "t; DROP TABLE t"}, "Invalid input for param table: 't; DROP TABLE t' does not match"),
    ({"database": "x'y", "table": "t"}, "Invalid input for param database: \"x'y\" does not match"),
    ({"table": "t", "delta_num_threshold": -1}, "Invalid input for param delta_num_threshold: -1 is less than the "
                                                "minimum of 0"),
])
def test_settings_refuses_hostile_values_before_a_run(acid_connection, make_ms, dagbag, conf, expected):
    """Names and numbers are refused when the run is made (the Params' schema; the bounds under `allOf`, so the
    trigger form does not clamp -1 to 0)."""
    from airflow.sdk.definitions.param import ParamValidationError

    ms = make_ms()
    ms.catalog.create_table("default", "t", COLUMNS, params={"transactional": "true"})
    before = dict(ms.catalog.get_table("default", "t").params)

    with pytest.raises(ParamValidationError) as refused:
        dagbag.get_dag("acid_table_settings").test(run_conf={**SETTINGS, "database": "default", **conf})

    assert str(refused.value).startswith(expected)
    assert dict(ms.catalog.get_table("default", "t").params) == before


# --- acid_compact ----------------------------------------------------------------------------------------------------
def _partitioned_table(ms):
    """default.p partitioned by ds, with 3 committed deltas in ds=2026-01-01 and one in ds=2026-01-02."""
    from acid_core.write.table import AcidTable

    info = ms.catalog.create_table("default", "p", COLUMNS, partition_keys=[("ds", "string")],
                                   params={"transactional": "true"})
    for ds, rows in (("2026-01-01", [(1, "a")]), ("2026-01-01", [(2, "b")]), ("2026-01-01", [(3, "c")]),
                     ("2026-01-02", [(4, "d")])):
        AcidTable(ms, info).append(rows, partition={"ds": ds})
    return info


@pytest.mark.parametrize("conf, expected", [
    ({"partition": "ds=2026-01-01", "type": "full"}, "Invalid input for param type: 'full' is not one of"),
    ({"partition": "ds=2026-01-01", "pool": "x" * 129}, "Invalid input for param pool: 'xxx"),
    ({"partition": "x" * 1001}, "Invalid input for param partition: 'xxx"),
    ({"partition": "../x"}, "Invalid input for param partition: '../x' does not match"),
    ({"partition": "ds=1/../.."}, "Invalid input for param partition: 'ds=1/../..' does not match"),
    ({"partition": "/etc"}, "Invalid input for param partition: '/etc' does not match"),
    ({"partition": "ds=2026-01-01/"}, "Invalid input for param partition: 'ds=2026-01-01/' does not match"),
    ({"table": "p; DROP TABLE p", "partition": "ds=2026-01-01"},
     "Invalid input for param table: 'p; DROP TABLE p' does not match"),
    ({"database": "default--", "partition": "ds=2026-01-01"},
     "Invalid input for param database: 'default--' does not match"),
    ({"partition": "ds=2026-01-01", "pool": "etl pool"}, "Invalid input for param pool: 'etl pool' does not match"),
    ({"partition": "ds=2026-01-01", "type": "rebalance", "number_of_buckets": 0},
     "Invalid input for param number_of_buckets: 0 is less than the minimum of 1"),
])
def test_compact_refuses_malformed_input_before_a_run(acid_connection, make_ms, dagbag, conf, expected):
    """Shapes, choices and ranges are the Params' schema: refused when the run is made, nothing queued."""
    from airflow.sdk.definitions.param import ParamValidationError

    ms = make_ms()
    _partitioned_table(ms)

    with pytest.raises(ParamValidationError) as refused:
        dagbag.get_dag("acid_compact").test(run_conf={**COMPACT, "database": "default", "table": "p", **conf})

    assert str(refused.value).startswith(expected)
    assert ms.compactions.show() == []


@pytest.mark.parametrize("conf, expected", [
    ({"table": "p", "partition": "ds=2099-01-01"},
     "has no partition 'ds=2099-01-01'; its partitions: ds=2026-01-01, ds=2026-01-02"),
    ({"table": "p", "partition": "hr=1"}, "must give exactly"),
    ({"table": "p", "partition": "ds='x'; DROP TABLE p"},  # a value as Hive escapes it, unknown
     "has no partition 'ds=%27x%27; DROP TABLE p'; its partitions: ds=2026-01-01, ds=2026-01-02"),
    ({"table": "u", "partition": "ds=2026-01-01"}, "is not partitioned"),
    ({"table": "plain", "partition": None}, "not a full ACID table"),
    ({"table": "missing", "partition": None}, "missing"),
    ({"table": "b", "partition": None, "type": "rebalance"},
     "cannot rebalance default.b: Cannot execute rebalancing compaction on bucketed tables."),
    ({"table": "u", "partition": None, "number_of_buckets": 4},
     "CLUSTERED INTO 4 BUCKETS applies to a 'rebalance' compaction only"),
])
def test_compact_refuses_bad_table_or_partition(acid_connection, make_ms, dagbag, capfd, conf, expected):
    ms = make_ms()
    _partitioned_table(ms)
    ms.catalog.create_table("default", "u", COLUMNS, params={"transactional": "true"})
    ms.catalog.create_table("default", "plain", COLUMNS)
    ms.catalog.create_table("default", "b", COLUMNS, bucket_columns=["id"], num_buckets=2,
                            params={"transactional": "true"})

    run = dagbag.get_dag("acid_compact").test(run_conf={**COMPACT, "database": "default", **conf})

    assert run.state == "failed"
    assert task_states(run)["enqueue"] == "failed"
    assert expected in "".join(capfd.readouterr())
    assert ms.compactions.show() == []


def test_compact_queues_a_rebalance_into_n_buckets(acid_connection, make_ms, dagbag):
    from acid_core.metastore.codes import CompactionType

    ms = make_ms()
    _partitioned_table(ms)

    run = dagbag.get_dag("acid_compact").test(run_conf={
        **COMPACT, "database": "default", "table": "p", "partition": "ds=2026-01-01", "type": "rebalance",
        "number_of_buckets": 6, "wait": False})

    assert run.state == "success"
    (entry,) = ms.compactions.show()
    assert (entry.type, entry.partition, entry.number_of_buckets) == (CompactionType.REBALANCE, "ds=2026-01-01", 6)


def test_compact_queues_in_the_pool_given_else_the_tables(acid_connection, make_ms, dagbag):
    """`pool` is Hive's POOL 'name'; without it the table's hive.compactor.worker.pool chooses, as in Hive."""
    ms = make_ms()
    _partitioned_table(ms)
    ms.catalog.set_table_params("default", "p", {"hive.compactor.worker.pool": "etl"})
    compact = dagbag.get_dag("acid_compact")

    given = compact.test(run_conf={**COMPACT, "database": "default", "table": "p", "partition": "ds=2026-01-01",
                                   "pool": "adhoc", "wait": False})
    chosen = compact.test(run_conf={**COMPACT, "database": "default", "table": "p", "partition": "ds=2026-01-02",
                                    "pool": None, "wait": False})

    assert (given.state, chosen.state) == ("success", "success")
    assert {e.partition: e.pool_name for e in ms.compactions.show()} == {"ds=2026-01-01": "adhoc",
                                                                         "ds=2026-01-02": "etl"}
