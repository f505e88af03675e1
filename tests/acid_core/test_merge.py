"""Merge-on-read against an independent model of the table (tests/model.py), on real files.

Covers both delete paths of Hive's VectorizedOrcAcidRowBatchReader (the in-memory registry and the streamed
sort-merge, `max_delete_events_in_memory=0`), multi-stripe files, bases, original (pre-ACID) files, multi-statement
transactions, high watermarks, open and aborted write ids, and streaming deltas holding several write ids
(hive-acid-reference.md section 5).
"""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow as pa
import pyarrow.orc as pa_orc
import pytest
from support.model import Snapshot, TableModel, table_by_row_id, table_rows, tree, v1_bucket_property

from acid_core.errors import SchemaMismatchError, UsageError
from acid_core.format.layout import ACID_FORMAT_FILE
from acid_core.format.orc_events import INSERT_OPERATION, EventFileWriter, parse_columns
from acid_core.format.rowid import RowId
from acid_core.format.validity import ValidWriteIdList
from acid_core.read.merge import read_batches, read_snapshot
from acid_core.write.writer import EmbeddedWriter

COLUMNS = [("id", "bigint"), ("name", "string"), ("amount", "double")]
B0, B1 = v1_bucket_property(0), v1_bucket_property(1)
SEED = 20240611
WRITES = 24
ABORTED = frozenset({7, 15, 22})
SNAPSHOTS = [
    None,                                                                      # everything committed, aborted ones too
    Snapshot(WRITES, aborted=ABORTED),
    Snapshot(WRITES, open=frozenset({12, 20}), aborted=ABORTED),
    Snapshot(WRITES, open=frozenset({3}), aborted=ABORTED),                    # low min-open write id
    Snapshot(WRITES, open=frozenset(range(2, WRITES + 1, 3)), aborted=ABORTED),
    Snapshot(10, open=frozenset({9}), aborted=frozenset({7})),
    Snapshot(18, aborted=frozenset({7, 15})),                                  # 22 not yet known to this reader
    Snapshot(1),
    Snapshot(40, open=frozenset({30}), aborted=ABORTED),                       # high watermark past every write
]
DELETE_PATHS = {"registry": 10_000_000, "sort-merge": 0}


def _write_ids(snapshot: Snapshot | None) -> ValidWriteIdList | None:
    return None if snapshot is None else ValidWriteIdList.parse(snapshot.hive_string())


def _read(location, snapshot: Snapshot | None = None, **options) -> dict:
    return table_by_row_id(read_snapshot(str(location), write_ids=_write_ids(snapshot), include_row_id=True, **options))


def build_random_table(location: Path, *, seed: int, big_insert: int = 0, big_delete: int = 0,
                       stripe_rows: int = 1_000_000) -> TableModel:
    """Random inserts, deletes and updates over WRITES write ids (1-3 statements each) on a 2-bucket table.

    Deletes and updates pick rows alive in the committed history (aborted writes' effects excluded), as a real
    transaction would. `big_insert` rows go in with write id 1 and `big_delete` of them are deleted by write id 2.
    """
    rng = random.Random(seed)

    def bucket_of(row):
        return row[0] % 2

    writer = EmbeddedWriter(str(location), columns=COLUMNS, bucket_count=2, bucket_function=bucket_of,
                            stripe_rows=stripe_rows)
    model = TableModel(bucket_of=bucket_of)
    live: list[tuple] = []
    next_id = 0

    def new_rows(count):
        nonlocal next_id
        rows = []
        for _ in range(count):
            rows.append((next_id, rng.choice([f"n{next_id}", None, "ü"]),
                         rng.choice([None, round(rng.uniform(-1e3, 1e3), 2)])))
            next_id += 1
        return rows

    for write_id in range(1, WRITES + 1):
        committed = write_id not in ABORTED
        for statement in range(rng.choice([1, 1, 2, 3])):
            if write_id == 1 and big_insert and statement == 0:
                operation, count = "insert", big_insert
            elif write_id == 2 and big_delete and statement == 0:
                operation, count = "delete", big_delete
            else:
                operation = "insert" if len(live) < 5 else rng.choices(["insert", "delete", "update"], [3, 2, 2])[0]
                count = rng.randint(1, 40 if operation == "insert" else 8)
            if operation == "insert":
                rows = new_rows(count)
                writer.insert(rows, write_id=write_id, statement_id=statement)
                assigned = model.insert(rows, write_id=write_id, statement=statement)
                removed = []
            else:
                removed = rng.sample(live, min(count, len(live)))
                if operation == "delete":
                    writer.delete([RowId(*r) for r in removed], write_id=write_id, statement_id=statement)
                    model.delete(removed, write_id=write_id)
                    assigned = []
                else:
                    rows = [(model.rows[r][0], f"u{write_id}.{statement}", model.rows[r][2]) for r in removed]
                    writer.update([RowId(*r) for r in removed], rows, write_id=write_id, statement_id=statement)
                    assigned = model.update(removed, rows, write_id=write_id, statement=statement)
            if committed:
                gone = set(removed)
                live = [r for r in live if r not in gone] + assigned
    return model


