"""A fleet of small partitions drained through the real platform vs the same compactions back to back in one
SparkSession, side by side in one run; and whether any entry started after one enqueued later in its pool.

Data: `--partitions K` partitions spread over `--tables T` tables (`fleet.t0`, ...; partitioned by `ds`), each
partition holding `--deltas 11` insert deltas of a few rows (one transaction per table and delta, writing every
partition of the table: as hourly loads do). 11 deltas pass Hive's hive.compactor.delta.num.threshold (10), so the
initiator queues one compaction per partition. The warehouse and its SQLite metastore are copied aside, untimed.

(a) back to back: the initiator's decisions, queued in this process, then `CompactionWorker(metastore,
    runner=SparkRunner(spark)).run(id)` for each entry in queue order on one SparkSession (local[2], as make run's
    spark_default): the work of the compactions without any start-up or orchestration. The first compaction warms
    the session up (Python workers) and is not timed, so (a) is the steady cost of one compaction.
(b) the platform: the same warehouse restored, then `python -m acid_platform` exactly as `make run` starts it (airflow
    standalone with the LocalExecutor, SQLite metadata DB, Spark local[2], initiator, worker and cleaner every 60 s)
    with ACID_WORKER_THREADS=2 (the `acid_compaction` pool at 2 slots) and ACID_DEMO_WRITER=off. The metastore is
    read every second: the drain time runs from the first entry's enqueue time to the moment the last one was
    compacted (ready for cleaning or later); also shown: when all were cleaned (succeeded).

Printed: both totals and per-compaction times, their ratio (goal <= 2x), the entries that started after an entry of their pool enqueued later, and the
worst such wait (goal: none), and the load average at the start and the end.

(c) `--steady`: the platform as in (b), while a writer in this process commits `--rate 10` insert transactions a
    second (10 rows each) round robin into `--steady-partitions 200` partitions (4 tables), each starting as one base
    of `--base-rows 300000` rows, for `--minutes 10`. Every 10 s every partition's current deltas are counted (Hive's
    directory state under a fresh snapshot); every minute the partition with the most deltas is read with acid_core's
    reader (`read_snapshot`) and so are the same rows freshly compacted (written as two deltas and major compacted
    in a scratch metastore), in turn, best of 7 each. Printed: commits made, compactions run, the most
    deltas any partition had (goal <= hive.compactor.delta.num.threshold + 5 = 15) and the read ratios over time
    (goal <= 1.3x throughout).

Run: `.venv/bin/python bench/bench_fleet.py [--partitions 1000] [--tables 4]` (about 15 minutes at K = 1,000), and
`.venv/bin/python bench/bench_fleet.py --steady` (about 17 minutes).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

FLEET_DB = "fleet"
ROWS_PER_DELTA = 3
DRAIN_TIMEOUT_S = 3 * 3600  # every wait is bounded
CLEAN_TIMEOUT_S = 600
COMPACTED = ("ready for cleaning", "succeeded")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def platform_env(home: Path, port: int) -> dict[str, str]:
    env = {name: value for name, value in os.environ.items() if not name.startswith(("ACID_", "AIRFLOW"))}
    env.update({"ACID_HOME": str(home), "ACID_WORKER_THREADS": "2", "ACID_DEMO_WRITER": "off",
                "AIRFLOW__API__PORT": str(port)})
    return env


def set_up_home(home: Path, env: dict[str, str]) -> None:
    """`python -m acid_platform --setup-only`: Airflow's DB, the connections, the pool, the metastore."""
    subprocess.run([sys.executable, "-m", "acid_platform", "--setup-only"], env=env, cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL, timeout=600)


def metastore_of(home: Path):
    from acid_core.metastore import Metastore

    return Metastore(f"sqlite:///{home / 'warehouse' / 'metastore.db'}", warehouse=str(home / "warehouse"))


def create_partitioned(ms, name: str, days: list[str]) -> list[str]:
    """ACID table `fleet.<name>` (id, payload) partitioned by `ds`, with partitions `days`; their names."""
    ms.catalog.create_table(FLEET_DB, name, [("id", "bigint"), ("payload", "string")],
                            partition_keys=[("ds", "string")], params={"transactional": "true"})
    return [ms.catalog.add_partition(FLEET_DB, name, {"ds": day}).name for day in days]


