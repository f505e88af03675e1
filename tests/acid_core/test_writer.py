"""The embedded writer: directory names, ROW__ID assignment, split-update, partitions, buckets and bad rows.

A failed write must leave the table exactly as it was: no visible file or directory and no hidden temporary
directory (the writer stages everything under a hidden name and renames it into place).
"""

from __future__ import annotations

import decimal

import pyarrow.orc as pa_orc
import pytest
from support.model import table_by_row_id, tree, v1_bucket_property

from acid_core.errors import AcidError, InvalidRowError
from acid_core.format.rowid import RowId
from acid_core.read.merge import read_snapshot
from acid_core.write.writer import EmbeddedWriter

COLUMNS = [("id", "int"), ("name", "string")]
B0, B1 = v1_bucket_property(0), v1_bucket_property(1)


def _events(path) -> list[dict]:
    return pa_orc.read_table(str(path)).to_pylist()


def _read(location, **options) -> dict:
    return table_by_row_id(read_snapshot(str(location), include_row_id=True, **options))


def test_insert_layout_and_row_ids(tmp_path):
    result = EmbeddedWriter(str(tmp_path), columns=COLUMNS).insert([(1, "a"), (2, "b"), (3, None)], write_id=1)
    delta = tmp_path / "delta_0000001_0000001_0000"
    assert result.directories == (str(delta),) and result.inserted == 3 and result.deleted == 0
    assert tree(tmp_path) == sorted([
        ("delta_0000001_0000001_0000", None),
        ("delta_0000001_0000001_0000/_orc_acid_version", 1),
        ("delta_0000001_0000001_0000/bucket_00000", (delta / "bucket_00000").stat().st_size),
    ])
    assert _read(tmp_path) == {(1, B0, 0): (1, "a"), (1, B0, 1): (2, "b"), (1, B0, 2): (3, None)}


def test_row_ids_restart_for_every_write_and_statement(tmp_path):
    writer = EmbeddedWriter(str(tmp_path), columns=COLUMNS)
    writer.insert([(1, "a"), (2, "b")], write_id=1)
    writer.insert([(3, "c")], write_id=1, statement_id=1)
    writer.insert([(4, "d"), (5, "e")], write_id=2, statement_id=7)
    assert _read(tmp_path) == {
        (1, B0, 0): (1, "a"), (1, B0, 1): (2, "b"),
        (1, v1_bucket_property(0, 1), 0): (3, "c"),
        (2, v1_bucket_property(0, 7), 0): (4, "d"), (2, v1_bucket_property(0, 7), 1): (5, "e"),
    }
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "delta_0000001_0000001_0000", "delta_0000001_0000001_0001", "delta_0000002_0000002_0007"]


def test_large_ids_are_not_truncated(tmp_path):
    writer = EmbeddedWriter(str(tmp_path), columns=COLUMNS)
    writer.insert([(1, "a")], write_id=1234567890, statement_id=12)
    assert [p.name for p in tmp_path.iterdir()] == ["delta_1234567890_1234567890_0012"]
    assert _read(tmp_path) == {(1234567890, v1_bucket_property(0, 12), 0): (1, "a")}


def test_delete_writes_a_delete_delta(tmp_path):
    writer = EmbeddedWriter(str(tmp_path), columns=COLUMNS)
    writer.insert([(i, str(i)) for i in range(5)], write_id=1)
    result = writer.delete([RowId(1, B0, 3), RowId(1, B0, 1), RowId(1, B0, 3)], write_id=2, statement_id=4)
    assert result.directories == (str(tmp_path / "delete_delta_0000002_0000002_0004"),) and result.deleted == 2
    assert [e["rowId"] for e in _events(tmp_path / "delete_delta_0000002_0000002_0004" / "bucket_00000")] == [1, 3]
    assert _read(tmp_path) == {(1, B0, 0): (0, "0"), (1, B0, 2): (2, "2"), (1, B0, 4): (4, "4")}


