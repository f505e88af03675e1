"""Interoperability with Hive 2.3.10's own ACID code (the jars in the pyspark wheel), driven by HiveAcidHarness.

What this module proves:

1. Tables written by acid_core (insert deltas, delete deltas, updates, several write ids and statements, a table
   with 2 buckets, a partition `p=1`) read the same rows, ROW__IDs included, through Hive's row-mode reader
   (OrcRawRecordMerger), Hive's vectorized reader (VectorizedOrcAcidRowBatchReader) and `acid read`.
2. Delta and delete-delta files written by Hive's OrcRecordUpdater (BucketCodec V0 bucket values, ORC field names
   `_col0`, `_col1`, ...) read the same through `acid read` and through Hive, including Hive deleting rows that Hive
   inserted, our writer deleting rows Hive inserted, and Hive deleting a row our writer inserted.
3. acid_core's getAcidState agrees with Hive 2.3's on the TestAcidUtils cases both versions share.

Hive 2.3 knows transaction ids only; a Hive 3 write-id list is handed to it as the ValidReadTxnList applied to the
ids in the files (harness.HiveSnapshot). JVM start-ups are few: the module-scoped `world` fixture uses one JVM to
write every Hive file and one for every Hive read and getAcidState call; one more test checks the harness's own
command line.
"""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pyorc
import pytest
from support.acid_utils_cases import HIVE2_CASES, AcidStateCase

from acid_cli.main import main as acid_main
from acid_core.errors import NotEnoughHistoryError
from acid_core.format.rowid import RowId, encode_bucket
from acid_core.format.validity import ValidCompactorWriteIdList, ValidTxnList, ValidWriteIdList
from acid_core.read.state import get_acid_state
from acid_core.write.writer import EmbeddedWriter

from .harness import HiveHarness, sort_rows

pytestmark = pytest.mark.interop

COLUMNS = (("id", "int"), ("name", "string"))
COLUMN_NAMES = ",".join(name for name, _ in COLUMNS)
B0, B1 = encode_bucket(0, 0), encode_bucket(1, 0)  # V1 bucket properties of bucket 0 and 1, statement 0
MAX = 2**63 - 1  # "nothing open" in a write-id list
STATE_FILE_BYTES = b"ORC\x00"  # getAcidState never opens data files
MODES = ("row", "vectorized")


@dataclass(frozen=True, slots=True)
class Snapshot:
    """One read of one partition directory: which table, which directory, under which write-id list."""

    key: str
    path: Path
    write_ids: str | None = None
    columns_arg: str | None = None  # names for `acid read --columns` (Hive's own files say _col0, _col1, ...)


# ---------------------------------------------------------------------------------------------------------------
# Tables written by acid_core


def write_ours_plain(root: Path) -> list[Snapshot]:
    """Unbucketed: inserts, a delete, an update, and a transaction of three statements (the last deletes a row of
    the first whose row id the second statement does not also use; see write_ours_statements for that case)."""
    location = root / "ours_plain"
    writer = EmbeddedWriter(str(location), columns=COLUMNS)
    writer.insert([(1, "a"), (2, "b"), (3, "c")], write_id=1)
    writer.insert([(4, "d"), (5, None)], write_id=2)
    writer.delete([RowId(1, B0, 1)], write_id=3)
    writer.update([RowId(2, B0, 0)], [(40, "dd")], write_id=4)
    writer.insert([(6, "f"), (7, "g")], write_id=5, statement_id=0)
    writer.insert([(8, "h")], write_id=5, statement_id=1)
    writer.delete([RowId(5, B0, 1)], write_id=5, statement_id=2)
    return [
        Snapshot("ours_plain", location),
        Snapshot("ours_plain@3open", location, "default.ours_plain:5:3:3:"),
        Snapshot("ours_plain@4aborted", location, f"default.ours_plain:5:{MAX}::4"),
        Snapshot("ours_plain@hwm4", location, f"default.ours_plain:4:{MAX}::"),
    ]


