"""ORC ACID event files: schema, Hive's user metadata, compression and `_flush_length` side files.

Everything is checked on real files read back with pyarrow (and pyorc for the exact ORC type string), not through the
module that wrote them (hive-acid-reference.md sections 1 and 4: OrcRecordUpdater, AcidStats, OrcAcidUtils).
"""

from __future__ import annotations

import io
import struct
from pathlib import Path

import pyarrow as pa
import pyarrow.orc as pa_orc
import pyorc
import pytest
from support.model import tree, v1_bucket_property

from acid_core.errors import AcidError, CorruptFileError
from acid_core.format.orc_events import (
    DELETE_OPERATION,
    INSERT_OPERATION,
    AcidStats,
    Column,
    EventFile,
    EventFileWriter,
    event_schema,
    parse_columns,
    side_file_length,
)
from acid_core.format.rowid import RowId
from acid_core.format.validity import ValidWriteIdList
from acid_core.read.merge import read_snapshot
from acid_core.storage.fs import FileSystem
from acid_core.write.writer import EmbeddedWriter

COLUMNS = [("id", "int"), ("name", "string"), ("amount", "decimal(10,2)")]
B0 = v1_bucket_property(0)


def _user_metadata(path: Path) -> dict[str, str]:
    metadata = pa_orc.ORCFile(str(path)).metadata
    return {key.decode(): value.decode() for key, value in dict(metadata).items()}


def _insert_events(write_id: int, rows, *, bucket: int = B0, first_row_id: int = 0) -> list[tuple]:
    return [(INSERT_OPERATION, write_id, bucket, first_row_id + i, write_id, row) for i, row in enumerate(rows)]


