"""Metastore throughput and latency, PostgreSQL and SQLite side by side in one run, against the older code.

* open+commit transaction pairs per second with 8 concurrent client processes (goals on 2 cores: >= 2,000/s on
  PostgreSQL and >= 0.6x of pgbench running the same two statements; on SQLite not below the older code)
* lock acquire latency (shared_read on one table, granted at once, then released): median and p99, for one client
  and for 8 clients hammering the same lock table (goal: p99 <= 50 ms on both databases)

PostgreSQL is a server started for the run (tests/support/pg_server.py: initdb on loopback, fsync off as in the
tests); SQLite is a file in a temp directory. Each round runs this code, then the baseline, then (PostgreSQL) pgbench
with the exact statements of one open and one commit; `--rounds` rounds, medians printed. The baseline is the code as
it stood before the bounded-history and cluster work (`--baseline 9ed3d61`, issue 28's "older code"): its
`acid_core` and schema taken from git into a temp directory and run by this file's functions in a child process, on
its own database of the same server and its own SQLite file.
Run: `.venv/bin/python bench/bench_metastore.py [--clients 8] [--seconds 5] [--rounds 2] [--baseline REV|none]`.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import subprocess
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


def _baseline_code(revision: str, into: Path) -> Path:
    """The baseline's `acid_core` package and `sql/` schema, from git, in `into` (first on its child's PYTHONPATH)."""
    root = Path(__file__).resolve().parent.parent
    archive = subprocess.run(["git", "-C", str(root), "archive", revision, "acid_core", "sql"], capture_output=True,
                             timeout=120, check=False)
    if archive.returncode != 0:
        raise SystemExit(f"baseline {revision}: git archive failed: {archive.stderr.decode().strip()}")
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, timeout=120, check=True)
    return into


def _measure_baseline(code: Path, url: str, args) -> tuple:
    """`measure` in a child process whose `acid_core` is the baseline's."""
    done = subprocess.run([sys.executable, __file__, "--measure", url, "--clients", str(args.clients), "--seconds",
                           str(args.seconds), "--lock-rounds", str(args.lock_rounds)], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(code)), timeout=900, check=False)
    if done.returncode != 0:
        raise SystemExit(f"baseline run failed ({done.returncode}): {done.stderr[-2000:]}")
    rate, latencies, calls = json.loads(done.stdout.strip().splitlines()[-1])
    return rate, [tuple(pair) for pair in latencies], {name: tuple(pair) for name, pair in calls.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--lock-rounds", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=2, help="measurements of each code, alternating")
    parser.add_argument("--baseline", default="9ed3d61", help="git revision of the baseline, or none")
    parser.add_argument("--measure", help=argparse.SUPPRESS)  # a child's one measurement, printed as JSON
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure, args.clients, args.seconds, args.lock_rounds)))
        return
    from support.pg_server import PostgresServer

    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with PostgresServer.start_new() as server, tempfile.TemporaryDirectory() as scratch:
        code = None if args.baseline == "none" else _baseline_code(args.baseline, Path(scratch))
        urls = {"PostgreSQL": (server.create_database("bench"), server.create_database("bench_baseline")),
                "SQLite": (f"sqlite:///{scratch}/metastore.db", f"sqlite:///{scratch}/baseline.db")}
        print(f"{args.clients} concurrent clients, {args.seconds:.0f} s of open+commit each; lock acquire latency over "
              f"{args.clients} x {args.lock_rounds} requests; {args.rounds} round(s) of each code, alternating, "
              "medians shown")
        for name, (url, baseline_url) in urls.items():
            ours, theirs, limits = [], [], []
            for _ in range(args.rounds):  # each round: ours, the baseline, pgbench (PostgreSQL), back to back
                ours.append(measure(url, args.clients, args.seconds, args.lock_rounds))
                if code is not None:
                    theirs.append(_measure_baseline(code, baseline_url, args))
                if name == "PostgreSQL":
                    limits.append(_pgbench(server, "bench", url, args.clients, args.seconds))
            rate = statistics.median(r[0] for r in ours)
            median1, p991, median, p99 = (statistics.median(r[1][i][j] for r in ours) for i in (0, 1) for j in (0, 1))
            goal = "  (goal >= 2,000/s)" if name == "PostgreSQL" else ""
            print(f"{name:10s}: {rate:8,.0f} open+commit pairs/s with {args.clients} clients{goal} "
                  f"(rounds: {', '.join(f'{r[0]:,.0f}' for r in ours)})")
            if theirs:
                base = statistics.median(r[0] for r in theirs)
                print(f"{'':10s}  baseline {args.baseline}: {base:8,.0f} pairs/s (rounds: "
                      f"{', '.join(f'{r[0]:,.0f}' for r in theirs)}); ours {rate / base:4.2f}x of it"
                      + ("" if name == "PostgreSQL" else " (goal >= 1.0x)"))
            if limits:
                limit = statistics.median(limits)
                print(f"{'':10s}  pgbench, the same two statements from {args.clients} clients: {limit:8,.0f}/s "
                      f"(rounds: {', '.join(f'{v:,.0f}' for v in limits)}); ours {rate / limit:4.2f}x of it "
                      "(goal >= 0.6x)")
            for call in ("open", "commit"):
                p50, p99_call = (statistics.median(r[2][call][j] for r in ours) for j in (0, 1))
                print(f"{'':10s}  {call:6s} with {args.clients} clients: p50 {p50:6.2f} ms, p99 {p99_call:6.2f} ms "
                      "(Hive's metastore: openTxn 51-58 ms a call over Thrift, apache/hive#2547)")
            print(f"{'':10s}  lock acquire, 1 client: median {median1:6.2f} ms, p99 {p991:6.2f} ms; "
                  f"{args.clients} clients: median {median:6.2f} ms, p99 {p99:6.2f} ms (goal: p99 <= 50 ms; rounds: "
                  f"{', '.join(f'{r[1][1][1]:.1f}' for r in ours)})")
            if theirs:
                base_p99 = [r[1][1][1] for r in theirs]
                print(f"{'':10s}  baseline {args.baseline}: lock acquire p99 with {args.clients} clients "
                      f"{statistics.median(base_p99):6.2f} ms (rounds: {', '.join(f'{v:.1f}' for v in base_p99)})")
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