def commit_insert(ms, database: str, table: str, rows_by_partition: list[tuple[dict | None, list]]) -> None:
    """One committed insert transaction through the one write door (`TableWrite`: write id, staging record, lock,
    components, publish, commit), writing each (partition spec, rows) pair."""
    from acid_core.write.table_write import TableWrite

    with TableWrite.open(ms, database, table, agent_info="bench_fleet") as write:
        for spec, rows in rows_by_partition:
            write.insert(rows, partition=spec)


def build_fleet(ms, *, partitions: int, tables: int, deltas: int) -> list[tuple[str, str]]:
    """T tables with K partitions in all, `deltas` committed insert deltas each; returns (table, partition) pairs."""

    ms.catalog.create_database(FLEET_DB, if_not_exists=True)
    pairs = []
    for number in range(tables):
        name = f"t{number}"
        days = [f"p{index:05d}" for index in range(number, partitions, tables)]
        names = create_partitioned(ms, name, days)
        pairs += [(name, part) for part in names]
        for delta in range(deltas):
            commit_insert(ms, FLEET_DB, name, [
                ({"ds": day}, [(delta * 1000 + row, f"{day}-{delta}-{row}") for row in range(ROWS_PER_DELTA)])
                for day in days])
    return pairs


def queue_like_the_initiator(ms) -> list[int]:
    """The initiator's polls, in this process, until its backlog is read: the ids it queued."""
    from acid_core.compaction.initiator import initiator_cycle

    cursor, queued = None, []
    for _ in range(1000):
        cycle = initiator_cycle(ms, cursor=cursor)
        queued += [d.compaction_id for d in cycle.decisions if d.compaction_id is not None]
        cursor = cycle.cursor
        if cycle.complete:
            break
    return queued


def back_to_back(home: Path) -> dict:
    """(a): queue as the initiator does, then every entry in queue order on one SparkSession."""
    from acid_core.compaction.worker import CompactionWorker
    from spark_jobs.compact import SparkRunner
    from spark_jobs.session import build_session

    ms = metastore_of(home)
    ids = queue_like_the_initiator(ms)
    spark = build_session("bench-fleet-back-to-back", master="local[2]")
    try:
        worker = CompactionWorker(ms, worker_id="bench-back-to-back", runner=SparkRunner(spark))
        if ids:  # warm-up outside the timing: the Python workers start once, as in a running application
            worker.run(ids[0])
        started = time.perf_counter()
        for compaction_id in ids[1:]:
            worker.run(compaction_id)
        seconds = time.perf_counter() - started
    finally:
        spark.stop()
    entries = [ms.compactions.get(i) for i in ids]
    ms.close()
    assert all(e.state.display in COMPACTED for e in entries), "a back-to-back compaction did not compact"
    return {"compactions": len(ids) - 1, "seconds": seconds}


def compaction_rows(ms) -> list:
    return [entry for entry in ms.compactions.show(database=FLEET_DB)]