def _write_event_file(path: Path, batches, *, columns=(("id", "int"),), stripe_rows: int = 1_000_000,
                      compression: str = "ZLIB") -> AcidStats:
    """Write `batches` [(operation, events)] into one event file with the library's writer."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as stream:
        writer = EventFileWriter(stream, parse_columns(columns), compression=compression, stripe_rows=stripe_rows)
        for operation, events in batches:
            writer.write(events, operation=operation)
        return writer.close()


# --- schema -------------------------------------------------------------------------------------------------------

def test_event_schema_type_string():
    assert event_schema(parse_columns(COLUMNS)) == (
        "struct<operation:int,originalTransaction:bigint,bucket:int,rowId:bigint,currentTransaction:bigint,"
        "row:struct<id:int,name:string,amount:decimal(10,2)>>")


def test_written_file_has_the_exact_event_schema(tmp_path):
    EmbeddedWriter(str(tmp_path), columns=COLUMNS).insert([(1, "a", None)], write_id=1)
    path = tmp_path / "delta_0000001_0000001_0000" / "bucket_00000"
    schema = pa_orc.ORCFile(str(path)).schema
    assert schema.names == ["operation", "originalTransaction", "bucket", "rowId", "currentTransaction", "row"]
    assert [field.type for field in schema][:5] == [pa.int32(), pa.int64(), pa.int32(), pa.int64(), pa.int64()]
    assert schema.field("row").type == pa.struct([("id", pa.int32()), ("name", pa.string()),
                                                  ("amount", pa.decimal128(10, 2))])
    with open(path, "rb") as stream:
        assert str(pyorc.Reader(stream).schema) == (
            "struct<operation:int,originalTransaction:bigint,bucket:int,rowId:bigint,currentTransaction:bigint,"
            "row:struct<id:int,name:string,amount:decimal(10,2)>>")


def test_insert_and_delete_event_contents(tmp_path):
    writer = EmbeddedWriter(str(tmp_path), columns=[("id", "int"), ("name", "string")])
    writer.insert([(10, "a"), (11, "b"), (12, None)], write_id=3, statement_id=2)
    writer.delete([RowId(3, v1_bucket_property(0, 2), 1), RowId(3, v1_bucket_property(0, 2), 0)], write_id=4)
    inserts = pa_orc.read_table(str(tmp_path / "delta_0000003_0000003_0002" / "bucket_00000")).to_pylist()
    assert inserts == [
        {"operation": 0, "originalTransaction": 3, "bucket": 536870914, "rowId": 0, "currentTransaction": 3,
         "row": {"id": 10, "name": "a"}},
        {"operation": 0, "originalTransaction": 3, "bucket": 536870914, "rowId": 1, "currentTransaction": 3,
         "row": {"id": 11, "name": "b"}},
        {"operation": 0, "originalTransaction": 3, "bucket": 536870914, "rowId": 2, "currentTransaction": 3,
         "row": {"id": 12, "name": None}},
    ]
    deletes = pa_orc.read_table(str(tmp_path / "delete_delta_0000004_0000004_0000" / "bucket_00000")).to_pylist()
    assert deletes == [  # sorted by key, whatever order the caller gave
        {"operation": 2, "originalTransaction": 3, "bucket": 536870914, "rowId": 0, "currentTransaction": 4, "row": None},
        {"operation": 2, "originalTransaction": 3, "bucket": 536870914, "rowId": 1, "currentTransaction": 4, "row": None},
    ]


def test_event_file_reports_schema_and_row_type(tmp_path):
    path = tmp_path / "bucket_00000"
    _write_event_file(path, [(INSERT_OPERATION, _insert_events(1, [(1, "x", None)]))], columns=COLUMNS)
    event_file = EventFile(FileSystem(), str(path))
    assert event_file.is_acid and event_file.num_rows == 1
    assert event_file.row_type.names == ["id", "name", "amount"]


def test_plain_orc_file_is_not_acid(tmp_path):
    path = tmp_path / "000000_0"
    pa_orc.write_table(pa.table({"id": pa.array([1, 2], pa.int32())}), str(path))
    event_file = EventFile(FileSystem(), str(path))
    assert not event_file.is_acid and event_file.row_type.names == ["id"] and event_file.stats is None


def test_parse_columns_rejects_bad_columns():
    with pytest.raises(AcidError, match="at least one column"):
        parse_columns([])
    with pytest.raises(AcidError, match="'ID'"):
        parse_columns([("id", "int"), ("ID", "string")])
    with pytest.raises(AcidError, match="not_a_type"):
        parse_columns([("id", "not_a_type")])
    assert parse_columns([Column("a", "int"), ("b", "string")]) == (Column("a", "int"), Column("b", "string"))


def test_writer_rejects_unknown_operation(tmp_path):
    with open(tmp_path / "f", "wb") as stream:
        writer = EventFileWriter(stream, parse_columns([("id", "int")]))
        with pytest.raises(AcidError, match="operation 7"):
            writer.write([(7, 1, B0, 0, 1, (1,))], operation=7)
        writer.close()


# --- user metadata ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("sizes", [[3000], [700, 1500, 900], [1024], [1025], [5]])
def test_key_index_is_the_last_key_of_every_stripe(tmp_path, sizes):
    """One `<owid>,<bucket>,<rowId>;` entry per stripe, equal to the stripe's last event (KeyIndexBuilder)."""
    path = tmp_path / "bucket_00000"
    batches, next_row = [], 0
    for write_id, size in enumerate(sizes, start=1):  # each batch another write id, as in a compacted file
        batches.append((INSERT_OPERATION, _insert_events(write_id, [(i,) for i in range(size)], first_row_id=next_row)))
        next_row += size
    _write_event_file(path, batches, stripe_rows=1024)
    orc = pa_orc.ORCFile(str(path))
    total = sum(sizes)
    assert orc.nrows == total and orc.nstripes == -(-total // 1024)
    expected = []
    for stripe in range(orc.nstripes):
        batch = orc.read_stripe(stripe, columns=["originalTransaction", "bucket", "rowId"]).to_pylist()
        assert len(batch) == min(1024, total - 1024 * stripe)
        last = batch[-1]
        expected.append(f"{last['originalTransaction']},{last['bucket']},{last['rowId']};")
    assert _user_metadata(path)["hive.acid.key.index"] == "".join(expected)
    assert EventFile(FileSystem(), str(path)).key_index() == [
        tuple(int(v) for v in entry.rstrip(";").split(",")) for entry in expected]


def test_stripe_rows_below_a_batch_round_up_to_whole_batches(tmp_path):
    """Stripes are cut only on pyorc's 1024-row batch boundaries, so the key index still matches the stripes."""
    path = tmp_path / "bucket_00000"
    _write_event_file(path, [(INSERT_OPERATION, _insert_events(1, [(i,) for i in range(2500)]))], stripe_rows=10)
    orc = pa_orc.ORCFile(str(path))
    assert orc.nstripes == 3
    assert _user_metadata(path)["hive.acid.key.index"] == f"1,{B0},1023;1,{B0},2047;1,{B0},2499;"


def test_stats_and_version_metadata(tmp_path):
    writer = EmbeddedWriter(str(tmp_path), columns=[("id", "int")])
    writer.insert([(i,) for i in range(7)], write_id=1)
    writer.delete([RowId(1, B0, 0), RowId(1, B0, 3)], write_id=2)
    writer.update([RowId(1, B0, 5)], [(50,)], write_id=3)
    expected = {
        "delta_0000001_0000001_0000": "7,0,0",
        "delete_delta_0000002_0000002_0000": "0,0,2",
        "delete_delta_0000003_0000003_0000": "0,0,1",
        "delta_0000003_0000003_0000": "1,0,0",
    }
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(expected)
    for directory, stats in expected.items():
        metadata = _user_metadata(tmp_path / directory / "bucket_00000")
        assert metadata["hive.acid.stats"] == stats
        assert metadata["hive.acid.version"] == "2"
        assert EventFile(FileSystem(), str(tmp_path / directory / "bucket_00000")).stats == AcidStats(
            *(int(v) for v in stats.split(",")))


def test_writer_close_returns_stats(tmp_path):
    stats = _write_event_file(tmp_path / "f", [
        (INSERT_OPERATION, _insert_events(1, [(1,), (2,)])),
        (DELETE_OPERATION, [(DELETE_OPERATION, 1, B0, 5, 2, None)]),
    ])
    assert stats == AcidStats(2, 0, 1) and AcidStats(2, 0, 1).serialize() == b"2,0,1"


def test_acid_version_file_in_every_written_directory(tmp_path):
    writer = EmbeddedWriter(str(tmp_path), columns=[("id", "int")], partition_keys=["ds"], bucket_count=2,
                            bucket_function=lambda row: row[0] % 2)
    writer.insert([(1,), (2,)], write_id=1, partition={"ds": "a"})
    writer.insert([(3,)], write_id=1, statement_id=1, partition={"ds": "b"})
    writer.delete([RowId(1, v1_bucket_property(1), 0)], write_id=2, partition={"ds": "a"})
    writer.update([RowId(1, v1_bucket_property(0), 0)], [(4,)], write_id=3, partition={"ds": "a"})
    directories = [p for p in tmp_path.rglob("*") if p.is_dir() and p.name.startswith(("delta_", "delete_delta_"))]
    assert len(directories) == 5
    for directory in directories:
        assert (directory / "_orc_acid_version").read_bytes() == b"2", directory


# --- compression --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("asked", "stored"), [("ZLIB", "ZLIB"), ("SNAPPY", "SNAPPY"), ("snappy", "SNAPPY"),
                                               ("NONE", "UNCOMPRESSED")])
