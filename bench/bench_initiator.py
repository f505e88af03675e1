"""One initiator poll over many partitions of which few were written since the last check: listings and time.

Table: one partitioned transactional table of `--partitions` partitions (default 10,000), each holding a real delta
directory with a real ORC bucket file. The initial load commits real transactions through the metastore API (one per
`--batch` partitions: open, allocate a write id, add the components, write, commit), so COMPLETED_TXN_COMPONENTS and
the write ids are real; the first partition of each batch is written with EmbeddedWriter and copied to the others to
keep set-up fast. Then the "last check" time is noted and `--written` partitions (default 100, spread over the table)
each get one more committed write; `--hot` of them (default 5) get 9 more, so they hold 11 deltas >
delta.num.threshold 10 and the poll queues a MAJOR compaction for each (no base: Hive's determineCompactionType).

Measured, side by side in one run (dry runs are repeated, interleaved, medians of `--repeats`):
* `run_initiator(last_checked_ms=<the noted time>, dry_run=True)`: the poll the issue asks about;
* `run_initiator(last_checked_ms=None, dry_run=True)`: every written partition is a candidate, for comparison;
* `run_initiator(last_checked_ms=<the noted time>)` once, which queues the compactions.
Directory listings are counted by wrapping `FileSystem.list_dir` (the only call that lists a directory) and stats by
wrapping `FileSystem.info`, metastore SQL statements with SQLAlchemy's `before_cursor_execute` event; the wrappers are
installed by this script only. Goal: listings proportional to the written partitions, under 2 s.

SQLite (a file in a temp directory) by default; `--postgres URL` runs on that database instead (the script makes its
own Hive database there and drops it at the end), `--postgres start` on a throwaway server (tests/pg_server.py).
Run: `.venv/bin/python bench/bench_initiator.py [--partitions 10000] [--written 100] [--postgres start|URL]`.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import event
from sqlalchemy.engine import Engine

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from acid_core.compaction.initiator import DELTA_NUM_THRESHOLD, run_initiator  # noqa: E402
from acid_core.metastore import Metastore  # noqa: E402
from acid_core.metastore.catalog import TableInfo  # noqa: E402
from acid_core.metastore.txns import Operation  # noqa: E402
from acid_core.storage.fs import FileSystem  # noqa: E402
from acid_core.write.writer import EmbeddedWriter  # noqa: E402

COLUMNS = (("id", "bigint"), ("payload", "string"))
TABLE = "events"
ROWS_PER_WRITE = 20
GOAL_SECONDS = 2.0


class Counters:
    """Directory listings, stats and SQL statements made while installed (class-level wrappers, removed on exit)."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    def _on_statement(self, *_args) -> None:
        self.counts["sql"] += 1

    @contextlib.contextmanager
    def installed(self):
        original_list_dir, original_info = FileSystem.list_dir, FileSystem.info
        counts = self.counts

        def list_dir(fs, path):
            counts["listings"] += 1
            return original_list_dir(fs, path)

        def info(fs, path):
            counts["stats"] += 1
            return original_info(fs, path)

        FileSystem.list_dir, FileSystem.info = list_dir, info
        event.listen(Engine, "before_cursor_execute", self._on_statement)  # every engine: PostgreSQL has two
        try:
            yield counts
        finally:
            FileSystem.list_dir, FileSystem.info = original_list_dir, original_info
            event.remove(Engine, "before_cursor_execute", self._on_statement)


@dataclass(frozen=True, slots=True)
class Poll:
    """One measured poll."""

    seconds: float
    candidates: int
    decided: Counter
    queued: int
    listings: int
    stats: int
    sql: int


def measure(metastore: Metastore, *, last_checked_ms: int | None, dry_run: bool) -> Poll:
    counters = Counters()
    with counters.installed() as counts:
        start = time.perf_counter()
        decisions = run_initiator(metastore, last_checked_ms=last_checked_ms, dry_run=dry_run)
        seconds = time.perf_counter() - start
    decided = Counter(d.compaction_type.display if d.compaction_type else "none" for d in decisions)
    queued = sum(1 for d in decisions if d.compaction_id is not None)
    return Poll(seconds, len(decisions), decided, queued, counts["listings"], counts["stats"], counts["sql"])


