"""spark-submit entry point of compactions: `spark-submit spark_jobs/compact.py --compaction-id N` runs one queued
compaction, `--batch [--pool P | --other-than P,Q] ...` runs the queued compactions of a pool one after another in
this one application (acid_core.compaction.batch: the JVM, SparkContext and Python workers are paid once).

The driver follows Hive's worker protocol (acid_core.compaction.worker) for each compaction; the bucket tasks run on
the executors, one Spark task per bucket, each merging its files with acid_core's rules. Exit status 0 when the
compaction finished (or had already finished, or was refused for lack of work) or the batch ran to one of its stops
(its failed compactions are recorded in the queue and in the result file), 1 when the compaction failed (the error
is printed and recorded in the compaction queue) or the batch could not go on, 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time

from acid_core.compaction.attempt import describe
from acid_core.compaction.batch import BatchWorker, QueueSelection
from acid_core.compaction.execute import run_bucket
from acid_core.compaction.plan import CompactionPlan
from acid_core.metastore.engine import outage_counts
from acid_core.compaction.worker import CompactionWorker
from acid_core.errors import AcidError, CompactionTaskError, one_line_cause
from acid_core.metastore import Metastore


SPLIT_ROWS = 32_000_000  # a major compaction's bucket of more rows is split into parts of about this many, one task each
PROGRESS_SECONDS = 15.0  # a progress line at least this often (ACID_PROGRESS_SECONDS)


class SparkRunner:
    """Runs the tasks of a plan as one Spark job (one partition per task: a bucket, a rebalance's key interval or a
    part of a split bucket). `split_rows` (None: never split) is read by the worker when it plans; a task encodes its
    output on a second thread only when it has a second core (`spark.task.cpus` >= 2, or `background`): with one core
    a task, the thread would take the core of another task (parallelism comes from the tasks: a bucket is split to
    fill the slots the plan leaves idle)."""

    def __init__(self, spark, *, split_rows: int | None = SPLIT_ROWS, background: bool | None = None) -> None:
        self.spark = spark
        self.split_rows = split_rows
        if background is None:
            background = int(spark.sparkContext.getConf().get("spark.task.cpus", "1")) >= 2
        self.background = background
        self.tasks_total = 0
        self.job_label: str | None = None  # "<application>/job<n>" of the last plan's Spark job
        self.compaction_id: int | None = None  # the plan in hand (the progress line names it)
        self._baseline = (0, 0, 0)  # the counters when that plan started
        context = spark.sparkContext  # per finished task: its events read and written (Spark merges them here)
        self.events_read = context.accumulator(0)
        self.events_written = context.accumulator(0)
        self.tasks_done = context.accumulator(0)

    @property
    def parallelism(self) -> int:
        """How many tasks run at once (Spark's default parallelism: the cores of the executors)."""
        return max(1, self.spark.sparkContext.defaultParallelism)

    def __call__(self, plan: CompactionPlan):
        self.job_label = None
        self.compaction_id = plan.compaction_id
        self._baseline = (self.tasks_done.value, self.events_read.value, self.events_written.value)
        if not plan.buckets:
            return []
        context = self.spark.sparkContext
        group = f"acid-compaction-{plan.compaction_id}"
        context.setJobGroup(group, f"compaction {plan.compaction_id} ({plan.kind.display}) of {plan.location}")
        works = context.parallelize(list(plan.buckets), len(plan.buckets))
        background = self.background
        self.tasks_total = len(plan.buckets)
        events_read, events_written, tasks_done = self.events_read, self.events_written, self.tasks_done
        try:
            return works.map(_bucket_task(plan, background, events_read, events_written, tasks_done)).collect()
        finally:
            jobs = context.statusTracker().getJobIdsForGroup(group)
            self.job_label = job_label(context.applicationId, max(jobs)) if jobs else None

    def cancel(self, compaction_id: int) -> None:
        """Cancel the running Spark jobs of a compaction (its heartbeat was lost: it could not commit any more); its
        tasks end with an error and the worker fails the attempt with the reason. A compaction that shares a job with
        others (`run_group`) is not cancelled (that would fail them too): it fails once the job ends."""
        self.spark.sparkContext.cancelJobGroup(f"acid-compaction-{compaction_id}")

    def run_group(self, plans: list[CompactionPlan]) -> list:
        """The tasks of several plans (small compactions of one batch) as one Spark job, so they share its start and
        its slots: each plan's results, or the error one of its tasks failed with (the others are not affected)."""
        self.job_label = None
        self.compaction_id = plans[0].compaction_id
        self._baseline = (self.tasks_done.value, self.events_read.value, self.events_written.value)
        context = self.spark.sparkContext
        ids = ", ".join(str(plan.compaction_id) for plan in plans)
        group = f"acid-compaction-{plans[0].compaction_id}-group"
        context.setJobGroup(group, f"compactions {ids} ({len(plans)} partitions)")
        units = [(index, work) for index, plan in enumerate(plans) for work in plan.buckets]
        self.tasks_total = len(units)
        background = self.background
        events_read, events_written, tasks_done = self.events_read, self.events_written, self.tasks_done

        def task(unit):
            index, work = unit
            try:
                result = run_bucket(plans[index], work, background=background)
            except Exception as exc:  # this plan fails; the others of the job go on
                return index, None, one_line_cause(exc)
            events_read.add(result.events_read)
            events_written.add(result.inserts + result.deletes)
            tasks_done.add(1)
            return index, result, None

        try:
            returned = context.parallelize(units, max(1, len(units))).map(task).collect()
        except Exception as exc:  # the job itself failed (an executor lost, ...): every plan of it
            return [exc for _ in plans]
        finally:
            jobs = context.statusTracker().getJobIdsForGroup(group)
            self.job_label = job_label(context.applicationId, max(jobs)) if jobs else None
        found: list = [[] for _ in plans]
        for index, result, error in returned:
            if isinstance(found[index], list) and error is None:
                found[index].append(result)
            elif error is not None:
                found[index] = CompactionTaskError(f"a task of compaction {plans[index].compaction_id} failed:\n"
                                                   f"{error}")
        return found

    def usable(self) -> bool:
        """Whether the SparkContext still runs jobs (a batch stops when it does not)."""
        try:
            return not self.spark.sparkContext._jsc.sc().isStopped()
        except Exception:  # the JVM is gone
            return False

    def progress(self) -> str:
        """One line: the current compaction's bucket tasks done of the total (and running), events read and written
        so far."""
        if not self.tasks_total:
            return "planning (claim, snapshot, directory listing)"
        running = 0
        tracker = self.spark.sparkContext.statusTracker()
        for stage_id in tracker.getActiveStageIds():
            info = tracker.getStageInfo(stage_id)
            running += info.numActiveTasks if info is not None else 0
        done, read, written = (now - before for now, before in zip(
            (self.tasks_done.value, self.events_read.value, self.events_written.value), self._baseline))
        return f"tasks {done}/{self.tasks_total} done, {running} running; {read} events read, {written} written"


def _bucket_task(plan: CompactionPlan, background: bool, events_read, events_written, tasks_done):
    """The function a Spark task runs on one unit of `plan` (a module-level closure: it pickles only what it names)."""
    def task(work):
        result = run_bucket(plan, work, background=background)
        events_read.add(result.events_read)
        events_written.add(result.inserts + result.deletes)
        tasks_done.add(1)
        return result

    return task


def job_label(application_id: str, job: int) -> str:
    """`<application id>/job<n>`: the Spark job that ran a compaction, as its HadoopJobId (SHOW COMPACTIONS; the
    column holds 32 characters, Hive's job ids fit, so a longer application id keeps only itself)."""
    label = f"{application_id}/job{job}"
    return label if len(label) <= 32 else application_id


def _report_progress(runner: SparkRunner, stop: threading.Event, interval: float) -> None:
    """Print a progress line of the compaction in hand every `interval` seconds until `stop` (the task log shows the
    driver's output); a batch's compactions shorter than `interval` print none."""
    current, since = None, time.monotonic()
    while not stop.wait(interval):
        if runner.compaction_id != current:
            current, since = runner.compaction_id, time.monotonic() - interval
        if current is None:
            continue
        try:
            line = runner.progress()
        except Exception as exc:  # the context is stopping: say so and end
            line = f"progress unavailable ({type(exc).__name__})"
            stop.set()
        print(f"progress: compaction {current}: {time.monotonic() - since:.0f} s: {line}", flush=True)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="compact.py", description=__doc__)
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--compaction-id", type=int, help="run this queued compaction")
    which.add_argument("--batch", action="store_true", help="run the queued compactions of a pool one after another, "
                       "oldest first, until the queue is empty or a limit is reached (see acid_core.compaction.batch)")
    parser.add_argument("--metastore", help="metastore URL (default: ACID_METASTORE_URL or SQLite under ACID_HOME)")
    parser.add_argument("--worker-id", help="recorded as the compaction's worker (default: <host>-spark-<app id>)")
    parser.add_argument("--result-file", help="write the outcome as JSON {ok, message, worker_id, stats} here "
                                              "(spark-submit merges the driver's stderr into its stdout, so "
                                              "callers read this instead); stats: duration_seconds, events_read, "
                                              "events_written, bytes_read, bytes_written, tasks. With --batch: JSON "
                                              "lines, one per compaction as it starts and ends, then why it stopped")
    batch = parser.add_argument_group("batch")
    batch.add_argument("--pool", help="take the entries of this compaction pool")
    batch.add_argument("--other-than", default="", help="take the entries of every pool but these (comma-separated)")
    batch.add_argument("--pool-timeout-ms", type=int, default=0,
                       help="with --other-than, also theirs after waiting this long (0: never)")
    batch.add_argument("--max-compactions", type=int, default=1000)
    batch.add_argument("--max-seconds", type=float, default=600.0)
    batch.add_argument("--job-conf", default="{}", help="this application's compaction settings (JSON, "
                       "acid_core.compaction.job_conf): an entry whose settings differ is left to another application")
    batch.add_argument("--launcher-conf", default="{}", help="the launcher's own settings (JSON) those were made with")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if not args.batch and (args.pool or args.other_than):
        parser.error("--pool and --other-than go with --batch")
    if args.pool and args.other_than:
        parser.error("--pool and --other-than cannot be combined")
    try:
        job_conf, launcher_conf = json.loads(args.job_conf), json.loads(args.launcher_conf)
    except ValueError as exc:
        parser.error(f"--job-conf and --launcher-conf take JSON objects: {exc}")

    from spark_jobs.session import build_session

    name = "acid-compaction-batch" if args.batch else f"acid-compaction-{args.compaction_id}"
    spark = build_session(name)
    metastore = Metastore(args.metastore)
    worker_id = args.worker_id
    application_id = spark.sparkContext.applicationId
    ui = spark.sparkContext.uiWebUrl or "disabled (spark.ui.enabled=false)"
    if not args.batch:
        print(f"compaction {args.compaction_id}: Spark application {application_id}, UI {ui}", flush=True)
    else:
        print(f"compaction batch: Spark application {application_id}, UI {ui}", flush=True)
    stop = threading.Event()
    try:
        worker_id = worker_id or f"{metastore.db.identity.host}-spark-{application_id}"
        runner = SparkRunner(spark)
        interval = float(os.environ.get("ACID_PROGRESS_SECONDS") or PROGRESS_SECONDS)
        threading.Thread(target=_report_progress, args=(runner, stop, interval), daemon=True,
                         name="compaction-progress").start()
        if args.batch:
            return _run_batch(args, metastore, runner, worker_id, application_id, job_conf, launcher_conf)
        started = time.monotonic()
        outcome = CompactionWorker(metastore, worker_id=worker_id, runner=runner,
                                   job_id=application_id).run(args.compaction_id)
        stop.set()
        message = f"compaction {outcome.compaction_id}: {outcome.result}: {outcome.message}"
        stats = {"duration_seconds": round(time.monotonic() - started, 3), "events_read": outcome.events_read,
                 "events_written": outcome.inserts + outcome.deletes, "bytes_read": outcome.bytes_read,
                 "bytes_written": outcome.bytes_written, "tasks": runner.tasks_total,
                 "metastore_retries": outage_counts()["failures"]}
        return _report(args.result_file, True, message, worker_id, stats)
    except Exception as exc:  # a Spark task failure arrives as a Py4J error wrapping the Python one
        if args.batch:
            return _batch_error(args.result_file, exc)
        return _report(args.result_file, False, f"compaction {args.compaction_id} failed: {_reason(exc)}", worker_id)
    finally:
        stop.set()
        metastore.close()
        spark.stop()


