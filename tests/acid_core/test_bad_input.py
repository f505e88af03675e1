"""Damaged or foreign input: every failure is an AcidError naming the file or value, and a read changes nothing.

A reader must never "repair" a table: the recursive listing (names and sizes) is the same before and after.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.orc as pa_orc
import pyorc
import pytest
from support.model import tree, v1_bucket_property

from acid_core.errors import (
    AcidError,
    CorruptFileError,
    FileSystemError,
    InvalidNameError,
    InvalidValidityListError,
    SchemaMismatchError,
    UnsortedEventsError,
)
from acid_core.format.orc_events import EventFile, event_schema, parse_columns
from acid_core.format.rowid import RowId
from acid_core.format.validity import ValidTxnList, ValidWriteIdList
from acid_core.read.merge import read_snapshot
from acid_core.read.state import get_acid_state
from acid_core.storage.fs import FileSystem
from acid_core.write.writer import EmbeddedWriter

COLUMNS = [("id", "int"), ("name", "string")]
B0 = v1_bucket_property(0)
DELETE_PATHS = {"registry": 10_000_000, "sort-merge": 0}


@pytest.fixture
def table(tmp_path) -> Path:
    """A healthy table (an insert, a delete) that each test then damages in one way."""
    location = tmp_path / "t"
    writer = EmbeddedWriter(str(location), columns=COLUMNS)
    writer.insert([(i, f"r{i}") for i in range(50)], write_id=1)
    writer.delete([RowId(1, B0, 3)], write_id=2)
    return location


def _expect_failure(location: Path, error: type[AcidError], named: str, **options) -> AcidError:
    """read_snapshot fails with `error` (on both delete paths) naming `named`, and the directory is untouched."""
    before = tree(location)
    caught = None
    for delete_path in DELETE_PATHS.values():
        with pytest.raises(error) as info:
            read_snapshot(str(location), max_delete_events_in_memory=delete_path, **options)
        assert isinstance(info.value, AcidError)
        assert named in str(info.value), str(info.value)
        caught = info.value
    assert tree(location) == before
    return caught


def test_healthy_table_reads(table):
    assert read_snapshot(str(table)).num_rows == 49


def test_truncated_insert_file(table):
    bucket = table / "delta_0000003_0000003_0000" / "bucket_00000"
    EmbeddedWriter(str(table), columns=COLUMNS).insert([(i, "x" * 20) for i in range(500)], write_id=3)
    data = bucket.read_bytes()
    bucket.write_bytes(data[: len(data) // 2])
    _expect_failure(table, CorruptFileError, str(bucket))


def test_truncated_delete_file(table):
    bucket = table / "delete_delta_0000002_0000002_0000" / "bucket_00000"
    data = bucket.read_bytes()
    bucket.write_bytes(data[: len(data) // 2])
    _expect_failure(table, CorruptFileError, str(bucket))


@pytest.mark.parametrize("size", [0, 3, 2000])
def test_random_bytes_named_bucket_00000(table, size):
    directory = table / "delta_0000003_0000003_0000"
    directory.mkdir()
    (directory / "bucket_00000").write_bytes(random.Random(size).randbytes(size) if size else b"")
    _expect_failure(table, CorruptFileError, str(directory / "bucket_00000"))


def test_random_bytes_in_a_delete_delta(table):
    directory = table / "delete_delta_0000003_0000003_0000"
    directory.mkdir()
    (directory / "bucket_00000").write_bytes(random.Random(1).randbytes(500))
    _expect_failure(table, CorruptFileError, str(directory / "bucket_00000"))


def test_plain_orc_file_in_a_delta_directory(table):
    directory = table / "delta_0000003_0000003_0000"
    directory.mkdir()
    pa_orc.write_table(pa.table({"id": pa.array([1], pa.int32()), "name": ["x"]}), str(directory / "bucket_00000"))
    _expect_failure(table, SchemaMismatchError, str(directory / "bucket_00000"))


def test_plain_orc_file_in_a_delete_delta_directory(table):
    directory = table / "delete_delta_0000003_0000003_0000"
    directory.mkdir()
    pa_orc.write_table(pa.table({"a": [1, 2]}), str(directory / "bucket_00000"))
    _expect_failure(table, AcidError, str(directory / "bucket_00000"))


@pytest.mark.parametrize("bad_schema", [
    "struct<operation:bigint,originalTransaction:bigint,bucket:int,rowId:bigint,currentTransaction:bigint,"
    "row:struct<id:int,name:string>>",
    "struct<operation:int,originalTransaction:bigint,bucket:int,rowId:bigint,currentTransaction:bigint,row:int>",
    "struct<operation:int,originalTransaction:bigint,bucket:int,rowId:bigint,currentTransaction:bigint>",
], ids=["operation bigint", "row not a struct", "no row"])
def test_broken_event_schema(table, bad_schema):
    directory = table / "delta_0000003_0000003_0000"
    directory.mkdir()
    with open(directory / "bucket_00000", "wb") as stream:
        writer = pyorc.Writer(stream, bad_schema)
        writer.close()
    _expect_failure(table, SchemaMismatchError, str(directory / "bucket_00000"))


def _raw_event_file(path: Path, events: list[tuple], metadata: dict[str, bytes]) -> None:
    """An event file written with pyorc directly, so its user metadata can be anything."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as stream:
        writer = pyorc.Writer(stream, event_schema(parse_columns(COLUMNS)), struct_repr=pyorc.StructRepr.TUPLE)
        writer.writerows(events)
        writer.set_user_metadata(**metadata)
        writer.close()