def write_ours_statements(root: Path) -> list[Snapshot]:
    """Two insert statements of one write id number their rows from 0 each; the statement id in the V1 bucket property
    keeps ROW__IDs (1, 536870912, 0) and (1, 536870913, 0) apart. Write 2 deletes the first."""
    location = root / "ours_statements"
    writer = EmbeddedWriter(str(location), columns=COLUMNS)
    writer.insert([(1, "a"), (2, "b")], write_id=1, statement_id=0)
    writer.insert([(3, "c")], write_id=1, statement_id=1)
    writer.delete([RowId(1, B0, 0)], write_id=2)
    return [Snapshot("ours_statements", location)]


def write_ours_bucketed(root: Path) -> list[Snapshot]:
    """Two buckets (id % 2): a delete in each bucket, an update, and a two-statement insert."""
    location = root / "ours_bucketed"
    writer = EmbeddedWriter(str(location), columns=COLUMNS, bucket_count=2, bucket_function=lambda row: row[0] % 2)
    writer.insert([(i, f"v{i}") for i in range(1, 9)], write_id=1)  # bucket 1: 1 3 5 7, bucket 0: 2 4 6 8
    writer.delete([RowId(1, B1, 0), RowId(1, B0, 3)], write_id=2)     # ids 1 and 8
    writer.update([RowId(1, B1, 1)], [(3, "v3-new")], write_id=3)      # id 3
    writer.insert([(9, "v9"), (10, "v10")], write_id=4, statement_id=0)
    writer.insert([(11, "v11")], write_id=4, statement_id=1)
    return [
        Snapshot("ours_bucketed", location),
        Snapshot("ours_bucketed@2open", location, "default.ours_bucketed:4:2:2:"),
    ]


def write_ours_partitioned(root: Path) -> list[Snapshot]:
    """Partitioned by p; partition p=1 gets inserts, a delete and an update, p=2 an insert of its own."""
    location = root / "ours_partitioned"
    writer = EmbeddedWriter(str(location), columns=COLUMNS, partition_keys=("p",))
    writer.insert([(1, "a"), (2, "b"), (3, "c")], write_id=1, partition={"p": 1})
    writer.insert([(100, "other")], write_id=2, partition={"p": 2})
    writer.delete([RowId(1, B0, 0)], write_id=3, partition={"p": 1})
    writer.update([RowId(1, B0, 1)], [(20, "bb")], write_id=4, partition={"p": 1})
    return [Snapshot("ours_partitioned/p=1", location / "p=1")]


def write_ours_multistripe(root: Path) -> list[Snapshot]:
    """3,000 rows in stripes of 1,000 (Hive's row reader bounds delete events by the key index of the stripes) and
    two delete deltas of fewer than 1,024 events each, deleting different rows (as real deletes do: a row deleted
    by two transactions makes Hive 2.3's ColumnizedDeleteEventRegistry lose events and fail)."""
    location = root / "ours_multistripe"
    writer = EmbeddedWriter(str(location), columns=COLUMNS, stripe_rows=1000)
    writer.insert([(i, f"r{i}") for i in range(3000)], write_id=1)
    writer.delete([RowId(1, B0, i) for i in range(0, 3000, 6)], write_id=2)    # 500 events
    writer.delete([RowId(1, B0, i) for i in range(1, 3000, 6)], write_id=3)    # 500 other events
    return [Snapshot("ours_multistripe", location),
            Snapshot("ours_multistripe@hwm2", location, f"default.ours_multistripe:2:{MAX}::")]


def write_ours_big_delete(root: Path) -> list[Snapshot]:
    """One delete-delta file with 1,100 events: more than one 1,024-row batch of Hive 2.3's vectorized reader."""
    location = root / "ours_big_delete"
    writer = EmbeddedWriter(str(location), columns=COLUMNS)
    writer.insert([(i, f"r{i}") for i in range(2000)], write_id=1)
    writer.delete([RowId(1, B0, i) for i in range(1100)], write_id=2)
    return [Snapshot("ours_big_delete", location)]


# ---------------------------------------------------------------------------------------------------------------
# Tables written by Hive 2.3's OrcRecordUpdater (and one table both write to)


