"""Reads that start at a stripe stream it in batches and never decode the stripes before it (issue 25, items 1-2).

The proof that earlier stripes are not decoded is physical: their bytes are overwritten with garbage, and a read
from a later stripe still returns exactly that stripe's rows."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.dataset as pa_ds
import pyarrow.orc as pa_orc
import pytest

from acid_core.errors import CorruptFileError
from acid_core.format.delete_events import read_delete_keys, stripes_holding
from acid_core.format.layout import base_dir_name, bucket_file_name, delta_dir_name
from acid_core.format.orc_columnar import EventStreamWriter, event_table, null_rows
from acid_core.format.orc_concat import stripe_row_counts
from acid_core.format.orc_events import DELETE_OPERATION, INSERT_OPERATION, KEY_FIELDS, EventFile
from acid_core.format.orc_stripe_range import StripeRangeFile
from acid_core.format.rowid import encode_bucket
from acid_core.format.validity import ValidWriteIdList
from acid_core.read.merge import read_batches, read_snapshot
from acid_core.storage.fs import FileSystem

BUCKET = encode_bucket(0)


def _rows(ids: np.ndarray) -> pa.StructArray:
    return pa.StructArray.from_arrays([pa.array(ids, pa.int64()), pa.array(ids.astype(str).astype(object), pa.string())],
                                      names=["id", "s"])


def _write(path: str, operation: int, write_id: int, row_ids: np.ndarray, *, stripe_rows: int,
           original: int | None = None) -> None:
    """An event file of `row_ids` (of write id `original`, default `write_id`) in stripes of `stripe_rows` rows."""
    original = write_id if original is None else original

    def table(part: np.ndarray) -> pa.Table:
        rows = _rows(part) if operation == INSERT_OPERATION else null_rows(_rows(part[:0]).type, len(part))
        return event_table(operation, np.full(len(part), original), np.full(len(part), BUCKET), part,
                           np.full(len(part), write_id), rows)

    sample = table(row_ids[:stripe_rows])  # the writer sizes stripes by decoded bytes
    with EventStreamWriter(FileSystem(), path, stripe_bytes=int(sample.nbytes / sample.num_rows * stripe_rows) + 1) as writer:
        for start in range(0, len(row_ids), stripe_rows):
            writer.write(table(row_ids[start:start + stripe_rows]))
        writer.close()


def _stripe_spans(path: str) -> list[tuple[int, int]]:
    """(first row, rows) of every stripe."""
    spans, first = [], 0
    for rows in stripe_row_counts(FileSystem(), path):
        spans.append((first, rows))
        first += rows
    return spans


def _damage_stripes(path: str, stripes: range) -> None:
    """Overwrite the data of the given stripes with garbage (their offsets and lengths from the footer)."""
    handle = pa.OSFile(path)
    from acid_core.format.orc_concat import _F_STRIPES, _fields, _payload, _uint, read_tail
    part = read_tail(handle, path)
    handle.close()
    raw = part.values(_F_STRIPES)
    with open(path, "r+b") as out:
        for index in stripes:
            fields = {n: _uint(v) for n, w, v in _fields(_payload(raw[index])) if w == 0}
            out.seek(fields[1])
            out.write(b"\xff" * (fields[2] + fields[3]))  # index and data streams


@pytest.fixture
def base(tmp_path):
    """A base of 600,000 rows in 4 stripes of more than a batch (131,072 rows)."""
    path = tmp_path / "t" / base_dir_name(1) / bucket_file_name(0)
    _write(str(path), INSERT_OPERATION, 1, np.arange(600_000, dtype=np.int64), stripe_rows=150_000)
    return path


@pytest.mark.parametrize("compression", ["ZLIB", "SNAPPY", "NONE"])
def test_a_view_of_some_stripes_reads_exactly_those_stripes(tmp_path, compression):
    table = pa.table({"a": np.arange(100_000), "s": pa.array([str(i) for i in range(100_000)])})
    path = str(tmp_path / "f.orc")
    pa_orc.write_table(table, path, compression=compression.lower() if compression != "NONE" else "uncompressed",
                       batch_size=30_000, stripe_size=1)
    whole = pa_orc.ORCFile(path)
    with pa.OSFile(path) as handle:
        for first, stop in [(0, 1), (1, 3), (2, whole.nstripes)]:
            view = StripeRangeFile(handle, path, first, stop)
            fragment = pa_ds.OrcFileFormat().make_fragment(view)
            got = pa.Table.from_batches(list(fragment.to_batches(batch_size=7_000, use_threads=False)))
            expected = pa.Table.from_batches([whole.read_stripe(i) for i in range(first, stop)])
            assert got.equals(expected)
            assert view.rows == expected.num_rows


def test_a_stripe_range_outside_the_file_is_refused(tmp_path, base):
    with pa.OSFile(str(base)) as handle:
        with pytest.raises(CorruptFileError, match="stripes 3..4 asked for, the file has 4"):
            StripeRangeFile(handle, str(base), 3, 5)


def test_batches_of_later_stripes_never_decode_the_earlier_ones(base):
    spans = _stripe_spans(str(base))
    assert len(spans) == 4
    _damage_stripes(str(base), range(0, 2))
    event_file = EventFile(FileSystem(), str(base))
    batches = list(event_file.iter_batches(["rowId"], batch_rows=10_000, stripes=range(2, 4)))
    assert max(b.num_rows for b in batches) <= 10_000
    ids = np.concatenate([b.column(0).to_numpy() for b in batches])
    start = spans[2][0]
    assert ids.tolist() == list(range(start, 600_000))
    with pytest.raises(CorruptFileError):  # the damage is real: reading from the start fails
        list(event_file.iter_batches(["rowId"], stripes=range(0, 4)))


def test_a_read_task_of_one_stripe_streams_it(base):
    """A Spark read task's unit (one stripe) comes in batches, not as a decoded stripe."""
    from acid_core.read.merge import PartitionReader
    from acid_core.read.read_plan import plan_read
    from acid_core.read.state import get_acid_state
    spans = _stripe_spans(str(base))
    target = 2
    _damage_stripes(str(base), range(0, target))
    fs = FileSystem()
    write_ids = ValidWriteIdList()
    plan = plan_read(fs, get_acid_state(str(base.parent.parent), write_ids=write_ids, fs=fs), write_ids)
    reader = PartitionReader(fs, plan, write_ids, column_names=["id", "s"], include_row_id=True)
    units = reader.units()
    assert [stripe for _, stripe in units] == list(range(len(spans)))
    pieces = list(reader.read_pieces(units[target]))
    assert len(pieces) > 1 and max(p.num_rows for p in pieces) <= 131_072
    ids = np.concatenate([p.column("id").to_numpy() for p in pieces])
    first, rows = spans[target]
    assert rows > 131_072 and ids.tolist() == list(range(first, first + rows))


