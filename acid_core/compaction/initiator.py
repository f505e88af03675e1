"""Hive's compaction Initiator: which partitions to look at, whether to compact them, and how.

`find_candidates` does not scan partitions: like Hive's findPotentialCompactions it reads COMPLETED_TXN_COMPONENTS
(partitions written since the last run, or whose newest history entry failed / did not initiate) and the aborted
transactions per partition (TXNS + TXN_COMPONENTS). `decide` applies Hive's isEligibleForCompaction and
checkForCompaction / determineCompactionType (hive-acid-reference.md section 7); `run_initiator` queues the result.
Within one cycle the table and database definitions, each table's write-id snapshot and the initiated/working queue
entries are read once (`CycleReads`, as Hive's Initiator caches tables and reads showCompact once per cycle), so a
poll costs per candidate one compaction-history query and the listing of its partition directory.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from acid_core.errors import (AcidError, DirectoryVanishedError, MetastoreError, NoSuchObjectError,
                              NotEnoughHistoryError, UsageError)
from acid_core.layout import parse_bucket_file
from acid_core.metastore import Metastore
from acid_core.metastore import schema as s
from acid_core.metastore.catalog import DatabaseInfo, TableInfo
from acid_core.metastore.compactions import CompactionState, CompactionType
from acid_core.compaction.codes import MAX_REBALANCE_BUCKETS
from acid_core.metastore.properties import DELTA_NUM_PROPERTY, DELTA_PCT_PROPERTY, REBALANCE_BUCKET_SIZE_PROPERTY
from acid_core.metastore.txns import TXN_ABORTED, full_table_name
from acid_core.locations import data_location
from acid_core.state import DirectoryState, get_acid_state
from acid_core.validity import ValidCompactorWriteIdList

# Hive's defaults (HiveConf / MetastoreConf).
ABORTED_THRESHOLD = 1000  # hive.compactor.abortedtxn.threshold
ABORTED_TIME_THRESHOLD_MS = 12 * 3600 * 1000  # hive.compactor.aborted.txn.time.threshold
DELTA_NUM_THRESHOLD = 10  # hive.compactor.delta.num.threshold
DELTA_PCT_THRESHOLD = 0.1  # hive.compactor.delta.pct.threshold
FAILED_THRESHOLD = 2  # metastore.compactor.initiator.failed.compacts.threshold
FAILED_RETRY_TIME_MS = 7 * 24 * 3600 * 1000  # metastore.compactor.initiator.failed.retry.time
# Ours (Hive's initiator never rebalances): a due major compaction of an unbucketed table becomes a rebalance into
# ceil(bytes / this) buckets when its biggest bucket holds more than twice this, so no Spark task gets more.
REBALANCE_BUCKET_BYTES = 1 << 30


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

    @property
    def full_partition_name(self) -> str:
        name = f"{self.database}.{self.table}"
        return f"{name}/{self.partition}" if self.partition is not None else name


@dataclass(frozen=True, slots=True)
class Decision:
    """What the initiator decided for one candidate: a compaction type, or None with the reason it skipped."""

    candidate: Candidate
    compaction_type: CompactionType | None
    reason: str
    compaction_id: int | None = None  # set by run_initiator when a request was queued (or already was)
    number_of_buckets: int | None = None  # a rebalance's CLUSTERED INTO n BUCKETS


def _same_partition_as(column, other):
    """`column` and `other` name the same partition (both NULL for an unpartitioned table), in a form both databases
    match by index (IS NOT DISTINCT FROM is not an index condition on PostgreSQL)."""
    return sa.or_(column == other, sa.and_(column.is_(None), other.is_(None)))


def _same_partition(column, partition: str | None):
    return column.is_(None) if partition is None else column == partition


FETCH_SIZE = 1000  # metastore.compactor.fetch.size
MAX_FETCH_SIZE = 100_000
CHECK_SLACK_MS = 60_000  # re-read a minute of commits: a commit's timestamp is taken before it becomes visible


@dataclass(frozen=True, slots=True, order=True)
class Cursor:
    """Where the initiator's reading of COMPLETED_TXN_COMPONENTS stands: rows after (timestamp, transaction id)."""

    timestamp_ms: int
    txn_id: int

    def __str__(self) -> str:
        return f"{self.timestamp_ms}:{self.txn_id}"

    @classmethod
    def parse(cls, text: str) -> "Cursor":
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


