"""Metrics, progress and alerts through the real DAGs (`dag.test()`): a StatsD listener on loopback receives the
documented `acid.*` metrics while a real spark-submit compaction and a cleaning run (every name received is in the
metrics table of docs/operations.md; the `type` tag is on the wire, InfluxDB style); the compaction task logs its Spark
application id (also its HadoopJobId) and progress lines; the configured notifier fires on a failed compaction, on
the failed threshold, on a compaction working too long, and once per level on the threshold rules.

Airflow's `[metrics]` settings are read from the environment when the StatsD client is made, so the module sets them
(and points Airflow's task-side Stats at the listener) before its first DAG run, and puts them back afterwards.
"""

from __future__ import annotations

import json
import re
import time

import pytest
from airflow.sdk.bases.notifier import BaseNotifier
from support import statsd_support
from support.dag_support import COLUMNS, dirs, insert, returned, returned_all, task_states
from support.metrics_docs import documented_metrics

# Airflow's own stats.initialize (airflow.sdk._shared.observability.metrics.stats, run again by airflow.sdk.serde)
# drops a StatsD client without closing its socket.
pytestmark = pytest.mark.filterwarnings(
    "ignore:Exception ignored in. <socket.socket:pytest.PytestUnraisableExceptionWarning")

WORKER = {"max_compactions": 100}
CLEANER = {"dry_run": False, "retention_seconds": 0, "retry_retention_seconds": 300, "max_attempts": 5,
           "trash_dir": None}
HOUSEKEEPING = {"worker_timeout_seconds": 86400, "txn_timeout_seconds": 300, "lease_timeout_seconds": 300,
                "history_succeeded": 3, "history_failed": 3, "history_did_not_initiate": 2, "history_refused": 3,
                "history_timeout_seconds": 604800, "working_warning_seconds": 7200}


class RecordingNotifier(BaseNotifier):
    """Appends each alert (its templated `line`) to a JSON-lines file: what a deployment's notifier would send."""

    template_fields = ("line",)

    def __init__(self, *, path: str, line: str = "{{ acid_alert.kind }}|{{ acid_alert.summary }}") -> None:
        super().__init__()
        self.path, self.line = path, line

    def notify(self, context) -> None:
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps({"line": self.line, "alert": context["acid_alert"],
                                     "dag_id": context["dag"].dag_id}) + "\n")


class StatsdListener(statsd_support.StatsdListener):
    """The shared StatsD sink, plus the check of what it received against docs/operations.md."""

    def undocumented(self) -> set[str]:
        """The `acid.*` names received that the metrics table of docs/operations.md does not list (or with another
        type)."""
        kinds = {"c": "counter", "g": "gauge", "ms": "timer"}
        documented = documented_metrics()
        return {f"{name} ({kind})" for name, _, _, kind in self.received() if name.startswith("airflow.acid.")
                and documented.get(name.removeprefix("airflow.acid.")) != kinds.get(kind)}


@pytest.fixture(scope="module")
def statsd(tmp_path_factory):
    """Airflow's metrics on, to a listener of this module; the notifier records to a file. Undone at the end."""
    from acid_plugin.metrics import close_client
    from airflow.sdk.observability import stats
    from airflow.sdk.observability.metrics import stats_utils

    listener = StatsdListener()
    alerts = tmp_path_factory.mktemp("alerts") / "alerts.jsonl"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AIRFLOW__METRICS__STATSD_ON", "True")
        patch.setenv("AIRFLOW__METRICS__STATSD_HOST", "127.0.0.1")
        patch.setenv("AIRFLOW__METRICS__STATSD_PORT", str(listener.port))
        patch.setenv("AIRFLOW__METRICS__STATSD_PREFIX", "airflow")
        patch.setenv("AIRFLOW__METRICS__STATSD_INFLUXDB_ENABLED", "True")  # tags on the wire: `name,type=major:1|c`
        patch.setenv("ACID_NOTIFIER", f"{__name__}.RecordingNotifier")
        patch.setenv("ACID_NOTIFIER_KWARGS", json.dumps({"path": str(alerts)}))
        patch.setenv("ACID_PROGRESS_SECONDS", "0.5")
        close_client()
        stats.initialize(factory=stats_utils.get_stats_factory(), export_legacy_names=False)  # a client to our port
        listener.alerts = alerts
        yield listener
    close_client()
    stats.initialize(factory=stats_utils.get_stats_factory(), export_legacy_names=False)  # metrics off again
    listener.close()


