"""Memory and time of compaction and reads as one bucket grows: 1M, 8M and 32M base rows, measured in one run, on
two layouts of the same rows.

Table per size and layout (tests/support/big_partition.py): one bucket, base of N rows + 10 insert deltas of N/100 rows + 5
delete deltas removing together 10% of every write; columns (id bigint, payload string of 24 bytes, amount double,
quantity int); ZLIB; a SQLite metastore. Layouts:
- `hive`: laid out as Hive's ORC writer lays files out: ORC closes a stripe when its compressed streams reach 64 MiB,
  so a stripe holds millions of rows (about 11M here) and decodes to hundreds of MiB; Hive's key index per stripe;
- `own`: the project's writer: stripes of about 64 MiB decoded.

Printed, side by side, per layout:
- peak RSS (VmHWM) of the Spark Python worker (`pyspark.daemon` and its forks, never the driver JVM, whose class path
  names pyspark; the driver JVM and driver Python are printed apart) that runs the major compaction of the whole
  bucket (one task; the default plan, which splits it over the idle slots, is printed too), of the Spark Python
  workers of a `spark_jobs.read.read_table` scan (count + sums, every column read), and of a process that streams
  `acid_core.read.merge.read_batches` over the partition in row__id order (as `acid read` does) with the deletes
  streamed; each in a fresh process (a fresh Spark application on local[2]) per size, and the ratio largest /
  smallest of each                                                                  goal <= 1.3 (flat);
  also read_batches with its default of up to 10M delete events held in memory (held per stripe's key interval);
- at the largest size, Hive's layout: major compaction (whole worker protocol; the bucket split into key-range parts,
  one Spark task per idle slot, concatenated stripe by stripe into the one bucket file) vs a plain Spark ORC
  read-and-rewrite (`spark.read.orc(f).write.orc(...)`, ZLIB) of a plain file holding exactly the surviving rows
                                                                                              goal <= 1.1x;
- there too: the speed-up on local[2] of that split major compaction over the same compaction in one Spark task
  (the bucket not split; the task on its one core, spark.task.cpus=1)                       goal >= 1.6x;
  also over one task that encodes its output on a second thread (what a task with spark.task.cpus=2 does: on two
  cores it keeps both busy, so no split can gain much over it here), and a rebalance into 4 buckets, for comparison.
Timings are medians of `--repeats` interleaved runs in one Spark application (JVM start-up not counted), each on a
fresh copy of the table (copying not timed). The load average before and after is printed: the machine is shared.

Run: `.venv/bin/python bench/bench_scale.py [--sizes 1000000,8000000,32000000] [--layouts hive,own] [--repeats 3]`
(about 25 minutes).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.orc as pa_orc

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # support.big_partition

from support.big_partition import build, register_copy  # noqa: E402

from acid_core.metastore import Metastore  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
GOALS = {"flat": 1.3, "major vs plain": 1.1, "speed-up": 1.6}
REBALANCE_BUCKETS = 4


# --- measuring ---------------------------------------------------------------------------------------------------
def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as handle:
                    parent = int(handle.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def process_peaks_mib() -> dict[str, float]:
    """Peak RSS (VmHWM) by kind of process: the Spark Python workers (`python -m pyspark.daemon` and its forks, which
    keep its command line: the processes that run the tasks), the driver JVM (a `java` process; its class path names
    pyspark/jars, so it must never be taken for a worker) and this driver's Python."""
    peaks = {"python workers": 0.0, "driver JVM": 0.0, "driver Python": own_peak_mib()}
    for pid in _descendants(os.getpid()):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                argv = handle.read().split(b"\0")
            kind = ("python workers" if b"pyspark.daemon" in argv else
                    "driver JVM" if argv and os.path.basename(argv[0]) == b"java" else None)
            if kind is None:
                continue
            with open(f"/proc/{pid}/status") as handle:
                for line in handle:
                    if line.startswith("VmHWM:"):
                        peaks[kind] = max(peaks[kind], int(line.split()[1]) / 1024)
        except OSError:
            continue
    return peaks


def python_worker_peak_mib() -> float:
    """The highest peak RSS among the Spark Python workers (`process_peaks_mib`), never the driver JVM."""
    return process_peaks_mib()["python workers"]