@pytest.fixture(scope="module")
def random_table(tmp_path_factory):
    location = tmp_path_factory.mktemp("random") / "t"
    return location, build_random_table(location, seed=SEED)


@pytest.fixture(scope="module")
def multi_stripe_table(tmp_path_factory):
    location = tmp_path_factory.mktemp("stripes") / "t"
    return location, build_random_table(location, seed=SEED + 1, big_insert=5000, big_delete=2600, stripe_rows=1024)


def test_random_table_has_what_the_scenario_needs(random_table, multi_stripe_table):
    location, model = random_table
    names = [p.name for p in location.iterdir()]
    assert any(n.startswith("delete_delta_") for n in names) and any(n.endswith("_0002") for n in names)
    assert len(model.deleted_by) > 20 and len(model.rows) > 200
    # several statements of one write deleting/updating, and aborted writes that changed something
    assert any(w in ABORTED for ids in model.deleted_by.values() for w in ids)
    assert any(r[0] in ABORTED for r in model.rows)
    location, _ = multi_stripe_table
    insert_file = location / "delta_0000001_0000001_0000" / "bucket_00000"
    delete_file = location / "delete_delta_0000002_0000002_0000" / "bucket_00000"
    assert pa_orc.ORCFile(str(insert_file)).nstripes >= 3 and pa_orc.ORCFile(str(delete_file)).nstripes >= 2


@pytest.mark.parametrize("snapshot", SNAPSHOTS, ids=lambda s: "all" if s is None else s.hive_string())
@pytest.mark.parametrize("delete_path", DELETE_PATHS.values(), ids=DELETE_PATHS.keys())
def test_random_history_matches_the_model(random_table, snapshot, delete_path):
    location, model = random_table
    expected = model.visible(snapshot)
    assert _read(location, snapshot, max_delete_events_in_memory=delete_path) == expected
    plain = read_snapshot(str(location), write_ids=_write_ids(snapshot), max_delete_events_in_memory=delete_path)
    assert plain.column_names == ["id", "name", "amount"]
    assert table_rows(plain) == sorted(expected.values(), key=repr)


@pytest.mark.parametrize("snapshot", SNAPSHOTS[1:4] + SNAPSHOTS[5:], ids=lambda s: s.hive_string())
def test_multi_stripe_files_match_the_model_on_both_delete_paths(multi_stripe_table, snapshot):
    location, model = multi_stripe_table
    expected = model.visible(snapshot)
    registry = _read(location, snapshot)
    sort_merge = _read(location, snapshot, max_delete_events_in_memory=0)
    single_thread = _read(location, snapshot, max_delete_events_in_memory=0, threads=1)
    assert registry == expected
    assert sort_merge == expected
    assert single_thread == expected