def test_compression(tmp_path, asked, stored):
    writer = EmbeddedWriter(str(tmp_path), columns=[("id", "int")], compression=asked)
    writer.insert([(i,) for i in range(100)], write_id=1)
    writer.delete([RowId(1, B0, 3)], write_id=2)
    for directory in ("delta_0000001_0000001_0000", "delete_delta_0000002_0000002_0000"):
        assert pa_orc.ORCFile(str(tmp_path / directory / "bucket_00000")).compression == stored
    assert read_snapshot(str(tmp_path)).num_rows == 99


def test_default_compression_is_zlib(tmp_path):
    EmbeddedWriter(str(tmp_path), columns=[("id", "int")]).insert([(1,)], write_id=1)
    assert pa_orc.ORCFile(str(tmp_path / "delta_0000001_0000001_0000" / "bucket_00000")).compression == "ZLIB"


def test_zstd_is_refused_by_the_event_writer():
    with pytest.raises(AcidError, match="ZSTD") as caught:
        EventFileWriter(io.BytesIO(), parse_columns([("id", "int")]), compression="ZSTD")
    assert "cannot read ZSTD" in str(caught.value)


def test_zstd_is_refused_by_the_embedded_writer_and_nothing_is_written(tmp_path):
    table = tmp_path / "t"
    table.mkdir()
    with pytest.raises(AcidError, match="ZSTD"):
        EmbeddedWriter(str(table), columns=[("id", "int")], compression="zstd").insert([(1,)], write_id=1)
    assert tree(table) == []


