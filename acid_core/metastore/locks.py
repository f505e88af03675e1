"""Locks on databases, tables and partitions with Hive's compatibility rules, granted in request order.

A request (one lock id, several components) waits while any earlier request — acquired or still waiting — holds an
overlapping, incompatible component (Hive's checkLock: no lock jumps the queue). A database lock overlaps every
table in it; a table lock overlaps every partition of it. A transaction's locks are released by its commit or abort;
locks taken without a transaction are released by `unlock` or expire without heartbeats.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NoReturn

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from acid_core import settings
from acid_core.errors import LockTimeoutError, MetastoreError, NoSuchLockError
from acid_core.metastore import schema as s
from acid_core.metastore.engine import NOT_DONE, Database
from acid_core.metastore.txns import TxnStore

LOCK_ACQUIRED, LOCK_WAITING = "a", "w"


class LockType(str, enum.Enum):
    """HIVE_LOCKS.HL_LOCK_TYPE codes (Hive's LockTypeUtil)."""

    SHARED_READ = "r"
    SHARED_WRITE = "w"
    EXCL_WRITE = "x"
    EXCLUSIVE = "e"


LOCK_TIMEOUT_MS = settings.LOCK_TIMEOUT.default_ms  # how long `acquire` waits by default
# (requested, already held or queued earlier) pairs that may coexist; everything else waits (Hive's lock matrix).
_COMPATIBLE = {("r", "r"), ("r", "w"), ("r", "x"), ("w", "r"), ("w", "w"), ("x", "r")}

# A lock request's columns as `lock` fills them, with their PostgreSQL types (for a VALUES list).
_LOCK_ROW = (("HL_LOCK_INT_ID", "bigint"), ("HL_TXNID", "bigint"), ("HL_DB", "varchar"), ("HL_TABLE", "varchar"),
             ("HL_PARTITION", "varchar"), ("HL_LOCK_STATE", "char(1)"), ("HL_LOCK_TYPE", "char(1)"),
             ("HL_LAST_HEARTBEAT", "bigint"), ("HL_USER", "varchar"), ("HL_HOST", "varchar"),
             ("HL_HEARTBEAT_COUNT", "integer"), ("HL_AGENT_INFO", "varchar"))
_LOCK_COLUMNS = ", ".join(f'"{name}"' for name, _ in _LOCK_ROW)


def _request_values(rows: list[dict], *, typed: bool) -> tuple[str, dict[str, object]]:
    """A lock request's rows as a VALUES list of `%(name)s` parameters, and the parameters; `typed` casts each one
    to its PostgreSQL type (a VALUES list is typed by its first row, and a NULL alone has no type)."""
    params: dict[str, object] = {}
    tuples = []
    for index, row in enumerate(rows):
        params.update({f"{name}{index}": row[name] for name, _ in _LOCK_ROW})
        tuples.append("(" + ", ".join(f"CAST(%({name}{index})s AS {kind})" if typed else f"%({name}{index})s"
                                      for name, kind in _LOCK_ROW) + ")")
    return "VALUES " + ", ".join(tuples), params


# Grant every component of request %(id)s unless an earlier request (of another transaction, or of none) holds or
# waits for an overlapping object in an incompatible mode: `overlaps` and `compatible` in SQL, one statement.
_GRANT_TEMPLATE = (
    'UPDATE "HIVE_LOCKS" SET "HL_LOCK_STATE" = \'a\', "HL_ACQUIRED_AT" = %(now)s, "HL_BLOCKEDBY_EXT_ID" = NULL, '
    '"HL_BLOCKEDBY_INT_ID" = NULL WHERE "HL_LOCK_EXT_ID" = %(id)s AND "HL_LOCK_STATE" = \'w\' AND NOT EXISTS ('
    'SELECT 1 FROM "HIVE_LOCKS" m JOIN "HIVE_LOCKS" o ON o."HL_DB" = m."HL_DB" AND o."HL_LOCK_EXT_ID" < %(id)s '
    'WHERE m."HL_LOCK_EXT_ID" = %(id)s AND NOT (m."HL_TXNID" <> 0 AND o."HL_TXNID" = m."HL_TXNID") '
    'AND (o."HL_TABLE" IS NULL OR m."HL_TABLE" IS NULL OR (o."HL_TABLE" = m."HL_TABLE" AND ('
    'o."HL_PARTITION" IS NULL OR m."HL_PARTITION" IS NULL OR o."HL_PARTITION" = m."HL_PARTITION"))) '
    'AND {incompatible}) RETURNING 1')
_GRANT_IF_FREE = _GRANT_TEMPLATE.format(incompatible='(m."HL_LOCK_TYPE", o."HL_LOCK_TYPE") NOT IN (' + ", ".join(
    f"('{a}', '{b}')" for a, b in sorted(_COMPATIBLE)) + ")")
# SQLite compares row values only with a subquery: the two one-letter codes are joined instead
_GRANT_IF_FREE_SQLITE = _GRANT_TEMPLATE.format(incompatible='m."HL_LOCK_TYPE" || o."HL_LOCK_TYPE" NOT IN (' + ", ".join(
    f"'{a}{b}'" for a, b in sorted(_COMPATIBLE)) + ")")
# SQLite: the next request number, taken only for no transaction or an open one (no row: the transaction is not open)
_NUMBER_SQLITE = ('UPDATE "NEXT_LOCK_ID" SET "NL_NEXT" = "NL_NEXT" + 1 WHERE %(txn)s = 0 OR EXISTS (SELECT 1 FROM '
                  '"TXNS" WHERE "TXN_ID" = %(txn)s AND "TXN_STATE" = \'o\') RETURNING "NL_NEXT" - 1')

# Release a request made without a transaction (a transaction's locks go with its commit or abort)
_UNLOCK = 'DELETE FROM "HIVE_LOCKS" WHERE "HL_LOCK_EXT_ID" = %(id)s AND "HL_TXNID" = 0 RETURNING 1'


@dataclass(frozen=True, slots=True)
class LockComponent:
    """One object to lock: a database, a table (partition None) or a partition (`k=v/...` name)."""

    database: str
    table: str | None = None
    partition: str | None = None
    lock_type: LockType = LockType.SHARED_READ

    def __post_init__(self) -> None:
        if self.partition is not None and self.table is None:
            raise MetastoreError(f"lock on partition {self.partition!r} needs a table")
        object.__setattr__(self, "database", self.database.lower())
        object.__setattr__(self, "table", self.table.lower() if self.table else None)
        object.__setattr__(self, "lock_type", LockType(self.lock_type))

    @property
    def shown(self) -> str:
        return ".".join(filter(None, (self.database, self.table))) + (f"/{self.partition}" if self.partition else "")


def overlaps(a: LockComponent, b: LockComponent) -> bool:
    """Whether two components cover some common object."""
    if a.database != b.database:
        return False
    if a.table is None or b.table is None:
        return True
    if a.table != b.table:
        return False
    return a.partition is None or b.partition is None or a.partition == b.partition


def compatible(requested: LockType, existing: LockType) -> bool:
    return (requested.value, existing.value) in _COMPATIBLE


@dataclass(frozen=True, slots=True)
class LockResponse:
    lock_id: int
    state: str

    @property
    def acquired(self) -> bool:
        return self.state == LOCK_ACQUIRED


@dataclass(frozen=True, slots=True)
class LockInfo:
    """One row of SHOW LOCKS."""

    lock_id: int
    internal_id: int
    txn_id: int
    database: str
    table: str | None
    partition: str | None
    state: str
    lock_type: str
    last_heartbeat_ms: int
    acquired_at_ms: int | None
    user: str
    host: str
    agent_info: str | None
    blocked_by_lock_id: int | None
    blocked_by_internal_id: int | None


class LockManager:
    """Lock requests in HIVE_LOCKS."""

    def __init__(self, db: Database, txns: TxnStore) -> None:
        self.db, self.txns = db, txns

    def lock(self, components: Sequence[LockComponent], *, txn_id: int | None = None,
             agent_info: str | None = None) -> LockResponse:
        """Queue a lock request and try to grant it at once.

        A transaction's request whose commit was lost with the connection (a metastore restart) is sent again: if
        the lost one took effect, the transaction holds two requests for the same objects, which never block each
        other (a request ignores its own transaction's) and both go with its commit or abort. A request without a
        transaction is not repeated (a duplicate would block others until it expired without heartbeats): the
        caller gets MetastoreUnavailableError saying the outcome is unknown.
        """
        if not components:
            raise MetastoreError("a lock request needs at least one component")
        now = self.db.clock.now_ms()

        rows = [{"HL_LOCK_INT_ID": index, "HL_TXNID": txn_id or 0, "HL_DB": c.database, "HL_TABLE": c.table,
                 "HL_PARTITION": c.partition, "HL_LOCK_STATE": LOCK_WAITING, "HL_LOCK_TYPE": c.lock_type.value,
                 "HL_LAST_HEARTBEAT": now, "HL_USER": self.db.identity.user, "HL_HOST": self.db.identity.host,
                 "HL_HEARTBEAT_COUNT": 0, "HL_AGENT_INFO": agent_info[:128] if agent_info else None}
                for index, c in enumerate(components, start=1)]

        if self.db.dialect == "postgresql":
            return self._lock_postgres(components, rows, txn_id or 0, now)

        listed, values = _request_values(rows, typed=False)
        inserting = f'INSERT INTO "HIVE_LOCKS" ("HL_LOCK_EXT_ID", {_LOCK_COLUMNS}) SELECT %(id)s, v.* FROM ({listed}) v'

        def request(conn: Connection) -> LockResponse:
            # One write transaction, SQLite's one writer at a time: numbered, inserted and checked before the next
            # request is numbered, so an earlier request is always visible to a later one's check. Plain statements
            # on the driver's cursor keep the database's write lock held as briefly as possible.
            numbered = self.db.driver_rows(conn, _NUMBER_SQLITE, {"txn": txn_id or 0})
            if not numbered:
                raise self.txns._state_error(conn, txn_id or 0, "lock for")
            lock_id = numbered[0][0]
            self.db.driver_rows(conn, inserting, dict(values, id=lock_id))
            if self.db.driver_rows(conn, _GRANT_IF_FREE_SQLITE, {"id": lock_id, "now": now}):
                return LockResponse(lock_id, LOCK_ACQUIRED)
            return self._check(conn, lock_id, serialized=True)  # waiting: record the earliest request that blocks it

        return self.db.run("lock " + ", ".join(c.shown for c in components), request, idempotent=bool(txn_id))

    def _lock_postgres(self, components: Sequence[LockComponent], rows: list[dict], txn_id: int,
                       now: int) -> LockResponse:
        """`lock` on PostgreSQL in two statements: the request is numbered and inserted in one (its NEXT_LOCK_ID
        update holds that row until the statement's transaction commits, one round trip later, so every request with
        a lower number is committed before this one gets its number), then granted in one autocommit update if no
        earlier request blocks it; a request left waiting records what blocks it (`check_lock`). Checks need no
        mutex: a request looks only at lower numbers, all visible by then, and they can only be granted (which
        changes no compatibility) or released."""
        listed, values = _request_values(rows, typed=True)
        values["txn"] = txn_id
        statement = (
            'WITH t AS (UPDATE "TXNS" SET "TXN_STATE" = "TXN_STATE" WHERE "TXN_ID" = %(txn)s AND "TXN_STATE" = \'o\' '
            'RETURNING 1), '
            'n AS (UPDATE "NEXT_LOCK_ID" SET "NL_NEXT" = "NL_NEXT" + 1 WHERE %(txn)s = 0 OR EXISTS (SELECT 1 FROM t) '
            'RETURNING "NL_NEXT" - 1 AS id), '
            f'i AS (INSERT INTO "HIVE_LOCKS" ("HL_LOCK_EXT_ID", {_LOCK_COLUMNS}) SELECT n.id, v.* FROM n, '
            f'({listed}) AS v({_LOCK_COLUMNS})) '
            'SELECT id FROM n')
        operation = "lock " + ", ".join(c.shown for c in components)
        # In a database transaction, not autocommit: a connection lost before the commit rolls the request back and
        # it is sent again (a request lost in autocommit would stay queued, its outcome unknown to the caller). One
        # lost while committing is sent again too when it belongs to a transaction (see `lock`).
        lock_id = self.db.run(operation, lambda conn: next((row[0] for row in self.db.driver_rows(
            conn, statement, values)), None), idempotent=bool(txn_id))
        if lock_id is None:  # the transaction is not open
            def refuse(conn: Connection) -> NoReturn:
                raise self.txns._state_error(conn, txn_id, "lock for")
            self.db.run(operation, refuse, write=False)
        granted = self.db.run(f"check lock {lock_id}", lambda conn: self.db.driver_rows(
            conn, _GRANT_IF_FREE, {"id": lock_id, "now": now}), single_statement=True, idempotent=True)
        if granted:
            return LockResponse(lock_id, LOCK_ACQUIRED)
        return self.check_lock(lock_id)  # waiting: record the earliest request that blocks it

    def check_lock(self, lock_id: int) -> LockResponse:
        """Grant a waiting request if nothing earlier blocks it."""
        return self.db.run(f"check lock {lock_id}", lambda conn: self._check(conn, lock_id), idempotent=True)

    def _check(self, conn: Connection, lock_id: int, *, serialized: bool = False) -> LockResponse:
        hl = s.hive_locks.c
        if self.db.dialect == "postgresql" and not serialized:  # one checker at a time (Hive's CheckLock mutex)
            conn.execute(sa.select(s.next_lock_id.c.NL_NEXT).with_for_update()).all()
        relevant = conn.execute(sa.select(s.hive_locks).where(hl.HL_LOCK_EXT_ID <= lock_id, hl.HL_DB.in_(
            sa.select(hl.HL_DB).where(hl.HL_LOCK_EXT_ID == lock_id))).order_by(hl.HL_LOCK_EXT_ID, hl.HL_LOCK_INT_ID)).all()
        mine = [row for row in relevant if row.HL_LOCK_EXT_ID == lock_id]
        if not mine:
            raise NoSuchLockError(f"lock {lock_id} does not exist (released, or expired for lack of heartbeats)")
        if all(row.HL_LOCK_STATE == LOCK_ACQUIRED for row in mine):
            return LockResponse(lock_id, LOCK_ACQUIRED)
        txn_id = mine[0].HL_TXNID
        earlier = [row for row in relevant if row.HL_LOCK_EXT_ID < lock_id and not (txn_id and row.HL_TXNID == txn_id)]
        for row in mine:
            wanted = _component(row)
            for other in earlier:
                if overlaps(wanted, _component(other)) and not compatible(wanted.lock_type, LockType(other.HL_LOCK_TYPE)):
                    conn.execute(s.hive_locks.update().where(hl.HL_LOCK_EXT_ID == lock_id).values(
                        HL_BLOCKEDBY_EXT_ID=other.HL_LOCK_EXT_ID, HL_BLOCKEDBY_INT_ID=other.HL_LOCK_INT_ID))
                    return LockResponse(lock_id, LOCK_WAITING)
        conn.execute(s.hive_locks.update().where(hl.HL_LOCK_EXT_ID == lock_id).values(
            HL_LOCK_STATE=LOCK_ACQUIRED, HL_ACQUIRED_AT=self.db.clock.now_ms(), HL_BLOCKEDBY_EXT_ID=None,
            HL_BLOCKEDBY_INT_ID=None))
        return LockResponse(lock_id, LOCK_ACQUIRED)

    def acquire(self, components: Sequence[LockComponent], *, txn_id: int | None = None,
                timeout_ms: int = LOCK_TIMEOUT_MS, agent_info: str | None = None) -> int:
        """Lock and wait until granted; on timeout withdraw the request.

        Raises:
            LockTimeoutError: still blocked after `timeout_ms` (the message names the blocking lock).
        """
        response = self.lock(components, txn_id=txn_id, agent_info=agent_info)
        return self.wait_for_lock(response.lock_id, timeout_ms=timeout_ms).lock_id

    def wait_for_lock(self, lock_id: int, *, timeout_ms: int) -> LockResponse:
        """Poll a waiting request (doubling pauses up to 1 s) until granted or `timeout_ms` passes."""
        deadline = time.monotonic() + timeout_ms / 1000
        pause = 0.02
        while True:
            response = self.check_lock(lock_id)
            if response.acquired:
                return response
            if time.monotonic() >= deadline:
                blocker = self._withdraw(lock_id)
                raise LockTimeoutError(f"lock {lock_id} was not granted within {timeout_ms} ms and was withdrawn; "
                                       f"blocked by {blocker}")
            time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
            pause = min(pause * 2, 1.0)

    def _withdraw(self, lock_id: int) -> str:
        def withdraw(conn: Connection) -> str:
            hl = s.hive_locks.c
            row = conn.execute(sa.select(hl.HL_BLOCKEDBY_EXT_ID).where(hl.HL_LOCK_EXT_ID == lock_id)
                               .limit(1)).first()
            conn.execute(s.hive_locks.delete().where(hl.HL_LOCK_EXT_ID == lock_id, hl.HL_LOCK_STATE == LOCK_WAITING))
            if row is None or row[0] is None:
                return "an earlier request"
            holder = conn.execute(sa.select(hl.HL_TXNID, hl.HL_USER, hl.HL_HOST, hl.HL_LOCK_TYPE, hl.HL_LOCK_STATE)
                                  .where(hl.HL_LOCK_EXT_ID == row[0]).limit(1)).first()
            if holder is None:
                return f"lock {row[0]} (since released)"
            state = "held" if holder.HL_LOCK_STATE == LOCK_ACQUIRED else "queued"
            return (f"lock {row[0]} ({LockType(holder.HL_LOCK_TYPE).name.lower()}, {state}, transaction "
                    f"{holder.HL_TXNID or 'none'}, {holder.HL_USER}@{holder.HL_HOST})")

        return self.db.run(f"withdraw lock {lock_id}", withdraw)

    def unlock(self, lock_id: int) -> None:
        """Release a lock taken without a transaction.

        Raises:
            NoSuchLockError: unknown or already released; MetastoreError: the lock belongs to a transaction.
        """
        hl = s.hive_locks.c
        def released(conn: Connection):  # an unlock lost in flight took effect if the lock is gone
            return NOT_DONE if conn.execute(sa.select(hl.HL_LOCK_EXT_ID).where(
                hl.HL_LOCK_EXT_ID == lock_id)).first() else 1

        if self.db.run(f"unlock {lock_id}", lambda conn: self.db.driver_rows(conn, _UNLOCK, {"id": lock_id}),
                       single_statement=True, done_check=released):
            return
        txn = self.db.run(f"unlock {lock_id}", lambda conn: conn.execute(
            sa.select(hl.HL_TXNID).where(hl.HL_LOCK_EXT_ID == lock_id).limit(1)).scalar_one_or_none(), write=False)
        if txn is None:
            raise NoSuchLockError(f"lock {lock_id} does not exist (released, or expired for lack of heartbeats)")
        raise MetastoreError(f"lock {lock_id} belongs to transaction {txn}; it is released when that transaction "
                             "commits or aborts")

    def heartbeat_lock(self, lock_id: int) -> None:
        """Keep a lock taken without a transaction alive."""
        def beat(conn: Connection) -> None:
            hl = s.hive_locks.c
            if not conn.execute(s.hive_locks.update().where(hl.HL_LOCK_EXT_ID == lock_id).values(
                    HL_LAST_HEARTBEAT=self.db.clock.now_ms(),
                    HL_HEARTBEAT_COUNT=sa.func.coalesce(hl.HL_HEARTBEAT_COUNT, 0) + 1)).rowcount:
                raise NoSuchLockError(f"lock {lock_id} does not exist (released, or expired for lack of heartbeats)")

        self.db.run(f"heartbeat lock {lock_id}", beat)

    def show_locks(self, *, database: str | None = None, table: str | None = None,
                   partition: str | None = None) -> list[LockInfo]:
        """SHOW LOCKS, optionally for one database, table or partition."""
        hl = s.hive_locks.c
        query = sa.select(s.hive_locks).order_by(hl.HL_LOCK_EXT_ID, hl.HL_LOCK_INT_ID)
        if database:
            query = query.where(hl.HL_DB == database.lower())
        if table:
            query = query.where(hl.HL_TABLE == table.lower())
        if partition:
            query = query.where(hl.HL_PARTITION == partition)
        rows = self.db.run("show locks", lambda conn: conn.execute(query).all(), write=False)
        return [LockInfo(r.HL_LOCK_EXT_ID, r.HL_LOCK_INT_ID, r.HL_TXNID, r.HL_DB, r.HL_TABLE, r.HL_PARTITION,
                         r.HL_LOCK_STATE, r.HL_LOCK_TYPE, r.HL_LAST_HEARTBEAT, r.HL_ACQUIRED_AT, r.HL_USER, r.HL_HOST,
                         r.HL_AGENT_INFO, r.HL_BLOCKEDBY_EXT_ID, r.HL_BLOCKEDBY_INT_ID) for r in rows]


def _component(row) -> LockComponent:
    return LockComponent(row.HL_DB, row.HL_TABLE, row.HL_PARTITION, LockType(row.HL_LOCK_TYPE))