def own_peak_mib() -> float:
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


# --- children: one fresh process (and Spark application) per measurement ----------------------------------------
def child(kind: str, url: str, warehouse: str, table: str, scratch: str, repeats: int) -> dict:
    store = Metastore(url, warehouse=warehouse)
    if kind.startswith("batches"):
        from acid_cli.main import use_system_allocator
        from acid_core.read.merge import DEFAULT_MAX_DELETE_EVENTS_IN_MEMORY, read_batches

        use_system_allocator()  # as `acid read` does

        snapshot = store.txns.snapshot([f"default.{table}"])
        rows = 0
        for batch in read_batches(store.catalog.get_table("default", table).location,
                                  write_ids=snapshot.write_ids[f"default.{table}"], txns=snapshot.txns,
                                  include_row_id=True, order_by_row_id=True,  # what `acid read` asks for
                                  max_delete_events_in_memory=0 if kind == "batches" else
                                  DEFAULT_MAX_DELETE_EVENTS_IN_MEMORY):
            rows += batch.num_rows
        return {"rows": rows, "peak_mib": own_peak_mib()}

    from pyspark.sql import functions as F

    from acid_core.compaction.worker import CompactionWorker
    from acid_core.metastore.codes import CompactionType
    from spark_jobs.compact import SparkRunner
    from spark_jobs.read import read_table
    from spark_jobs.session import build_session

    spark = build_session(f"bench-scale-{kind}", master="local[2]")
    try:
        if kind == "read":
            row = read_table(spark, store, "default", table).agg(
                F.count("*").alias("rows"), F.sum("id"), F.sum("amount"), F.sum("quantity"),
                F.max(F.length("payload"))).collect()[0]
            return {"rows": row["rows"], "peak_mib": python_worker_peak_mib(), "processes": process_peaks_mib()}
        worker = CompactionWorker(store, worker_id="bench", runner=SparkRunner(spark))
        if kind.startswith("compact"):
            if kind == "compact":  # the whole bucket in one task: what must not grow with the bucket
                worker = CompactionWorker(store, worker_id="bench", runner=SparkRunner(spark, split_rows=None))
            compaction = store.compactions.enqueue("default", table, None, CompactionType.MAJOR).compaction_id
            outcome = worker.run(compaction)
            return {"rows": outcome.inserts, "peak_mib": python_worker_peak_mib(), "processes": process_peaks_mib()}
        return timings(spark, store, worker, table, Path(scratch), repeats)
    finally:
        spark.stop()


def timings(spark, store: Metastore, worker, table: str, scratch: Path, repeats: int) -> dict:
    """Interleaved rounds (one warm-up, then `repeats`): major, plain rewrite, rebalance, each on a fresh copy."""
    from acid_core.metastore.codes import CompactionType

    built = json.loads((scratch / "built.json").read_text())
    pristine = store.catalog.get_table("default", table).location
    plain = scratch / "plain-surviving.orc"
    samples: dict[str, list[float]] = {}
    messages: dict[str, str] = {}
    copies = 0

    def compaction(kind: CompactionType, buckets: int | None, runner=worker) -> float:
        nonlocal copies
        copies += 1
        name = f"copy_{copies}"
        from support.big_partition import Built

        register_copy(store, Built(pristine, 0, 0, 0, built["writes"]), name, str(scratch / name))
        compaction_id = store.compactions.enqueue("default", name, None, kind, number_of_buckets=buckets).compaction_id
        os.sync()
        start = time.perf_counter()
        outcome = runner.run(compaction_id)
        seconds = time.perf_counter() - start
        assert outcome.result == "compacted" and outcome.inserts == built["surviving"], outcome
        if runner is worker:
            messages[kind.name.lower()] = outcome.message
        shutil.rmtree(scratch / name)
        return seconds

    def rewrite() -> float:
        target = scratch / "plain-out"
        os.sync()
        start = time.perf_counter()
        spark.read.orc(str(plain)).write.option("compression", "zlib").orc(str(target))
        seconds = time.perf_counter() - start
        assert sum(pa_orc.ORCFile(p).nrows for p in target.glob("*.orc")) == built["surviving"]
        shutil.rmtree(target)
        return seconds

    from acid_core.compaction.worker import CompactionWorker
    from spark_jobs.compact import SparkRunner

    one_task = CompactionWorker(store, worker_id="bench-one-task", runner=SparkRunner(spark, split_rows=None))
    threaded = CompactionWorker(store, worker_id="bench-one-task-two-threads",
                                runner=SparkRunner(spark, split_rows=None, background=True))
    steps = {"major": lambda: compaction(CompactionType.MAJOR, None),
             "major one task": lambda: compaction(CompactionType.MAJOR, None, one_task),
             "major one task, two threads": lambda: compaction(CompactionType.MAJOR, None, threaded),
             "plain rewrite": rewrite,
             "rebalance": lambda: compaction(CompactionType.REBALANCE, REBALANCE_BUCKETS)}
    for round_ in range(repeats + 1):
        for key, step in steps.items():
            seconds = step()
            if round_:
                samples.setdefault(key, []).append(seconds)
    tasks = re.search(r"\((\d+) tasks\)", messages["major"])
    return {key: statistics.median(values) for key, values in samples.items()} | {
        "samples": samples, "tasks": int(tasks.group(1)) if tasks else 1}