def _run_batch(args, metastore: Metastore, runner: SparkRunner, worker_id: str, application_id: str,
               job_conf: dict, launcher_conf: dict) -> int:
    """`--batch`: acid_core's BatchWorker with this application; each compaction is logged and recorded (one JSON
    line as it starts, one as it ends) as it happens, then why the batch stopped."""
    selection = QueueSelection(pool=args.pool, other_than=tuple(p for p in args.other_than.split(",") if p),
                               pool_timeout_ms=args.pool_timeout_ms)
    records = open(args.result_file, "a", encoding="utf-8") if args.result_file else None

    def record(values: dict) -> None:
        if records is not None:
            records.write(json.dumps(values) + "\n")
            records.flush()

    def on_start(entry) -> None:
        print(f"compaction {entry.id}: {entry.type.display.lower()} compaction of {describe(entry)} in Spark "
              f"application {application_id} as worker {worker_id}", flush=True)
        record({"event": "start", "compaction_id": entry.id})

    def on_end(item) -> None:
        print(item.message, file=sys.stderr if item.failed else sys.stdout, flush=True)
        record(item.as_record())

    try:
        end = BatchWorker(metastore, worker_id=worker_id, runner=runner, selection=selection,
                          accepts=same_settings(metastore, job_conf, launcher_conf), job_id=application_id,
                          on_start=on_start, on_end=on_end).run(max_compactions=args.max_compactions,
                                                                max_seconds=args.max_seconds)
        print(f"compaction batch: stopped ({end.reason}): {end.message}", flush=True)
        record(end.as_record())
        return 0
    finally:
        if records is not None:
            records.close()