def hive_plain_specs(location: Path) -> list[dict]:
    """Two buckets in write 1; write 2 deletes one of Hive's own rows in each bucket; write 3 inserts in statement 0
    and deletes one of those rows in statement 1 (Hive 2.3 numbers rows per statement with the same bucket value,
    so a second insert statement would reuse ROW__IDs)."""
    base = {"partition_dir": str(location), "columns": [list(c) for c in COLUMNS]}
    return [
        {**base, "write_id": 1, "bucket": 0, "inserts": [[1, "a"], [2, "b"], [3, "c"]]},
        {**base, "write_id": 1, "bucket": 1, "inserts": [[4, "d"], [5, None]]},
        {**base, "write_id": 2, "bucket": 0, "deletes": [{"writeid": 1, "bucketid": 0, "rowid": 1}]},
        {**base, "write_id": 2, "bucket": 1, "deletes": [{"writeid": 1, "bucketid": 1, "rowid": 0}]},
        {**base, "write_id": 3, "statement_id": 0, "bucket": 0, "inserts": [[6, "f"], [7, "g"]]},
        {**base, "write_id": 3, "statement_id": 1, "bucket": 0, "deletes": [{"writeid": 3, "bucketid": 0, "rowid": 0}]},
    ]


def hive_plain_snapshots(location: Path) -> list[Snapshot]:
    return [
        Snapshot("hive_plain", location, None, COLUMN_NAMES),
        Snapshot("hive_plain@2open", location, "default.hive_plain:3:2:2:", COLUMN_NAMES),
        Snapshot("hive_plain@3aborted", location, f"default.hive_plain:3:{MAX}::3", COLUMN_NAMES),
        Snapshot("hive_plain@hwm1", location, f"default.hive_plain:1:{MAX}::", COLUMN_NAMES),
    ]


def hive_update_specs(location: Path) -> list[dict]:
    """An UPDATE and a DELETE in one Hive transaction (split-update: delete events plus a new insert event)."""
    base = {"partition_dir": str(location), "columns": [list(c) for c in COLUMNS]}
    return [
        {**base, "write_id": 1, "bucket": 0, "inserts": [[1, "a"], [2, "b"], [3, "c"]]},
        {**base, "write_id": 2, "bucket": 0, "deletes": [{"writeid": 1, "bucketid": 0, "rowid": 2}],
         "updates": [{"row_id": {"writeid": 1, "bucketid": 0, "rowid": 0}, "row": [10, "aa"]}]},
    ]


def write_mixed_ours(location: Path) -> None:
    """Our writes into the table Hive writes too: an insert (V1) and a delete of a row Hive inserted (V0)."""
    writer = EmbeddedWriter(str(location), columns=COLUMNS)
    writer.insert([(3, "c"), (4, "d")], write_id=2)
    writer.delete([RowId(1, 0, 0)], write_id=3)  # Hive's row (1, "a"): bucket value 0 as Hive wrote it


def mixed_hive_specs(location: Path) -> list[dict]:
    """Hive's writes into the mixed table: an insert (write 1) and a delete of our row (4, "d") (write 4)."""
    base = {"partition_dir": str(location), "columns": [list(c) for c in COLUMNS]}
    return [
        {**base, "write_id": 1, "bucket": 0, "inserts": [[1, "a"], [2, "b"]]},
        {**base, "write_id": 4, "bucket": 0, "deletes": [{"writeid": 2, "bucketid": B0, "rowid": 1}]},
    ]


# ---------------------------------------------------------------------------------------------------------------
# Module fixtures: everything is written first, then Hive reads everything in one JVM.


@dataclass
class World:
    """All tables, the Hive results of every read and state job, and the state-case directories."""

    root: Path
    snapshots: dict[str, Snapshot]
    hive_reads: dict[tuple[str, str], dict]      # (snapshot key, mode) -> {"ok", "result" | "error"}
    state_dirs: dict[str, Path]
    hive_states: dict[str, dict]                  # case name -> {"ok", "result" | "error"}
    hive_written_files: list[dict]
    jvm_starts: int


def make_state_case(root: Path, case: AcidStateCase) -> Path:
    partition = root / "states" / case.name
    for relative in case.files:
        target = partition / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(STATE_FILE_BYTES[:1] * case.size_of(relative, len(STATE_FILE_BYTES)))
    return partition


