"""The compaction queue over the last hours, from the metastore's own history (no external monitoring): how many
entries waited and worked, how long the oldest had waited, how many compactions ended each hour by outcome, and how
long they worked. What the ACID view draws; Hive 4 keeps no such series either (its AcidMetricsService samples
gauges such as `compaction_oldest_enqueue_age_in_sec`), so they are rebuilt from each entry's times.

An entry waits from its enqueue time to its start (or to its end when it never started) and works from its start to
its commit (or its end: failed, refused, aborted). Every entry that was in the queue during the window is either
still in COMPACTION_QUEUE or left it (CC_END) inside the window, so two reads see them all.
COMPLETED_COMPACTIONS is purged by Hive's rules (the newest few entries per partition and state): on a partition
compacted more often than that within the window, the counts are a lower bound.

Cost: two bounded reads, the history by its CC_END index (newest first, at most `MAX_ROWS` rows) and the queue (it
holds pending work only, at most `MAX_ROWS` rows); then O(n log n) in the rows read. Nothing grows with the history.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Row

from acid_core.errors import UsageError
from acid_core.metastore import Metastore
from acid_core.metastore import schema as s
from acid_core.metastore.codes import CompactionState

HOUR_MS = 3_600_000
MAX_HOURS = 7 * 24  # Hive's history retention time-out (HistoryRetention.timeout_ms)
DEFAULT_HOURS = 12
MAX_ROWS = 20_000  # history rows read per request; past it the window's start is cut (`complete_since_ms`)
MAX_STEPS = 120  # points of the queue series
STEP_MINUTES = (1, 2, 5, 10, 15, 30, 60, 120, 180, 360)
# What a compaction came to: `succeeded` once it committed (ready for cleaning, or cleaned).
SUCCEEDED, FAILED, REFUSED, ABORTED, DID_NOT_INITIATE = "succeeded", "failed", "refused", "aborted", "did not initiate"
OUTCOMES = (SUCCEEDED, FAILED, REFUSED, ABORTED, DID_NOT_INITIATE)
_OUTCOME_OF = {CompactionState.READY_FOR_CLEANING.value: SUCCEEDED, CompactionState.SUCCEEDED.value: SUCCEEDED,
               CompactionState.FAILED.value: FAILED, CompactionState.REFUSED.value: REFUSED,
               CompactionState.ABORTED.value: ABORTED, CompactionState.DID_NOT_INITIATE.value: DID_NOT_INITIATE}
# Upper bounds (seconds) of the working-time buckets; the last bucket is open.
DURATION_BOUNDS_S = (10, 30, 60, 120, 300, 600, 1800, 3600)


@dataclass(frozen=True, slots=True)
class QueueStep:
    """One step of the queue series: the most entries waiting (`initiated`) and working at any moment of it, and the
    longest any entry had waited by its end (or by when it started, if it started within the step)."""

    start_ms: int
    waiting: int
    working: int
    oldest_waiting_s: float


@dataclass(frozen=True, slots=True)
class HourOutcomes:
    """Compactions that ended in one hour (committed, or left the queue otherwise), by outcome (OUTCOMES order)."""

    start_ms: int
    counts: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class DurationBucket:
    """Compactions of the window whose working time (start to commit or end) fell in [low_s, high_s), by outcome."""

    low_s: float
    high_s: float | None
    counts: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class HistoryStats:
    since_ms: int
    until_ms: int
    step_ms: int
    queue: tuple[QueueStep, ...]
    hours: tuple[HourOutcomes, ...]
    durations: tuple[DurationBucket, ...]
    median_s: float | None  # working time of the window's compactions
    p95_s: float | None
    max_s: float | None
    ended: int  # compactions that ended in the window
    waiting_now: int
    working_now: int
    oldest_waiting_now_s: float
    rows_read: int
    complete_since_ms: int  # history before this was not read (MAX_ROWS); equals since_ms when all was read


@dataclass(frozen=True, slots=True)
class _Entry:
    """One queue entry's life: waiting [enqueue, wait_end), working [start, work_end); None: still so."""

    enqueue_ms: int | None
    wait_end_ms: int | None
    start_ms: int | None
    work_end_ms: int | None
    outcome: str | None  # None: still in the queue's pending work
    ended_ms: int | None  # when it reached its outcome


def step_for(span_ms: int) -> int:
    """The smallest round step (STEP_MINUTES) that cuts `span_ms` into at most MAX_STEPS steps."""
    for minutes in STEP_MINUTES:
        if span_ms / (minutes * 60_000) <= MAX_STEPS:
            return minutes * 60_000
    return STEP_MINUTES[-1] * 60_000


