"""Connecting to the metastore database (PostgreSQL or SQLite), creating its schema, and running transactions.

Every operation runs in one database transaction through `Database.run`, which retries the whole function on
serialization failures, deadlocks and SQLite's "database is locked", and maps every other database error to an
AcidError naming the operation. SQLite write transactions start with BEGIN IMMEDIATE (one writer at a time, readers
keep going under WAL); PostgreSQL reads that need one consistent snapshot run at REPEATABLE READ.

Over 500 lines because the retry loop, the outage wait, the error mapping and the per-thread connections it keeps
decide together when a statement ran, may run again or has failed; each needs the others' state (the connection to
invalidate, the attempt count, whether a commit may have taken effect), so they stay in one module.
"""

from __future__ import annotations

import functools
import getpass
import logging
import os
import random
import re
import socket
import threading
import time
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Final, TypeVar

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError, SQLAlchemyError

from acid_core import settings
from acid_core.errors import DuplicateKeyError, MetastoreError, MetastoreUnavailableError
from acid_core.metastore import schema

T = TypeVar("T")
SCHEMA_FILES = resources.files("acid_core.metastore") / "sql"  # package data; sql/ at the top links to it
# the registry names both environment variables
assert settings.METASTORE_URL.env_var is not None and settings.METASTORE_PASSWORD.env_var is not None
ENV_URL: str = settings.METASTORE_URL.env_var
# the password of ACID_METASTORE_URL's user, kept out of the URL
ENV_PASSWORD: str = settings.METASTORE_PASSWORD.env_var
_RETRYABLE_PG_CODES = {"40001", "40P01", "55P03"}
_MAX_ATTEMPTS = 20
# PostgreSQL going away or coming back: admin_shutdown, crash_shutdown, cannot_connect_now (starting up, shutting
# down), and the connection_exception class
_OUTAGE_PG_CODES = {"57P01", "57P02", "57P03", "08000", "08001", "08003", "08004", "08006"}


class _NotDone:
    """The type of NOT_DONE (one instance), so that a `done_check`'s answer can be typed."""


NOT_DONE: Final = _NotDone()  # a `done_check` found that the lost attempt did not take effect
DEFAULT_OUTAGE_SECONDS = 60.0  # how long one operation waits out a metastore that went away (well under hive.txn.timeout)
_BACKOFF_FIRST_S, _BACKOFF_MAX_S = 0.1, 2.0
_log = logging.getLogger("acid_core.metastore")
_outages = {"failures": 0, "recoveries": 0, "gave_up": 0}
_outages_lock = threading.Lock()


def outage_counts() -> dict[str, int]:
    """This process's metastore outage figures so far: failed attempts retried, operations that recovered, and
    operations that gave up (the `acid.metastore_retries` metric and its companions)."""
    with _outages_lock:
        return dict(_outages)


def _count(name: str) -> None:
    with _outages_lock:
        _outages[name] += 1


class _Outage:
    """One operation waiting out a metastore outage: bounded exponential backoff within a time budget."""

    def __init__(self, operation: str, budget_s: float) -> None:
        self.operation, self.budget_s = operation, budget_s
        self.started = time.monotonic()
        self.attempts = 0

    def wait(self, reason: str, *, committing: bool) -> bool:
        """Sleep before the next attempt; False when the budget is spent (the caller raises)."""
        self.attempts += 1
        elapsed = time.monotonic() - self.started
        delay = min(_BACKOFF_MAX_S, _BACKOFF_FIRST_S * 2 ** (self.attempts - 1)) * random.uniform(0.8, 1.2)
        if elapsed + delay > self.budget_s:
            _count("gave_up")
            _log.error("metastore unavailable: %s gave up after %d attempts in %.1f s: %s", self.operation,
                       self.attempts, elapsed, reason)
            return False
        _count("failures")
        _log.warning("metastore unavailable: %s failed%s (attempt %d, %.1f s so far): %s; retrying in %.1f s",
                     self.operation, " while committing" if committing else "", self.attempts, elapsed, reason, delay)
        time.sleep(delay)
        return True

    def recovered(self) -> None:
        _count("recoveries")
        _log.warning("metastore available again: %s succeeded after %d retries in %.1f s", self.operation,
                     self.attempts, time.monotonic() - self.started)

    def said(self) -> str:
        return f" (retried {self.attempts} times over {time.monotonic() - self.started:.1f} s)" if self.attempts else ""