def _alerts(listener) -> list[dict]:
    if not listener.alerts.exists():
        return []
    return [json.loads(line) for line in listener.alerts.read_text().splitlines()]


def _table(ms, name: str, batches: int, rows: int) -> None:
    ms.catalog.create_table("default", name, COLUMNS, params={"transactional": "true"})
    for batch in range(batches):
        insert(ms, name, None, [(batch * rows + i, f"row {batch * rows + i}") for i in range(rows)])


@pytest.mark.airflow
@pytest.mark.spark
def test_a_compaction_and_its_cleaning_send_the_documented_metrics_and_log_progress(acid_connection, make_ms,
                                                                                     dagbag, statsd, capfd):
    from acid_core.metastore.codes import CompactionState, CompactionType

    ms = make_ms()
    _table(ms, "sales", 3, 2_000)
    location = ms.catalog.get_table("default", "sales").location
    compaction_id = ms.compactions.enqueue("default", "sales", None, CompactionType.MAJOR).compaction_id
    capfd.readouterr()

    worked = dagbag.get_dag("acid_worker").test(run_conf=WORKER)

    assert worked.state == "success", task_states(worked)
    assert returned_all(worked, "compact")[0]["compactions"][0]["state"] == "ready for cleaning"
    output = "".join(capfd.readouterr())
    entry = ms.compactions.get(compaction_id)
    assert re.fullmatch(r"local-\d+/job\d+", entry.hadoop_job_id or ""), entry.hadoop_job_id  # application, job
    application = entry.hadoop_job_id.split("/")[0]
    assert f"compaction batch: Spark application {application}, UI http" in output
    assert f"compaction {compaction_id}: major compaction of default.sales in Spark application {application}" in output
    assert re.search(rf"progress: compaction {compaction_id}: \d+ s: ", output), output[-3000:]
    assert "INFO SparkContext" not in output and "Running Spark version" not in output  # start-up chatter
    [base] = [name for name in dirs(location) if name.startswith("base_")]
    fs_bytes = sum(e.size for e in _files(location, base))
    assert statsd.values("acid.compaction_compacted", "c") == [1]
    assert statsd.values("acid.compaction_compacted", "c", type="major") == [1]  # the documented `type` tag
    assert statsd.values("acid.compaction_events_read", "c") == [6_000]
    assert statsd.values("acid.compaction_events_written", "c") == [6_000]
    assert statsd.values("acid.compaction_bytes_written", "c") == [fs_bytes]
    [bytes_read] = statsd.values("acid.compaction_bytes_read", "c")
    [duration_ms] = statsd.values("acid.compaction_duration", "ms")
    assert bytes_read > 0 and 0 < duration_ms < 600_000

    cleaned = dagbag.get_dag("acid_cleaner").test(run_conf=CLEANER)

    assert cleaned.state == "success"
    assert ms.compactions.show(compaction_id=compaction_id)[0].state is CompactionState.SUCCEEDED
    assert ms.compactions.show(compaction_id=compaction_id)[0].hadoop_job_id == entry.hadoop_job_id
    assert statsd.values("acid.cleaner_cleaned", "c") == [1]
    assert statsd.values("acid.cleaner_directories_removed", "c") == [3]
    assert statsd.values("acid.cleaner_bytes_removed", "c") == [bytes_read]  # the three deltas it read

    housekept = dagbag.get_dag("acid_housekeeping").test(run_conf=HOUSEKEEPING)

    assert housekept.state == "success"
    gauges = returned(housekept, "metrics")["gauges"]
    assert gauges["acid.compaction_num_initiated"] == 0 and gauges["acid.num_open_transactions"] == 0
    assert gauges["acid.compaction_num_workers"] == 1  # this host's worker, within the hour
    assert gauges["acid.compaction_num_obsolete_deltas"] == 0  # cleaned: nothing queued, nothing listed
    for name, value in gauges.items():
        assert statsd.values(name, "g")[-1] == value
    assert statsd.undocumented() == set()