# --- _flush_length side files -------------------------------------------------------------------------------------

def _longs(*values: int) -> bytes:
    return b"".join(struct.pack(">q", value) for value in values)


def test_side_file_length_uses_the_last_complete_long(tmp_path):
    fs = FileSystem()
    side = tmp_path / "bucket_00000_flush_length"
    assert side_file_length(fs, str(side)) is None
    side.write_bytes(_longs(0))
    assert side_file_length(fs, str(side)) == 0
    side.write_bytes(_longs(0, 658, 1361))
    assert side_file_length(fs, str(side)) == 1361
    side.write_bytes(_longs(0, 658) + b"\x00\x00\x05")  # a long being appended: Hive's readLong loop stops at EOF
    assert side_file_length(fs, str(side)) == 658
    side.write_bytes(_longs(2**40))
    assert side_file_length(fs, str(side)) == 2**40


@pytest.mark.parametrize("content", [b"", b"\x00\x00\x00\x00\x00\x07"])
def test_side_file_shorter_than_a_long_is_corrupt(tmp_path, content):
    side = tmp_path / "bucket_00000_flush_length"
    side.write_bytes(content)
    with pytest.raises(CorruptFileError) as caught:
        side_file_length(FileSystem(), str(side))
    assert str(side) in str(caught.value)


