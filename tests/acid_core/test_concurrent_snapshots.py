"""Readers, writers, compactions and the cleaner together for a bounded time, every read checked against a model.

Threads, each with its own Metastore on the wall clock, on SQLite and on PostgreSQL:
- writers insert, update (split-update) and delete rows of their own keys in two partitions of one table, in real
  transactions (a pre-read of ROW__IDs under the writer's own snapshot, locks, files, commit); some abort on
  purpose, some lose a first-committer-wins conflict;
- a compactor queues MAJOR and MINOR compactions of the two partitions and runs them with the real worker;
- the cleaner runs in a loop, housekeeping about once a second;
- readers read both partitions under a transaction's snapshot, or under a reader lease, some of them holding the
  snapshot open while compactions commit and the cleaner runs.
The model: each writer is sequential, so the commits of it that a snapshot sees are a prefix of its commits; the rows
a snapshot must show are, per writer, its keys after the last of its commits that the snapshot's ValidTxnList says is
valid. The test counts failed reads and reads that differ from the model, and asserts both are zero.
"""

from __future__ import annotations

import os
import random
import threading
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field

import pytest

from acid_core.compaction.cleaner import clean
from acid_core.compaction.worker import CompactionWorker
from acid_core.errors import AcidError, TxnAbortedError
from acid_core.format.rowid import RowId
from acid_core.format.validity import ValidTxnList
from acid_core.metastore import Metastore
from acid_core.metastore.codes import CompactionState, CompactionType
from acid_core.metastore.engine import Clock, Identity
from acid_core.metastore.txns import Snapshot
from acid_core.operations.housekeeping import housekeep
from acid_core.read.merge import read_snapshot
from acid_core.write.table_write import TableWrite

pytestmark = pytest.mark.slow

TABLE, NAME = "events", "default.events"
PARTITIONS = ("ds=a", "ds=b")
DURATION_S = float(os.environ.get("ACID_CONCURRENCY_SECONDS", "12"))  # longer soak runs: set it
MAX_LOOPS = 5_000  # per thread, whatever the time
WRITERS, TXN_READERS, LEASE_READERS = 3, 2, 2


def partition_of(key: int) -> str:
    return PARTITIONS[key % 2]


@dataclass
class Figures:
    """What the threads did; every counter is updated under `lock`."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    counts: Counter = field(default_factory=Counter)
    differences: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def add(self, name: str, amount: int = 1) -> None:
        with self.lock:
            self.counts[name] += amount

    def error(self, where: str) -> None:
        with self.lock:
            self.errors.append(f"{where}:\n{traceback.format_exc()}")


class Writer:
    """A sequential writer of the keys k with k % WRITERS == index; `history`: (txn id, its keys after the commit)."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.history: list[tuple[int, dict[int, str]]] = []
        self.state: dict[int, str] = {}
        self.next_key = index

    def expected_under(self, txns: ValidTxnList) -> dict[int, str]:
        for txn_id, state in reversed(self.history):
            if txns.is_valid(txn_id):
                return state
        return {}


def _store(url: str, warehouse: str) -> Metastore:
    return Metastore(url, warehouse=warehouse, identity=Identity("tester", "testhost"), pool_size=2)


def _rows(store: Metastore, snapshot: Snapshot, location: str, *, row_ids: bool = False,
          pause_s: float = 0.0) -> list[dict]:
    """Both partitions under `snapshot`; `pause_s` before each, so the snapshot stays open while others work."""
    rows = []
    for partition in PARTITIONS:
        time.sleep(pause_s)
        rows += read_snapshot(f"{location}/{partition}", write_ids=snapshot.write_ids[NAME], txns=snapshot.txns,
                              include_row_id=row_ids, missing_ok=True).to_pylist()
    return rows