def same_settings(metastore: Metastore, job_conf: dict, launcher_conf: dict):
    """`BatchWorker.accepts` for an application started with compaction settings `job_conf`: an entry whose own
    settings (its request's, table's and database's `compactor.spark.*`, acid_core.compaction.job_conf) differ, or
    cannot be used, is left to another application."""
    from acid_core.compaction.job_conf import compaction_spark_conf

    def accepts(entry) -> str | None:
        try:
            table = metastore.catalog.get_table(entry.database, entry.table)
            database = metastore.catalog.get_database(entry.database)
            wanted = compaction_spark_conf(table.params, entry.properties, configured=launcher_conf,
                                           database_params=database.params)
        except AcidError as exc:
            return f"its Spark settings cannot be used: {exc}"
        if wanted != job_conf:
            changed = sorted(key for key in set(wanted) | set(job_conf) if wanted.get(key) != job_conf.get(key))
            return "its Spark settings differ from this application's: " + ", ".join(
                f"{key}={wanted.get(key)}" for key in changed)
        return None

    return accepts


def _batch_error(result_file: str | None, exc: Exception) -> int:
    """A batch that could not go on (the metastore is unreachable between compactions, ...): recorded as its stop."""
    message = f"compaction batch failed: {_reason(exc)}"
    if result_file:
        with open(result_file, "a", encoding="utf-8") as handle:
            handle.write(json.dumps({"event": "stop", "reason": "error", "message": message, "ran": None,
                                     "next_compaction_id": None}) + "\n")
    print(message, file=sys.stderr)
    return 1


def _reason(exc: Exception) -> str:
    """The cause in one line, as the queue records it (`Type: message`; a Py4J error's innermost Python error)."""
    return one_line_cause(exc)


def _report(result_file: str | None, ok: bool, message: str, worker_id: str | None, stats: dict | None = None) -> int:
    if result_file:
        with open(result_file, "w", encoding="utf-8") as handle:
            json.dump({"ok": ok, "message": message, "worker_id": worker_id, "stats": stats or {}}, handle)
    print(message, file=sys.stdout if ok else sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