def test_order_by_row_id(random_table):
    location, model = random_table
    table = read_snapshot(str(location), include_row_id=True, order_by_row_id=True)
    assert table.column_names[0] == "row__id"
    assert table.schema.field("row__id").type == pa.struct(
        [("writeid", pa.int64()), ("bucketid", pa.int32()), ("rowid", pa.int64())])
    keys = [(r["writeid"], r["bucketid"], r["rowid"]) for r in table.column("row__id").to_pylist()]
    assert keys == sorted(model.visible())
    streamed = read_snapshot(str(location), include_row_id=True, order_by_row_id=True, max_delete_events_in_memory=0)
    assert streamed.equals(table)


def test_order_by_row_id_without_projecting_it(random_table):
    location, model = random_table
    table = read_snapshot(str(location), order_by_row_id=True)
    assert table.column_names == ["id", "name", "amount"]
    visible = model.visible()
    assert [tuple(r.values()) for r in table.to_pylist()] == [visible[k] for k in sorted(visible)]


# --- bases, original files -----------------------------------------------------------------------------------------

def _write_event_dir(directory: Path, events_by_bucket: dict[int, list[tuple]], columns=COLUMNS, *,
                     stripe_rows: int = 1_000_000) -> None:
    """A base or delta directory written with the raw event writer (as a compactor or streaming writer would)."""
    directory.mkdir(parents=True)
    for bucket, events in events_by_bucket.items():
        with open(directory / f"bucket_{bucket:05d}", "wb") as stream:
            writer = EventFileWriter(stream, parse_columns(columns), stripe_rows=stripe_rows)
            writer.write(events, operation=INSERT_OPERATION)
            writer.close()
    (directory / ACID_FORMAT_FILE).write_text("2")


def test_base_plus_deltas(tmp_path):
    model = TableModel()
    for write_id in range(1, 6):
        model.insert([(write_id * 100 + i, f"w{write_id}", float(i)) for i in range(4)], write_id=write_id)
    model.delete([(2, B0, 1)], write_id=4)
    # base_0000005 holds what a compaction of writes 1..5 keeps, with the original ROW__IDs, in key order.
    survivors = sorted(model.visible().items())
    _write_event_dir(tmp_path / "base_0000005",
                     {0: [(INSERT_OPERATION, w, b, r, w, row) for (w, b, r), row in survivors]})
    # A delta the base already covers: it must not be read again.
    EmbeddedWriter(str(tmp_path), columns=COLUMNS).insert([(100 + i, "w1", float(i)) for i in range(4)], write_id=1)
    writer = EmbeddedWriter(str(tmp_path), columns=COLUMNS)
    rows6 = [(600, "w6", 0.5), (601, "w6", 1.5)]
    writer.insert(rows6, write_id=6)
    model.insert(rows6, write_id=6)
    writer.delete([RowId(3, B0, 2), RowId(6, B0, 0)], write_id=7)
    model.delete([(3, B0, 2), (6, B0, 0)], write_id=7)
    writer.update([RowId(5, B0, 3)], [(503, "updated", 9.0)], write_id=8)
    model.update([(5, B0, 3)], [(503, "updated", 9.0)], write_id=8)
    for snapshot in (Snapshot(8), Snapshot(8, open=frozenset({7})), Snapshot(6), Snapshot(8, aborted=frozenset({8})),
                     Snapshot(5)):
        expected = model.visible(snapshot)
        assert _read(tmp_path, snapshot) == expected, snapshot
        assert _read(tmp_path, snapshot, max_delete_events_in_memory=0) == expected, snapshot
    assert (2, B0, 1) not in _read(tmp_path, Snapshot(8))


def _write_original(path: Path, rows: list[tuple]) -> None:
    table = pa.table({"id": pa.array([r[0] for r in rows], pa.int64()), "name": [r[1] for r in rows],
                      "amount": pa.array([r[2] for r in rows], pa.float64())})
    pa_orc.write_table(table, str(path))