def _streaming_file_with_tail(path: Path) -> tuple[bytes, list[int]]:
    """A streaming bucket file as a crashed writer leaves it: two flushed stripes, then part of a third.

    Returns the bytes and the lengths after each intermediate footer (what the side file records).
    """
    stream = io.BytesIO()
    writer = EventFileWriter(stream, parse_columns([("id", "int")]), stripe_rows=1024)
    flushed = []
    for write_id in (10, 11, 12):
        writer.write(_insert_events(write_id, [(write_id * 10_000 + i,) for i in range(1024)]),
                     operation=INSERT_OPERATION)
        flushed.append(len(stream.getvalue()))
    writer.close()
    data = stream.getvalue()
    crashed = data[:flushed[1]] + data[flushed[1]:flushed[2]][: (flushed[2] - flushed[1]) // 2]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(crashed)
    return crashed, flushed


def test_reader_stops_at_the_side_file_length(tmp_path):
    delta = tmp_path / "delta_0000010_0000012"
    bucket = delta / "bucket_00000"
    crashed, flushed = _streaming_file_with_tail(bucket)
    # Without a side file the damaged tail makes the file unreadable.
    with pytest.raises(CorruptFileError, match="bucket_00000"):
        read_snapshot(str(tmp_path))
    (delta / "bucket_00000_flush_length").write_bytes(_longs(0, flushed[0], flushed[1]))
    before = tree(tmp_path)
    result = read_snapshot(str(tmp_path), include_row_id=True, order_by_row_id=True)
    assert result.num_rows == 2048
    ids = result.column("id").to_pylist()
    assert ids == [100_000 + i for i in range(1024)] + [110_000 + i for i in range(1024)]
    assert {row["writeid"] for row in result.column("row__id").to_pylist()} == {10, 11}
    assert tree(tmp_path) == before
    # Same file, the side file only up to the first flush; with write id 10 open nothing is left to see.
    (delta / "bucket_00000_flush_length").write_bytes(_longs(0, flushed[0]))
    assert read_snapshot(str(tmp_path)).num_rows == 1024
    snapshot = ValidWriteIdList.parse("default.t:12:10:10:")
    assert read_snapshot(str(tmp_path), write_ids=snapshot).num_rows == 0


def test_side_file_length_on_both_delete_paths(tmp_path):
    delta = tmp_path / "delta_0000010_0000012"
    _, flushed = _streaming_file_with_tail(delta / "bucket_00000")
    (delta / "bucket_00000_flush_length").write_bytes(_longs(0, flushed[0], flushed[1]))
    EmbeddedWriter(str(tmp_path), columns=[("id", "int")]).delete(
        [RowId(10, B0, 0), RowId(11, B0, 1023), RowId(12, B0, 0)], write_id=13)
    expected = [100_000 + i for i in range(1, 1024)] + [110_000 + i for i in range(1023)]
    for delete_path in (10_000_000, 0):
        result = read_snapshot(str(tmp_path), order_by_row_id=True, max_delete_events_in_memory=delete_path)
        assert result.column("id").to_pylist() == expected


def test_complete_file_with_garbage_tail_and_side_file(tmp_path):
    delta = tmp_path / "delta_0000010_0000012"
    bucket = delta / "bucket_00000"
    _write_event_file(bucket, [(INSERT_OPERATION, _insert_events(10, [(i,) for i in range(5)]))])
    good = bucket.stat().st_size
    with open(bucket, "ab") as stream:
        stream.write(b"ORC\x00garbage-tail" * 10)
    (delta / "bucket_00000_flush_length").write_bytes(_longs(0, good))
    assert read_snapshot(str(tmp_path)).column("id").to_pylist() == [0, 1, 2, 3, 4]


def test_side_file_holding_zero_means_nothing_flushed_yet(tmp_path):
    delta = tmp_path / "delta_0000010_0000012"
    _streaming_file_with_tail(delta / "bucket_00000")
    (delta / "bucket_00000_flush_length").write_bytes(_longs(0))
    assert read_snapshot(str(tmp_path)).num_rows == 0


def test_unreadable_side_file_names_its_path(tmp_path):
    delta = tmp_path / "delta_0000010_0000012"
    _streaming_file_with_tail(delta / "bucket_00000")
    side = delta / "bucket_00000_flush_length"
    side.write_bytes(b"\x00\x01\x02")
    before = tree(tmp_path)
    with pytest.raises(CorruptFileError) as caught:
        read_snapshot(str(tmp_path))
    assert str(side) in str(caught.value)
    assert tree(tmp_path) == before


def test_side_file_is_ignored_where_hive_never_writes_one(tmp_path):
    """mayContainSideFile: only insert deltas over a write-id range without a visibility suffix."""
    writer = EmbeddedWriter(str(tmp_path), columns=[("id", "int")])
    writer.insert([(1,), (2,)], write_id=1)
    (tmp_path / "delta_0000001_0000001_0000" / "bucket_00000_flush_length").write_bytes(b"\x00")
    _write_event_file(tmp_path / "delta_0000002_0000003_v0000009" / "bucket_00000",
                      [(INSERT_OPERATION, _insert_events(2, [(3,)]))])
    (tmp_path / "delta_0000002_0000003_v0000009" / "bucket_00000_flush_length").write_bytes(_longs(0))
    assert sorted(read_snapshot(str(tmp_path)).column("id").to_pylist()) == [1, 2, 3]