def test_update_is_split_into_delete_and_insert(tmp_path):
    writer = EmbeddedWriter(str(tmp_path), columns=COLUMNS)
    writer.insert([(1, "a"), (2, "b")], write_id=1)
    result = writer.update([RowId(1, B0, 1)], [{"id": 2, "name": "B"}], write_id=2, statement_id=1)
    assert result.directories == (str(tmp_path / "delete_delta_0000002_0000002_0001"),
                                  str(tmp_path / "delta_0000002_0000002_0001"))
    assert result.inserted == 1 and result.deleted == 1
    assert _events(tmp_path / "delete_delta_0000002_0000002_0001" / "bucket_00000") == [
        {"operation": 2, "originalTransaction": 1, "bucket": B0, "rowId": 1, "currentTransaction": 2, "row": None}]
    assert _events(tmp_path / "delta_0000002_0000002_0001" / "bucket_00000") == [
        {"operation": 0, "originalTransaction": 2, "bucket": v1_bucket_property(0, 1), "rowId": 0,
         "currentTransaction": 2, "row": {"id": 2, "name": "B"}}]
    assert _read(tmp_path) == {(1, B0, 0): (1, "a"), (2, v1_bucket_property(0, 1), 0): (2, "B")}


def test_update_needs_as_many_rows_as_row_ids(tmp_path):
    writer = EmbeddedWriter(str(tmp_path), columns=COLUMNS)
    writer.insert([(1, "a")], write_id=1)
    before = tree(tmp_path)
    with pytest.raises(InvalidRowError, match="1 row ids but 2 new rows"):
        writer.update([RowId(1, B0, 0)], [(1, "x"), (2, "y")], write_id=2)
    assert tree(tmp_path) == before


def test_empty_writes_make_nothing(tmp_path):
    writer = EmbeddedWriter(str(tmp_path), columns=COLUMNS)
    assert writer.insert([], write_id=1).directories == ()
    assert writer.delete([], write_id=2).directories == ()
    assert tree(tmp_path) == []


def test_dict_rows(tmp_path):
    writer = EmbeddedWriter(str(tmp_path), columns=COLUMNS)
    writer.insert([{"id": 1, "name": "a"}, {"name": "b", "id": 2}, {"id": 3}], write_id=1)
    assert _read(tmp_path) == {(1, B0, 0): (1, "a"), (1, B0, 1): (2, "b"), (1, B0, 2): (3, None)}


def test_partition_directories_with_hive_escaping(tmp_path):
    writer = EmbeddedWriter(str(tmp_path), columns=COLUMNS, partition_keys=["DS", "Country"])
    writer.insert([(1, "a")], write_id=1, partition={"ds": "2024-01-01", "country": "us"})
    writer.insert([(2, "b")], write_id=2, partition={"ds": "2024/01:02", "country": "a=b%#"})
    writer.insert([(3, "c")], write_id=3, partition={"ds": None, "country": ""})
    partitions = sorted(str(p.parent.relative_to(tmp_path)) for p in tmp_path.rglob("delta_*"))
    assert partitions == ["ds=2024%2F01%3A02/country=a%3Db%25%23", "ds=2024-01-01/country=us",
                          "ds=__HIVE_DEFAULT_PARTITION__/country=__HIVE_DEFAULT_PARTITION__"]
    assert _read(tmp_path / "ds=2024%2F01%3A02" / "country=a%3Db%25%23") == {(2, B0, 0): (2, "b")}
    assert _read(tmp_path / "ds=2024-01-01" / "country=us") == {(1, B0, 0): (1, "a")}


@pytest.mark.parametrize("partition", [None, {"ds": "a", "other": "b"}, {"other": "a"}])
def test_partition_spec_must_match_the_keys(tmp_path, partition):
    writer = EmbeddedWriter(str(tmp_path), columns=COLUMNS, partition_keys=["ds"])
    with pytest.raises(InvalidRowError, match="ds"):
        writer.insert([(1, "a")], write_id=1, partition=partition)
    assert tree(tmp_path) == []


def test_unpartitioned_table_refuses_a_partition(tmp_path):
    with pytest.raises(InvalidRowError, match="not partitioned"):
        EmbeddedWriter(str(tmp_path), columns=COLUMNS).insert([(1, "a")], write_id=1, partition={"ds": "a"})
    assert tree(tmp_path) == []


