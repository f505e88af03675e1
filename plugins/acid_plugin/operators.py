"""`AcidCompactionOperator`: run one queued compaction with the apache-spark provider's SparkSubmitOperator.

The Spark application is `spark_jobs/compact.py`; the driver follows Hive's worker protocol and records the outcome
in the compaction queue. What the entry's state means before and after the run is decided by the core
(`acid_core.compaction.attempt`, shared with `acid compact run` and the worker); this operator only maps the verdict
to Airflow: compacted or already compacted succeed (their asset events name the compaction in `extra`), refused
for lack of work (Hive's refusal, not a failure), aborted (ABORT COMPACTIONS, the ACID view's Abort, before or while
the task ran: what the operator asked for, not a failure) and held by another worker are skipped (no asset event), a
killed driver is a retryable failure, anything else fails the task with the queue's one-line error message. The
metastore URL reaches the driver through its environment (never on the command line, which spark-submit and Airflow
log), so client deploy mode is required: the driver runs where the task runs, like Hive's worker thread, on this
interpreter. On a cluster master the executors get the code and a Python environment from `acid_core.shipping`, as
the connection's `acid-*` extra keys choose; this worker's interpreter path never reaches them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import sys
import tempfile
import time
from collections.abc import Sequence
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk.exceptions import AirflowException, AirflowFailException, AirflowSkipException

COMPACTION_POOL = "acid_compaction"  # the Airflow pool; its slots are hive.compactor.worker.threads


def compact_job_path() -> str:
    """Absolute path of spark_jobs/compact.py (found without importing pyspark)."""
    import importlib.util

    spec = importlib.util.find_spec("spark_jobs")
    if spec is None or not spec.submodule_search_locations:
        raise AirflowFailException("the spark_jobs package is not importable: install this project (pip install -e .)")
    return os.path.join(list(spec.submodule_search_locations)[0], "compact.py")


class AcidCompactionOperator(SparkSubmitOperator):
    """Runs compaction `compaction_id` of the `acid_metastore` connection's queue as a spark-submit job.

    Returns `{"compaction_id", "table", "partition", "type", "state", "message"}`. An entry that another worker
    holds is skipped; one compacted already is reported without running anything; a refused or failed one fails the
    task (`acid_core.compaction.attempt.before_run`); one the run refuses for lack of work, and one aborted before or
    while the task ran, is skipped ("... aborted by <who or what>"; its summary is still the XCom `return_value`,
    and `acid.compaction_aborted` counts it). On success an `Asset` outlet's event gets `extra`
    `{"database", "table", "partition", "compaction_id", "type"}`, and an `AssetAlias` outlet adds an event with it
    on the table's asset (`acid_plugin.assets.table_asset`). Mapped instances can be
    labelled in the UI with `map_index_template="{{ acid_compaction }}"` ("4: major db.table partition ds=1").
    """

    template_fields: Sequence[str] = (*SparkSubmitOperator.template_fields, "compaction_id")
    ui_color = "#f4a460"

    def __init__(self, *, compaction_id: int | str | None, acid_metastore_conn_id: str = "acid_metastore",
                 conn_id: str = "spark_default", failed_threshold: int | None = None, **kwargs: Any) -> None:
        kwargs.setdefault("name", "acid-compaction")
        super().__init__(conn_id=conn_id, **kwargs)
        self.compaction_id = compaction_id
        self.acid_metastore_conn_id = acid_metastore_conn_id
        self.failed_threshold = failed_threshold  # the alert's failed.compacts.threshold (None: Hive's default, 2)

    def execute(self, context) -> dict:
        from acid_core.compaction.attempt import Result, after_run, before_run, describe
        from acid_core.compaction.job_conf import compaction_spark_conf
        from acid_core.errors import AcidError
        from acid_core.shipping import combine_conf
        from acid_plugin.hooks import AcidMetastoreHook

        compaction_id = int(self.compaction_id)
        metastore_hook = AcidMetastoreHook(self.acid_metastore_conn_id)
        with metastore_hook.metastore() as metastore:
            before = before_run(metastore.compactions.get(compaction_id), compaction_id)
        if before.entry is None:
            raise AirflowFailException(f"{before.message} in the metastore of connection "
                                       f"{self.acid_metastore_conn_id!r}")
        entry = before.entry
        context["acid_compaction"] = f"{compaction_id}: {entry.type.display.lower()} {describe(entry)}"  # map label
        if before.result is Result.NOTHING_TO_DO:
            self.log.info("%s", before.message)
            _describe_events(context, self.outlets, entry)
            return _summary(entry, before.message)
        if before.result is Result.ABORTED:  # aborted while this task waited for its turn: the abort is the outcome
            self._metrics_and_alerts(context, metastore_hook, before, {})
            raise self._skip(context, before)
        if before.result is not Result.RUN:
            raise _airflow_error(before)

        worker_id = _worker_id(context, compaction_id)
        with metastore_hook.metastore() as metastore:
            table = metastore.catalog.get_table(entry.database, entry.table)
            database = metastore.catalog.get_database(entry.database)
        try:  # the job's Spark settings: the request's compactor.spark.* properties, the table's, the database's
            job_conf = compaction_spark_conf(table.params, entry.properties, configured=self.conf,
                                             database_params=database.params)
        except AcidError as exc:
            raise AirflowFailException(f"compaction {compaction_id}: {exc}") from None
        shipped = self._executor_conf(compaction_id)  # {} on local masters: this interpreter, as before
        self.conf = combine_conf({**(self.conf or {}), **job_conf}, shipped)
        self.name = f"acid-compaction-{compaction_id}"
        self.application = self.application or compact_job_path()
        result_dir = tempfile.mkdtemp(prefix=f"acid-compaction-{compaction_id}-")
        result_file = os.path.join(result_dir, "result.json")  # the driver's numbers for the metrics
        self.application_args = ["--compaction-id", str(compaction_id), "--worker-id", worker_id,
                                 "--result-file", result_file]
        self.conf.setdefault("spark.driver.extraJavaOptions", quiet_driver_java_options())
        self.env_vars = self._driver_env(metastore_hook, shipped, self.env_vars)
        self.log.info("%s as worker %s (%s)", before.message, worker_id,
                      ", ".join(f"{key}={value}" for key, value in sorted({**job_conf, **shipped}.items())))
        submit_error: AirflowException | OSError | None = None
        try:
            super().execute(context)
        except (AirflowException, OSError) as exc:  # the queue entry says what happened; the exit status does not
            submit_error = exc
        finally:
            self._close_submit_pipe()
        with metastore_hook.metastore() as metastore:
            after = after_run(metastore, compaction_id, worker_id=worker_id,
                              launch_error=str(submit_error) if submit_error is not None else None)
        self._metrics_and_alerts(context, metastore_hook, after, _read_stats(result_dir, result_file))
        if after.warning:
            self.log.warning("%s", after.warning)
        if after.result is Result.ABORTED:  # what the operator asked for, whatever the driver said: no asset event
            raise self._skip(context, after)
        if not after.ok:
            raise _airflow_error(after)
        if after.result is Result.REFUSED:  # Hive's refusal (not enough to compact): no failure, no asset event
            context["ti"].xcom_push(key="return_value", value=_summary(after.entry, after.message))
            raise AirflowSkipException(f"compaction {compaction_id} of {describe(after.entry)} refused: "
                                       f"{after.message}")
        self.log.info("%s", after.message)
        _describe_events(context, self.outlets, after.entry)
        return _summary(after.entry, after.message)

    def _driver_env(self, metastore_hook, shipped: dict[str, str], own: dict[str, str] | None) -> dict[str, str]:
        """spark-submit's environment (its driver's too): the metastore URL and password, the warehouse, this
        interpreter for the driver, the executors' Python, SPARK_LOCAL_IP on loopback for a local master on a host
        whose name resolves to loopback (`acid_core.compaction.job_conf.local_driver_environment`, so Spark does not
        warn about it), then the operator's own `env_vars`, which win."""
        from acid_core.compaction.job_conf import local_driver_environment
        from acid_core.metastore.engine import driver_environment

        master = self._get_hook()._connection["master"]
        return {
            **driver_environment(metastore_hook.get_url()),  # the password apart from the URL
            "ACID_WAREHOUSE": metastore_hook.get_warehouse(),
            # spark-submit gives the executors PYSPARK_PYTHON (spark.pyspark.python wins over it): on a cluster, the
            # shipped Python, which replaces any PYSPARK_PYTHON of this worker's own environment
            "PYSPARK_PYTHON": shipped.get("spark.pyspark.python", sys.executable),
            "PYSPARK_DRIVER_PYTHON": sys.executable,
            "PATH": os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")]),
            **local_driver_environment(master, {**os.environ, **(own or {})}),
            **(own or {}),
        }

    def _get_hook(self):
        """The provider's hook, whose task-log lines leave out what Spark and pyspark print that cannot be turned
        off where it is printed (`without_known_noise`)."""
        hook = super()._get_hook()
        process = hook._process_spark_submit_log
        hook._process_spark_submit_log = lambda lines: process(without_known_noise(lines))
        return hook

    def _skip(self, context, verdict) -> AirflowSkipException:
        """An aborted compaction's ending: its summary as the XCom `return_value`, its message logged and skipped."""
        self.log.info("%s", verdict.message)
        context["ti"].xcom_push(key="return_value", value=_summary(verdict.entry, verdict.message))
        return AirflowSkipException(verdict.message)

    def _metrics_and_alerts(self, context, metastore_hook, after, run_stats: dict) -> None:
        """Emit the run's metrics (acid_plugin.metrics); on a failure, alert (acid_plugin.alerts): the compaction
        failed, and its partition reached failed.compacts.threshold when it did. Neither changes the outcome."""
        from acid_core import alerts
        from acid_core.compaction.codes import CompactionState
        from acid_core.compaction.initiator import FAILED_THRESHOLD
        from acid_core.errors import AcidError
        from acid_plugin.alerts import send_alerts
        from acid_plugin.metrics import emit_compaction

        entry = after.entry
        if entry is None:
            return
        try:
            outcome = "failed" if entry.state is CompactionState.FAILED else after.result.value
            emit_compaction(compaction_type=entry.type.display, outcome=outcome, stats_of_run=run_stats)
        except Exception as exc:  # metrics never fail a compaction
            self.log.warning("metrics not sent: %s: %s", type(exc).__name__, exc)
        if entry.state is not CompactionState.FAILED:
            return
        found = [alerts.compaction_failed(entry, after.message)]
        threshold = FAILED_THRESHOLD if self.failed_threshold is None else int(self.failed_threshold)
        try:
            with metastore_hook.metastore() as metastore:
                reached = alerts.failed_threshold_reached(metastore, entry, threshold=threshold)
        except AcidError as exc:
            self.log.warning("failed threshold not checked: %s", exc)
            reached = None
        send_alerts(context, found + ([reached] if reached is not None else []))

    def _executor_conf(self, compaction_id: int) -> dict[str, str]:
        """`acid_core.shipping.executor_conf` for the `conn_id` connection's master and `acid-*` extra keys.

        Raises:
            AirflowFailException: a bad `acid-*` extra, cluster deploy mode, or the executors' code or environment
                cannot be built (the message names the key or the cause).
        """
        from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

        from acid_core.shipping import ShippingError, executor_conf, options_from_extra

        connection = self._get_hook()._connection  # the master and deploy mode the submission will use
        master, deploy_mode = connection["master"], connection["deploy_mode"]
        try:
            options = options_from_extra(SparkSubmitHook.get_connection(self._conn_id).extra_dejson)
            if deploy_mode == "cluster":
                raise ShippingError(f"deploy-mode 'cluster' of connection {self._conn_id!r} is not supported: the "
                                    "driver runs Hive's worker protocol in this task (client mode)")
            started = time.monotonic()
            shipped = executor_conf(master, options)
        except ShippingError as exc:
            raise AirflowFailException(f"compaction {compaction_id}: connection {self._conn_id!r}: {exc}") from None
        if shipped:
            self.log.info("executors on %s get the shipped code and Python %s (ready in %.1f s)", master,
                          shipped["spark.pyspark.python"], time.monotonic() - started)
        return shipped

    def _close_submit_pipe(self) -> None:
        """The provider's hook reads spark-submit's output to the end but leaves the pipe open."""
        process = getattr(self._hook, "_submit_sp", None) if self._hook is not None else None
        if process is not None and process.stdout is not None and not process.stdout.closed:
            process.stdout.close()


