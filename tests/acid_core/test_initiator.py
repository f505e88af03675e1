"""The initiator (Hive's Initiator, hive-acid-reference.md section 7) over real transactions and real files.

Tables are written with EmbeddedWriter inside metastore transactions (open, allocate write ids, add components, write,
commit or abort); bases come from the real compaction worker. Every test runs on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import os
import posixpath
import re
from collections import Counter

import pytest
from support.initiator_tables import COLUMNS, HOUR_MS, MAJOR, MINOR, Table, make_table

from acid_core.compaction.initiator import Candidate, decide, find_candidates, initiator_cycle, run_initiator
from acid_core.compaction.worker import CompactionWorker
from acid_core.errors import UsageError
from acid_core.metastore import Metastore
from acid_core.metastore.codes import CompactionState, CompactionType
from acid_core.storage.fs import FileSystem


def decisions_by_table(decisions) -> dict:
    return {(d.candidate.table, d.candidate.partition): d for d in decisions}


def queued(ms: Metastore) -> list:
    return [e for e in ms.compactions.show() if e.state is CompactionState.INITIATED]


# ---------------------------------------------------------------------------------------------------------------
# checkForCompaction


def test_enough_deltas_over_a_base_start_a_minor_compaction(ms):
    table = make_table(ms, "t")
    table.write(500)
    table.compact_major()
    for _ in range(4):
        table.write(1)
    [decision] = run_initiator(ms, last_checked_ms=None, delta_num_threshold=3, delta_pct_threshold=10.0)
    assert decision.compaction_type is MINOR
    assert decision.reason == "4 deltas > delta.num.threshold 3"
    assert decision.candidate == Candidate("default", "t", None)
    [entry] = queued(ms)
    assert (entry.id, entry.type, entry.table, entry.partition) == (decision.compaction_id, MINOR, "t", None)
    assert entry.initiator_id == "testhost-initiator"


def test_few_small_deltas_start_nothing(ms):
    table = make_table(ms, "t")
    table.write(500)
    table.compact_major()
    for _ in range(3):
        table.write(1)
    [decision] = run_initiator(ms, last_checked_ms=None, delta_num_threshold=3, delta_pct_threshold=10.0)
    assert decision.compaction_type is None
    assert decision.reason.startswith("3 deltas <= delta.num.threshold 3")
    assert queued(ms) == []


def test_table_property_overrides_the_delta_num_threshold(ms):
    table = make_table(ms, "t", params={"compactorthreshold.hive.compactor.delta.num.threshold": "5"})
    table.write(500)
    table.compact_major()
    for _ in range(4):
        table.write(1)
    [decision] = run_initiator(ms, last_checked_ms=None, delta_num_threshold=3, delta_pct_threshold=10.0)
    assert (decision.compaction_type, decision.reason) == (None, "4 deltas <= delta.num.threshold 5, "
                                                                 "delta/base size within delta.pct.threshold")


def test_big_deltas_against_the_base_start_a_major_compaction(ms):
    table = make_table(ms, "t")
    table.write(20)
    table.compact_major()
    table.write(200)
    decision = decide(ms, Candidate("default", "t", None))
    assert decision.compaction_type is MAJOR
    assert "> delta.pct.threshold 0.1" in decision.reason and decision.reason.startswith("delta size ")


def test_table_property_overrides_the_delta_pct_threshold(ms):
    table = make_table(ms, "t", params={"compactorthreshold.hive.compactor.delta.pct.threshold": "100"})
    table.write(20)
    table.compact_major()
    table.write(200)
    decision = decide(ms, Candidate("default", "t", None))
    assert decision.compaction_type is None


def test_a_due_major_of_one_oversized_bucket_becomes_a_rebalance(ms):
    table = make_table(ms, "t")
    table.write(2000)
    table.compact_major()
    table.write(2000)
    base_bytes = sum(os.path.getsize(os.path.join(root, name)) for root, _, names in os.walk(table.info.location)
                     for name in names if name.startswith("bucket_"))  # the partition: bucket 0 holds it all
    target = base_bytes // 6
    [decision] = run_initiator(ms, last_checked_ms=None, rebalance_bucket_bytes=target)
    assert decision.compaction_type is CompactionType.REBALANCE
    assert decision.reason.startswith("delta size ") and "; bucket 0 holds " in decision.reason
    assert decision.number_of_buckets >= 3 and decision.reason.endswith(
        f"rebalance 1 buckets into {decision.number_of_buckets}")
    [entry] = queued(ms)
    assert (entry.type, entry.number_of_buckets) == (CompactionType.REBALANCE, decision.number_of_buckets)
    outcome = CompactionWorker(ms).run(entry.id)
    assert outcome.result == "compacted" and f"in {decision.number_of_buckets} buckets" in outcome.message


@pytest.mark.parametrize("params, bucketed", [
    ({"compactorthreshold.acid.compactor.rebalance.bucket.size": "0"}, False),  # turned off
    ({}, True),  # Hive refuses to rebalance a bucketed table
])
def test_no_rebalance_when_turned_off_or_bucketed(ms, params, bucketed):
    info = ms.catalog.create_table("default", "t", COLUMNS, bucket_columns=["id"] if bucketed else (),
                                   num_buckets=1 if bucketed else None, params={"transactional": "true", **params})
    table = Table(ms, info)
    table.write(2000)
    table.compact_major()
    table.write(2000)
    [decision] = run_initiator(ms, last_checked_ms=None, rebalance_bucket_bytes=100)
    assert decision.compaction_type is MAJOR and decision.number_of_buckets is None


def test_many_deltas_without_a_base_start_a_major_compaction(ms):
    table = make_table(ms, "t")
    for _ in range(4):
        table.write(1)
    decision = decide(ms, Candidate("default", "t", None), delta_num_threshold=3)
    assert (decision.compaction_type, decision.reason) == (MAJOR, "4 deltas > delta.num.threshold 3 and no base")
    assert decide(ms, Candidate("default", "t", None)).compaction_type is None  # 4 <= 10


def test_partitioned_table_candidates_name_their_partition(ms):
    table = make_table(ms, "pt", partitioned=True)
    for _ in range(4):
        table.write(1, partition={"p": "a"})
    table.write(1, partition={"p": "b"})
    decisions = decisions_by_table(run_initiator(ms, last_checked_ms=None, delta_num_threshold=3))
    assert decisions[("pt", "p=a")].compaction_type is MAJOR
    assert decisions[("pt", "p=b")].compaction_type is None
    assert [(e.partition, e.type) for e in queued(ms)] == [("p=a", MAJOR)]


# ---------------------------------------------------------------------------------------------------------------
# Aborted transactions


def test_aborted_transactions_over_the_threshold_start_a_major_compaction(ms):
    table = make_table(ms, "t")
    table.write(1)
    for _ in range(3):
        table.write(1, abort=True)
    [candidate] = find_candidates(ms, last_checked_ms=None, aborted_threshold=2)
    assert (candidate.too_many_aborts, candidate.has_old_abort, candidate.aborted_count) == (True, False, 3)
    [decision] = run_initiator(ms, last_checked_ms=None, aborted_threshold=2)
    assert (decision.compaction_type, decision.reason) == (MAJOR, "3 aborted transactions > abortedtxn.threshold")
    assert find_candidates(ms, last_checked_ms=None, aborted_threshold=3)[0].too_many_aborts is False


def test_an_old_aborted_transaction_starts_a_minor_compaction(ms, clock):
    table = make_table(ms, "t")
    table.write(1, abort=True)
    assert find_candidates(ms, last_checked_ms=None) == []  # aborted, not old yet, nothing committed
    clock.advance(12 * HOUR_MS + 1)
    [candidate] = find_candidates(ms, last_checked_ms=None)
    assert (candidate.table, candidate.has_old_abort, candidate.too_many_aborts) == ("t", True, False)
    assert decide(ms, candidate).compaction_type is MINOR
    assert find_candidates(ms, last_checked_ms=None, aborted_time_threshold_ms=-1) == []


# ---------------------------------------------------------------------------------------------------------------
# Eligibility


def test_no_auto_compaction_on_the_table_or_the_database_skips(ms):
    off = make_table(ms, "off", params={"NO_AUTO_COMPACTION": "true"})
    ms.catalog.create_database("quiet")
    ms.catalog.set_database_params("quiet", {"no_auto_compaction": "true"})
    quiet = make_table(ms, "q", database="quiet")
    for table in (off, quiet):
        for _ in range(4):
            table.write(1)
    decisions = run_initiator(ms, last_checked_ms=None, delta_num_threshold=3)
    reasons = {d.candidate.full_partition_name: (d.compaction_type, d.reason) for d in decisions}
    assert reasons == {"default.off": (None, "table default.off has no_auto_compaction=true"),
                       "quiet.q": (None, "database quiet has no_auto_compaction=true")}
    assert queued(ms) == []


def test_dropped_or_non_transactional_tables_are_skipped(ms):
    table = make_table(ms, "gone")
    table.write(1)
    ms.catalog.drop_table("default", "gone")
    assert find_candidates(ms, last_checked_ms=None) == []  # dropping forgets the table's components
    decision = decide(ms, Candidate("default", "gone", None))
    assert (decision.compaction_type, decision.reason) == (None, "table default.gone no longer exists")
    ms.catalog.create_table("default", "plain", COLUMNS)
    assert decide(ms, Candidate("default", "plain", None)).reason == "table default.plain is not a full ACID table"


def test_an_initiated_or_working_compaction_skips_the_partition(ms):
    table = make_table(ms, "t")
    for _ in range(4):
        table.write(1)
    manual = ms.compactions.enqueue("default", "t", None, MINOR)
    [decision] = run_initiator(ms, last_checked_ms=None, delta_num_threshold=3)
    assert decision.compaction_type is None
    assert decision.reason == f"compaction {manual.compaction_id} is already initiated for default.t"
    assert [e.id for e in queued(ms)] == [manual.compaction_id]


def test_a_queued_compaction_skips_only_its_own_partition(ms):
    table = make_table(ms, "pt", partitioned=True)
    for _ in range(4):
        table.write(1, partition={"p": "a"})
        table.write(1, partition={"p": "b"})
    manual = ms.compactions.enqueue("default", "pt", "p=a", MINOR)
    decisions = decisions_by_table(run_initiator(ms, last_checked_ms=None, delta_num_threshold=3))
    assert decisions[("pt", "p=a")].reason == (f"compaction {manual.compaction_id} is already initiated "
                                               "for default.pt/p=a")
    assert decisions[("pt", "p=b")].compaction_type is MAJOR and decisions[("pt", "p=b")].compaction_id is not None


def test_consecutive_failures_stop_the_initiator_until_the_retry_time(ms, clock):
    table = make_table(ms, "t")
    for _ in range(4):
        table.write(1)
    for _ in range(2):
        failed = ms.compactions.enqueue("default", "t", None, MAJOR)
        ms.compactions.mark_failed(failed.compaction_id, "boom")
    checked = clock.now_ms() + 1
    clock.advance(HOUR_MS)
    [candidate] = find_candidates(ms, last_checked_ms=checked)  # newest history entry failed: a candidate anyway
    decision = decide(ms, candidate, delta_num_threshold=3)
    assert decision.compaction_type is None and "2 consecutive compaction attempts failed" in decision.reason
    assert decide(ms, candidate, delta_num_threshold=3, failed_threshold=3).compaction_type is MAJOR
    clock.advance(7 * 24 * HOUR_MS)
    assert decide(ms, candidate, delta_num_threshold=3).compaction_type is MAJOR


def test_a_failure_after_a_success_does_not_stop_the_initiator(ms):
    table = make_table(ms, "t")
    for _ in range(4):
        table.write(1)
    first = ms.compactions.enqueue("default", "t", None, MAJOR)
    ms.compactions.mark_failed(first.compaction_id, "boom")
    table.compact_major()
    ms.compactions.mark_cleaned(ms.compactions.show(state=CompactionState.READY_FOR_CLEANING)[0].id)
    second = ms.compactions.enqueue("default", "t", None, MAJOR)
    ms.compactions.mark_failed(second.compaction_id, "boom")
    for _ in range(4):
        table.write(1)
    assert decide(ms, Candidate("default", "t", None), delta_num_threshold=3,
                  delta_pct_threshold=100.0).compaction_type is MINOR


# ---------------------------------------------------------------------------------------------------------------
# The cycle


def test_dry_run_enqueues_nothing(ms):
    table = make_table(ms, "t")
    for _ in range(4):
        table.write(1)
    [decision] = run_initiator(ms, last_checked_ms=None, delta_num_threshold=3, dry_run=True)
    assert (decision.compaction_type, decision.compaction_id) == (MAJOR, None)
    assert ms.compactions.show() == []


def test_last_checked_limits_the_candidates(ms, clock):
    old, new = make_table(ms, "old"), make_table(ms, "new")
    old.write(1)
    clock.advance(1000)
    checked = clock.now_ms()
    new.write(1)
    assert [c.table for c in find_candidates(ms, last_checked_ms=checked)] == ["new"]
    assert [c.table for c in find_candidates(ms, last_checked_ms=None)] == ["new", "old"]
    clock.advance(1000)
    assert find_candidates(ms, last_checked_ms=clock.now_ms()) == []


def test_a_decision_that_fails_records_did_not_initiate_and_comes_back(ms, clock):
    table = make_table(ms, "t", params={"compactorthreshold.hive.compactor.delta.num.threshold": "many"})
    table.write(1)
    [decision] = run_initiator(ms, last_checked_ms=None)
    assert decision.compaction_type is None and "must be a whole number >= 0, got 'many'; fix or unset it" in decision.reason
    [entry] = ms.compactions.show()
    assert (entry.state, entry.initiator_id) == (CompactionState.DID_NOT_INITIATE, "testhost-initiator")
    assert "'many'" in entry.error_message
    clock.advance(HOUR_MS)
    assert [c.table for c in find_candidates(ms, last_checked_ms=clock.now_ms())] == ["t"]
    ms.catalog.set_table_params("default", "t", {"compactorthreshold.hive.compactor.delta.num.threshold": "0"})
    [decision] = run_initiator(ms, last_checked_ms=clock.now_ms())
    assert decision.compaction_type is MAJOR and decision.compaction_id is not None


def test_dry_run_records_nothing_when_a_decision_fails(ms):
    table = make_table(ms, "t", params={"compactorthreshold.hive.compactor.delta.pct.threshold": "lots"})
    table.write(20)
    table.compact_major()
    table.write(1)
    history_before = ms.compactions.show()
    [decision] = run_initiator(ms, last_checked_ms=None, dry_run=True)
    assert decision.compaction_type is None and "must be a number >= 0, got 'lots'" in decision.reason
    assert ms.compactions.show() == history_before


@pytest.mark.parametrize("threshold", [0, -1])
def test_failed_threshold_zero_or_negative_disables_the_check(ms, threshold):
    table = make_table(ms, "t")
    for _ in range(4):
        table.write(1)
    failed = ms.compactions.enqueue("default", "t", None, MAJOR)
    ms.compactions.mark_failed(failed.compaction_id, "boom")
    assert decide(ms, Candidate("default", "t", None), delta_num_threshold=3,
                  failed_threshold=threshold).compaction_type is MAJOR


def test_one_poll_reads_each_table_once_and_lists_only_the_written_partitions(ms, clock, monkeypatch):
    table = make_table(ms, "pt", partitioned=True)
    for name in "abcd":
        table.write(1, partition={"p": name})
    clock.advance(1000)
    checked = clock.now_ms()
    for _ in range(4):
        table.write(1, partition={"p": "b"})
    table.write(1, partition={"p": "c"})
    calls, listed = Counter(), []

    def spy(owner, name):
        real = getattr(owner, name)

        def call(*args, **kwargs):
            calls[name] += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(owner, name, call)

    spy(ms.catalog, "get_table")
    spy(ms.catalog, "get_database")
    spy(ms.txns, "snapshot")
    list_dir = FileSystem.list_dir
    monkeypatch.setattr(FileSystem, "list_dir",
                        lambda fs, path, **options: listed.append(path) or list_dir(fs, path, **options))
    decisions = run_initiator(ms, last_checked_ms=checked, delta_num_threshold=3)
    assert [(d.candidate.partition, d.compaction_type) for d in decisions] == [("p=b", MAJOR), ("p=c", None)]
    assert calls == {"get_table": 1, "get_database": 1, "snapshot": 1}
    relative = [posixpath.relpath(path, table.info.location) for path in listed]
    assert [path for path in relative if "/" not in path] == ["p=b", "p=c"]  # partition directories, once each
    assert len(relative) == 2 + 5 + 2  # and the delta directories inside them (p=b: 5 deltas, p=c: 2)


def test_a_partition_compacted_and_cleaned_since_the_cycles_snapshot_is_looked_at_again(ms):
    """The cycle's snapshot predates a commit, a compaction over it and the cleaning of the deltas it chose: the
    initiator looks again with a fresh snapshot instead of failing on the vanished deltas."""
    from acid_core.compaction.cleaner import clean
    from acid_core.compaction.initiator import CycleReads

    table = make_table(ms, "t")
    for _ in range(3):
        table.write(1)
    late = table.open_write()
    late.insert([(99, "late")])
    [candidate] = find_candidates(ms, last_checked_ms=None)
    reads = CycleReads(ms)
    assert reads.write_ids(table.info).high_watermark == 3  # the cycle's snapshot: write id 4 still open
    late.commit()
    compaction_id = ms.compactions.enqueue("default", "t", None, MAJOR).compaction_id
    assert CompactionWorker(ms).run(compaction_id).result == "compacted"
    assert [result.outcome for result in clean(ms, log=lambda line: None)] == ["cleaned"]

    decision = decide(ms, candidate, reads=reads, delta_num_threshold=2)
    assert decision.compaction_type is None and "could not decide" not in decision.reason


# ---------------------------------------------------------------------------------------------------------------
# the bounded poll (metastore.compactor.fetch.size) and its cursor


def test_a_bounded_poll_works_through_a_backlog_over_several_polls_oldest_first(ms, clock):
    table = make_table(ms, "t", partitioned=True)
    for day in range(7):
        for _ in range(11):  # over delta.num.threshold: each partition is due a compaction
            table.write(1, partition={"p": f"d{day}"})
        clock.advance(1000)
    clock.advance(10 * 60_000)
    cursor, seen, polls = None, [], 0
    while polls < 20:
        polls += 1
        cycle = initiator_cycle(ms, cursor=cursor, fetch_size=3)
        seen += [d.candidate.partition for d in cycle.decisions if d.compaction_type is not None]
        cursor = cycle.cursor
        if cycle.complete:
            break
    # a commit collapses its partition's COMPLETED_TXN_COMPONENTS rows: 7 rows, read 3 at a time, oldest first
    assert seen == [f"p=d{day}" for day in range(7)]
    assert polls == 3
    assert sorted(e.partition for e in queued(ms)) == [f"p=d{day}" for day in range(7)]
    # nothing new: the next poll reads only the last minute again and queues nothing
    clock.advance(120_000)
    again = initiator_cycle(ms, cursor=cursor, fetch_size=3)
    assert again.complete and all(d.compaction_type is None or d.compaction_id for d in again.decisions)


def test_a_poll_after_a_complete_one_sees_a_new_commit_and_re_reads_the_last_minute(ms, clock):
    table = make_table(ms, "t")
    table.write(1)
    first = initiator_cycle(ms, cursor=None)
    assert first.complete and [d.candidate.table for d in first.decisions] == ["t"]
    clock.advance(120_000)  # the commit is read once more (its time was taken before it was visible) ...
    second = initiator_cycle(ms, cursor=first.cursor)
    assert [d.candidate.table for d in second.decisions] == ["t"]
    quiet = initiator_cycle(ms, cursor=second.cursor)  # ... then no more
    assert quiet.decisions == () and quiet.complete
    table.write(1)
    assert [d.candidate.table for d in initiator_cycle(ms, cursor=quiet.cursor).decisions] == ["t"]


def test_a_cursor_from_an_earlier_version_is_a_poll_start_time(ms, clock):
    table = make_table(ms, "t")
    table.write(1)
    clock.advance(10 * 60_000)
    assert initiator_cycle(ms, cursor=str(clock.now_ms())).decisions == ()
    assert [d.candidate.table for d in initiator_cycle(ms, cursor=str(clock.now_ms() - 11 * 60_000)).decisions] == ["t"]


@pytest.mark.parametrize("cursor, fetch_size, message", [
    ("yesterday", 10, "initiator cursor 'yesterday' is not"),
    ("1:x", 10, "initiator cursor '1:x' is not"),
    (None, 0, "initiator fetch_size (metastore.compactor.fetch.size) must be a whole number from 1 to 5000, got 0"),
])
def test_bad_cursor_or_fetch_size_is_one_clear_error(ms, cursor, fetch_size, message):
    with pytest.raises(UsageError, match=re.escape(message)):
        initiator_cycle(ms, cursor=cursor, fetch_size=fetch_size)
    assert queued(ms) == []


# ---------------------------------------------------------------------------------------------------------------
# Compaction pools (Hive 4: Initiator.getPoolName)


def test_the_pool_comes_from_the_table_then_the_database_property(ms):
    ms.catalog.create_database("etl_db")
    ms.catalog.set_database_params("etl_db", {"hive.compactor.worker.pool": "etl"})
    tables = [make_table(ms, "own", params={"hive.compactor.worker.pool": "hot"}),
              make_table(ms, "inherits", database="etl_db"),
              make_table(ms, "overrides", database="etl_db", params={"Hive.Compactor.Worker.Pool": "hot"}),
              make_table(ms, "blank", database="etl_db", params={"hive.compactor.worker.pool": "  "}),  # Hive's isBlank
              make_table(ms, "plain")]
    for table in tables:
        for _ in range(4):
            table.write(1)
    decisions = run_initiator(ms, last_checked_ms=None, delta_num_threshold=3)
    pools = {d.candidate.full_partition_name: (d.compaction_type, d.pool) for d in decisions}
    assert pools == {"default.own": (MAJOR, "hot"), "etl_db.inherits": (MAJOR, "etl"), "etl_db.overrides": (MAJOR, "hot"),
                     "etl_db.blank": (MAJOR, "etl"), "default.plain": (MAJOR, None)}
    queued_pools = {f"{e.database}.{e.table}": e.pool_name for e in queued(ms)}
    assert queued_pools == {"default.own": "hot", "etl_db.inherits": "etl", "etl_db.overrides": "hot",
                            "etl_db.blank": "etl", "default.plain": "default"}


def test_a_skipped_candidate_has_no_pool_and_a_dry_run_reports_the_pool(ms):
    due = make_table(ms, "due", params={"hive.compactor.worker.pool": "etl"})
    quiet = make_table(ms, "quiet", params={"hive.compactor.worker.pool": "etl"})
    for _ in range(4):
        due.write(1)
    quiet.write(1)
    decisions = decisions_by_table(run_initiator(ms, last_checked_ms=None, delta_num_threshold=3, dry_run=True))
    assert (decisions[("due", None)].pool, decisions[("quiet", None)].pool) == ("etl", None)
    assert queued(ms) == []


def test_an_invalid_pool_property_does_not_initiate_and_says_why(ms):
    table = make_table(ms, "t", params={"hive.compactor.worker.pool": "etl pool"})
    for _ in range(4):
        table.write(1)
    [decision] = run_initiator(ms, last_checked_ms=None, delta_num_threshold=3)
    assert decision.compaction_type is None and decision.compaction_id is None
    assert "table default.t: property 'hive.compactor.worker.pool' = 'etl pool' is not valid" in decision.reason
    [entry] = ms.compactions.show()
    assert entry.state is CompactionState.DID_NOT_INITIATE and "'etl pool'" in entry.error_message
