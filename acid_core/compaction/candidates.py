"""The initiator's candidates (Hive's findPotentialCompactions), read from the metastore, never from a listing.

Partitions with commits (COMPLETED_TXN_COMPONENTS) after a `Cursor`, oldest first; partitions whose newest history
entry failed or did not initiate (and that still have commits); partitions with aborted transactions past Hive's
thresholds. With a limit (metastore.compactor.fetch.size) each of the three reads is bounded and goes by index, so a
poll costs what it reads, whatever the history. `acid_core.compaction.initiator` decides what each one needs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Row

from acid_core import settings
from acid_core.errors import UsageError
from acid_core.metastore import Metastore
from acid_core.metastore import schema as s
from acid_core.metastore.codes import CompactionState
from acid_core.metastore.txns import TXN_ABORTED

ABORTED_THRESHOLD = settings.ABORTED_THRESHOLD.default  # hive.compactor.abortedtxn.threshold
ABORTED_TIME_THRESHOLD_MS = settings.ABORTED_TIME_THRESHOLD.default_ms  # hive.compactor.aborted.txn.time.threshold


@dataclass(frozen=True, slots=True)
class Candidate:
    """A partition the initiator should look at (`partition` is None for an unpartitioned table)."""

    database: str
    table: str
    partition: str | None
    too_many_aborts: bool = False
    has_old_abort: bool = False
    aborted_count: int = 0
    oldest_abort_ms: int | None = None
    deferred_entry: int | None = None  # its newest history entry: a budget deferral (`did not initiate`), this id

    @property
    def full_partition_name(self) -> str:
        name = f"{self.database}.{self.table}"
        return f"{name}/{self.partition}" if self.partition is not None else name


# The start of the `did not initiate` message of a due compaction the initiator left for a later cycle because its
# pool's budget was spent: the partition is a candidate again, ahead of new ones (acid_core.compaction.initiator).
BUDGET_DEFERRED = "budget spent:"
FETCH_SIZE = settings.FETCH_SIZE.default  # metastore.compactor.fetch.size
CHECK_SLACK_MS = 60_000  # re-read a minute of commits: a commit's timestamp is taken before it becomes visible


@dataclass(frozen=True, slots=True, order=True)
class Cursor:
    """Where the initiator's reading of COMPLETED_TXN_COMPONENTS stands: rows after (timestamp, transaction id)."""

    timestamp_ms: int
    txn_id: int

    def __str__(self) -> str:
        return f"{self.timestamp_ms}:{self.txn_id}"

    @classmethod
    def parse(cls, text: str) -> Cursor:
        """`<ms>:<txn id>`, or a plain millisecond time (a poll's start, as earlier versions stored it).

        Raises:
            UsageError: the text is neither.
        """
        head, _, tail = text.strip().partition(":")
        try:
            if not tail:
                return cls(int(head) - CHECK_SLACK_MS, -1)
            return cls(int(head), int(tail))
        except ValueError:
            raise UsageError(f"initiator cursor {text!r} is not '<milliseconds>:<transaction id>'") from None


def find_candidates(metastore: Metastore, *, last_checked_ms: int | None,
                    aborted_threshold: int = ABORTED_THRESHOLD,
                    aborted_time_threshold_ms: int = ABORTED_TIME_THRESHOLD_MS) -> list[Candidate]:
    """Hive's findPotentialCompactions: written partitions, retries of failed ones, and partitions with aborts.

    Args:
        last_checked_ms: start of the previous initiator run; only partitions with commits at or after it are
            candidates (all written partitions when None). Partitions whose newest history entry is failed or did
            not initiate are candidates regardless.
        aborted_threshold: more aborted transactions than this in a partition flags `too_many_aborts`.
        aborted_time_threshold_ms: an aborted transaction that started longer ago flags `has_old_abort`
            (negative disables the check, as in Hive).
    """
    after = Cursor(last_checked_ms, -1) if last_checked_ms is not None else None
    return read_candidates(metastore, after=after, limit=None, aborted_threshold=aborted_threshold,
                            aborted_time_threshold_ms=aborted_time_threshold_ms)[0]


