"""`AcidCompactionOperator`: run one queued compaction with the apache-spark provider's SparkSubmitOperator.

The Spark application is `spark_jobs/compact.py`; the driver follows Hive's worker protocol and records the outcome
in the compaction queue. What the entry's state means before and after the run is decided by the core
(`acid_core.compaction.attempt`, shared with `acid compact run` and the worker); this operator only maps the verdict
to Airflow: compacted or already compacted succeed (their asset events name the compaction in `extra`), refused
for lack of work (Hive's refusal, not a failure), aborted (ABORT COMPACTIONS, the ACID view's Abort, before or while
the task ran: what the operator asked for, not a failure) and held by another worker are skipped (no asset event), a
killed driver is a retryable failure, anything else fails the task with the queue's one-line error message.

What spark-submit gets is built by `acid_deploy.launch`, as for `acid compact run`: the job file and its
arguments, the settings (this operator's `conf`, the compaction's `compactor.spark.*` properties, the executors' code
and Python from `acid_deploy.shipping` as the Spark connection's `acid-*` extra keys choose) and the driver's
environment (the metastore URL with its password apart, never on the command line, which spark-submit and Airflow
log). So client deploy mode is required: the driver runs where the task runs, like Hive's worker thread, on this
interpreter. The submission goes through the provider's public API: this operator's public attributes, its
SparkSubmitHook's `submit` (spark-submit's whole environment as a Popen argument, so no `env_vars` turn into
`--conf spark.yarn.appMasterEnv.*` settings on a YARN master) and `on_kill`. What that API cannot do is marked where
it is done (`_spark_submit`).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import tempfile
import time
from collections.abc import Sequence
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk.exceptions import AirflowException, AirflowFailException, AirflowSkipException

COMPACTION_POOL = "acid_compaction"  # the Airflow pool; its slots are hive.compactor.worker.threads


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
                 conn_id: str = "spark_default", deploy_mode: str | None = None, failed_threshold: int | None = None,
                 **kwargs: Any) -> None:
        kwargs.setdefault("name", "acid-compaction")
        super().__init__(conn_id=conn_id, deploy_mode=deploy_mode, **kwargs)
        self.compaction_id = compaction_id
        self.acid_metastore_conn_id = acid_metastore_conn_id
        self.spark_conn_id = conn_id  # the provider keeps both of these to itself
        self.deploy_mode = deploy_mode
        self.failed_threshold = failed_threshold  # the alert's failed.compacts.threshold (None: Hive's default, 2)
        self.submit_hook = None  # the provider's hook of the spark-submit running now (on_kill stops it)

    def execute(self, context) -> dict:
        from acid_core.compaction.attempt import Result, after_run, before_run, describe
        from acid_core.errors import InvalidPropertyError
        from acid_deploy import launch
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
        configured = dict(self.conf or {})
        with metastore_hook.metastore() as metastore:
            try:  # the job's Spark settings: the request's compactor.spark.* properties, the table's, the database's
                job_conf = launch.job_conf(metastore, entry, configured=configured)
            except InvalidPropertyError as exc:
                raise AirflowFailException(f"compaction {compaction_id}: {exc}") from None
        master, deploy_mode, shipped = self._executor_conf(compaction_id)  # {} on local masters: this interpreter
        result_dir = tempfile.mkdtemp(prefix=f"acid-compaction-{compaction_id}-")
        result_file = os.path.join(result_dir, "result.json")  # the driver's numbers for the metrics
        try:
            submission = self._submission(
                metastore_hook, name=f"{launch.NAME}-{compaction_id}", master=master, deploy_mode=deploy_mode,
                arguments=launch.compaction_arguments(compaction_id, worker_id=worker_id, result_file=result_file),
                job_conf=job_conf, shipped=shipped, configured=configured, own_environment=self.env_vars,
                application=self.application or None)
            self.log.info("%s as worker %s (%s)", before.message, worker_id,
                          ", ".join(f"{key}={value}" for key, value in sorted({**job_conf, **shipped}.items())))
            submit_error = self._spark_submit(submission)
        finally:
            run_stats = _read_stats(result_dir, result_file)
        with metastore_hook.metastore() as metastore:
            after = after_run(metastore, compaction_id, worker_id=worker_id,
                              launch_error=str(submit_error) if submit_error is not None else None)
        self._metrics_and_alerts(context, metastore_hook, after, run_stats)
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

    def _submission(self, metastore_hook, **parts: Any):
        """`acid_deploy.launch.submission` of `parts` with the metastore and warehouse of the
        `acid_metastore` connection.

        Raises:
            AirflowFailException: the job file cannot be found, or the metastore URL cannot be parsed.
        """
        from acid_core.errors import AcidError
        from acid_deploy import launch

        try:
            return launch.submission(metastore_url=metastore_hook.get_url(), warehouse=metastore_hook.get_warehouse(),
                                     **parts)
        except AcidError as exc:
            raise AirflowFailException(f"cannot build the spark-submit of {parts['name']}: {exc}") from None

    def _spark_submit(self, submission) -> AirflowException | OSError | None:
        """Run `submission` (`acid_deploy.launch.SparkSubmit`) to its end through the provider's
        SparkSubmitHook; what went wrong (the queue entry says what happened, not the exit status), None when
        spark-submit exited 0.

        The hook is the provider's `_get_hook()` of this operator's public attributes (the factory that passes every
        spark-submit argument this operator was given; there is no public one), made anew for each submission (a
        batch task submits several). spark-submit's environment goes to the hook's public `submit` as a Popen
        argument. Two things the provider offers no public way to do are done on its hook's internals, each with a
        fallback: its task-log lines are filtered (`without_known_noise`: it logs every line of spark-submit's
        output itself, through a structlog logger no logging filter reaches), and spark-submit's output pipe is
        closed after the run (the hook reads it to the end but never closes it: a ResourceWarning otherwise).
        """
        self.application, self.name = submission.application, submission.name
        self.application_args, self.conf = list(submission.arguments), dict(submission.conf)
        self.env_vars = None  # the whole environment goes to Popen below, never through the provider's env_vars
        hook = self._get_hook()
        process_log = getattr(hook, "_process_spark_submit_log", None)
        if process_log is not None:
            hook._process_spark_submit_log = lambda lines: process_log(without_known_noise(lines))
        self.submit_hook = hook
        try:
            hook.submit(submission.application, env=submission.process_environment(os.environ))
        except (AirflowException, OSError) as exc:
            return exc
        finally:
            process = getattr(hook, "_submit_sp", None)
            if process is not None and process.stdout is not None and not process.stdout.closed:
                process.stdout.close()
            self.submit_hook = None
        return None

    def on_kill(self) -> None:
        """Stop the spark-submit running now (the provider's hook kills it, and its YARN application or pod)."""
        hook = self.submit_hook
        if hook is not None:
            hook.on_kill()

    def _skip(self, context, verdict) -> AirflowSkipException:
        """An aborted compaction's ending: its summary as the XCom `return_value`, its message logged and skipped."""
        self.log.info("%s", verdict.message)
        context["ti"].xcom_push(key="return_value", value=_summary(verdict.entry, verdict.message))
        return AirflowSkipException(verdict.message)

    def _metrics_and_alerts(self, context, metastore_hook, after, run_stats: dict) -> None:
        """Emit the run's metrics (acid_plugin.metrics); on a failure, alert (acid_plugin.alerts): the compaction
        failed, and its partition reached failed.compacts.threshold when it did. Neither changes the outcome."""
        from acid_core.compaction.initiator import FAILED_THRESHOLD
        from acid_core.errors import AcidError
        from acid_core.metastore.codes import CompactionState
        from acid_core.operations import alerts
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

    def _executor_conf(self, compaction_id: int) -> tuple[str, str | None, dict[str, str]]:
        """The master and deploy mode of the `conn_id` connection, as the provider reads them (`spark_master`), and
        `acid_deploy.launch.shipped_conf` for them and the connection's `acid-*` extra keys.

        Raises:
            AirflowFailException: a bad `acid-*` extra, cluster deploy mode, or the executors' code or environment
                cannot be built (the message names the key or the cause).
        """
        from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

        from acid_core.errors import AcidError
        from acid_deploy.launch import shipped_conf
        from acid_deploy.shipping import options_from_extra

        connection = SparkSubmitHook.get_connection(self.spark_conn_id)
        extra = connection.extra_dejson
        master, deploy_mode = spark_master(connection), self.deploy_mode or extra.get("deploy-mode") or None
        try:
            started = time.monotonic()
            shipped = shipped_conf(master, options_from_extra(extra), deploy_mode=deploy_mode)
        except AcidError as exc:
            raise AirflowFailException(f"compaction {compaction_id}: connection {self.spark_conn_id!r}: "
                                       f"{exc}") from None
        if shipped:
            self.log.info("executors on %s get the shipped code and Python %s (ready in %.1f s)", master,
                          shipped["spark.pyspark.python"], time.monotonic() - started)
        return master, deploy_mode, shipped


def spark_master(connection) -> str:
    """The master URL the provider's SparkSubmitHook makes of Spark connection `connection`, from its public fields
    (the provider keeps its own reading private): a `spark` connection's host when that is a whole URL or there is
    no port, else `<conn_type>://<host>`; then `:<port>`. tests/dags/test_launcher_parity.py holds the two equal."""
    host, port = connection.host, connection.port
    master = host if connection.conn_type == "spark" and host and ("://" in host or not port) \
        else f"{connection.conn_type}://{host or ''}"
    return f"{master}:{port}" if port else master


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
    """`lines` (spark-submit's output) without those of KNOWN_NOISE, and without the empty line that follows each.

    Python workers running at once interleave their lines (two noise lines, then their two empty lines): every noise
    line owes one empty line until a line that says something comes."""
    owed = 0
    for line in lines:
        text = line.strip()
        if any(pattern.fullmatch(text) for pattern in KNOWN_NOISE):
            owed += 1
            continue
        if not text and owed:
            owed -= 1
            continue
        owed = 0
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
