"""`make run` until the Airflow platform lands: a local demo warehouse under ACID_HOME written by the embedded writer.

It creates (or continues) `demo.db/events` (unpartitioned) and `demo.db/sales` (partitioned by day), writes a few
transactions of inserts, deletes and updates into each, and shows what a reader sees with `acid inspect` and `acid read`.
Re-running continues from the highest write id already on disk.
"""

from __future__ import annotations

import os
import random
import re
import sys
from pathlib import Path

from acid_cli.main import main as acid
from acid_core.merge import read_snapshot
from acid_core.rowid import RowId
from acid_core.writer import EmbeddedWriter

_WRITE_ID = re.compile(r"(?:delete_)?delta_(\d+)_(\d+)")


def _next_write_id(table: Path) -> int:
    ids = [int(m.group(2)) for p in table.rglob("*delta_*") if (m := _WRITE_ID.match(p.name))]
    return max(ids, default=0) + 1


def _write_transactions(writer: EmbeddedWriter, table: Path, partition: dict | None, rounds: int, rng: random.Random) -> None:
    for _ in range(rounds):
        write_id = _next_write_id(table)
        rows = [(rng.randrange(1_000_000), f"user-{rng.randrange(100):03d}", round(rng.uniform(1, 500), 2))
                for _ in range(rng.randrange(5, 20))]
        writer.insert(rows, write_id=write_id, partition=partition)
        location = writer.partition_location(partition)
        current = read_snapshot(location, include_row_id=True).column("row__id").to_pylist()
        if len(current) > 10:
            victims = [RowId(r["writeid"], r["bucketid"], r["rowid"]) for r in rng.sample(current, 2)]
            writer.delete(victims[:1], write_id=write_id + 1, partition=partition)
            writer.update(victims[1:], [(0, "updated", 0.0)], write_id=write_id + 2, partition=partition)


def main() -> int:
    home = Path(os.environ.get("ACID_HOME", ".acid-home")).resolve()
    warehouse = home / "warehouse" / "demo.db"
    rng = random.Random(42)
    columns = [("id", "bigint"), ("customer", "string"), ("amount", "double")]
    events = warehouse / "events"
    sales = warehouse / "sales"
    _write_transactions(EmbeddedWriter(str(events), columns=columns), events, None, 3, rng)
    sales_writer = EmbeddedWriter(str(sales), columns=columns, partition_keys=["day"])
    for day in ("2026-11-01", "2026-11-02"):
        _write_transactions(sales_writer, sales, {"day": day}, 2, rng)

    hwm = _next_write_id(events) - 1
    print(f"Demo warehouse: {warehouse}\n")
    print(f"$ acid inspect {events} --write-ids demo.events:{hwm}:9223372036854775807::")
    acid(["inspect", str(events), "--write-ids", f"demo.events:{hwm}:9223372036854775807::"])
    print(f"\n$ acid read {events} --row-id   (every committed write id)")
    acid(["read", str(events), "--row-id"])
    print(f"\n$ acid read {events} --write-ids demo.events:1:9223372036854775807::   (the snapshot after write id 1)")
    acid(["read", str(events), "--write-ids", "demo.events:1:9223372036854775807::"])
    print(f"\n$ acid read {sales}/day=2026-11-02 --format jsonl --row-id")
    acid(["read", str(sales / "day=2026-11-02"), "--format", "jsonl", "--row-id"])
    print("\nThe Airflow platform (initiator, compaction, cleaner) arrives with the later issues; "
          "run `make run` again to add more transactions.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