def _reason(exc: DBAPIError) -> str:
    return str(exc.orig).strip().splitlines()[0] if exc.orig else str(exc)


def _is_outage(exc: DBAPIError) -> bool:
    """The server is going away, restarting or refusing connections (not a bad password or database name)."""
    if getattr(exc.orig, "pgcode", None) in _OUTAGE_PG_CODES:
        return True
    message = str(exc.orig).lower()
    return any(s in message for s in ("connection refused", "server closed the connection", "terminating connection",
                                      "the database system is starting up", "the database system is shutting down",
                                      "the database system is in recovery mode", "connection reset",
                                      "connection already closed"))


class Clock:
    """Wall-clock milliseconds; tests inject a `ManualClock` to make timeouts deterministic."""

    def now_ms(self) -> int:
        return int(time.time() * 1000)


class ManualClock(Clock):
    """A clock that moves only when told to."""

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._now = start_ms

    def now_ms(self) -> int:
        return self._now

    def advance(self, milliseconds: int) -> None:
        self._now += milliseconds


@dataclass(frozen=True, slots=True)
class Identity:
    """Who is acting: recorded in TXNS, HIVE_LOCKS and the compaction queue."""

    user: str
    host: str

    @classmethod
    def current(cls) -> Identity:
        try:
            user = getpass.getuser()
        except (KeyError, OSError):
            user = "unknown"
        return cls(user=user[:128], host=socket.gethostname()[:128])


def default_url(acid_home: str | None = None) -> str:
    """`ACID_METASTORE_URL`, else a SQLite file under the warehouse of `ACID_HOME` (default `.acid-home`).

    A URL without a password gets the one of `ACID_METASTORE_PASSWORD`, if set (so the environment keeps the password
    apart from the URL, as an Airflow connection keeps it in its password field); one that names its own password
    keeps it, as libpq uses PGPASSWORD only for a connection that names none.

    Raises:
        MetastoreError: ACID_METASTORE_PASSWORD is set and ACID_METASTORE_URL cannot be parsed.
    """
    if os.environ.get(ENV_URL):
        url, password = os.environ[ENV_URL], os.environ.get(ENV_PASSWORD)
        if not password:
            return url
        try:
            parsed = sa.engine.make_url(url)
        except (sa.exc.ArgumentError, ValueError) as exc:
            raise MetastoreError(f"{ENV_URL} {redact(url)} cannot be parsed: {exc}") from None
        if parsed.password is not None:
            return url
        return parsed.set(password=password).render_as_string(hide_password=False)
    home = Path(acid_home or os.environ.get("ACID_HOME", ".acid-home")).resolve()
    return f"sqlite:///{home / 'warehouse' / 'metastore.db'}"


_USER_INFO = re.compile(r"(://[^/:@\s]*):[^@\s]*@")


def _mask_password(text: str) -> str:
    """`text` with the password of any `scheme://user:password@` in it replaced by `***` (for URLs SQLAlchemy
    cannot parse, which `redact` cannot render)."""
    return _USER_INFO.sub(r"\1:***@", text)


def redact(url: str) -> str:
    """A URL safe to print: the password hidden."""
    try:
        return sa.engine.make_url(url).render_as_string(hide_password=True)
    except (sa.exc.ArgumentError, ValueError):
        return "<unparsable URL>"