@pytest.fixture(scope="module")
def world(hive: HiveHarness, tmp_path_factory) -> World:
    """Write every table (ours, then all of Hive's in one JVM), lay out the state cases, then run every Hive read
    (both modes) and getAcidState call in one more JVM; per-job failures are kept for the tests to judge."""
    root = tmp_path_factory.mktemp("interop")
    starts_before = hive.jvm_starts
    snapshots: list[Snapshot] = []
    for writer in (write_ours_plain, write_ours_statements, write_ours_bucketed, write_ours_partitioned,
                   write_ours_multistripe, write_ours_big_delete):
        snapshots += writer(root)

    hive_plain, hive_update, mixed = root / "hive_plain", root / "hive_update", root / "mixed"
    write_mixed_ours(mixed)
    written = hive.hive_write(hive_plain_specs(hive_plain) + hive_update_specs(hive_update) + mixed_hive_specs(mixed))
    snapshots += hive_plain_snapshots(hive_plain)
    snapshots += [Snapshot("hive_update", hive_update, None, COLUMN_NAMES),
                  Snapshot("hive_update@2aborted", hive_update, f"default.hive_update:2:{MAX}::2", COLUMN_NAMES)]
    snapshots.append(Snapshot("mixed", mixed, None, COLUMN_NAMES))

    state_dirs = {case.name: make_state_case(root, case) for case in HIVE2_CASES}

    read_keys, state_keys, jobs = [], [], []
    for snapshot in snapshots:
        for mode in MODES:
            read_keys.append((snapshot.key, mode))
            jobs.append(HiveHarness.read_job(snapshot.path, columns=COLUMNS, write_ids=snapshot.write_ids, mode=mode))
    for case in HIVE2_CASES:
        state_keys.append(case.name)
        jobs.append(HiveHarness.state_job(state_dirs[case.name], write_ids=case.write_ids, compactor=case.compactor))
    outcomes = hive.batch(jobs)
    return World(
        root=root,
        snapshots={s.key: s for s in snapshots},
        hive_reads=dict(zip(read_keys, outcomes[:len(read_keys)])),
        state_dirs=state_dirs,
        hive_states=dict(zip(state_keys, outcomes[len(read_keys):])),
        hive_written_files=written,
        jvm_starts=hive.jvm_starts - starts_before,
    )


def hive_rows(world: World, key: str, mode: str) -> list[dict]:
    outcome = world.hive_reads[(key, mode)]
    assert outcome["ok"], f"Hive 2.3 {mode} reader failed on {key}: {outcome['error']}"
    return sort_rows(outcome["result"])


def acid_read(snapshot: Snapshot) -> list[dict]:
    """`acid read PATH --row-id --format jsonl [--write-ids ...] [--columns ...]`, run in-process."""
    argv = ["read", str(snapshot.path), "--row-id", "--format", "jsonl"]
    if snapshot.write_ids:
        argv += ["--write-ids", snapshot.write_ids]
    if snapshot.columns_arg:
        argv += ["--columns", snapshot.columns_arg]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = acid_main(argv)
    assert status == 0, f"acid {' '.join(argv)} exited {status}: {err.getvalue()}"
    return sort_rows(json.loads(line) for line in out.getvalue().splitlines() if line.strip())


def ids(rows: list[dict]) -> list[int]:
    return sorted(row["id"] for row in rows)


# ---------------------------------------------------------------------------------------------------------------
# 1. acid_core's files through Hive's readers

OURS = ("ours_plain", "ours_plain@3open", "ours_plain@4aborted", "ours_plain@hwm4", "ours_bucketed",
        "ours_bucketed@2open", "ours_partitioned/p=1", "ours_multistripe", "ours_multistripe@hwm2")


@pytest.mark.parametrize("key", OURS)
def test_our_tables_read_the_same_in_hive_row_mode_vectorized_and_acid_read(world, key):
    ours = acid_read(world.snapshots[key])
    assert ours, f"{key}: the snapshot should not be empty"
    assert hive_rows(world, key, "row") == ours
    assert hive_rows(world, key, "vectorized") == ours


