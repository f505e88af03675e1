"""Compaction with the in-process runner: CompactionWorker(metastore) over real tables, transactions and files.

Every test builds its table through the metastore (EmbeddedWriter inside real transactions, StreamingConnection,
plain pyarrow files for pre-ACID data) and checks the compaction against two independent expectations: the rows a
metastore snapshot read before the compaction (ROW__IDs included) and `model.TableModel`, which knows nothing of files.
The rules checked are Hive's Worker (hive-acid-reference.md section 7): result names `base_<hwm>_v<txn>` and
`delta_/delete_delta_<min>_<hwm>_v<txn>`, high watermark = lowest open write id - 1, refusal message, ROW__IDs kept
with operation 0 and originalTransaction == currentTransaction, and a result invisible until the compactor commits.
"""

from __future__ import annotations

import datetime
import decimal
import os
import shutil
import types
from pathlib import Path

import pyarrow as pa
import pyarrow.orc as pa_orc
import pyorc
import pytest
from support.compaction_tables import (
    LAYOUTS,
    MAJOR,
    MINOR,
    WORKER_TIMEOUT_MS,
    Table,
    acid_state,
    by_key,
    check_result_directory,
    compact,
    directories,
    entry,
    events,
    expected_rows,
    insert_events_of,
    make_table,
    model_snapshot,
    read_rows,
    snapshot,
    write_history,
)
from support.model import tree, v1_bucket_property

from acid_core.compaction.execute import run_bucket
from acid_core.compaction.plan import build_plan
from acid_core.compaction.worker import REFUSED_MESSAGE, CompactionWorker, local_runner
from acid_core.errors import AcidError, CompactionStateError, LockTimeoutError, MetastoreError
from acid_core.format.rowid import RowId
from acid_core.format.validity import ValidCompactorWriteIdList
from acid_core.metastore import Metastore
from acid_core.metastore.codes import CompactionState, CompactionType
from acid_core.metastore.locks import LockComponent, LockType
from acid_core.metastore.txns import Operation, TxnType
from acid_core.read.merge import read_snapshot
from acid_core.read.state import get_acid_state
from acid_core.storage.fs import FileSystem
from acid_core.write.streaming import StreamingConnection
from acid_core.write.writer import EmbeddedWriter


