"""Compaction and snapshot scans on local Spark vs plain Spark ORC jobs over the same data, side by side in one run.

Table (as bench_snapshot_read.py builds it): base 2M rows + 10 insert deltas (1% each) + 5 delete deltas covering 10%
of all rows, bucket 0, ZLIB, registered in a SQLite metastore with write ids 1..16 committed.

(a) major compaction                vs `spark.read.orc(plain).write.orc(...)` of a plain ORC file holding exactly the
                                       surviving rows                                           goal <= 1.25x
(b) minor compaction                vs the same rewrite of a plain ORC file holding exactly the delta events: the
                                       inserted rows and the delete keys, flattened             goal <= 1.25x
(c) `spark_jobs.read.read_table` scan vs `spark.read.orc` of the same base + delta bucket files (deleted rows
    + count, sums, max(length))        included: a plain read merges nothing; all six event columns are read, see
                                       `plain_scan`)                                            goal <= 1.3x
(d) major compaction (verified: the  vs the same with table property compactor.verify=false (the tasks count nothing
    default, acid_core.compaction.     and read nothing back, the driver checks nothing)      goal <= 1.03x
    verify)                            on Spark, and with the bucket task in-process (wall-clock and CPU time)

Everything runs on one SparkSession (local[2]) built once, so JVM start-up (~5-10 s per `spark-submit`) is not
counted. A compaction is `CompactionWorker(metastore, runner=SparkRunner(spark)).run(id)` in this process: the whole
worker protocol (claim, compactor transaction, lock, directory state, plan, the Spark job with one task per bucket,
rename, commit), on a fresh copy of the table registered as a new table with a fresh queue entry each time (copying
and registering are not timed). Medians of interleaved repetitions; all ORC files are ZLIB.

Run: `.venv/bin/python bench/bench_compaction.py [--rows N] [--repeats R]` (about 5 minutes at the default size and repeats).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.orc as pa_orc
from bench_snapshot_read import COLUMNS, build_table
from pyspark.sql import functions as F

from acid_core.compaction.worker import CompactionWorker, local_runner
from acid_core.format.orc_events import BUCKET, CURRENT_WRITE_ID, OPERATION, ORIGINAL_WRITE_ID, ROW, ROW_ID
from acid_core.metastore import Metastore
from acid_core.metastore.codes import CompactionType
from acid_core.read.merge import read_snapshot
from spark_jobs.compact import SparkRunner
from spark_jobs.read import read_table
from spark_jobs.session import build_session

GOALS = {"major": 1.25, "minor": 1.25, "scan": 1.3}
VERIFY_GOAL = 1.03  # a verified major compaction vs an unverified one
WRITES = 16  # write ids in the table: base 1, insert deltas 2..11, delete deltas 12..16


class TimedRunner:
    """SparkRunner that also records how long its Spark job took (the rest of a run is the driver's protocol)."""

    def __init__(self, runner: SparkRunner) -> None:
        self.runner, self.seconds = runner, 0.0

    def __call__(self, plan):
        start = time.perf_counter()
        try:
            return self.runner(plan)
        finally:
            self.seconds = time.perf_counter() - start


class Unverified:
    """A runner whose tasks do not verify: what a plan of a table with compactor.verify=false asks of them. (The
    worker's `_prepare` does not hand the table's setting to `build_plan` yet, so the plan says verify=True and
    only the driver's check reads the table's setting; this stands in for that one argument.)"""

    def __init__(self, runner) -> None:
        self.runner = runner

    def __call__(self, plan):
        return self.runner(dataclasses.replace(plan, verify=False))

    def __getattr__(self, name):  # split_rows, parallelism, job_label: the wrapped runner's
        return getattr(self.runner, name)


class Bench:
    """The pristine table, its plain counterparts, and the measured operations."""

    def __init__(self, scratch: Path, spark, rows: int) -> None:
        self.scratch, self.spark = scratch, spark
        self.metastore = Metastore(f"sqlite:///{scratch}/metastore.db", warehouse=str(scratch / "warehouse"))
        self.metastore.init()
        self.pristine = scratch / "pristine"
        self.delta_rows = max(rows // 100, 1)
        build_table(self.pristine, rows, 10, self.delta_rows, 0.10)
        self.copies = 0
        self.locations: dict[int, Path] = {}
        self.runner = TimedRunner(SparkRunner(spark))
        self.worker = CompactionWorker(self.metastore, worker_id="bench", runner=self.runner)
        self.local_worker = CompactionWorker(self.metastore, worker_id="bench-local", runner=local_runner)
        self.unverified_worker = CompactionWorker(self.metastore, worker_id="bench-unverified",
                                                  runner=Unverified(self.runner))
        self.unverified_local_worker = CompactionWorker(self.metastore, worker_id="bench-unverified-local",
                                                        runner=Unverified(local_runner))
        self.scan_table = self.register(self.pristine, "scan_t")
        self.surviving = read_snapshot(str(self.pristine))
        self.plain_surviving = scratch / "plain-surviving.orc"
        pa_orc.write_table(self.surviving, self.plain_surviving, compression="zlib")
        self.plain_deltas = scratch / "plain-deltas.orc"
        self.delta_events = self._write_plain_deltas()
        self.all_inserted = rows + 10 * self.delta_rows
        self.insert_files = sorted(str(path) for path in self.pristine.glob("*/bucket_*")
                                   if not path.parent.name.startswith("delete_"))

    def register(self, location: Path, name: str, *, verify: bool = True) -> str:
        """Record the table at `location` and commit write ids 1..16 for it, as the writes that made it would have."""
        params = {"transactional": "true"} if verify else {"transactional": "true", "compactor.verify": "false"}
        self.metastore.catalog.create_table("default", name, COLUMNS, location=str(location), params=params)
        txns = self.metastore.txns
        for _ in range(WRITES):
            txn_id = txns.open_txn()
            txns.allocate_write_ids([txn_id], "default", name)
            txns.commit(txn_id)
        return name

    def fresh_entry(self, kind: CompactionType, *, verify: bool = True) -> int:
        """A fresh copy of the table, registered under a new name, with a queued compaction (not timed)."""
        self.copies += 1
        name = f"copy_{self.copies}"
        location = self.scratch / name
        shutil.copytree(self.pristine, location)
        self.register(location, name, verify=verify)
        compaction_id = self.metastore.compactions.enqueue("default", name, None, kind).compaction_id
        self.locations[compaction_id] = location
        return compaction_id

    def _write_plain_deltas(self) -> int:
        """One flat plain ORC file with every event of the deltas: inserted rows with their keys, delete keys."""
        names = [c.name for c in COLUMNS]
        parts = []
        files = sorted(self.pristine.glob("delta_*/bucket_*")) + sorted(self.pristine.glob("delete_delta_*/bucket_*"))
        for path in files:
            events = pa_orc.read_table(path)
            row = events.column(ROW).combine_chunks()
            data = [row.field(i) if row.null_count < len(row) else pa.nulls(len(row), row.type.field(i).type)
                    for i in range(len(names))]
            parts.append(pa.Table.from_arrays([events.column(ORIGINAL_WRITE_ID), events.column(BUCKET),
                                               events.column(ROW_ID), *data],
                                              names=[ORIGINAL_WRITE_ID, BUCKET, ROW_ID, *names]))
        table = pa.concat_tables(parts)
        pa_orc.write_table(table, self.plain_deltas, compression="zlib")
        return table.num_rows

    # --- the measured operations -----------------------------------------------------------------------------------
    def compact(self, kind: CompactionType, expected_inserts: int, *, worker: CompactionWorker | None = None,
                verify: bool = True) -> tuple[float, float]:
        """Seconds for the whole run of one fresh compaction, and for its Spark job."""
        compaction_id = self.fresh_entry(kind, verify=verify)
        os.sync()  # the copy's dirty pages written back before the clock starts
        start = time.perf_counter()
        outcome = (worker or self.worker).run(compaction_id)
        seconds = time.perf_counter() - start
        assert outcome.result == "compacted" and outcome.inserts == expected_inserts, outcome
        assert outcome.message.endswith(", verified") == verify, outcome.message
        shutil.rmtree(self.locations.pop(compaction_id))
        return seconds, self.runner.seconds

    def plain_rewrite(self, source: Path, expected: int) -> float:
        """`spark.read.orc(source).write.orc(...)`, ZLIB, as a plain Spark job would rewrite the same rows."""
        self.copies += 1
        target = self.scratch / f"plain-out-{self.copies}"
        start = time.perf_counter()
        self.spark.read.orc(str(source)).write.option("compression", "zlib").orc(str(target))
        seconds = time.perf_counter() - start
        assert sum(pa_orc.ORCFile(p).nrows for p in target.glob("*.orc")) == expected
        shutil.rmtree(target)
        return seconds

    @staticmethod
    def _aggregate(frame, prefix: str = "", extra=()):
        """count, sum of every numeric column, max(length) of the string column: every column is read."""
        return frame.agg(F.count(F.lit(1)).alias("rows"), F.sum(f"{prefix}id"), F.sum(f"{prefix}amount"),
                         F.sum(f"{prefix}quantity"), F.max(F.length(f"{prefix}customer")), *extra).collect()[0]

    def acid_scan(self) -> float:
        start = time.perf_counter()
        result = self._aggregate(read_table(self.spark, self.metastore, "default", self.scan_table))
        seconds = time.perf_counter() - start
        assert result["rows"] == self.surviving.num_rows, result
        return seconds

    def plain_scan(self) -> float:
        """The same aggregation over the base + delta bucket files read as plain ORC.

        Every top-level column is read: ORC's SchemaEvolution takes a file with Hive's event schema for an ACID file
        and wraps a pruned read schema (just `row`) in the event struct again, which fails with a ClassCastException;
        with all six columns requested it reads the file as it is. The five event columns are summed too.
        """
        start = time.perf_counter()
        frame = self.spark.read.orc(self.insert_files)
        extra = [F.sum(name) for name in (OPERATION, ORIGINAL_WRITE_ID, BUCKET, ROW_ID, CURRENT_WRITE_ID)]
        result = self._aggregate(frame, prefix=f"{ROW}.", extra=extra)
        seconds = time.perf_counter() - start
        assert result["rows"] == self.all_inserted, result  # a plain read applies no deletes
        return seconds

    def in_process(self, kind: CompactionType, expected_inserts: int, *, verify: bool = True) -> float:
        """The same compaction with the bucket task run here, without Spark (acid_core's local runner)."""
        return self.in_process_times(kind, expected_inserts, verify=verify)[0]

    def in_process_times(self, kind: CompactionType, expected_inserts: int, *, verify: bool = True
                         ) -> tuple[float, float]:
        """Seconds of wall-clock time and of this process's CPU time (the task and its encoding thread) for the
        same compaction with the bucket task run here; CPU time hardly moves with what else the machine runs."""
        worker = self.local_worker if verify else self.unverified_local_worker
        cpu = time.process_time()
        seconds = self.compact(kind, expected_inserts, worker=worker, verify=verify)[0]
        return seconds, time.process_time() - cpu

    def unverified(self, expected_inserts: int) -> tuple[float, float]:
        """A major compaction of a table with compactor.verify=false, on Spark."""
        return self.compact(CompactionType.MAJOR, expected_inserts, worker=self.unverified_worker, verify=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=2_000_000, help="rows in the base")
    parser.add_argument("--repeats", type=int, default=21,
                        help="interleaved rounds (21: enough for the ~3%% verification cost to stand out of the noise)")
    args = parser.parse_args()
    spark = build_session("acid-bench-compaction", master="local[2]")
    try:
        with tempfile.TemporaryDirectory() as scratch:
            bench = Bench(Path(scratch), spark, args.rows)
            load_before = os.getloadavg()[0]
            samples = measure(bench, args.repeats)
            load_after = os.getloadavg()[0]
            report(args, bench, {key: statistics.median(values) * 1000 for key, values in samples.items()},
                   (load_before, load_after), samples)
    finally:
        spark.stop()


def measure(bench: Bench, repeats: int) -> dict[str, list[float]]:
    """Seconds per operation: one warm-up round (Python workers started, code imported, page cache filled), then
    `repeats` rounds, every operation once per round, so all of them see the same machine state. A verified major
    compaction and its unverified twin run one right after the other, first one then the other first."""
    surviving, delta_inserts = bench.surviving.num_rows, 10 * bench.delta_rows
    samples: dict[str, list[float]] = {}

    def compaction(kind: CompactionType, expected: int) -> dict[str, float]:
        seconds, job = bench.compact(kind, expected)
        return {kind.name.lower(): seconds, f"{kind.name.lower()} job": job}

    def unverified() -> dict[str, float]:
        seconds, job = bench.unverified(surviving)
        return {"major unverified": seconds, "major unverified job": job}

    def in_process(verify: bool) -> dict[str, float]:
        seconds, cpu = bench.in_process_times(CompactionType.MAJOR, surviving, verify=verify)
        suffix = "" if verify else " unverified"
        return {f"major in-process{suffix}": seconds, f"major in-process cpu{suffix}": cpu}

    groups = [
        [lambda: compaction(CompactionType.MAJOR, surviving), unverified],
        [lambda: {"plain major": bench.plain_rewrite(bench.plain_surviving, surviving)}],
        [lambda: compaction(CompactionType.MINOR, delta_inserts)],
        [lambda: {"plain minor": bench.plain_rewrite(bench.plain_deltas, bench.delta_events)}],
        [lambda: {"scan": bench.acid_scan()}],
        [lambda: {"plain scan": bench.plain_scan()}],
        [lambda: in_process(True), lambda: in_process(False)],
        [lambda: {"minor in-process": bench.in_process(CompactionType.MINOR, delta_inserts)}],
    ]
    for round_ in range(repeats + 1):
        for step in (step for group in groups for step in (group if round_ % 2 else group[::-1])):
            os.sync()  # no write-back of the previous step's files (or of the fresh copy) during this one
            for key, seconds in step().items():
                if round_:
                    samples.setdefault(key, []).append(seconds)
    return samples


def _paired(verified: list[float], unverified: list[float]) -> float:
    """Verified minus unverified within each round, the median over the rounds that ran the verified one first
    (odd rounds, `measure`) and over those that ran it second, averaged."""
    differences = [v - u for v, u in zip(verified, unverified)]
    first, second = differences[::2], differences[1::2]  # samples start at round 1, which runs it first
    return (statistics.median(first) + statistics.median(second)) / 2 if second else statistics.median(first)


def report(args, bench: Bench, ms: dict[str, float], load: tuple[float, float],
           samples: dict[str, list[float]]) -> None:
    print(f"table: base {args.rows:,} rows + 10 insert deltas x {bench.delta_rows:,} rows + 5 delete deltas, 10% of "
          f"rows deleted; {bench.surviving.num_rows:,} rows survive; the deltas hold {bench.delta_events:,} events")
    print(f"local[2], one SparkSession (JVM start-up not counted), medians of {args.repeats} interleaved repetitions; "
          f"load average {load[0]:.1f} before, {load[1]:.1f} after (2 cores: above ~2.5 other work shared them)")
    print()
    rows = [
        ("(a) major compaction (worker protocol + Spark job)", "major",
         "plain Spark ORC rewrite of the surviving rows", "plain major"),
        ("(b) minor compaction (worker protocol + Spark job)", "minor",
         "plain Spark ORC rewrite of the delta events", "plain minor"),
        ("(c) read_table scan + aggregate", "scan", "plain spark.read.orc of the same files + aggregate", "plain scan"),
    ]
    for (name, key, plain_name, plain_key), goal in zip(rows, GOALS.values()):
        ratio = ms[key] / ms[plain_key]
        print(f"{name:58s} {ms[key]:7.0f} ms")
        print(f"    vs {plain_name:51s} {ms[plain_key]:7.0f} ms   ratio {ratio:4.2f}x  "
              f"(goal <= {goal}x: {'met' if ratio <= goal else 'MISSED'})")
    print()
    print("(d) the cost of verifying a major compaction (acid_core.compaction.verify) vs compactor.verify=false; the")
    print("    ratio of the medians, and the difference within each round's adjacent pair (the same machine state for")
    print("    both, so what else the machine runs cancels out): the mean of its medians over the rounds that ran the")
    print("    verified one first and those that ran it second (so that going first or second cancels out too):")
    for label, verified, unverified in (("whole run on Spark", "major", "major unverified"),
                                        ("its Spark job", "major job", "major unverified job"),
                                        ("whole run, bucket task in-process", "major in-process",
                                         "major in-process unverified"),
                                        ("  the same, CPU time of this process", "major in-process cpu",
                                         "major in-process cpu unverified")):
        ratio = ms[verified] / ms[unverified]
        paired = _paired(samples[verified], samples[unverified]) * 1000
        print(f"    {label:36s} {ms[verified]:7.0f} ms vs {ms[unverified]:7.0f} ms   ratio {ratio:5.3f}x; paired "
              f"{paired:+4.0f} ms = {paired / ms[unverified]:+6.1%}  (goal <= {VERIFY_GOAL - 1:.0%}: "
              f"{'met' if paired / ms[unverified] <= VERIFY_GOAL - 1 else 'MISSED'})")
    print()
    print("where a compaction's time goes (medians):")
    for kind in ("major", "minor"):
        job, protocol = ms[f"{kind} job"], ms[kind] - ms[f"{kind} job"]
        print(f"  {kind}: Spark job {job:5.0f} ms + driver protocol {protocol:3.0f} ms; "
              f"the same with the bucket task in-process (no Spark) {ms[f'{kind} in-process']:5.0f} ms")


if __name__ == "__main__":
    main()