class Run:
    def __init__(self, url: str, warehouse: str, location: str, seed: int) -> None:
        self.url, self.warehouse, self.location = url, warehouse, location
        self.figures = Figures()
        self.writers = [Writer(index) for index in range(WRITERS)]
        self.deadline = time.monotonic() + DURATION_S
        self.stop = threading.Event()
        self.seed = seed

    def running(self, loop: int) -> bool:
        return loop < MAX_LOOPS and not self.stop.is_set() and time.monotonic() < self.deadline

    def expected(self, txns: ValidTxnList) -> dict[int, str]:
        expected: dict[int, str] = {}
        for writer in self.writers:
            expected.update(writer.expected_under(txns))
        return expected

    def check(self, kind: str, snapshot: Snapshot, rows: list[dict]) -> None:
        seen = {row["id"]: row["value"] for row in rows}
        expected = self.expected(snapshot.txns)
        self.figures.add(f"reads ({kind})")
        if len(seen) != len(rows) or seen != expected:
            missing = sorted(set(expected) - set(seen))[:5]
            extra = sorted(set(seen) - set(expected))[:5]
            changed = sorted(k for k in set(seen) & set(expected) if seen[k] != expected[k])[:5]
            with self.figures.lock:
                self.figures.differences.append(
                    f"{kind} read under {snapshot.txns}: {len(rows)} rows, {len(seen)} keys, {len(expected)} expected; "
                    f"missing {missing}, extra {extra}, changed {changed}")

    # --- the threads -------------------------------------------------------------------------------------------
    def write(self, writer: Writer) -> None:
        store = _store(self.url, self.warehouse)
        random_ = random.Random(self.seed * 100 + writer.index)
        try:
            loop = 0
            while self.running(loop):
                loop += 1
                try:
                    self._one_write(store, writer, random_)
                except AcidError:
                    self.figures.error(f"writer {writer.index}")
                    return
        finally:
            store.close()

    def _one_write(self, store: Metastore, writer: Writer, random_: random.Random) -> None:
        own = sorted(writer.state)
        kind = random_.choice(["insert", "insert", "update", "delete"]) if own else "insert"
        write = TableWrite.open(store, "default", TABLE, agent_info=f"writer {writer.index}")
        txn_id, write_id = write.txn_id, write.write_id
        new_state = dict(writer.state)
        try:
            if kind == "insert":
                keys = [writer.next_key + WRITERS * i for i in range(random_.randint(1, 4))]
                writer_keys_next = keys[-1] + WRITERS
            else:
                keys = random_.sample(own, min(len(own), random_.randint(1, 2)))
                writer_keys_next = writer.next_key
            partitions = sorted({partition_of(key) for key in keys})
            row_ids: dict[int, RowId] = {}
            if kind != "insert":
                snapshot = store.txns.snapshot([NAME], current_txn=txn_id)
                rows = _rows(store, snapshot, self.location, row_ids=True)
                mine = {row["id"]: row for row in rows if row["id"] % WRITERS == writer.index}
                self.check("update/delete pre-read", snapshot, rows)
                row_ids = {key: RowId(mine[key]["row__id"]["writeid"], mine[key]["row__id"]["bucketid"],
                                      mine[key]["row__id"]["rowid"]) for key in keys if key in mine}
            for partition in partitions:
                spec = {"ds": partition.split("=", 1)[1]}
                chosen = [key for key in keys if partition_of(key) == partition]
                if kind == "insert":
                    values = {key: f"w{write_id}" for key in chosen}
                    write.insert([(key, values[key]) for key in chosen], partition=spec)
                    new_state.update(values)
                elif kind == "update":
                    values = {key: f"u{write_id}" for key in chosen}
                    write.update([row_ids[key] for key in chosen], [(key, values[key]) for key in chosen],
                                 partition=spec)
                    new_state.update(values)
                else:
                    write.delete([row_ids[key] for key in chosen], partition=spec)
                    for key in chosen:
                        del new_state[key]
            if random_.random() < 0.1:
                write.abort()
                self.figures.add("transactions aborted on purpose")
                return
            # Recorded before the commit: a reader may see the commit before commit() returns here, and an entry
            # whose transaction never commits is valid in no snapshot.
            writer.history.append((txn_id, new_state))
            write.commit()
        except TxnAbortedError:  # first committer wins (WriteConflictError), or timed out
            writer.history.pop()
            self.figures.add("transactions lost a conflict")
            return
        except BaseException:
            write.abort()
            raise
        writer.state = new_state
        writer.next_key = writer_keys_next
        self.figures.add(f"transactions committed ({kind})")

    def read(self, kind: str, number: int) -> None:
        """Read in a loop; some reads (a quarter under transactions, half under leases) hold their snapshot open for
        0.1-0.5 s while compactions commit and the cleaner runs: what they read must still be there."""
        store = _store(self.url, self.warehouse)
        random_ = random.Random(self.seed * 1000 + number + (500 if kind == "lease" else 0))
        slow_share = 0.25 if kind == "transaction" else 0.5
        try:
            loop = 0
            while self.running(loop):
                loop += 1
                if kind == "transaction":
                    txn_id = store.txns.open_txn(agent_info="reader")
                    snapshot = store.txns.snapshot([NAME], current_txn=txn_id)
                    release = lambda txn_id=txn_id: store.txns.commit(txn_id)  # noqa: E731
                else:
                    lease = store.leases.acquire("default", TABLE, owner="reader")
                    snapshot = lease.snapshot
                    release = lambda lease=lease: store.leases.release(lease.lease_id)  # noqa: E731
                try:
                    pause_s = random_.uniform(0.05, 0.25) if random_.random() < slow_share else 0.0
                    rows = _rows(store, snapshot, self.location, pause_s=pause_s)
                    self.figures.add("reads held open" if pause_s else "reads at once")
                except Exception:
                    self.figures.add("failed reads")
                    self.figures.error(f"{kind} reader")
                    rows = None
                finally:
                    release()
                if rows is not None:
                    self.check(kind, snapshot, rows)
                time.sleep(0.005)
        except BaseException:
            self.figures.error(f"{kind} reader (outside a read)")
        finally:
            store.close()

    def compact(self) -> None:
        store = _store(self.url, self.warehouse)
        random_ = random.Random(self.seed)
        try:
            loop = 0
            while self.running(loop):
                loop += 1
                partition = PARTITIONS[loop % 2]
                kind = CompactionType.MAJOR if random_.random() < 0.5 else CompactionType.MINOR
                queued = store.compactions.enqueue("default", TABLE, partition, kind)
                if queued.accepted:
                    outcome = CompactionWorker(store, worker_id="compactor-thread").run(queued.compaction_id)
                    self.figures.add(f"compactions {outcome.result}")
                time.sleep(0.2)
        except BaseException:
            self.figures.error("compactor")
        finally:
            store.close()

    def clean_loop(self) -> None:
        """The cleaner in a loop, and housekeeping about once a second (with Hive's time-outs nothing live expires)."""
        store = _store(self.url, self.warehouse)
        try:
            loop, last_housekeeping = 0, 0.0
            while self.running(loop):
                loop += 1
                results = clean(store, log=lambda line: None)
                self.figures.add("directories removed", sum(len(result.removed) for result in results))
                for result in results:
                    if result.outcome != "cleaned":
                        self.figures.add(f"cleaner outcome {result.outcome}")
                if time.monotonic() - last_housekeeping > 1.0:
                    report = housekeep(store)
                    self.figures.add("housekeeping runs")
                    if report.timed_out_txns or report.reverted_compactions or report.problems:
                        with self.figures.lock:
                            self.figures.errors.append(f"housekeeping took work from live threads: {report}")
                    last_housekeeping = time.monotonic()
                time.sleep(0.05)
        except BaseException:
            self.figures.error("cleaner")
        finally:
            store.close()