def test_our_plain_table_rows_are_the_expected_ones(world):
    """A fixed point, so that all three readers agreeing on something wrong would still fail."""
    rows = acid_read(world.snapshots["ours_plain"])
    assert [(r["row__id"]["writeid"], r["row__id"]["bucketid"], r["row__id"]["rowid"], r["id"], r["name"])
            for r in rows] == [
        (1, B0, 0, 1, "a"), (1, B0, 2, 3, "c"), (2, B0, 1, 5, None), (4, B0, 0, 40, "dd"),
        (5, B0, 0, 6, "f"), (5, encode_bucket(0, 1), 0, 8, "h")]
    assert ids(acid_read(world.snapshots["ours_plain@3open"])) == [1, 2, 3, 5, 6, 8, 40]
    assert ids(acid_read(world.snapshots["ours_plain@4aborted"])) == [1, 3, 4, 5, 6, 8]
    assert ids(acid_read(world.snapshots["ours_plain@hwm4"])) == [1, 3, 5, 40]


def test_our_bucketed_table_keeps_rows_in_their_buckets(world):
    rows = hive_rows(world, "ours_bucketed", "row")
    assert ids(rows) == [2, 3, 4, 5, 6, 7, 9, 10, 11]
    for row in rows:
        assert row["row__id"]["bucketid"] >> 29 == 1, row            # BucketCodec V1
        assert (row["row__id"]["bucketid"] >> 16) & 0xFFF == row["id"] % 2, row


def test_our_files_carry_v1_buckets_and_hive_user_metadata(world):
    files = sorted(p for key in ("ours_plain", "ours_bucketed", "ours_partitioned/p=1")
                   for p in world.snapshots[key].path.glob("*delta_*/bucket_*"))
    assert len(files) >= 10
    for path in files:
        with path.open("rb") as stream:
            reader = pyorc.Reader(stream)
            metadata = reader.user_metadata
            assert {"hive.acid.key.index", "hive.acid.stats", "hive.acid.version"} <= set(metadata), path
            assert metadata["hive.acid.version"] == b"2", path
            buckets = {event[2] for event in reader}
        assert buckets and all(bucket >> 29 == 1 for bucket in buckets), (path, buckets)


def test_statement_ids_keep_row_ids_apart_except_in_hive23_vectorized_reader(world):
    """Limit of Hive 2.3: its vectorized reader matches delete events on (write id, row id) within a bucket file and
    ignores the bucket property, where Hive 3 keeps the statement id; deleting (1, 536870912, 0) therefore also hides
    (1, 536870913, 0) there. Hive 2.3's row-mode reader compares the whole ROW__ID, as Hive 3 and acid_core do."""
    ours = acid_read(world.snapshots["ours_statements"])
    assert [(r["row__id"]["bucketid"], r["row__id"]["rowid"], r["id"]) for r in ours] == [
        (B0, 1, 2), (encode_bucket(0, 1), 0, 3)]
    assert hive_rows(world, "ours_statements", "row") == ours
    assert ids(hive_rows(world, "ours_statements", "vectorized")) == [2]


def test_hive23_vectorized_reader_cannot_take_a_v1_delete_file_past_its_first_batch(world):
    """Limit of Hive 2.3 (not of our files): its ColumnizedDeleteEventRegistry compares the raw `bucket` value of every
    delete batch after the first 1,024 events with the bucket number in the file name, so a V1 delete-delta file
    (536870912 for bucket 0) with more than 1,024 events fails there. The row-mode reader reads it fine."""
    ours = acid_read(world.snapshots["ours_big_delete"])
    assert len(ours) == 900
    assert hive_rows(world, "ours_big_delete", "row") == ours
    outcome = world.hive_reads[("ours_big_delete", "vectorized")]
    assert not outcome["ok"]
    assert "Corrupted records with different bucket ids" in outcome["error"]
    assert "found the bucket id 536870912" in outcome["error"]


# ---------------------------------------------------------------------------------------------------------------
# 2. Hive's files through acid read

HIVE = ("hive_plain", "hive_plain@2open", "hive_plain@3aborted", "hive_plain@hwm1")


@pytest.mark.parametrize("key", HIVE)
def test_hive_written_tables_read_the_same_through_acid_read(world, key):
    ours = acid_read(world.snapshots[key])
    assert ours, f"{key}: the snapshot should not be empty"
    assert hive_rows(world, key, "row") == ours
    assert hive_rows(world, key, "vectorized") == ours


