"""A single-bucket partition at any size, written fast and checked in bounded memory: for bench_scale.py and the
capped-memory tests (tests/spark_jobs/test_capped_memory.py).

`build` registers `default.<name>` (unbucketed, full ACID) in a metastore and writes, all in bucket 0 and in key
order: `base_0000001` of `base_rows`, `deltas` insert deltas of `delta_rows` (write ids 2..), and `delete_deltas` delete
deltas (the last write ids) removing together `delete_fraction` of every row written, with every write id committed. Rows are
(id bigint, payload string, amount double, quantity int); `payload` is `payload_bytes` long (the id's digits
repeated), so files stay small on disk (ZLIB) while the decoded size is what a test needs. It writes a batch at a
time: memory does not grow with the size.

Two layouts: `own` (the project's writer, EventStreamWriter: stripes of about `stripe_bytes` decoded bytes) and
`hive` (laid out as Hive's ORC writer lays files out: the writer closes a stripe when its buffered, compressed streams
reach `stripe_bytes`, 64 MiB by default, so a compressible stripe decodes to many times that; ZLIB; 10,000-row index
stride; Hive's `hive.acid.key.index`, `hive.acid.stats` and `hive.acid.version` user metadata).

`digest` streams a snapshot of the partition (acid_core.read.merge.read_batches) and returns what the rows are: count,
id sum, payload bytes and an order-independent hash of (id, write id) and of (id, write id, bucket, rowId), so a
compaction that keeps ROW__IDs must leave all of them equal and a rebalance all but the last.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.orc as pa_orc

from acid_core.format.layout import ACID_FORMAT_FILE, ORC_ACID_VERSION, base_dir_name, bucket_file_name, delta_dir_name
from acid_core.format.orc_columnar import EventStreamWriter, _add_acid_metadata, event_table, null_rows
from acid_core.format.orc_events import DELETE_OPERATION, INSERT_OPERATION, AcidStats
from acid_core.format.rowid import encode_bucket
from acid_core.metastore import Metastore
from acid_core.read.merge import read_batches
from acid_core.storage.fs import FileSystem, local_scratch, put_scratch

COLUMNS = [("id", "bigint"), ("payload", "string"), ("amount", "double"), ("quantity", "int")]
BATCH = 65_536
BUCKET = encode_bucket(0)
_MIX = np.uint64(0x9E3779B97F4A7C15)


@dataclass(frozen=True)
class Built:
    location: str
    rows: int  # rows written (before deletes)
    deleted: int
    decoded_bytes: int  # of the surviving rows: what a whole-partition read or compaction would hold
    writes: int = 0  # write ids committed: 1..writes

    @property
    def surviving(self) -> int:
        return self.rows - self.deleted


def _payload(ids: np.ndarray, width: int) -> pa.Array:
    digits = pa.array(ids).cast(pa.string())
    if not width:
        return digits
    repeats = pc.add(pc.divide(width, pc.utf8_length(digits)), 1)
    return pc.utf8_slice_codeunits(pc.binary_repeat(digits, repeats), 0, width)


def _rows(ids: np.ndarray, width: int) -> pa.StructArray:
    return pa.StructArray.from_arrays(
        [pa.array(ids), _payload(ids, width), pa.array(ids % 10_000 / 7.0), pa.array((ids % 97).astype(np.int32))],
        names=[name for name, _ in COLUMNS])


class HiveShapedWriter:
    """An event file laid out as Hive's ORC writer lays it out: ORC's own rule closes a stripe when the buffered,
    compressed streams reach `stripe_bytes` (Hive's hive.exec.orc.default.stripe.size, 64 MiB), ZLIB, an index entry
    every 10,000 rows, and Hive's ACID user metadata. Memory: the ORC writer's buffers (one stripe, compressed)."""

    def __init__(self, fs: FileSystem, destination: str, *, stripe_bytes: int = 64 << 20) -> None:
        self._fs, self._destination = fs, destination
        self._exit = contextlib.ExitStack()
        self._scratch = self._exit.enter_context(local_scratch(fs, destination))
        self._writer = pa_orc.ORCWriter(self._scratch.path, compression="zlib", file_version="0.12",
                                        stripe_size=stripe_bytes, batch_size=1024, row_index_stride=10_000)
        self._counts = [0, 0, 0]

    def write(self, table: pa.Table) -> None:
        operations = table.column(0).to_numpy()
        for operation in range(3):
            self._counts[operation] += int((operations == operation).sum())
        self._writer.write(table)

    def close(self) -> None:
        with self._exit:
            self._writer.close()
            _add_acid_metadata(self._scratch, AcidStats(*self._counts), self._destination)
            put_scratch(self._fs, self._scratch, self._destination)

    def __enter__(self) -> HiveShapedWriter:
        return self

    def __exit__(self, *exc) -> None:
        self._exit.close()


def _writer(layout: str, fs: FileSystem, destination: str, stripe_bytes: int):
    if layout == "hive":
        return HiveShapedWriter(fs, destination, stripe_bytes=stripe_bytes)
    if layout == "own":
        return EventStreamWriter(fs, destination, stripe_bytes=stripe_bytes)
    raise ValueError(f"layout {layout!r} is not 'own' or 'hive'")


def build(metastore: Metastore, name: str, *, base_rows: int, deltas: int = 10, delta_rows: int | None = None,
          delete_fraction: float = 0.1, payload_bytes: int = 24, stripe_bytes: int = 64 << 20,
          seed: int = 7, layout: str = "own", delete_deltas: int = 1) -> Built:
    delta_rows = base_rows // 100 if delta_rows is None else delta_rows
    table = metastore.catalog.create_table("default", name, COLUMNS, params={
        "transactional": "true", "orc.stripe.size": str(stripe_bytes)})
    writes = 1 + deltas + delete_deltas
    for _ in range(writes):
        txn = metastore.txns.open_txn()
        metastore.txns.allocate_write_ids([txn], "default", name)
        metastore.txns.commit(txn)
    fs = FileSystem()
    rng = np.random.default_rng(seed)
    deleted: list[tuple[int, np.ndarray]] = []  # (write id, rowIds deleted)
    first_id = 0
    for write_id, count in [(1, base_rows)] + [(2 + d, delta_rows) for d in range(deltas)]:
        directory = base_dir_name(1) if write_id == 1 else delta_dir_name(write_id, write_id, statement_id=0)
        with _writer(layout, fs, f"{table.location}/{directory}/{bucket_file_name(0)}", stripe_bytes) as writer:
            for start in range(0, count, BATCH):
                row_ids = np.arange(start, min(start + BATCH, count), dtype=np.int64)
                ids = row_ids + first_id
                writer.write(event_table(INSERT_OPERATION, np.full(len(ids), write_id), np.full(len(ids), BUCKET),
                                         row_ids, np.full(len(ids), write_id), _rows(ids, payload_bytes)))
            writer.close()
        fs.write_atomically(f"{table.location}/{directory}/{ACID_FORMAT_FILE}", str(ORC_ACID_VERSION).encode())
        chosen = np.flatnonzero(rng.random(count) < delete_fraction).astype(np.int64)
        deleted.append((write_id, chosen))
        first_id += count
    row_type = _rows(np.zeros(0, np.int64), 0).type
    # every deleted row goes to one of the delete deltas (as `delete_deltas` DELETE statements would remove them)
    owner = [rng.integers(0, delete_deltas, len(row_ids)) for _, row_ids in deleted]
    for number in range(delete_deltas):
        write_id = 1 + deltas + 1 + number
        directory = delta_dir_name(write_id, write_id, statement_id=0, delete=True)
        with _writer(layout, fs, f"{table.location}/{directory}/{bucket_file_name(0)}", stripe_bytes) as writer:
            for (original, row_ids), owners in zip(deleted, owner):
                mine = row_ids[owners == number]
                for start in range(0, len(mine), BATCH):
                    part = mine[start:start + BATCH]
                    writer.write(event_table(DELETE_OPERATION, np.full(len(part), original),
                                             np.full(len(part), BUCKET), part, np.full(len(part), write_id),
                                             null_rows(row_type, len(part))))
            writer.close()
        fs.write_atomically(f"{table.location}/{directory}/{ACID_FORMAT_FILE}", str(ORC_ACID_VERSION).encode())
    removed = sum(len(r) for _, r in deleted)
    survivors = first_id - removed
    return Built(table.location, first_id, removed, survivors * (8 + payload_bytes + 4 + 8 + 4 + 8), writes)


def register_copy(metastore: Metastore, built: Built, name: str, location: str, *, link: bool = False,
                  params: dict | None = None) -> str:
    """Copy a built partition's files to `location` and register them as `default.<name>` with the same write ids.

    `link` hard-links the files instead of copying them (the same disk, and nothing writes into an input file: a
    compaction writes new directories, a cleaner unlinks)."""
    shutil.copytree(built.location, location, copy_function=os.link if link else shutil.copy2)
    metastore.catalog.create_table("default", name, COLUMNS, location=location,
                                   params={"transactional": "true", **(params or {})})
    for _ in range(built.writes):
        txn = metastore.txns.open_txn()
        metastore.txns.allocate_write_ids([txn], "default", name)
        metastore.txns.commit(txn)
    return name


def digest(metastore: Metastore, name: str) -> dict:
    """What a snapshot of `default.<name>` holds, streamed a batch at a time."""
    snapshot = metastore.txns.snapshot([f"default.{name}"])
    location = metastore.catalog.get_table("default", name).location
    count = id_sum = payload = 0
    by_write = by_row_id = np.uint64(0)
    buckets: set[int] = set()
    reader = read_batches(location, write_ids=snapshot.write_ids[f"default.{name}"], txns=snapshot.txns,
                          include_row_id=True)
    with np.errstate(over="ignore"):
        for batch in reader:
            ids = batch.column("id").to_numpy().astype(np.uint64)
            row_id = batch.column("row__id")
            write = row_id.field("writeid").to_numpy().astype(np.uint64)
            bucket = row_id.field("bucketid").to_numpy().astype(np.uint64)
            rowid = row_id.field("rowid").to_numpy().astype(np.uint64)
            count += batch.num_rows
            id_sum += int(ids.sum(dtype=np.uint64))
            payload += int(pc.sum(pc.binary_length(batch.column("payload"))).as_py() or 0)
            mixed = (ids * _MIX) ^ (write * _MIX * _MIX)
            by_write += mixed.sum(dtype=np.uint64)
            by_row_id += (mixed ^ (bucket * _MIX + rowid) * _MIX).sum(dtype=np.uint64)
            buckets.update(int(b) >> 16 & 0xFFF for b in np.unique(bucket))
    return {"rows": count, "id_sum": id_sum, "payload_bytes": payload, "by_write_id": int(by_write),
            "by_row_id": int(by_row_id), "buckets": sorted(buckets)}