def quiet_driver_java_options() -> str:
    """The driver JVM's log4j2 configuration shipped with the job (spark_jobs/log4j2.properties: warnings and
    errors only), so Spark's start-up chatter stays out of the task log."""
    path = os.path.join(os.path.dirname(compact_job_path()), "log4j2.properties")
    return f"-Dlog4j2.configurationFile=file:{path}"


# What spark-submit prints that cannot be turned off where it is printed, each matched whole (a line that says anything
# more, or anything else, stays in the task log):
KNOWN_NOISE = (
    # The driver JVM: Spark 4's launcher always adds --add-modules=jdk.incubator.vector (JavaModuleOptions), and the
    # JDK prints this for any incubator module it resolves (ModuleBootstrap.checkIncubatingStatus), with no option.
    re.compile(r"WARNING: Using incubator modules: jdk\.incubator\.vector"),
    # Every Python worker, at every task, when spark.executor.pyspark.memory caps it (the cap is wanted: acid_core's
    # job_conf sets 2g): pyspark.worker_util.setup_memory_limits prints these two (each followed by an empty line)
    # unconditionally. A limit that cannot be set ("Failed to set memory limit: ...") is not matched.
    re.compile(r"Current mem limits: -?\d+ of max -?\d+"),
    re.compile(r"Setting mem limits to \d+ of max \d+"),
)


