"""Where a metastore call's time goes, one client, PostgreSQL and SQLite side by side.

For each hot operation (open, commit of a transaction that wrote nothing, heartbeat, snapshot, abort, lock, unlock):
wall time and the client's own CPU per call, statements sent (on the driver's cursor and through SQLAlchemy), and on
SQLite how long the call held the database's one write lock (BEGIN IMMEDIATE to COMMIT: every other writer waits
that long; reads take none).
`--profile OP` also prints the client's cProfile of that operation (the 15 costliest functions by own time).

PostgreSQL is a server started for the run (tests/support/pg_server.py, as bench_metastore.py); SQLite a temp file.
Run: `.venv/bin/python bench/profile_metastore.py [--calls 1000] [--profile lock]`.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from sqlalchemy import event  # noqa: E402

from acid_core.metastore import Metastore  # noqa: E402
from acid_core.metastore.locks import LockComponent, LockType  # noqa: E402

TABLE = [LockComponent("default", "t", None, LockType.SHARED_READ)]


def _operations(ms: Metastore) -> dict:
    """Each operation as (before, call, after): `call(argument)` is timed, `before` makes its argument and
    `after(argument, result)` undoes what it left (untimed), so that every call finds the metastore as the first did (one open transaction at most)."""
    def nothing(*_):
        return None

    def commit_argument(txn, _result):
        ms.txns.commit(txn)

    return {
        "open": (nothing, lambda _: ms.txns.open_txn(), lambda _, txn: ms.txns.commit(txn)),
        "commit without writes": (lambda _: ms.txns.open_txn(), ms.txns.commit, nothing),
        "heartbeat": (lambda _: ms.txns.open_txn(), ms.txns.heartbeat, commit_argument),
        "snapshot of a named table": (lambda _: ms.txns.open_txn(tables=["default.t"]),
                                      lambda txn: ms.txns.snapshot(["default.t"], current_txn=txn), commit_argument),
        "abort": (lambda _: ms.txns.open_txn(), ms.txns.abort, nothing),
        "lock": (nothing, lambda _: ms.locks.lock(TABLE).lock_id, lambda _, lock: ms.locks.unlock(lock)),
        "unlock": (lambda _: ms.locks.lock(TABLE).lock_id, ms.locks.unlock, nothing),
    }


def measure(ms: Metastore, calls: int, profile: str | None) -> None:
    statements = {"plain": 0, "compiled": 0}
    held: list[float] = []
    began = [0.0]
    counting = [False]

    def count(kind: str) -> None:
        if counting[0]:
            statements[kind] += 1

    ms.db.statement_observers.append(lambda *_: count("plain"))
    event.listen(ms.db.engine, "before_cursor_execute", lambda *_: count("compiled"))
    if ms.db.dialect == "sqlite":
        def begin(connection) -> None:  # a read (BEGIN DEFERRED, under WAL) takes no write lock
            began[0] = time.perf_counter() if connection.info.get("acid_begin") == "IMMEDIATE" else 0.0

        def commit(_connection) -> None:
            if counting[0] and began[0]:
                held.append(time.perf_counter() - began[0])

        event.listen(ms.db.engine, "begin", begin)
        event.listen(ms.db.engine, "commit", commit)
    ms.catalog.create_table("default", "t", [("id", "int")], params={"transactional": "true"})
    for _ in range(100):  # connections made, statements cached
        ms.locks.unlock(ms.locks.lock(TABLE).lock_id)
        ms.txns.commit(ms.txns.open_txn())
    for name, (before, call, after) in _operations(ms).items():
        statements.update(plain=0, compiled=0)
        held.clear()
        profiler = cProfile.Profile() if name == profile else None
        wall = cpu = 0.0
        for _ in range(calls):
            argument = before(None)
            counting[0] = True
            if profiler:
                profiler.enable()
            started, started_cpu = time.perf_counter(), time.process_time()
            result = call(argument)
            wall += time.perf_counter() - started
            cpu += time.process_time() - started_cpu
            if profiler:
                profiler.disable()
            counting[0] = False
            after(argument, result)
        lock = f", write lock held {statistics.median(held) * 1e6:4.0f} us (median)" if held else ""
        print(f"  {name:26s} {wall / calls * 1e6:6.0f} us wall, {cpu / calls * 1e6:5.0f} us client CPU, statements "
              f"{statements['plain'] / calls:3.1f} plain + {statements['compiled'] / calls:3.1f} compiled{lock}")
        if profiler:
            pstats.Stats(profiler, stream=sys.stdout).sort_stats("tottime").print_stats(15)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--profile", help="an operation whose client profile to print, e.g. lock")
    args = parser.parse_args()
    from support.pg_server import PostgresServer

    with PostgresServer.start_new() as server, tempfile.TemporaryDirectory() as scratch:
        for name, url in (("PostgreSQL", server.create_database("profile")),
                          ("SQLite", f"sqlite:///{scratch}/metastore.db")):
            print(f"{name}, one client, {args.calls} calls each:")
            ms = Metastore(url, warehouse=f"{scratch}/warehouse", pool_size=1)
            ms.init()
            measure(ms, args.calls, args.profile)
            ms.close()


if __name__ == "__main__":
    main()
