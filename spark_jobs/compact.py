"""spark-submit entry point of compactions: `spark-submit spark_jobs/compact.py --compaction-id N` runs one queued
compaction, `--batch [--pool P | --other-than P,Q] ...` runs the queued compactions of a pool one after another in
this one application (acid_core.compaction.batch: the JVM, SparkContext and Python workers are paid once).

The driver follows Hive's worker protocol (acid_core.compaction.worker) for each compaction; the bucket tasks run on
the executors, one Spark task per bucket, each merging its files with acid_core's rules. Exit status 0 when the
compaction finished (or had already finished, or was refused for lack of work) or the batch ran to one of its stops
(its failed compactions are recorded in the queue and in the result file), 1 when the compaction failed (the error
is printed and recorded in the compaction queue) or the batch could not go on, 2 on bad arguments.

What the driver prints is the compaction task's log: its Spark application id and UI, then for each compaction
progress lines (ProgressReporter: every ACID_PROGRESS_SECONDS, default 5, and as soon as its first and last tasks
finish), its outcome and an end line with its tasks, events read and written, and bytes.

Over 500 lines because it is the driver's whole side of a compaction: arguments, the Spark stages, progress and
the result file follow one run and are read together when a run misbehaves.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from dataclasses import dataclass

from acid_core import settings
from acid_core.compaction.attempt import describe
from acid_core.compaction.batch import BatchWorker, QueueSelection
from acid_core.compaction.execute import run_bucket
from acid_core.compaction.plan import CompactionPlan
from acid_core.compaction.worker import CompactionWorker
from acid_core.errors import AcidError, CompactionTaskError, one_line_cause
from acid_core.metastore import Metastore
from acid_core.metastore.engine import outage_counts

SPLIT_ROWS = 32_000_000  # a major compaction's bucket of more rows is split into parts of about this many, one task each
PROGRESS_SECONDS = settings.PROGRESS_SECONDS.default  # a progress line at least this often (ACID_PROGRESS_SECONDS)
PROGRESS_TICK = 0.25  # how often the progress reporter looks at the task counters (driver-side values: no Spark call)


@dataclass(frozen=True, slots=True)
class _Job:
    """The compactions of the Spark job in hand: tasks per compaction, whether they share the job (`run_group`), and
    the scalar counters when it started (a single plan's figures are the counters' growth since)."""

    tasks: dict[int, int]
    grouped: bool
    baseline: tuple[int, int, int]


class _CountsByCompaction:
    """Spark accumulator parameter (duck-typed `pyspark.AccumulatorParam`): {compaction id: (tasks done, events read,
    events written)}, so the tasks of a group's one job count for their own compactions."""

    def zero(self, value: dict) -> dict:
        return {}

    def addInPlace(self, total: dict, more: dict) -> dict:  # noqa: N802 - pyspark's name
        for key, (tasks, read, written) in more.items():
            was = total.get(key, (0, 0, 0))
            total[key] = (was[0] + tasks, was[1] + read, was[2] + written)
        return total


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
        self.compaction_id: int | None = None  # the plan in hand (the first of a group)
        self._job: _Job | None = None  # the compactions of the Spark job in hand (the progress lines read it)
        context = spark.sparkContext  # per finished task: its events read and written (Spark merges them here)
        self.events_read = context.accumulator(0)
        self.events_written = context.accumulator(0)
        self.tasks_done = context.accumulator(0)
        self.counts_by_compaction = context.accumulator({}, _CountsByCompaction())  # run_group's tasks

    @property
    def parallelism(self) -> int:
        """How many tasks run at once (Spark's default parallelism: the cores of the executors)."""
        return max(1, self.spark.sparkContext.defaultParallelism)

    def __call__(self, plan: CompactionPlan):
        self.job_label = None
        self.compaction_id = plan.compaction_id
        self._job = _Job({plan.compaction_id: len(plan.buckets)}, False, self._counters())
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
        tasks: dict[int, int] = {}
        for plan in plans:
            tasks[plan.compaction_id] = tasks.get(plan.compaction_id, 0) + len(plan.buckets)
        self._job = _Job(tasks, True, self._counters())
        context = self.spark.sparkContext
        ids = ", ".join(str(plan.compaction_id) for plan in plans)
        group = f"acid-compaction-{plans[0].compaction_id}-group"
        context.setJobGroup(group, f"compactions {ids} ({len(plans)} partitions)")
        units = [(index, work) for index, plan in enumerate(plans) for work in plan.buckets]
        self.tasks_total = len(units)
        background = self.background
        events_read, events_written, tasks_done = self.events_read, self.events_written, self.tasks_done
        by_compaction = self.counts_by_compaction

        def task(unit):
            index, work = unit
            try:
                result = run_bucket(plans[index], work, background=background)
            except Exception as exc:  # this plan fails; the others of the job go on
                return index, None, one_line_cause(exc)
            events_read.add(result.events_read)
            events_written.add(result.inserts + result.deletes)
            tasks_done.add(1)
            by_compaction.add({plans[index].compaction_id: (1, result.events_read, result.inserts + result.deletes)})
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

    def _counters(self) -> tuple[int, int, int]:
        return self.tasks_done.value, self.events_read.value, self.events_written.value

    def counts(self, compaction_id: int) -> tuple[int, int, int, int] | None:
        """(tasks done, tasks, events read, events written) of `compaction_id` in the Spark job in hand; None while
        it has no job yet (claim, snapshot, directory listing). Driver-side values: no Spark call."""
        job = self._job
        if job is None or compaction_id not in job.tasks:
            return None
        if job.grouped:
            done, read, written = self.counts_by_compaction.value.get(compaction_id, (0, 0, 0))
        else:
            done, read, written = (now - before for now, before in zip(self._counters(), job.baseline))
        return done, job.tasks[compaction_id], read, written

    def progress(self, compaction_id: int) -> str:
        """One line: the compaction's tasks done of its total (and the job's running tasks), events read and written
        so far (a task's events count when it finishes)."""
        counts = self.counts(compaction_id)
        if counts is None:
            return "planning (claim, snapshot, directory listing)"
        done, total, read, written = counts
        running = 0
        tracker = self.spark.sparkContext.statusTracker()
        for stage_id in tracker.getActiveStageIds():
            info = tracker.getStageInfo(stage_id)
            running += info.numActiveTasks if info is not None else 0
        job = self._job
        if job is None or not job.grouped or len(job.tasks) == 1:
            return f"tasks {done}/{total} done, {running} running; {read} events read, {written} written"
        others = [str(other) for other in job.tasks if other != compaction_id]
        return (f"tasks {done}/{total} done; {read} events read, {written} written (one Spark job with compaction"
                f"{'s' if len(others) > 1 else ''} {', '.join(others)}: {running} running)")


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