def test_two_bucket_table(tmp_path):
    writer = EmbeddedWriter(str(tmp_path), columns=COLUMNS, bucket_count=2, bucket_function=lambda row: row[0] % 2)
    writer.insert([(i, f"r{i}") for i in range(6)], write_id=1)
    delta = tmp_path / "delta_0000001_0000001_0000"
    assert sorted(p.name for p in delta.iterdir()) == ["_orc_acid_version", "bucket_00000", "bucket_00001"]
    assert {e["bucket"] for e in _events(delta / "bucket_00001")} == {536936448}
    assert [e["row"]["id"] for e in _events(delta / "bucket_00001")] == [1, 3, 5]
    assert [e["rowId"] for e in _events(delta / "bucket_00001")] == [0, 1, 2]
    writer.delete([RowId(1, B1, 1), RowId(1, B0, 0)], write_id=2)
    delete_delta = tmp_path / "delete_delta_0000002_0000002_0000"
    assert [(e["bucket"], e["rowId"]) for e in _events(delete_delta / "bucket_00000")] == [(B0, 0)]
    assert [(e["bucket"], e["rowId"]) for e in _events(delete_delta / "bucket_00001")] == [(B1, 1)]
    assert _read(tmp_path) == {(1, B0, 1): (2, "r2"), (1, B0, 2): (4, "r4"), (1, B1, 0): (1, "r1"),
                               (1, B1, 2): (5, "r5")}


def test_bucket_count_checks(tmp_path):
    with pytest.raises(InvalidRowError, match="bucket_function"):
        EmbeddedWriter(str(tmp_path), columns=COLUMNS, bucket_count=2)
    with pytest.raises(InvalidRowError, match="4097"):
        EmbeddedWriter(str(tmp_path), columns=COLUMNS, bucket_count=4097)
    writer = EmbeddedWriter(str(tmp_path), columns=COLUMNS, bucket_count=2, bucket_function=lambda row: 2)
    with pytest.raises(InvalidRowError, match="bucket 2"):
        writer.insert([(1, "a")], write_id=1)
    assert tree(tmp_path) == []


def test_same_bucket_file_is_never_written_twice(tmp_path):
    writer = EmbeddedWriter(str(tmp_path), columns=COLUMNS)
    writer.insert([(1, "a")], write_id=1)
    writer.delete([RowId(1, B0, 0)], write_id=2)
    before = tree(tmp_path)
    with pytest.raises(AcidError, match="bucket_00000") as caught:
        writer.insert([(2, "b")], write_id=1)
    assert "delta_0000001_0000001_0000" in str(caught.value)
    with pytest.raises(AcidError, match="delete_delta_0000002_0000002_0000"):
        writer.delete([RowId(1, B0, 0)], write_id=2)
    assert tree(tmp_path) == before


def test_second_writer_of_a_statement_adds_its_own_bucket(tmp_path):
    """Two tasks of one statement write different buckets of the same delta directory."""
    table = EmbeddedWriter(str(tmp_path), columns=COLUMNS, bucket_count=2, bucket_function=lambda row: row[0] % 2)
    table.insert([(0, "even")], write_id=1)
    table.insert([(1, "odd")], write_id=1)
    delta = tmp_path / "delta_0000001_0000001_0000"
    assert sorted(p.name for p in delta.iterdir()) == ["_orc_acid_version", "bucket_00000", "bucket_00001"]
    assert [p.name for p in tmp_path.iterdir()] == ["delta_0000001_0000001_0000"]  # no temp dir left behind
    assert _read(tmp_path) == {(1, B0, 0): (0, "even"), (1, B1, 0): (1, "odd")}


