"""The columnar event-file writer (pyarrow's ORC writer plus Hive's user metadata patched into the footer) and the
footer patch itself (orc_tail.with_user_metadata).

Files are read back with pyorc and pyarrow, not with the module that wrote them; the expected metadata is Hive's
(hive-acid-reference.md section 4): `hive.acid.key.index` = the last (originalTransaction, bucket, rowId) of every
stripe, `hive.acid.stats` = "inserts,updates,deletes", `hive.acid.version` = "2".
"""

from __future__ import annotations

import os
import random
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.orc as pa_orc
import pyorc
import pytest
from support.model import v1_bucket_property

from acid_core.errors import CorruptFileError, FileSystemError, SchemaMismatchError, UnsortedEventsError
from acid_core.format.orc_columnar import event_table, null_rows, rows_struct, write_event_table
from acid_core.format.orc_events import EventFile
from acid_core.format.orc_tail import parse_postscript, with_user_metadata
from acid_core.storage.fs import FileSystem

B0, B1 = v1_bucket_property(0), v1_bucket_property(1)
KEY = ("originalTransaction", "bucket", "rowId")
ROWS = pa.table({"id": pa.array([1, 2, 3], pa.int32()), "name": pa.array(["a", None, "c"], pa.string())})
COMPRESSION_KINDS = {"ZLIB": pyorc.CompressionKind.ZLIB, "SNAPPY": pyorc.CompressionKind.SNAPPY,
                     "NONE": pyorc.CompressionKind.NONE}


@pytest.fixture
def fs() -> FileSystem:
    return FileSystem.resolve("/")[0]


def small_events() -> pa.Table:
    return event_table(0, np.array([5, 5, 7]), np.array([B0, B1, B0]), np.array([0, 0, 3]), np.array([5, 5, 7]),
                       rows_struct(ROWS))


