"""Clear outcomes of the DAGs (issue 14), run with `dag.test()` against a real SQLite metastore (and, where marked,
real spark-submit compactions): refusals in one line with a structured `outcome` XCom, refused compactions skipped
without asset events, whole-table manual requests, asset events that name the compaction, descriptions, number
params the trigger form does not clamp, one XCom per task."""

from __future__ import annotations

import pytest
from support.dag_support import COLUMNS, insert, returned, returned_all, task_states

pytestmark = pytest.mark.airflow

SETTINGS = {"database": "default", "no_auto_compaction": "leave", "delta_num_threshold": None,
            "delta_pct_threshold": None, "clear_thresholds": False}
COMPACT = {"database": "default", "partition": None, "type": "major", "number_of_buckets": None,
           "pyspark_memory": None, "properties": {}, "pool": None, "wait": False}
INITIATOR = {"dry_run": False, "full_scan": False, "fetch_size": 1000, "delta_num_threshold": 10,
             "delta_pct_threshold": 0.1, "aborted_threshold": 1000, "aborted_time_threshold_seconds": 43200,
             "failed_threshold": 2, "failed_retry_seconds": 604800}
WORKER = {"max_compactions": 100, "pool_timeout_seconds": 43200}
CLEANER = {"dry_run": False, "retention_seconds": 0, "retry_retention_seconds": 300, "max_attempts": 5,
           "trash_dir": None}


def _sales(ms, days: dict[str, int]) -> None:
    """default.sales partitioned by ds, with `days[ds]` committed deltas in each partition."""
    ms.catalog.create_table("default", "sales", COLUMNS, partition_keys=[("ds", "string")],
                            params={"transactional": "true"})
    for ds, deltas in days.items():
        for i in range(deltas):
            insert(ms, "sales", ds, [(i, ds)])


def _xcom_keys(dag_run, task_id: str) -> set[str]:
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        return {row.key for row in session.query(XComModel).filter(
            XComModel.dag_id == dag_run.dag_id, XComModel.run_id == dag_run.run_id, XComModel.task_id == task_id)}


def _events(name: str) -> list[dict]:
    """The `extra` of each event of asset `name`, oldest first."""
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session

    with create_session() as session:
        return [event.extra for event in session.query(AssetEvent).join(
            AssetModel, AssetEvent.asset_id == AssetModel.id).filter(AssetModel.name == name).order_by(AssetEvent.id)]


def _rendered_map_indexes(dag_run, task_id: str) -> list[str]:
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session

    with create_session() as session:
        return sorted(ti.rendered_map_index or "" for ti in session.query(TaskInstance).filter(
            TaskInstance.dag_id == dag_run.dag_id, TaskInstance.run_id == dag_run.run_id,
            TaskInstance.task_id == task_id))


