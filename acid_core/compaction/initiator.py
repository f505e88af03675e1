"""Hive's compaction Initiator: which partitions to look at, whether to compact them, and how.

The candidates come from `acid_core.compaction.candidates` (Hive's findPotentialCompactions, from the metastore,
bounded by a cursor and a fetch size in `initiator_cycle`). `decide` applies Hive's isEligibleForCompaction and
checkForCompaction / determineCompactionType (hive-acid-reference.md section 7); `run_initiator` queues the result.
Within one cycle the table and database definitions, each table's write-id snapshot and the initiated/working queue
entries are read once (`CycleReads`, as Hive's Initiator caches tables and reads showCompact once per cycle), so a
poll costs per candidate one compaction-history query and the listing of its partition directory.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import sqlalchemy as sa

from acid_core import settings
from acid_core.compaction.candidates import (
    ABORTED_THRESHOLD,
    ABORTED_TIME_THRESHOLD_MS,
    BUDGET_DEFERRED,
    CHECK_SLACK_MS,
    FETCH_SIZE,
    Candidate,
    Cursor,
    find_candidates,
    read_candidates,
)
from acid_core.errors import (
    AcidError,
    DirectoryVanishedError,
    InvalidSettingError,
    MetastoreError,
    NoSuchObjectError,
    NotEnoughHistoryError,
)
from acid_core.format.layout import parse_bucket_file
from acid_core.format.validity import ValidCompactorWriteIdList
from acid_core.metastore import Metastore
from acid_core.metastore import schema as s
from acid_core.metastore.catalog import DatabaseInfo, TableInfo
from acid_core.metastore.codes import MAX_REBALANCE_BUCKETS, CompactionState, CompactionType
from acid_core.metastore.locations import data_location
from acid_core.metastore.pools import DEFAULT_POOL, pool_of
from acid_core.metastore.txns import full_table_name
from acid_core.read.state import DirectoryState, PartitionListing, get_acid_state

# The defaults (Hive's, from the registry).
DELTA_NUM_THRESHOLD = settings.DELTA_NUM_THRESHOLD.default
DELTA_PCT_THRESHOLD = settings.DELTA_PCT_THRESHOLD.default
FAILED_THRESHOLD = settings.FAILED_THRESHOLD.default
FAILED_RETRY_TIME_MS = settings.FAILED_RETRY_TIME.default_ms
# Ours (Hive's initiator never rebalances): a due major compaction of an unbucketed table becomes a rebalance into
# ceil(bytes / this) buckets when its biggest bucket holds more than twice this, so no Spark task gets more.
REBALANCE_BUCKET_BYTES = settings.REBALANCE_BUCKET_SIZE.default


# Why a candidate was or was not queued (Decision.why): "why not yet", in words an operator can count.
WHY_QUEUED = "queued"
WHY_BELOW_THRESHOLD = "below threshold"
WHY_NO_AUTO_COMPACTION = "no_auto_compaction"
WHY_IN_QUEUE = "in queue"  # a compaction of the partition is initiated (waiting for a slot) or working
WHY_FAILED_THRESHOLD = "failed threshold"
WHY_BUDGET_SPENT = "budget spent"
WHY_NOT_ELIGIBLE = "not eligible"  # not a full ACID table, gone, a partitioned table's table-level entry
WHY_ERROR = "error"  # the partition could not be examined
WHY = (WHY_QUEUED, WHY_BELOW_THRESHOLD, WHY_NO_AUTO_COMPACTION, WHY_IN_QUEUE, WHY_FAILED_THRESHOLD, WHY_BUDGET_SPENT,
       WHY_NOT_ELIGIBLE, WHY_ERROR)
MIN_COST_BYTES = 1 << 20  # a compaction costs at least this much (start, listing, commit), however small its files


@dataclass(frozen=True, slots=True)
class Decision:
    """What the initiator decided for one candidate: a compaction type, or None with the reason it skipped.

    `why` is one of WHY. `benefit` is what the compaction removes from every read of the partition (its current
    insert deltas, its delete deltas counted twice: their events are loaded by every reader, aborted transactions),
    `cost_bytes` what it rewrites (a major compaction: base and deltas; a minor one: the deltas)."""

    candidate: Candidate
    compaction_type: CompactionType | None
    reason: str
    compaction_id: int | None = None  # set by run_initiator when a request was queued (or already was)
    number_of_buckets: int | None = None  # a rebalance's CLUSTERED INTO n BUCKETS
    pool: str | None = None  # the compaction pool it is queued in (None: "default"), as Hive's Initiator chooses it
    why: str = WHY_QUEUED
    benefit: int = 0
    cost_bytes: int = 0

    @property
    def score(self) -> float:
        """Benefit over cost: what the compaction removes from reads per MiB it rewrites."""
        return self.benefit / (max(self.cost_bytes, MIN_COST_BYTES) / MIN_COST_BYTES)


@dataclass(frozen=True, slots=True)
class InitiatorCycle:
    """One bounded initiator poll: its decisions, where the next poll continues, and whether it read everything."""

    decisions: tuple[Decision, ...]
    cursor: str
    complete: bool


def _skip(candidate: Candidate, reason: str, why: str) -> Decision:
    return Decision(candidate, None, reason, why=why)


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
            s.same_partition(cc.CC_PARTITION, candidate.partition),
            cc.CC_STATE.in_((CompactionState.SUCCEEDED.value, CompactionState.FAILED.value)))
        .order_by(cc.CC_ID.desc()).limit(threshold)).all(), write=False)
    if len(rows) < threshold or any(state != CompactionState.FAILED.value for state, _ in rows):
        return None
    newest_enqueue = rows[0].CC_ENQUEUE_TIME or 0
    if retry_time_ms > 0 and newest_enqueue + retry_time_ms < metastore.db.clock.now_ms():
        return None
    return (f"compaction is not initiated since the last {threshold} consecutive compaction attempts failed "
            f"(failed.compacts.threshold {threshold}; retried after failed.retry.time {retry_time_ms} ms)")


def table_threshold(table: TableInfo, setting: settings.Setting, default: float) -> float:
    """The table's property of `setting` (a `compactorthreshold.*` override), else `default`.

    Raises:
        MetastoreError: the property's value is not one the setting allows (naming the table, property and value).
    """
    key = setting.property_key
    assert key is not None, f"setting {setting.name} is not a table property"
    text = table.param(key)
    if text is None:
        return default
    try:
        return setting.parse(text, what=f"table {table.full_name}: property {key}")
    except InvalidSettingError as exc:
        raise MetastoreError(f"{exc}; fix or unset it") from None


def _listing(state: DirectoryState) -> PartitionListing:
    """The partition's listing, which every state `get_acid_state` returns carries."""
    assert state.listing is not None, f"{state.location}: a directory state without its listing"
    return state.listing