def without_known_noise(lines):
    """`lines` (spark-submit's output) without those of KNOWN_NOISE, and without the empty line that follows one."""
    dropped = False
    for line in lines:
        text = line.strip()
        if any(pattern.fullmatch(text) for pattern in KNOWN_NOISE) or (dropped and not text):
            dropped = bool(text)
            continue
        dropped = False
        yield line


def _read_stats(result_dir: str, result_file: str) -> dict:
    """The `stats` of the driver's result file ({} when it wrote none), and the file's directory removed."""
    try:
        with open(result_file, encoding="utf-8") as handle:
            stats = json.load(handle).get("stats") or {}
    except (OSError, ValueError, AttributeError):
        stats = {}
    shutil.rmtree(result_dir, ignore_errors=True)
    return stats if isinstance(stats, dict) else {}


def _airflow_error(verdict) -> AirflowException:
    """The Airflow ending of a verdict that is not a success: held by another worker -> skipped; a run that died
    (housekeeping puts the entry back) -> a failure Airflow may retry; anything else -> a failure without retries."""
    from acid_core.compaction.attempt import Result

    if verdict.result is Result.BUSY:
        return AirflowSkipException(verdict.message)
    if verdict.result is Result.INTERRUPTED:
        return AirflowException(verdict.message)
    return AirflowFailException(verdict.message)