def history_stats(metastore: Metastore, *, hours: int = DEFAULT_HOURS, database: str | None = None,
                  table: str | None = None, now_ms: int | None = None) -> HistoryStats:
    """The queue, outcomes and working times of the last `hours` (from the start of that hour to now), of all tables
    or of one database or table.

    Raises:
        UsageError: `hours` outside 1..MAX_HOURS, or a table without its database.
    """
    if isinstance(hours, bool) or not isinstance(hours, int) or not 1 <= hours <= MAX_HOURS:
        raise UsageError(f"chart window of {hours!r} hours: give a whole number of hours in 1..{MAX_HOURS}")
    if table is not None and database is None:
        raise UsageError(f"table {table!r} without its database: give both")
    until = now_ms if now_ms is not None else metastore.db.clock.now_ms()
    since = (until - hours * HOUR_MS) // HOUR_MS * HOUR_MS
    history, queue = metastore.db.run("read the compaction history of a window", lambda conn: _read(
        conn, since=since, database=database, table=table), write=False, snapshot=True)
    complete_since = since
    if len(history) > MAX_ROWS:
        history = history[:MAX_ROWS]
        complete_since = history[-1].CC_END
    entries = [_from_history(row) for row in history] + [_from_queue(row) for row in queue[:MAX_ROWS]]
    step = step_for(until - since)
    finished = [e for e in entries if e.ended_ms is not None and since <= e.ended_ms <= until]
    working_times = sorted(max(0, e.work_end_ms - e.start_ms) / 1000 for e in finished
                           if e.start_ms is not None and e.work_end_ms is not None)
    waiting_now = [e for e in entries if e.outcome is None and e.start_ms is None]
    enqueued = [e.enqueue_ms for e in waiting_now if e.enqueue_ms is not None]
    return HistoryStats(
        since_ms=since, until_ms=until, step_ms=step, queue=_queue_steps(entries, since, until, step),
        hours=_hours(finished, since, until), durations=_durations(finished), median_s=_rank(working_times, 0.5),
        p95_s=_rank(working_times, 0.95), max_s=working_times[-1] if working_times else None, ended=len(finished),
        waiting_now=len(waiting_now),
        working_now=sum(1 for e in entries if e.outcome is None and e.start_ms is not None),
        oldest_waiting_now_s=max(0.0, (until - min(enqueued)) / 1000) if enqueued else 0.0,
        rows_read=len(history) + len(queue), complete_since_ms=complete_since)


def _read(conn: Connection, *, since: int, database: str | None,
          table: str | None) -> tuple[Sequence[Row[Any, Any, Any, Any, Any]], Sequence[Row[Any, Any, Any, Any]]]:
    """History rows that left the queue since `since` (newest first, MAX_ROWS + 1 at most), and the queue."""
    cc, cq = s.completed_compactions.c, s.compaction_queue.c
    history = (sa.select(cc.CC_STATE, cc.CC_ENQUEUE_TIME, cc.CC_START, cc.CC_END, cc.CC_COMMIT_TIME)
               .where(cc.CC_END >= since).order_by(cc.CC_END.desc()).limit(MAX_ROWS + 1))
    queue = (sa.select(cq.CQ_STATE, cq.CQ_ENQUEUE_TIME, cq.CQ_START, cq.CQ_COMMIT_TIME)
             .order_by(cq.CQ_ID).limit(MAX_ROWS + 1))
    if database is not None:
        history, queue = history.where(cc.CC_DATABASE == database), queue.where(cq.CQ_DATABASE == database)
    if table is not None:
        history, queue = history.where(cc.CC_TABLE == table), queue.where(cq.CQ_TABLE == table)
    return conn.execute(history).all(), conn.execute(queue).all()


def _from_history(row) -> _Entry:
    outcome = _OUTCOME_OF.get(row.CC_STATE, FAILED)
    if outcome == DID_NOT_INITIATE:  # the initiator could not queue it: it never waited or worked
        return _Entry(None, None, None, None, outcome, row.CC_END)
    work_end = row.CC_COMMIT_TIME if outcome == SUCCEEDED and row.CC_COMMIT_TIME else row.CC_END
    ended = work_end if outcome == SUCCEEDED else row.CC_END
    return _Entry(row.CC_ENQUEUE_TIME, row.CC_START or row.CC_END, row.CC_START,
                  work_end if row.CC_START is not None else None, outcome, ended)


def _from_queue(row) -> _Entry:
    if row.CQ_STATE == CompactionState.READY_FOR_CLEANING.value:  # compacted; the cleaner has not finished
        end = row.CQ_COMMIT_TIME or row.CQ_START
        return _Entry(row.CQ_ENQUEUE_TIME, row.CQ_START or end, row.CQ_START, end, SUCCEEDED, end)
    if row.CQ_STATE == CompactionState.WORKING.value:
        return _Entry(row.CQ_ENQUEUE_TIME, row.CQ_START, row.CQ_START, None, None, None)
    return _Entry(row.CQ_ENQUEUE_TIME, None, None, None, None, None)  # initiated