def many_events(count: int) -> pa.Table:
    """`count` insert events in key order: three write ids of count/3 events, each half in bucket 0 and half in
    bucket 1 with rowIds from 0 (as a writer numbers rows per bucket); the strings are random (incompressible)."""
    owid, bucket, row_id = [], [], []
    for write_id, size in zip((3, 4, 9), (count // 3, count // 3, count - 2 * (count // 3))):
        half = size // 2
        owid.append(np.full(size, write_id))
        bucket.append(np.repeat([B0, B1], [half, size - half]))
        row_id.append(np.concatenate([np.arange(half), np.arange(size - half)]))
    owid, bucket, row_id = np.concatenate(owid), np.concatenate(bucket), np.concatenate(row_id)
    names = pa.array([f"{value:x}" for value in np.random.default_rng(7).integers(0, 2**62, count)], pa.string())
    rows = rows_struct(pa.table({"id": pa.array(np.arange(count, dtype=np.int32)), "name": names}))
    return event_table(0, owid, bucket, row_id, owid, rows)


def user_metadata(path: str | Path) -> dict[str, bytes]:
    with open(path, "rb") as stream:
        return dict(pyorc.Reader(stream).user_metadata)


def listing(directory: Path) -> list[str]:
    return sorted(os.listdir(directory))


# --- write_event_table --------------------------------------------------------------------------------------------


def test_insert_events_get_hives_user_metadata(tmp_path, fs):
    path = tmp_path / "bucket_00000"
    stats = write_event_table(fs, str(path), small_events())
    assert (stats.inserts, stats.updates, stats.deletes) == (3, 0, 0)
    assert user_metadata(path) == {"hive.acid.key.index": b"7,%d,3;" % B0, "hive.acid.stats": b"3,0,0",
                                   "hive.acid.version": b"2"}
    assert listing(tmp_path) == ["bucket_00000"]


def test_delete_events_get_delete_stats(tmp_path, fs):
    path = tmp_path / "bucket_00001"
    row_type = pa.struct([("id", pa.int32()), ("name", pa.string())])
    events = event_table(2, np.array([1, 1, 2]), np.array([B1] * 3), np.array([4, 9, 0]), np.array([6, 6, 6]),
                         null_rows(row_type, 3))
    write_event_table(fs, str(path), events)
    metadata = user_metadata(path)
    assert metadata["hive.acid.stats"] == b"0,0,3"
    assert metadata["hive.acid.key.index"] == b"2,%d,0;" % B1
    read = pa_orc.read_table(str(path))
    assert read.column("row").null_count == 3 and read.schema.field("row").type == row_type
    assert read.column("operation").to_pylist() == [2, 2, 2]


def test_key_index_holds_the_last_key_of_every_stripe(tmp_path, fs):
    path = tmp_path / "bucket_00000"
    events = many_events(120_000)
    write_event_table(fs, str(path), events, stripe_bytes=64 * 1024)
    orc = pa_orc.ORCFile(str(path))
    assert orc.nstripes >= 3
    last_keys = []
    for stripe in range(orc.nstripes):
        batch = orc.read_stripe(stripe, columns=list(KEY))
        last_keys.append(tuple(batch.column(i)[batch.num_rows - 1].as_py() for i in range(3)))
    assert last_keys[-1] == (9, B1, 19_999)
    assert user_metadata(path)["hive.acid.key.index"] == "".join("{},{},{};".format(*key) for key in last_keys).encode()
    assert EventFile(fs, str(path)).key_index() == last_keys
    assert orc.read().equals(events)


@pytest.mark.parametrize("compression", ["ZLIB", "SNAPPY", "NONE", "snappy"])
def test_compressions_hive_reads(tmp_path, fs, compression):
    path = tmp_path / "bucket_00000"
    events = many_events(3000)
    write_event_table(fs, str(path), events, compression=compression)
    with open(path, "rb") as stream:
        reader = pyorc.Reader(stream)
        assert reader.compression is COMPRESSION_KINDS[compression.upper()]
        assert reader.user_metadata["hive.acid.stats"] == b"3000,0,0"
        assert len(list(reader)) == 3000
    assert pa_orc.read_table(str(path)).equals(events)


@pytest.mark.parametrize("compression", ["ZSTD", "zstd", "LZ4", "LZO", "gzip"])
def test_compressions_hive_3_cannot_read_are_refused(tmp_path, fs, compression):
    with pytest.raises(SchemaMismatchError, match="ZSTD") as error:
        write_event_table(fs, str(tmp_path / "bucket_00000"), small_events(), compression=compression)
    assert repr(compression) in str(error.value)
    assert listing(tmp_path) == []


@pytest.mark.parametrize("keys", [
    ([2, 1], [B0, B0], [0, 0]),    # write ids descending
    ([1, 1], [B1, B0], [0, 0]),    # buckets descending
    ([1, 1], [B0, B0], [5, 4]),    # row ids descending
], ids=["write-id", "bucket", "row-id"])
def test_unsorted_events_are_refused(tmp_path, fs, keys):
    owid, bucket, row_id = (np.array(k) for k in keys)
    events = event_table(0, owid, bucket, row_id, owid, rows_struct(ROWS.slice(0, 2)))
    with pytest.raises(UnsortedEventsError, match="originalTransaction, bucket, rowId"):
        write_event_table(fs, str(tmp_path / "bucket_00000"), events)
    assert listing(tmp_path) == []


def _with_column(events: pa.Table, index: int, array: pa.Array) -> pa.Table:
    return events.set_column(index, events.schema.field(index).name, array)


NOT_EVENTS = {
    "plain-rows": lambda events: ROWS,
    "no-row-column": lambda events: events.drop_columns(["row"]),
    "columns-reordered": lambda events: events.select([1, 0, 2, 3, 4, 5]),
    "bucket-bigint": lambda events: _with_column(events, 2, pa.array([B0, B1, B0], pa.int64())),
    "operation-bigint": lambda events: _with_column(events, 0, pa.array([0, 0, 0], pa.int64())),
    "row-not-a-struct": lambda events: _with_column(events, 5, pa.array(["a", "b", "c"])),
    "row-type-orc-lacks": lambda events: _with_column(events, 5, pa.StructArray.from_arrays(
        [pa.array([1, 2, 3], pa.duration("s"))], names=["elapsed"])),
}


@pytest.mark.parametrize("change", NOT_EVENTS)
def test_a_table_that_is_not_in_the_event_schema_is_refused_and_nothing_is_written(tmp_path, fs, change):
    """Hive's readers (and acid_core's EventFile) take only the exact event schema and ORC types; a file in any
    other schema must not be written in the first place."""
    with pytest.raises(SchemaMismatchError):
        write_event_table(fs, str(tmp_path / "bucket_00000"), NOT_EVENTS[change](small_events()))
    assert listing(tmp_path) == []


def test_an_existing_destination_is_left_alone_and_no_scratch_file_remains(tmp_path, fs):
    path = tmp_path / "bucket_00000"
    path.write_bytes(b"someone else's file")
    with pytest.raises(FileSystemError, match="already exists"):
        write_event_table(fs, str(path), small_events())
    assert listing(tmp_path) == ["bucket_00000"]
    assert path.read_bytes() == b"someone else's file"


def test_scratch_file_is_hidden_beside_the_destination_until_it_is_complete(tmp_path, fs, monkeypatch):
    """On a local filesystem the file is built under a hidden name (which Hive's and acid_core's listings skip) in
    the destination's directory and renamed into place, so the visible name only ever holds a complete file."""
    seen = []
    original_write_table = pa_orc.write_table

    def observing_write_table(table, where, **options):
        original_write_table(table, where, **options)
        seen.append((where, listing(tmp_path / "dir")))

    monkeypatch.setattr(pa_orc, "write_table", observing_write_table)
    write_event_table(fs, str(tmp_path / "dir" / "bucket_00000"), small_events())
    ((scratch, during),) = seen
    assert os.path.dirname(scratch) == str(tmp_path / "dir")
    assert during == [os.path.basename(scratch)] and during[0].startswith(".bucket_00000.")
    assert listing(tmp_path / "dir") == ["bucket_00000"]
    assert user_metadata(tmp_path / "dir" / "bucket_00000")["hive.acid.stats"] == b"3,0,0"


def test_on_a_non_local_filesystem_the_scratch_file_is_local_and_removed(tmp_path, monkeypatch):
    """A filesystem that is not pyarrow's LocalFileSystem (here a sub-tree view standing in for HDFS or S3): the file
    is built in the local temp directory, copied up, and the local copy removed, also when the copy is refused."""
    scratch_dir = tmp_path / "local-temp"
    scratch_dir.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch_dir))
    (tmp_path / "remote" / "t" / "delta_0000001_0000001_0000").mkdir(parents=True)  # the caller makes directories
    remote = FileSystem(pafs.SubTreeFileSystem(str(tmp_path / "remote"), pafs.LocalFileSystem()))
    write_event_table(remote, "t/delta_0000001_0000001_0000/bucket_00000", small_events())
    written = tmp_path / "remote" / "t" / "delta_0000001_0000001_0000" / "bucket_00000"
    assert user_metadata(written)["hive.acid.key.index"] == b"7,%d,3;" % B0
    assert pa_orc.read_table(str(written)).equals(small_events())
    with pytest.raises(FileSystemError, match="already exists"):
        write_event_table(remote, "t/delta_0000001_0000001_0000/bucket_00000", small_events())
    assert listing(scratch_dir) == []


