"""Planning one partition in time linear in its directories: the listing indexed by name, every directory listed
once (and only those the snapshot reads), names parsed once, footers opened together. Correctness only: the time
is measured by bench/bench_planning.py, never asserted here.
"""

from __future__ import annotations

import os
import threading
import time

import pyarrow.fs as pafs
import pytest

from acid_core.errors import DirectoryVanishedError, FileSystemError
from acid_core.format.layout import bucket_file_name, delta_dir_name, parse_directory
from acid_core.format.orc_events import parse_columns
from acid_core.format.rowid import RowId, encode_bucket
from acid_core.format.validity import ValidTxnList, ValidWriteIdList
from acid_core.read.read_plan import plan_read, read_footer, read_footers, read_units, uses_sort_merge
from acid_core.read.state import ListedEntry, PartitionListing, acid_state, get_acid_state
from acid_core.storage.fs import FileEntry, FileSystem, concurrently
from acid_core.write.writer import EmbeddedWriter

MAX = 2**63 - 1


def _delta_names(count: int) -> list[str]:
    """Insert deltas 1..count, every tenth write also a delete delta, and a minor compaction's delta over 1..10."""
    names = [delta_dir_name(w, w, statement_id=0) for w in range(1, count + 1)]
    names += [delta_dir_name(w, w, statement_id=0, delete=True) for w in range(10, count + 1, 10)]
    return names + [delta_dir_name(1, 10, visibility_txn_id=5)]


def test_a_listing_of_20000_deltas_plans_as_a_linear_scan_would():
    names = _delta_names(20_000)
    listing = PartitionListing("/t/p", tuple(
        ListedEntry(name, True, 3, (FileEntry(bucket_file_name(0), f"/t/p/{name}/bucket_00000", False, 3),))
        for name in names))
    write_ids = ValidWriteIdList.parse(f"db.t:20000:{MAX}:")
    state = acid_state(listing, write_ids=write_ids, txns=ValidTxnList.parse(f"100:{MAX}::"))
    # the minor compaction's delta covers 1..10 and hides the ten it was made from (Hive's findBestWorkingDeltas)
    covered = {delta_dir_name(w, w, statement_id=0) for w in range(1, 11)} | {delta_dir_name(10, 10, statement_id=0,
                                                                                             delete=True)}
    assert set(state.obsolete) == covered and state.aborted == () and state.base is None
    assert [d.name for d in state.deltas] == sorted(set(names) - covered,
                                                    key=lambda n: parse_directory(n).read_order_key())
    for name in names[::997] + ["delta_0000001_0000010_v0000005"]:  # the index answers what a linear scan would
        assert listing.children(name) == next(e.children for e in listing.entries if e.name == name)
        assert listing.entry(name) is next(e for e in listing.entries if e.name == name)
    assert listing.children("delta_9999999_9999999_0000") == () and listing.entry("nothing") is None


@pytest.fixture
def partition(tmp_path):
    """2,000 insert deltas (one with two files), 200 delete deltas, a base over the first 100 write ids, an aborted
    delta and an original file: every kind of entry, on disk."""
    location = tmp_path / "p"
    location.mkdir()
    for name in _delta_names(2_000) + ["base_0000100", "delta_0002001_0002001_0000"]:
        (location / name).mkdir()
        (location / name / bucket_file_name(0)).write_bytes(b"ORC")
    (location / "delta_0000500_0000500_0000" / bucket_file_name(1)).write_bytes(b"ORC!")
    (location / "000000_0").write_bytes(b"old")
    return location


def _spy_listings(monkeypatch) -> list[str]:
    listed: list[str] = []
    list_dir = FileSystem.list_dir
    monkeypatch.setattr(FileSystem, "list_dir",
                        lambda fs, path, **options: listed.append(path) or list_dir(fs, path, **options))
    return listed


def test_planning_lists_the_partition_once_and_each_directory_read_once(partition, monkeypatch):
    listed = _spy_listings(monkeypatch)
    write_ids = ValidWriteIdList.parse(f"db.t:2001:{MAX}::2001")  # 2001 aborted
    state = get_acid_state(str(partition), write_ids=write_ids, txns=ValidTxnList.parse(f"100:{MAX}::"))
    assert state.base.name == "base_0000100" and state.aborted == ("delta_0002001_0002001_0000",)
    read = [state.base.name] + [delta.name for delta in state.deltas]
    assert len(read) == 1 + 1900 + 190  # write ids 101..2000: inserts, and a delete delta every tenth
    assert sorted(listed) == sorted([str(partition)] + [f"{partition}/{name}" for name in read])  # once each
    assert "000000_0" in state.obsolete and "delta_0000001_0000010_v0000005" in state.obsolete
    for name in read:
        children = state.listing.children(name)
        assert [child.name for child in children] == sorted(os.listdir(partition / name))
        assert all(child.path == f"{partition}/{name}/{child.name}" and not child.is_dir for child in children)
    assert [(c.name, c.size) for c in state.listing.children("delta_0000500_0000500_0000")] == [
        ("bucket_00000", 3), ("bucket_00001", 4)]
    assert state.listing.entry("delta_0000500_0000500_0000").size == 7
    for entry in state.listing.entries:  # names are parsed once, when listed
        assert entry.parsed == (parse_directory(entry.name) if entry.is_dir else None)
    plan = plan_read(FileSystem(), state, write_ids)
    assert len(plan.inserts) == 1 + 1900 + 1 and len(plan.deletes) == 190