def test_hive_written_rows_are_the_expected_ones(world):
    rows = acid_read(world.snapshots["hive_plain"])
    assert [(r["row__id"]["writeid"], r["row__id"]["bucketid"], r["row__id"]["rowid"], r["id"], r["name"])
            for r in rows] == [
        (1, 0, 0, 1, "a"), (1, 0, 2, 3, "c"), (1, 1, 1, 5, None), (3, 0, 1, 7, "g")]
    assert ids(acid_read(world.snapshots["hive_plain@2open"])) == [1, 2, 3, 4, 5, 7]
    assert ids(acid_read(world.snapshots["hive_plain@3aborted"])) == [1, 3, 5]
    assert ids(acid_read(world.snapshots["hive_plain@hwm1"])) == [1, 2, 3, 4, 5]


def test_hive_writes_v0_buckets_and_internal_column_names(world):
    written = [f for result in world.hive_written_files for f in result["files"]]
    assert "delta_0000001_0000001_0000/bucket_00001" in written
    assert "delete_delta_0000002_0000002_0000/bucket_00000" in written
    path = world.snapshots["hive_plain"].path / "delete_delta_0000002_0000002_0000" / "bucket_00000"
    with path.open("rb") as stream:
        reader = pyorc.Reader(stream)
        assert str(reader.schema).endswith("row:struct<_col0:int,_col1:string>>")
        assert reader.user_metadata["hive.acid.stats"] == b"0,0,1"
        assert [event[:5] for event in reader] == [(2, 1, 0, 1, 2)]


@pytest.mark.parametrize("key", ("hive_update", "hive_update@2aborted"))
def test_hive_update_reads_the_same_through_acid_read(world, key):
    """Hive 2.3's OrcRecordUpdater switches the ORC writer options' callback to the delete-event key index builder
    when it opens the delete-delta writer, and opens the insert writer lazily afterwards with the same options
    (the HIVE-14514 caveat in its source). So the insert file of an UPDATE carries the *delete* file's user
    metadata: `hive.acid.stats` = "0,0,<deletes>" although it holds only insert events. Hive's readers ignore the
    stats of insert files; `acid read` must read such files too (every Hive 2.3 table that saw an UPDATE has them)."""
    insert_file = world.snapshots[key].path / "delta_0000002_0000002_0000" / "bucket_00000"
    with insert_file.open("rb") as stream:
        reader = pyorc.Reader(stream)
        assert reader.user_metadata["hive.acid.stats"] == b"0,0,2"
        assert [event[0] for event in reader] == [0]  # one insert event (operation 0), nothing else
    rows = hive_rows(world, key, "row")
    assert rows == hive_rows(world, key, "vectorized")
    expected = [(2, "b"), (10, "aa")] if key == "hive_update" else [(1, "a"), (2, "b"), (3, "c")]
    assert [(r["id"], r["name"]) for r in rows] == expected
    assert acid_read(world.snapshots[key]) == rows


def test_mixed_table_written_by_hive_and_by_us(world):
    """Our delete of a row Hive inserted works everywhere. Hive 2.3's delete of a row we inserted carries Hive's
    own bucket value (0, V0) instead of the row's V1 property 536870912: Hive's row-mode reader, like Hive 3, matches
    delete events on (write id, bucket property, row id) and keeps the row; Hive 2.3's vectorized reader matches on
    (write id, row id) only and drops it. `acid read` must agree with the row-mode reader (and Hive 3)."""
    ours = acid_read(world.snapshots["mixed"])
    row_mode = hive_rows(world, "mixed", "row")
    vectorized = hive_rows(world, "mixed", "vectorized")
    assert ids(row_mode) == [2, 3, 4]
    assert ids(vectorized) == [2, 3]
    assert ours == row_mode
    delete_file = world.snapshots["mixed"].path / "delete_delta_0000004_0000004_0000" / "bucket_00000"
    with delete_file.open("rb") as stream:
        assert [event[:5] for event in pyorc.Reader(stream)] == [(2, 2, 0, 1, 4)]