# --- the DAGs as parsed ----------------------------------------------------------------------------------------------
def test_every_dag_has_a_description_and_no_number_param_the_form_would_clamp(dagbag):
    assert dagbag.import_errors == {}
    for dag_id, dag in dagbag.dags.items():
        assert dag.description and len(dag.description) < 200, dag_id
        for name in dag.params:
            schema = dag.params.get_param(name).schema
            assert not {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"} & set(schema), (dag_id, name)
            if isinstance(schema.get("type"), list) and "integer" in schema["type"] or schema.get("type") in (
                    "integer", "number"):
                assert "(a whole number" in param_description(dag, name) or "(a number" in param_description(
                    dag, name), (dag_id, name)
    from acid_plugin.params import PARTITION

    compact = dagbag.get_dag("acid_compact")
    assert compact.params.get_param("partition").schema["pattern"] == PARTITION  # refused on trigger
    assert "e.g. ds=2026-01-01/hr=3" in param_description(compact, "partition")


def param_description(dag, name: str) -> str:
    return dag.params.get_param(name).description or ""


# --- refusals: one line, a structured outcome ------------------------------------------------------------------------
def test_an_unknown_partition_fails_in_one_line_listing_the_tables_partitions(acid_connection, make_ms, dagbag,
                                                                               capfd):
    ms = make_ms()
    _sales(ms, {f"2026-01-{day:02d}": 1 for day in range(1, 24)})

    run = dagbag.get_dag("acid_compact").test(run_conf={**COMPACT, "table": "sales", "partition": "ds=2099-01-01"})

    assert run.state == "failed" and task_states(run) == {"enqueue": "failed", "run_now": "upstream_failed",
                                                          "compact": "upstream_failed"}
    outcome = returned(run, "enqueue", key="outcome")
    reason = ("acid_compact: table default.sales has no partition 'ds=2099-01-01'; its partitions: "
              + ", ".join(f"ds=2026-01-{day:02d}" for day in range(1, 21)) + " and 3 more")
    assert outcome == {"ok": False, "reason": reason, "database": "default", "table": "sales",
                       "partition": "ds=2099-01-01", "partitions": [f"ds=2026-01-{day:02d}" for day in range(1, 21)],
                       "more_partitions": 3}
    assert reason in "".join(capfd.readouterr())
    assert ms.compactions.show() == []


def test_an_unknown_table_fails_in_one_line_with_an_outcome(acid_connection, make_ms, dagbag):
    make_ms()

    run = dagbag.get_dag("acid_compact").test(run_conf={**COMPACT, "table": "nope"})

    assert run.state == "failed"
    outcome = returned(run, "enqueue", key="outcome")
    assert outcome["ok"] is False and "\n" not in outcome["reason"]
    assert outcome["reason"] == "acid_compact: refusing default.nope: table default.nope does not exist"


def test_a_negative_threshold_is_refused_not_clamped(acid_connection, make_ms, dagbag):
    from airflow.sdk.definitions.param import ParamValidationError

    ms = make_ms()
    ms.catalog.create_table("default", "t", COLUMNS, params={"transactional": "true"})
    settings = dagbag.get_dag("acid_table_settings")

    with pytest.raises(ParamValidationError, match="delta_pct_threshold: -1 is less than the minimum of 0"):
        settings.test(run_conf={**SETTINGS, "table": "t", "delta_pct_threshold": -1})

    assert ms.catalog.get_table("default", "t").param("compactorthreshold.hive.compactor.delta.pct.threshold") is None

    stored = settings.test(run_conf={**SETTINGS, "table": "t", "delta_pct_threshold": 0.25})

    assert stored.state == "success"
    assert _xcom_keys(stored, "apply_settings") == {"return_value"}  # one XCom, not one per property
    assert returned(stored, "apply_settings")["compactorthreshold.hive.compactor.delta.pct.threshold"] == "0.25"


@pytest.mark.parametrize("dag_id, conf, expected", [
    ("acid_worker", {"max_compactions": -1}, "max_compactions must be a whole number from 0 to 10000, got -1"),
    ("acid_initiator", {"fetch_size": 0}, "fetch_size must be a whole number from 1 to 5000, got 0"),
    ("acid_cleaner", {"max_attempts": 11}, "max_attempts must be a whole number from 0 to 10, got 11"),
    ("acid_cleaner", {"trash_dir": "../trash"}, "trash_dir '../trash' is refused: expected an absolute path"),
])
def test_the_scheduled_dags_refuse_out_of_range_numbers_in_words(acid_connection, make_ms, dagbag, capfd, dag_id,
                                                                 conf, expected):
    ms = make_ms()
    base = {"acid_worker": WORKER, "acid_initiator": INITIATOR, "acid_cleaner": CLEANER}[dag_id]

    run = dagbag.get_dag(dag_id).test(run_conf={**base, **conf})

    assert run.state == "failed"
    assert expected in "".join(capfd.readouterr())
    assert ms.compactions.show() == []


# --- a whole partitioned table ---------------------------------------------------------------------------------------
def test_no_partition_queues_every_partition_that_needs_compaction(acid_connection, make_ms, dagbag):
    ms = make_ms()
    _sales(ms, {"2026-01-01": 3, "2026-01-02": 1, "2026-01-03": 2})

    run = dagbag.get_dag("acid_compact").test(run_conf={**COMPACT, "table": "sales"})

    assert run.state == "success"
    ids = returned(run, "enqueue")
    assert {ms.compactions.get(i).partition for i in ids} == {"ds=2026-01-01", "ds=2026-01-03"}
    outcome = returned(run, "enqueue", key="outcome")
    assert outcome["ok"] is True and outcome["compaction_ids"] == ids
    assert outcome["partitions"] == ["ds=2026-01-01", "ds=2026-01-03"]
    assert sorted(entry.id for entry in ms.compactions.initiated()) == sorted(ids)  # acid_worker runs them
    assert _rendered_map_indexes(run, "enqueue") == ["default.sales (every partition that needs it)"]

    again = dagbag.get_dag("acid_compact").test(run_conf={**COMPACT, "table": "sales"})

    assert again.state == "success" and returned(again, "enqueue") == ids  # already queued: the same ids


def test_no_partition_needing_compaction_ends_skipped_with_the_reason(acid_connection, make_ms, dagbag):
    ms = make_ms()
    _sales(ms, {"2026-01-01": 1, "2026-01-02": 1})

    run = dagbag.get_dag("acid_compact").test(run_conf={**COMPACT, "table": "sales"})

    assert run.state == "success"
    assert task_states(run) == {"enqueue": "skipped", "run_now": "skipped", "compact": "skipped"}
    assert returned(run, "enqueue", key="outcome") == {
        "ok": True, "reason": "acid_compact: no partition of default.sales has anything to compact; nothing queued",
        "database": "default", "table": "sales", "partition": None, "compaction_ids": []}
    assert ms.compactions.show() == []


# --- on Spark: asset events that name the compaction, refusals skipped -----------------------------------------------
@pytest.mark.spark
def test_compactions_emit_events_naming_them_and_a_refused_one_is_skipped(acid_connection, make_ms, dagbag):
    """A compaction's events carry database, table, partition, id and type, on `acid_compacted` and on the table's
    own asset; a compaction the worker refuses (nothing to compact) is skipped with Hive's reason and emits none."""
    from acid_core.compaction.worker import REFUSED_MESSAGE
    from acid_core.metastore.codes import CompactionState

    ms = make_ms()
    _sales(ms, {"2026-01-01": 2, "2026-01-02": 1})
    before, table_before = len(_events("acid_compacted")), len(_events("acid_compacted.default.sales"))
    compact = dagbag.get_dag("acid_compact")

    run = compact.test(run_conf={**COMPACT, "table": "sales", "wait": True})

    assert run.state == "success"
    [compaction_id] = returned(run, "enqueue")
    assert task_states(run) == {"enqueue": "success", "run_now": "success", "compact[0]": "success"}
    assert returned_all(run, "compact")[0]["state"] == "ready for cleaning"
    assert _rendered_map_indexes(run, "compact") == [f"{compaction_id}: major default.sales partition ds=2026-01-01"]
    extra = {"database": "default", "table": "sales", "partition": "ds=2026-01-01", "compaction_id": compaction_id,
             "type": "MAJOR"}
    assert _events("acid_compacted")[before:] == [extra]
    assert _events("acid_compacted.default.sales")[table_before:] == [extra]

    refused = compact.test(run_conf={**COMPACT, "table": "sales", "partition": "ds=2026-01-02", "wait": True})

    assert refused.state == "success"  # Hive's refusal is not a failure
    assert task_states(refused) == {"enqueue": "success", "run_now": "success", "compact[0]": "skipped"}
    [summary] = returned_all(refused, "compact")
    assert (summary["state"], summary["message"]) == ("refused", REFUSED_MESSAGE)
    assert ms.compactions.get(summary["compaction_id"]).state is CompactionState.REFUSED
    assert len(_events("acid_compacted")) == before + 1  # no event for the refused one
    assert len(_events("acid_compacted.default.sales")) == table_before + 1
