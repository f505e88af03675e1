"""A table's compaction health, per partition: what the UI's ACID view shows (Hive 4's AcidMetricsService per table,
Amoro's per-table optimizing status), computed with the rules the initiator and the cleaner apply.

Per partition: the base, delta and delete-delta counts and sizes of the current snapshot, what the initiator's
thresholds (table properties over Hive's defaults) would queue now (nothing under NO_AUTO_COMPACTION, which also
says what the thresholds would ask for), obsolete and aborted directories still on disk
and what holds them back from the cleaner (an open transaction older than the compaction, a reader lease, the
retention time), the last compaction, and whether the partition is past `failed.compacts.threshold`.

Cost: one catalog read of the table's partition names, then for one page of at most `MAX_PAGE` partitions one listing
each (plus one per directory the snapshot reads), one history query and one queue query for the page; the open
transactions (the oldest MAX_HOLDERS, by index) and the table's reader leases once.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import sqlalchemy as sa

from acid_core import settings
from acid_core.compaction.candidates import BUDGET_DEFERRED
from acid_core.compaction.initiator import (
    DELTA_NUM_THRESHOLD,
    DELTA_PCT_THRESHOLD,
    FAILED_RETRY_TIME_MS,
    FAILED_THRESHOLD,
    WHY_BELOW_THRESHOLD,
    WHY_BUDGET_SPENT,
    WHY_ERROR,
    WHY_FAILED_THRESHOLD,
    WHY_NO_AUTO_COMPACTION,
    base_and_delta_sizes,
    decide_compaction_type,
    table_threshold,
)
from acid_core.errors import AcidError, UsageError
from acid_core.format.validity import ValidTxnList
from acid_core.metastore import Metastore, holds
from acid_core.metastore import schema as s
from acid_core.metastore.catalog import TableInfo
from acid_core.metastore.codes import CompactionState, CompactionType
from acid_core.metastore.locations import data_location
from acid_core.metastore.locks import LOCK_WAITING
from acid_core.metastore.pools import DEFAULT_POOL
from acid_core.metastore.txns import TXN_OPEN, full_table_name
from acid_core.read.state import get_acid_state

MAX_PAGE = 200
DEFAULT_PAGE = 50
# "Why is this partition not compacted (yet)": the initiator's words (Decision.why), plus what only the queue knows.
MAX_HOLDERS = 100  # open transactions named as holders per page (the oldest)
MAX_AHEAD = 1000  # entries counted ahead of a waiting one (a page costs at most MAX_PAGE x this, whatever the queue)
WHY_DUE = "due"  # over a threshold: the initiator's next poll queues it
WHY_WAITING = "waiting for a slot"
WHY_COMPACTING = "compacting"
WHY_LOCKED = "locked"  # its compaction waits for a lock
WHY_NOT_YET = (WHY_DUE, WHY_WAITING, WHY_COMPACTING, WHY_LOCKED, WHY_BELOW_THRESHOLD, WHY_NO_AUTO_COMPACTION,
               WHY_FAILED_THRESHOLD, WHY_BUDGET_SPENT, WHY_ERROR)


@dataclass(frozen=True, slots=True)
class Threshold:
    """One effective initiator threshold: its value and where it comes from (the table property or Hive's default)."""

    name: str
    value: float
    source: str


@dataclass(frozen=True, slots=True)
class Holder:
    """What keeps a partition's obsolete or aborted directories on disk: `kind` is `transaction`, `reader lease`,
    `compactor transaction`, `retention`, `cleaner` (ready: the cleaner's next run removes them) or `compaction`
    (no compaction waits to clean them yet)."""

    kind: str
    detail: str
    compaction_id: int | None = None
    txn_id: int | None = None
    lease_id: int | None = None


@dataclass(frozen=True, slots=True)
class LastCompaction:
    id: int
    state: str
    type: str
    end_ms: int | None


@dataclass(frozen=True, slots=True)
class PartitionHealth:
    """One partition (None: the unpartitioned table) under the current snapshot."""

    partition: str | None
    base: str | None = None
    deltas: int = 0
    delete_deltas: int = 0
    base_bytes: int = 0
    delta_bytes: int = 0
    obsolete: tuple[str, ...] = ()
    aborted: tuple[str, ...] = ()
    held_by: tuple[Holder, ...] = ()
    due: str | None = None  # the compaction type the initiator would queue now, or None
    reason: str = ""  # the initiator's reasoning with these numbers
    thresholds_due: str | None = None  # what the thresholds call for, even where NO_AUTO_COMPACTION queues nothing
    queued: tuple[int, str] | None = None  # an initiated or working entry: (id, state)
    last_compaction: LastCompaction | None = None
    consecutive_failures: int = 0
    past_failed_threshold: bool = False
    error: str | None = None  # the partition could not be examined
    why: str = ""  # why it is (not yet) compacted, one of WHY_NOT_YET
    why_detail: str = ""  # the same in a sentence, with its numbers
    since_ms: int | None = None  # since when that holds, where known (waiting, budget spent)


@dataclass(frozen=True, slots=True)
class TableHealth:
    database: str
    table: str
    partition_keys: tuple[str, ...]
    no_auto_compaction: bool
    no_auto_compaction_source: str | None  # "table", "database" or None
    thresholds: tuple[Threshold, ...]
    partitions: tuple[PartitionHealth, ...]
    total_partitions: int
    offset: int
    limit: int
    params: dict[str, str] = field(default_factory=dict)


def effective_thresholds(table: TableInfo, *, delta_num_threshold: int = DELTA_NUM_THRESHOLD,
                         delta_pct_threshold: float = DELTA_PCT_THRESHOLD,
                         failed_threshold: int = FAILED_THRESHOLD) -> tuple[Threshold, ...]:
    """The thresholds the initiator applies to `table`: its `compactorthreshold.*` properties win over the defaults.

    Raises:
        MetastoreError: a threshold property is not a number.
    """
    def one(setting: settings.Setting, default: float) -> Threshold:
        key = setting.property_key
        assert key is not None, f"setting {setting.name} is not a table property"
        value = table_threshold(table, setting, default)
        return Threshold(setting.key, value, f"table property {key}" if table.param(key) is not None else "default")

    # `Setting.key` is Hive's key, which each of these has
    return (one(settings.DELTA_NUM_THRESHOLD, delta_num_threshold), one(settings.DELTA_PCT_THRESHOLD, delta_pct_threshold),
            Threshold(settings.FAILED_THRESHOLD.key, failed_threshold, "default"))


def table_health(metastore: Metastore, database: str, table: str, *, offset: int = 0, limit: int = DEFAULT_PAGE,
                 partition: str | None = None) -> TableHealth:
    """The health of one page of `database.table`'s partitions (in name order), or of the one `partition` named.

    Raises:
        UsageError: `offset` < 0, or `limit` outside 1..MAX_PAGE.
        NoSuchObjectError, NotTransactionalError: no such full ACID table.
        MetastoreError: the partition is not one of the table's.
    """
    if offset < 0 or not 1 <= limit <= MAX_PAGE:
        raise UsageError(f"page offset {offset} / limit {limit}: give offset >= 0 and limit in 1..{MAX_PAGE}")
    info = metastore.catalog.require_transactional(database, table)
    db_info = metastore.catalog.get_database(info.database)
    if partition is not None:
        info.check_partition_name(partition)
        names: list[str | None] = [partition]
        total = 1
    elif info.partition_keys:
        all_names = [p.name for p in metastore.catalog.list_partitions(info.database, info.name)]
        total = len(all_names)
        names = list(all_names[offset:offset + limit])
    else:
        names, total = [None], 1
    thresholds = effective_thresholds(info)
    num, pct = int(thresholds[0].value), float(thresholds[1].value)
    name = full_table_name(info.database, info.name)
    snapshot = metastore.txns.snapshot([name])
    history = _history(metastore, info, names)
    queue = _queue(metastore, info, names)
    waits = _waits(metastore, [row for rows in queue.values() for row in rows])
    # the oldest open transactions only: a transaction holds an entry back only if it is older than the entry's
    # commit, so the oldest MAX_HOLDERS are the ones to name, however many are open (a streaming fleet's batches)
    open_txns, _ = metastore.txns.transactions_page((TXN_OPEN,), limit=MAX_HOLDERS)
    scopes = metastore.db.run("read what open transactions read", lambda conn: holds.scopes(
        conn, [t.txn_id for t in open_txns]), write=False)
    leases = metastore.leases.list(info.database, info.name)
    now = metastore.db.clock.now_ms()
    partitions = []
    if info.no_auto_compaction:
        source = "table"
    elif db_info.no_auto_compaction:
        source = "database"
    else:
        source = None
    for part in names:
        found = _partition_health(
            info, part, snapshot, num=num, pct=pct, history=history.get(part, []), queue=queue.get(part, []),
            open_txns=open_txns, scopes=scopes, leases=leases, now_ms=now)
        found = replace(found, **_why(found, history.get(part, []), queue.get(part, []), waits, no_auto=source,
                                      full_name=info.full_name))
        partitions.append(_no_auto(found, source) if source is not None and found.error is None else found)
    return TableHealth(info.database, info.name, tuple(k.name for k in info.partition_keys), source is not None,
                       source, thresholds, tuple(partitions), total, offset, limit, dict(info.params))


def _history(metastore: Metastore, table: TableInfo, names: list[str | None]) -> dict[str | None, list]:
    """The page's compaction history, newest first per partition (history is purged to a few rows per state)."""
    if not names:  # a partitioned table without partitions
        return {}
    cc = s.completed_compactions.c
    named = [n for n in names if n is not None]
    conditions = []
    if named:
        conditions.append(cc.CC_PARTITION.in_(named))
    if None in names:
        conditions.append(cc.CC_PARTITION.is_(None))
    query = (sa.select(cc.CC_ID, cc.CC_PARTITION, cc.CC_STATE, cc.CC_TYPE, cc.CC_ENQUEUE_TIME, cc.CC_END,
                       cc.CC_ERROR_MESSAGE)
             .where(cc.CC_DATABASE == table.database, cc.CC_TABLE == table.name, sa.or_(*conditions))
             .order_by(cc.CC_ID.desc()))
    rows = metastore.db.run("read the compaction history of a page of partitions",
                            lambda conn: conn.execute(query).all(), write=False)
    found: dict[str | None, list] = {}
    for row in rows:
        found.setdefault(row.CC_PARTITION, []).append(row)
    return found


def _queue(metastore: Metastore, table: TableInfo, names: list[str | None]) -> dict[str | None, list]:
    cq = s.compaction_queue.c
    wanted = set(names)
    query = (sa.select(s.compaction_queue).where(cq.CQ_DATABASE == table.database, cq.CQ_TABLE == table.name)
             .order_by(cq.CQ_ID))
    rows = metastore.db.run("read the queue of a table", lambda conn: conn.execute(query).all(), write=False)
    found: dict[str | None, list] = {}
    for row in rows:
        if row.CQ_PARTITION in wanted:
            found.setdefault(row.CQ_PARTITION, []).append(row)
    return found


def _waits(metastore: Metastore, rows: list) -> dict[int, tuple[int, bool]]:
    """For each initiated or working entry of the page: (initiated entries of its pool ahead of it, counted up to
    MAX_AHEAD + 1, whether its compactor transaction waits for a lock). One bounded count per initiated entry (the
    queue's state index), one lock query for the working ones."""
    cq, hl = s.compaction_queue.c, s.hive_locks.c
    pool = sa.func.coalesce(cq.CQ_POOL_NAME, DEFAULT_POOL)

    def read(conn) -> dict[int, tuple[int, bool]]:
        found = {}
        txns = {row.CQ_TXN_ID: row.CQ_ID for row in rows
                if row.CQ_STATE == CompactionState.WORKING.value and row.CQ_TXN_ID is not None}
        waiting = set(conn.execute(sa.select(hl.HL_TXNID).where(hl.HL_TXNID.in_(list(txns)),
                                                                hl.HL_LOCK_STATE == LOCK_WAITING)).scalars().all()
                      ) if txns else set()
        for row in rows:
            if row.CQ_STATE == CompactionState.INITIATED.value:
                before = (sa.select(cq.CQ_ID).where(
                    cq.CQ_STATE == CompactionState.INITIATED.value, pool == (row.CQ_POOL_NAME or DEFAULT_POOL),
                    sa.tuple_(cq.CQ_ENQUEUE_TIME, cq.CQ_ID) < sa.tuple_(
                        sa.literal(row.CQ_ENQUEUE_TIME or 0, sa.BigInteger),
                        sa.literal(row.CQ_ID, sa.BigInteger))).limit(MAX_AHEAD + 1).subquery())
                ahead = conn.execute(sa.select(sa.func.count()).select_from(before)).scalar_one()
                found[row.CQ_ID] = (ahead, False)
            elif row.CQ_STATE == CompactionState.WORKING.value:
                found[row.CQ_ID] = (0, row.CQ_TXN_ID in waiting)
        return found

    return metastore.db.run("read where the page's compactions wait", read, write=False) if rows else {}


def _why(found: PartitionHealth, history: list, queue: list, waits: dict, *, no_auto: str | None,
         full_name: str) -> dict:
    """Why the partition is (not yet) compacted, as `why`, `why_detail` and `since_ms` (see WHY_NOT_YET)."""
    active = next((row for row in queue if row.CQ_STATE in (CompactionState.INITIATED.value,
                                                            CompactionState.WORKING.value)), None)
    if active is not None:
        ahead, locked = waits.get(active.CQ_ID, (0, False))
        pool = active.CQ_POOL_NAME or DEFAULT_POOL
        if active.CQ_STATE == CompactionState.INITIATED.value:
            count = f"more than {MAX_AHEAD}" if ahead > MAX_AHEAD else str(ahead)
            return {"why": WHY_WAITING, "since_ms": active.CQ_ENQUEUE_TIME, "why_detail": (
                f"compaction {active.CQ_ID} waits for a slot of pool {pool}: {count} queued before it")}
        if locked:
            return {"why": WHY_LOCKED, "since_ms": active.CQ_START, "why_detail": (
                f"compaction {active.CQ_ID} waits for a lock on the partition (SHOW LOCKS)")}
        return {"why": WHY_COMPACTING, "since_ms": active.CQ_START, "why_detail": (
            f"compaction {active.CQ_ID} runs on {active.CQ_WORKER_ID or 'a worker'}")}
    if found.error is not None:
        return {"why": WHY_ERROR, "why_detail": found.error}
    if no_auto is not None:
        return {"why": WHY_NO_AUTO_COMPACTION, "why_detail": (
            f"{'table ' + full_name if no_auto == 'table' else 'its database'} has no_auto_compaction=true: only a "
            "manual request (ALTER TABLE ... COMPACT, acid_compact) compacts it")}
    if found.past_failed_threshold:
        return {"why": WHY_FAILED_THRESHOLD, "why_detail": (
            f"the last {found.consecutive_failures} compactions failed (failed.compacts.threshold "
            f"{FAILED_THRESHOLD}): the initiator retries after failed.retry.time")}
    if found.due is None:
        return {"why": WHY_BELOW_THRESHOLD, "why_detail": found.reason}
    newest = history[0] if history else None
    if (newest is not None and newest.CC_STATE == CompactionState.DID_NOT_INITIATE.value
            and (newest.CC_ERROR_MESSAGE or "").startswith(BUDGET_DEFERRED)):
        return {"why": WHY_BUDGET_SPENT, "since_ms": newest.CC_ENQUEUE_TIME, "why_detail": newest.CC_ERROR_MESSAGE}
    return {"why": WHY_DUE, "why_detail": f"{found.reason}: the initiator's next poll queues a {found.due} compaction"}


def _no_auto(found: PartitionHealth, source: str) -> PartitionHealth:
    """Due as the initiator decides under NO_AUTO_COMPACTION (Hive's Initiator skips such a table): nothing, with what
    the thresholds would ask for."""
    asked = (f"the thresholds would ask for {found.due}: {found.reason}" if found.due is not None
             else f"the thresholds ask for nothing: {found.reason}")
    return replace(found, due=None, reason=f"NO_AUTO_COMPACTION ({source}); {asked}")


def _failures(history: list, threshold: int, now_ms: int) -> tuple[int, bool]:
    """Consecutive newest `failed` entries among succeeded/failed ones, and whether Hive's checkFailedCompactions
    skips the partition now (the newest `threshold` all failed and failed.retry.time has not passed)."""
    decided = [row for row in history
               if row.CC_STATE in (CompactionState.SUCCEEDED.value, CompactionState.FAILED.value)]
    consecutive = 0
    for row in decided:
        if row.CC_STATE != CompactionState.FAILED.value:
            break
        consecutive += 1
    past = threshold > 0 and consecutive >= threshold and (
        (decided[0].CC_ENQUEUE_TIME or 0) + FAILED_RETRY_TIME_MS >= now_ms)
    return consecutive, past


def _partition_health(table: TableInfo, partition: str | None, snapshot, *, num: int, pct: float, history: list,
                      queue: list, open_txns: list, scopes: dict, leases: list[dict],
                      now_ms: int) -> PartitionHealth:
    consecutive, past = _failures(history, FAILED_THRESHOLD, now_ms)
    last = next((LastCompaction(row.CC_ID, CompactionState(row.CC_STATE).display,
                                _type_display(row.CC_TYPE), row.CC_END) for row in history), None)
    queued = next(((row.CQ_ID, CompactionState(row.CQ_STATE).display) for row in queue
                   if row.CQ_STATE in (CompactionState.INITIATED.value, CompactionState.WORKING.value)), None)
    common = PartitionHealth(partition, queued=queued, last_compaction=last, consecutive_failures=consecutive,
                             past_failed_threshold=past)
    name = full_table_name(table.database, table.name)
    try:
        where = data_location(table, partition)
        state = get_acid_state(where.path, write_ids=snapshot.write_ids[name], txns=snapshot.txns, missing_ok=True,
                               fs=where.fs)
        base_bytes, delta_bytes = base_and_delta_sizes(state)
        due, reason = decide_compaction_type(table, state, delta_num_threshold=num, delta_pct_threshold=pct)
    except AcidError as exc:
        return replace(common, error=f"{type(exc).__name__}: {exc}")
    held: tuple[Holder, ...] = ()
    if state.obsolete or state.aborted:
        held = _holders(queue, open_txns, scopes, leases, now_ms, has_obsolete=bool(state.obsolete))
    return replace(
        common, base=state.base.name if state.base else None,
        deltas=sum(1 for d in state.deltas if not d.is_delete), delete_deltas=sum(1 for d in state.deltas if d.is_delete),
        base_bytes=base_bytes, delta_bytes=delta_bytes, obsolete=tuple(state.obsolete), aborted=tuple(state.aborted),
        held_by=held, due=due.display.lower() if due is not None else None, reason=reason,
        thresholds_due=due.display.lower() if due is not None else None)


def _type_display(code: str) -> str:
    return CompactionType(code).display.lower()


def _holders(queue: list, open_txns: list, scopes: dict, leases: list[dict], now_ms: int, *,
             has_obsolete: bool) -> tuple[Holder, ...]:
    """Why the cleaner has not removed the partition's obsolete or aborted directories yet, by the rules of
    `CompactionQueue.ready_to_clean` (Hive's findReadyToClean)."""
    ready = [row for row in queue if row.CQ_STATE == CompactionState.READY_FOR_CLEANING.value]
    if not ready:
        what = "obsolete directories" if has_obsolete else "aborted directories"
        return (Holder("compaction", f"no compaction waits to clean the {what}: the partition's next compaction "
                                     "and its cleaning remove them"),)
    holders: list[Holder] = []
    for row in ready:
        before = len(holders)
        if row.CQ_TXN_ID is not None and row.CQ_NEXT_TXN_ID is None:
            holders.append(Holder("compactor transaction", f"compaction {row.CQ_ID}'s transaction {row.CQ_TXN_ID} "
                                  "has not committed", row.CQ_ID, txn_id=row.CQ_TXN_ID))
        if row.CQ_COMMIT_TIME is not None and row.CQ_COMMIT_TIME > now_ms - (row.CQ_RETRY_RETENTION or 0):
            holders.append(Holder("retention", f"compaction {row.CQ_ID} waits for its retry retention until "
                                  f"{row.CQ_COMMIT_TIME + (row.CQ_RETRY_RETENTION or 0)} ms", row.CQ_ID))
        if row.CQ_NEXT_TXN_ID is not None:
            for txn in open_txns:
                scope = scopes.get(txn.txn_id) or holds.TxnScope(txn.txn_id)
                if scope.holds(row.CQ_DATABASE, row.CQ_TABLE, row.CQ_PARTITION, row.CQ_NEXT_TXN_ID):
                    holders.append(Holder("transaction", f"open transaction {txn.txn_id} ({txn.user}@{txn.host}"
                                          + (f", {txn.agent_info}" if txn.agent_info else "")
                                          + f") started before compaction {row.CQ_ID} committed and "
                                          + scope.describe(), row.CQ_ID, txn_id=txn.txn_id))
        if row.CQ_TXN_ID:
            for lease in leases:
                if not ValidTxnList.parse(lease["RL_VALID_TXNS"]).is_valid(row.CQ_TXN_ID):
                    holders.append(Holder("reader lease", f"reader lease {lease['RL_ID']} ({lease['RL_OWNER']}@"
                                          f"{lease['RL_HOST']}) took its snapshot before compaction {row.CQ_ID} "
                                          "committed", row.CQ_ID, lease_id=lease["RL_ID"]))
        if len(holders) == before:
            holders.append(Holder("cleaner", f"compaction {row.CQ_ID} is ready: the cleaner's next run removes them",
                                  row.CQ_ID))
    return tuple(holders)


__all__ = ["DEFAULT_PAGE", "MAX_PAGE", "WHY_NOT_YET", "Holder", "LastCompaction", "PartitionHealth", "TableHealth", "Threshold",
           "effective_thresholds", "table_health"]