def drain_through_platform(home: Path, env: dict[str, str], expected: int, log_path: Path) -> dict:
    """(b): start the platform as make run does and watch the metastore until every partition was compacted."""
    from acid_core.errors import AcidError

    ms = metastore_of(home)
    with open(log_path, "w") as log:
        process = subprocess.Popen([sys.executable, "-m", "acid_platform"], env=env, cwd=ROOT, stdout=log,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    started = time.time()
    compacted_at = cleaned_at = None
    try:
        while time.time() - started < DRAIN_TIMEOUT_S:
            if process.poll() is not None:
                raise SystemExit(f"the platform stopped (exit {process.returncode}); see {log_path}")
            try:
                rows = compaction_rows(ms)
            except AcidError:
                time.sleep(1)
                continue
            done = sum(1 for entry in rows if entry.state.display in COMPACTED)
            if compacted_at is None and done >= expected:
                compacted_at = time.time()
            if compacted_at is not None:
                if sum(1 for entry in rows if entry.state.display == "succeeded") >= expected:
                    cleaned_at = time.time()
                    break
                if time.time() - compacted_at > CLEAN_TIMEOUT_S:
                    break
            time.sleep(1)
        else:
            raise SystemExit(f"not drained within {DRAIN_TIMEOUT_S} s; see {log_path}")
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    rows = compaction_rows(ms)
    ms.close()
    first_enqueue = min(entry.enqueue_ms for entry in rows) / 1000
    return {"rows": rows, "first_enqueue": first_enqueue, "compacted_at": compacted_at, "cleaned_at": cleaned_at,
            "platform_started": started}


def order_inversions(rows) -> tuple[int, float]:
    """Entries that started after an entry of their pool enqueued later (no priority exists here), and the worst
    such wait in seconds: for each entry, how long after the earliest start of any later-enqueued entry it began."""
    worst, count = 0.0, 0
    by_pool: dict[str, list] = {}
    for entry in rows:
        if entry.start_ms is not None:
            by_pool.setdefault(entry.pool_name or "default", []).append(entry)
    for entries in by_pool.values():
        entries.sort(key=lambda e: (e.enqueue_ms, e.id), reverse=True)  # newest first
        earliest_later_start = None
        for entry in entries:
            if earliest_later_start is not None and entry.start_ms > earliest_later_start:
                count += 1
                worst = max(worst, (entry.start_ms - earliest_later_start) / 1000)
            earliest_later_start = entry.start_ms if earliest_later_start is None else min(
                earliest_later_start, entry.start_ms)
    return count, worst


STEADY_TABLES = 4
SAMPLE_EVERY_S = 60
COUNT_EVERY_S = 10
DELTA_NUM_THRESHOLD = 10  # hive.compactor.delta.num.threshold (the platform's default)
READS = 7  # a read time is the best of this many


def build_steady(ms, *, partitions: int, base_rows: int) -> list[tuple[str, str, dict]]:
    """STEADY_TABLES tables, `partitions` partitions in all, each one base of `base_rows` rows (written as two deltas
    per partition, then major compacted and cleaned in this process); returns (table, partition name, spec)."""
    from acid_core.compaction.cleaner import clean
    from acid_core.compaction.worker import CompactionWorker
    from acid_core.metastore.codes import CompactionType

    ms.catalog.create_database(FLEET_DB, if_not_exists=True)
    found = []
    for number in range(STEADY_TABLES):
        name = f"s{number}"
        days = [f"p{index:04d}" for index in range(number, partitions, STEADY_TABLES)]
        names = create_partitioned(ms, name, days)
        for half in range(2):  # two deltas: a major compaction of a single delta is refused (Hive's rule)
            commit_insert(ms, FLEET_DB, name, [
                ({"ds": day}, [(row, f"{day}-{row:09d}-payload") for row in range(half, base_rows, 2)])
                for day in days])
        found += [(name, part, {"ds": day}) for part, day in zip(names, days)]
    worker = CompactionWorker(ms, worker_id="bench-setup")
    for name, part, _ in found:
        compaction_id = ms.compactions.enqueue(FLEET_DB, name, part, CompactionType.MAJOR).compaction_id
        worker.run(compaction_id)
    clean(ms, log=lambda line: None)
    return found


class SteadyWriter:
    """Commits `rate` insert transactions a second, 10 rows each, round robin over the partitions, until stopped."""

    def __init__(self, home: Path, partitions: list[tuple[str, str, dict]], rate: float) -> None:
        self.home, self.partitions, self.rate = home, partitions, rate
        self.commits = self.errors = 0
        self.stop = threading.Event()

    def run(self) -> None:
        from acid_core.errors import AcidError

        ms = metastore_of(self.home)
        due = time.monotonic()
        index = 0
        while not self.stop.is_set():
            due += 1 / self.rate
            name, part, spec = self.partitions[index % len(self.partitions)]
            index += 1
            try:
                commit_insert(ms, FLEET_DB, name, [
                    (spec, [(10**12 + index * 10 + row, f"streamed-{index}-{row}") for row in range(10)])])
                self.commits += 1
            except AcidError:
                self.errors += 1
            self.stop.wait(max(0.0, due - time.monotonic()))
        ms.close()


def current_deltas(ms, name: str, part: str) -> int:
    from acid_core.read.state import get_acid_state

    full = f"{FLEET_DB}.{name}"
    snapshot = ms.txns.snapshot([full])
    state = get_acid_state(ms.catalog.get_table(FLEET_DB, name).partition_location(part),
                           write_ids=snapshot.write_ids[full], txns=snapshot.txns)
    return len(state.deltas)


def read_time(location: str, write_ids, txns) -> tuple[float, object]:
    from acid_core.read.merge import read_snapshot

    started = time.perf_counter()
    table = read_snapshot(location, write_ids=write_ids, txns=txns)
    return time.perf_counter() - started, table


def read_ratio(ms, scratch, name: str, part: str, sample: int) -> tuple[float, float, int]:
    """(reading the partition now, reading the same rows freshly compacted, its current deltas), seconds: each the
    best of READS reads, the two read in turn so both see the same load."""
    from acid_core.compaction.worker import CompactionWorker
    from acid_core.metastore.codes import CompactionType
    from acid_core.read.state import get_acid_state

    full = f"{FLEET_DB}.{name}"
    snapshot = ms.txns.snapshot([full])
    location = ms.catalog.get_table(FLEET_DB, name).partition_location(part)
    deltas = len(get_acid_state(location, write_ids=snapshot.write_ids[full], txns=snapshot.txns).deltas)
    _, rows = read_time(location, snapshot.write_ids[full], snapshot.txns)
    fresh_name = f"fresh{sample}"
    info = scratch.catalog.create_table("default", fresh_name, [("id", "bigint"), ("payload", "string")],
                                        params={"transactional": "true"})
    values = list(zip(rows.column(0).to_pylist(), rows.column(1).to_pylist()))
    for half in range(2):
        commit_insert(scratch, "default", fresh_name, [(None, values[half::2])])
    compaction_id = scratch.compactions.enqueue("default", fresh_name, None, CompactionType.MAJOR).compaction_id
    CompactionWorker(scratch, worker_id="bench-fresh").run(compaction_id)
    fresh_snapshot = scratch.txns.snapshot([f"default.{fresh_name}"])
    now = fresh = float("inf")
    for _ in range(READS):
        now = min(now, read_time(location, snapshot.write_ids[full], snapshot.txns)[0])
        fresh = min(fresh, read_time(info.location, fresh_snapshot.write_ids[f"default.{fresh_name}"],
                                     fresh_snapshot.txns)[0])
    return now, fresh, deltas


def steady(args, base: Path) -> int:
    home = base / "steady-home"
    env = platform_env(home, free_port())
    set_up_home(home, env)
    ms = metastore_of(home)
    started = time.perf_counter()
    partitions = build_steady(ms, partitions=args.steady_partitions, base_rows=args.base_rows)
    print(f"  (c) steady state: {len(partitions)} partitions of {args.base_rows} rows, each one base, written in "
          f"{time.perf_counter() - started:.0f} s (not timed); {args.rate:g} commits/s for {args.minutes:g} min",
          flush=True)
    from acid_core.metastore import Metastore

    scratch = Metastore(f"sqlite:///{base / 'scratch.db'}", warehouse=str(base / "scratch"))
    scratch.init()
    load_start = os.getloadavg()
    log_path = base / "steady-platform.log"
    with open(log_path, "w") as log:
        process = subprocess.Popen([sys.executable, "-m", "acid_platform"], env=env, cwd=ROOT, stdout=log,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    writer = SteadyWriter(home, partitions, args.rate)
    thread = threading.Thread(target=writer.run, daemon=True)
    most, samples, counts = 0, [], []
    try:
        time.sleep(5)
        run_started = time.monotonic()
        thread.start()
        end = run_started + args.minutes * 60
        next_sample = run_started + SAMPLE_EVERY_S
        sample = 0
        while time.monotonic() < end:
            if process.poll() is not None:
                raise SystemExit(f"the platform stopped (exit {process.returncode}); see {log_path}")
            per_partition = {(name, part): current_deltas(ms, name, part) for name, part, _ in partitions}
            worst = max(per_partition, key=per_partition.get)
            most = max(most, per_partition[worst])
            counts.append(per_partition[worst])
            if time.monotonic() >= next_sample:
                sample += 1
                now, fresh, deltas = read_ratio(ms, scratch, *worst, sample)
                samples.append((time.monotonic() - run_started, worst[1], deltas, now, fresh))
                print(f"      {samples[-1][0]:4.0f} s: most deltas {per_partition[worst]} ({worst[0]}/{worst[1]}); "
                      f"read {now * 1000:.1f} ms vs {fresh * 1000:.1f} ms freshly compacted: {now / fresh:.2f}x",
                      flush=True)
                next_sample += SAMPLE_EVERY_S
            time.sleep(max(0.0, COUNT_EVERY_S - (time.monotonic() % COUNT_EVERY_S)))
        elapsed = time.monotonic() - run_started
    finally:
        writer.stop.set()
        thread.join(timeout=60)
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    rows = compaction_rows(ms)
    ms.close()
    scratch.close()
    compacted = sum(1 for e in rows if e.state.display in COMPACTED and e.partition is not None
                    and not (e.worker_id or "").startswith("bench"))
    ratios = [now / fresh for _, _, _, now, fresh in samples]
    load_end = os.getloadavg()
    print(f"  (c) {writer.commits} commits in {elapsed:.0f} s ({writer.commits / elapsed:.1f}/s, {writer.errors} "
          f"failed); {compacted} compactions by the platform")
    print(f"      most current deltas of any partition, counted every {COUNT_EVERY_S} s: {most} (goal <= "
          f"{DELTA_NUM_THRESHOLD + 5}); median of the per-count maxima {sorted(counts)[len(counts) // 2]}")
    if ratios:
        print(f"      read vs freshly compacted, the partition with the most deltas each minute: worst "
              f"{max(ratios):.2f}x, median {sorted(ratios)[len(ratios) // 2]:.2f}x (goal <= 1.3x throughout)")
    print(f"      load average: {load_start[0]:.2f} at the start, {load_end[0]:.2f} at the end (1 min)")
    return 0


def _stop_on_signal(signum, frame) -> None:
    """SIGTERM: unwind through the finally blocks, which stop the platform; a second signal must not cut them short."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    sys.exit(143)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--tables", type=int, default=4)
    parser.add_argument("--deltas", type=int, default=11)
    parser.add_argument("--keep", help="keep the platform's home here (logs, SHOW COMPACTIONS) instead of a temp dir")
    parser.add_argument("--steady", action="store_true", help="run the steady-state part (c) instead of (a) and (b)")
    parser.add_argument("--steady-partitions", type=int, default=200)
    parser.add_argument("--base-rows", type=int, default=300_000)
    parser.add_argument("--rate", type=float, default=10.0, help="commits a second, all partitions together")
    parser.add_argument("--minutes", type=float, default=10.0)
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, _stop_on_signal)  # stop the platform it started (the finally blocks)

    base = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-fleet-"))
    if args.steady:
        try:
            return steady(args, base)
        finally:
            if not args.keep:
                shutil.rmtree(base, ignore_errors=True)
    home, template = base / "home", base / "template"
    env = platform_env(home, free_port())
    load_start = os.getloadavg()
    print(f"bench_fleet: K={args.partitions} partitions over {args.tables} tables, {args.deltas} deltas each; "
          f"load {load_start[0]:.2f}", flush=True)
    try:
        set_up_home(home, env)
        ms = metastore_of(home)
        setup_started = time.perf_counter()
        build_fleet(ms, partitions=args.partitions, tables=args.tables, deltas=args.deltas)
        ms.close()
        print(f"  data written in {time.perf_counter() - setup_started:.0f} s (not timed)", flush=True)
        shutil.copytree(home / "warehouse", template, symlinks=True)

        baseline = back_to_back(home)
        per_baseline = baseline["seconds"] / max(1, baseline["compactions"])
        print(f"  (a) back to back in one SparkSession: {baseline['compactions']} compactions in "
              f"{baseline['seconds']:.1f} s, {per_baseline:.3f} s each", flush=True)

        shutil.rmtree(home / "warehouse")
        shutil.copytree(template, home / "warehouse", symlinks=True)
        drained = drain_through_platform(home, env, args.partitions, base / "platform.log")
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    rows = drained["rows"]
    compacted = [e for e in rows if e.state.display in COMPACTED]
    if drained["compacted_at"] is None:
        print(f"  (b) the platform compacted only {len(compacted)} of {args.partitions}", flush=True)
        return 1
    drain = drained["compacted_at"] - drained["first_enqueue"]
    per_platform = drain / len(compacted)
    inversions, worst = order_inversions(rows)
    load_end = os.getloadavg()
    print(f"  (b) the platform: first entry queued {drained['first_enqueue'] - drained['platform_started']:.0f} s "
          f"after start; {len(compacted)} compacted {drain:.1f} s after it, {per_platform:.3f} s each"
          + (f"; all cleaned after {drained['cleaned_at'] - drained['first_enqueue']:.0f} s"
             if drained["cleaned_at"] else "; not all cleaned within the wait"), flush=True)
    print(f"  ratio platform / back to back, per compaction: {per_platform / per_baseline:.2f}x (goal <= 2x)")
    print(f"  entries started after an entry of their pool enqueued later: {inversions} (worst wait {worst:.1f} s;"
          " goal: none)")
    print(f"  load average: {load_start[0]:.2f} at the start, {load_end[0]:.2f} at the end (1 min)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
