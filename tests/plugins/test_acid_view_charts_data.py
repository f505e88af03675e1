"""What the ACID view's charts draw, computed in acid_core (no Airflow): the queue, outcomes and working times of a
table whose real compactions ran over six hours (acid_core.operations.history_stats), its health score and top partitions
(acid_core.operations.health_score), "Due" under NO_AUTO_COMPACTION (acid_core.operations.health), and the chart queries' plans: by index,
LIMITed, never a scan of COMPLETED_COMPACTIONS (on SQLite and PostgreSQL)."""

from __future__ import annotations

import random
import re
from contextlib import contextmanager

import pytest
from sqlalchemy import event
from support import ui_tables

from acid_core.errors import UsageError
from acid_core.metastore import Metastore
from acid_core.operations.health import PartitionHealth, table_health
from acid_core.operations.health_score import partition_score, table_score
from acid_core.operations.history_stats import MAX_HOURS, OUTCOMES, _oldest, _peaks, history_stats, step_for

MINUTE = 60_000


@pytest.fixture
def history(metastore_url, tmp_path):
    """ui_tables.build_history's table (and ui_tables.build's), and a metastore on them."""
    warehouse = str(tmp_path / "warehouse")
    ids = ui_tables.build_history(metastore_url, warehouse)
    ids["tables"] = ui_tables.build(metastore_url, warehouse)
    ms = Metastore(metastore_url, warehouse=warehouse)
    yield ms, ids
    ms.close()