def test_original_files_get_synthesized_row_ids(tmp_path):
    files = {
        "000000_0": [(0, "a", 1.0), (1, "b", None), (2, None, 3.0)],
        "000000_0_copy_1": [(3, "d", 4.0), (4, "e", 5.0)],
        "000001_0": [(10, "k", 6.0), (11, "l", 7.0)],
    }
    for name, rows in files.items():
        _write_original(tmp_path / name, rows)
    model = TableModel(bucket_of=lambda row: row[0] // 10)
    model.add_original_files({0: [files["000000_0"], files["000000_0_copy_1"]], 1: [files["000001_0"]]})
    assert _read(tmp_path) == model.visible() == {
        (0, B0, 0): (0, "a", 1.0), (0, B0, 1): (1, "b", None), (0, B0, 2): (2, None, 3.0),
        (0, B0, 3): (3, "d", 4.0), (0, B0, 4): (4, "e", 5.0),
        (0, B1, 0): (10, "k", 6.0), (0, B1, 1): (11, "l", 7.0),
    }
    writer = EmbeddedWriter(str(tmp_path), columns=COLUMNS, bucket_count=2, bucket_function=lambda row: row[0] // 10)
    writer.delete([RowId(0, B0, 3)], write_id=1)  # the first row of the _copy_1 file
    model.delete([(0, B0, 3)], write_id=1)
    writer.insert([(12, "m", 8.0)], write_id=2)
    model.insert([(12, "m", 8.0)], write_id=2)
    for snapshot in (None, Snapshot(2), Snapshot(2, open=frozenset({1})), Snapshot(0)):
        for delete_path in DELETE_PATHS.values():
            assert _read(tmp_path, snapshot, max_delete_events_in_memory=delete_path) == model.visible(snapshot)
    assert (0, B0, 3) not in _read(tmp_path) and (0, B0, 4) in _read(tmp_path)


def test_original_files_with_hive_column_names(tmp_path):
    table = pa.table({"_col0": pa.array([1, 2], pa.int32()), "_col1": ["x", "y"]})
    pa_orc.write_table(table, str(tmp_path / "000000_0"))
    result = read_snapshot(str(tmp_path), column_names=["id", "name"])
    assert result.to_pylist() == [{"id": 1, "name": "x"}, {"id": 2, "name": "y"}]


# --- column names, empty tables --------------------------------------------------------------------------------------

def test_column_names_rename_positionally(tmp_path):
    EmbeddedWriter(str(tmp_path), columns=COLUMNS).insert([(1, "a", 2.0)], write_id=1)
    result = read_snapshot(str(tmp_path), column_names=["x", "y", "z"], include_row_id=True)
    assert result.column_names == ["row__id", "x", "y", "z"]
    assert result.to_pylist() == [{"row__id": {"writeid": 1, "bucketid": B0, "rowid": 0}, "x": 1, "y": "a", "z": 2.0}]


def test_files_written_before_a_column_was_added_read_as_null(tmp_path):
    EmbeddedWriter(str(tmp_path), columns=[("id", "bigint")]).insert([(1,)], write_id=1)
    EmbeddedWriter(str(tmp_path), columns=[("id", "bigint"), ("extra", "string")]).insert([(2, "e")], write_id=2)
    result = read_snapshot(str(tmp_path), column_names=["id", "extra"], order_by_row_id=True)
    assert result.to_pylist() == [{"id": 1, "extra": None}, {"id": 2, "extra": "e"}]


def test_fewer_column_names_than_the_file_has(tmp_path):
    EmbeddedWriter(str(tmp_path), columns=COLUMNS).insert([(1, "a", 2.0)], write_id=1)
    with pytest.raises(SchemaMismatchError, match="bucket_00000"):
        read_snapshot(str(tmp_path), column_names=["only"])


def test_empty_table(tmp_path):
    assert read_snapshot(str(tmp_path)).num_rows == 0
    empty = read_snapshot(str(tmp_path), column_names=["id", "name"], include_row_id=True)
    assert empty.num_rows == 0 and empty.column_names == ["row__id", "id", "name"]
    assert empty.schema.field("row__id").type == pa.struct(
        [("writeid", pa.int64()), ("bucketid", pa.int32()), ("rowid", pa.int64())])


def test_table_whose_every_row_is_deleted_or_invisible(tmp_path):
    writer = EmbeddedWriter(str(tmp_path), columns=COLUMNS)
    writer.insert([(1, "a", 1.0), (2, "b", 2.0)], write_id=1)
    writer.delete([RowId(1, B0, 0), RowId(1, B0, 1)], write_id=2)
    for delete_path in DELETE_PATHS.values():
        assert read_snapshot(str(tmp_path), max_delete_events_in_memory=delete_path).num_rows == 0
    assert read_snapshot(str(tmp_path), write_ids=ValidWriteIdList.parse("default.t:2:1:1:")).num_rows == 0


# --- transactions, watermarks, aborts, streaming ----------------------------------------------------------------------

def test_multi_statement_transaction(tmp_path):
    writer = EmbeddedWriter(str(tmp_path), columns=COLUMNS)
    writer.insert([(1, "a", None), (2, "b", None), (3, "c", None)], write_id=1, statement_id=0)
    writer.delete([RowId(1, B0, 1)], write_id=1, statement_id=1)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["delete_delta_0000001_0000001_0001",
                                                          "delta_0000001_0000001_0000"]
    for delete_path in DELETE_PATHS.values():
        assert _read(tmp_path, max_delete_events_in_memory=delete_path) == {
            (1, B0, 0): (1, "a", None), (1, B0, 2): (3, "c", None)}
    assert _read(tmp_path, Snapshot(1, open=frozenset({1}))) == {}


def test_delta_above_the_high_watermark_is_not_read(tmp_path):
    writer = EmbeddedWriter(str(tmp_path), columns=COLUMNS)
    writer.insert([(1, "a", None)], write_id=1)
    writer.insert([(2, "b", None)], write_id=2)
    writer.delete([RowId(1, B0, 0)], write_id=3)
    assert _read(tmp_path, Snapshot(1)) == {(1, B0, 0): (1, "a", None)}
    assert _read(tmp_path, Snapshot(2)) == {(1, B0, 0): (1, "a", None), (2, B0, 0): (2, "b", None)}
    assert _read(tmp_path, Snapshot(3)) == {(2, B0, 0): (2, "b", None)}


def test_aborted_write_ids_are_not_read(tmp_path):
    writer = EmbeddedWriter(str(tmp_path), columns=COLUMNS)
    writer.insert([(1, "a", None)], write_id=1)
    writer.insert([(2, "aborted insert", None)], write_id=2)
    writer.delete([RowId(1, B0, 0)], write_id=3)  # an aborted delete
    writer.update([RowId(1, B0, 0)], [(1, "aborted update", None)], write_id=4)
    aborted = Snapshot(4, aborted=frozenset({2, 3, 4}))
    for delete_path in DELETE_PATHS.values():
        assert _read(tmp_path, aborted, max_delete_events_in_memory=delete_path) == {(1, B0, 0): (1, "a", None)}


def test_streaming_delta_with_an_open_write_id_in_the_middle(tmp_path):
    """delta_0000010_0000012 holds write ids 10, 11 and 12 in one file; with 11 open only 10 and 12 are seen."""
    events = []
    for write_id in (10, 11, 12):
        events += [(INSERT_OPERATION, write_id, B0, row_id, write_id, (write_id * 100 + row_id, f"w{write_id}", None))
                   for row_id in range(3)]
    _write_event_dir(tmp_path / "delta_0000010_0000012", {0: events})
    open_11 = Snapshot(12, open=frozenset({11}))
    expected = {(w, B0, r): (w * 100 + r, f"w{w}", None) for w in (10, 12) for r in range(3)}
    assert _read(tmp_path, open_11) == expected
    aborted_11 = Snapshot(12, aborted=frozenset({11}))
    assert _read(tmp_path, aborted_11) == expected
    assert len(_read(tmp_path, Snapshot(12))) == 9
    assert set(_read(tmp_path, Snapshot(11))) == {(w, B0, r) for w in (10, 11) for r in range(3)}
    EmbeddedWriter(str(tmp_path), columns=COLUMNS).delete([RowId(12, B0, 1), RowId(11, B0, 0)], write_id=13)
    for delete_path in DELETE_PATHS.values():
        result = _read(tmp_path, Snapshot(13, open=frozenset({11})), max_delete_events_in_memory=delete_path)
        assert result == {k: v for k, v in expected.items() if k != (12, B0, 1)}


def test_multi_stripe_streaming_delta(tmp_path):
    """Stripes that mix write ids, one of them open, with deletes spread over all of them."""
    model = TableModel()
    events = []
    for write_id in (10, 11, 12):
        rows = [(write_id * 10_000 + i, None, float(i)) for i in range(1100)]
        for (owid, bucket, row_id), row in zip(model.insert(rows, write_id=write_id), rows):
            events.append((INSERT_OPERATION, owid, bucket, row_id, write_id, row))
    _write_event_dir(tmp_path / "delta_0000010_0000012", {0: events}, stripe_rows=1024)
    assert pa_orc.ORCFile(str(tmp_path / "delta_0000010_0000012" / "bucket_00000")).nstripes == 4
    doomed = [(w, B0, r) for w in (10, 11, 12) for r in range(0, 1100, 7)]
    EmbeddedWriter(str(tmp_path), columns=COLUMNS, stripe_rows=1024).delete([RowId(*k) for k in doomed], write_id=13)
    model.delete(doomed, write_id=13)
    for snapshot in (Snapshot(13, open=frozenset({11})), Snapshot(13, aborted=frozenset({10, 13})), Snapshot(12),
                     Snapshot(13, open=frozenset({12, 13}))):
        for delete_path in DELETE_PATHS.values():
            assert _read(tmp_path, snapshot, max_delete_events_in_memory=delete_path) == model.visible(snapshot)


def test_reading_changes_nothing(random_table):
    location, _ = random_table
    before = tree(location)
    read_snapshot(str(location), max_delete_events_in_memory=0)
    read_snapshot(str(location), include_row_id=True, order_by_row_id=True)
    assert tree(location) == before


# --- the streamed read: record batches, a stripe at a time ------------------------------------------------------------
@pytest.mark.parametrize("snapshot", SNAPSHOTS[:4], ids=lambda s: "all" if s is None else s.hive_string())
@pytest.mark.parametrize("delete_path", DELETE_PATHS.values(), ids=DELETE_PATHS.keys())
def test_read_batches_equals_read_snapshot_in_row_id_order(multi_stripe_table, snapshot, delete_path):
    location, _ = multi_stripe_table
    options = dict(write_ids=_write_ids(snapshot), max_delete_events_in_memory=delete_path)
    whole = read_snapshot(str(location), include_row_id=True, order_by_row_id=True, **options)
    reader = read_batches(str(location), include_row_id=True, order_by_row_id=True, batch_rows=500, **options)
    batches = list(reader)
    assert max(batch.num_rows for batch in batches) <= 500 and len(batches) > 2
    assert pa.Table.from_batches(batches, reader.schema).equals(whole)


def test_read_batches_in_file_order_has_the_same_rows(random_table):
    location, model = random_table
    streamed = read_batches(str(location)).read_all()
    assert streamed.column_names == ["id", "name", "amount"]
    assert table_rows(streamed) == sorted(model.visible().values(), key=repr)


def test_read_batches_refuses_a_batch_of_no_rows(tmp_path):
    with pytest.raises(UsageError, match="batch_rows must be at least 1, got 0"):
        read_batches(str(tmp_path), missing_ok=True, batch_rows=0)


def test_read_batches_of_an_empty_or_missing_partition(tmp_path):
    assert read_batches(str(tmp_path / "nothing"), missing_ok=True, include_row_id=True).read_all().column_names == [
        "row__id"]