@pytest.mark.parametrize(("directory", "operation"), [("delta_0000003_0000003_0000", 0),
                                                      ("delete_delta_0000003_0000003_0000", 2)])
def test_bad_stats_metadata(table, directory, operation):
    path = table / directory / "bucket_00000"
    _raw_event_file(path, [(operation, 1, B0, 5, 3, None if operation else (1, "x"))],
                    {"hive.acid.stats": b"one,two", "hive.acid.version": b"2"})
    error = _expect_failure(table, CorruptFileError, str(path))
    assert "one,two" in str(error)


def test_bad_key_index_metadata_in_a_streamed_delete_file(table):
    path = table / "delete_delta_0000003_0000003_0000" / "bucket_00000"
    _raw_event_file(path, [(2, 1, B0, 5, 3, None)],
                    {"hive.acid.key.index": b"1,2;", "hive.acid.stats": b"0,0,1"})
    before = tree(table)
    with pytest.raises(CorruptFileError, match="1,2") as caught:
        read_snapshot(str(table), max_delete_events_in_memory=0)
    assert str(path) in str(caught.value)
    assert tree(table) == before


def test_insert_file_with_update_events_is_refused(table):
    """ACID v1 (pre split-update) insert files hold update events; Hive 3 readers need a major compaction first."""
    path = table / "delta_0000003_0000003_0000" / "bucket_00000"
    _raw_event_file(path, [(1, 1, B0, 0, 3, (0, "u"))], {"hive.acid.stats": b"0,1,0"})
    _expect_failure(table, SchemaMismatchError, str(path))


def test_insert_file_whose_stats_count_an_update_but_holds_only_inserts(table):
    """Hive 2.x counts an UPDATE's delete half in the insert file's stats (HIVE-17284); the operation column decides."""
    path = table / "delta_0000003_0000003_0000" / "bucket_00000"
    _raw_event_file(path, [(0, 3, B0, 0, 3, (100, "new"))], {"hive.acid.stats": b"1,0,1"})
    assert sorted(read_snapshot(str(table)).column("id").to_pylist()) == [i for i in range(50) if i != 3] + [100]


def test_unsorted_insert_file_on_the_sort_merge_path(table):
    path = table / "delta_0000003_0000003_0000" / "bucket_00000"
    _raw_event_file(path, [(0, 3, B0, 1, 3, (1, "b")), (0, 3, B0, 0, 3, (0, "a"))], {"hive.acid.stats": b"2,0,0"})
    before = tree(table)
    with pytest.raises(UnsortedEventsError) as caught:
        read_snapshot(str(table), max_delete_events_in_memory=0)
    assert str(path) in str(caught.value)
    assert tree(table) == before


