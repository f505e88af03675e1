"""The cleaner over real tables, transactions, compactions and files, on SQLite and PostgreSQL.

Each test writes a table with EmbeddedWriter inside real metastore transactions, compacts it with CompactionWorker and
runs `clean`: Hive's Cleaner rules (hive-acid-reference.md section 7) — wait for every snapshot that may read the old
directories, remove obsolete and aborted directories only, verify, mark cleaned.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from support.cleaner_tables import COLUMNS, MAJOR, Table, quiet, state_of, three_writes

from acid_core.compaction.cleaner import NO_CLEANUP_MESSAGE, CleanResult, clean
from acid_core.compaction.worker import CompactionWorker
from acid_core.metastore.codes import CompactionState
from acid_core.metastore.txns import Operation
from acid_core.write.writer import EmbeddedWriter


def test_major_compaction_then_clean_removes_obsolete_deltas(ms):
    table = three_writes(ms)
    compaction_id = table.compact()
    assert len(table.dirs()) == 4
    lines: list[str] = []
    [result] = clean(ms, log=quiet(lines))
    assert isinstance(result, CleanResult) and result.outcome == "cleaned", result
    [base] = table.dirs()
    assert base.startswith("base_0000003_v")
    assert sorted(Path(p).name for p in result.removed) == ["delta_0000001_0000001_0000", "delta_0000002_0000002_0000",
                                                            "delta_0000003_0000003_0000"]
    assert all(any(p in line for line in lines) for p in result.removed)
    assert state_of(ms, compaction_id) is CompactionState.SUCCEEDED
    assert table.rows() == [(1, "a"), (2, "b"), (3, "c")]
    assert clean(ms, log=quiet([])) == []


def test_aborted_directories_are_removed(ms):
    table = Table(ms, "t")
    table.write([(1, "a")])
    table.write([(2, "lost")], abort=True)
    table.write([(3, "c")])
    table.compact()
    [result] = clean(ms, log=quiet([]))
    assert result.outcome == "cleaned"
    assert "delta_0000002_0000002_0000" in {Path(p).name for p in result.removed}
    assert len(table.dirs()) == 1 and table.dirs()[0].startswith("base_0000003_v")
    assert table.rows() == [(1, "a"), (3, "c")]


def test_open_transaction_blocks_until_it_ends(ms):
    table = three_writes(ms)
    reader_txn = ms.txns.open_txn()
    before = ms.txns.snapshot([table.full_name], current_txn=reader_txn)
    rows = table.rows(before)
    compaction_id = table.compact()
    assert clean(ms, log=quiet([])) == []
    assert table.rows(before) == rows  # the reader still reads the old deltas
    assert "delta_0000001_0000001_0000" in table.dirs()
    assert state_of(ms, compaction_id) is CompactionState.READY_FOR_CLEANING
    ms.txns.commit(reader_txn)
    [result] = clean(ms, log=quiet([]))
    assert result.outcome == "cleaned" and len(table.dirs()) == 1
    assert table.rows() == rows


def test_reader_lease_blocks_only_its_own_table(ms):
    leased, other = three_writes(ms, "leased"), three_writes(ms, "other")
    lease = ms.leases.acquire("default", "leased")
    rows = leased.rows(lease.snapshot)
    leased_id, other_id = leased.compact(), other.compact()
    [result] = clean(ms, log=quiet([]))
    assert (result.compaction_id, result.outcome) == (other_id, "cleaned")
    assert len(other.dirs()) == 1 and len(leased.dirs()) == 4
    assert leased.rows(lease.snapshot) == rows
    ms.leases.release(lease.lease_id)
    [result] = clean(ms, log=quiet([]))
    assert (result.compaction_id, result.outcome) == (leased_id, "cleaned")
    assert len(leased.dirs()) == 1 and leased.rows() == rows


def test_retention_is_respected(ms, clock):
    table = three_writes(ms)
    table.compact()
    assert clean(ms, retention_ms=60_000, log=quiet([])) == []
    clock.advance(30_000)
    assert clean(ms, retention_ms=60_000, log=quiet([])) == []
    clock.advance(30_001)
    [result] = clean(ms, retention_ms=60_000, log=quiet([]))
    assert result.outcome == "cleaned" and len(table.dirs()) == 1


def test_no_cleanup_table_is_left_alone(ms):
    table = three_writes(ms, params={"no_cleanup": "true"})
    compaction_id = table.compact()
    [result] = clean(ms, log=quiet([]))
    assert result.outcome in ("refused", "skipped") and NO_CLEANUP_MESSAGE in result.message
    assert len(table.dirs()) == 4 and result.removed == ()
    if result.outcome == "skipped":  # CompactionQueue.mark_refused accepts only initiated/working entries
        assert state_of(ms, compaction_id) is CompactionState.READY_FOR_CLEANING


def test_dropped_table_leaves_nothing_to_clean(ms):
    table = three_writes(ms)
    table.compact()
    ms.catalog.drop_table("default", "t")  # drops the queue entry with the table
    assert clean(ms, log=quiet([])) == []


def test_table_dropped_while_cleaning_is_reported(ms, monkeypatch):
    table = three_writes(ms)
    table.compact()
    find = ms.compactions.ready_to_clean

    def find_then_drop(**options):
        found = find(**options)
        ms.catalog.drop_table("default", "t")
        return found

    monkeypatch.setattr(ms.compactions, "ready_to_clean", find_then_drop)
    [result] = clean(ms, log=quiet([]))
    assert result.outcome == "table dropped"
    assert ms.compactions.show(table="t") == []
    assert len(table.dirs()) == 4  # the cleaner never deletes what it no longer knows


def test_dry_run_lists_and_changes_nothing(ms):
    table = three_writes(ms)
    compaction_id = table.compact()
    before = table.dirs()
    lines: list[str] = []
    [result] = clean(ms, dry_run=True, log=quiet(lines))
    assert result.outcome == "dry run" and len(result.removed) == 3
    assert sum(line.startswith("would remove") for line in lines) == 3
    assert table.dirs() == before
    assert state_of(ms, compaction_id) is CompactionState.READY_FOR_CLEANING


def test_trash_keeps_relative_paths(ms, tmp_path):
    table = three_writes(ms)
    table.compact()
    trash = tmp_path / "trash"
    [result] = clean(ms, trash_dir=str(trash), log=quiet([]))
    assert result.outcome == "cleaned" and len(table.dirs()) == 1
    [run] = list(trash.iterdir())
    moved = sorted(p.name for p in (run / "default" / "t").iterdir())
    assert moved == ["delta_0000001_0000001_0000", "delta_0000002_0000002_0000", "delta_0000003_0000003_0000"]
    assert any((run / "default" / "t" / "delta_0000001_0000001_0000").iterdir())


def test_trash_inside_the_table_is_refused(ms):
    table = three_writes(ms)
    compaction_id = table.compact()
    [result] = clean(ms, trash_dir=str(table.location / "trash"), log=quiet([]))
    assert result.outcome == "error" and "inside the table location" in result.message
    assert len(table.dirs()) == 4
    assert state_of(ms, compaction_id) is CompactionState.READY_FOR_CLEANING


def test_failing_cleanup_backs_off_then_is_marked_failed(ms, clock, tmp_path):
    """Hive's cleaner retry: 2^attempts x retry retention between tries, failed when the last retry fails."""
    table = three_writes(ms)
    compaction_id = table.compact()
    not_a_directory = tmp_path / "trash-is-a-file"
    not_a_directory.write_text("")  # a real fault: the trash directory cannot be created
    before = table.dirs()
    waits = []
    for attempt in range(4):  # the first try and max_attempts=3 retries
        [result] = clean(ms, trash_dir=str(not_a_directory), retry_retention_ms=1000, max_attempts=3, log=quiet([]))
        entry = ms.compactions.get(compaction_id)
        if attempt < 3:
            assert result.outcome == "error" and entry.state is CompactionState.READY_FOR_CLEANING
            assert str(not_a_directory) in entry.error_message
            waits.append(entry.retry_retention_ms)
            assert clean(ms, trash_dir=str(not_a_directory), log=quiet([])) == []  # backing off: not tried again yet
            clock.advance(entry.retry_retention_ms + 1)
        else:
            assert result.outcome == "failed" and entry.state is CompactionState.FAILED
            assert "cleaning failed 4 times" in entry.error_message and str(not_a_directory) in entry.error_message
    assert waits == [1000, 2000, 4000]
    assert table.dirs() == before  # nothing was removed by the failing attempts
    assert clean(ms, log=quiet([])) == []  # a failed entry is no longer the cleaner's