@dataclass(frozen=True, slots=True)
class InitiatorCycle:
    """One bounded initiator poll: its decisions, where the next poll continues, and whether it read everything."""

    decisions: tuple[Decision, ...]
    cursor: str
    complete: bool


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
    return _read_candidates(metastore, after=after, limit=None, aborted_threshold=aborted_threshold,
                            aborted_time_threshold_ms=aborted_time_threshold_ms)[0]


def _read_candidates(metastore: Metastore, *, after: Cursor | None, limit: int | None, aborted_threshold: int,
                     aborted_time_threshold_ms: int) -> tuple[list[Candidate], Cursor | None, bool]:
    """The candidates, the position of the last commit row read, and whether `limit` left rows unread.

    With a `limit`, each of the three reads is bounded and fair: commit rows in (timestamp, transaction) order
    from `after` by index (the oldest unchecked writes first, the next poll continues where this one stopped);
    retries of failed partitions and partitions with aborts, the least recently tried first.
    """
    ctc, cc, tc, txns = s.completed_txn_components.c, s.completed_compactions.c, s.txn_components.c, s.txns.c
    now = metastore.db.clock.now_ms()

    def read(conn: Connection) -> tuple[list, list, list]:
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
                                       _same_partition_as(newer.c.CC_PARTITION, cc.CC_PARTITION),
                                       newer.c.CC_ID > cc.CC_ID)
        has_components = sa.exists().where(ctc.CTC_DATABASE == cc.CC_DATABASE, ctc.CTC_TABLE == cc.CC_TABLE,
                                           _same_partition_as(ctc.CTC_PARTITION, cc.CC_PARTITION))
        retries = (sa.select(cc.CC_DATABASE, cc.CC_TABLE, cc.CC_PARTITION)
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
    keys.update(tuple(row) for row in retries)
    candidates = {key: Candidate(*key) for key in keys}
    for database, table, partition, oldest, count in aborted:
        too_many = count > aborted_threshold
        too_old = aborted_time_threshold_ms >= 0 and oldest + aborted_time_threshold_ms < now
        if too_many or too_old:
            candidates[(database, table, partition)] = Candidate(database, table, partition, too_many, too_old,
                                                                 count, oldest)
    last = Cursor(rows[-1].CTC_TIMESTAMP, rows[-1].CTC_TXNID) if rows else None
    complete = limit is None or len(rows) < limit
    ordered = [candidates[key] for key in sorted(candidates, key=lambda k: (k[0], k[1], k[2] or ""))]
    return ordered, last, complete


def _skip(candidate: Candidate, reason: str) -> Decision:
    return Decision(candidate, None, reason)


class CycleReads:
    """Metastore reads shared by the candidates of one initiator cycle, each made at most once.

    Table and database definitions, a compactor write-id list per table and the initiated or working queue entries
    (Hive's Initiator caches tables per cycle and reads showCompact once per cycle). A table that does not exist is
    not remembered, so it is looked up again. `enqueue` re-checks the queue atomically, so an entry queued by
    someone else during the cycle still prevents a duplicate.
    """

    def __init__(self, metastore: Metastore) -> None:
        self.metastore = metastore
        self._tables: dict[tuple[str, str], TableInfo] = {}
        self._databases: dict[str, DatabaseInfo] = {}
        self._write_ids: dict[str, ValidCompactorWriteIdList] = {}
        self._queued: dict[tuple[str, str, str | None], tuple[int, str]] | None = None
        self._failures: dict[tuple[str, str, str | None], int] | None = None

    def table(self, database: str, name: str) -> TableInfo:
        """The table's definition.

        Raises:
            NoSuchObjectError: the table does not exist.
        """
        key = (database, name)
        if key not in self._tables:
            self._tables[key] = self.metastore.catalog.get_table(database, name)
        return self._tables[key]

    def database(self, name: str) -> DatabaseInfo:
        if name not in self._databases:
            self._databases[name] = self.metastore.catalog.get_database(name)
        return self._databases[name]

    def write_ids(self, table: TableInfo, *, fresh: bool = False) -> ValidCompactorWriteIdList:
        """The table's compactor write-id list, from a snapshot taken at the cycle's first look at the table (or now,
        if `fresh`)."""
        name = full_table_name(table.database, table.name)
        if fresh or name not in self._write_ids:
            self._write_ids[name] = ValidCompactorWriteIdList.from_reader(
                self.metastore.txns.snapshot([name]).write_ids[name])
        return self._write_ids[name]

    def failures(self, candidate: Candidate) -> int:
        """How many `failed` history entries the candidate's partition has (one query per cycle, by the state index):
        only a partition with at least the failed threshold of them needs its history read."""
        if self._failures is None:
            cc = s.completed_compactions.c
            rows = self.metastore.db.run("count failed compactions", lambda conn: conn.execute(
                sa.select(cc.CC_DATABASE, cc.CC_TABLE, cc.CC_PARTITION, sa.func.count())
                .where(cc.CC_STATE == CompactionState.FAILED.value)
                .group_by(cc.CC_DATABASE, cc.CC_TABLE, cc.CC_PARTITION)).all(), write=False)
            self._failures = {(row[0], row[1], row[2]): row[3] for row in rows}
        return self._failures.get((candidate.database, candidate.table, candidate.partition), 0)

    def queued_or_working(self, candidate: Candidate) -> tuple[int, str] | None:
        """The lowest-numbered initiated or working queue entry of the candidate's partition: (id, state)."""
        if self._queued is None:
            cq = s.compaction_queue.c
            rows = self.metastore.db.run("look for queued compactions", lambda conn: conn.execute(
                sa.select(cq.CQ_ID, cq.CQ_DATABASE, cq.CQ_TABLE, cq.CQ_PARTITION, cq.CQ_STATE)
                .where(cq.CQ_STATE.in_((CompactionState.INITIATED.value, CompactionState.WORKING.value)))
                .order_by(cq.CQ_ID.desc())).all(), write=False)
            self._queued = {(row.CQ_DATABASE, row.CQ_TABLE, row.CQ_PARTITION):
                            (row.CQ_ID, CompactionState(row.CQ_STATE).display) for row in rows}  # lowest id wins
        return self._queued.get((candidate.database, candidate.table, candidate.partition))


def _failed_too_often(metastore: Metastore, candidate: Candidate, threshold: int, retry_time_ms: int) -> str | None:
    """Hive's checkFailedCompactions: the newest `threshold` succeeded/failed entries all failed, no retry due yet."""
    if threshold <= 0:
        return None
    cc = s.completed_compactions.c
    rows = metastore.db.run("read compaction history", lambda conn: conn.execute(
        sa.select(cc.CC_STATE, cc.CC_ENQUEUE_TIME).where(
            cc.CC_DATABASE == candidate.database, cc.CC_TABLE == candidate.table,
            _same_partition(cc.CC_PARTITION, candidate.partition),
            cc.CC_STATE.in_((CompactionState.SUCCEEDED.value, CompactionState.FAILED.value)))
        .order_by(cc.CC_ID.desc()).limit(threshold)).all(), write=False)
    if len(rows) < threshold or any(state != CompactionState.FAILED.value for state, _ in rows):
        return None
    newest_enqueue = rows[0].CC_ENQUEUE_TIME or 0
    if retry_time_ms > 0 and newest_enqueue + retry_time_ms < metastore.db.clock.now_ms():
        return None
    return (f"compaction is not initiated since the last {threshold} consecutive compaction attempts failed "
            f"(failed.compacts.threshold {threshold}; retried after failed.retry.time {retry_time_ms} ms)")


def _threshold(table: TableInfo, key: str, default: float, kind: type) -> float:
    text = table.param(key)
    if text is None:
        return default
    try:
        return kind(text.strip())
    except ValueError:
        raise MetastoreError(f"table {table.full_name}: property {key}={text!r} is not a valid {kind.__name__}; "
                             "fix or unset it") from None


def _bucket_bytes(state: DirectoryState, name: str) -> int:
    return sum(child.size for child in state.listing.children(name)
               if not child.is_dir and parse_bucket_file(child.name) is not None)


def _sizes(state: DirectoryState) -> tuple[int, int]:
    """Hive's getBaseSize (base files, else original files) and the bytes of all current deltas."""
    if state.base is not None:
        base_size = _bucket_bytes(state, state.base.name)
    else:
        wanted = set(state.original_files)
        base_size = sum(entry.size for entry in state.listing.entries if not entry.is_dir and entry.name in wanted)
        base_size += sum(f.size for f in state.listing.original_dir_files if f.name in wanted)
    return base_size, sum(_bucket_bytes(state, delta.name) for delta in state.deltas)


def _compaction_type(table: TableInfo, state: DirectoryState, *, delta_num_threshold: int,
                     delta_pct_threshold: float) -> tuple[CompactionType | None, str]:
    """Hive's determineCompactionType, with the numbers that decided it."""
    base_size, delta_size = _sizes(state)
    no_base = base_size == 0 and delta_size > 0
    if not no_base:
        pct = _threshold(table, DELTA_PCT_PROPERTY, delta_pct_threshold, float)
        if base_size > 0 and delta_size / base_size > pct:
            return CompactionType.MAJOR, (f"delta size {delta_size} / base size {base_size} = "
                                          f"{delta_size / base_size:.3g} > delta.pct.threshold {pct}")
        if delta_size == 0 and any(name.startswith("base_") for name in state.obsolete):
            return CompactionType.MAJOR, "no delta data but several bases"
    num = int(_threshold(table, DELTA_NUM_PROPERTY, delta_num_threshold, int))
    count = len(state.deltas)
    if count <= num:
        return None, f"{count} deltas <= delta.num.threshold {num}" + ("" if no_base else
                                                                      ", delta/base size within delta.pct.threshold")
    if no_base:
        return CompactionType.MAJOR, f"{count} deltas > delta.num.threshold {num} and no base"
    return CompactionType.MINOR, f"{count} deltas > delta.num.threshold {num}"


def _rebalance(table: TableInfo, state: DirectoryState, target_bytes: int) -> tuple[int, str] | None:
    """Buckets to rebalance a partition into, with the reason, when its biggest bucket (base and delta files of one
    bucket id) holds more than twice `target_bytes` (the table's REBALANCE_BUCKET_SIZE_PROPERTY overrides it; 0
    turns this off) and more buckets are wanted than it has. Unbucketed tables only: Hive refuses the others."""
    if table.num_buckets > 0:
        return None
    target = int(_threshold(table, REBALANCE_BUCKET_SIZE_PROPERTY, target_bytes, int))
    if target <= 0:
        return None
    sizes: dict[int, int] = {}
    names = ([state.base.name] if state.base is not None else []) + [d.name for d in state.deltas if not d.is_delete]
    for name in names:
        for child in state.listing.children(name):
            parsed = None if child.is_dir else parse_bucket_file(child.name)
            if parsed is not None:
                sizes[parsed.bucket] = sizes.get(parsed.bucket, 0) + child.size
    if not sizes:
        return None
    bucket, biggest = max(sizes.items(), key=lambda item: item[1])
    wanted = min(MAX_REBALANCE_BUCKETS, -(-sum(sizes.values()) // target))
    if biggest <= 2 * target or wanted <= len(sizes):
        return None
    return wanted, (f"bucket {bucket} holds {biggest} bytes > 2 x rebalance bucket size {target}: rebalance "
                    f"{len(sizes)} buckets into {wanted}")


def decide(metastore: Metastore, candidate: Candidate, *, delta_num_threshold: int = DELTA_NUM_THRESHOLD,
           delta_pct_threshold: float = DELTA_PCT_THRESHOLD, failed_threshold: int = FAILED_THRESHOLD,
           failed_retry_time_ms: int = FAILED_RETRY_TIME_MS, rebalance_bucket_bytes: int = REBALANCE_BUCKET_BYTES,
           reads: CycleReads | None = None) -> Decision:
    """Hive's isEligibleForCompaction then checkForCompaction for one candidate; a due major compaction of a badly
    skewed unbucketed partition becomes a rebalance (`_rebalance`).

    Args:
        reads: the cycle's shared reads (run_initiator passes one for all its candidates); fresh ones when None.

    Raises:
        AcidError: the partition cannot be examined (unreadable directory, bad threshold property, metastore error).
    """
    reads = reads if reads is not None else CycleReads(metastore)
    try:
        table = reads.table(candidate.database, candidate.table)
    except NoSuchObjectError:
        return _skip(candidate, f"table {candidate.database}.{candidate.table} no longer exists")
    if not table.is_transactional:
        return _skip(candidate, f"table {table.full_name} is not a full ACID table")
    if table.no_auto_compaction:
        return _skip(candidate, f"table {table.full_name} has no_auto_compaction=true")
    if reads.database(candidate.database).no_auto_compaction:
        return _skip(candidate, f"database {candidate.database} has no_auto_compaction=true")
    if table.partition_keys and candidate.partition is None:
        return _skip(candidate, f"table {table.full_name} is partitioned: a table-level entry (dynamic-partition "
                                "write) is not compacted")
    queued = reads.queued_or_working(candidate)
    if queued is not None:
        return _skip(candidate, f"compaction {queued[0]} is already {queued[1]} for {candidate.full_partition_name}")
    failed = (_failed_too_often(metastore, candidate, failed_threshold, failed_retry_time_ms)
              if reads.failures(candidate) >= failed_threshold else None)
    if failed is not None:
        return _skip(candidate, failed)
    if candidate.too_many_aborts:
        return Decision(candidate, CompactionType.MAJOR,
                        f"{candidate.aborted_count} aborted transactions > abortedtxn.threshold")
    if candidate.has_old_abort:
        return Decision(candidate, CompactionType.MINOR,
                        f"an aborted transaction started at {candidate.oldest_abort_ms} is older than "
                        "aborted.txn.time.threshold")
    where = data_location(table, candidate.partition)
    try:
        state = get_acid_state(where.path, write_ids=reads.write_ids(table), missing_ok=True, fs=where.fs)
    except (DirectoryVanishedError, NotEnoughHistoryError):
        # compacted (and maybe cleaned) past the cycle's snapshot meanwhile: look again, once, with a fresh one
        state = get_acid_state(where.path, write_ids=reads.write_ids(table, fresh=True), missing_ok=True, fs=where.fs)
    compaction_type, reason = _compaction_type(table, state, delta_num_threshold=delta_num_threshold,
                                               delta_pct_threshold=delta_pct_threshold)
    if compaction_type is CompactionType.MAJOR:
        rebalance = _rebalance(table, state, rebalance_bucket_bytes)
        if rebalance is not None:
            return Decision(candidate, CompactionType.REBALANCE, f"{reason}; {rebalance[1]}",
                            number_of_buckets=rebalance[0])
    return Decision(candidate, compaction_type, reason)


def run_initiator(metastore: Metastore, *, dry_run: bool = False, last_checked_ms: int | None = None,
                  aborted_threshold: int = ABORTED_THRESHOLD,
                  aborted_time_threshold_ms: int = ABORTED_TIME_THRESHOLD_MS,
                  delta_num_threshold: int = DELTA_NUM_THRESHOLD, delta_pct_threshold: float = DELTA_PCT_THRESHOLD,
                  failed_threshold: int = FAILED_THRESHOLD, failed_retry_time_ms: int = FAILED_RETRY_TIME_MS,
                  rebalance_bucket_bytes: int = REBALANCE_BUCKET_BYTES) -> list[Decision]:
    """One unbounded initiator cycle over the commits since `last_checked_ms` (all when None): find candidates,
    decide each, queue the compactions (nothing is written on a dry run). `initiator_cycle` is the bounded poll.

    A candidate whose decision raised an AcidError gets a `did not initiate` history entry (it makes the partition
    a candidate again next cycle, as in Hive) and a Decision without a type saying why.
    """
    candidates = find_candidates(metastore, last_checked_ms=last_checked_ms, aborted_threshold=aborted_threshold,
                                 aborted_time_threshold_ms=aborted_time_threshold_ms)
    return _decide_all(metastore, candidates, dry_run=dry_run, delta_num_threshold=delta_num_threshold,
                       delta_pct_threshold=delta_pct_threshold, failed_threshold=failed_threshold,
                       failed_retry_time_ms=failed_retry_time_ms, rebalance_bucket_bytes=rebalance_bucket_bytes)


def initiator_cycle(metastore: Metastore, *, cursor: str | None, fetch_size: int = FETCH_SIZE, dry_run: bool = False,
                    aborted_threshold: int = ABORTED_THRESHOLD,
                    aborted_time_threshold_ms: int = ABORTED_TIME_THRESHOLD_MS,
                    delta_num_threshold: int = DELTA_NUM_THRESHOLD, delta_pct_threshold: float = DELTA_PCT_THRESHOLD,
                    failed_threshold: int = FAILED_THRESHOLD, failed_retry_time_ms: int = FAILED_RETRY_TIME_MS,
                    rebalance_bucket_bytes: int = REBALANCE_BUCKET_BYTES) -> InitiatorCycle:
    """One bounded initiator poll, continuing from `cursor` (the previous poll's; None: from the first commit).

    At most `fetch_size` commit rows are read (metastore.compactor.fetch.size), oldest first, and at most as many
    failed partitions to retry and partitions with aborts, so a poll of a metastore with millions of commits costs
    what it reads: a backlog is worked through over several polls (`complete` is False while one remains). The
    returned cursor re-reads the last minute of commits (a commit's timestamp is taken before it is visible) unless
    that would not move past `cursor`.

    Raises:
        UsageError: `fetch_size` is outside 1..100000, or `cursor` is malformed.
    """
    if not 1 <= fetch_size <= MAX_FETCH_SIZE:
        raise UsageError(f"initiator fetch size {fetch_size} is outside 1..{MAX_FETCH_SIZE} "
                         "(metastore.compactor.fetch.size)")
    after = Cursor.parse(cursor) if cursor else None
    started = metastore.db.clock.now_ms()
    candidates, last, complete = _read_candidates(metastore, after=after, limit=fetch_size,
                                                  aborted_threshold=aborted_threshold,
                                                  aborted_time_threshold_ms=aborted_time_threshold_ms)
    decisions = _decide_all(metastore, candidates, dry_run=dry_run, delta_num_threshold=delta_num_threshold,
                            delta_pct_threshold=delta_pct_threshold, failed_threshold=failed_threshold,
                            failed_retry_time_ms=failed_retry_time_ms, rebalance_bucket_bytes=rebalance_bucket_bytes)
    following = Cursor(started - CHECK_SLACK_MS, -1)
    if not complete and last is not None:
        following = min(last, following)
        if after is None or following <= after:
            following = last  # a fetch of commits within the last minute: move on regardless
    return InitiatorCycle(tuple(decisions), str(following), complete)


def _decide_all(metastore: Metastore, candidates: list[Candidate], *, dry_run: bool, delta_num_threshold: int,
                delta_pct_threshold: float, failed_threshold: int, failed_retry_time_ms: int,
                rebalance_bucket_bytes: int) -> list[Decision]:
    initiator_id = f"{metastore.db.identity.host}-initiator"
    reads = CycleReads(metastore)
    decisions = []
    for candidate in candidates:
        try:
            decision = decide(metastore, candidate, delta_num_threshold=delta_num_threshold,
                              delta_pct_threshold=delta_pct_threshold, failed_threshold=failed_threshold,
                              failed_retry_time_ms=failed_retry_time_ms,
                              rebalance_bucket_bytes=rebalance_bucket_bytes, reads=reads)
        except AcidError as exc:
            decision = _skip(candidate, f"could not decide: {exc}")
            if not dry_run:
                metastore.compactions.record_did_not_initiate(
                    candidate.database, candidate.table, candidate.partition, CompactionType.MAJOR, str(exc),
                    initiator_id=initiator_id)
        if decision.compaction_type is not None and not dry_run:
            result = metastore.compactions.enqueue(candidate.database, candidate.table, candidate.partition,
                                                   decision.compaction_type, initiator_id=initiator_id,
                                                   number_of_buckets=decision.number_of_buckets)
            reason = decision.reason if result.accepted else f"{decision.reason}; not queued: {result.message}"
            decision = replace(decision, reason=reason, compaction_id=result.compaction_id)
        decisions.append(decision)
    return decisions