def test_a_directory_read_that_vanishes_is_named(partition, monkeypatch):
    list_dir = FileSystem.list_dir
    victim = partition / "delta_0001000_0001000_0000"

    def list_then_remove(fs, path, **options):
        entries = list_dir(fs, path, **options)
        if path == str(partition):
            for child in victim.iterdir():
                child.unlink()
            victim.rmdir()
        return entries

    monkeypatch.setattr(FileSystem, "list_dir", list_then_remove)
    with pytest.raises(DirectoryVanishedError, match="delta_0001000_0001000_0000.*does not exist any more"):
        get_acid_state(str(partition), write_ids=ValidWriteIdList.parse(f"db.t:2000:{MAX}:"))


def test_local_listing_is_what_pyarrow_lists(tmp_path):
    directory = tmp_path / "d"
    (directory / "sub").mkdir(parents=True)
    (directory / "f").write_bytes(b"abc")
    (directory / ".hidden").write_bytes(b"")
    (directory / "to_file").symlink_to(directory / "f")
    (directory / "to_dir").symlink_to(directory / "sub")
    (directory / "broken").symlink_to(tmp_path / "nowhere")
    fs = FileSystem()
    for path in (str(directory), str(directory) + "/", f"{tmp_path}//d"):
        infos = pafs.LocalFileSystem().get_file_info(pafs.FileSelector(path))
        expected = sorted((FileEntry(info.base_name, info.path, info.type == pafs.FileType.Directory, info.size or 0)
                           for info in infos), key=lambda entry: entry.name)
        assert fs.list_dir(path) == expected
    assert [entry.name for entry in fs.list_dir(str(directory))] == [".hidden", "f", "sub", "to_dir", "to_file"]
    with pytest.raises(FileSystemError, match="does not exist"):
        fs.list_dir(str(tmp_path / "nowhere"))
    assert fs.list_dir(str(tmp_path / "nowhere"), missing_ok=True) == []
    with pytest.raises(FileSystemError, match="cannot list"):
        fs.list_dir(str(directory / "f"))


def test_concurrently_keeps_order_bounds_threads_and_raises_the_first_error():
    running, most, lock = [0], [0], threading.Lock()

    def work(item: int) -> int:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.001)
        with lock:
            running[0] -= 1
        if item in (37, 80):
            raise ValueError(f"item {item}")
        return item * 2

    assert concurrently(work, list(range(30)), threads=4) == [i * 2 for i in range(30)]
    assert 1 <= most[0] <= 4
    with pytest.raises(ValueError, match="item 37"):
        concurrently(work, list(range(100)), threads=8)
    assert concurrently(work, [1, 2], threads=16) == [2, 4] and concurrently(work, [], threads=16) == []


def test_footers_are_read_once_for_the_planner(tmp_path, monkeypatch):
    columns = parse_columns([("id", "int")])
    writer = EmbeddedWriter(str(tmp_path), columns=columns)
    for write_id in range(1, 21):
        writer.insert([(write_id,)], write_id=write_id)
    writer.delete([RowId(1, encode_bucket(0, 0), 0)], write_id=21)
    write_ids = ValidWriteIdList.parse(f"db.t:21:{MAX}:")
    fs = FileSystem()
    state = get_acid_state(str(tmp_path), write_ids=write_ids, fs=fs)
    plan = plan_read(fs, state, write_ids)
    assert len(plan.inserts) == 20 and len(plan.deletes) == 1
    paths = [source.path for source in plan.inserts + plan.deletes]
    footers = {footer.path: footer for footer in read_footers([(fs, path) for path in paths])}
    assert list(footers.values()) == [read_footer(fs, path) for path in paths]
    assert all(footer.stripes == 1 and footer.length == os.path.getsize(footer.path) for footer in footers.values())
    opened: list[str] = []
    open_input = FileSystem.open_input
    monkeypatch.setattr(FileSystem, "open_input", lambda fs, path: opened.append(path) or open_input(fs, path))
    assert read_units(fs, plan, footers=footers) == [(source, None) for source in plan.inserts]
    assert not uses_sort_merge(fs, plan.deletes, footers=footers)
    assert uses_sort_merge(fs, plan.deletes, footers=footers, max_delete_events_in_memory=0)  # one event > 0
    assert opened == []  # everything came from the footers given
    assert read_units(fs, plan) == [(source, None) for source in plan.inserts]
    assert uses_sort_merge(fs, plan.deletes, max_delete_events_in_memory=0)
    assert sorted(opened) == sorted(paths)  # without them, each footer is opened once