def test_written_files_read_the_same_through_pyarrow_and_event_file(tmp_path, fs):
    path = tmp_path / "bucket_00000"
    events = small_events()
    write_event_table(fs, str(path), events)
    assert pa_orc.read_table(str(path)).equals(events)
    event_file = EventFile(fs, str(path))
    assert event_file.is_acid and event_file.num_rows == 3 and event_file.num_stripes == 1
    assert event_file.row_type == pa.struct([("id", pa.int32()), ("name", pa.string())])
    assert (event_file.stats.inserts, event_file.stats.updates, event_file.stats.deletes) == (3, 0, 0)
    assert event_file.key_index() == [(7, B0, 3)]
    assert event_file.read(["row"]).column("row").to_pylist() == ROWS.to_pylist()
    with open(path, "rb") as stream:
        reader = pyorc.Reader(stream, struct_repr=pyorc.StructRepr.DICT)
        assert str(reader.schema) == ("struct<operation:int,originalTransaction:bigint,bucket:int,rowId:bigint,"
                                      "currentTransaction:bigint,row:struct<id:int,name:string>>")
        assert [event["row"] for event in reader] == ROWS.to_pylist()


# --- orc_tail.with_user_metadata ----------------------------------------------------------------------------------

PYARROW_KINDS = {"zlib": pyorc.CompressionKind.ZLIB, "snappy": pyorc.CompressionKind.SNAPPY,
                 "uncompressed": pyorc.CompressionKind.NONE}
PYARROW_COMPRESSIONS = list(PYARROW_KINDS)


def add_metadata(path: Path, items: dict[str, bytes]) -> None:
    """Patch the file's tail in place, reading the whole file as the tail."""
    data = path.read_bytes()
    cut, tail = with_user_metadata(data, items, path=str(path))
    path.write_bytes(data[:len(data) - cut] + tail)