def partition_spec(index: int, width: int) -> dict[str, str]:
    return {"part": str(index).zfill(width)}


def commit_write(metastore: Metastore, table: TableInfo, writer: EmbeddedWriter, specs: list[dict], *,
                 first_id: int) -> None:
    """One real transaction writing `specs`: a real ORC delta in the first partition, copied to the others."""
    txns = metastore.txns
    txn_id = txns.open_txn(agent_info="bench_initiator")
    write_id = txns.allocate_write_ids([txn_id], table.database, table.name)[txn_id]
    txns.add_components(txn_id, table.database, table.name, [table.partition_name(spec) for spec in specs],
                        Operation.INSERT)
    rows = [(first_id + i, f"event {first_id + i} " + "x" * 60) for i in range(ROWS_PER_WRITE)]
    [written] = writer.insert(rows, write_id=write_id, partition=specs[0]).directories
    for spec in specs[1:]:
        target = Path(writer.partition_location(spec)) / Path(written).name
        shutil.copytree(written, target)
    txns.commit(txn_id)


def build(metastore: Metastore, scratch: Path, *, partitions: int, written: int, hot: int,
          batch: int) -> tuple[TableInfo, str, int]:
    """The table, its initial load, the noted last-check time and the writes after it. Returns (table, db, time)."""
    database = f"bench_{uuid.uuid4().hex[:8]}"
    metastore.catalog.create_database(database, location=str(scratch / "warehouse" / f"{database}.db"))
    table = metastore.catalog.create_table(database, TABLE, COLUMNS, partition_keys=[("part", "string")],
                                           params={"transactional": "true"})
    writer = EmbeddedWriter(table.location, columns=table.columns, partition_keys=["part"])
    width = len(str(partitions - 1))
    specs = [partition_spec(i, width) for i in range(partitions)]
    for start in range(0, partitions, batch):
        commit_write(metastore, table, writer, specs[start:start + batch], first_id=start)
    for spec in specs:
        metastore.catalog.add_partition(database, TABLE, spec)

    time.sleep(0.01)
    last_checked_ms = metastore.db.clock.now_ms()  # every commit so far stamped CTC_TIMESTAMP < this
    time.sleep(0.01)
    step = max(partitions // written, 1)
    targets = [specs[i * step] for i in range(written)]
    hot_targets = set(range(0, written, max(written // max(hot, 1), 1))[:hot])
    next_id = partitions
    for index, spec in enumerate(targets):
        # a hot partition: its initial delta + DELTA_NUM_THRESHOLD new ones = one more than the threshold
        for _ in range(DELTA_NUM_THRESHOLD if index in hot_targets else 1):
            commit_write(metastore, table, writer, [spec], first_id=next_id)
            next_id += ROWS_PER_WRITE
    return table, database, last_checked_ms


def line(label: str, poll: Poll, goal: str = "") -> str:
    per = poll.listings / poll.candidates if poll.candidates else 0.0
    sql_per = poll.sql / poll.candidates if poll.candidates else 0.0
    return (f"{label:34s} {poll.candidates:>10,} {poll.seconds:>9.3f} s {poll.listings:>9,} {per:>8.2f} "
            f"{poll.stats:>7,} {poll.sql:>8,} {sql_per:>7.2f}{goal}")


def median_poll(polls: list[Poll]) -> Poll:
    """The median time; the counts, which do not vary between repetitions, of the first."""
    first = polls[0]
    return Poll(statistics.median(p.seconds for p in polls), first.candidates, first.decided, first.queued,
                first.listings, first.stats, first.sql)


def run(url: str, scratch: Path, args: argparse.Namespace, backend: str) -> None:
    metastore = Metastore(url, warehouse=str(scratch / "warehouse"))
    metastore.init()
    start = time.perf_counter()
    table, database, last_checked_ms = build(metastore, scratch, partitions=args.partitions, written=args.written,
                                             hot=args.hot, batch=args.batch)
    print(f"{backend}: built {args.partitions:,} partitions of {table.full_name} in "
          f"{time.perf_counter() - start:.1f} s ({-(-args.partitions // args.batch)} load transactions of "
          f"{args.batch:,} partitions); {args.written} partitions written since the last check, {args.hot} of them "
          f"with {DELTA_NUM_THRESHOLD + 1} deltas")
    try:
        since, everything = [], []
        for _ in range(args.repeats):  # interleaved; dry runs change nothing
            since.append(measure(metastore, last_checked_ms=last_checked_ms, dry_run=True))
            if not args.skip_full:
                everything.append(measure(metastore, last_checked_ms=None, dry_run=True))
        queued = measure(metastore, last_checked_ms=last_checked_ms, dry_run=False)
        since_median = median_poll(since)

        print(f"\n{'poll':34s} {'candidates':>10s} {'time':>11s} {'listings':>9s} {'per cand':>8s} "
              f"{'stats':>7s} {'SQL stmts':>8s} {'per cand':>7s}")
        goal = "  goal < 2 s: " + ("met" if since_median.seconds < GOAL_SECONDS else "MISSED")
        print(line("since last check, dry run", since_median, goal))
        print(line("since last check, queueing", queued))
        if everything:
            full = median_poll(everything)
            print(line("every written partition, dry run", full))
            print(f"\nfull / since-last-check: candidates {full.candidates / since_median.candidates:.0f}x, "
                  f"listings {full.listings / max(since_median.listings, 1):.0f}x, "
                  f"SQL statements {full.sql / max(since_median.sql, 1):.0f}x, "
                  f"time {full.seconds / since_median.seconds:.0f}x")
        print(f"decisions since last check: {dict(since_median.decided)}; queued by the real poll: {queued.queued}")
        print(f"listings per written partition: {since_median.listings / args.written:.2f} "
              f"(one per partition directory and one per delta directory in it)")
        if len(since) > 1:
            print(f"since-last-check dry runs: {', '.join(f'{p.seconds * 1000:.0f} ms' for p in since)}")
        if everything and len(everything) > 1:
            print(f"full dry runs: {', '.join(f'{p.seconds:.2f} s' for p in everything)}")
    finally:
        for dropped in metastore.catalog.drop_database(database, cascade=True):
            shutil.rmtree(dropped.location, ignore_errors=True)
        metastore.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--written", type=int, default=100, help="partitions written since the last check")
    parser.add_argument("--hot", type=int, default=5, help="of those, partitions given 11 deltas (compacted)")
    parser.add_argument("--batch", type=int, default=1_000, help="partitions per transaction of the initial load")
    parser.add_argument("--repeats", type=int, default=3, help="dry-run repetitions (median time)")
    parser.add_argument("--skip-full", action="store_true", help="do not measure the poll of every partition")
    parser.add_argument("--postgres", metavar="URL|start",
                        help="a PostgreSQL metastore URL, or `start` for a throwaway server (tests/pg_server.py)")
    args = parser.parse_args()
    if not 1 <= args.written <= args.partitions or not 0 <= args.hot <= args.written or args.batch < 1 \
            or args.repeats < 1:
        parser.error("need 1 <= --written <= --partitions, 0 <= --hot <= --written, --batch >= 1, --repeats >= 1")

    with tempfile.TemporaryDirectory() as scratch_name, contextlib.ExitStack() as stack:
        scratch = Path(scratch_name)
        if args.postgres is None:
            run(f"sqlite:///{scratch}/metastore.db", scratch, args, "SQLite")
            return
        url = args.postgres
        if url == "start":
            from support.pg_server import PostgresServer

            url = stack.enter_context(PostgresServer.start_new()).create_database("bench")
        run(url, scratch, args, "PostgreSQL")


if __name__ == "__main__":
    main()
