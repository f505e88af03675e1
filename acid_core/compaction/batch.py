"""Many queued compactions, one after another, in one long-lived process: Hive's Worker thread, pulling from the queue.

A batch pays its start-up (a JVM, a SparkContext, Python workers) once and then runs compactions back to back, each
the whole worker protocol of `CompactionWorker` on its own (its own claim, compactor transaction, commit or failure,
HadoopJobId and numbers), so each one stays visible and one's failure does not touch the next. It pulls: before each
compaction it takes the oldest initiated entry of its pool (Hive's findNextToCompact order, CQ_ENQUEUE_TIME then
CQ_ID), so however many batches run at once and whatever order Airflow starts them in, entries start in enqueue
order. It stops when the queue of its pool is empty, when it ran `max_compactions` or `max_seconds` have passed (the
running compaction finishes), when the next entry needs a process of another kind (`accepts`: its Spark settings
differ from this application's), or when the runner can no longer run anything (its SparkContext died).
Consecutive entries of one table (the next oldest, never skipping one) may run together: their tasks in one Spark job
(`runner.run_group`), as many as the application has slots, so small partitions share a job's start and fill its
cores; each keeps its own protocol and outcome.
Cost per compaction: one queue read and a compare-and-swap more than a single run; memory: one group's tasks, each
a compaction task's.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from acid_core.compaction.attempt import Result
from acid_core.compaction.worker import CompactionWorker, Runner
from acid_core.errors import AcidError, CompactionStateError, UsageError, one_line_cause
from acid_core.metastore import Metastore
from acid_core.metastore.codes import CompactionType
from acid_core.metastore.compaction_rows import CompactionInfo
from acid_core.metastore.engine import outage_counts

# At most this many compactions share a Spark job (a big cluster's slots would otherwise claim hundreds at once,
# all put back should the application die)
MAX_GROUP = 8
# The reasons a batch ends (BatchEnd.reason)
QUEUE_EMPTY = "queue empty"
LIMIT_REACHED = "limit reached"
OTHER_SETTINGS = "other settings"
RUNNER_DOWN = "runner down"


@dataclass(frozen=True, slots=True)
class QueueSelection:
    """Which queue entries a worker takes (`CompactionQueue.initiated`'s filters): those of compaction pool `pool`, or
    of every pool but `other_than` ("default" and the pools without workers of their own), the latter after
    `pool_timeout_ms` too (Hive's hive.compactor.worker.pool.timeout; 0: never)."""

    pool: str | None = None
    other_than: tuple[str, ...] = ()
    pool_timeout_ms: int = 0

    def waiting(self, metastore: Metastore, *, limit: int) -> list[CompactionInfo]:
        """The initiated entries this selection takes, oldest first, at most `limit`."""
        if self.pool is not None:
            return metastore.compactions.initiated(limit=limit, pool=self.pool)
        return metastore.compactions.initiated(limit=limit, other_than=self.other_than,
                                               pool_timeout_ms=self.pool_timeout_ms)

    def next_waiting(self, metastore: Metastore) -> CompactionInfo | None:
        """The oldest initiated entry this selection takes, None when there is none."""
        found = self.waiting(metastore, limit=1)
        return found[0] if found else None


@dataclass(frozen=True, slots=True)
class BatchItem:
    """What one compaction of a batch did: `result` is `compacted`, `refused` or `failed`, `message` the one line the
    queue or the log shows, `stats` its numbers (duration_seconds, events_read, events_written, bytes_read,
    bytes_written, tasks)."""

    compaction_id: int
    result: str
    message: str
    stats: dict = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return self.result == "failed"

    def as_record(self) -> dict:
        return {"event": "end", "compaction_id": self.compaction_id, "result": self.result, "message": self.message,
                "stats": dict(self.stats)}


@dataclass(frozen=True, slots=True)
class BatchEnd:
    """Why a batch stopped (QUEUE_EMPTY, LIMIT_REACHED, OTHER_SETTINGS, RUNNER_DOWN), with a message, and the entry
    it stopped in front of (OTHER_SETTINGS: the one another process must run)."""

    reason: str
    message: str
    ran: int
    next_compaction_id: int | None = None

    def as_record(self) -> dict:
        return {"event": "stop", "reason": self.reason, "message": self.message, "ran": self.ran,
                "next_compaction_id": self.next_compaction_id}


class BatchWorker:
    """Runs the queued compactions of `selection` one after another with `runner` (see the module's docstring).

    Args:
        worker_id: recorded as every entry's worker (the task attempt that holds them).
        accepts: None when this process can run `entry`, else why not (it then stops in front of it).
        job_id: the application id recorded as HadoopJobId at claim (the runner's `job_label` then names the job).
        on_start, on_end: called as each compaction starts (its entry, claimed) and ends (its BatchItem), so the
            caller can log and count while the batch runs.
        clock: seconds, monotonic.
        group_size: how many consecutive queued compactions of one table may run together (default: the runner's
            `parallelism`, at most MAX_GROUP, if it has `run_group`; else 1).
    """

    def __init__(self, metastore: Metastore, *, worker_id: str, runner: Runner, selection: QueueSelection,
                 accepts: Callable[[CompactionInfo], str | None] = lambda entry: None, job_id: str | None = None,
                 on_start: Callable[[CompactionInfo], None] = lambda entry: None,
                 on_end: Callable[[BatchItem], None] = lambda item: None,
                 clock: Callable[[], float] = time.monotonic, group_size: int | None = None) -> None:
        self.metastore = metastore
        self.worker = CompactionWorker(metastore, worker_id=worker_id, runner=runner, job_id=job_id)
        self.runner = runner
        self.selection = selection
        self.accepts = accepts
        self.on_start = on_start
        self.on_end = on_end
        self.clock = clock
        # up to this many consecutive entries of one table share a run of the runner (one Spark job filling its
        # slots: a small partition is one task); 1 with a runner that runs one plan at a time
        self.group_size = (min(MAX_GROUP, max(1, int(getattr(runner, "parallelism", 1)))) if group_size is None
                           else group_size) if hasattr(runner, "run_group") else 1

    def run(self, *, max_compactions: int, max_seconds: float) -> BatchEnd:
        """Pull and run compactions until one of the stop conditions; returns why it stopped.

        Raises:
            UsageError: a negative limit.
            MetastoreError: the metastore cannot be read or changed between compactions (the compaction in hand,
                if any, is recorded as usual; nothing else was claimed).
        """
        if max_compactions < 0 or max_seconds < 0:
            raise UsageError(f"a batch needs limits of at least 0, got {max_compactions} compactions and "
                             f"{max_seconds} seconds")
        deadline = self.clock() + max_seconds
        ran = 0
        while True:
            if ran >= max_compactions or self.clock() >= deadline:
                return BatchEnd(LIMIT_REACHED, f"ran {ran} compactions, the limit of this batch "
                                f"({max_compactions} compactions, {max_seconds:g} s)", ran)
            if not _usable(self.runner):
                return BatchEnd(RUNNER_DOWN, "the runner can run no more compactions (its Spark application "
                                "stopped)", ran)
            entry = self.selection.next_waiting(self.metastore)
            if entry is None:
                return BatchEnd(QUEUE_EMPTY, f"ran {ran} compactions; no compaction is waiting", ran)
            refusal = self.accepts(entry)
            if refusal is not None:
                return BatchEnd(OTHER_SETTINGS, f"compaction {entry.id} needs another application: {refusal}", ran,
                                next_compaction_id=entry.id)
            claimed = self._claim(entry)
            if claimed is None:
                continue  # another worker took it first: the next oldest
            group = [claimed]
            while len(group) < min(self.group_size, max_compactions - ran) and self.clock() < deadline:
                following = self.selection.next_waiting(self.metastore)
                if (following is None or (following.database, following.table) != (entry.database, entry.table)
                        or following.type is CompactionType.REBALANCE or self.accepts(following) is not None):
                    break  # only the next oldest joins a group: the order stays the queue's
                joined = self._claim(following)
                if joined is None:
                    break
                group.append(joined)
            ran += len(group)
            for item in self._run_group(group):
                self.on_end(item)

    def _claim(self, entry: CompactionInfo) -> CompactionInfo | None:
        try:
            return self.metastore.compactions.claim(worker_id=self.worker.worker_id, compaction_id=entry.id)
        except CompactionStateError:
            return None

    def _run_group(self, group: list[CompactionInfo]) -> list[BatchItem]:
        """Run claimed compactions of one table together (one Spark job when the runner can), each on its own."""
        for entry in group:
            self.on_start(entry)
        started, retried = self.clock(), outage_counts()["failures"]
        outcomes = self.worker.run_claimed_group(group)
        duration = round(self.clock() - started, 3)
        retries = {"metastore_retries": outage_counts()["failures"] - retried}  # counted once: on the group's first
        items = []
        for entry, outcome in zip(group, outcomes):
            if isinstance(outcome, BaseException):  # recorded failed in the queue by the worker; the next one runs
                items.append(BatchItem(entry.id, "failed", f"compaction {entry.id} failed: {one_line_cause(outcome)}",
                                       {"duration_seconds": duration, **retries}))
                retries = {}
                continue
            result = "refused" if outcome.result == Result.REFUSED.value else "compacted"
            items.append(BatchItem(entry.id, result, f"compaction {entry.id}: {outcome.result}: {outcome.message}", {
                "duration_seconds": duration, "events_read": outcome.events_read,
                "events_written": outcome.inserts + outcome.deletes, "bytes_read": outcome.bytes_read,
                "bytes_written": outcome.bytes_written, "tasks": getattr(self.runner, "tasks_total", 0), **retries}))
            retries = {}
        return items


def _usable(runner: Runner) -> bool:
    """Whether `runner` can still run a plan (a runner without a `usable` method always can)."""
    check = getattr(runner, "usable", None)
    if check is None:
        return True
    try:
        return bool(check())
    except AcidError:
        return False
