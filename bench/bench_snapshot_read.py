"""Embedded snapshot read vs a plain pyarrow ORC read of the same surviving rows, measured side by side in one run.

Table: base (2M rows) + 10 insert deltas + delete deltas covering 10% of all rows. Goal: ratio <= 1.5.
Run: `make bench` (or `.venv/bin/python bench/bench_snapshot_read.py [--rows N]`).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow.orc as pa_orc

from acid_core.format.layout import ACID_FORMAT_FILE, base_dir_name, bucket_file_name
from acid_core.format.orc_events import INSERT_OPERATION, EventFileWriter, parse_columns
from acid_core.format.rowid import RowId, encode_bucket
from acid_core.read.merge import read_snapshot
from acid_core.write.writer import EmbeddedWriter

COLUMNS = parse_columns([("id", "bigint"), ("customer", "string"), ("amount", "double"), ("quantity", "int")])


def _rows(start: int, count: int) -> list[tuple]:
    return [(i, f"customer-{i % 50_000:05d}", (i % 10_000) / 7.0, i % 97) for i in range(start, start + count)]


def build_table(location: Path, base_rows: int, deltas: int, delta_rows: int, delete_fraction: float, seed: int = 7):
    """Write the table; return the ROW__IDs of every row and the set deleted."""
    bucket = encode_bucket(0, 0)
    base = location / base_dir_name(1)
    base.mkdir(parents=True)
    with open(base / bucket_file_name(0), "wb") as stream:
        writer = EventFileWriter(stream, COLUMNS)
        writer.write([(INSERT_OPERATION, 1, bucket, i, 1, row) for i, row in enumerate(_rows(0, base_rows))],
                     operation=INSERT_OPERATION)
        writer.close()
    (base / ACID_FORMAT_FILE).write_text("2")
    table = EmbeddedWriter(str(location), columns=COLUMNS)
    row_ids = [RowId(1, bucket, i) for i in range(base_rows)]
    for delta in range(deltas):
        write_id = 2 + delta
        table.insert(_rows(base_rows + delta * delta_rows, delta_rows), write_id=write_id)
        row_ids.extend(RowId(write_id, bucket, i) for i in range(delta_rows))
    rng = np.random.default_rng(seed)
    chosen = rng.choice(len(row_ids), size=int(len(row_ids) * delete_fraction), replace=False)
    deleted = [row_ids[i] for i in chosen]
    for part, write_id in enumerate(range(2 + deltas, 2 + deltas + 5)):
        table.delete(deleted[part::5], write_id=write_id)
    return row_ids, set(deleted)


def _time(function, repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=2_000_000, help="rows in the base")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        location = Path(scratch) / "table"
        delta_rows = max(args.rows // 100, 1)
        build_table(location, args.rows, 10, delta_rows, 0.10)
        surviving = read_snapshot(str(location))
        plain = Path(scratch) / "plain.orc"
        pa_orc.write_table(surviving, plain, compression="zlib")
        expected = surviving.num_rows

        def acid_read():
            assert read_snapshot(str(location)).num_rows == expected

        def acid_read_one_thread():
            assert read_snapshot(str(location), threads=1).num_rows == expected

        def plain_read():
            assert pa_orc.read_table(plain).num_rows == expected

        acid_read(), plain_read()  # warm the page cache for both
        acid_seconds, single_seconds, plain_seconds = [], [], []
        for _ in range(args.repeats):  # interleaved so all see the same machine state
            acid_seconds.append(_time(acid_read, 1))
            single_seconds.append(_time(acid_read_one_thread, 1))
            plain_seconds.append(_time(plain_read, 1))
        acid, plain_time = statistics.median(acid_seconds), statistics.median(plain_seconds)
        single = statistics.median(single_seconds)
        print(f"table: base {args.rows:,} rows + 10 deltas x {delta_rows:,} rows, 10% deleted; {expected:,} rows survive")
        print(f"embedded snapshot read : {acid * 1000:8.1f} ms")
        print(f"  same, one thread     : {single * 1000:8.1f} ms")
        print(f"plain pyarrow ORC read : {plain_time * 1000:8.1f} ms")
        print(f"ratio (goal <= 1.5)    : {acid / plain_time:8.2f}x  (one thread: {single / plain_time:.2f}x)")


if __name__ == "__main__":
    main()
