"""Metrics, progress and alerts through the real DAGs (`dag.test()`): a StatsD listener on loopback receives the
README's `acid.*` metrics while a real spark-submit compaction and a cleaning run; the compaction task logs its Spark
application id (also its HadoopJobId) and progress lines; the configured notifier fires on a failed compaction, on
the failed threshold and on a compaction working too long.

Airflow's `[metrics]` settings are read from the environment when the StatsD client is made, so the module sets them
(and points Airflow's task-side Stats at the listener) before its first DAG run, and puts them back afterwards.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time

import pytest

from dag_support import COLUMNS, dirs, insert, returned, returned_all, task_states

from airflow.sdk.bases.notifier import BaseNotifier

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


class StatsdListener:
    """A UDP StatsD sink on 127.0.0.1: every received line, in order."""

    def __init__(self) -> None:
        self.socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.socket.bind(("127.0.0.1", 0))
        self.socket.settimeout(0.2)
        self.port = self.socket.getsockname()[1]
        self.lines: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._receive, daemon=True)
        self._thread.start()

    def _receive(self) -> None:
        while not self._stop.is_set():
            try:
                data = self.socket.recv(65535)
            except OSError:
                continue
            self.lines.extend(data.decode().splitlines())

    def values(self, name: str, kind: str) -> list[float]:
        """The values received for `airflow.<name>` of StatsD type `kind` (c, g, ms)."""
        time.sleep(0.3)  # UDP: let the last packets arrive
        found = []
        for line in list(self.lines):
            metric, _, rest = line.partition(":")
            value, _, metric_kind = rest.partition("|")
            if metric == f"airflow.{name}" and metric_kind.split("|")[0] == kind:
                found.append(float(value))
        return found

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.socket.close()


@pytest.fixture(scope="module")
def statsd(tmp_path_factory):
    """Airflow's metrics on, to a listener of this module; the notifier records to a file. Undone at the end."""
    from airflow.sdk.observability import stats
    from airflow.sdk.observability.metrics import stats_utils

    from acid_plugin.metrics import close_client

    listener = StatsdListener()
    alerts = tmp_path_factory.mktemp("alerts") / "alerts.jsonl"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AIRFLOW__METRICS__STATSD_ON", "True")
        patch.setenv("AIRFLOW__METRICS__STATSD_HOST", "127.0.0.1")
        patch.setenv("AIRFLOW__METRICS__STATSD_PORT", str(listener.port))
        patch.setenv("AIRFLOW__METRICS__STATSD_PREFIX", "airflow")
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
    from acid_core.metastore.compactions import CompactionState, CompactionType

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
    gauges = returned(housekept, "metrics")
    assert gauges["acid.compaction_num_initiated"] == 0 and gauges["acid.num_open_transactions"] == 0
    for name, value in gauges.items():
        assert statsd.values(name, "g")[-1] == value


def _files(location: str, name: str):
    from acid_core.fs import FileSystem

    fs, path = FileSystem.resolve(location)
    return [e for e in fs.list_dir(fs.join(path, name)) if not e.is_dir]


@pytest.mark.airflow
def test_notifier_fires_on_a_failed_compaction_and_on_the_failed_threshold(acid_connection, make_ms, dagbag, statsd,
                                                                           monkeypatch):
    from acid_core.metastore.compactions import CompactionType

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


@pytest.mark.airflow
def test_housekeeping_alerts_once_on_a_compaction_working_too_long(acid_connection, make_ms, dagbag, statsd):
    from acid_core.metastore.compactions import CompactionType

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
    assert returned(first, "metrics")["acid.compaction_num_working"] == 1
    assert statsd.values("acid.compaction_num_working", "g")[-1] == 1
    assert statsd.values("acid.compaction_oldest_working_age_in_sec", "g")[-1] >= 1
