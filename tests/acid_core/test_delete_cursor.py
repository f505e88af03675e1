"""Delete events streamed in batches (acid_core.format.delete_events.DeleteCursor over EventFile.iter_batches): whatever a
delete file's stripes hold, a cursor decodes a bounded batch at a time and returns exactly the events of each key
window a key-ordered stream asks for, across batch boundaries, with the snapshot's validity and a task's start key."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.orc as pa_orc
import pytest

from acid_core.errors import UnsortedEventsError
from acid_core.format.delete_events import DeleteCursor, KeyArrays, read_delete_keys, without_deleted
from acid_core.format.orc_columnar import EventStreamWriter, event_table, null_rows
from acid_core.format.orc_events import DELETE_OPERATION, EventFile
from acid_core.format.rowid import encode_bucket
from acid_core.format.validity import ValidWriteIdList
from acid_core.storage.fs import FileSystem

ROW_TYPE = pa.struct([("id", pa.int64())])
B0, B1 = encode_bucket(0), encode_bucket(1)
ALL_VALID = ValidWriteIdList.parse("default.t:8:9223372036854775807::")


def _keys(count: int, seed: int = 3) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """`count` sorted delete keys over write ids 1..4 and two buckets, with deleting write ids 5..8."""
    rng = np.random.default_rng(seed)
    owid = np.sort(rng.integers(1, 5, count))
    bucket = np.where(rng.random(count) < 0.5, B0, B1).astype(np.int32)
    rowid = rng.choice(count * 4, count, replace=False).astype(np.int64)
    order = np.lexsort((rowid, bucket, owid))
    return owid[order], bucket[order], rowid[order], rng.integers(5, 9, count)


def _delete_file(path, keys, *, stripe_bytes: int = 1 << 30) -> EventFile:
    owid, bucket, rowid, current = keys
    with EventStreamWriter(FileSystem(), str(path), stripe_bytes=stripe_bytes) as writer:
        for start in range(0, len(owid), 7_000):
            end = start + 7_000
            writer.write(event_table(DELETE_OPERATION, owid[start:end], bucket[start:end], rowid[start:end],
                                     current[start:end], null_rows(ROW_TYPE, len(owid[start:end]))))
        writer.close()
    return EventFile(FileSystem(), str(path))


def _as_tuples(keys: KeyArrays) -> list[tuple[int, int, int]]:
    return list(zip(keys.owid.tolist(), keys.bucket.tolist(), keys.rowid.tolist()))


def test_a_one_stripe_file_is_read_a_bounded_batch_at_a_time(tmp_path):
    event_file = _delete_file(tmp_path / "bucket_00000", _keys(30_000))
    assert event_file.num_stripes == 1
    sizes = [batch.num_rows for batch in event_file.iter_batches(["rowId"], batch_rows=1_000)]
    assert max(sizes) <= 1_000 and sum(sizes) == 30_000


@pytest.mark.parametrize("check_validity", [False, True], ids=["all-valid", "some-invalid"])
def test_the_cursor_returns_each_windows_events_across_batches(tmp_path, check_validity):
    keys = _keys(30_000)
    event_file = _delete_file(tmp_path / "bucket_00000", keys)
    write_ids = ValidWriteIdList.parse("default.t:8:6:6:")  # write id 6 open: its deletes are not seen
    expected = [key for key, current in zip(zip(*(k.tolist() for k in keys[:3])), keys[3].tolist())
                if not check_validity or current != 6]
    cursor = DeleteCursor(event_file, write_ids, check_validity=check_validity, batch_rows=997)
    rng = np.random.default_rng(11)
    edges = sorted({(int(o), int(b), int(r)) for o, b, r in zip(rng.integers(1, 5, 60), rng.choice([B0, B1], 60),
                                                               rng.integers(0, 120_000, 60))})
    low = (0, 0, 0)
    for high in edges + [(9, 0, 0)]:
        found = _as_tuples(cursor.events_between(low, high))
        assert found == [key for key in expected if low <= key <= high]
        low = high


def test_a_start_key_skips_the_events_below_it(tmp_path):
    keys = _keys(20_000)
    event_file = _delete_file(tmp_path / "bucket_00000", keys)
    start = (3, int(B0), 0)
    cursor = DeleteCursor(event_file, ALL_VALID, check_validity=False,
                          start_key=start, batch_rows=500)
    everything = _as_tuples(read_delete_keys(event_file, ALL_VALID,
                                             check_validity=False))
    assert _as_tuples(cursor.events_between(start, (9, 0, 0))) == [key for key in everything if key >= start]


def test_a_delete_file_out_of_key_order_across_batches_is_refused(tmp_path):
    owid, bucket, rowid, current = _keys(4_000)
    path = tmp_path / "bucket_00000"
    halves = [event_table(DELETE_OPERATION, owid[part], bucket[part], rowid[part], current[part],
                          null_rows(ROW_TYPE, 2_000)) for part in (slice(2_000, None), slice(0, 2_000))]
    pa_orc.write_table(pa.concat_tables(halves), str(path))  # each half sorted, the file not: a foreign writer's
    cursor = DeleteCursor(EventFile(FileSystem(), str(path)), ALL_VALID,
                          check_validity=False, batch_rows=2_000)
    with pytest.raises(UnsortedEventsError, match="not sorted"):
        cursor.events_between((0, 0, 0), (9, 0, 0))


def test_a_stream_loses_exactly_its_deleted_rows(tmp_path):
    keys = _keys(25_000)
    event_file = _delete_file(tmp_path / "bucket_00000", keys)
    deleted = set(zip(*(k.tolist() for k in keys[:3])))
    rows = sorted(deleted | {(o, b, r + 1) for o, b, r in list(deleted)[:5_000]})
    table = pa.table({"o": [k[0] for k in rows], "b": pa.array([k[1] for k in rows], pa.int32()),
                      "r": [k[2] for k in rows]})
    pieces = [table.slice(start, 3_000) for start in range(0, table.num_rows, 3_000)]
    cursor = DeleteCursor(event_file, ALL_VALID, check_validity=False, batch_rows=777)
    kept = pa.concat_tables(without_deleted(pieces, ["o", "b", "r"], cursors=[cursor]))
    survivors = list(zip(kept.column("o").to_pylist(), kept.column("b").to_pylist(), kept.column("r").to_pylist()))
    assert survivors == [key for key in rows if key not in deleted]