def test_acid_read_console_command_on_a_hive_table(world):
    """The real `python -m acid_cli.main read` process (the other tests call its main() in-process)."""
    snapshot = world.snapshots["hive_plain@2open"]
    completed = subprocess.run(
        [sys.executable, "-m", "acid_cli.main", "read", str(snapshot.path), "--row-id", "--format", "jsonl",
         "--write-ids", snapshot.write_ids, "--columns", COLUMN_NAMES],
        capture_output=True, text=True, timeout=120, check=False, cwd=Path(__file__).resolve().parents[2])
    assert completed.returncode == 0, completed.stderr
    rows = sort_rows(json.loads(line) for line in completed.stdout.splitlines())
    assert rows == hive_rows(world, "hive_plain@2open", "row")


# ---------------------------------------------------------------------------------------------------------------
# 3. getAcidState: Hive 2.3 vs the TestAcidUtils expectations vs acid_core


def _python_state(case: AcidStateCase, path: Path):
    list_class = ValidCompactorWriteIdList if case.compactor else ValidWriteIdList
    return get_acid_state(str(path), write_ids=list_class.parse(case.write_ids), txns=ValidTxnList.parse(case.txns))


@pytest.mark.parametrize("case", HIVE2_CASES, ids=lambda case: case.name)
def test_hive23_get_acid_state_gives_the_test_acid_utils_answer(world, case):
    outcome = world.hive_states[case.name]
    path = world.state_dirs[case.name]
    if case.error is not None:
        assert not outcome["ok"], f"Hive 2.3 should fail with {case.error!r}, answered {outcome.get('result')}"
        assert case.expected_error(str(path)) in outcome["error"].replace("file:", "")
        return
    assert outcome["ok"], outcome.get("error")
    state = outcome["result"]
    assert state["base"] == case.base
    assert state["deltas"] == list(case.deltas)
    assert set(state["obsolete"]) == set(case.obsolete)
    assert state["original"] == sorted(case.original_files)


@pytest.mark.parametrize("case", [c for c in HIVE2_CASES if c.hive4_rules], ids=lambda case: case.name)
def test_acid_core_get_acid_state_agrees_with_hive23(world, case):
    outcome = world.hive_states[case.name]
    path = world.state_dirs[case.name]
    if not outcome["ok"]:
        with pytest.raises(NotEnoughHistoryError):
            _python_state(case, path)
        return
    hive_state = outcome["result"]
    state = _python_state(case, path)
    assert (state.base.name if state.base else None) == hive_state["base"]
    assert [delta.name for delta in state.deltas] == hive_state["deltas"]
    assert sorted(state.obsolete) == hive_state["obsolete"]
    assert sorted(state.original_files) == hive_state["original"]


def test_acid_inspect_console_command_agrees_with_hive23(world):
    case = next(c for c in HIVE2_CASES if c.name == "testOverlapingDeltaAndDeleteDelta")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = acid_main(["inspect", str(world.state_dirs[case.name]), "--write-ids", case.write_ids, "--json"])
    assert status == 0
    document = json.loads(out.getvalue())
    hive_state = world.hive_states[case.name]["result"]
    assert document["base"] == hive_state["base"]
    assert document["deltas"] == hive_state["deltas"]
    assert document["obsolete"] == hive_state["obsolete"]


def test_harness_command_line_reads_several_directories(world, hive):
    """The harness's own command line (`read DIR DIR --columns ... --hwm/--exceptions/--min-open --mode`), one JVM."""
    plain, mixed = world.snapshots["hive_plain@2open"], world.snapshots["mixed"]
    rows = hive.run(["read", str(plain.path), str(mixed.path), "--columns", "id:int,name:string",
                     "--hwm", "3", "--exceptions", "2", "--min-open", "2", "--mode", "row"])
    # Under that list, the mixed table keeps only Hive's (1, "b"): write 2 (ours) is open, write 3 deleted (1, "a").
    mixed_row = {"row__id": {"writeid": 1, "bucketid": 0, "rowid": 1}, "id": 2, "name": "b"}
    assert sort_rows(rows) == sort_rows(hive_rows(world, "hive_plain@2open", "row") + [mixed_row])


def test_the_module_starts_few_jvms(world):
    """One JVM writes Hive's files, one reads everything (compilation is separate and once per session)."""
    assert world.jvm_starts == 2