def split_credentials(url: str) -> tuple[str, str | None, str | None]:
    """(the URL without its user name and password, the user name, the password): what an Airflow connection keeps in
    its host, login and password fields (the password field is masked; the host is shown as it is).

    Raises:
        MetastoreError: the URL cannot be parsed.
    """
    try:
        parsed = sa.engine.make_url(url)
    except (sa.exc.ArgumentError, ValueError) as exc:
        raise MetastoreError(f"metastore URL {redact(url)} cannot be parsed: {exc}") from None
    bare = sa.engine.URL.create(parsed.drivername, host=parsed.host, port=parsed.port, database=parsed.database,
                                query=parsed.query).render_as_string(hide_password=False)
    return bare, parsed.username, (str(parsed.password) if parsed.password is not None else None)


def driver_environment(url: str) -> dict[str, str]:
    """ACID_METASTORE_URL (with the user name, without the password) and ACID_METASTORE_PASSWORD (empty for none, so
    that one inherited from the caller's environment does not apply), the environment that
    hands a metastore to another process (a Spark driver): `default_url` puts them together again there, and the
    password never shows in a URL or on a command line.

    Raises:
        MetastoreError: the URL cannot be parsed.
    """
    bare, login, password = split_credentials(url)
    return {ENV_URL: with_credentials(bare, login, None), ENV_PASSWORD: password or ""}  # "": none inherited


def with_credentials(url: str, login: str | None, password: str | None) -> str:
    """`url` (which holds no password) with the user name and password of a connection's own fields.

    Raises:
        MetastoreError: the URL cannot be parsed, or it holds a password itself (where nothing masks it).
    """
    try:
        parsed = sa.engine.make_url(url)
    except (sa.exc.ArgumentError, ValueError) as exc:
        raise MetastoreError(f"metastore URL {redact(url)} cannot be parsed: {exc}") from None
    if parsed.password is not None:
        raise MetastoreError(f"metastore URL {redact(url)} holds a password: keep the URL without it and put the "
                             "user name and password in the connection's login and password fields")
    if login:
        parsed = parsed.set(username=login)
    if password:
        parsed = parsed.set(password=password)
    return parsed.render_as_string(hide_password=False)


def _is_retryable(exc: DBAPIError) -> bool:
    code = getattr(exc.orig, "pgcode", None)
    if code in _RETRYABLE_PG_CODES:
        return True
    message = str(exc.orig).lower()
    return "database is locked" in message or "database table is locked" in message


