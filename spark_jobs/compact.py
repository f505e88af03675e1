"""spark-submit entry point of a compaction: `spark-submit spark_jobs/compact.py --compaction-id N [--metastore URL]`.

The driver follows Hive's worker protocol (acid_core.compaction.worker); the bucket tasks run on the executors, one
Spark task per bucket, each merging its files with acid_core's rules. Exit status 0 when the compaction finished (or
had already finished, or was refused for lack of work), 1 when it failed (the error is printed and recorded in the
compaction queue), 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import json
import sys

from acid_core.compaction.execute import run_bucket
from acid_core.compaction.plan import CompactionPlan
from acid_core.compaction.worker import CompactionWorker
from acid_core.errors import AcidError
from acid_core.metastore import Metastore


SPLIT_ROWS = 32_000_000  # a major compaction's bucket of more rows is split into parts of about this many, one task each


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
        return works.map(lambda work: run_bucket(plan, work, background=background)).collect()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="compact.py", description=__doc__)
    parser.add_argument("--compaction-id", type=int, required=True)
    parser.add_argument("--metastore", help="metastore URL (default: ACID_METASTORE_URL or SQLite under ACID_HOME)")
    parser.add_argument("--worker-id", help="recorded as the compaction's worker (default: <host>-spark-<app id>)")
    parser.add_argument("--result-file", help="write the outcome as JSON {ok, message, worker_id} here (spark-submit "
                                              "merges the driver's stderr into its stdout, so callers read this "
                                              "instead)")
    args = parser.parse_args(argv)

    from spark_jobs.session import build_session

    spark = build_session(f"acid-compaction-{args.compaction_id}")
    metastore = Metastore(args.metastore)
    worker_id = args.worker_id
    try:
        worker_id = worker_id or f"{metastore.db.identity.host}-spark-{spark.sparkContext.applicationId}"
        outcome = CompactionWorker(metastore, worker_id=worker_id, runner=SparkRunner(spark)).run(args.compaction_id)
        message = f"compaction {outcome.compaction_id}: {outcome.result}: {outcome.message}"
        return _report(args.result_file, True, message, worker_id)
    except Exception as exc:  # a Spark task failure arrives as a Py4J error wrapping the Python one
        return _report(args.result_file, False, f"compaction {args.compaction_id} failed: {_reason(exc)}", worker_id)
    finally:
        metastore.close()
        spark.stop()


def _reason(exc: Exception) -> str:
    """The useful line of an error: the AcidError itself, or the last line of a Python error raised in a task."""
    if isinstance(exc, AcidError):
        return str(exc)
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    errors = [line for line in lines if "Error" in line.split(":", 1)[0] or "Exception" in line.split(":", 1)[0]]
    return (errors[-1] if errors else lines[-1] if lines else type(exc).__name__)[:2000]


def _report(result_file: str | None, ok: bool, message: str, worker_id: str | None) -> int:
    if result_file:
        with open(result_file, "w", encoding="utf-8") as handle:
            json.dump({"ok": ok, "message": message, "worker_id": worker_id}, handle)
    print(message, file=sys.stdout if ok else sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
