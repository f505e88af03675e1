"""Metastore and planner costs against a long history, SQLite and PostgreSQL side by side in one run.

* snapshot time and ValidTxnList length at 10k / 100k / 1M TXN_TO_WRITE_ID history rows (10% of the transactions
  aborted and since cleaned), before and after housekeeping (goal after: flat, <= 5 ms)
* one housekeeping run with 10,000 aborted transactions x 1M history rows: steady state (the aborted ones still have
  writes to clean, so nothing can go) and the first run after they were cleaned (it forgets them and trims a batch)
  (goal < 1 s)
* an initiator poll with nothing new at 3M COMPLETED_TXN_COMPONENTS rows of 30,000 partitions (goal <= 50 ms), and
  a first poll of that metastore: bounded (`initiator_cycle`, 1,000 rows) beside the unbounded first poll of earlier
  versions (`run_initiator(last_checked_ms=None)`), every candidate decided (its partition directory listed)
* planning one partition of 20,000 deltas (bench_planning.py; goal <= 0.3 s)

History is written in bulk with SQL (as a year of commits would have left it), not through the API. PostgreSQL is a
server started for the run (tests/pg_server.py); SQLite is a file. Times are medians of `--repeats` runs.
Run: `.venv/bin/python bench/bench_history.py [--sizes 10000,100000,1000000] [--repeats 7] [--skip-postgres]`.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import sqlalchemy as sa  # noqa: E402

from acid_core.compaction.initiator import initiator_cycle, run_initiator  # noqa: E402
from acid_core.metastore import Metastore  # noqa: E402
from acid_core.metastore.engine import ManualClock  # noqa: E402
from acid_core.operations.housekeeping import housekeep  # noqa: E402

DAY_MS = 86_400_000
_WAREHOUSE = [tempfile.gettempdir()]  # main() points it into its temporary directory
NOW_MS = 1_800_000_000_000


def _numbers(dialect: str, count: int) -> str:
    """A SELECT of the integers 1..count, as a subquery `n(x)`."""
    if dialect == "postgresql":
        return f"(SELECT generate_series(1, {int(count)}) AS x) AS n"
    return (f"(WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < {int(count)}) "
            "SELECT x FROM c) AS n")


def _bulk(ms: Metastore, statements: list[str]) -> None:
    def run(conn):
        for statement in statements:
            conn.execute(sa.text(statement))
    ms.db.run("load history", run)


def _history(ms: Metastore, rows: int, *, aborted_every: int = 10, uncleaned_aborted: int = 0) -> None:
    """`rows` committed-or-aborted transactions, each with one write id of default.t. Every `aborted_every`-th
    aborted long ago; `uncleaned_aborted` of those (spread evenly) still have a TXN_COMPONENTS row, the others were
    cleaned. Five transactions stay open at the top."""
    d = ms.db.dialect
    old = NOW_MS - DAY_MS
    spread = max(1, (rows // aborted_every) // uncleaned_aborted) if uncleaned_aborted else 0
    statements = [
        f'INSERT INTO "TXN_TO_WRITE_ID" SELECT x, \'default\', \'t\', x FROM {_numbers(d, rows)}',
        f'INSERT INTO "TXNS" ("TXN_ID", "TXN_STATE", "TXN_STARTED", "TXN_LAST_HEARTBEAT", "TXN_USER", "TXN_HOST") '
        f"SELECT x, 'a', {old}, {old}, 'bench', 'bench' FROM {_numbers(d, rows)} WHERE x % {aborted_every} = 0",
        f'UPDATE "NEXT_TXN_ID" SET "NTXN_NEXT" = {rows + 1}',
        f'INSERT INTO "NEXT_WRITE_ID" VALUES (\'default\', \'t\', {rows + 1})',
    ]
    if uncleaned_aborted:
        statements.append(
            'INSERT INTO "TXN_COMPONENTS" ("TC_TXNID", "TC_DATABASE", "TC_TABLE", "TC_PARTITION", "TC_OPERATION_TYPE", '
            f'"TC_WRITEID") SELECT x, \'default\', \'t\', NULL, \'i\', x FROM {_numbers(d, rows)} '
            f"WHERE x % {aborted_every} = 0 AND (x / {aborted_every}) % {spread} = 0")
    _bulk(ms, statements)
    for _ in range(5):
        txn = ms.txns.open_txn()
        ms.txns.allocate_write_ids([txn], "default", "t")
    _analyze(ms)


def _analyze(ms: Metastore) -> None:
    """PostgreSQL's autovacuum would have analyzed tables that grew this much; SQLite metastores are never analyzed."""
    if ms.db.dialect == "postgresql":
        ms.db.run("analyze", lambda conn: conn.execute(sa.text("ANALYZE")), single_statement=True)