def test_unbucketed_table_writes_one_file_per_writer(tmp_path):
    """Hive's parallel tasks of one statement each write `bucket_<writer id>` with that id in the bucket property."""
    writer = EmbeddedWriter(str(tmp_path), columns=COLUMNS)
    writer.insert([(1, "a"), (2, "b")], write_id=1)
    writer.insert([(3, "c")], write_id=1, writer_id=3)
    writer.insert([(4, "d")], write_id=2, statement_id=1, writer_id=4095)
    delta = tmp_path / "delta_0000001_0000001_0000"
    assert sorted(p.name for p in delta.iterdir()) == ["_orc_acid_version", "bucket_00000", "bucket_00003"]
    assert [p.name for p in (tmp_path / "delta_0000002_0000002_0001").iterdir() if p.name.startswith("bucket")] == [
        "bucket_04095"]
    assert _read(tmp_path) == {(1, B0, 0): (1, "a"), (1, B0, 1): (2, "b"), (1, v1_bucket_property(3), 0): (3, "c"),
                               (2, v1_bucket_property(4095, 1), 0): (4, "d")}
    writer.delete([RowId(1, v1_bucket_property(3), 0), RowId(1, B0, 1)], write_id=3)
    assert sorted(p.name for p in (tmp_path / "delete_delta_0000003_0000003_0000").iterdir()) == [
        "_orc_acid_version", "bucket_00000", "bucket_00003"]
    assert _read(tmp_path) == {(1, B0, 0): (1, "a"), (2, v1_bucket_property(4095, 1), 0): (4, "d")}
    writer.update([RowId(1, B0, 0)], [(1, "A")], write_id=4, writer_id=2)
    assert _read(tmp_path, write_ids=None)[(4, v1_bucket_property(2), 0)] == (1, "A")


@pytest.mark.parametrize("writer_id", [4096, -1])
def test_writer_id_out_of_range(tmp_path, writer_id):
    with pytest.raises(AcidError, match=str(writer_id)):
        EmbeddedWriter(str(tmp_path), columns=COLUMNS).insert([(1, "a")], write_id=1, writer_id=writer_id)
    assert tree(tmp_path) == []


@pytest.mark.parametrize("bucket_count", [1, 2])
def test_writer_id_is_refused_for_a_bucketed_table(tmp_path, bucket_count):
    writer = EmbeddedWriter(str(tmp_path), columns=COLUMNS, bucket_count=bucket_count,
                            bucket_function=lambda row: row[0] % bucket_count)
    with pytest.raises(InvalidRowError, match="writer id 1"):
        writer.insert([(1, "a")], write_id=1, writer_id=1)
    assert tree(tmp_path) == []


# --- bad rows: an InvalidRowError and no trace ---------------------------------------------------------------------

BAD_ROWS = {
    "too few values": [(1, "a"), (2,)],
    "too many values": [(1, "a", "extra")],
    "unknown column": [{"id": 1, "nickname": "x"}],
    "string for int": [(1, "a"), ("two", "b")],
    "float for int": [(1.5, "a")],
    "int for string": [(1, 5)],
    "bytes for string": [(1, b"a")],
}


@pytest.mark.parametrize("rows", BAD_ROWS.values(), ids=BAD_ROWS.keys())
def test_bad_rows_leave_no_trace(tmp_path, rows):
    writer = EmbeddedWriter(str(tmp_path), columns=COLUMNS)
    writer.insert([(0, "existing")], write_id=1)
    before = tree(tmp_path)
    with pytest.raises(InvalidRowError):
        writer.insert(rows, write_id=2)
    assert tree(tmp_path) == before


def test_bad_row_error_names_the_row_and_the_columns(tmp_path):
    writer = EmbeddedWriter(str(tmp_path), columns=COLUMNS)
    with pytest.raises(InvalidRowError, match=r"row 1 has 1 values.*\['id', 'name'\]"):
        writer.insert([(1, "a"), (2,)], write_id=1)
    with pytest.raises(InvalidRowError, match=r"unknown columns \['nickname'\]"):
        writer.insert([{"id": 1, "nickname": "x"}], write_id=1)
    with pytest.raises(InvalidRowError, match="two"):
        writer.insert([("two", "b")], write_id=1)


@pytest.mark.parametrize(("column_type", "value"), [
    ("int", 2**31), ("int", -(2**31) - 1), ("int", 2**40), ("smallint", 2**15), ("tinyint", 128), ("tinyint", -129),
    ("bigint", 2**63),
])
def test_out_of_range_integers_are_bad_rows(tmp_path, column_type, value):
    """An integer that does not fit the column must be refused, not silently wrapped (2**40 stored as 0)."""
    writer = EmbeddedWriter(str(tmp_path), columns=[("v", column_type)])
    with pytest.raises(InvalidRowError):
        writer.insert([(value,)], write_id=1)
    assert tree(tmp_path) == []


