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
    while time.time() < deadline:
        txn = store.txns.open_txn()
        store.txns.commit(txn)
        done += 1
    results.put(done)
    store.close()


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


def measure(url: str, clients: int, seconds: float, lock_rounds: int) -> tuple[float, list[tuple[float, float]]]:
    Metastore(url, warehouse="/tmp/unused").init()
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    start_at = time.time() + 3.0  # let every process import and connect first
    workers = [context.Process(target=_pairs, args=(url, seconds, start_at, results)) for _ in range(clients)]
    for worker in workers:
        worker.start()
    total = sum(results.get(timeout=120) for _ in workers)
    for worker in workers:
        worker.join()
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
    return total / seconds, latencies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--lock-rounds", type=int, default=200)
    args = parser.parse_args()
    from pg_server import PostgresServer

    with PostgresServer.start_new() as server, tempfile.TemporaryDirectory() as scratch:
        urls = {"PostgreSQL": server.create_database("bench"), "SQLite": f"sqlite:///{scratch}/metastore.db"}
        print(f"{args.clients} concurrent clients, {args.seconds:.0f} s of open+commit each; lock acquire latency over "
              f"{args.clients} x {args.lock_rounds} requests")
        for name, url in urls.items():
            rate, ((median1, p991), (median, p99)) = measure(url, args.clients, args.seconds, args.lock_rounds)
            goal = "  (goal >= 2,000/s)" if name == "PostgreSQL" else ""
            print(f"{name:10s}: {rate:8,.0f} open+commit pairs/s with {args.clients} clients{goal}")
            print(f"{'':10s}  lock acquire, 1 client: median {median1:6.2f} ms, p99 {p991:6.2f} ms; "
                  f"{args.clients} clients: median {median:6.2f} ms, p99 {p99:6.2f} ms")


if __name__ == "__main__":
    main()
