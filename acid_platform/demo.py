"""The demo warehouse of `make run`: two transactional tables and a writer that keeps streaming transactions into them.

`create_demo_tables` creates (or reuses) `demo.events` (unpartitioned) and `demo.sales` (partitioned by `day`) with
`acid sql` HiveQL. `python -m acid_platform.demo` runs the writer until SIGINT/SIGTERM: every `--interval` seconds one
write, alternating between the tables —

- `demo.sales`: one streaming batch of five transactions into the current day's partition (one of them aborted), as
  Hive's streaming ingest does; one delta per batch. After `--batches-per-day` batches it moves to the next day of a
  window of `--days` days and starts over at the first; coming back to a day, it first deletes that day's rows in one
  transaction (a daily reload), so the number of partitions and rows stays bounded.
- `demo.events`: with the embedded writer, in turn an insert, an update (split-update: a delta and a delete delta),
  an insert, a delete, an insert and an insert that is aborted (an aborted delta the cleaner removes later). Deletes
  remove more rows once the table holds more than `--max-event-rows`, so it stays small.

At the default pace (4 s) each table gets a new delta about every 8 s, so both pass Hive's
hive.compactor.delta.num.threshold (10 deltas) within about a minute and a half and the initiator queues a major
compaction of each (no base yet). After that a few new deltas already exceed 10% of the small base
(hive.compactor.delta.pct.threshold), so a table or partition still being written gets a major compaction about
every initiator cycle; a `compactorthreshold.*` table property (`acid_table_settings` DAG) changes that per table.
Each write is one line in the log. The `acid` command run with the same ACID_HOME sees the same metastore and warehouse.
"""

from __future__ import annotations

import argparse
import datetime
import logging
import random
import signal
import sys
import threading
import time
from collections.abc import Callable

from acid_core.errors import AcidError
from acid_core.format.rowid import RowId
from acid_core.metastore import Metastore
from acid_core.metastore.locations import data_location
from acid_core.write.streaming import StreamingConnection
from acid_core.write.table import AcidTable
from acid_core.write.table_write import TableWrite

DATABASE = "demo"
COLUMNS = (("id", "bigint"), ("customer", "string"), ("amount", "double"))
TABLES = (("events", ()), ("sales", (("day", "string"),)))  # name, partition keys
# What `CREATE TABLE ... TBLPROPERTIES ('transactional'='true')` records in Hive 3 (and in `acid sql`)
PROPERTIES = {"transactional": "true", "transactional_properties": "default", "bucketing_version": "2"}
FIRST_DAY = datetime.date(2026, 11, 1)
STREAM_BATCH = 5  # transactions per streaming batch (Hive's TransactionBatch); the fourth is aborted
EVENT_ACTIONS = ("insert", "update", "insert", "delete", "insert", "aborted insert")
MAX_CONSECUTIVE_FAILURES = 20
# work(write transaction, visible row ids, partition spec) -> what it did, or None for nothing to do
Work = Callable[[TableWrite, list, dict | None], str | None]

log = logging.getLogger("acid.demo.writer")


def create_demo_tables(store: Metastore) -> list[str]:
    """Create `demo.events` and `demo.sales` (and their directories) unless they exist (idempotent); returns their
    full names."""
    store.catalog.create_database(DATABASE, if_not_exists=True)
    names = []
    for name, keys in TABLES:
        info = store.catalog.create_table(DATABASE, name, COLUMNS, partition_keys=keys, params=PROPERTIES,
                                          if_not_exists=True)
        where = data_location(info)
        where.fs.make_dirs(where.path)
        names.append(info.full_name)
    return names


def _row(rng: random.Random) -> tuple:
    return rng.randrange(1_000_000_000), f"user-{rng.randrange(100):03d}", round(rng.uniform(1, 500), 2)