def run_child(kind: str, url: str, warehouse: str, table: str, scratch: Path, repeats: int = 0) -> dict:
    result = scratch / f"{kind}-{table}.json"
    process = subprocess.run([sys.executable, __file__, "--child", kind, url, warehouse, table, str(scratch),
                              str(repeats), str(result)], cwd=ROOT, capture_output=True, text=True, timeout=7200)
    if process.returncode != 0:
        raise SystemExit(f"{kind} of {table} failed:\n{process.stderr[-4000:]}")
    return json.loads(result.read_text())


# --- the run -----------------------------------------------------------------------------------------------------
def write_plain_surviving(store: Metastore, table: str, path: Path) -> None:
    """The surviving rows as one plain ORC file, written a batch at a time (not timed)."""
    from acid_core.read.merge import read_batches

    snapshot = store.txns.snapshot([f"default.{table}"])
    reader = read_batches(store.catalog.get_table("default", table).location,
                          write_ids=snapshot.write_ids[f"default.{table}"], txns=snapshot.txns)
    writer = pa_orc.ORCWriter(str(path), compression="zlib")
    for batch in reader:
        writer.write(pa.Table.from_batches([batch]))
    writer.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000000,8000000,32000000")
    parser.add_argument("--layouts", default="hive,own", help="comma-separated: hive, own (the first is timed)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--child", nargs=7, metavar="ARG", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, url, warehouse, table, scratch, repeats, result = args.child
        Path(result).write_text(json.dumps(child(kind, url, warehouse, table, scratch, int(repeats))))
        return
    sizes = [int(s) for s in args.sizes.split(",")]
    layouts = args.layouts.split(",")
    load_before = os.getloadavg()[0]
    peaks: dict[str, dict[str, dict[int, float]]] = {}
    timed: dict = {}
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as directory:
        for layout in layouts:
            peaks[layout] = {"compaction task": {}, "Spark read task": {}, "read_batches": {},
                             "read_batches, deletes in memory": {}, "compaction, default plan": {}}
            for size in sizes:
                scratch = Path(directory) / f"{layout}-n{size}"
                scratch.mkdir()
                measured = measure(layout, size, scratch, peaks[layout], args.repeats if (
                    layout == layouts[0] and size == max(sizes)) else None)
                timed = measured or timed
                shutil.rmtree(scratch)
    report(sizes, layouts, peaks, timed, args.repeats, (load_before, os.getloadavg()[0]))


def measure(layout: str, size: int, scratch: Path, peaks: dict[str, dict[int, float]],
            repeats: int | None) -> dict | None:
    """Build the table, take every peak of one size and layout in fresh processes; time it when `repeats` is given."""
    url, warehouse = f"sqlite:///{scratch}/metastore.db", str(scratch / "warehouse")
    store = Metastore(url, warehouse=warehouse)
    store.init()
    started = time.perf_counter()
    built = build(store, "t", base_rows=size, layout=layout, delete_deltas=5)
    (scratch / "built.json").write_text(json.dumps({"writes": built.writes, "surviving": built.surviving}))
    base = next(Path(built.location).glob("base_*/bucket_*"))
    print(f"{layout} layout, {size:>11,} base rows: built {built.rows:,} rows, {built.surviving:,} survive, "
          f"{built.decoded_bytes / 2**20:,.0f} MiB decoded, base in {pa_orc.ORCFile(str(base)).nstripes} stripes, "
          f"in {time.perf_counter() - started:.0f} s", flush=True)
    register_copy(store, built, "for_compaction", str(scratch / "for_compaction"))
    one_task = run_child("compact", url, warehouse, "for_compaction", scratch)
    peaks["compaction task"][size] = one_task["peak_mib"]
    print("    one-task compaction, peak RSS MiB by process: " + ", ".join(
        f"{k} {v:.0f}" for k, v in one_task["processes"].items()), flush=True)
    register_copy(store, built, "for_split", str(scratch / "for_split"))
    peaks["compaction, default plan"][size] = run_child("compact-split", url, warehouse, "for_split",
                                                        scratch)["peak_mib"]
    peaks["Spark read task"][size] = run_child("read", url, warehouse, "t", scratch)["peak_mib"]
    peaks["read_batches"][size] = run_child("batches", url, warehouse, "t", scratch)["peak_mib"]
    peaks["read_batches, deletes in memory"][size] = run_child("batches-registry", url, warehouse, "t",
                                                               scratch)["peak_mib"]
    print("    peak RSS MiB: " + ", ".join(f"{k} {v[size]:.0f}" for k, v in peaks.items()), flush=True)
    timed = None
    if repeats is not None:
        write_plain_surviving(store, "t", scratch / "plain-surviving.orc")
        timed = run_child("timings", url, warehouse, "t", scratch, repeats)
    store.close()
    return timed


def report(sizes, layouts, peaks, timed, repeats, load) -> None:
    small, large = min(sizes), max(sizes)
    print()
    print(f"load average {load[0]:.1f} before, {load[1]:.1f} after (2 cores: above ~2.5 other work shared them)")
    for layout in layouts:
        print(f"{layout + ' layout, peak RSS (MiB)':40s}" + "".join(f"{size:>14,}" for size in sizes)
              + f"   ratio {large / 1e6:g}M/{small / 1e6:g}M")
        for name, values in peaks[layout].items():
            ratio = values[large] / values[small]
            goal = "(up to 10M delete events, held per stripe's key interval)" if "in memory" in name else \
                "(its largest task: the bucket split over the idle slots)" if "plan" in name \
                else f"(goal <= {GOALS['flat']}: {'met' if ratio <= GOALS['flat'] else 'MISSED'})"
            print(f"  {name:38s}" + "".join(f"{values[s]:14.0f}" for s in sizes) + f"   {ratio:5.2f}  {goal}")
    if timed:
        ratio = timed["major"] / timed["plain rewrite"]
        speed = timed["major one task"] / timed["major"]
        print(f"{layouts[0]} layout at {large:,} base rows, medians of {repeats}:")
        print(f"  major compaction, bucket split into {timed['tasks']} tasks on local[2] {timed['major']:7.1f} s")
        print(f"  plain Spark ORC rewrite of the survivors       {timed['plain rewrite']:7.1f} s   major/plain "
              f"{ratio:4.2f}x (goal <= {GOALS['major vs plain']}x: "
              f"{'met' if ratio <= GOALS['major vs plain'] else 'MISSED'})")
        print(f"  major compaction in one task (one core)        {timed['major one task']:7.1f} s   speed-up of "
              f"the split on local[2] {speed:4.2f}x (goal >= {GOALS['speed-up']}x: "
              f"{'met' if speed >= GOALS['speed-up'] else 'MISSED'})")
        print(f"  one task encoding on a second thread           {timed['major one task, two threads']:7.1f} s   "
              f"speed-up of the split {timed['major one task, two threads'] / timed['major']:4.2f}x (both cores "
              "busy either way)")
        print(f"  rebalance into {REBALANCE_BUCKETS} buckets on local[2]              {timed['rebalance']:7.1f} s   "
              f"{timed['major one task'] / timed['rebalance']:4.2f}x faster than one task")
        print("  samples (s): " + json.dumps({k: [round(v, 1) for v in vs] for k, vs in timed["samples"].items()}))


if __name__ == "__main__":
    main()
