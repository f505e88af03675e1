"""Exactly-once micro-batches in the metastore (STREAM_COMMITS, acid_core/metastore/streams.py), on both databases:
a batch's mark moves with its COMMIT or not at all, a replayed batch is recognised, a stale pending transaction is
handed back, and a table's rows go with it.
"""

from __future__ import annotations

import pytest

from acid_core.errors import StreamBatchError
from acid_core.metastore.streams import NO_BATCH, BatchMark, StreamState
from acid_core.metastore.txns import Operation


def batch(ms, app="query", table="t", number=0, *, commit=True) -> int:
    """One micro-batch's transaction writing default.<table>; committed with its mark unless `commit` is false."""
    txn = ms.txns.open_txn(tables=[f"default.{table}"])
    ms.streams.begin_batch(app, "default", table, txn)
    ms.txns.allocate_write_ids([txn], "default", table)
    ms.txns.add_components(txn, "default", table, [None], Operation.INSERT)
    if commit:
        ms.txns.commit(txn, batch=BatchMark(app, "default", table, number))
    return txn


def test_a_query_starts_with_no_batch_and_each_commit_moves_it(ms):
    assert ms.streams.state("query", "default", "t") == StreamState("query", "default", "t", NO_BATCH, None)
    batch(ms, number=0)
    batch(ms, number=1)
    assert ms.streams.state("query", "default", "t") == StreamState("query", "default", "t", 1, None)
    assert ms.streams.state("other", "default", "t").last_batch == NO_BATCH  # per query
    assert ms.streams.state("query", "default", "u").last_batch == NO_BATCH  # and per table


def test_a_replayed_batch_cannot_commit_and_nothing_of_it_commits(ms):
    batch(ms, number=0)
    txn = batch(ms, number=0, commit=False)  # Spark replays batch 0 after a crash
    with pytest.raises(StreamBatchError, match="batch 0 of default.t cannot commit with transaction"):
        ms.txns.commit(txn, batch=BatchMark("query", "default", "t", 0))
    assert [t.txn_id for t in ms.txns.show_transactions()] == [txn]  # still open: the caller aborts it
    assert ms.streams.state("query", "default", "t") == StreamState("query", "default", "t", 0, txn)
    ms.txns.abort(txn)
    ms.streams.end_pending("query", "default", "t", txn)
    assert ms.streams.state("query", "default", "t").pending_txn_id is None
    assert ms.txns.snapshot(["default.t"]).write_ids["default.t"].is_aborted(2)


def test_only_the_pending_transaction_commits_a_batch(ms):
    first = batch(ms, number=0, commit=False)
    second = batch(ms, number=0, commit=False)  # a new run of the query took over
    with pytest.raises(StreamBatchError):
        ms.txns.commit(first, batch=BatchMark("query", "default", "t", 0))
    ms.txns.commit(second, batch=BatchMark("query", "default", "t", 0))
    assert ms.streams.state("query", "default", "t") == StreamState("query", "default", "t", 0, None)


def test_beginning_a_batch_hands_back_the_pending_transaction_a_killed_run_left(ms):
    stale = batch(ms, number=0, commit=False)
    txn = ms.txns.open_txn()
    assert ms.streams.begin_batch("query", "default", "t", txn) == stale
    assert ms.streams.begin_batch("query", "default", "t", txn) is None  # the same again: nothing stale
    ms.streams.end_pending("query", "default", "t", stale)  # an abort that lost the race changes nothing
    assert ms.streams.state("query", "default", "t").pending_txn_id == txn


def test_a_commit_without_a_batch_leaves_the_queries_alone(ms):
    batch(ms, number=3)
    ms.txns.commit(ms.txns.open_txn())
    assert ms.streams.state("query", "default", "t").last_batch == 3


def test_dropping_the_table_forgets_its_queries(ms):
    ms.catalog.create_table("default", "t", [("id", "int")], params={"transactional": "true"})
    batch(ms, number=5)
    ms.catalog.drop_table("default", "t")
    assert ms.streams.state("query", "default", "t").last_batch == NO_BATCH
