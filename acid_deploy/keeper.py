"""Keeping a write transaction alive from a process of its own, while the process that will end it lives.

A Spark data source opens its write transaction in one short-lived process (Spark's planner, on the driver) and ends
it in another after the tasks ran: no process of ours lives through the write to heartbeat it, and a write running
longer than hive.txn.timeout would be aborted by housekeeping. `start_keeper` starts a detached process that
heartbeats the transaction every `interval_s` seconds while the watched process (the Spark driver's JVM) lives:

- when the transaction is no longer open (committed, or aborted: its heartbeat says so), the keeper exits;
- when the watched process is gone (the driver died: nobody can commit the write any more), the keeper aborts the
  transaction (its staging record stays, for housekeeping to remove what it wrote) and exits;
- after `max_s` seconds (a day by default) it exits and leaves the transaction to time out;
- while the metastore cannot be reached it keeps trying at each interval (the metastore's own retries apply).

A streaming query's micro-batches each open a transaction; one keeper per query and table on the driver's machine
(`ensure_stream_keeper`, its pid kept in a file of the temporary directory) heartbeats whichever is pending
(STREAM_COMMITS), aborts it if the driver dies, and exits after `idle_s` (10 minutes) without one; the next
micro-batch then starts another.

The keeper's orders, the metastore URL among them, travel on its standard input, never on its command line or in
its environment (other users of the machine can read those).

Cost: one heartbeat (one UPDATE) per interval and a check of the watched process per second, in one small Python
process per open write; it exits at most `interval_s` seconds after the write ends.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass

import psutil

from acid_core.errors import AcidError, NoSuchTxnError, TxnAbortedError, UsageError

KEEPER_MAX_S = 86_400.0
STREAM_IDLE_S = 600.0  # a stream's keeper exits after this long without a pending micro-batch
_START_TIMEOUT_S = 30.0


@dataclass(frozen=True, slots=True)
class KeeperOrders:
    """What one keeper does: heartbeat `txn_id` in the metastore at `url` while process `watch_pid` (started at
    `watch_started`, psutil's create_time, so that a reused pid does not count) lives."""

    url: str
    txn_id: int
    watch_pid: int
    watch_started: float
    interval_s: float
    max_s: float = KEEPER_MAX_S
    stream: tuple[str, str, str] | None = None  # (query id, database, table): heartbeat its pending transactions
    idle_s: float = STREAM_IDLE_S


def driver_process() -> psutil.Process:
    """The process a keeper started from here should watch: the nearest ancestor that is a JVM (a Spark planner
    worker descends from the driver's JVM, through pyspark's daemon), else this process's parent."""
    me = psutil.Process()
    for ancestor in me.parents():
        try:
            if ancestor.name() == "java":
                return ancestor
        except psutil.Error:
            continue
    parent = me.parent()
    return parent if parent is not None else me


def start_keeper(url: str, txn_id: int, *, watch: psutil.Process, interval_s: float,
                 max_s: float = KEEPER_MAX_S, stream: tuple[str, str, str] | None = None,
                 idle_s: float = STREAM_IDLE_S) -> int:
    """Start a keeper of transaction `txn_id` (or of each pending micro-batch of `stream`) watching `watch`;
    returns its pid.

    Raises:
        UsageError: a bad interval.
        AcidError: the keeper did not start.
    """
    if not interval_s > 0:
        raise UsageError(f"transaction keeper: the heartbeat interval must be positive, got {interval_s}")
    orders = KeeperOrders(url, txn_id, watch.pid, watch.create_time(), float(interval_s), float(max_s), stream,
                          float(idle_s))
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(path for path in sys.path if path)}
    try:
        started = subprocess.run([sys.executable, "-m", "acid_deploy.keeper"], input=json.dumps(asdict(orders)),
                                 capture_output=True, text=True, timeout=_START_TIMEOUT_S, env=environment,
                                 start_new_session=True, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise AcidError(f"transaction {txn_id}: the keeper that heartbeats it did not start: {exc}") from None
    if started.returncode != 0 or not started.stdout.strip().isdigit():
        last = (started.stderr.strip().splitlines() or ["no message"])[-1]
        raise AcidError(f"transaction {txn_id}: the keeper that heartbeats it did not start: {last}")
    return int(started.stdout.strip())


def ensure_stream_keeper(url: str, stream: tuple[str, str, str], *, watch: psutil.Process,
                         interval_s: float, idle_s: float = STREAM_IDLE_S) -> int:
    """The keeper of a streaming query's micro-batches on this machine, started unless one lives (its pid is kept
    in a file of the temporary directory named for the query and table, which the keeper removes when it stops);
    returns its pid."""
    record = stream_record(stream)
    try:
        known = _read_record(record)
        if psutil.Process(known["pid"]).create_time() == known["started"]:
            return int(known["pid"])
    except (OSError, ValueError, KeyError, TypeError, psutil.Error):
        pass  # none yet, or it exited
    pid = start_keeper(url, 0, watch=watch, interval_s=interval_s, stream=stream, idle_s=idle_s)
    try:
        started = psutil.Process(pid).create_time()
    except psutil.Error:
        return pid  # it exited at once: the next micro-batch starts another
    temporary = f"{record}.{os.getpid()}"
    with open(temporary, "w", encoding="utf-8") as handle:
        json.dump({"pid": pid, "started": started}, handle)
    os.replace(temporary, record)
    return pid


def stream_record(stream: tuple[str, str, str]) -> str:
    """The file naming a streaming query's keeper: in the temporary directory, named for the query and table."""
    name = hashlib.sha256("\x00".join(stream).encode()).hexdigest()[:24]
    return os.path.join(tempfile.gettempdir(), f"hiveacid-stream-keeper-{name}.json")


def _read_record(record: str) -> dict:
    """A keeper record's fields ({} if it holds no object).

    Raises:
        OSError: no record.
        ValueError: not JSON.
    """
    with open(record, encoding="utf-8") as handle:
        known = json.load(handle)
    return known if isinstance(known, dict) else {}


def _forget_record(stream: tuple[str, str, str]) -> None:
    """Remove the query's keeper record if it names this process (a keeper started after it keeps its own)."""
    record = stream_record(stream)
    try:
        if _read_record(record).get("pid") == os.getpid():
            os.unlink(record)
    except (OSError, ValueError):
        pass  # none, or another keeper's


def _alive(orders: KeeperOrders) -> bool:
    try:
        process = psutil.Process(orders.watch_pid)
        return process.create_time() == orders.watch_started and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def keep(orders: KeeperOrders) -> str:
    """Heartbeat as the module docstring says, in this process; returns why it stopped."""
    from acid_core.metastore import Metastore

    metastore = Metastore(orders.url, pool_size=1)
    try:
        if orders.stream is not None:
            try:
                return _keep_stream(orders, metastore)
            finally:
                _forget_record(orders.stream)
        deadline = time.monotonic() + orders.max_s
        next_beat = time.monotonic()
        while time.monotonic() < deadline:
            if not _alive(orders):
                try:
                    metastore.txns.abort(orders.txn_id)
                except AcidError:
                    pass  # it ended meanwhile, or the metastore is away: it times out
                return "the watched process is gone: transaction aborted"
            if time.monotonic() >= next_beat:
                try:
                    metastore.txns.heartbeat(orders.txn_id)
                except (NoSuchTxnError, TxnAbortedError):
                    return "the transaction ended"
                except AcidError:
                    pass  # the metastore is away: try again at the next interval
                next_beat = time.monotonic() + orders.interval_s
            time.sleep(min(1.0, orders.interval_s))
        return "its time is up"
    finally:
        metastore.close()


def _keep_stream(orders: KeeperOrders, metastore) -> str:
    """Heartbeat the query's pending micro-batch transaction at each interval while the watched process lives;
    abort it when that process is gone (the batch cannot commit any more); stop after `idle_s` without one."""
    assert orders.stream is not None
    app_id, database, table = orders.stream
    deadline = time.monotonic() + orders.max_s
    seen = next_beat = time.monotonic()
    pending: int | None = None
    while time.monotonic() < deadline:
        if not _alive(orders):
            if pending is not None:
                try:
                    metastore.txns.abort(pending)
                except AcidError:
                    pass  # it ended meanwhile, or the metastore is away: it times out
            return "the watched process is gone"
        if time.monotonic() >= next_beat:
            try:
                pending = metastore.streams.state(app_id, database, table).pending_txn_id
                if pending is not None:
                    seen = time.monotonic()
                    metastore.txns.heartbeat(pending)
            except (NoSuchTxnError, TxnAbortedError):
                pending = None  # it ended between the two calls
            except AcidError:
                pass  # the metastore is away: try again at the next interval
            if pending is None and time.monotonic() - seen > orders.idle_s:
                return "no micro-batch for a while"
            next_beat = time.monotonic() + orders.interval_s
        time.sleep(min(1.0, orders.interval_s))
    return "its time is up"


def main() -> None:
    """`python -m acid_deploy.keeper`, orders as JSON on standard input: forks, prints the keeper's pid and
    exits at once (the keeper is nobody's child, so it leaves no zombie behind), the keeper keeps."""
    given = json.loads(sys.stdin.read())
    if given.get("stream") is not None:
        given["stream"] = tuple(given["stream"])
    orders = KeeperOrders(**given)
    pid = os.fork()
    if pid:
        print(pid, flush=True)
        os._exit(0)
    devnull = os.open(os.devnull, os.O_RDWR)
    for stream in (0, 1, 2):
        os.dup2(devnull, stream)
    keep(orders)
    os._exit(0)


if __name__ == "__main__":
    main()