def test_a_later_success_after_an_error_cleans(ms, clock, tmp_path):
    table = three_writes(ms)
    compaction_id = table.compact()
    not_a_directory = tmp_path / "trash-is-a-file"
    not_a_directory.write_text("")
    [failed] = clean(ms, trash_dir=str(not_a_directory), retry_retention_ms=1000, log=quiet([]))
    assert failed.outcome == "error" and "retried in 1 s" in failed.message
    clock.advance(1001)
    [result] = clean(ms, log=quiet([]))
    assert result.outcome == "cleaned" and state_of(ms, compaction_id) is CompactionState.SUCCEEDED
    assert len(table.dirs()) == 1


def test_symlink_pointing_outside_is_not_followed(ms, tmp_path):
    table = three_writes(ms)
    table.compact()
    outside = tmp_path / "precious"
    outside.mkdir()
    (outside / "bucket_00000").write_bytes(b"keep me")
    os.symlink(outside, table.location / "base_0000001")  # looks like an obsolete base
    [result] = clean(ms, log=quiet([]))
    assert result.outcome == "incomplete"
    assert [Path(p).name for p in result.skipped_paths] == ["base_0000001"]
    assert (outside / "bucket_00000").read_bytes() == b"keep me"
    assert (table.location / "base_0000001").is_symlink()
    assert not any(d.startswith("delta_") for d in table.dirs())  # the real obsolete directories went
    os.unlink(table.location / "base_0000001")
    [result] = clean(ms, log=quiet([]))
    assert result.outcome == "cleaned"


