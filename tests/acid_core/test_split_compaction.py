"""A major compaction of one big bucket split into key-interval parts (one task each) and the parts concatenated
stripe by stripe into the bucket's one file (acid_core/format/orc_concat.py): the same events, ROW__IDs, user metadata and
readers' rows as the one-task compaction; a part no row survived in writes nothing."""

from __future__ import annotations

import os

import pyarrow.orc as pa_orc
import pyorc
import pytest
from support.compaction_tables import check_result_directory, directories, make_table, read_rows, write_history

from acid_core.compaction.execute import run_bucket
from acid_core.compaction.worker import CompactionWorker
from acid_core.errors import SchemaMismatchError
from acid_core.format.orc_concat import concatenate
from acid_core.metastore.codes import CompactionType
from acid_core.metastore.txns import Operation
from acid_core.storage.fs import FileSystem


class SplitRunner:
    """The in-process runner, with the worker told to split buckets of more than `split_rows` rows."""

    def __init__(self, split_rows: int) -> None:
        self.split_rows = split_rows
        self.tasks = 0

    def __call__(self, plan):
        self.tasks = len(plan.buckets)
        return [run_bucket(plan, work) for work in plan.buckets]


def filled(store, name: str, *, delete_all_of_the_middle: bool = False):
    table = make_table(store, name, stripe_rows=200)
    write_history(table, None)
    with table.transaction() as txn:
        txn.insert([(i, f"big{i}") for i in range(1000, 9000)])
    with table.transaction(operation=Operation.DELETE) as txn:
        txn.delete([i for i in range(1000, 9000) if i % 7 == 0 or (delete_all_of_the_middle and 3000 <= i < 7000)])
    return table


def base_file(table) -> str:
    (base,) = [d for d in directories(table.location()) if d.startswith("base_")]
    return os.path.join(table.location(), base, "bucket_00000")


@pytest.mark.parametrize("middle_deleted", [False, True], ids=["every-part-writes", "empty-middle-parts"])
def test_a_split_major_writes_the_same_file_as_one_task(store, middle_deleted):
    whole, split = (filled(store, name, delete_all_of_the_middle=middle_deleted) for name in ("whole", "split"))
    before = read_rows(split)
    runner = SplitRunner(split_rows=1500)
    for table, worker in ((whole, CompactionWorker(store)), (split, CompactionWorker(store, runner=runner))):
        queued = store.compactions.enqueue("default", table.info.name, None, CompactionType.MAJOR)
        outcome = worker.run(queued.compaction_id)
        assert outcome.result == "compacted", outcome.message
    assert runner.tasks >= 4 and f"in 1 buckets ({runner.tasks} tasks)" in outcome.message
    assert read_rows(split) == before == read_rows(whole)
    one, parts = pa_orc.ORCFile(base_file(whole)), pa_orc.ORCFile(base_file(split))
    assert parts.read().equals(one.read())  # every event and ROW__ID, in key order
    assert parts.nstripes >= runner.tasks - (4 if middle_deleted else 0)
    check_result_directory(os.path.dirname(base_file(split)), operation=0)  # key index per stripe, stats, version
    assert sorted(os.listdir(os.path.dirname(base_file(split)))) == ["_orc_acid_version", "bucket_00000"]
    with open(base_file(split), "rb") as stream:
        reader = pyorc.Reader(stream)
        assert len(reader) == len(before) and sum(1 for _ in reader) == len(before)


