"""spark-submit entry point of a compaction: `spark-submit spark_jobs/compact.py --compaction-id N [--metastore URL]`.

The driver follows Hive's worker protocol (acid_core.compaction.worker); the bucket tasks run on the executors, one
Spark task per bucket, each merging its files with acid_core's rules. Exit status 0 when the compaction finished (or
had already finished, or was refused for lack of work), 1 when it failed (the error is printed and recorded in the
compaction queue), 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time

from acid_core.compaction.execute import run_bucket
from acid_core.compaction.plan import CompactionPlan
from acid_core.compaction.worker import CompactionWorker
from acid_core.errors import one_line_cause
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
        context = spark.sparkContext  # per finished task: its events read and written (Spark merges them here)
        self.events_read = context.accumulator(0)
        self.events_written = context.accumulator(0)
        self.tasks_done = context.accumulator(0)

    @property
    def parallelism(self) -> int:
        """How many tasks run at once (Spark's default parallelism: the cores of the executors)."""
        return max(1, self.spark.sparkContext.defaultParallelism)

    def __call__(self, plan: CompactionPlan):
        if not plan.buckets:
            return []
        context = self.spark.sparkContext
        context.setJobDescription(f"compaction {plan.compaction_id} ({plan.kind.display}) of {plan.location}")
        works = context.parallelize(list(plan.buckets), len(plan.buckets))
        background = self.background
        self.tasks_total = len(plan.buckets)
        events_read, events_written, tasks_done = self.events_read, self.events_written, self.tasks_done

        def task(work):
            result = run_bucket(plan, work, background=background)
            events_read.add(result.events_read)
            events_written.add(result.inserts + result.deletes)
            tasks_done.add(1)
            return result

        return works.map(task).collect()

    def progress(self) -> str:
        """One line: the bucket tasks done of the total (and running), events read and written so far."""
        if not self.tasks_total:
            return "planning (claim, snapshot, directory listing)"
        running = 0
        tracker = self.spark.sparkContext.statusTracker()
        for stage_id in tracker.getActiveStageIds():
            info = tracker.getStageInfo(stage_id)
            running += info.numActiveTasks if info is not None else 0
        return (f"tasks {self.tasks_done.value}/{self.tasks_total} done, {running} running; "
                f"{self.events_read.value} events read, {self.events_written.value} written")


def _report_progress(compaction_id: int, runner: SparkRunner, stop: threading.Event, interval: float) -> None:
    """Print a progress line every `interval` seconds until `stop` (the task log shows the driver's output)."""
    started = time.monotonic()
    while not stop.wait(interval):
        try:
            line = runner.progress()
        except Exception as exc:  # the context is stopping: say so and end
            line = f"progress unavailable ({type(exc).__name__})"
            stop.set()
        print(f"progress: compaction {compaction_id}: {time.monotonic() - started:.0f} s: {line}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="compact.py", description=__doc__)
    parser.add_argument("--compaction-id", type=int, required=True)
    parser.add_argument("--metastore", help="metastore URL (default: ACID_METASTORE_URL or SQLite under ACID_HOME)")
    parser.add_argument("--worker-id", help="recorded as the compaction's worker (default: <host>-spark-<app id>)")
    parser.add_argument("--result-file", help="write the outcome as JSON {ok, message, worker_id, stats} here "
                                              "(spark-submit merges the driver's stderr into its stdout, so "
                                              "callers read this instead); stats: duration_seconds, events_read, "
                                              "events_written, bytes_read, bytes_written, tasks")
    args = parser.parse_args(argv)

    from spark_jobs.session import build_session

    spark = build_session(f"acid-compaction-{args.compaction_id}")
    metastore = Metastore(args.metastore)
    worker_id = args.worker_id
    application_id = spark.sparkContext.applicationId
    print(f"compaction {args.compaction_id}: Spark application {application_id}, UI "
          f"{spark.sparkContext.uiWebUrl or 'disabled (spark.ui.enabled=false)'}", flush=True)
    stop = threading.Event()
    try:
        worker_id = worker_id or f"{metastore.db.identity.host}-spark-{application_id}"
        runner = SparkRunner(spark)
        interval = float(os.environ.get("ACID_PROGRESS_SECONDS") or PROGRESS_SECONDS)
        threading.Thread(target=_report_progress, args=(args.compaction_id, runner, stop, interval), daemon=True,
                         name="compaction-progress").start()
        started = time.monotonic()
        outcome = CompactionWorker(metastore, worker_id=worker_id, runner=runner,
                                   job_id=application_id).run(args.compaction_id)
        stop.set()
        message = f"compaction {outcome.compaction_id}: {outcome.result}: {outcome.message}"
        stats = {"duration_seconds": round(time.monotonic() - started, 3), "events_read": outcome.events_read,
                 "events_written": outcome.inserts + outcome.deletes, "bytes_read": outcome.bytes_read,
                 "bytes_written": outcome.bytes_written, "tasks": runner.tasks_total}
        return _report(args.result_file, True, message, worker_id, stats)
    except Exception as exc:  # a Spark task failure arrives as a Py4J error wrapping the Python one
        return _report(args.result_file, False, f"compaction {args.compaction_id} failed: {_reason(exc)}", worker_id)
    finally:
        stop.set()
        metastore.close()
        spark.stop()


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