def test_unsorted_delete_file_on_the_sort_merge_path(table):
    path = table / "delete_delta_0000003_0000003_0000" / "bucket_00000"
    _raw_event_file(path, [(2, 1, B0, 9, 3, None), (2, 1, B0, 4, 3, None)], {"hive.acid.stats": b"0,0,2"})
    before = tree(table)
    with pytest.raises(UnsortedEventsError) as caught:
        read_snapshot(str(table), max_delete_events_in_memory=0)
    assert str(path) in str(caught.value)
    assert tree(table) == before
    # The in-memory registry sorts what it loads, so it still answers correctly.
    assert sorted(read_snapshot(str(table)).column("id").to_pylist()) == [i for i in range(50) if i not in (3, 4, 9)]


@pytest.mark.parametrize("name", ["delta_abc_1", "delta_1", "delete_delta_1_x", "base_x", "delta_5_3",
                                  "delta_1_1_1_1", "base_1_vX"])
def test_malformed_acid_directory_name(table, name):
    (table / name).mkdir()
    before = tree(table)
    with pytest.raises(InvalidNameError) as caught:
        get_acid_state(str(table), write_ids=ValidWriteIdList())
    assert name in str(caught.value)
    _expect_failure(table, InvalidNameError, name)
    assert tree(table) == before


def test_missing_table_directory(tmp_path):
    missing = tmp_path / "nowhere"
    with pytest.raises(FileSystemError) as caught:
        read_snapshot(str(missing))
    assert str(missing) in str(caught.value)
    assert not missing.exists()


def test_table_location_that_is_a_file(tmp_path):
    location = tmp_path / "file"
    location.write_text("not a directory")
    with pytest.raises(AcidError) as caught:
        read_snapshot(str(location))
    assert str(location) in str(caught.value)
    assert location.read_text() == "not a directory"


def test_unknown_uri_scheme():
    with pytest.raises(FileSystemError, match="nosuchscheme://x/y"):
        read_snapshot("nosuchscheme://x/y")


@pytest.mark.parametrize("text", ["", "default.t", "default.t:", "default.t:abc:1::", "default.t:5:x:1:",
                                  "default.t:5:1:1,a:", "default.t:5:1::b", "default.t:5:1:2:2",
                                  "default.t:5:1:2:3:4"])
def test_malformed_write_id_lists(text):
    with pytest.raises(InvalidValidityListError) as caught:
        ValidWriteIdList.parse(text)
    assert isinstance(caught.value, AcidError)
    if text:
        assert text in str(caught.value)


@pytest.mark.parametrize("text", ["5", "abc:1::", "5:1:x:", "5:1::y", "5:1:2:2", "1:2:3:4:5"])
def test_malformed_txn_lists(text):
    with pytest.raises(InvalidValidityListError) as caught:
        ValidTxnList.parse(text)
    assert text in str(caught.value)


def test_event_file_on_garbage_names_the_path(tmp_path):
    path = tmp_path / "bucket_00000"
    path.write_bytes(b"\x00" * 64)
    with pytest.raises(CorruptFileError, match=str(path)):
        EventFile(FileSystem(), str(path))


def test_writer_refuses_a_location_it_cannot_create(tmp_path):
    blocker = tmp_path / "blocker"
    blocker.write_text("x")
    with pytest.raises(AcidError) as caught:
        EmbeddedWriter(str(blocker / "t"), columns=COLUMNS).insert([(1, "a")], write_id=1)
    assert str(blocker) in str(caught.value)
    assert blocker.read_text() == "x" and sorted(os.listdir(tmp_path)) == ["blocker"]



def test_reading_the_root_of_a_partitioned_table_is_refused(tmp_path):
    """`ds=a/` holds ACID directories: reading the table root would treat its event files as original files,
    resurrecting deleted rows with made-up ROW__IDs and turning delete events into all-NULL rows."""
    root = tmp_path / "t"
    writer = EmbeddedWriter(str(root), columns=COLUMNS, partition_keys=["ds"])
    writer.insert([(1, "a"), (2, "b")], write_id=1, partition={"ds": "a"})
    writer.delete([RowId(1, B0, 0)], write_id=2, partition={"ds": "a"})
    assert read_snapshot(str(root / "ds=a")).to_pylist() == [{"id": 2, "name": "b"}]
    before = tree(root)
    with pytest.raises(AcidError) as caught:
        read_snapshot(str(root))
    assert "ds=a" in str(caught.value) or str(root) in str(caught.value)
    assert tree(root) == before