def _files(location: str, name: str):
    from acid_core.storage.fs import FileSystem

    fs, path = FileSystem.resolve(location)
    return [e for e in fs.list_dir(fs.join(path, name)) if not e.is_dir]


@pytest.mark.airflow
def test_notifier_fires_on_a_failed_compaction_and_on_the_failed_threshold(acid_connection, make_ms, dagbag, statsd,
                                                                           monkeypatch):
    from acid_core.metastore.codes import CompactionType

    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps(  # a spark-submit that cannot start: failed
        {"conn_type": "spark", "host": "local[2]", "extra": {"spark-binary": "spark3-submit"}}))
    ms = make_ms()
    _table(ms, "t", 2, 2)
    before = len(_alerts(statsd))
    failed_before = statsd.values("acid.compaction_failed", "c")
    ids = []
    for _ in range(2):
        ids.append(ms.compactions.enqueue("default", "t", None, CompactionType.MAJOR).compaction_id)
        run = dagbag.get_dag("acid_worker").test(run_conf=WORKER)
        assert run.state == "failed" and task_states(run)["compact[0]"] == "failed"

    alerts = _alerts(statsd)[before:]
    kinds = [a["alert"]["kind"] for a in alerts]
    assert kinds == ["compaction_failed", "compaction_failed", "failed_threshold_reached"]
    assert [a["alert"]["compaction_id"] for a in alerts] == [ids[0], ids[1], ids[1]]
    assert alerts[0]["line"].startswith(f"compaction_failed|compaction {ids[0]} (major) of default.t failed: ")
    assert "the last 2 compactions failed" in alerts[2]["line"] and alerts[2]["dag_id"] == "acid_worker"
    assert len(statsd.values("acid.compaction_failed", "c")) == len(failed_before) + 2
    assert statsd.undocumented() == set()


@pytest.mark.airflow
def test_housekeeping_alerts_once_on_a_compaction_working_too_long(acid_connection, make_ms, dagbag, statsd):
    from acid_core.metastore.codes import CompactionType

    ms = make_ms()
    _table(ms, "slow", 1, 1)
    compaction_id = ms.compactions.enqueue("default", "slow", None, CompactionType.MAJOR).compaction_id
    ms.compactions.claim(worker_id="host-stuck", compaction_id=compaction_id)
    ms.compactions.set_hadoop_job_id(compaction_id, "local-7", worker_id="host-stuck")
    time.sleep(1.1)
    before = len(_alerts(statsd))
    conf = {**HOUSEKEEPING, "working_warning_seconds": 1}

    first = dagbag.get_dag("acid_housekeeping").test(run_conf=conf)
    second = dagbag.get_dag("acid_housekeeping").test(run_conf=conf)

    assert first.state == second.state == "success"
    assert returned(first, "alert_long_running") == [compaction_id]
    assert returned(second, "alert_long_running") == []  # once per attempt
    [alert] = _alerts(statsd)[before:]
    assert alert["alert"]["kind"] == "working_too_long" and "job local-7" in alert["line"]
    assert returned(first, "metrics")["gauges"]["acid.compaction_num_working"] == 1
    assert statsd.values("acid.compaction_num_working", "g")[-1] == 1
    assert statsd.values("acid.compaction_oldest_working_age_in_sec", "g")[-1] >= 1
    assert statsd.undocumented() == set()


