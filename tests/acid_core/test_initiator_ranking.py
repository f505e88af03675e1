"""The initiator under load (issue: a fleet of busy tables): due compactions are queued in rank order, benefit (the
directories they remove from every read) over cost (the bytes they rewrite), within a per-pool budget of bytes a
poll; what does not fit is recorded `did not initiate` with the budget's reason and is queued first at the next poll,
so no partition starves. Every decision says why, in one of a few words (Decision.why). SQLite and PostgreSQL.
"""

from __future__ import annotations

import pytest
from support.initiator_tables import make_table

from acid_core.compaction.candidates import BUDGET_DEFERRED
from acid_core.compaction.initiator import (
    MIN_COST_BYTES,
    WHY,
    WHY_BELOW_THRESHOLD,
    WHY_BUDGET_SPENT,
    WHY_IN_QUEUE,
    WHY_NO_AUTO_COMPACTION,
    WHY_QUEUED,
    initiator_cycle,
    rank,
)
from acid_core.errors import UsageError
from acid_core.metastore.codes import CompactionState


def _partitions(table, names: list[str], *, deltas: int, rows: int) -> None:
    for name in names:
        table.ms.catalog.add_partition(table.info.database, table.info.name, {"p": name})
        for _ in range(deltas):
            table.write(rows, partition={"p": name})


def _queued_partitions(ms) -> list[str]:
    """The initiated entries' partitions, in the order workers take them (enqueue time, then id)."""
    return [e.partition for e in ms.compactions.initiated()]


def test_due_compactions_are_queued_by_benefit_over_cost(ms):
    table = make_table(ms, "t", partitioned=True)
    _partitions(table, ["big"], deltas=11, rows=40_000)  # the same 11 deltas, far more bytes to rewrite
    _partitions(table, ["small"], deltas=11, rows=1)
    _partitions(table, ["many"], deltas=14, rows=1)  # more to remove for about the same bytes

    cycle = initiator_cycle(ms, cursor=None)

    assert _queued_partitions(ms) == ["p=many", "p=small", "p=big"]
    due = {d.candidate.partition: d for d in cycle.decisions}
    assert due["p=many"].benefit == 14 and due["p=small"].benefit == 11
    assert due["p=big"].cost_bytes > MIN_COST_BYTES > 20 * due["p=small"].cost_bytes
    assert due["p=many"].score > due["p=small"].score > due["p=big"].score
    assert {d.why for d in cycle.decisions} == {WHY_QUEUED}


def test_a_spent_budget_leaves_the_rest_for_the_next_poll_ahead_of_new_work(ms):
    table = make_table(ms, "t", partitioned=True)
    _partitions(table, ["a", "b", "c"], deltas=11, rows=200)
    budget = 1  # a byte: the first due compaction of the pool fits anyway, the others wait

    first = initiator_cycle(ms, cursor=None, budget_bytes=budget)

    assert len(_queued_partitions(ms)) == 1
    deferred = [d for d in first.decisions if d.why == WHY_BUDGET_SPENT]
    assert len(deferred) == 2 and all(d.compaction_id is None for d in deferred)
    assert all(d.reason.startswith(f"{BUDGET_DEFERRED} pool default has ") and "goes first at the next poll" in
               d.reason for d in deferred)
    history = ms.compactions.show(state=CompactionState.DID_NOT_INITIATE)
    assert sorted(e.partition for e in history) == sorted(d.candidate.partition for d in deferred)
    assert all(e.error_message.startswith(BUDGET_DEFERRED) for e in history)

    _partitions(table, ["z"], deltas=20, rows=1)  # new, and a better score than any deferred one
    second = initiator_cycle(ms, cursor=first.cursor, budget_bytes=budget)

    why = {d.candidate.partition: d.why for d in second.decisions}
    left = [d.candidate.partition for d in deferred]
    assert why[left[0]] == WHY_QUEUED  # the oldest deferral goes first, before the better new one
    assert why[left[1]] == WHY_BUDGET_SPENT and why["p=z"] == WHY_BUDGET_SPENT
    third = initiator_cycle(ms, cursor=second.cursor, budget_bytes=budget)
    assert {d.candidate.partition: d.why for d in third.decisions if d.why != WHY_IN_QUEUE} == {left[1]: WHY_QUEUED,
                                                                                              "p=z": WHY_BUDGET_SPENT}
    fourth = initiator_cycle(ms, cursor=third.cursor, budget_bytes=budget)
    assert [d.candidate.partition for d in fourth.decisions if d.why == WHY_QUEUED] == ["p=z"]  # none starves
    assert len(_queued_partitions(ms)) == 4
    assert [p for p in _queued_partitions(ms)][1:] == [left[0], left[1], "p=z"]