def test_concatenating_files_of_different_schemas_is_refused_and_writes_nothing(tmp_path):
    import pyarrow as pa

    fs = FileSystem()
    pa_orc.write_table(pa.table({"a": [1, 2]}), str(tmp_path / "one"))
    pa_orc.write_table(pa.table({"b": ["x"]}), str(tmp_path / "two"))
    with pytest.raises(SchemaMismatchError, match="differ in schema or compression"):
        concatenate(fs, [str(tmp_path / "one"), str(tmp_path / "two")], str(tmp_path / "out"), user_metadata={})
    assert not (tmp_path / "out").exists()
    concatenate(fs, [str(tmp_path / "one"), str(tmp_path / "one")], str(tmp_path / "out"), user_metadata={"k": b"v"})
    joined = pa_orc.ORCFile(str(tmp_path / "out"))
    assert joined.read().column("a").to_pylist() == [1, 2, 1, 2] and joined.metadata == {b"k": b"v"}


@pytest.mark.parametrize(("rows", "split_rows", "parallelism", "spread", "parts"), [
    (35_200_000, 8_000_000, 2, 2, 6),      # 5 parts of 8M, rounded up to a multiple of the slots
    (35_200_000, 8_000_000, 1, 1, 5),
    (7_000_000, 8_000_000, 1, 1, 1),       # one slot: nothing to gain
    (7_000_000, 8_000_000, 2, 2, 2),       # a second slot left idle by the plan: two parts
    (7_000_000, 8_000_000, 100, 100, 7),   # many idle slots: parts of at least MIN_PART_ROWS
    (7_000_000, 8_000_000, 100, 1, 1),     # the plan's other buckets fill the slots
    (1_999_999, 8_000_000, 2, 2, 1),       # too small to be worth a part
    (10**12, 8_000_000, 2, 2, 256),        # at most MAX_SPLIT_PARTS
])
def test_how_many_parts_a_bucket_is_split_into(rows, split_rows, parallelism, spread, parts):
    from acid_core.compaction.plan import part_count

    assert part_count(rows, split_rows, parallelism, spread) == parts


def test_a_one_bucket_plan_is_split_over_the_idle_slots_below_split_rows(store, monkeypatch):
    import acid_core.compaction.plan as plan

    monkeypatch.setattr(plan, "MIN_PART_ROWS", 2000)
    whole, split = (filled(store, name) for name in ("whole_slots", "split_slots"))
    runner = SplitRunner(split_rows=10**9)
    runner.parallelism = 3
    for table, worker in ((whole, CompactionWorker(store)), (split, CompactionWorker(store, runner=runner))):
        queued = store.compactions.enqueue("default", table.info.name, None, CompactionType.MAJOR)
        assert worker.run(queued.compaction_id).result == "compacted"
    assert runner.tasks == 3
    assert pa_orc.ORCFile(base_file(split)).read().equals(pa_orc.ORCFile(base_file(whole)).read())


def test_concatenating_into_the_first_file_gives_the_same_file_and_uses_it_up(tmp_path):
    import pyarrow as pa

    fs = FileSystem()
    for name, values in (("one", [1, 2]), ("two", [3]), ("three", [4, 5, 6])):
        pa_orc.write_table(pa.table({"a": values}), str(tmp_path / name), stripe_size=1)
    sources = [str(tmp_path / name) for name in ("one", "two", "three")]
    concatenate(fs, sources, str(tmp_path / "copied"), user_metadata={"k": b"v"})
    assert concatenate(fs, sources, str(tmp_path / "in_place"), user_metadata={"k": b"v"}, consume_first=True) == 6
    assert not (tmp_path / "one").exists() and (tmp_path / "two").exists()
    assert (tmp_path / "in_place").read_bytes() == (tmp_path / "copied").read_bytes()
    joined = pa_orc.ORCFile(str(tmp_path / "in_place"))
    assert joined.read().column("a").to_pylist() == [1, 2, 3, 4, 5, 6] and joined.metadata == {b"k": b"v"}
    # The same file twice cannot be cut and read at once: it is copied instead and left as it was.
    concatenate(fs, [sources[1], sources[1]], str(tmp_path / "twice"), user_metadata={}, consume_first=True)
    assert (tmp_path / "two").exists()
    assert pa_orc.ORCFile(str(tmp_path / "twice")).read().column("a").to_pylist() == [3, 3]