class ProgressReporter:
    """The progress lines of the compactions a SparkRunner runs, printed by the driver (the task log shows its output):
    one every `interval` seconds while a compaction is in hand, one as soon as its first task and as soon as its last
    task finishes (so a compaction shorter than `interval` shows one too), then its outcome and an end line (tasks,
    events read and written, bytes). `begin` and `end` come from the driver's main thread; a daemon thread looks at
    the driver-side task counters every PROGRESS_TICK seconds."""

    def __init__(self, runner: SparkRunner, *, interval: float, clock=time.monotonic) -> None:
        if not interval > 0:
            raise ValueError(f"ACID_PROGRESS_SECONDS must be a number of seconds above 0, got {interval!r}")
        self.runner = runner
        self.interval = interval
        self.clock = clock
        self._lock = threading.Lock()
        self._in_hand: dict[int, list] = {}  # compaction id -> [began, last line at, tasks done at that line]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="compaction-progress")

    def start(self) -> ProgressReporter:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)

    def begin(self, compaction_id: int) -> None:
        """Compaction `compaction_id` is in hand (claimed, or about to be): its lines count from now."""
        with self._lock:
            now = self.clock()
            self._in_hand[compaction_id] = [now, now, 0]

    def end(self, compaction_id: int, message: str, stats: dict, *, result: str, failed: bool = False) -> None:
        """Print the compaction's last progress line (when its tasks finished since the one before), its outcome
        `message` (stderr when it `failed`) and its end line, and forget it."""
        with self._lock:
            state = self._in_hand.pop(compaction_id, None)
            counts = None
            if state is not None:
                counts = self._line(compaction_id, state, self.clock(), final=True)
            print(message, file=sys.stderr if failed else sys.stdout, flush=True)
            duration = stats.get("duration_seconds")
            if duration is None and state is not None:
                duration = self.clock() - state[0]
            print(end_line(compaction_id, result, stats, counts, duration), flush=True)

    def tick(self) -> None:
        """A progress line for each compaction in hand that is due one."""
        with self._lock:
            now = self.clock()
            for compaction_id, state in list(self._in_hand.items()):
                self._line(compaction_id, state, now)

    def _run(self) -> None:
        while not self._stop.wait(min(PROGRESS_TICK, self.interval)):
            try:
                self.tick()
            except Exception as exc:  # the context is stopping: say so and end
                print(f"progress unavailable ({type(exc).__name__})", flush=True)
                return

    def _line(self, compaction_id: int, state: list, now: float, *, final: bool = False):
        """Print a line of `compaction_id` when due (the interval passed since its last one, or tasks finished: its
        first or its last, or any since the last line when `final`); returns its counts (None: no job yet)."""
        began, last, done_then = state
        counts = self.runner.counts(compaction_id)
        done = counts[0] if counts is not None else 0
        total = counts[1] if counts is not None else 0
        finished = done != done_then and (final or done_then == 0 or done == total)
        if (now - last >= self.interval and not final) or (counts is not None and finished):
            print(f"progress: compaction {compaction_id}: {now - began:.0f} s: {self.runner.progress(compaction_id)}",
                  flush=True)
            state[1], state[2] = now, done
        return counts