def _describe_events(context, outlets, entry) -> None:
    """What this success's asset events say: the `acid_compacted` outlet's `extra` names the compaction, and through
    an `AssetAlias` outlet (`acid_plugin.assets.COMPACTED_TABLES`) the table's own asset gets an event with the same
    `extra` (Airflow 3 outlet events)."""
    from airflow.sdk import Asset, AssetAlias

    from acid_plugin.assets import table_asset

    extra = {"database": entry.database, "table": entry.table, "partition": entry.partition,
             "compaction_id": entry.id, "type": entry.type.display}
    events = context["outlet_events"]
    for outlet in outlets or ():
        if isinstance(outlet, AssetAlias):
            events[outlet].add(table_asset(entry.database, entry.table), extra=extra)
        elif isinstance(outlet, Asset):
            events[outlet].extra = dict(extra)


def _summary(entry, message: str) -> dict:
    return {"compaction_id": entry.id, "table": f"{entry.database}.{entry.table}", "partition": entry.partition,
            "type": entry.type.display, "state": entry.state.display, "message": message}


def _worker_id(context, compaction_id: int) -> str:
    """`<host>-airflow.<dag>.<task>[<map index>].try<n>`: which task attempt holds the compaction. SHOW COMPACTIONS
    splits a worker id at its last "-" into host and worker (Hive's `host-threadId`), so the task part has none."""
    ti = context["ti"]
    index = f"[{ti.map_index}]" if getattr(ti, "map_index", -1) >= 0 else ""
    task = re.sub(r"[^A-Za-z0-9_.\[\]]", "_", f"airflow.{ti.dag_id}.{ti.task_id}{index}.try{ti.try_number}")
    return f"{socket.gethostname()}-{task}"[:128]