def _bucket_bytes(state: DirectoryState, name: str) -> int:
    return sum(child.size for child in _listing(state).children(name)
               if not child.is_dir and parse_bucket_file(child.name) is not None)


def base_and_delta_sizes(state: DirectoryState) -> tuple[int, int]:
    """Hive's getBaseSize (base files, else original files) and the bytes of all current deltas."""
    if state.base is not None:
        base_size = _bucket_bytes(state, state.base.name)
    else:
        wanted = set(state.original_files)
        listing = _listing(state)
        base_size = sum(entry.size for entry in listing.entries if not entry.is_dir and entry.name in wanted)
        base_size += sum(f.size for f in listing.original_dir_files if f.name in wanted)
    return base_size, sum(_bucket_bytes(state, delta.name) for delta in state.deltas)


def decide_compaction_type(table: TableInfo, state: DirectoryState, *, delta_num_threshold: int,
                     delta_pct_threshold: float) -> tuple[CompactionType | None, str]:
    """Hive's determineCompactionType, with the numbers that decided it."""
    base_size, delta_size = base_and_delta_sizes(state)
    no_base = base_size == 0 and delta_size > 0
    if not no_base:
        pct = table_threshold(table, settings.DELTA_PCT_THRESHOLD, delta_pct_threshold)
        if base_size > 0 and delta_size / base_size > pct:
            return CompactionType.MAJOR, (f"delta size {delta_size} / base size {base_size} = "
                                          f"{delta_size / base_size:.3g} > delta.pct.threshold {pct}")
        if delta_size == 0 and any(name.startswith("base_") for name in state.obsolete):
            return CompactionType.MAJOR, "no delta data but several bases"
    num = int(table_threshold(table, settings.DELTA_NUM_THRESHOLD, delta_num_threshold))
    count = len(state.deltas)
    if count <= num:
        return None, f"{count} deltas <= delta.num.threshold {num}" + ("" if no_base else
                                                                      ", delta/base size within delta.pct.threshold")
    if no_base:
        return CompactionType.MAJOR, f"{count} deltas > delta.num.threshold {num} and no base"
    return CompactionType.MINOR, f"{count} deltas > delta.num.threshold {num}"