def read_candidates(metastore: Metastore, *, after: Cursor | None, limit: int | None, aborted_threshold: int,
                     aborted_time_threshold_ms: int) -> tuple[list[Candidate], Cursor | None, bool]:
    """The candidates, the position of the last commit row read, and whether `limit` left rows unread.

    With a `limit`, each of the three reads is bounded and fair: commit rows in (timestamp, transaction) order
    from `after` by index (the oldest unchecked writes first, the next poll continues where this one stopped);
    retries of failed partitions and partitions with aborts, the least recently tried first.
    """
    ctc, cc, tc, txns = s.completed_txn_components.c, s.completed_compactions.c, s.txn_components.c, s.txns.c
    now = metastore.db.clock.now_ms()

    def read(conn: Connection) -> tuple[Sequence[Row[Any, Any, Any, Any, Any]],
                                        Sequence[Row[Any, Any, Any, Any, Any, Any]],
                                        Sequence[Row[Any, Any, Any, Any, Any]]]:
        written = sa.select(ctc.CTC_DATABASE, ctc.CTC_TABLE, ctc.CTC_PARTITION, ctc.CTC_TIMESTAMP, ctc.CTC_TXNID
                            ).where(ctc.CTC_TABLE.is_not(None))
        if after is not None:
            written = written.where(sa.tuple_(ctc.CTC_TIMESTAMP, ctc.CTC_TXNID) > sa.tuple_(
                sa.literal(after.timestamp_ms, sa.BigInteger), sa.literal(after.txn_id, sa.BigInteger)))
        if limit is not None:
            written = written.order_by(ctc.CTC_TIMESTAMP, ctc.CTC_TXNID).limit(limit)
        rows = conn.execute(written).all()

        # failed / did-not-initiate entries (by the state index) that are the newest of their partition (an index
        # probe each), where the partition still has writes
        newer = s.completed_compactions.alias("newer")
        is_newest = ~sa.exists().where(newer.c.CC_DATABASE == cc.CC_DATABASE, newer.c.CC_TABLE == cc.CC_TABLE,
                                       s.same_partition_as(newer.c.CC_PARTITION, cc.CC_PARTITION),
                                       newer.c.CC_ID > cc.CC_ID)
        has_components = sa.exists().where(ctc.CTC_DATABASE == cc.CC_DATABASE, ctc.CTC_TABLE == cc.CC_TABLE,
                                           s.same_partition_as(ctc.CTC_PARTITION, cc.CC_PARTITION))
        retries = (sa.select(cc.CC_DATABASE, cc.CC_TABLE, cc.CC_PARTITION, cc.CC_ID, cc.CC_STATE, cc.CC_ERROR_MESSAGE)
                   .where(cc.CC_STATE.in_((CompactionState.FAILED.value, CompactionState.DID_NOT_INITIATE.value)),
                          is_newest, has_components))
        if limit is not None:
            retries = retries.order_by(cc.CC_ID).limit(limit)
        aborted = (sa.select(tc.TC_DATABASE, tc.TC_TABLE, tc.TC_PARTITION, sa.func.min(txns.TXN_STARTED),
                             sa.func.count())
                   .select_from(s.txns.join(s.txn_components, txns.TXN_ID == tc.TC_TXNID))
                   .where(txns.TXN_STATE == TXN_ABORTED, tc.TC_TABLE.is_not(None))
                   .group_by(tc.TC_DATABASE, tc.TC_TABLE, tc.TC_PARTITION))
        if limit is not None:
            aborted = aborted.order_by(sa.func.min(txns.TXN_STARTED)).limit(limit)
        return rows, conn.execute(retries).all(), conn.execute(aborted).all()

    rows, retries, aborted = metastore.db.run("find potential compactions", read, write=False, snapshot=True)
    keys = {(row[0], row[1], row[2]) for row in rows}
    deferred = {}
    for database, table, partition, entry_id, state, message in retries:
        keys.add((database, table, partition))
        if state == CompactionState.DID_NOT_INITIATE.value and (message or "").startswith(BUDGET_DEFERRED):
            deferred[(database, table, partition)] = entry_id
    candidates = {key: Candidate(*key, deferred_entry=deferred.get(key)) for key in keys}
    for database, table, partition, oldest, count in aborted:
        too_many = count > aborted_threshold
        too_old = aborted_time_threshold_ms >= 0 and oldest + aborted_time_threshold_ms < now
        if too_many or too_old:
            candidates[(database, table, partition)] = Candidate(database, table, partition, too_many, too_old,
                                                                 count, oldest, deferred.get((database, table, partition)))
    last = Cursor(rows[-1].CTC_TIMESTAMP, rows[-1].CTC_TXNID) if rows else None
    complete = limit is None or len(rows) < limit
    ordered = [candidates[key] for key in sorted(candidates, key=lambda k: (k[0], k[1], k[2] or ""))]
    return ordered, last, complete
