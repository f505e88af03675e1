"""Metastore throughput and latency, PostgreSQL and SQLite side by side in one run.

* open+commit transaction pairs per second with 8 concurrent client processes (goal on 2 cores: >= 2,000/s on PostgreSQL)
* lock acquire latency (shared_read on one table, granted at once, then released): median and p99, for one client
  and for 8 clients hammering the same lock table (every request is numbered and checked under one row lock)

PostgreSQL is a server started for the run (tests/pg_server.py: initdb on loopback, fsync off as in the tests);
SQLite is a file in a temp directory. Run: `.venv/bin/python bench/bench_metastore.py [--clients 8] [--seconds 5]`.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from acid_core.metastore import Metastore  # noqa: E402
from acid_core.metastore.locks import LockComponent, LockType  # noqa: E402


def _pairs(url: str, seconds: float, start_at: float, results) -> None:
    store = Metastore(url, warehouse="/tmp/unused", pool_size=1)
    while time.time() < start_at:
        time.sleep(0.001)
    done, deadline = 0, start_at + seconds
    opens, commits = [], []  # every 8th call's latency (bounded by the run's length)
    while time.time() < deadline:
        begin = time.perf_counter()
        txn = store.txns.open_txn()
        opened = time.perf_counter()
        store.txns.commit(txn)
        if done % 8 == 0:
            opens.append(opened - begin)
            commits.append(time.perf_counter() - opened)
        done += 1
    results.put((done, opens, commits))
    store.close()


def _exact_statements(url: str) -> tuple[str, str]:
    """The SQL one open and one commit send, as literal text for pgbench (captured from the driver, rendered by
    psycopg2's mogrify; the commit's transaction id becomes pgbench's variable :TXN_ID, set by the open's \\gset)."""
    store = Metastore(url, warehouse="/tmp/unused", pool_size=1)
    sent: list[tuple[str, dict]] = []
    sentinel = 987_654_321_987
    store.db.statement_observers.append(lambda statement, parameters: sent.append((statement, parameters)))
    txn = store.txns.open_txn()
    store.txns.commit(txn)
    store.db.statement_observers.clear()
    if len(sent) != 2:
        raise SystemExit(f"expected one statement per open and per commit, got {len(sent)}")
    (open_sql, open_params), (commit_sql, commit_params) = sent
    raw = store.db.engine.raw_connection()
    cursor = raw.cursor()
    opening = cursor.mogrify(open_sql, open_params).decode()
    committing = cursor.mogrify(commit_sql, {**commit_params, "txn": sentinel}).decode()
    raw.close()
    store.close()
    return opening, committing.replace(str(sentinel), ":TXN_ID")


def _pgbench(server, database: str, url: str, clients: int, seconds: float) -> float:
    """Transactions a second pgbench (the server's own binary) makes running exactly one open and one commit per
    transaction from `clients` clients."""
    import re
    import subprocess

    opening, committing = _exact_statements(url)
    with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as script:
        script.write(" ".join(opening.split()) + " \\gset\n" + " ".join(committing.split()) + ";\n")
    done = subprocess.run([str(server.bin_dir / "pgbench"), "-n", "-c", str(clients), "-j", str(clients), "-T",
                           str(int(seconds)), "-f", script.name, "-h", "127.0.0.1", "-p", str(server.port), "-U",
                           "acid", database], capture_output=True, text=True, timeout=seconds + 120, check=False)
    os.unlink(script.name)
    found = re.search(r"tps = ([0-9.]+)", done.stdout)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"pgbench failed ({done.returncode}): {done.stdout[-2000:]} {done.stderr[-2000:]}")
    return float(found.group(1))


def _percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    if not ordered:
        return 0.0, 0.0
    return statistics.median(ordered) * 1000, ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000


def _locks(url: str, count: int, results) -> None:
    store = Metastore(url, warehouse="/tmp/unused", pool_size=1)
    component = [LockComponent("bench", "t", None, LockType.SHARED_READ)]
    samples = []
    for _ in range(count):
        begin = time.perf_counter()
        response = store.locks.lock(component)
        samples.append(time.perf_counter() - begin)
        assert response.acquired
        store.locks.unlock(response.lock_id)
    results.put(samples)
    store.close()


def measure(url: str, clients: int, seconds: float, lock_rounds: int):
    Metastore(url, warehouse="/tmp/unused").init()
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    start_at = time.time() + 3.0  # let every process import and connect first
    workers = [context.Process(target=_pairs, args=(url, seconds, start_at, results)) for _ in range(clients)]
    for worker in workers:
        worker.start()
    gathered = [results.get(timeout=120) for _ in workers]
    for worker in workers:
        worker.join()
    total = sum(done for done, _, _ in gathered)
    call_latencies = {"open": _percentiles([s for _, opens, _ in gathered for s in opens]),
                      "commit": _percentiles([s for _, _, commits in gathered for s in commits])}
    latencies = []
    for lock_clients in (1, clients):
        workers = [context.Process(target=_locks, args=(url, lock_rounds, results)) for _ in range(lock_clients)]
        for worker in workers:
            worker.start()
        samples = sorted(s for _ in workers for s in results.get(timeout=300))
        for worker in workers:
            worker.join()
        p99 = samples[min(len(samples) - 1, int(len(samples) * 0.99))]
        latencies.append((statistics.median(samples) * 1000, p99 * 1000))
    return total / seconds, latencies, call_latencies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--lock-rounds", type=int, default=200)
    args = parser.parse_args()
    from support.pg_server import PostgresServer

    with PostgresServer.start_new() as server, tempfile.TemporaryDirectory() as scratch:
        urls = {"PostgreSQL": server.create_database("bench"), "SQLite": f"sqlite:///{scratch}/metastore.db"}
        print(f"{args.clients} concurrent clients, {args.seconds:.0f} s of open+commit each; lock acquire latency over "
              f"{args.clients} x {args.lock_rounds} requests")
        for name, url in urls.items():
            rate, ((median1, p991), (median, p99)), calls = measure(url, args.clients, args.seconds, args.lock_rounds)
            goal = "  (goal >= 2,000/s)" if name == "PostgreSQL" else ""
            print(f"{name:10s}: {rate:8,.0f} open+commit pairs/s with {args.clients} clients{goal}")
            if name == "PostgreSQL":
                limit = _pgbench(server, "bench", url, args.clients, args.seconds)
                print(f"{'':10s}  pgbench, the same two statements from {args.clients} clients: {limit:8,.0f}/s; "
                      f"ours {rate / limit:4.2f}x of it (goal >= 0.6x)")
            for call, (p50, p99_call) in calls.items():
                print(f"{'':10s}  {call:6s} with {args.clients} clients: p50 {p50:6.2f} ms, p99 {p99_call:6.2f} ms "
                      "(Hive's metastore: openTxn 51-58 ms a call over Thrift, apache/hive#2547)")
            print(f"{'':10s}  lock acquire, 1 client: median {median1:6.2f} ms, p99 {p991:6.2f} ms; "
                  f"{args.clients} clients: median {median:6.2f} ms, p99 {p99:6.2f} ms (goal: p99 <= 50 ms)")


if __name__ == "__main__":
    main()