class Database:
    """One metastore database: an engine plus the transaction runner."""

    def __init__(self, url: str, *, clock: Clock | None = None, identity: Identity | None = None,
                 pool_size: int = 5, outage_seconds: float = DEFAULT_OUTAGE_SECONDS) -> None:
        try:
            parsed = sa.engine.make_url(url)
        except (sa.exc.ArgumentError, ValueError) as exc:
            # the URL and SQLAlchemy's message (which may quote it) with any password masked: chained to nothing
            raise MetastoreError(f"metastore URL {_mask_password(url)!r} is not a SQLAlchemy URL: "
                                 f"{_mask_password(str(exc))}") from None
        self.dialect = parsed.get_backend_name()
        if self.dialect not in ("postgresql", "sqlite"):
            raise MetastoreError(f"metastore URL {redact(url)}: only postgresql and sqlite are supported")
        if parsed.drivername == "postgresql":  # SQLAlchemy 2.1 would pick psycopg 3; psycopg2 is what ships
            parsed = parsed.set(drivername="postgresql+psycopg2")
            url = parsed.render_as_string(hide_password=False)
        self.url = url
        self.clock = clock or Clock()
        self.identity = identity or Identity.current()
        self.outage_seconds = outage_seconds
        self._reached = False  # an unreachable URL never reached fails at once: a typo is not an outage
        self._kept = threading.local()  # each thread's autocommit connection (PostgreSQL), see _kept_connection
        self._kept_lock = threading.Lock()
        self._all_kept: list[Connection] = []
        # called with (statement, parameters) by driver_rows: the statement-count test and the bench's pgbench script
        self.statement_observers: list[Callable[[str, dict], None]] = []
        try:
            self._create_engines(parsed, pool_size)
        except OSError as exc:
            raise MetastoreUnavailableError(f"metastore {redact(url)}: cannot create the database file's directory: "
                                            f"{exc}") from exc
        except (ValueError, TypeError, ImportError, SQLAlchemyError) as exc:
            raise MetastoreError(f"metastore URL {redact(url)} cannot be used: {exc}") from exc

    def _create_engines(self, parsed, pool_size: int) -> None:
        url = self.url
        if self.dialect == "sqlite":
            if parsed.database and parsed.database != ":memory:":
                Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
            self.engine = sa.create_engine(url, connect_args={"timeout": 60, "isolation_level": None,
                                                              "check_same_thread": False},
                                           poolclass=sa.pool.QueuePool, pool_size=pool_size, max_overflow=pool_size)
            event.listen(self.engine, "connect", _sqlite_on_connect)
            event.listen(self.engine, "begin", _sqlite_on_begin)
            self._driver_error = self.engine.dialect.loaded_dbapi.Error
        else:
            # No pre-ping (it costs a round trip per operation): a connection lost since its last use fails that one
            # operation with MetastoreUnavailableError and is discarded; reads are retried once on a fresh one.
            # JIT off for the session (unless the URL sets options): the metastore's queries are short index lookups,
            # and stale statistics after a mass delete (housekeeping) would make PostgreSQL spend 30+ ms compiling
            # each one.
            connect_args = {} if "options" in parsed.query else {"options": "-c jit=off"}
            self.engine = sa.create_engine(url, pool_size=pool_size, max_overflow=pool_size, connect_args=connect_args)
            # Single-statement hot paths (open, commit of a transaction that wrote nothing, heartbeats) run in
            # autocommit on a connection each thread keeps (no pool checkout and return per call; switching isolation
            # per checkout would cost more): outside any pool, so threads never wait for one another's.
            self._autocommit_engine = sa.create_engine(url, poolclass=sa.pool.NullPool, isolation_level="AUTOCOMMIT",
                                                       connect_args=connect_args)
            self._driver_error = self._autocommit_engine.dialect.loaded_dbapi.Error

    def driver_rows(self, connection: Connection, statement: str, params: dict) -> list[tuple]:
        """The rows of one plain SQL statement (`%(name)s` parameters, bound by the driver; `:name` for SQLite's) run
        on the driver's own cursor: the hot paths' statements skip SQLAlchemy's execution layer (about a
        third of a client's time per open and commit; on SQLite, time spent holding the database's one write lock).
        Errors are SQLAlchemy's DBAPIError, as `run` expects; `statement_observers` see each one."""
        if self.dialect == "sqlite":
            statement = _sqlite_parameters(statement)
        for observe in self.statement_observers:
            observe(statement, params)
        driver = connection.connection.driver_connection
        assert driver is not None, "a connection in use has its driver's connection"
        try:
            with closing(driver.cursor()) as cursor:
                cursor.execute(statement, params)
                return cursor.fetchall() if cursor.description else []
        except self._driver_error as exc:
            raise DBAPIError.instance(statement, params, exc, self._driver_error) from exc

    def _kept_connection(self) -> Connection:
        """This thread's autocommit connection (opened on first use, and again in a forked child or after a loss)."""
        kept = getattr(self._kept, "connection", None)
        if kept is not None and kept[0] == os.getpid() and not kept[1].closed and not kept[1].invalidated:
            return kept[1]
        connection = self._autocommit_engine.connect()
        self._kept.connection = (os.getpid(), connection)
        with self._kept_lock:
            self._all_kept.append(connection)
        return connection

    def _drop_kept(self) -> None:
        kept = getattr(self._kept, "connection", None)
        self._kept.connection = None
        if kept is not None and kept[0] == os.getpid():
            with self._kept_lock:
                if kept[1] in self._all_kept:
                    self._all_kept.remove(kept[1])
            try:
                kept[1].invalidate()
                kept[1].close()
            except SQLAlchemyError:
                pass

    def dispose(self) -> None:
        self.engine.dispose()
        if self.dialect == "postgresql":
            with self._kept_lock:
                kept, self._all_kept = self._all_kept, []
            for connection in kept:
                try:
                    connection.close()
                except SQLAlchemyError:
                    pass
            self._kept = threading.local()
            self._autocommit_engine.dispose()

    def run(self, operation: str, function: Callable[[Connection], T], *, write: bool = True,
            snapshot: bool = False, single_statement: bool = False, idempotent: bool = False,
            done_check: Callable[[Connection], T | _NotDone] | None = None) -> T:
        """Run `function` in one database transaction, retrying it whole on transient conflicts and outages.

        `single_statement` functions (one SQL statement, atomic by itself) run in autocommit on PostgreSQL, which
        saves the BEGIN and COMMIT round trips on hot paths.

        An outage of a metastore this handle has reached before (the server restarting, connections reset or refused)
        is waited out for up to `outage_seconds`, with bounded exponential backoff, each failure and the recovery
        logged (logger `acid_core.metastore`) and counted (`outage_counts`). A failure before the commit was sent
        rolled the whole transaction back, so it is retried from the start; one while committing (or in an autocommit
        statement) leaves the outcome unknown, so only reads, `idempotent` operations and those with a `done_check`
        are retried then, and any other raises MetastoreUnavailableError saying so. `done_check(connection)` runs
        first in the next attempt: it returns what the operation returns if the lost attempt took effect, or
        NOT_DONE.

        Raises:
            MetastoreUnavailableError: the database cannot be reached or the connection was lost, past the retries.
            MetastoreError: any other database error (the transaction was rolled back).
        """
        outage: _Outage | None = None
        contention = 0
        fresh_retry_done = False
        check_first = False  # the last attempt was lost while committing: ask `done_check` first
        while True:
            autocommit = single_statement and self.dialect == "postgresql"
            kept = autocommit and not check_first
            try:
                connection = self._kept_connection() if kept else self.engine.connect()
            except DBAPIError as exc:
                if _is_retryable(exc) and contention + 1 < _MAX_ATTEMPTS:
                    contention += 1
                    continue
                reason = _reason(exc)
                if self._reached and _is_outage(exc):
                    outage = outage or _Outage(operation, self.outage_seconds)
                    if outage.wait(reason, committing=False):
                        continue
                raise MetastoreUnavailableError(f"{operation}: cannot reach the metastore {redact(self.url)}: "
                                                f"{reason}" + (outage.said() if outage else "")) from exc
            self._reached = True
            committing = autocommit
            try:
                if kept:
                    result = function(connection)
                    if outage:
                        outage.recovered()
                    return result
                with connection:
                    if self.dialect == "sqlite":
                        connection.info["acid_begin"] = "IMMEDIATE" if write else "DEFERRED"
                    elif snapshot:
                        connection = connection.execution_options(isolation_level="REPEATABLE READ")
                    transaction = connection.begin()
                    try:
                        checked: T | _NotDone = NOT_DONE
                        if check_first:
                            assert done_check is not None, "check_first is set only for a run with a done_check"
                            checked = done_check(connection)
                        check_first = False
                        result = function(connection) if isinstance(checked, _NotDone) else checked
                    except BaseException:
                        transaction.rollback()
                        raise
                    committing = True
                    transaction.commit()
                    if outage:
                        outage.recovered()
                    return result
            except DBAPIError as exc:
                lost = exc.connection_invalidated or _is_disconnect(exc) or _is_outage(exc)
                if kept:
                    self._drop_kept()  # whatever failed, the next attempt starts on a fresh connection
                if lost:
                    reason = _reason(exc)
                    if not write and not fresh_retry_done:  # most often a pooled connection the server ended
                        fresh_retry_done = True
                        continue
                    if not committing or not write or idempotent or done_check is not None:
                        check_first = committing and write and not idempotent
                        outage = outage or _Outage(operation, self.outage_seconds)
                        if outage.wait(reason, committing=committing):
                            continue
                        raise MetastoreUnavailableError(
                            f"{operation}: lost the connection to the metastore {redact(self.url)}: {reason}; "
                            "the database rolled back whatever was not committed" + outage.said()) from exc
                    raise MetastoreUnavailableError(
                        f"{operation}: lost the connection to the metastore {redact(self.url)} while committing: "
                        f"{reason}; the database rolled back whatever was not committed, and whether this commit "
                        "was is unknown: check before repeating it") from exc
                if _is_retryable(exc) and contention + 1 < _MAX_ATTEMPTS:
                    time.sleep(min(0.2, 0.002 * 2 ** contention) * random.uniform(0.5, 1.5))
                    contention += 1
                    continue
                if isinstance(exc, IntegrityError) and _is_unique_violation(exc):
                    raise DuplicateKeyError(f"{operation}: a concurrent writer created the same row: {exc.orig}") from exc
                raise MetastoreError(f"{operation}: metastore database error: {exc.orig}") from exc
            except SQLAlchemyError as exc:
                if kept:
                    self._drop_kept()
                raise MetastoreError(f"{operation}: metastore error: {exc}") from exc

    def init_schema(self) -> int:
        """Create or upgrade the schema from `sql/<dialect>/schema.sql` (package data of acid_core.metastore);
        idempotent. Returns the schema version."""
        path = SCHEMA_FILES / ("postgres" if self.dialect == "postgresql" else "sqlite") / "schema.sql"
        statements = [s.strip() for s in _strip_comments(path.read_text(encoding="utf-8")).split(";") if s.strip()]

        def create(connection: Connection) -> int:
            if self.dialect == "postgresql":  # one initialiser at a time across processes
                connection.exec_driver_sql("SELECT pg_advisory_xact_lock(74321)")
            hive = sorted(name for name in sa.inspect(connection).get_table_names()
                          if name.upper() in HIVE_METASTORE_TABLES)
            if hive:
                raise MetastoreError(
                    f"refusing to initialise {redact(self.url)}: it holds a Hive metastore's own schema (tables "
                    f"{', '.join(hive)}); this ACID metastore is a separate one: give it a database of its own")
            for statement in statements:
                connection.exec_driver_sql(statement)
            return connection.execute(sa.select(sa.func.max(schema.acid_schema_version.c.VERSION))).scalar_one()

        return self.run("metastore init", create)