@pytest.mark.airflow
def test_threshold_rules_alert_once_per_level_with_the_partition_and_the_deployments_thresholds(
        acid_connection, make_ms, dagbag, statsd, monkeypatch):
    from airflow.models import Variable

    from acid_core.compaction.worker import CompactionWorker
    from acid_core.metastore.codes import CompactionType

    Variable.delete("acid_alert_levels.acid_metastore")  # levels another test's metastore left
    ms = make_ms()
    _table(ms, "piled", 3, 2)
    _table(ms, "waiting", 1, 1)
    compacted = ms.compactions.enqueue("default", "piled", None, CompactionType.MAJOR).compaction_id
    CompactionWorker(ms, job_id="local-9").run(compacted)  # ready for cleaning: its three deltas are obsolete
    ms.compactions.enqueue("default", "waiting", None, CompactionType.MAJOR)
    time.sleep(1.1)
    monkeypatch.setenv("ACID_ALERT_RULES", json.dumps({"oldest_initiated_compaction": {"warning": 0.5},
                                                       "obsolete_deltas": {"warning": 2}}))
    before = len(_alerts(statsd))

    first = dagbag.get_dag("acid_housekeeping").test(run_conf=HOUSEKEEPING)
    second = dagbag.get_dag("acid_housekeeping").test(run_conf=HOUSEKEEPING)
    monkeypatch.setenv("ACID_ALERT_RULES", json.dumps({"oldest_initiated_compaction": {"warning": 0.5,
                                                                                        "critical": 1}}))
    third = dagbag.get_dag("acid_housekeeping").test(run_conf=HOUSEKEEPING)

    assert first.state == second.state == third.state == "success"
    assert sorted(returned(first, "alert_thresholds")) == ["obsolete_deltas", "oldest_initiated_compaction"]
    assert returned(second, "alert_thresholds") == []  # the same levels: not again
    assert returned(third, "alert_thresholds") == ["oldest_initiated_compaction"]  # risen to critical
    sent = [a["alert"] for a in _alerts(statsd)[before:]]
    assert [(a["kind"], a["level"]) for a in sent] == [
        ("oldest_initiated_compaction", "warning"), ("obsolete_deltas", "warning"),
        ("oldest_initiated_compaction", "critical")]
    obsolete = sent[1]
    assert obsolete["summary"].startswith("default.piled has 3 obsolete deltas still on disk (over 2: warning, ")
    assert (obsolete["metric"], obsolete["value"], obsolete["threshold"]) == ("compaction_num_obsolete_deltas", 3, 2)
    assert returned(first, "metrics")["gauges"]["acid.compaction_num_active_deltas"] == 1  # waiting's one delta
    assert statsd.values("acid.compaction_num_obsolete_deltas", "g")[-1] == 3
    assert statsd.undocumented() == set()

    monkeypatch.setenv("ACID_ALERT_RULES", json.dumps({"no_such_rule": {"warning": 1}}))
    refused = dagbag.get_dag("acid_housekeeping").test(run_conf=HOUSEKEEPING)
    assert task_states(refused)["alert_thresholds"] == "failed"
    assert task_states(refused)["metrics"] == "success"


@pytest.mark.airflow
def test_every_counter_and_timer_reaches_the_wire_under_its_documented_name_and_type_tag(statsd):
    from acid_plugin.metrics import emit_cleaning, emit_compaction, emit_metastore_outages

    from acid_core.compaction.cleaner import CleanResult
    from acid_core.metastore.engine import outage_counts
    from acid_core.operations.metrics import COMPACTION_OUTCOMES, all_metrics

    start = len(statsd.lines)
    run = {"duration_seconds": 1.5, "events_read": 10, "events_written": 8, "bytes_read": 100, "bytes_written": 80,
           "metastore_retries": 1}
    for outcome in COMPACTION_OUTCOMES:
        emit_compaction(compaction_type="MINOR", outcome=outcome, stats_of_run=run)
    emit_compaction(compaction_type="MINOR", outcome="something new", stats_of_run={})  # counted as an error
    emit_cleaning([CleanResult(1, "default.t", None, "cleaned", removed=("delta_1_1",), bytes_removed=5)])
    now = outage_counts()
    emit_metastore_outages({"failures": now["failures"] - 1, "gave_up": now["gave_up"] - 1})

    names = {name.removeprefix("airflow.acid.") for name, _, _, kind in statsd.received()[start:] if kind != "g"}
    assert names == {name for name, metric in all_metrics().items() if metric.kind != "gauge"}
    assert statsd.values("acid.compaction_error", "c", type="minor")[-2:] == [1, 1]
    assert statsd.values("acid.compaction_duration", "ms", type="minor")[-1] == 1500
    assert statsd.undocumented() == set()