@pytest.mark.parametrize("kind", [MAJOR, MINOR], ids=["major", "minor"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_compaction_keeps_every_row_and_row_id(store, layout, kind):
    table = make_table(store, "t", **LAYOUTS[layout])
    partition = {"p": "a"} if layout == "partitioned" else None
    write_history(table, partition)
    if partition:  # write id 7, in the other partition: write ids count per table, so p=a is compacted up to 7
        with table.transaction({"p": "b"}) as txn:
            txn.insert([(1, "other partition")])
    high = 7 if partition else 6
    other = tree(table.location({"p": "b"})) if partition else None
    before = read_rows(table, partition)
    assert before == expected_rows(table, partition)
    assert len({b for _, b, _ in before}) > 1 or layout == "partitioned"

    outcome = compact(table, kind, partition)

    assert outcome.result == "compacted"
    info = entry(table, outcome.compaction_id)
    assert info.state is CompactionState.READY_FOR_CLEANING and info.highest_write_id == high
    txn = info.txn_id
    location = table.location(partition)
    state = acid_state(table, partition)
    old = ["delete_delta_0000004_0000004_0000", "delete_delta_0000005_0000005_0000",
           "delete_delta_0000006_0000006_0001", "delta_0000001_0000001_0000", "delta_0000002_0000002_0000",
           "delta_0000005_0000005_0000" if table.writers == 1 else "delta_0000005_0000005_0001",
           "delta_0000006_0000006_0000", "delta_0000006_0000006_0002"]
    assert state.aborted == ("delete_delta_0000003_0000003_0001", "delta_0000003_0000003_0000")
    assert list(state.obsolete) == sorted(old)
    one_file_per_bucket = ["_orc_acid_version", "bucket_00000"] + ([] if partition else ["bucket_00001"])
    if kind is MAJOR:
        assert directories(location) == sorted(old + list(state.aborted) + [f"base_{high:07d}_v{txn:07d}"])
        assert sorted(os.listdir(os.path.join(location, state.base.name))) == one_file_per_bucket
        assert state.base.name == f"base_{high:07d}_v{txn:07d}" and state.deltas == ()
        found = check_result_directory(os.path.join(location, state.base.name), operation=0)
        assert by_key(found) == insert_events_of(before)
        assert outcome.inserts == len(before) and outcome.deletes == 0
    else:
        new = [f"delete_delta_0000001_{high:07d}_v{txn:07d}", f"delta_0000001_{high:07d}_v{txn:07d}"]
        assert directories(location) == sorted(old + list(state.aborted) + new)
        assert state.base is None and [d.name for d in state.deltas] == new
        assert [sorted(os.listdir(os.path.join(location, name))) for name in new] == [one_file_per_bucket] * 2
        model = table.model(partition)
        valid = model_snapshot(snapshot(table).write_ids[table.full_name]).sees
        inserted = check_result_directory(os.path.join(location, new[1]), operation=0)
        assert by_key(inserted) == insert_events_of({k: r for k, r in model.rows.items() if valid(k[0])})
        deleted = check_result_directory(os.path.join(location, new[0]), operation=2)
        assert sorted((e["originalTransaction"], e["bucket"], e["rowId"], e["currentTransaction"]) for e in deleted) \
            == sorted((*k, w) for k, writers in model.deleted_by.items() for w in writers if valid(w))
        assert outcome.deletes == len(deleted) == 5 and outcome.inserts == len(inserted)
    assert read_rows(table, partition) == before
    if partition:
        assert tree(table.location({"p": "b"})) == other

    # Later writes read on top of the result, and a major compacts them with it.
    with table.transaction(partition, operation=Operation.DELETE) as txn:
        txn.insert([(30, "later")])
        txn.delete([5, 22])
    second = compact(table, MAJOR, partition)
    info = entry(table, second.compaction_id)
    assert acid_state(table, partition).base.name == f"base_{high + 1:07d}_v{info.txn_id:07d}"
    assert read_rows(table, partition) == expected_rows(table, partition)
    assert {row[0] for row in read_rows(table, partition).values()} == (
        {1, 6, 7, 8, 9, 10, 11, 12, 13, 14, 21, 23, 30})


@pytest.mark.parametrize("kind", [MAJOR, MINOR], ids=["major", "minor"])
def test_compaction_of_a_delta_with_side_file_and_an_aborted_transaction_in_the_middle(store, tmp_path, kind):
    """A streaming batch (write ids 1..5) whose writer crashed: 1 and 3 committed, 2 aborted in the middle, 4 was
    being written (rows in the file past the last flushed length), 4 and 5 timed out. The side file bounds the read."""
    table = make_table(store, "s")
    model = table.model()
    stream = StreamingConnection(store, "default", "s", batch_size=5)
    for rows, commit in (([(1, "a"), (2, "b")], True), ([(3, "aborted")], False), ([(4, "c")], True)):
        stream.begin_transaction()
        stream.write(rows)
        model.insert(rows, write_id=stream.current_write_id)
        if commit:
            stream.commit_transaction()
        else:
            stream.abort_transaction()
    stream.begin_transaction()
    stream.write([(5, "never committed")])
    delta = os.path.join(table.location(), "delta_0000001_0000005")
    assert sorted(os.listdir(delta)) == ["_orc_acid_version", "bucket_00000", "bucket_00000_flush_length"]
    shutil.copytree(delta, tmp_path / "crashed")  # what the crashed writer left on disk ...
    with open(tmp_path / "crashed" / "bucket_00000", "ab") as partial:  # ... with part of a stripe past the flush
        partial.write(b"\x00 half a stripe of write 4 " * 40)
    stream.close()  # aborts 4 and 5, as the time-out would
    shutil.rmtree(delta)
    shutil.copytree(tmp_path / "crashed", delta)
    with pytest.raises(OSError, match="postscript"):
        pa_orc.ORCFile(os.path.join(delta, "bucket_00000"))  # unreadable beyond the side file's length
    with table.transaction(operation=Operation.DELETE) as txn:                 # 6
        txn.delete([2])
    with table.transaction() as txn:                                           # 7
        txn.insert([(7, "g")])
    before = read_rows(table)
    assert before == expected_rows(table) and {r[0] for r in before.values()} == {1, 4, 7}

    outcome = compact(table, kind)

    txn_id = entry(table, outcome.compaction_id).txn_id
    assert read_rows(table) == before
    if kind is MAJOR:
        found = check_result_directory(os.path.join(table.location(), f"base_0000007_v{txn_id:07d}"), operation=0)
        assert by_key(found) == insert_events_of(before)
    else:
        found = check_result_directory(os.path.join(table.location(), f"delta_0000001_0000007_v{txn_id:07d}"),
                                       operation=0)
        assert [(e["currentTransaction"], e["row"]["id"]) for e in by_key(found)] == [(1, 1), (1, 2), (3, 4), (7, 7)]
        assert not os.path.exists(os.path.join(table.location(), f"delta_0000001_0000007_v{txn_id:07d}",
                                               "bucket_00000_flush_length"))


def test_split_update_and_statement_ids_survive_a_major(store):
    """An updated row gets a new ROW__ID (write 2, statement 1) and keeps it in the base; the old one is gone."""
    table = make_table(store, "u")
    with table.transaction() as txn:
        txn.insert([(1, "a"), (2, "b")])
    with table.transaction(operation=Operation.UPDATE) as txn:
        txn.insert([(3, "c")])
        txn.update([1], [(1, "a2")], statement=1)
    outcome = compact(table, MAJOR)
    rows = read_rows(table)
    assert rows == {(1, v1_bucket_property(0), 1): (2, "b"), (2, v1_bucket_property(0), 0): (3, "c"),
                    (2, v1_bucket_property(0, 1), 0): (1, "a2")}
    base = os.path.join(table.location(), f"base_0000002_v{entry(table, outcome.compaction_id).txn_id:07d}")
    assert by_key(check_result_directory(base, operation=0)) == insert_events_of(rows)


# ---------------------------------------------------------------------------------------------------------------
# Open transactions: the watermark, and deltas above it


@pytest.mark.parametrize("kind", [MAJOR, MINOR], ids=["major", "minor"])
def test_open_transaction_caps_the_watermark_and_its_delta_is_left_alone(ms, kind):
    table = make_table(ms, "t", buckets=2)
    with table.transaction() as txn:                                           # 1
        txn.insert([(i, f"r{i}") for i in range(8)])
    with table.transaction() as txn:                                           # 2
        txn.insert([(10, "x"), (11, "y")])
    with table.transaction(commit=False) as open_txn:                          # 3 stays open
        open_txn.insert([(20, "open")])
    with table.transaction() as txn:                                           # 4
        txn.insert([(30, "after")])
    with table.transaction(operation=Operation.DELETE) as txn:                 # 5
        txn.delete([0, 1, 10])
    above = ["delta_0000003_0000003_0000", "delta_0000004_0000004_0000", "delete_delta_0000005_0000005_0000"]
    assert set(above) < set(directories(table.location()))
    untouched = {name: tree(os.path.join(table.location(), name)) for name in above}
    before = read_rows(table)
    assert before == expected_rows(table)

    outcome = compact(table, kind)

    info = entry(table, outcome.compaction_id)
    assert info.highest_write_id == 2  # lowest open write id (3) - 1
    assert {name: tree(os.path.join(table.location(), name)) for name in above} == untouched
    new = (f"base_0000002_v{info.txn_id:07d}",) if kind is MAJOR else (f"delta_0000001_0000002_v{info.txn_id:07d}",)
    assert set(directories(table.location())) - set(above) - {"delta_0000001_0000001_0000",
                                                               "delta_0000002_0000002_0000"} == set(new)
    found = check_result_directory(os.path.join(table.location(), new[0]), operation=0)
    # The compactor saw write ids 1 and 2 only: the delete of write 5 is not applied to the result (it stays a delete
    # delta for readers), so rows 0, 1 and 10 are still in it.
    assert {e["row"]["id"] for e in found} == set(range(8)) | {10, 11}
    assert read_rows(table) == before

    ms.txns.commit(open_txn.txn_id)
    after_commit = read_rows(table)
    assert after_commit == expected_rows(table)
    assert {row[0] for row in after_commit.values()} == {2, 3, 4, 5, 6, 7, 11, 20, 30}
    state = acid_state(table)
    if kind is MAJOR:
        assert state.base.name == new[0] and [d.name for d in state.deltas] == above
    else:
        assert state.base is None and [d.name for d in state.deltas] == [new[0], *above]


# ---------------------------------------------------------------------------------------------------------------
# Visibility: nothing shows before the compactor commits; earlier readers keep their rows


@pytest.mark.parametrize("kind", [MAJOR, MINOR], ids=["major", "minor"])
def test_result_is_invisible_to_snapshots_taken_while_the_compactor_runs(store, kind):
    table = make_table(store, "t", writers=2)
    for first in (0, 10, 20):
        with table.transaction() as txn:
            txn.insert([(first + i, f"r{first + i}") for i in range(4)])
    with table.transaction(operation=Operation.DELETE) as txn:
        txn.delete([1, 12])
    early_reader = snapshot(table)
    before = read_rows(table, at=early_reader)
    seen = {}

    def observing_runner(plan):
        results = local_runner(plan)
        seen["snapshot"] = snapshot(table)
        seen["listing"] = sorted(os.listdir(table.location()))
        seen["rows"] = read_rows(table, at=seen["snapshot"])
        return results

    outcome = compact(table, kind, runner=observing_runner)

    txn_id = entry(table, outcome.compaction_id).txn_id
    mid = seen["snapshot"]
    assert txn_id in mid.txns.open_ids
    assert seen["rows"] == before
    hidden = [name for name in seen["listing"] if name.startswith(".")]
    final_names = ([f"base_0000004_v{txn_id:07d}"] if kind is MAJOR else
                   [f"delete_delta_0000001_0000004_v{txn_id:07d}", f"delta_0000001_0000004_v{txn_id:07d}"])
    assert hidden == sorted(f".{name}.tmp-c{outcome.compaction_id}" for name in final_names)
    assert not set(final_names) & set(seen["listing"])
    # After the commit: the mid-run and the early snapshots still read the old directories, a new one the result.
    for old_snapshot in (mid, early_reader):
        state = acid_state(table, at=old_snapshot)
        assert state.base is None and not {d.name for d in state.deltas} & set(final_names)
        assert read_rows(table, at=old_snapshot) == before
    state = acid_state(table)
    assert {d.name for d in state.deltas} | ({state.base.name} if state.base else set()) == set(final_names)
    assert read_rows(table) == before
    assert not [name for name in os.listdir(table.location()) if name.startswith(".")]


# ---------------------------------------------------------------------------------------------------------------
# Original (pre-ACID) files


def write_originals(table: Table, files: dict[str, list[tuple]]) -> None:
    """Plain ORC files under their Hive names; the model numbers their rows per bucket in sorted-name order."""
    os.makedirs(table.location(), exist_ok=True)
    per_bucket: dict[int, list[list[tuple]]] = {}
    for name in sorted(files):
        rows = files[name]
        pa_orc.write_table(pa.table({"id": pa.array([r[0] for r in rows], pa.int32()),
                                     "name": pa.array([r[1] for r in rows], pa.string())}),
                           os.path.join(table.location(), name))
        per_bucket.setdefault(int(name.split("_")[0]), []).append(rows)
    table.model().add_original_files(per_bucket)


ORIGINALS = {"000000_0": [(1, "o1"), (2, "o2"), (3, "o3")], "000000_0_copy_1": [(4, "o4")],
             "000001_0": [(5, "o5"), (6, "o6")]}


def test_major_compaction_turns_original_files_into_a_base_with_synthesized_row_ids(store):
    table = make_table(store, "legacy")
    write_originals(table, ORIGINALS)
    with table.transaction() as txn:
        txn.insert([(10, "acid")])
    with table.transaction(operation=Operation.DELETE) as txn:
        txn.delete([2, 6])
    before = read_rows(table)
    assert before == expected_rows(table)
    assert sorted(k for k in before if k[0] == 0) == [(0, v1_bucket_property(0), 0), (0, v1_bucket_property(0), 2),
                                                      (0, v1_bucket_property(0), 3), (0, v1_bucket_property(1), 0)]

    outcome = compact(table, MAJOR)

    txn_id = entry(table, outcome.compaction_id).txn_id
    base = os.path.join(table.location(), f"base_0000002_v{txn_id:07d}")
    assert by_key(check_result_directory(base, operation=0)) == insert_events_of(before)
    assert sorted(os.listdir(base)) == ["_orc_acid_version", "bucket_00000", "bucket_00001"]
    state = acid_state(table)
    assert state.original_files == () and set(ORIGINALS) <= set(state.obsolete)
    assert read_rows(table) == before


@pytest.mark.parametrize("history", ["base", "originals"])
def test_minor_compaction_leaves_base_and_original_rows_out_of_the_new_delta(store, history):
    """Hive's minor compaction merges deltas only. A base (or the original files) stays where it is, so the new
    delta holds only the deltas' events; were base rows copied into it, every base row would be read twice."""
    table = make_table(store, "t")
    if history == "base":
        with table.transaction() as txn:
            txn.insert([(1, "a"), (2, "b")])
        with table.transaction() as txn:
            txn.insert([(3, "c")])
        compact(table, MAJOR)
    else:
        write_originals(table, ORIGINALS)
    first = 3 if history == "base" else 1
    with table.transaction() as txn:
        txn.insert([(40, "d")])
    with table.transaction() as txn:
        txn.insert([(50, "e")])
    before = read_rows(table)
    assert before == expected_rows(table)

    outcome = compact(table, MINOR)

    assert read_rows(table) == before  # fails with "row__id ... appears twice" when base rows were copied
    txn_id = entry(table, outcome.compaction_id).txn_id
    delta = os.path.join(table.location(), f"delta_{first:07d}_{first + 1:07d}_v{txn_id:07d}")
    assert sorted(e["row"]["id"] for e in events(os.path.join(delta, "bucket_00000"))) == [40, 50]


# ---------------------------------------------------------------------------------------------------------------
# Not enough to compact, finished and non-initiated entries


def _one_delta(table: Table) -> None:
    with table.transaction() as txn:
        txn.insert([(1, "a")])


def _delta_and_delete_delta(table: Table) -> None:
    with table.transaction() as txn:
        txn.insert([(1, "a"), (2, "b")])
    with table.transaction(operation=Operation.DELETE) as txn:
        txn.delete([1])


def _base_and_delete_delta(table: Table) -> None:
    _delta_and_delete_delta(table)
    with table.transaction() as txn:
        txn.insert([(3, "c")])
    compaction_id = compact(table, MAJOR).compaction_id
    for name in acid_state(table).obsolete:  # what the cleaner does
        shutil.rmtree(os.path.join(table.location(), name))
    table.ms.compactions.mark_cleaned(compaction_id)
    with table.transaction(operation=Operation.DELETE) as txn:
        txn.delete([2])


@pytest.mark.parametrize("kind, history", [
    (MAJOR, None), (MAJOR, _one_delta), (MINOR, _one_delta), (MINOR, _delta_and_delete_delta),
    (MINOR, _base_and_delete_delta),
], ids=["major-empty", "major-one-delta", "minor-one-delta", "minor-delta-and-delete-delta", "minor-base-and-delete"])
def test_not_enough_to_compact_is_refused_with_hives_message(store, kind, history):
    table = make_table(store, "t")
    if history:
        history(table)
    os.makedirs(table.location(), exist_ok=True)
    files = tree(table.location())
    rows = read_rows(table)
    enqueued = store.compactions.enqueue("default", "t", None, kind)

    outcome = CompactionWorker(store).run(enqueued.compaction_id)

    assert outcome.result == "refused"
    assert outcome.message == REFUSED_MESSAGE == "None of the compaction thresholds met, compaction request is refused!"
    info = entry(table, enqueued.compaction_id)
    assert info.state is CompactionState.REFUSED and info.error_message == REFUSED_MESSAGE
    assert info.end_ms is not None
    assert tree(table.location()) == files and read_rows(table) == rows
    assert store.txns.show_transactions() == [] and store.locks.show_locks() == []  # compactor txn committed


@pytest.mark.parametrize("leftover", ["aborted", "obsolete"])
def test_nothing_to_merge_with_aborted_or_obsolete_directories_is_marked_compacted_for_the_cleaner(store, leftover):
    table = make_table(store, "t")
    with table.transaction() as txn:
        txn.insert([(1, "a")])
    if leftover == "aborted":
        with table.transaction(abort=True) as txn:
            txn.insert([(2, "aborted")])
    else:
        with table.transaction() as txn:
            txn.insert([(2, "b")])
        store.compactions.mark_cleaned(compact(table, MAJOR).compaction_id)  # directories not deleted yet
    files = tree(table.location())
    rows = read_rows(table)

    outcome = compact(table, MAJOR)

    assert outcome.result == "compacted" and "nothing to merge" in outcome.message
    info = entry(table, outcome.compaction_id)
    assert info.state is CompactionState.READY_FOR_CLEANING and info.highest_write_id == 2
    assert tree(table.location()) == files and read_rows(table) == rows
    state = acid_state(table)
    assert (state.aborted if leftover == "aborted" else state.obsolete)
    assert [t.state for t in store.txns.show_transactions()] == (["a"] if leftover == "aborted" else [])
    assert store.locks.show_locks() == []


def test_rerunning_a_finished_compaction_changes_nothing(store):
    table = make_table(store, "t", buckets=2)
    for first in (0, 10):
        with table.transaction() as txn:
            txn.insert([(first + i, "x") for i in range(5)])
    outcome = compact(table, MAJOR)
    files, rows = tree(table.location()), read_rows(table)
    info = entry(table, outcome.compaction_id)

    again = CompactionWorker(store).run(outcome.compaction_id)

    assert again.result == "nothing to do" and "ready for cleaning" in again.message
    assert tree(table.location()) == files and read_rows(table) == rows
    assert entry(table, outcome.compaction_id) == info
    store.compactions.mark_cleaned(outcome.compaction_id)
    assert CompactionWorker(store).run(outcome.compaction_id).result == "nothing to do"
    assert tree(table.location()) == files


def test_only_an_initiated_compaction_runs(store):
    table = make_table(store, "t")
    _one_delta(table)
    refused = store.compactions.enqueue("default", "t", None, MAJOR).compaction_id
    CompactionWorker(store).run(refused)
    _one_delta(table)
    working = store.compactions.enqueue("default", "t", None, MAJOR).compaction_id
    store.compactions.claim(worker_id="other-host-w1", compaction_id=working)
    files = tree(table.location())

    for compaction_id in (refused, working, 999):
        with pytest.raises(CompactionStateError, match=str(compaction_id)):
            CompactionWorker(store).run(compaction_id)

    assert entry(table, working).state is CompactionState.WORKING
    assert entry(table, working).worker_id == "other-host-w1"
    assert entry(table, refused).state is CompactionState.REFUSED
    assert tree(table.location()) == files
    assert store.txns.show_transactions() == []
    store.compactions.mark_failed(working, "gave up")
    with pytest.raises(CompactionStateError, match="failed"):
        CompactionWorker(store).run(working)


# ---------------------------------------------------------------------------------------------------------------
# Failures: a failed attempt leaves nothing behind; a killed one leaves only invisible leftovers


class TaskFailure(RuntimeError):
    pass


def test_a_failing_task_aborts_the_compactor_and_leaves_no_trace(ms):
    table = make_table(ms, "t", buckets=2)
    for first in (0, 10, 20):
        with table.transaction() as txn:
            txn.insert([(first + i, f"r{first + i}") for i in range(6)])
    with table.transaction(operation=Operation.DELETE) as txn:
        txn.delete([0, 1, 2, 3])
    files, rows = tree(table.location()), read_rows(table)
    written = {}

    def failing_runner(plan):
        run_bucket(plan, plan.buckets[0])
        temp = plan.temp_dir(plan.outputs[0][0])
        written["files"] = sorted(os.listdir(temp))
        raise TaskFailure("executor lost while compacting bucket 1")

    enqueued = ms.compactions.enqueue("default", "t", None, MAJOR)
    with pytest.raises(TaskFailure):
        CompactionWorker(ms, runner=failing_runner).run(enqueued.compaction_id)

    assert written["files"] == ["bucket_00000"]
    info = entry(table, enqueued.compaction_id)
    assert info.state is CompactionState.FAILED
    assert info.error_message == "TaskFailure: executor lost while compacting bucket 1"
    assert [(t.txn_id, t.state) for t in ms.txns.show_transactions()] == [(info.txn_id, "a")]
    assert ms.locks.show_locks() == []
    assert tree(table.location()) == files
    assert read_rows(table) == rows

    retry = compact(table, MAJOR)
    assert retry.result == "compacted" and retry.compaction_id != enqueued.compaction_id
    retry_txn = entry(table, retry.compaction_id).txn_id
    assert acid_state(table).base.name == f"base_0000004_v{retry_txn:07d}"
    assert read_rows(table) == rows == expected_rows(table)


class _QueueThatFailsToMarkCompacted:
    """The real queue, except that recording success fails (the metastore went away after the rename)."""

    def __init__(self, queue) -> None:
        self._queue = queue

    def __getattr__(self, name):
        return getattr(self._queue, name)

    def mark_compacted(self, compaction_id: int) -> None:
        raise MetastoreError("metastore connection lost")


def test_failure_after_the_rename_removes_the_renamed_result(store):
    table = make_table(store, "t")
    for first in (0, 10):
        with table.transaction() as txn:
            txn.insert([(first, "x")])
    files, rows = tree(table.location()), read_rows(table)
    flaky = types.SimpleNamespace(txns=store.txns, locks=store.locks, catalog=store.catalog,
                                  compactions=_QueueThatFailsToMarkCompacted(store.compactions))
    enqueued = store.compactions.enqueue("default", "t", None, MINOR)

    with pytest.raises(MetastoreError, match="connection lost"):
        CompactionWorker(flaky).run(enqueued.compaction_id)

    info = entry(table, enqueued.compaction_id)
    assert info.state is CompactionState.FAILED and "connection lost" in info.error_message
    assert [(t.txn_id, t.state) for t in store.txns.show_transactions()] == [(info.txn_id, "a")]
    assert tree(table.location()) == files and read_rows(table) == rows


def test_an_interrupt_is_handled_like_a_failure(store):
    table = make_table(store, "t")
    for first in (0, 10):
        with table.transaction() as txn:
            txn.insert([(first, "x")])
    files = tree(table.location())

    def interrupted(plan):
        local_runner(plan)
        raise KeyboardInterrupt

    enqueued = store.compactions.enqueue("default", "t", None, MAJOR)
    with pytest.raises(KeyboardInterrupt):
        CompactionWorker(store, runner=interrupted).run(enqueued.compaction_id)
    assert entry(table, enqueued.compaction_id).state is CompactionState.FAILED
    assert tree(table.location()) == files
    assert [t.state for t in store.txns.show_transactions()] == ["a"]


def _killed_attempt(store: Metastore, compaction_id: int, worker: str) -> tuple[int, int]:
    """What a driver killed mid-run leaves in the metastore: the entry working, its compactor txn open.

    Returns (compactor txn id, high watermark) for the caller to leave files as that driver would have.
    """
    info = store.compactions.claim(worker_id=worker, compaction_id=compaction_id)
    txn_id = store.txns.open_txn(txn_type=TxnType.COMPACTION)
    reader = store.txns.valid_write_ids(info.database, info.table, current_txn=txn_id)
    high = ValidCompactorWriteIdList.from_reader(reader).high_watermark
    store.compactions.set_compactor_txn(compaction_id, txn_id, high)
    return txn_id, high


def _time_out(store: Metastore, clock, compaction_id: int, txn_id: int) -> None:
    """The housekeeping that notices the dead driver: its txn times out, its entry goes back to initiated."""
    clock.advance(WORKER_TIMEOUT_MS + 1)
    assert store.txns.perform_timeouts() == [txn_id]
    assert [e.id for e in store.compactions.revert_timed_out_workers(WORKER_TIMEOUT_MS)] == [compaction_id]
    assert entry_state(store, compaction_id) is CompactionState.INITIATED


def entry_state(store: Metastore, compaction_id: int) -> CompactionState:
    return store.compactions.get(compaction_id).state


def test_retry_after_killed_attempts_ignores_and_removes_their_leftovers(store, clock):
    table = make_table(store, "t", buckets=2)
    for first in (0, 10, 20):
        with table.transaction() as txn:
            txn.insert([(first + i, f"r{first + i}") for i in range(6)])
    location = Path(table.location())
    rows = read_rows(table)
    a_bucket_file = location / "delta_0000001_0000001_0000" / "bucket_00000"
    compaction_id = store.compactions.enqueue("default", "t", None, MAJOR).compaction_id

    # Attempt 1 was killed after renaming its result, before committing: a complete `_v<txn>` base of rows that
    # would be read twice if it counted.
    first_txn, high = _killed_attempt(store, compaction_id, "dead-driver-1")
    renamed = location / f"base_{high:07d}_v{first_txn:07d}"
    renamed.mkdir()
    shutil.copy(a_bucket_file, renamed / "bucket_00000")
    (renamed / "_orc_acid_version").write_bytes(b"2")
    assert read_rows(table) == rows  # its transaction is still open: invisible
    _time_out(store, clock, compaction_id, first_txn)
    assert read_rows(table) == rows  # now aborted: still invisible
    assert renamed.name in acid_state(table).aborted

    # Attempt 2 was killed while its tasks wrote: a hidden result directory with a truncated file.
    second_txn, _ = _killed_attempt(store, compaction_id, "dead-driver-2")
    hidden = location / f".base_{high:07d}_v{second_txn:07d}.tmp-c{compaction_id}"
    hidden.mkdir()
    (hidden / "bucket_00001").write_bytes(a_bucket_file.read_bytes()[:100])
    _time_out(store, clock, compaction_id, second_txn)
    # Somebody else's staging directories are not the retry's to remove.
    foreign = [location / f".base_{high:07d}_v0000099.tmp-c{compaction_id + 100}",
               location / f".base_{high:07d}_v0000099.tmp-c{compaction_id}0",
               location / ".delta_0000009_0000009_0000.tmp-0123456789ab"]
    for path in foreign:
        path.mkdir()

    outcome = CompactionWorker(store).run(compaction_id)

    assert outcome.result == "compacted"
    third_txn = entry(table, compaction_id).txn_id
    assert third_txn not in (first_txn, second_txn)
    assert not hidden.exists()
    assert all(path.exists() for path in foreign)
    state = acid_state(table)
    assert state.base.name == f"base_{high:07d}_v{third_txn:07d}"
    assert renamed.name in state.aborted  # left for the cleaner; never read
    assert read_rows(table) == rows == expected_rows(table)
    base_events = check_result_directory(location / state.base.name, operation=0)
    assert by_key(base_events) == insert_events_of(rows)


# ---------------------------------------------------------------------------------------------------------------
# The sort-merge delete path gives the same files as the in-memory registry


@pytest.mark.parametrize("kind", [MAJOR, MINOR], ids=["major", "minor"])
def test_compaction_files_equal_the_readers_rows_on_both_delete_paths(store, kind):
    table = make_table(store, "big", buckets=2, stripe_rows=1000)
    with table.transaction() as txn:                                               # 1: several stripes per file
        txn.insert([(i, f"r{i}") for i in range(5000)])
    with table.transaction() as txn:                                               # 2
        txn.insert([(i, f"r{i}") for i in range(5000, 5600)])
    with table.transaction(operation=Operation.DELETE) as txn:                     # 3
        txn.delete(list(range(0, 5000, 7)))
    with table.transaction(operation=Operation.DELETE, abort=True) as txn:         # 4, aborted
        txn.delete(list(range(1, 5000, 5)))
    with table.transaction(operation=Operation.DELETE) as txn:                     # 5
        txn.delete(list(range(3, 5600, 11)))
    at = snapshot(table)
    write_ids = ValidCompactorWriteIdList.from_reader(at.write_ids[table.full_name])
    fs, location = FileSystem.resolve(table.location())
    state = get_acid_state(location, write_ids=write_ids, txns=at.txns, fs=fs)
    plans = {memory: build_plan(fs, state, compaction_id=100 + memory, kind=kind, columns=table.info.columns,
                                write_ids=write_ids, txn_id=999) for memory in (0, 1)}
    assert [work.bucket for work in plans[0].buckets] == [0, 1]
    for work_registry, work_streamed in zip(plans[1].buckets, plans[0].buckets):
        run_bucket(plans[1], work_registry)
        run_bucket(plans[0], work_streamed)

    for (final, registry_dir), (_, streamed_dir) in zip(plans[1].outputs, plans[0].outputs):
        registry_files = sorted(os.listdir(os.path.join(location, registry_dir)))
        assert registry_files == sorted(os.listdir(os.path.join(location, streamed_dir))) == [
            "bucket_00000", "bucket_00001"]
        for name in registry_files:
            registry = pa_orc.ORCFile(os.path.join(location, registry_dir, name))
            streamed = pa_orc.ORCFile(os.path.join(location, streamed_dir, name))
            assert streamed.read().equals(registry.read()), f"{final}/{name}"
            assert streamed.metadata == registry.metadata
    if kind is MAJOR:
        base_events = [e for name in ("bucket_00000", "bucket_00001")
                       for e in events(os.path.join(location, plans[0].outputs[0][1], name))]
        assert by_key(base_events) == insert_events_of(read_rows(table, max_delete_events_in_memory=0))
        assert by_key(base_events) == insert_events_of(expected_rows(table))

    outcome = compact(table, kind)  # the worker's own result holds the same events as the registry plan's
    info = entry(table, outcome.compaction_id)
    for final, temp in plans[1].outputs:
        real = final.replace("_v0000999", f"_v{info.txn_id:07d}")
        for name in ("bucket_00000", "bucket_00001"):
            assert pa_orc.read_table(os.path.join(location, real, name)).equals(
                pa_orc.read_table(os.path.join(location, temp, name))), f"{real}/{name}"
    assert read_rows(table) == expected_rows(table)


@pytest.mark.parametrize("compression, kind", [("SNAPPY", pyorc.CompressionKind.SNAPPY),
                                               ("NONE", pyorc.CompressionKind.NONE)])
def test_result_files_use_the_tables_orc_compress(store, compression, kind):
    table = make_table(store, "t", params={"orc.compress": compression})
    for first in (0, 10):
        with table.transaction() as txn:
            txn.insert([(first, "x")])
    outcome = compact(table, MAJOR)
    base = Path(table.location()) / f"base_0000002_v{entry(table, outcome.compaction_id).txn_id:07d}"
    with open(base / "bucket_00000", "rb") as stream:
        assert pyorc.Reader(stream).compression is kind
    assert read_rows(table) == expected_rows(table)



def test_a_major_of_a_partition_whose_rows_were_all_deleted_writes_an_empty_base(store):
    table = make_table(store, "t", partitioned=True)
    with table.transaction({"p": "a"}) as txn:
        txn.insert([(1, "a"), (2, "b")])
    with table.transaction({"p": "a"}, operation=Operation.DELETE) as txn:
        txn.delete([1, 2])
    outcome = compact(table, MAJOR, {"p": "a"})
    assert outcome.result == "compacted" and outcome.inserts == 0
    base = Path(table.location({"p": "a"})) / f"base_0000002_v{entry(table, outcome.compaction_id).txn_id:07d}"
    assert sorted(os.listdir(base)) == ["_orc_acid_version"]
    assert acid_state(table, {"p": "a"}).base.name == base.name
    assert read_rows(table, {"p": "a"}) == {}


TYPED_COLUMNS = [("ti", "tinyint"), ("si", "smallint"), ("bi", "bigint"), ("f", "float"), ("db", "double"),
                 ("dec", "decimal(10,2)"), ("ts", "timestamp"), ("dt", "date"), ("bin", "binary"), ("c", "char(3)"),
                 ("v", "varchar(5)"), ("bo", "boolean"), ("arr", "array<int>"), ("m", "map<string,int>"),
                 ("st", "struct<a:int,b:string>")]


def orc_schema(path: str | Path) -> str:
    with open(path, "rb") as stream:
        return str(pyorc.Reader(stream).schema)


@pytest.mark.parametrize("kind", [MAJOR, MINOR], ids=["major", "minor"])
def test_result_files_keep_the_tables_column_types(store, kind):
    """Hive's compactor writes its result with the table's types, as every writer does; a file declaring `string`
    where the table says char(3) or varchar(5) is not what Hive 3 writes (and relies on its readers' schema
    evolution). The rows themselves must come back unchanged whatever the types."""
    info = store.catalog.create_table("default", "typed", TYPED_COLUMNS, params={"transactional": "true"})
    writer = EmbeddedWriter(info.location, columns=info.columns)
    row = (1, 2, 3, 1.5, 2.5, decimal.Decimal("3.14"), datetime.datetime(2020, 1, 2, 3, 4, 5, 123456),
           datetime.date(2020, 1, 2), b"\x00\x01", "ab", "hello", True, [1, 2], {"k": 1}, (1, "x"))
    for values in (row, (None,) * len(TYPED_COLUMNS), row):
        txn_id = store.txns.open_txn()
        write_id = store.txns.allocate_write_ids([txn_id], "default", "typed")[txn_id]
        store.txns.add_components(txn_id, "default", "typed", [None], Operation.INSERT)
        writer.insert([values], write_id=write_id)
        store.txns.commit(txn_id)
    txn_id = store.txns.open_txn()
    write_id = store.txns.allocate_write_ids([txn_id], "default", "typed")[txn_id]
    store.txns.add_components(txn_id, "default", "typed", [None], Operation.DELETE)
    writer.delete([RowId(1, v1_bucket_property(0), 0)], write_id=write_id)
    store.txns.commit(txn_id)
    location = Path(info.location)
    at = store.txns.snapshot(["default.typed"])
    before = read_snapshot(str(location), write_ids=at.write_ids["default.typed"], txns=at.txns, include_row_id=True,
                           order_by_row_id=True)
    written_schema = orc_schema(location / "delta_0000001_0000001_0000" / "bucket_00000")

    enqueued = store.compactions.enqueue("default", "typed", None, kind)
    outcome = CompactionWorker(store).run(enqueued.compaction_id)

    at = store.txns.snapshot(["default.typed"])
    after = read_snapshot(str(location), write_ids=at.write_ids["default.typed"], txns=at.txns, include_row_id=True,
                          order_by_row_id=True)
    assert after.equals(before)
    txn = store.compactions.get(outcome.compaction_id).txn_id
    results = [name for name in os.listdir(location) if name.endswith(f"_v{txn:07d}")]
    assert len(results) == (1 if kind is MAJOR else 2)
    for name in results:
        assert orc_schema(location / name / "bucket_00000") == written_schema, name


def test_a_compaction_blocked_by_an_exclusive_lock_fails_cleanly(store):
    """The compactor takes a shared-read lock in its transaction; while another transaction holds an exclusive lock
    (a DROP PARTITION, say) it waits, and when the wait times out the attempt fails like any other: entry failed,
    compactor transaction aborted, nothing written."""
    table = make_table(store, "t")
    for first in (0, 10):
        with table.transaction() as txn:
            txn.insert([(first, "x")])
    files, rows = tree(table.location()), read_rows(table)
    holder = store.txns.open_txn()
    store.locks.acquire([LockComponent("default", "t", None, LockType.EXCLUSIVE)], txn_id=holder)
    enqueued = store.compactions.enqueue("default", "t", None, MAJOR)

    with pytest.raises(LockTimeoutError):
        CompactionWorker(store, lock_timeout_ms=50).run(enqueued.compaction_id)

    info = entry(table, enqueued.compaction_id)
    assert info.state is CompactionState.FAILED and "LockTimeoutError" in info.error_message
    assert [(t.txn_id, t.state) for t in store.txns.show_transactions()] == [(holder, "o"), (holder + 1, "a")]
    assert [lock.txn_id for lock in store.locks.show_locks()] == [holder]
    assert tree(table.location()) == files and read_rows(table) == rows
    store.txns.commit(holder)
    assert compact(table, MAJOR).result == "compacted"
    assert read_rows(table) == rows


def test_a_worker_that_lost_its_claim_cannot_fail_the_attempt_that_replaced_it(store, clock):
    """A worker presumed dead (its entry reverted by the worker time-out and run to the end by another worker) comes
    back and fails. Its failure handling may abort its own transaction and remove its own output, but it must not
    touch the entry the other worker completed: that one stays `ready for cleaning` with the other's transaction
    (every state change a compare-and-swap on the state the actor expects: working, by itself)."""
    table = make_table(store, "t")
    for first in (0, 10, 20):
        with table.transaction() as txn:
            txn.insert([(first, "x"), (first + 1, "y")])
    rows = read_rows(table)
    compaction_id = store.compactions.enqueue("default", "t", None, MAJOR).compaction_id
    replacement = {}

    def slow_runner(plan):
        clock.advance(WORKER_TIMEOUT_MS + 1)  # meanwhile: presumed dead, reverted, and redone by another worker
        assert [e.id for e in store.compactions.revert_timed_out_workers(WORKER_TIMEOUT_MS)] == [compaction_id]
        replacement["outcome"] = CompactionWorker(store, worker_id="replacement").run(compaction_id)
        replacement["entry"] = entry(table, compaction_id)
        return local_runner(plan)

    with pytest.raises(AcidError):  # it finds the entry no longer working for it
        CompactionWorker(store, worker_id="zombie", runner=slow_runner).run(compaction_id)

    assert replacement["outcome"].result == "compacted"
    done = replacement["entry"]
    assert done.state is CompactionState.READY_FOR_CLEANING and done.worker_id == "replacement"
    assert acid_state(table).base.name == f"base_0000003_v{done.txn_id:07d}"
    assert read_rows(table) == rows
    assert entry(table, compaction_id) == done


def test_the_compactor_transaction_is_heartbeated_while_tasks_run(tmp_path):
    """A compaction that runs longer than hive.txn.timeout must not be timed out by housekeeping meanwhile."""
    import time as _time

    from acid_core.metastore.engine import ManualClock

    clock = ManualClock()
    ms = Metastore(f"sqlite:///{tmp_path}/m.db", warehouse=str(tmp_path / "wh"), clock=clock, txn_timeout_ms=4000)
    ms.init()
    try:
        table = make_table(ms, "beats")
        write_history(table, None)
        queued = ms.compactions.enqueue("default", "beats", None, CompactionType.MAJOR)
        timed_out = []

        def slow_runner(plan):
            clock.advance(3000)
            _time.sleep(1.6)  # the heartbeat thread fires about once a second (timeout / 4)
            clock.advance(3000)
            timed_out.extend(ms.txns.perform_timeouts())
            return local_runner(plan)

        outcome = CompactionWorker(ms, runner=slow_runner).run(queued.compaction_id)
        assert outcome.result == "compacted" and timed_out == []
        assert ms.compactions.get(queued.compaction_id).state is CompactionState.READY_FOR_CLEANING
    finally:
        ms.close()