# Tables only Hive's own metastore schema has (ours shares names like DBS and TBLS, never these).
HIVE_METASTORE_TABLES = frozenset({"VERSION", "SDS", "SERDES", "CDS", "SERDE_PARAMS", "SD_PARAMS", "PARTITION_KEY_VALS",
                                   "TAB_COL_STATS"})


def _is_unique_violation(exc: IntegrityError) -> bool:
    return getattr(exc.orig, "pgcode", None) == "23505" or "unique constraint failed" in str(exc.orig).lower()


def _strip_comments(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("--"))


def _is_disconnect(exc: DBAPIError) -> bool:
    if not isinstance(exc, OperationalError):
        return False
    message = str(exc.orig).lower()
    return any(s in message for s in ("could not connect", "server closed the connection", "connection refused",
                                       "terminating connection", "connection already closed", "unable to open database"))


@functools.lru_cache(maxsize=256)
def _sqlite_parameters(statement: str) -> str:
    """A plain statement's `%(name)s` parameters as SQLite's `:name` (the statements are constants and few)."""
    return re.sub(r"%\((\w+)\)s", r":\1", statement)


def _sqlite_on_connect(dbapi_connection, _record) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=60000")
    cursor.close()


def _sqlite_on_begin(connection: Connection) -> None:
    connection.exec_driver_sql(f"BEGIN {connection.info.get('acid_begin', 'IMMEDIATE')}")