def _rebalance(table: TableInfo, state: DirectoryState, target_bytes: int) -> tuple[int, str] | None:
    """Buckets to rebalance a partition into, with the reason, when its biggest bucket (base and delta files of one
    bucket id) holds more than twice `target_bytes` (the table's rebalance bucket size property overrides it; 0
    turns this off) and more buckets are wanted than it has. Unbucketed tables only: Hive refuses the others."""
    if table.num_buckets > 0:
        return None
    target = int(table_threshold(table, settings.REBALANCE_BUCKET_SIZE, target_bytes))
    if target <= 0:
        return None
    sizes: dict[int, int] = {}
    names = ([state.base.name] if state.base is not None else []) + [d.name for d in state.deltas if not d.is_delete]
    for name in names:
        for child in _listing(state).children(name):
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
    skewed unbucketed partition becomes a rebalance (`_rebalance`). The compaction pool is the table's
    `hive.compactor.worker.pool`, else its database's, else none ("default"), as Hive's Initiator chooses it.

    Args:
        reads: the cycle's shared reads (run_initiator passes one for all its candidates); fresh ones when None.

    Raises:
        AcidError: the partition cannot be examined (unreadable directory, bad threshold or pool property, metastore
            error).
    """
    reads = reads if reads is not None else CycleReads(metastore)
    try:
        table = reads.table(candidate.database, candidate.table)
    except NoSuchObjectError:
        return _skip(candidate, f"table {candidate.database}.{candidate.table} no longer exists", WHY_NOT_ELIGIBLE)
    if not table.is_transactional:
        return _skip(candidate, f"table {table.full_name} is not a full ACID table", WHY_NOT_ELIGIBLE)
    if table.no_auto_compaction:
        return _skip(candidate, f"table {table.full_name} has no_auto_compaction=true", WHY_NO_AUTO_COMPACTION)
    database = reads.database(candidate.database)
    if database.no_auto_compaction:
        return _skip(candidate, f"database {candidate.database} has no_auto_compaction=true", WHY_NO_AUTO_COMPACTION)
    if table.partition_keys and candidate.partition is None:
        return _skip(candidate, f"table {table.full_name} is partitioned: a table-level entry (dynamic-partition "
                                "write) is not compacted", WHY_NOT_ELIGIBLE)
    queued = reads.queued_or_working(candidate)
    if queued is not None:
        return _skip(candidate, f"compaction {queued[0]} is already {queued[1]} for {candidate.full_partition_name}",
                     WHY_IN_QUEUE)
    failed = (_failed_too_often(metastore, candidate, failed_threshold, failed_retry_time_ms)
              if reads.failures(candidate) >= failed_threshold else None)
    if failed is not None:
        return _skip(candidate, failed, WHY_FAILED_THRESHOLD)
    pool = pool_of(table.params, database.params, table=table.full_name)
    if candidate.too_many_aborts:
        return Decision(candidate, CompactionType.MAJOR,
                        f"{candidate.aborted_count} aborted transactions > abortedtxn.threshold", pool=pool,
                        benefit=candidate.aborted_count)
    if candidate.has_old_abort:
        return Decision(candidate, CompactionType.MINOR,
                        f"an aborted transaction started at {candidate.oldest_abort_ms} is older than "
                        "aborted.txn.time.threshold", pool=pool, benefit=candidate.aborted_count)
    where = data_location(table, candidate.partition)
    try:
        state = get_acid_state(where.path, write_ids=reads.write_ids(table), missing_ok=True, fs=where.fs)
    except (DirectoryVanishedError, NotEnoughHistoryError):
        # compacted (and maybe cleaned) past the cycle's snapshot meanwhile: look again, once, with a fresh one
        state = get_acid_state(where.path, write_ids=reads.write_ids(table, fresh=True), missing_ok=True, fs=where.fs)
    compaction_type, reason = decide_compaction_type(table, state, delta_num_threshold=delta_num_threshold,
                                               delta_pct_threshold=delta_pct_threshold)
    if compaction_type is None:
        return Decision(candidate, None, reason, why=WHY_BELOW_THRESHOLD)
    base_size, delta_size = base_and_delta_sizes(state)
    benefit = sum(2 if d.is_delete else 1 for d in state.deltas) + len(state.aborted)
    cost_bytes = delta_size + (base_size if compaction_type is not CompactionType.MINOR else 0)
    if compaction_type is CompactionType.MAJOR:
        rebalance = _rebalance(table, state, rebalance_bucket_bytes)
        if rebalance is not None:
            return Decision(candidate, CompactionType.REBALANCE, f"{reason}; {rebalance[1]}",
                            number_of_buckets=rebalance[0], pool=pool, benefit=benefit, cost_bytes=cost_bytes)
    return Decision(candidate, compaction_type, reason, pool=pool, benefit=benefit, cost_bytes=cost_bytes)


def run_initiator(metastore: Metastore, *, dry_run: bool = False, last_checked_ms: int | None = None,
                  aborted_threshold: int = ABORTED_THRESHOLD,
                  aborted_time_threshold_ms: int = ABORTED_TIME_THRESHOLD_MS,
                  delta_num_threshold: int = DELTA_NUM_THRESHOLD, delta_pct_threshold: float = DELTA_PCT_THRESHOLD,
                  failed_threshold: int = FAILED_THRESHOLD, failed_retry_time_ms: int = FAILED_RETRY_TIME_MS,
                  rebalance_bucket_bytes: int = REBALANCE_BUCKET_BYTES, budget_bytes: int = 0) -> list[Decision]:
    """One unbounded initiator cycle over the commits since `last_checked_ms` (all when None): find candidates,
    decide each, queue the compactions (nothing is written on a dry run). `initiator_cycle` is the bounded poll.

    A candidate whose decision raised an AcidError gets a `did not initiate` history entry (it makes the partition
    a candidate again next cycle, as in Hive) and a Decision without a type saying why.
    """
    candidates = find_candidates(metastore, last_checked_ms=last_checked_ms, aborted_threshold=aborted_threshold,
                                 aborted_time_threshold_ms=aborted_time_threshold_ms)
    return _decide_all(metastore, candidates, dry_run=dry_run, delta_num_threshold=delta_num_threshold,
                       delta_pct_threshold=delta_pct_threshold, failed_threshold=failed_threshold,
                       failed_retry_time_ms=failed_retry_time_ms, rebalance_bucket_bytes=rebalance_bucket_bytes,
                       budget_bytes=budget_bytes)


def initiator_cycle(metastore: Metastore, *, cursor: str | None, fetch_size: int = FETCH_SIZE, dry_run: bool = False,
                    aborted_threshold: int = ABORTED_THRESHOLD,
                    aborted_time_threshold_ms: int = ABORTED_TIME_THRESHOLD_MS,
                    delta_num_threshold: int = DELTA_NUM_THRESHOLD, delta_pct_threshold: float = DELTA_PCT_THRESHOLD,
                    failed_threshold: int = FAILED_THRESHOLD, failed_retry_time_ms: int = FAILED_RETRY_TIME_MS,
                    rebalance_bucket_bytes: int = REBALANCE_BUCKET_BYTES, budget_bytes: int = 0) -> InitiatorCycle:
    """One bounded initiator poll, continuing from `cursor` (the previous poll's; None: from the first commit).

    At most `fetch_size` commit rows are read (metastore.compactor.fetch.size), oldest first, and at most as many
    failed partitions to retry and partitions with aborts, so a poll of a metastore with millions of commits costs
    what it reads: a backlog is worked through over several polls (`complete` is False while one remains). The
    returned cursor re-reads the last minute of commits (a commit's timestamp is taken before it is visible) unless
    that would not move past `cursor`.

    The due compactions are queued in rank order (`rank`), at most `budget_bytes` of rewriting per pool (0: no
    budget; the first of a pool is always queued); the others are left for the next poll, ahead of new ones.

    Raises:
        UsageError: `fetch_size` is outside its bounds (settings.FETCH_SIZE), `budget_bytes` is negative, or
            `cursor` is malformed.
    """
    settings.BUDGET.check(budget_bytes, what="initiator budget_bytes")
    settings.FETCH_SIZE.check(fetch_size, what="initiator fetch_size (metastore.compactor.fetch.size)")
    after = Cursor.parse(cursor) if cursor else None
    started = metastore.db.clock.now_ms()
    candidates, last, complete = read_candidates(metastore, after=after, limit=fetch_size,
                                                  aborted_threshold=aborted_threshold,
                                                  aborted_time_threshold_ms=aborted_time_threshold_ms)
    decisions = _decide_all(metastore, candidates, dry_run=dry_run, delta_num_threshold=delta_num_threshold,
                            delta_pct_threshold=delta_pct_threshold, failed_threshold=failed_threshold,
                            failed_retry_time_ms=failed_retry_time_ms, rebalance_bucket_bytes=rebalance_bucket_bytes,
                       budget_bytes=budget_bytes)
    following = Cursor(started - CHECK_SLACK_MS, -1)
    if not complete and last is not None:
        following = min(last, following)
        if after is None or following <= after:
            following = last  # a fetch of commits within the last minute: move on regardless
    return InitiatorCycle(tuple(decisions), str(following), complete)


def _decide_all(metastore: Metastore, candidates: list[Candidate], *, dry_run: bool, delta_num_threshold: int,
                delta_pct_threshold: float, failed_threshold: int, failed_retry_time_ms: int,
                rebalance_bucket_bytes: int, budget_bytes: int = 0) -> list[Decision]:
    """Decide every candidate, then queue the due ones pool by pool in rank order (`rank`), within each pool's
    budget of `budget_bytes` to rewrite this cycle (0: no budget): what does not fit is recorded `did not initiate`
    (message BUDGET_DEFERRED ...), which makes the partition a candidate again at the next poll, ahead of new ones."""
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
            decision = _skip(candidate, f"could not decide: {exc}", WHY_ERROR)
            if not dry_run:
                metastore.compactions.record_did_not_initiate(
                    candidate.database, candidate.table, candidate.partition, CompactionType.MAJOR, str(exc),
                    initiator_id=initiator_id)
        decisions.append(decision)
    due = rank([d for d in decisions if d.compaction_type is not None])
    settled: dict[int, Decision] = {}
    spent: dict[str, int] = {}
    for position, decision in enumerate(due):
        compaction_type = decision.compaction_type
        assert compaction_type is not None  # `due` holds the decisions with a type
        pool = decision.pool or DEFAULT_POOL
        if budget_bytes > 0 and pool in spent and spent[pool] + decision.cost_bytes > budget_bytes:
            decision = replace(decision, why=WHY_BUDGET_SPENT, reason=(
                f"{BUDGET_DEFERRED} pool {pool} has {spent[pool]} of its {budget_bytes} bytes of this cycle "
                f"queued; this {compaction_type.display} compaction ({decision.reason}; rank "
                f"{position + 1} of {len(due)}, {decision.benefit} directories for {decision.cost_bytes} bytes) "
                "goes first at the next poll"))
            if not dry_run:
                metastore.compactions.record_did_not_initiate(
                    decision.candidate.database, decision.candidate.table, decision.candidate.partition,
                    compaction_type, decision.reason, initiator_id=initiator_id, pool=pool)
            settled[id(decision.candidate)] = decision
            continue
        spent[pool] = spent.get(pool, 0) + decision.cost_bytes  # the first of a pool always fits: none starves
        if not dry_run:
            candidate = decision.candidate
            result = metastore.compactions.enqueue(candidate.database, candidate.table, candidate.partition,
                                                   compaction_type, initiator_id=initiator_id,
                                                   number_of_buckets=decision.number_of_buckets,
                                                   pool=decision.pool or DEFAULT_POOL)
            reason = decision.reason if result.accepted else f"{decision.reason}; not queued: {result.message}"
            decision = replace(decision, reason=reason, compaction_id=result.compaction_id)
        settled[id(decision.candidate)] = decision
    return [settled.get(id(d.candidate), d) for d in decisions]


def rank(decisions: list[Decision]) -> list[Decision]:
    """The order due compactions are queued in (and so, within a pool, run in): first the ones a spent budget left
    for this cycle, in the order they were left (oldest first: none starves), then by benefit over cost, highest
    first (LinkedIn OpenHouse's greedy selection), then by name."""
    def key(decision: Decision):
        candidate = decision.candidate
        deferred = candidate.deferred_entry
        return (deferred is None, deferred or 0, -decision.score, candidate.database, candidate.table,
                candidate.partition or "")

    return sorted(decisions, key=key)