def _queue_steps(entries: list[_Entry], since: int, until: int, step: int) -> tuple[QueueStep, ...]:
    starts = list(range(since, until, step)) or [since]
    waiting = [(e.enqueue_ms, e.wait_end_ms) for e in entries if e.enqueue_ms is not None]
    working = [(e.start_ms, e.work_end_ms) for e in entries if e.start_ms is not None]
    return tuple(QueueStep(start, peak_waiting, peak_working, oldest) for start, peak_waiting, peak_working, oldest in
                 zip(starts, _peaks(waiting, starts, since, until, step), _peaks(working, starts, since, until, step),
                     _oldest(waiting, starts, until, step)))


def _peaks(intervals: list[tuple[int, int | None]], starts: list[int], since: int, until: int,
           step: int) -> list[int]:
    """The most intervals [begin, end) open at any moment of each step (a sweep over their begin and end events)."""
    events = []
    for begin, end in intervals:
        end = until + 1 if end is None else end
        begin = max(begin, since)
        if end > begin and begin <= until:
            events += [(begin, 1), (end, -1)]  # at one instant an end (-1) sorts before a begin
    events.sort()
    peaks, depth, index = [], 0, 0
    for start in starts:
        while index < len(events) and events[index][0] <= start:  # the state at the step's start
            depth += events[index][1]
            index += 1
        peak = depth
        while index < len(events) and events[index][0] < start + step:
            depth += events[index][1]
            index += 1
            peak = max(peak, depth)
        peaks.append(peak)
    return peaks


def _oldest(intervals: list[tuple[int, int | None]], starts: list[int], until: int, step: int) -> list[float]:
    """Per step (s, e], the longest wait reached in it (seconds): an entry still waiting at e has waited since its
    enqueue; one that stopped waiting inside it, until then."""
    ordered = sorted((begin, math.inf if end is None else end) for begin, end in intervals)
    stopped: dict[int, float] = {}
    for begin, end in ordered:
        if end != math.inf and starts[0] < end <= starts[-1] + step:
            index = int((end - starts[0] - 1) // step)
            stopped[index] = max(stopped.get(index, 0.0), (end - begin) / 1000)
    heap: list[tuple[int, float]] = []
    found, position = [], 0
    for index, start in enumerate(starts):
        edge = min(start + step, until)
        while position < len(ordered) and ordered[position][0] < edge:
            heapq.heappush(heap, ordered[position])
            position += 1
        while heap and heap[0][1] <= edge:  # stopped waiting by the step's end (counted in `stopped`)
            heapq.heappop(heap)
        still = (edge - heap[0][0]) / 1000 if heap else 0.0
        found.append(max(0.0, still, stopped.get(index, 0.0)))
    return found


def _hours(finished: list[_Entry], since: int, until: int) -> tuple[HourOutcomes, ...]:
    counts = [[0] * len(OUTCOMES) for _ in range(since, until, HOUR_MS)] or [[0] * len(OUTCOMES)]
    for entry in finished:
        assert entry.ended_ms is not None  # `finished` holds the entries that ended in the window
        hour = min(len(counts) - 1, (entry.ended_ms - since) // HOUR_MS)
        counts[hour][OUTCOMES.index(entry.outcome)] += 1
    return tuple(HourOutcomes(since + index * HOUR_MS, tuple(row)) for index, row in enumerate(counts))


def _durations(finished: list[_Entry]) -> tuple[DurationBucket, ...]:
    lows = (0, *DURATION_BOUNDS_S)
    counts = [[0] * len(OUTCOMES) for _ in lows]
    for entry in finished:
        if entry.start_ms is None or entry.work_end_ms is None:
            continue
        seconds = max(0, entry.work_end_ms - entry.start_ms) / 1000
        bucket = sum(1 for bound in DURATION_BOUNDS_S if seconds >= bound)
        counts[bucket][OUTCOMES.index(entry.outcome)] += 1
    highs = (*DURATION_BOUNDS_S, None)
    return tuple(DurationBucket(low, high, tuple(row)) for low, high, row in zip(lows, highs, counts))


def _rank(ordered: list[float], fraction: float) -> float | None:
    """The nearest-rank percentile of sorted values."""
    if not ordered:
        return None
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


__all__ = ["DEFAULT_HOURS", "DURATION_BOUNDS_S", "MAX_HOURS", "MAX_ROWS", "OUTCOMES", "DurationBucket",
           "HistoryStats", "HourOutcomes", "QueueStep", "history_stats", "step_for"]