def _median_ms(function, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        function()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def _store(url: str) -> Metastore:
    store = Metastore(url, warehouse=_WAREHOUSE[0], clock=ManualClock(NOW_MS))
    store.init()
    return store


def snapshots(new_url, sizes, repeats) -> list[dict]:
    found = []
    for size in sizes:
        ms = _store(new_url(f"snap{size}"))
        _history(ms, size)
        take = functools.partial(ms.txns.snapshot, ["default.t"])
        before_ms, before_len = _median_ms(take, repeats), len(str(take().txns))
        started = time.perf_counter()
        runs = 0
        while runs < 50:
            runs += 1
            report = housekeep(ms)
            if not (report.trimmed_write_id_rows or report.removed_aborted_txns):
                break
        housekeeping_s = time.perf_counter() - started
        after_ms, after_len = _median_ms(take, repeats), len(str(take().txns))
        found.append({"history": size, "before_ms": before_ms, "before_len": before_len, "after_ms": after_ms,
                      "after_len": after_len, "housekeeping_runs": runs, "housekeeping_s": housekeeping_s})
        ms.close()
    return found


def housekeeping(new_url, history_rows, aborted, repeats) -> dict:
    ms = _store(new_url("housekeeping"))
    _history(ms, history_rows, aborted_every=history_rows // aborted, uncleaned_aborted=aborted)
    steady = _median_ms(lambda: housekeep(ms), repeats)
    _bulk(ms, ['DELETE FROM "TXN_COMPONENTS"'])  # the cleaner removed what they wrote
    started = time.perf_counter()
    first = housekeep(ms)
    first_s = time.perf_counter() - started
    ms.close()
    return {"steady_ms": steady, "first_s": first_s, "forgot": len(first.removed_aborted_txns),
            "trimmed": first.trimmed_write_id_rows}


def initiator(new_url, ctc_rows, repeats) -> dict:
    ms = _store(new_url("initiator"))
    ms.catalog.create_table("default", "t", [("id", "int")], partition_keys=[("p", "string")],
                            params={"transactional": "true"})  # each candidate is decided: its directory is listed
    d = ms.db.dialect
    old = NOW_MS - DAY_MS
    # 3M commits of 30,000 partitions over the last day, none collapsed (as an older version left them)
    _bulk(ms, ['INSERT INTO "COMPLETED_TXN_COMPONENTS" ("CTC_TXNID", "CTC_DATABASE", "CTC_TABLE", "CTC_PARTITION", '
               '"CTC_TIMESTAMP", "CTC_WRITEID", "CTC_UPDATE_DELETE") '
               f"SELECT x, 'default', 't', 'p=' || (x % 30000), {old} + x, x, 'N' FROM {_numbers(d, ctc_rows)}"])
    _analyze(ms)
    cursor = f"{old + ctc_rows}:{ctc_rows}"
    nothing_new = _median_ms(lambda: initiator_cycle(ms, cursor=cursor, dry_run=True), repeats)
    first = _median_ms(lambda: initiator_cycle(ms, cursor=None, dry_run=True), repeats)
    unbounded = _median_ms(lambda: run_initiator(ms, dry_run=True, last_checked_ms=None), 1)
    ms.close()
    return {"nothing_new_ms": nothing_new, "first_ms": first, "unbounded_ms": unbounded}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--housekeeping-history", type=int, default=1_000_000)
    parser.add_argument("--aborted", type=int, default=10_000)
    parser.add_argument("--ctc-rows", type=int, default=3_000_000)
    parser.add_argument("--deltas", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--skip-postgres", action="store_true")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory(prefix="bench-history-") as tmp:
        _WAREHOUSE[0] = f"{tmp}/warehouse"
        backends = [("sqlite", lambda name: f"sqlite:///{tmp}/{name}.db", None)]
        server = None
        if not args.skip_postgres:
            from support.pg_server import PostgresServer

            server = PostgresServer.start_new()
            backends.append(("postgresql", server.create_database, server))
        try:
            for label, new_url, _ in backends:
                print(f"\n== {label}")
                for row in snapshots(new_url, sizes, args.repeats):
                    print(f"snapshot at {row['history']:>9,} history rows: before housekeeping {row['before_ms']:8.2f} ms"
                          f" (ValidTxnList {row['before_len']:>9,} chars); after {row['after_ms']:6.2f} ms "
                          f"(ValidTxnList {row['after_len']:,} chars); housekeeping {row['housekeeping_runs']} runs "
                          f"{row['housekeeping_s']:.2f} s")
                hk = housekeeping(new_url, args.housekeeping_history, args.aborted, args.repeats)
                print(f"housekeeping, {args.aborted:,} aborted x {args.housekeeping_history:,} history rows: steady "
                      f"state {hk['steady_ms']:.1f} ms; first run after they were cleaned {hk['first_s'] * 1000:.1f} ms "
                      f"(forgot {hk['forgot']:,} transactions, trimmed {hk['trimmed']:,} rows)")
                poll = initiator(new_url, args.ctc_rows, args.repeats)
                print(f"initiator poll at {args.ctc_rows:,} COMPLETED_TXN_COMPONENTS rows of 30,000 partitions: "
                      f"nothing new {poll['nothing_new_ms']:.2f} ms; first poll (fetch 1,000) {poll['first_ms']:.1f} ms"
                      f" vs unbounded first poll (earlier versions) {poll['unbounded_ms']:.0f} ms "
                      f"({poll['unbounded_ms'] / poll['first_ms']:.0f}x)")
        finally:
            if server is not None:
                server.stop()
        from bench_planning import planning_figures

        print("\n== planning")
        for row in planning_figures(tmp, delta_counts=(4000, args.deltas), repeats=args.repeats):
            print(f"planning one partition of {row['deltas']:>6,} deltas: get_acid_state (the partition's listing, "
                  f"the directory state and a listing of every delta read) {row['seconds'] * 1000:7.1f} ms "
                  f"({row['ratio']:.2f}x the smallest); the listing and the directory state alone "
                  f"{row['state_seconds'] * 1000:6.1f} ms")
    print(f"\nload average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