def test_readers_writers_compactions_and_the_cleaner_together_match_the_model(make_ms, metastore_url, tmp_path):
    setup = make_ms(clock=Clock())
    info = setup.catalog.create_table("default", TABLE, [("id", "int"), ("value", "string")],
                                      partition_keys=[("ds", "string")], params={"transactional": "true"})
    for partition in PARTITIONS:
        setup.catalog.add_partition("default", TABLE, {"ds": partition.split("=", 1)[1]})
    run = Run(setup.url, str(tmp_path / "warehouse"), info.location, seed=20261124)
    threads = ([threading.Thread(target=run.write, args=(writer,), name=f"writer-{writer.index}")
                for writer in run.writers]
               + [threading.Thread(target=run.read, args=("transaction", i), name=f"txn-reader-{i}")
                  for i in range(TXN_READERS)]
               + [threading.Thread(target=run.read, args=("lease", i), name=f"lease-reader-{i}")
                  for i in range(LEASE_READERS)]
               + [threading.Thread(target=run.compact, name="compactor"),
                  threading.Thread(target=run.clean_loop, name="cleaner")])
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=DURATION_S + 120)
    run.stop.set()
    assert not any(thread.is_alive() for thread in threads), "a thread did not stop within its bound"
    duration = time.monotonic() - started

    for _ in range(3):  # nothing is open any more: everything obsolete can go
        run.figures.add("directories removed", sum(len(r.removed) for r in clean(setup, log=lambda line: None)))
    final = setup.txns.snapshot([NAME])
    run.check("final", final, _rows(setup, final, info.location))
    expected_final = {}
    for writer in run.writers:
        expected_final.update(writer.state)
    assert run.expected(final.txns) == expected_final

    # Then one last MAJOR compaction per partition and the cleaner: each partition is one base with the same rows.
    for partition in PARTITIONS:
        queued = setup.compactions.enqueue("default", TABLE, partition, CompactionType.MAJOR)
        CompactionWorker(setup).run(queued.compaction_id)
    for _ in range(3):
        clean(setup, log=lambda line: None)
    for partition in PARTITIONS:
        names = [name for name in os.listdir(f"{info.location}/{partition}") if not name.startswith((".", "_"))]
        assert len(names) == 1 and names[0].startswith("base_"), f"{partition} after the last clean: {names}"
    compacted = setup.txns.snapshot([NAME])
    run.check("after a last compaction", compacted, _rows(setup, compacted, info.location))

    counts = run.figures.counts
    reads = sum(n for name, n in counts.items() if name.startswith("reads"))
    summary = (f"{metastore_url.split(':', 1)[0]}: {duration:.1f} s, "
               + ", ".join(f"{name} {counts[name]}" for name in sorted(counts))
               + f", row differences {len(run.figures.differences)}, thread errors {len(run.figures.errors)}")
    print(f"\nconcurrency run: {summary}")
    assert not run.figures.errors, "\n".join(run.figures.errors[:3])
    assert not run.figures.differences, "\n".join(run.figures.differences[:5])
    assert counts["failed reads"] == 0
    committed = sum(n for name, n in counts.items() if name.startswith("transactions committed"))
    assert reads >= 30 and committed >= 30, summary
    assert counts["compactions compacted"] >= 2 and counts["directories removed"] >= 2, summary
    assert counts["reads held open"] >= 5 and counts["housekeeping runs"] >= 3, summary
    assert not [name for name in counts if name.startswith("cleaner outcome")], summary
    unfinished = (CompactionState.WORKING, CompactionState.INITIATED)
    assert [entry for entry in setup.compactions.show() if entry.state in unfinished] == []