def test_every_decision_says_why_and_a_dry_run_records_no_deferral(ms):
    table = make_table(ms, "t", partitioned=True)
    quiet = make_table(ms, "quiet", params={"no_auto_compaction": "true"})
    _partitions(table, ["due", "due2"], deltas=11, rows=1)
    _partitions(table, ["few"], deltas=2, rows=1)
    for _ in range(11):
        quiet.write(1)

    dry = initiator_cycle(ms, cursor=None, budget_bytes=1, dry_run=True)

    why = {(d.candidate.table, d.candidate.partition): d.why for d in dry.decisions}
    assert why[("t", "p=few")] == WHY_BELOW_THRESHOLD and why[("quiet", None)] == WHY_NO_AUTO_COMPACTION
    assert sorted(why[("t", p)] for p in ("p=due", "p=due2")) == [WHY_BUDGET_SPENT, WHY_QUEUED]
    assert set(why.values()) <= set(WHY)
    assert ms.compactions.show() == []  # a dry run changes nothing
    assert [d.candidate.partition for d in rank([d for d in dry.decisions if d.compaction_type])][0] in (
        "p=due", "p=due2")

    with pytest.raises(UsageError, match="budget_bytes must be a whole number >= 0, got -1"):
        initiator_cycle(ms, cursor=None, budget_bytes=-1)


def test_the_health_of_a_partition_says_why_it_is_not_compacted_yet(ms):
    """acid_core.operations.health's `why`: budget spent (since the deferral), waiting for a slot (how many ahead), compacting,
    locked (its compactor transaction waits for a lock), below threshold."""
    from acid_core.metastore.locks import LockComponent, LockType
    from acid_core.metastore.txns import TxnType
    from acid_core.operations.health import table_health

    table = make_table(ms, "t", partitioned=True)
    _partitions(table, ["a", "b", "c", "d"], deltas=11, rows=1)
    _partitions(table, ["e"], deltas=2, rows=1)
    initiator_cycle(ms, cursor=None, budget_bytes=1)  # a queued, b c d deferred
    [first] = ms.compactions.initiated()
    health = {p.partition: p for p in table_health(ms, "default", "t").partitions}

    assert (health[first.partition].why, health[first.partition].since_ms) == ("waiting for a slot",
                                                                               first.enqueue_ms)
    deferred = [name for name in ("p=a", "p=b", "p=c", "p=d") if name != first.partition]
    for name in deferred:
        assert health[name].why == WHY_BUDGET_SPENT and health[name].why_detail.startswith(BUDGET_DEFERRED)
        assert health[name].since_ms is not None
    assert health["p=e"].why == WHY_BELOW_THRESHOLD and "2 deltas <= delta.num.threshold 10" in health["p=e"].why_detail

    ms.compactions.claim(worker_id="host-w", compaction_id=first.id)
    txn_id = ms.txns.open_txn(txn_type=TxnType.COMPACTION)
    ms.compactions.set_compactor_txn(first.id, txn_id, 11)
    health = {p.partition: p for p in table_health(ms, "default", "t").partitions}
    assert health[first.partition].why == "compacting" and "runs on host-w" in health[first.partition].why_detail

    holder = ms.txns.open_txn()
    ms.locks.acquire([LockComponent("default", "t", first.partition, LockType.EXCLUSIVE)], txn_id=holder)
    assert not ms.locks.lock([LockComponent("default", "t", first.partition, LockType.SHARED_READ)],
                             txn_id=txn_id).acquired
    health = {p.partition: p for p in table_health(ms, "default", "t").partitions}
    assert health[first.partition].why == "locked" and "waits for a lock" in health[first.partition].why_detail