def test_delete_keys_of_an_interval_come_from_the_stripes_that_can_hold_it(tmp_path):
    path = tmp_path / delta_dir_name(2, 2, delete=True) / bucket_file_name(0)
    # irregular rowIds: ORC's writer closes a stripe by compressed size, which runs of regular values never reach
    row_ids = np.unique(np.random.default_rng(3).integers(0, 4_000_000, 220_000)).astype(np.int64)
    _write(str(path), DELETE_OPERATION, 2, row_ids, stripe_rows=50_000, original=1)
    event_file = EventFile(FileSystem(), str(path))
    assert event_file.num_stripes >= 3
    ends = [key[2] for key in event_file.key_index()]
    low, high = (1, BUCKET, ends[0] + 10), (1, BUCKET, ends[1] - 10)  # inside the second stripe
    assert stripes_holding(event_file, low, high) == range(1, 2)
    assert stripes_holding(event_file, (1, BUCKET, ends[0]), high) == range(0, 2)
    assert stripes_holding(event_file, low, (1, BUCKET, ends[1] + 1)) == range(1, 3)
    _damage_stripes(str(path), range(0, 1))
    _damage_stripes(str(path), range(2, event_file.num_stripes))
    keys = read_delete_keys(EventFile(FileSystem(), str(path)), ValidWriteIdList(), check_validity=False,
                            low=low, high=high)
    assert keys.rowid.tolist() == [r for r in row_ids.tolist() if low[2] <= r <= high[2]]
    assert set(keys.owid.tolist()) == {1}