def test_rerun_after_a_crash_half_way_finishes(ms):
    table = three_writes(ms)
    compaction_id = table.compact()
    shutil.rmtree(table.location / "delta_0000001_0000001_0000")  # a cleaner that died after one removal
    shutil.rmtree(table.location / "delta_0000002_0000002_0000")
    [result] = clean(ms, log=quiet([]))
    assert result.outcome == "cleaned"
    assert [Path(p).name for p in result.removed] == ["delta_0000003_0000003_0000"]
    assert len(table.dirs()) == 1 and state_of(ms, compaction_id) is CompactionState.SUCCEEDED
    assert table.rows() == [(1, "a"), (2, "b"), (3, "c")]


def test_later_writes_are_left_alone(ms):
    table = three_writes(ms)
    table.compact()
    table.write([(4, "d")])
    pending = ms.txns.open_txn()
    ms.txns.allocate_write_ids([pending], "default", "t")
    ms.txns.abort(pending)  # an aborted write id above the compaction's watermark
    [result] = clean(ms, log=quiet([]))
    assert result.outcome == "cleaned"
    assert "delta_0000004_0000004_0000" in table.dirs()
    assert table.rows() == [(1, "a"), (2, "b"), (3, "c"), (4, "d")]


def test_symlink_inside_an_obsolete_directory_keeps_it(ms, tmp_path):
    table = three_writes(ms)
    table.compact()
    outside = tmp_path / "precious.txt"
    outside.write_bytes(b"keep me")
    os.symlink(outside, table.location / "delta_0000001_0000001_0000" / "link")
    [result] = clean(ms, log=quiet([]))
    assert result.outcome == "incomplete"
    assert [Path(p).name for p in result.skipped_paths] == ["delta_0000001_0000001_0000"]
    assert outside.read_bytes() == b"keep me"
    assert "delta_0000002_0000002_0000" not in table.dirs()


def test_partitioned_table_cleans_only_its_partition(ms):
    info = ms.catalog.create_table("default", "p", COLUMNS, partition_keys=[("day", "string")],
                                   params={"transactional": "true"})
    writer = EmbeddedWriter(info.location, columns=info.columns, partition_keys=["day"])
    for day in ("1", "2"):
        for rows in ([(1, "a")], [(2, "b")]):
            txn_id = ms.txns.open_txn()
            write_id = ms.txns.allocate_write_ids([txn_id], "default", "p")[txn_id]
            ms.txns.add_components(txn_id, "default", "p", [f"day={day}"], Operation.INSERT)
            writer.insert(rows, write_id=write_id, partition={"day": day})
            ms.txns.commit(txn_id)
    compaction_id = ms.compactions.enqueue("default", "p", "day=1", MAJOR).compaction_id
    CompactionWorker(ms).run(compaction_id)
    [result] = clean(ms, log=quiet([]))
    assert result.outcome == "cleaned" and result.partition == "day=1"
    assert all("/day=1/" in p for p in result.removed) and len(result.removed) == 2
    assert len(list((Path(info.location) / "day=1").iterdir())) == 1
    assert len(list((Path(info.location) / "day=2").iterdir())) == 2
