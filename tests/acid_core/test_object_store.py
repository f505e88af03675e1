"""The warehouse on S3: an S3-compatible server on loopback (moto's, tests/s3_server.py), real pyarrow S3 requests,
metastores on SQLite and PostgreSQL.

Every writer, the compactor and the cleaner work on `s3://` locations, and none of them renames: an object store
copies every byte of a rename (CopyObject) and cannot rename a directory at all. Writers put final names directly,
hidden by the metastore until their transaction commits (Hive's direct insert); the server's request counts show
that no compaction, write or clean makes a server-side copy.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from acid_core.compaction.cleaner import clean
from acid_core.compaction.worker import CompactionWorker
from acid_core.metastore.codes import CompactionState, CompactionType
from acid_core.operations.housekeeping import housekeep
from acid_core.read.merge import read_snapshot
from acid_core.storage.fs import FileSystem
from acid_core.write.streaming import StreamingConnection
from acid_core.write.table_write import TableWrite

ROOT = Path(__file__).resolve().parents[2]
COLUMNS = [("id", "int"), ("name", "string")]
COPIES = ("CopyObject", "UploadPartCopy")


def listing(location: str) -> list[str]:
    fs, path = FileSystem.resolve(location)
    return sorted(entry.name for entry in fs.list_dir(path, missing_ok=True))


def rows_of(ms, table: str, partition: str | None = None, snapshot=None) -> list[tuple]:
    info = ms.catalog.get_table("default", table)
    snapshot = snapshot or ms.txns.snapshot([info.full_name])
    fs, path = FileSystem.resolve(info.partition_location(partition))
    data = read_snapshot(path, write_ids=snapshot.write_ids[info.full_name], txns=snapshot.txns, missing_ok=True,
                         fs=fs)
    return sorted(zip(*(column.to_pylist() for column in data.columns)))


@pytest.fixture
def s3_ms(make_ms, s3_warehouse):
    return make_ms(warehouse=s3_warehouse)


def test_writes_compaction_and_clean_on_s3_make_no_server_side_copy(s3_ms, s3_server):
    ms = s3_ms
    info = ms.catalog.create_table("default", "events", COLUMNS, params={"transactional": "true"},
                                   partition_keys=[("ds", "string")])
    assert info.location.startswith("s3://")
    for start in (0, 100, 200):
        with TableWrite.open(ms, "default", "events", agent_info="test") as write:
            write.insert([(i, f"row-{i}") for i in range(start, start + 100)], partition={"ds": "a"})
    with TableWrite.open(ms, "default", "events", agent_info="test") as write:
        seen = write.read("ds=a", include_row_id=True)
        ids = seen.column("id").to_pylist()
        row_ids = seen.column("row__id").to_pylist()
        assert len(ids) == 300
    from acid_core.format.rowid import RowId

    doomed = [RowId(r["writeid"], r["bucketid"], r["rowid"]) for r, i in zip(row_ids, ids) if i % 10 == 0]
    with TableWrite.open(ms, "default", "events", agent_info="test") as write:
        write.delete(doomed, partition={"ds": "a"})
    with StreamingConnection(ms, "default", "events", partition={"ds": "a"}, batch_size=4) as stream:
        for number in range(5):
            stream.begin_transaction()
            stream.write([(1000 + number, "streamed")])
            stream.abort_transaction() if number == 2 else stream.commit_transaction()
    expected = sorted([(i, f"row-{i}") for i in range(300) if i % 10]
                      + [(1000 + n, "streamed") for n in range(5) if n != 2])
    assert rows_of(ms, "events", "ds=a") == expected
    partition = f"{info.location}/ds=a"
    before = listing(partition)
    assert not [name for name in before if name.startswith(".")]  # nothing staged under a hidden name
    streamed = [name for name in before if name.startswith("delta_") and name.count("_") == 2]
    assert len(streamed) == 5  # streaming on an object store: one delta per transaction, no side files

    minor = ms.compactions.enqueue("default", "events", "ds=a", CompactionType.MINOR).compaction_id
    CompactionWorker(ms).run(minor)
    assert rows_of(ms, "events", "ds=a") == expected
    assert [r.outcome for r in clean(ms, log=lambda line: None)] == ["cleaned"]
    assert len(listing(partition)) == 2  # the minor compaction's delta and delete delta
    major = ms.compactions.enqueue("default", "events", "ds=a", CompactionType.MAJOR).compaction_id
    CompactionWorker(ms).run(major)
    assert rows_of(ms, "events", "ds=a") == expected
    assert [r.outcome for r in clean(ms, log=lambda line: None)] == ["cleaned"]

    entry = ms.compactions.get(major)
    assert listing(partition) == [f"base_{entry.highest_write_id:07d}_v{entry.txn_id:07d}"]
    assert rows_of(ms, "events", "ds=a") == expected
    counts = s3_server.counts()
    assert not {kind: counts.get(kind) for kind in COPIES if counts.get(kind)}, counts
    assert counts.get("DeleteObjects", 0) >= 1  # the cleaner deletes by prefix, in batches


def test_a_failed_write_leaves_nothing_and_a_killed_one_is_removed_by_housekeeping(s3_ms, clock):
    ms = s3_ms
    info = ms.catalog.create_table("default", "t", COLUMNS, params={"transactional": "true"})
    with TableWrite.open(ms, "default", "t", agent_info="test") as write:
        write.insert([(1, "kept")])
    with pytest.raises(ValueError, match="bad input"):
        with TableWrite.open(ms, "default", "t", agent_info="test") as write:
            write.insert([(2, "gone")])
            raise ValueError("bad input")  # the block fails after the files were written: aborted, files removed
    assert listing(info.location) == ["delta_0000001_0000001_0000"]

    killed = TableWrite.open(ms, "default", "t", agent_info="killed writer")  # table-wide staging record
    final = "delta_0000003_0000003_0000"
    fs, path = FileSystem.resolve(info.location)
    directory = fs.join(path, killed.staging_name(final))
    assert directory.endswith("/" + final)  # on S3 a write builds its final directory directly
    fs.make_dirs(directory)
    fs.write_atomically(fs.join(directory, "bucket_00000"), b"never committed")
    killed.staged(directory, directory)
    assert rows_of(ms, "t") == [(1, "kept")]  # write id 3 is open: invisible

    clock.advance(ms.txns.txn_timeout_ms + 1)  # the writer is dead: its transaction times out
    report = housekeep(ms)
    assert [p.rsplit("/", 1)[-1] for p in report.removed_staging] == [final]
    assert listing(info.location) == ["delta_0000001_0000001_0000"]
    assert rows_of(ms, "t") == [(1, "kept")]


def test_a_failed_compaction_on_s3_removes_its_results_and_keeps_its_transaction_until_then(s3_ms):
    ms = s3_ms
    info = ms.catalog.create_table("default", "c", COLUMNS, params={"transactional": "true"})
    for start in (0, 10):
        with TableWrite.open(ms, "default", "c", agent_info="test") as write:
            write.insert([(i, "x") for i in range(start, start + 10)])
    compaction_id = ms.compactions.enqueue("default", "c", None, CompactionType.MAJOR).compaction_id
    seen: dict = {}

    def failing_runner(plan):
        from acid_core.compaction.worker import local_runner

        local_runner(plan)
        seen["outputs"] = listing(info.location)
        seen["staging"] = ms.txns.abandoned_staging()  # none: the transaction is open
        raise RuntimeError("executor lost")

    with pytest.raises(RuntimeError, match="executor lost"):
        CompactionWorker(ms, runner=failing_runner).run(compaction_id)
    entry = ms.compactions.get(compaction_id)
    assert entry.state is CompactionState.FAILED
    assert [name for name in seen["outputs"] if name.startswith("base_")]  # written in place, then removed
    assert seen["staging"] == []
    assert listing(info.location) == ["delta_0000001_0000001_0000", "delta_0000002_0000002_0000"]
    assert ms.txns.abandoned_staging() == []  # its record went with its results
    assert rows_of(ms, "c") == [(i, "x") for i in range(20)]


def test_cleaner_trash_must_be_on_the_same_bucket(s3_ms, s3_server, s3_warehouse, clock):
    ms = s3_ms
    ms.catalog.create_table("default", "tr", COLUMNS, params={"transactional": "true"})
    for start in (0, 5):
        with TableWrite.open(ms, "default", "tr", agent_info="test") as write:
            write.insert([(i, "x") for i in range(start, start + 5)])
    CompactionWorker(ms).run(ms.compactions.enqueue("default", "tr", None, CompactionType.MAJOR).compaction_id)
    other = s3_server.make_bucket("other-trash-bucket")
    [refused] = clean(ms, trash_dir=f"{other}/trash", log=lambda line: None)
    assert refused.outcome != "cleaned" and "give a trash directory in the same bucket" in refused.message
    assert len(listing(ms.catalog.get_table("default", "tr").location)) == 3  # nothing removed
    clock.advance(24 * 3600 * 1000)  # past the retry retention of the failed clean
    bucket = s3_warehouse.split("/warehouse")[0]
    results = clean(ms, trash_dir=f"{bucket}/trash", log=lambda line: None)
    assert [r.outcome for r in results] == ["cleaned"]
    assert len(listing(f"{bucket}/trash")) == 1  # the run's directory, holding the two deltas
    assert rows_of(ms, "tr") == [(i, "x") for i in range(10)]


def test_acid_read_and_inspect_on_s3(s3_ms):
    ms = s3_ms
    info = ms.catalog.create_table("default", "r", COLUMNS, params={"transactional": "true"})
    with TableWrite.open(ms, "default", "r", agent_info="test") as write:
        write.insert([(1, "one"), (2, "two")])

    def acid(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "acid_cli.main", *args], capture_output=True, text=True,
                              cwd=ROOT, timeout=120)

    inspected = acid("inspect", info.location, "--write-ids", "default.r:1:9223372036854775807::", "--json")
    assert inspected.returncode == 0, inspected.stderr
    assert json.loads(inspected.stdout)["deltas"] == ["delta_0000001_0000001_0000"]
    read = acid("read", info.location, "--format", "jsonl", "--columns", "id,name")
    assert read.returncode == 0, read.stderr
    assert [json.loads(line) for line in read.stdout.splitlines()] == [{"id": 1, "name": "one"},
                                                                       {"id": 2, "name": "two"}]


@pytest.mark.spark  # UPDATE and DELETE run on Spark: this worker's session, which `acid sql` finds running
def test_acid_sql_on_an_s3_warehouse(s3_ms, spark):
    import io

    from acid_cli.sql import run_script

    out = io.StringIO()
    status = run_script("""
        CREATE TABLE sales (id INT, amount DECIMAL(10,2)) PARTITIONED BY (ds STRING)
            STORED AS ORC TBLPROPERTIES ('transactional'='true');
        INSERT INTO sales PARTITION (ds='a') VALUES (1, 1.50), (2, 2.50), (3, 3.50);
        UPDATE sales SET amount = 20 WHERE id = 2;
        DELETE FROM sales WHERE id = 3;
        DROP TABLE IF EXISTS nothing_here;
    """, metastore=s3_ms, output_format="jsonl", out=out)
    assert status == 0, out.getvalue()
    info = s3_ms.catalog.get_table("default", "sales")
    assert info.location.startswith("s3://")
    assert [(i, float(a)) for i, a in rows_of(s3_ms, "sales", "ds=a")] == [(1, 1.5), (2, 20.0)]
    assert not [name for name in listing(f"{info.location}/ds=a") if name.startswith(".")]