def test_reads_with_deletes_held_per_stripe_interval_match_the_whole_registry(tmp_path):
    """A partition whose base has several stripes and whose deletes span them: read with the registry loaded per
    stripe's key interval, with the sort-merge, and as one table; all agree with the model."""
    location = tmp_path / "t"
    _write(str(location / base_dir_name(1) / bucket_file_name(0)), INSERT_OPERATION, 1,
           np.arange(400_000, dtype=np.int64), stripe_rows=100_000)
    _write(str(location / delta_dir_name(2, 2) / bucket_file_name(0)), INSERT_OPERATION, 2,
           np.arange(1_000, dtype=np.int64), stripe_rows=1_000)
    deleted_base = np.unique(np.random.default_rng(5).integers(0, 400_000, 120_000)).astype(np.int64)
    path = location / delta_dir_name(3, 3, delete=True) / bucket_file_name(0)
    with EventStreamWriter(FileSystem(), str(path), stripe_bytes=40_000 * 44) as writer:
        for write_id, row_ids in [(1, deleted_base), (2, np.array([0, 999], dtype=np.int64))]:
            writer.write(event_table(DELETE_OPERATION, np.full(len(row_ids), write_id), np.full(len(row_ids), BUCKET),
                                     row_ids, np.full(len(row_ids), 3), null_rows(_rows(row_ids[:0]).type, len(row_ids))))
        writer.close()
    assert EventFile(FileSystem(), str(path)).num_stripes > 1
    expected = sorted(set(range(400_000)) - set(deleted_base.tolist())) + list(range(1, 999))
    for limit in (10_000_000, 0):
        streamed = read_batches(str(location), max_delete_events_in_memory=limit, column_names=["id", "s"])
        ids = [i for batch in streamed for i in batch.column("id").to_pylist()]
        assert ids == expected
        table = read_snapshot(str(location), max_delete_events_in_memory=limit, column_names=["id", "s"])
        assert table.column("id").to_pylist() == expected
        assert table.column("s").to_pylist()[:3] == [str(i) for i in expected[:3]]


def test_key_fields_of_a_stripe_view_keep_their_order(base):
    event_file = EventFile(FileSystem(), str(base))
    batches = list(event_file.iter_batches(list(KEY_FIELDS), stripes=range(1, 3)))
    assert [f.name for f in batches[0].schema] == list(KEY_FIELDS)


def test_a_split_cuts_at_a_stripe_end_when_that_costs_less_than_decoding_in_vain(tmp_path):
    """Stripes of 182,706 x 3 and 51,882 rows cut in 2, 3 and 4 parts: each cut stays at its even place unless the
    end of its stripe is nearer than DECODE_SHARE of the rows a part starting there would decode in vain (cut in 4,
    the first cut, 150,000 rows into the first stripe, moves 32,706 rows on to the stripe's end); both happen here."""
    from acid_core.compaction.plan import DECODE_SHARE, split_keys
    from acid_core.read.read_plan import InsertSource

    path = tmp_path / base_dir_name(1) / bucket_file_name(0)
    _write(str(path), INSERT_OPERATION, 1, np.arange(600_000, dtype=np.int64), stripe_rows=150_000)
    spans = _stripe_spans(str(path))
    ends = EventFile(FileSystem(), str(path)).key_index()
    source = InsertSource(str(path), check_validity=False)
    seen = set()
    for parts in (2, 3, 4):
        bounds = split_keys(FileSystem(), [source], parts)
        assert len(bounds) == parts - 1
        for k, bound in enumerate(bounds, start=1):
            target = 600_000 * k / parts
            starts = [first for first, _ in spans]
            stripe = max(i for i, first in enumerate(starts) if first < target)
            reached_end = spans[stripe][0] + spans[stripe][1]
            snapped = reached_end - target < DECODE_SHARE * (target - spans[stripe][0])
            seen.add(snapped)
            if snapped:
                assert bound == ends[stripe], (parts, k, bound)
            else:
                assert bound[2] - target == pytest.approx(0, abs=600_000 / (parts * 32) + 1), (parts, k, bound)
    assert seen == {True, False}
