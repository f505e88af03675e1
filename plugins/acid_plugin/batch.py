"""`AcidCompactionBatchOperator`: one worker slot of a compaction pool, running the queued compactions of that pool
one after another in long-lived Spark applications (spark-submit `spark_jobs/compact.py --batch`).

A slot of the Airflow pool is one such task, as a Hive Worker thread is one compaction at a time: the pool's slots
still cap the compactions running at once. The task pays a spark-submit JVM and a SparkContext once per application,
not per compaction. Its driver pulls the oldest initiated entry of its pool before each compaction
(`acid_core.compaction.batch`), so entries start in enqueue order whatever the order Airflow starts tasks in. An
application runs the compactions whose Spark settings (`compactor.spark.*`, `acid_deploy.job_conf`) are the
ones it was started with; when the oldest waiting entry needs others, the application ends and this task starts one
with those. Each compaction stays visible on its own: its queue entry (worker id naming this task attempt,
HadoopJobId naming the application and its Spark job), its lines in the task log, its metrics and its alerts (sent
as it ends), and its summary in the task's return value. One compaction's failure is recorded in the queue and the
next one runs; the task then fails without retries, naming the failed compactions. A compaction of the task aborted
meanwhile (ABORT COMPACTIONS, the ACID view's Abort: the entry an application was started for, before its driver
took it, or one the driver held) is what the operator asked for, not a failure: its summary says "aborted by ...",
`acid.compaction_aborted` counts it, and a task whose compactions were all aborted (or refused) is skipped. A killed
application leaves its compaction in hand `working`: the task fails retryably and housekeeping puts the entry back
(the retry, or any slot, takes it again). Compacted entries emit `acid_compacted` (its `extra` lists them) and one
event per table.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Sequence
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk.exceptions import AirflowException, AirflowFailException, AirflowSkipException

from acid_plugin.operators import AcidCompactionOperator, _summary, _worker_id

FOLLOW_SECONDS = 1.0  # how often the task reads what its driver recorded (metrics and alerts as compactions end)


class AcidCompactionBatchOperator(AcidCompactionOperator):
    """Runs the initiated compactions of compaction pool `pool` (or of every pool but `other_than`, theirs too after
    `pool_timeout_seconds`; 0: never), oldest first, at most `max_compactions` and for at most `batch_seconds` (the
    compaction in hand then finishes), in as few Spark applications as their settings allow.

    Returns `{"compactions": [summary, ...], "applications": n, "stopped": reason}`; each summary is
    `{"compaction_id", "table", "partition", "type", "state", "message"}` in the order they ran (an aborted one:
    state `aborted`, message "compaction N of db.t ... aborted by ..."). Skipped when it ran nothing that compacted
    (an empty queue, or refusals and aborted compactions only).
    """

    template_fields: Sequence[str] = (*SparkSubmitOperator.template_fields, "max_compactions", "batch_seconds",
                                      "pool_timeout_seconds")

    def __init__(self, *, compaction_pool: str | None = None, other_than: Sequence[str] = (),
                 pool_timeout_seconds: int | str = 0, max_compactions: int | str = 1000,
                 batch_seconds: float | str = 600, **kwargs: Any) -> None:
        kwargs.setdefault("name", "acid-compaction-batch")
        super().__init__(compaction_id=None, **kwargs)
        self.compaction_pool = compaction_pool
        self.other_than = tuple(other_than)
        self.pool_timeout_seconds = pool_timeout_seconds
        self.max_compactions = max_compactions
        self.batch_seconds = batch_seconds

    def execute(self, context) -> dict:
        from acid_core.compaction.batch import OTHER_SETTINGS, QueueSelection
        from acid_plugin.hooks import AcidMetastoreHook

        selection = QueueSelection(pool=self.compaction_pool, other_than=self.other_than,
                                   pool_timeout_ms=int(self.pool_timeout_seconds) * 1000)
        remaining, deadline = int(self.max_compactions), time.monotonic() + float(self.batch_seconds)
        metastore_hook = AcidMetastoreHook(self.acid_metastore_conn_id)
        worker_id = _worker_id(context, 0)
        base_conf = dict(self.conf or {})
        base_env = dict(self.env_vars or {})
        application = self.application or None  # None: spark_jobs/compact.py
        run = _BatchRun(self, context, metastore_hook, worker_id)
        shipped: dict[str, str] | None = None
        master = deploy_mode = None
        stopped = "queue empty"
        try:
            while remaining > 0 and time.monotonic() < deadline:
                head, job_conf = run.next_head(selection, base_conf)
                if head is None:
                    stopped = "queue empty"
                    break
                if job_conf is None:  # its settings cannot be used anywhere: recorded failed, the next one
                    remaining = int(self.max_compactions) - run.ran
                    continue
                if shipped is None:
                    master, deploy_mode, shipped = self._executor_conf(head.id)  # {} on local masters
                stop = run.application(self, selection, remaining=remaining,
                                       seconds=max(1.0, deadline - time.monotonic()), head=head.id,
                                       launch={"name": self.name, "master": master, "deploy_mode": deploy_mode,
                                               "job_conf": job_conf, "shipped": shipped, "configured": base_conf,
                                               "own_environment": base_env, "application": application})
                remaining = int(self.max_compactions) - run.ran
                stopped = stop.get("reason") or "killed"
                if stopped != OTHER_SETTINGS:
                    break
            else:
                stopped = "limit reached"
        finally:
            self.conf, self.env_vars = base_conf, base_env
        return run.finish(stopped)


class _BatchRun:
    """One task's batch: the applications it started, what each compaction did, and the task's ending."""

    def __init__(self, operator: AcidCompactionBatchOperator, context, metastore_hook, worker_id: str) -> None:
        self.operator = operator
        self.log = operator.log
        self.context = context
        self.metastore_hook = metastore_hook
        self.worker_id = worker_id
        self.summaries: list[dict] = []
        self.failed: list[str] = []
        self.aborted: list[str] = []  # "compaction N of db.t aborted by ...": what the operator asked for
        self.interrupted: list[str] = []
        self.compacted: list = []  # the entries that ended ready for cleaning
        self.applications = 0
        self.ran = 0
        self._lock = threading.Lock()

    def next_head(self, selection, base_conf: dict):
        """The oldest waiting entry and its job settings; (entry, None) when its settings cannot be used (it is then
        recorded failed, as Hive's worker records a compaction it cannot start), (None, None) when none waits."""
        from acid_core.errors import AcidError, CompactionStateError
        from acid_deploy.launch import job_conf

        with self.metastore_hook.metastore() as metastore:
            head = selection.next_waiting(metastore)
            if head is None:
                return None, None
            try:
                return head, job_conf(metastore, head, configured=base_conf)
            except AcidError as exc:
                message = f"compaction {head.id}: {exc}"
                try:
                    metastore.compactions.claim(worker_id=self.worker_id, compaction_id=head.id)
                    metastore.compactions.mark_failed(head.id, str(exc))
                except CompactionStateError:
                    return head, None  # another worker took it meanwhile
                self.log.error("%s", message)
                self._ended({"compaction_id": head.id, "result": "failed", "message": message, "stats": {}})
                return head, None

    def application(self, operator, selection, *, remaining: int, seconds: float, head: int, launch: dict) -> dict:
        """spark-submit one batch application to its end; returns its stop record ({} when it was killed). `launch`
        holds what `acid_deploy.launch.submission` takes besides the arguments."""
        from acid_core.compaction.attempt import Result, after_run
        from acid_core.metastore.codes import CompactionState
        from acid_deploy.launch import batch_arguments

        result_dir = tempfile.mkdtemp(prefix="acid-compaction-batch-")
        result_file = os.path.join(result_dir, "records.jsonl")
        open(result_file, "w").close()
        job_conf = launch["job_conf"]
        arguments = batch_arguments(pool=selection.pool, other_than=selection.other_than,
                                    pool_timeout_ms=selection.pool_timeout_ms, worker_id=self.worker_id,
                                    result_file=result_file, max_compactions=remaining, max_seconds=seconds,
                                    job_conf=job_conf, configured=launch["configured"])
        self.applications += 1
        self.log.info("compaction batch: Spark application %d of this task for up to %d compactions and %.0f s, "
                      "settings %s", self.applications, remaining, seconds,
                      ", ".join(f"{key}={value}" for key, value in sorted(job_conf.items())))
        follower = _Follower(result_file, self._ended)
        follower.start()
        try:  # the records say what happened; the exit status does not
            submit_error = operator._spark_submit(operator._submission(self.metastore_hook, arguments=arguments,
                                                                       **launch))
        finally:
            records = follower.finish()
            shutil.rmtree(result_dir, ignore_errors=True)
        started = [r["compaction_id"] for r in records if r.get("event") == "start"]
        ended = {r["compaction_id"] for r in records if r.get("event") == "end"}
        stop = next((r for r in records if r.get("event") == "stop"), {})
        unfinished = [i for i in started if i not in ended]
        if not started and not stop:
            unfinished = [head]  # spark-submit never ran the batch: the head is recorded failed (after_run)
        for compaction_id in unfinished:
            with self.metastore_hook.metastore() as metastore:
                verdict = after_run(metastore, compaction_id, worker_id=self.worker_id,
                                    launch_error=str(submit_error) if submit_error is not None else None)
            if verdict.result is not Result.ABORTED:  # an aborted one is logged (as information) by _ended
                self.log.error("%s", verdict.message)
            if verdict.entry is not None and verdict.result is Result.INTERRUPTED:
                with self._lock:
                    self.interrupted.append(verdict.message)
                    self.ran += 1
            elif verdict.entry is not None and verdict.result in (Result.COMPACTED, Result.ERROR, Result.ABORTED):
                self._ended({"compaction_id": compaction_id, "message": verdict.message, "stats": {},
                             "result": {Result.COMPACTED: "compacted", Result.ABORTED: "aborted"}.get(
                                 verdict.result, "failed")})
        if head not in started and head not in unfinished:  # the entry this application was started for
            with self.metastore_hook.metastore() as metastore:
                entry = metastore.compactions.get(head)
            if entry is not None and entry.state is CompactionState.ABORTED:  # aborted before the driver took it
                self._ended({"compaction_id": head, "result": "aborted", "message": "", "stats": {}})
        if not started and not stop:
            raise AirflowFailException(f"compaction batch: spark-submit did not run the batch: "
                                       f"{submit_error or 'it ended without a word from its driver'}")
        if stop.get("reason") == "error":
            self.log.error("%s", stop.get("message"))
        return stop

    def _ended(self, record: dict) -> None:
        """One compaction ended (a record of the driver's, or the task's own verdict): log, metrics, alerts."""
        from acid_core.compaction.attempt import aborted_message
        from acid_core.compaction.initiator import FAILED_THRESHOLD
        from acid_core.errors import AcidError
        from acid_core.metastore.codes import CompactionState
        from acid_core.operations import alerts
        from acid_plugin.alerts import send_alerts
        from acid_plugin.metrics import emit_compaction

        compaction_id = int(record["compaction_id"])
        try:
            with self.metastore_hook.metastore() as metastore:
                entry = metastore.compactions.get(compaction_id)
        except AcidError as exc:
            self.log.warning("compaction %d: its entry could not be read: %s", compaction_id, exc)
            entry = None
        message = record.get("message") or ""
        aborted = entry is not None and entry.state is CompactionState.ABORTED  # whatever the driver said of it
        if aborted:
            message = aborted_message(entry)
            self.log.info("%s", message)
        with self._lock:
            self.ran += 1
            if aborted:
                self.aborted.append(message)
            elif record.get("result") == "failed":
                self.failed.append(message)
            if entry is not None:
                self.summaries.append(_summary(entry, message))
                if entry.state in (CompactionState.READY_FOR_CLEANING, CompactionState.SUCCEEDED):
                    self.compacted.append(entry)
        if entry is None:
            return
        try:
            outcome = {CompactionState.FAILED: "failed", CompactionState.REFUSED: "refused",
                       CompactionState.ABORTED: "aborted"}.get(entry.state, "compacted")
            emit_compaction(compaction_type=entry.type.display, outcome=outcome,
                            stats_of_run=record.get("stats") or {})
        except Exception as exc:  # metrics never fail a compaction
            self.log.warning("metrics not sent: %s: %s", type(exc).__name__, exc)
        if entry.state is not CompactionState.FAILED:
            return
        found = [alerts.compaction_failed(entry, entry.error_message or message)]
        threshold = FAILED_THRESHOLD if self.operator.failed_threshold is None else int(self.operator.failed_threshold)
        try:
            with self.metastore_hook.metastore() as metastore:
                reached = alerts.failed_threshold_reached(metastore, entry, threshold=threshold)
        except AcidError as exc:
            self.log.warning("failed threshold not checked: %s", exc)
            reached = None
        send_alerts(self.context, found + ([reached] if reached is not None else []))

    def finish(self, stopped: str) -> dict:
        """The task's ending: its return value, or the Airflow exception its compactions call for."""
        result = {"compactions": self.summaries, "applications": self.applications, "stopped": stopped}
        ids = [summary["compaction_id"] for summary in self.summaries]
        self.context["acid_compaction"] = (f"{len(ids)} compactions: {_id_ranges(ids)}" if ids
                                           else "no compaction waiting")  # the map label
        self.context["ti"].xcom_push(key="return_value", value=result)
        self.log.info("compaction batch: %d compactions in %d Spark applications (%s): %d compacted, %d failed%s%s",
                      len(self.summaries), self.applications, stopped, len(self.compacted), len(self.failed),
                      f", {len(self.aborted)} aborted" if self.aborted else "",
                      f", {len(self.interrupted)} interrupted" if self.interrupted else "")
        if self.interrupted:
            raise AirflowException("; ".join(self.interrupted))
        if self.failed:
            raise AirflowFailException(f"{len(self.failed)} of {len(self.summaries)} compactions failed: "
                                       + "; ".join(self.failed)[:4000])
        if not self.compacted:
            raise AirflowSkipException(_nothing_compacted(self.summaries, len(self.aborted)))
        _describe_batch_events(self.context, self.operator.outlets, self.compacted)
        return result


class _Follower(threading.Thread):
    """Reads the driver's JSON lines as they are written and hands every compaction's end to `on_end` (a daemon: the
    task's main thread waits in spark-submit meanwhile)."""

    def __init__(self, path: str, on_end) -> None:
        super().__init__(daemon=True, name="compaction-batch-records")
        self.path = path
        self.on_end = on_end
        self.records: list[dict] = []
        self._done = threading.Event()
        self._offset = 0

    def run(self) -> None:
        while not self._done.wait(FOLLOW_SECONDS):
            self._read()

    def finish(self) -> list[dict]:
        self._done.set()
        self.join()
        self._read()
        return self.records

    def _read(self) -> None:
        try:
            with open(self.path, encoding="utf-8") as handle:
                handle.seek(self._offset)
                while True:
                    line = handle.readline()
                    if not line.endswith("\n"):
                        break  # not written whole yet (or the end)
                    self._offset += len(line.encode("utf-8"))
                    try:
                        record = json.loads(line)
                    except ValueError:
                        continue
                    self.records.append(record)
                    if record.get("event") == "end":
                        try:
                            self.on_end(record)
                        except Exception:  # noqa: BLE001 - reporting never stops the batch
                            pass
        except OSError:
            return


def _nothing_compacted(summaries: list[dict], aborted: int) -> str:
    """Why a task that compacted nothing is skipped: no compaction waited, or each was refused or aborted."""
    if not summaries:
        return "no compaction was waiting"
    refused = len(summaries) - aborted
    counted = (f"{refused} refused and {aborted} aborted" if refused and aborted else
               ("refused" if refused else "aborted"))
    noun = "compaction" if len(summaries) == 1 else "compactions"
    return f"{len(summaries)} {noun} {counted}: " + "; ".join(s["message"] for s in summaries)[:2000]


def _id_ranges(ids: list[int]) -> str:
    """`4-9, 12, 15-16`: compaction ids in the order given, consecutive runs joined."""
    parts: list[str] = []
    start = previous = None
    for number in ids:
        if previous is not None and number == previous + 1:
            previous = number
            continue
        if start is not None:
            parts.append(str(start) if start == previous else f"{start}-{previous}")
        start = previous = number
    if start is not None:
        parts.append(str(start) if start == previous else f"{start}-{previous}")
    return ", ".join(parts)


def _describe_batch_events(context, outlets, compacted) -> None:
    """The `acid_compacted` outlet's `extra` lists the compacted entries; through an `AssetAlias` outlet each table
    gets one event listing its own."""
    from airflow.sdk import Asset, AssetAlias

    from acid_plugin.assets import table_asset

    extras = [{"database": e.database, "table": e.table, "partition": e.partition, "compaction_id": e.id,
               "type": e.type.display} for e in compacted]
    by_table: dict[tuple[str, str], list[dict]] = {}
    for extra in extras:
        by_table.setdefault((extra["database"], extra["table"]), []).append(extra)
    events = context["outlet_events"]
    for outlet in outlets or ():
        if isinstance(outlet, AssetAlias):
            for (database, table), listed in by_table.items():
                events[outlet].add(table_asset(database, table),
                                   extra={"database": database, "table": table, "compactions": listed})
        elif isinstance(outlet, Asset):
            events[outlet].extra = {"compactions": extras}