def plain_table(rows: int = 20_000) -> pa.Table:
    """A plain (non-ACID) table whose random strings keep stripes large after compression."""
    values = np.random.default_rng(1).integers(0, 2**62, rows)
    return pa.table({"id": pa.array(np.arange(rows, dtype=np.int64)), "name": pa.array([f"{v:x}" for v in values])})


@pytest.mark.parametrize("compression", PYARROW_COMPRESSIONS)
def test_user_metadata_round_trips_on_pyarrow_files(tmp_path, compression):
    path = tmp_path / "file.orc"
    table = plain_table()
    pa_orc.write_table(table, str(path), compression=compression, stripe_size=64 * 1024)
    stripes = pa_orc.ORCFile(str(path)).nstripes
    assert stripes > 1 and user_metadata(path) == {}

    add_metadata(path, {"hive.acid.key.index": b"1,2,3;", "empty": b""})
    add_metadata(path, {"second": bytes(range(256))})

    assert user_metadata(path) == {"hive.acid.key.index": b"1,2,3;", "empty": b"", "second": bytes(range(256))}
    orc = pa_orc.ORCFile(str(path))
    assert orc.nstripes == stripes and orc.read().equals(table)
    assert dict(orc.metadata)[b"second"] == bytes(range(256))
    with open(path, "rb") as stream:
        assert pyorc.Reader(stream).compression is PYARROW_KINDS[compression]


@pytest.mark.parametrize("compression", PYARROW_COMPRESSIONS)
def test_a_footer_larger_than_one_compression_block(tmp_path, compression):
    """Metadata bigger than the 64 KiB compression block: the new footer is several chunks, and patching it again
    means decompressing several chunks (some stored raw: random bytes do not compress)."""
    path = tmp_path / "file.orc"
    table = plain_table(100)
    pa_orc.write_table(table, str(path), compression=compression)
    incompressible = random.Random(3).randbytes(150_000)
    compressible = b"1,536870912,0;" * 20_000

    add_metadata(path, {"random": incompressible, "index": compressible})
    add_metadata(path, {"after": b"x"})

    assert user_metadata(path) == {"random": incompressible, "index": compressible, "after": b"x"}
    assert pa_orc.read_table(str(path)).equals(table)


def test_only_the_tail_needs_to_be_given(tmp_path):
    """with_user_metadata works on the last bytes of a file (footer + postscript + 1), as write_event_table reads."""
    path = tmp_path / "file.orc"
    pa_orc.write_table(plain_table(), str(path), compression="zlib")
    data = path.read_bytes()
    postscript_length = data[-1]
    footer_length = parse_postscript(data[-1 - postscript_length:-1]).footer_length
    tail = data[-(footer_length + postscript_length + 1):]
    cut, new_tail = with_user_metadata(tail, {"k": b"v"}, path=str(path))
    assert cut == len(tail)
    path.write_bytes(data[:-cut] + new_tail)
    assert user_metadata(path) == {"k": b"v"}
    with pytest.raises(CorruptFileError, match="does not fit"):
        with_user_metadata(tail[10:], {"k": b"v"}, path=str(path))


@pytest.mark.parametrize("tail, message", [(b"", "empty file"), (b"\x00" * 3 + b"\x09", "exceeds the file")])
def test_a_tail_that_is_not_orc_is_refused(tail, message):
    with pytest.raises(CorruptFileError, match=message):
        with_user_metadata(tail, {"k": b"v"}, path="/x/bucket_00000")


@pytest.mark.parametrize("compression", ["zstd", "lz4"])
def test_compressions_it_cannot_encode_are_refused_not_corrupted(tmp_path, compression):
    """A footer in a compression this code does not implement is refused; it must never be re-encoded in another
    codec (a file that says LZ4 but holds a snappy footer cannot be opened by any reader)."""
    path = tmp_path / "file.orc"
    table = plain_table(100)
    pa_orc.write_table(table, str(path), compression=compression)
    data = path.read_bytes()
    try:
        cut, tail = with_user_metadata(data, {"k": b"v"}, path=str(path))
    except CorruptFileError as exc:
        assert "not supported" in str(exc)
        return
    path.write_bytes(data[:len(data) - cut] + tail)
    assert user_metadata(path) == {"k": b"v"}, "the patched file must stay readable"
    assert pa_orc.read_table(str(path)).equals(table)