@pytest.mark.parametrize(("column_type", "value"), [
    ("int", 2**31 - 1), ("int", -(2**31)), ("smallint", -(2**15)), ("tinyint", 127), ("bigint", 2**63 - 1),
    ("bigint", -(2**63)),
])
def test_integers_at_the_edge_of_the_range_round_trip(tmp_path, column_type, value):
    EmbeddedWriter(str(tmp_path), columns=[("v", column_type)]).insert([(value,)], write_id=1)
    assert read_snapshot(str(tmp_path)).column("v").to_pylist() == [value]


@pytest.mark.parametrize("value", [decimal.Decimal("100000000.00"), decimal.Decimal("123456789.5")])
def test_decimal_wider_than_the_column_is_a_bad_row(tmp_path, value):
    """decimal(10,2) holds at most 8 integer digits; a wider value must be an InvalidRowError, not a bare
    decimal.InvalidOperation escaping the AcidError hierarchy."""
    writer = EmbeddedWriter(str(tmp_path), columns=[("v", "decimal(10,2)")])
    with pytest.raises(InvalidRowError):
        writer.insert([(value,)], write_id=1)
    assert tree(tmp_path) == []


def test_decimal_within_the_column_rounds_half_up(tmp_path):
    writer = EmbeddedWriter(str(tmp_path), columns=[("v", "decimal(10,2)")])
    writer.insert([(decimal.Decimal("99999999.99"),), (decimal.Decimal("1.255"),)], write_id=1)
    assert read_snapshot(str(tmp_path), order_by_row_id=True).column("v").to_pylist() == [
        decimal.Decimal("99999999.99"), decimal.Decimal("1.26")]


def test_bad_row_in_a_partitioned_table_leaves_no_partition_directory(tmp_path):
    writer = EmbeddedWriter(str(tmp_path), columns=COLUMNS, partition_keys=["ds"])
    with pytest.raises(InvalidRowError):
        writer.insert([("not an int", "a")], write_id=1, partition={"ds": "new"})
    assert tree(tmp_path) == []


def test_bad_row_in_a_two_bucket_insert_writes_no_bucket(tmp_path):
    """The good bucket file must not become visible when another bucket of the same write fails."""
    writer = EmbeddedWriter(str(tmp_path), columns=COLUMNS, bucket_count=2,
                            bucket_function=lambda row: 0 if isinstance(row[0], str) else 1 - row[0] % 2)
    with pytest.raises(InvalidRowError):
        writer.insert([(1, "ok"), ("bad", "x")], write_id=1)
    assert tree(tmp_path) == []


def test_update_with_a_bad_new_row_changes_nothing(tmp_path):
    """Split-update is one write: when the new row does not fit, the delete half must not become visible either."""
    writer = EmbeddedWriter(str(tmp_path), columns=COLUMNS)
    writer.insert([(1, "a"), (2, "b")], write_id=1)
    before = tree(tmp_path)
    with pytest.raises(InvalidRowError):
        writer.update([RowId(1, B0, 0)], [("not an int", "a")], write_id=2)
    assert tree(tmp_path) == before
    assert _read(tmp_path) == {(1, B0, 0): (1, "a"), (1, B0, 1): (2, "b")}


def test_update_into_a_statement_already_used_changes_nothing(tmp_path):
    """Write 2 statement 0 already inserted; an update reusing that statement is refused as a whole, delete half too."""
    writer = EmbeddedWriter(str(tmp_path), columns=COLUMNS)
    writer.insert([(1, "a")], write_id=1)
    writer.insert([(2, "b")], write_id=2)
    before = tree(tmp_path)
    with pytest.raises(AcidError, match="delta_0000002_0000002_0000"):
        writer.update([RowId(1, B0, 0)], [(1, "A")], write_id=2)
    assert tree(tmp_path) == before


def test_update_with_a_wrong_arity_row_changes_nothing(tmp_path):
    writer = EmbeddedWriter(str(tmp_path), columns=COLUMNS)
    writer.insert([(1, "a")], write_id=1)
    before = tree(tmp_path)
    with pytest.raises(InvalidRowError):
        writer.update([RowId(1, B0, 0)], [(1,)], write_id=2)
    assert tree(tmp_path) == before