class DemoWriter:
    """One write per `step()`: a streaming batch into demo.sales or an embedded DML transaction on demo.events."""

    def __init__(self, store: Metastore, *, days: int = 7, batches_per_day: int = 15, max_event_rows: int = 300,
                 rng: random.Random | None = None) -> None:
        if days < 1 or batches_per_day < 1 or max_event_rows < 1:
            raise AcidError(f"days ({days}), batches_per_day ({batches_per_day}) and max_event_rows "
                            f"({max_event_rows}) must all be at least 1")
        self.store = store
        self.days = days
        self.batches_per_day = batches_per_day
        self.max_event_rows = max_event_rows
        self.rng = rng or random.Random()
        self.steps = 0
        self.sales_batches = 0
        self.event_writes = 0

    # --- demo.sales: streaming ingest ------------------------------------------------------------------------------
    def current_day(self) -> str:
        day = FIRST_DAY + datetime.timedelta(days=(self.sales_batches // self.batches_per_day) % self.days)
        return day.isoformat()

    def stream_sales(self) -> str:
        """One streaming batch into the current day's partition; the batch's fourth transaction is aborted.

        The first batch of a day that already holds rows (the writer came round to it again) is preceded by a
        transaction deleting them, as a daily reload would, so the table stays small.
        """
        day = self.current_day()
        reloaded = ""
        known = {partition.name for partition in self.store.catalog.list_partitions(DATABASE, "sales")}
        if self.sales_batches % self.batches_per_day == 0 and f"day={day}" in known:
            reloaded = self._transaction("sales", {"day": day}, "reload", True, self._delete_all)
            reloaded = "" if reloaded is None else f"{reloaded}; "
        committed = aborted = rows = 0
        with StreamingConnection(self.store, DATABASE, "sales", partition={"day": day}, batch_size=STREAM_BATCH,
                                 agent_info="demo writer (streaming)") as stream:
            first = None
            for number in range(STREAM_BATCH):
                txn = stream.begin_transaction()
                first = first if first is not None else txn
                batch = [_row(self.rng) for _ in range(self.rng.randrange(3, 10))]
                stream.write(batch)
                if number == 3:
                    stream.abort_transaction()
                    aborted += 1
                else:
                    stream.commit_transaction()
                    committed += 1
                    rows += len(batch)
        self.sales_batches += 1
        return (f"{reloaded}demo.sales day={day}: streamed a batch of {STREAM_BATCH} transactions from {first} "
                f"({committed} committed with {rows} rows, {aborted} aborted)")

    @staticmethod
    def _delete_all(write: TableWrite, row_ids: list, partition: dict | None) -> str | None:
        if not row_ids:
            return None
        write.delete([RowId(r["writeid"], r["bucketid"], r["rowid"]) for r in row_ids], partition=partition)
        return f"deleted all {len(row_ids)} rows of the day"

    # --- transactions of the embedded writer -----------------------------------------------------------------------
    def _transaction(self, table: str, partition: dict | None, action: str, reads: bool, work: Work, *,
                     abort: bool = False) -> str | None:
        """Run `work(write, visible_row_ids, partition)` in one write transaction on demo.<table>, locked first (as
        Hive does); returns what it did, or None when `work` found nothing to do (the transaction is aborted)."""
        handle = AcidTable.load(self.store, DATABASE, table)
        name = handle.info.partition_name(partition or {})
        with handle.new_write(agent_info=f"demo writer ({action})", partition=name) as write:
            row_ids = write.read(name, include_row_id=True).column("row__id").to_pylist() if reads else []
            what = work(write, row_ids, partition)
            if what is None or abort:
                write.abort()
                return None if what is None else f"demo.{table}: {what} in transaction {write.txn_id}, then aborted it"
        return f"demo.{table}: {what} in transaction {write.txn_id} (write id {write.write_id})"

    def _pick(self, row_ids: list, count: int) -> list[RowId]:
        chosen = self.rng.sample(row_ids, min(count, len(row_ids)))
        return [RowId(r["writeid"], r["bucketid"], r["rowid"]) for r in chosen]

    def write_events(self) -> str:
        """The next action of EVENT_ACTIONS on demo.events (an update or delete of an empty table inserts instead)."""
        action = EVENT_ACTIONS[self.event_writes % len(EVENT_ACTIONS)]
        self.event_writes += 1

        def insert(write: TableWrite, row_ids: list, partition: None) -> str:
            rows = [_row(self.rng) for _ in range(self.rng.randrange(3, 10))]
            write.insert(rows)
            return f"inserted {len(rows)} rows"

        def update(write: TableWrite, row_ids: list, partition: None) -> str:
            victims = self._pick(row_ids, self.rng.randrange(1, 4))
            if not victims:
                return insert(write, row_ids, partition)
            write.update(victims, [_row(self.rng) for _ in victims])
            return f"updated {len(victims)} of {len(row_ids)} rows"

        def delete(write: TableWrite, row_ids: list, partition: None) -> str:
            victims = self._pick(row_ids, self.rng.randrange(1, 4) + max(0, len(row_ids) - self.max_event_rows))
            if not victims:
                return insert(write, row_ids, partition)
            write.delete(victims)
            return f"deleted {len(victims)} of {len(row_ids)} rows"

        work = {"insert": insert, "aborted insert": insert, "update": update, "delete": delete}[action]
        return self._transaction("events", None, action, action in ("update", "delete"), work,
                                 abort=action == "aborted insert")

    def step(self) -> str:
        """One write, alternating between the tables (demo.sales first). Returns what it did."""
        self.steps += 1
        return self.stream_sales() if self.steps % 2 == 1 else self.write_events()


class StopFlag:
    """A stop request set by a signal handler: no lock (threading.Event.set in a handler can deadlock its waiter)."""

    def __init__(self) -> None:
        self._set = False

    def set(self) -> None:
        self._set = True

    def is_set(self) -> bool:
        return self._set

    def wait(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while not self._set and time.monotonic() < deadline:
            time.sleep(min(0.1, max(0.0, deadline - time.monotonic())))
        return self._set


def run(store: Metastore, *, interval: float, rounds: int | None, stop: StopFlag | threading.Event,
        **options) -> int:
    """Write until `stop` is set (or `rounds` writes were made); returns the exit status."""
    create_demo_tables(store)
    writer = DemoWriter(store, **options)
    failures = 0
    log.info("writing into demo.events and demo.sales every %.1f s (metastore %s, warehouse %s)", interval,
             store.url, store.catalog.warehouse)
    while not stop.is_set() and (rounds is None or writer.steps < rounds):
        try:
            log.info("%s", writer.step())
            failures = 0
        except AcidError as exc:  # e.g. a lock time-out while a compaction holds the table: try again next time
            failures += 1
            log.warning("write %d failed (%d in a row): %s", writer.steps, failures, exc)
        except Exception:
            failures += 1
            log.exception("write %d failed (%d in a row)", writer.steps, failures)
        if failures >= MAX_CONSECUTIVE_FAILURES:
            log.error("giving up after %d failed writes in a row", failures)
            return 1
        stop.wait(interval)
    if stop.is_set():
        log.info("asked to stop (SIGINT/SIGTERM)")
    log.info("stopped after %d writes (%d streaming batches, %d writes to demo.events)", writer.steps,
             writer.sales_batches, writer.event_writes)
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m acid_platform.demo",
                                     description="create the demo tables and stream transactions into them")
    parser.add_argument("--metastore", help="SQLAlchemy URL (default: ACID_METASTORE_URL or SQLite under ACID_HOME)")
    parser.add_argument("--warehouse", help="warehouse directory (default: ACID_WAREHOUSE or ACID_HOME/warehouse)")
    parser.add_argument("--interval", type=float, default=4.0, help="seconds between writes (default 4)")
    parser.add_argument("--rounds", type=int, help="stop after this many writes (default: until SIGINT/SIGTERM)")
    parser.add_argument("--days", type=int, default=7, help="days of demo.sales partitions written in turn")
    parser.add_argument("--batches-per-day", type=int, default=15, help="streaming batches per day before the next")
    parser.add_argument("--max-event-rows", type=int, default=300, help="deletes shrink demo.events above this")
    parser.add_argument("--log-file", help="append the log here (default: standard error)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.interval < 0 or (args.rounds is not None and args.rounds < 0):
        print("acid demo: --interval and --rounds must not be negative", file=sys.stderr)
        return 2
    handler = logging.FileHandler(args.log_file) if args.log_file else logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False

    stop = StopFlag()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda signum, frame: stop.set())
    store = Metastore(args.metastore, warehouse=args.warehouse)
    try:
        store.init()
        return run(store, interval=args.interval, rounds=args.rounds, stop=stop, days=args.days,
                   batches_per_day=args.batches_per_day, max_event_rows=args.max_event_rows)
    except AcidError as exc:
        log.error("%s", exc)
        return 1
    finally:
        store.close()


if __name__ == "__main__":
    sys.exit(main())