def end_line(compaction_id: int, result: str, stats: dict, counts: tuple[int, int, int, int] | None,
             duration: float | None) -> str:
    """`end: compaction N: <result> in <s> s: tasks d/t done; e events read, w written; <bytes> read, <bytes>
    written`: the outcome's figures (`stats`, as in the result file), the tasks and, where the outcome has none (a
    failure), the events from the task counters (`counts`)."""
    done, total, read, written = counts if counts is not None else (0, stats.get("tasks", 0), 0, 0)
    read, written = stats.get("events_read", read), stats.get("events_written", written)
    took = f" in {duration:.1f} s" if duration is not None else ""
    figures = f"tasks {done}/{total} done; {read} events read, {written} written"
    if "bytes_read" in stats and "bytes_written" in stats:
        figures += f"; {_size(stats['bytes_read'])} read, {_size(stats['bytes_written'])} written"
    else:
        figures += "; nothing committed"
    return f"end: compaction {compaction_id}: {result}{took}: {figures}"


def _size(count: int) -> str:
    """`512 B`, `11.2 KiB`, `3.0 GiB`."""
    size, unit = float(count), "B"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            break
        size /= 1024
    return f"{int(size)} B" if unit == "B" else f"{size:.1f} {unit}"


def _progress_seconds() -> float:
    """`ACID_PROGRESS_SECONDS` (default PROGRESS_SECONDS)."""
    value = os.environ.get("ACID_PROGRESS_SECONDS") or PROGRESS_SECONDS
    try:
        return float(value)
    except ValueError:
        raise ValueError(f"ACID_PROGRESS_SECONDS must be a number of seconds above 0, got {value!r}") from None


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
                       "acid_deploy.job_conf): an entry whose settings differ is left to another application")
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
    spark = build_session(name, data_source=False)  # it reads and writes its files itself
    metastore = Metastore(args.metastore)
    worker_id = args.worker_id
    application_id = spark.sparkContext.applicationId
    ui = spark.sparkContext.uiWebUrl or "disabled (spark.ui.enabled=false)"
    if not args.batch:
        print(f"compaction {args.compaction_id}: Spark application {application_id}, UI {ui}", flush=True)
    else:
        print(f"compaction batch: Spark application {application_id}, UI {ui}", flush=True)
    reporter: ProgressReporter | None = None
    started = time.monotonic()
    try:
        worker_id = worker_id or f"{metastore.db.identity.host}-spark-{application_id}"
        runner = SparkRunner(spark)
        reporter = ProgressReporter(runner, interval=_progress_seconds()).start()
        if args.batch:
            return _run_batch(args, metastore, runner, reporter, worker_id, application_id, job_conf, launcher_conf)
        started = time.monotonic()
        reporter.begin(args.compaction_id)
        outcome = CompactionWorker(metastore, worker_id=worker_id, runner=runner,
                                   job_id=application_id).run(args.compaction_id)
        message = f"compaction {outcome.compaction_id}: {outcome.result}: {outcome.message}"
        stats = {"duration_seconds": round(time.monotonic() - started, 3), "events_read": outcome.events_read,
                 "events_written": outcome.inserts + outcome.deletes, "bytes_read": outcome.bytes_read,
                 "bytes_written": outcome.bytes_written, "tasks": runner.tasks_total,
                 "metastore_retries": outage_counts()["failures"]}
        reporter.end(outcome.compaction_id, message, stats, result=outcome.result)
        return _report(args.result_file, True, message, worker_id, stats, echo=False)
    except Exception as exc:  # a Spark task failure arrives as a Py4J error wrapping the Python one
        if args.batch:
            return _batch_error(args.result_file, exc)
        message = f"compaction {args.compaction_id} failed: {_reason(exc)}"
        if reporter is not None:
            reporter.end(args.compaction_id, message, {"duration_seconds": round(time.monotonic() - started, 3)},
                         result="failed", failed=True)
        return _report(args.result_file, False, message, worker_id, echo=reporter is None)
    finally:
        if reporter is not None:
            reporter.stop()
        metastore.close()
        spark.stop()


def _run_batch(args, metastore: Metastore, runner: SparkRunner, reporter: ProgressReporter, worker_id: str,
               application_id: str, job_conf: dict, launcher_conf: dict) -> int:
    """`--batch`: acid_core's BatchWorker with this application; each compaction is logged (its start, progress and
    end lines) and recorded (one JSON line as it starts, one as it ends) as it happens, then why the batch stopped."""
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
        reporter.begin(entry.id)

    def on_end(item) -> None:
        reporter.end(item.compaction_id, item.message, item.stats, result=item.result, failed=item.failed)
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
    settings (its request's, table's and database's `compactor.spark.*`, acid_deploy.job_conf) differ, or
    cannot be used, is left to another application."""
    from acid_deploy.job_conf import compaction_spark_conf

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


def _report(result_file: str | None, ok: bool, message: str, worker_id: str | None, stats: dict | None = None, *,
            echo: bool = True) -> int:
    """Write the result file; print `message` too unless the progress reporter did (`echo` False)."""
    if result_file:
        with open(result_file, "w", encoding="utf-8") as handle:
            json.dump({"ok": ok, "message": message, "worker_id": worker_id, "stats": stats or {}}, handle)
    if echo:
        print(message, file=sys.stdout if ok else sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