def test_the_queue_outcomes_and_working_times_of_six_hours(history):
    ms, ids = history
    stats = history_stats(ms, hours=12, database="default", table=ui_tables.HISTORY_TABLE, now_ms=ids["until_ms"])
    assert stats.since_ms % 3_600_000 == 0 and stats.since_ms <= ids["until_ms"] - 12 * 3_600_000
    assert stats.step_ms == 10 * MINUTE and len(stats.queue) == -(-(stats.until_ms - stats.since_ms) // stats.step_ms)
    totals = dict(zip(OUTCOMES, (sum(hour.counts[index] for hour in stats.hours) for index in range(len(OUTCOMES)))))
    # ds=01, the burst of three and the one left ready for cleaning committed; one failed, refused, aborted, not queued
    assert totals == {"succeeded": 5, "failed": 1, "refused": 1, "aborted": 1, "did not initiate": 1}
    assert stats.ended == 9 and (stats.waiting_now, stats.working_now, stats.oldest_waiting_now_s) == (0, 0, 0.0)
    # three queued at once, one working at a time; the third waited 5 min + 20 s + 5 min + 45 s + 5 min
    assert max(step.waiting for step in stats.queue) == 3 and max(step.working for step in stats.queue) == 1
    assert max(step.oldest_waiting_s for step in stats.queue) == 965.0
    # working times: refused 0 s, 20 s, failed 40 s, 45 s, 90 s, 3 min (ready), 8 min (nearest-rank percentiles)
    by_bucket = {bucket.low_s: bucket.counts for bucket in stats.durations if any(bucket.counts)}
    assert by_bucket == {0: (0, 0, 1, 0, 0), 10: (1, 0, 0, 0, 0), 30: (1, 1, 0, 0, 0), 60: (1, 0, 0, 0, 0),
                         120: (1, 0, 0, 0, 0), 300: (1, 0, 0, 0, 0)}
    assert (stats.median_s, stats.p95_s, stats.max_s) == (45.0, 480.0, 480.0)
    assert stats.complete_since_ms == stats.since_ms and stats.rows_read == 9

    everything = history_stats(ms, hours=12)  # now: ui_tables.build's entries too
    assert everything.waiting_now == 1 and everything.oldest_waiting_now_s > 0
    assert sum(hour.counts[OUTCOMES.index("failed")] for hour in everything.hours) == 2
    before = history_stats(ms, hours=1, now_ms=ids["since_ms"] - 2 * 3_600_000)
    assert before.ended == 0 and not any(step.waiting or step.working for step in before.queue)

    for hours in (0, MAX_HOURS + 1, 1.5, True):
        with pytest.raises(UsageError, match="whole number of hours"):
            history_stats(ms, hours=hours)
    with pytest.raises(UsageError, match="without its database"):
        history_stats(ms, table="clicks")


def _reference(intervals, starts, since, until, step):
    """The series by brute force: the state at every instant that matters, each step read on its own."""
    peaks, oldest = [], []
    for start in starts:
        edge = min(start + step, until)
        clipped = [(max(begin, since), until + 1 if end is None else end) for begin, end in intervals]
        instants = {start} | {t for pair in clipped for t in pair if start < t < start + step}
        peaks.append(max(sum(1 for begin, end in clipped if begin <= t < end and begin <= until) for t in instants))
        waited = [min(edge, end) - begin for begin, end in ((b, until * 10 if e is None else e) for b, e in intervals)
                  if begin < edge and end > start]
        oldest.append(max([0] + waited) / 1000)
    return peaks, oldest


@pytest.mark.parametrize("seed", range(20))
def test_the_queue_series_match_a_brute_force_reading(seed):
    rng = random.Random(seed)
    since, step = 1_000 * MINUTE, 10 * MINUTE
    until = since + rng.randint(5, 40) * step - rng.randint(0, step - 1)
    intervals = []
    for _ in range(rng.randint(0, 30)):
        begin = since + rng.randint(-30, (until - since) // MINUTE) * MINUTE + rng.choice([0, 1, 7_000])
        end = None if rng.random() < 0.2 else min(until, begin + rng.choice([0, 1, MINUTE, step, 3 * step]))
        if end is None or end >= begin:
            intervals.append((begin, end))
    starts = list(range(since, until, step))
    expected_peaks, expected_oldest = _reference(intervals, starts, since, until, step)
    assert _peaks(intervals, starts, since, until, step) == expected_peaks
    assert _oldest(intervals, starts, until, step) == pytest.approx(expected_oldest)


def test_steps_are_round_and_at_most_120():
    assert [step_for(hours * 3_600_000) // MINUTE for hours in (1, 6, 12, 24, 72, 169)] == [1, 5, 10, 15, 60, 120]


def test_health_score_breakdown_and_top_partitions(history):
    ms, _ = history
    score = table_score(ms, "default", ui_tables.HISTORY_TABLE, top=2)
    assert (score.examined, score.errors, score.total_partitions, score.delta_num_threshold) == (6, 0, 6, 4)
    # ds=05: 9 deltas (all 30, and its delta/base size), ds=06: 6 (15 and its size), ds=02: 3 obsolete, 1 failure
    assert [(p.partition, p.deltas) for p in score.most_deltas] == [("ds=2026-02-05", 9), ("ds=2026-02-06", 6)]
    assert [(p.partition, p.obsolete) for p in score.most_obsolete] == [("ds=2026-02-02", 3)]
    parts = {part.name: part for part in score.components}
    assert (parts["deltas"].lost, parts["deltas"].partitions) == (7.5, 2)
    assert (parts["obsolete directories"].lost, parts["failures"].lost) == (0.1, round(10 / 6, 2))
    assert score.lowest[0].partition == "ds=2026-02-05" and score.lowest[0].lost[0] == 30.0
    assert score.score == round(sum(100 - sum(p.lost) for p in _all_scores(ms)) / 6, 1)
    assert "all 30 at 8 deltas" in parts["deltas"].rule
    with pytest.raises(UsageError, match="top 0"):
        table_score(ms, "default", ui_tables.HISTORY_TABLE, top=0)


def _all_scores(ms):
    health = table_health(ms, "default", ui_tables.HISTORY_TABLE)
    return [partition_score(p, delta_num_threshold=4, delta_pct_threshold=0.1, failed_threshold=2)
            for p in health.partitions]


@pytest.mark.parametrize("part, lost", [
    (PartitionHealth("p=a", base="base_1", deltas=4, base_bytes=100, delta_bytes=10), (0, 0, 0, 0)),
    (PartitionHealth("p=a", base="base_1", deltas=6, base_bytes=100, delta_bytes=15), (15, 15, 0, 0)),
    (PartitionHealth("p=a", deltas=20, delta_bytes=500), (30, 0, 0, 0)),  # no base: by the count only
    (PartitionHealth("p=a", obsolete=("delta_1_1",) * 50, aborted=("delta_2_2",) * 10), (0, 0, 12, 0)),
    (PartitionHealth("p=a", consecutive_failures=1), (0, 0, 0, 10)),
    (PartitionHealth("p=a", consecutive_failures=2), (0, 0, 0, 20)),
    (PartitionHealth("p=a", consecutive_failures=1, past_failed_threshold=True), (0, 0, 0, 20)),
])
def test_partition_score_rules(part, lost):
    found = partition_score(part, delta_num_threshold=4, delta_pct_threshold=0.1, failed_threshold=2)
    assert found.lost == pytest.approx(lost) and found.score == pytest.approx(100 - sum(lost))


def test_due_says_no_under_no_auto_compaction_with_what_the_thresholds_ask(history):
    ms, _ = history
    before = {p.partition: p for p in table_health(ms, "default", "sales").partitions}
    assert before["ds=2026-01-01"].due == "major" == before["ds=2026-01-01"].thresholds_due
    ms.catalog.set_table_params("default", "sales", {"NO_AUTO_COMPACTION": "true"})
    after = {p.partition: p for p in table_health(ms, "default", "sales").partitions}
    first = after["ds=2026-01-01"]
    assert first.due is None and first.thresholds_due == "major"
    assert first.reason == ("NO_AUTO_COMPACTION (table); the thresholds would ask for major: 3 deltas > "
                            "delta.num.threshold 2 and no base")
    assert after["ds=2026-01-02"].reason.startswith("NO_AUTO_COMPACTION (table); the thresholds ask for nothing: 1 "
                                                    "deltas <= delta.num.threshold 2")
    ms.catalog.set_table_params("default", "sales", {"NO_AUTO_COMPACTION": "false"})
    ms.catalog.set_database_params("default", {"no_auto_compaction": "true"})
    (whole,) = table_health(ms, "default", "events").partitions
    assert whole.due is None and whole.reason.startswith("NO_AUTO_COMPACTION (database); ")


@contextmanager
def _statements(ms):
    found: list[tuple[str, object]] = []

    def record(conn, cursor, statement, parameters, context, executemany):
        if not executemany and re.match(r"\s*(SELECT|WITH)\b", statement, re.I):
            found.append((statement, parameters))

    event.listen(ms.db.engine, "before_cursor_execute", record)
    try:
        yield found
    finally:
        event.remove(ms.db.engine, "before_cursor_execute", record)


def _scans_history(ms, statement: str, parameters) -> bool:
    """Whether the statement's plan reads COMPLETED_COMPACTIONS without an index (PostgreSQL: with sequential scans
    disabled, as tests/acid_core/test_query_plans.py checks the hot queries, so a small table is not scanned by choice)."""
    raw = ms.db.engine.raw_connection()
    try:
        cursor = raw.cursor()
        if ms.db.dialect == "postgresql":
            cursor.execute("SET enable_seqscan = off")
            cursor.execute("EXPLAIN " + statement, parameters)
            plan = [row[0] for row in cursor.fetchall()]
            raw.rollback()
            return any(re.search(r'Seq Scan on "?COMPLETED_COMPACTIONS"?', line) for line in plan)
        cursor.execute("EXPLAIN QUERY PLAN " + statement, parameters)
        return any(re.match(r"SCAN COMPLETED_COMPACTIONS\b", row[-1]) for row in cursor.fetchall())
    finally:
        raw.close()


def test_the_chart_queries_read_the_history_by_index_and_with_a_limit(history):
    ms, ids = history
    with _statements(ms) as statements:
        history_stats(ms, hours=24, now_ms=ids["until_ms"])
        history_stats(ms, hours=24, database="default", table="clicks", now_ms=ids["until_ms"])
        table_score(ms, "default", "clicks")
    reads = [(statement, parameters) for statement, parameters in statements if "COMPLETED_COMPACTIONS" in statement]
    assert len(reads) == 3
    assert [statement for statement, parameters in reads if _scans_history(ms, statement, parameters)] == []
    assert all(re.search(r"\bLIMIT\b", statement) for statement, _ in reads[:2])
