"""`acid compact run ID` end to end: the real CLI, spark-submit on local[2], a SQLite metastore and real files.

Each spark-submit costs several seconds of JVM start-up, so the tests use seven in all: a minor compaction, a
refused one, an unknown id, a failing one, and a major compaction whose first driver is killed mid-job, retried
after housekeeping, then run once more. Tables are written with acid_core's embedded writer inside metastore
transactions; rows are compared, ROW__IDs included, under snapshots taken from the metastore.
"""

from __future__ import annotations

import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from support.compaction_support import (
    ROOT,
    ROW_ID_COLUMNS,
    WORKER_TIMEOUT_MS,
    PartitionedTestTable,
    compact_command,
    compact_environment,
    data_source_lookup_probe,
    fingerprint,
    hidden_entries,
    kill_session,
    make_rows,
    run_compact,
)

from acid_core.compaction.worker import REFUSED_MESSAGE, CompactionWorker, local_runner
from acid_core.format.layout import ACID_FORMAT_FILE
from acid_core.metastore import Metastore
from acid_core.metastore.codes import CompactionState, CompactionType
from acid_core.metastore.engine import ManualClock
from acid_core.read.state import get_acid_state

pytestmark = pytest.mark.spark


@pytest.fixture
def acid_home(tmp_path):
    return tmp_path / "acid-home"


def reader_state(table: PartitionedTestTable, p: int):
    """The directories a reader picks for partition `p` under a snapshot taken now."""
    snapshot = table.metastore.txns.snapshot([table.full_name])
    return get_acid_state(str(table.location(p)), write_ids=snapshot.write_ids[table.full_name], txns=snapshot.txns)


def assert_same_rows(after, before) -> None:
    """Same rows with the same ROW__IDs (both in ROW__ID order); a short message when not."""
    if after.equals(before):
        return
    keys = list(zip(*(after.column(n).to_pylist() for n in ROW_ID_COLUMNS)))
    repeated = len(keys) - len(set(keys))
    raise AssertionError(f"rows changed: {before.num_rows} before, {after.num_rows} after, "
                         f"{repeated} ROW__IDs now appear more than once")


def assert_ready_for_cleaning(store: Metastore, compaction_id: int):
    entry = store.compactions.get(compaction_id)
    assert entry.state is CompactionState.READY_FOR_CLEANING, entry
    assert entry.txn_id is not None and entry.highest_write_id is not None
    return entry


def test_minor_compaction_keeps_every_event_and_readers_switch_to_it(store, acid_home):
    """Base (from an earlier major compaction, run in-process) + deltas + deletes + an aborted write -> one delta
    and one delete delta holding the events of the deltas only; the base stays as it is."""
    table = PartitionedTestTable.create(store, "minor_t")
    table.insert(1, make_rows(0, 400))
    table.insert(1, make_rows(400, 100))
    earlier = store.compactions.enqueue("default", "minor_t", table.partition(1), CompactionType.MAJOR)
    assert CompactionWorker(store, runner=local_runner).run(earlier.compaction_id).result == "compacted"
    base = reader_state(table, 1).base.name
    table.insert(2, make_rows(10_000, 300))  # another partition, which the compaction must not touch
    first_delta = table.insert(1, make_rows(500, 200))
    table.insert(1, make_rows(700, 50), abort=True)  # an aborted write: its events must not reach the new delta
    row_ids = table.row_ids(1)
    table.delete(1, row_ids[::7])  # base rows and delta rows
    table.insert(1, make_rows(900, 100))
    table.delete(1, row_ids[3::11])
    before, other_before = table.rows(1), fingerprint(table.location(2))
    queued = store.compactions.enqueue("default", "minor_t", table.partition(1), CompactionType.MINOR)

    environment = compact_environment(acid_home)
    looked_up = data_source_lookup_probe(environment, acid_home / "probe")

    result = run_compact(queued.compaction_id, store.url, acid_home, environment=environment)

    assert result.returncode == 0, result.stderr
    assert f"compaction {queued.compaction_id}: compacted" in result.stdout
    # no data source registered: Spark never started its look-up of Python data sources (about 1 s per application)
    assert not looked_up.exists()
    entry = assert_ready_for_cleaning(store, queued.compaction_id)
    suffix = f"{first_delta:07d}_{entry.highest_write_id:07d}_v{entry.txn_id:07d}"
    state = reader_state(table, 1)
    assert state.base.name == base
    assert sorted(d.name for d in state.deltas) == [f"delete_delta_{suffix}", f"delta_{suffix}"]
    for name in (f"delta_{suffix}", f"delete_delta_{suffix}"):
        assert (table.location(1) / name / ACID_FORMAT_FILE).read_text() == "2"
    assert hidden_entries(table.location(1)) == []
    assert_same_rows(table.rows(1), before)
    assert fingerprint(table.location(2)) == other_before


def test_refused_compaction_exits_zero_with_hives_message(store, acid_home):
    table = PartitionedTestTable.create(store, "refused_t")
    table.insert(1, make_rows(0, 10))
    before = fingerprint(table.location(1))
    queued = store.compactions.enqueue("default", "refused_t", table.partition(1), CompactionType.MINOR)

    result = run_compact(queued.compaction_id, store.url, acid_home)

    assert result.returncode == 0, result.stderr
    assert REFUSED_MESSAGE in result.stdout
    assert store.compactions.get(queued.compaction_id).state is CompactionState.REFUSED
    assert fingerprint(table.location(1)) == before


def test_unknown_compaction_id_fails_with_the_error_on_stderr(store, acid_home):
    result = run_compact(4242, store.url, acid_home)

    assert result.returncode != 0
    assert "compaction 4242 does not exist" in result.stdout + result.stderr
    assert "compaction 4242 does not exist" in result.stderr, f"the error is not on stderr; stdout: {result.stdout!r}"
    assert store.compactions.get(4242) is None


def test_failing_compaction_is_marked_failed_and_leaves_nothing(store, acid_home):
    table = PartitionedTestTable.create(store, "failing_t")
    table.insert(1, make_rows(0, 5_000))
    table.insert(1, make_rows(5_000, 5_000))
    bucket_file = next(table.location(1).glob("delta_0000002_*/bucket_00000"))
    data = bytearray(bucket_file.read_bytes())
    middle = len(data) // 4
    data[middle:middle + 400] = bytes(range(200)) * 2  # inside the stripe data: the footer reads, the rows do not
    bucket_file.write_bytes(bytes(data))
    queued = store.compactions.enqueue("default", "failing_t", table.partition(1), CompactionType.MAJOR)

    result = run_compact(queued.compaction_id, store.url, acid_home)

    assert result.returncode != 0, result.stdout
    entry = store.compactions.get(queued.compaction_id)
    assert entry.state is CompactionState.FAILED, entry
    assert sorted(p.name for p in table.location(1).iterdir()) == [
        "delta_0000001_0000001_0000", "delta_0000002_0000002_0000"]
    assert store.txns.min_open_txn() is None  # the compactor's transaction was aborted, not left open
    assert f"compaction {queued.compaction_id} failed" in result.stderr, \
        f"no error line on stderr; stdout ends: {result.stdout[-1500:]!r}"
    corrupt = f"{bucket_file.parent.name}/{bucket_file.name}"
    assert corrupt in entry.error_message, f"the recorded error does not name {corrupt}: {entry.error_message[-600:]}"


def test_major_compaction_after_a_killed_driver_retries_cleanly_and_repeats_change_nothing(
        store, acid_home, tmp_path):
    """A driver killed mid-job leaves the table as it was; housekeeping puts the entry back; the retry succeeds."""
    table = PartitionedTestTable.create(store, "killed_t")
    table.insert(1, make_rows(0, 1_500_000))  # big enough that the Spark job takes a few seconds
    table.insert(2, make_rows(5_000_000, 300))
    for start in range(1_500_000, 1_600_000, 20_000):
        table.insert(1, make_rows(start, 20_000))
    table.insert(1, make_rows(2_000_000, 1_000), abort=True)
    row_ids = table.row_ids(1)
    table.delete(1, row_ids[::10])
    table.delete(1, row_ids[5::10])
    before, other_before = table.rows(1), fingerprint(table.location(2))
    queued = store.compactions.enqueue("default", "killed_t", table.partition(1), CompactionType.MAJOR)
    compaction_id = queued.compaction_id

    hidden = f".tmp-c{compaction_id}"
    with open(tmp_path / "killed.log", "w") as log:
        process = subprocess.Popen(compact_command(compaction_id, store.url), cwd=ROOT,
                                   env=compact_environment(acid_home), stdout=log, stderr=log, start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while not any(name.endswith(hidden) for name in hidden_entries(table.location(1))):
            assert process.poll() is None, (tmp_path / "killed.log").read_text()[-4000:]
            assert time.monotonic() < deadline, "the compaction's hidden result directory never appeared"
            time.sleep(0.02)
    finally:
        kill_session(process.pid)  # the CLI, spark-submit's JVM, its Python driver and the Python workers
        process.wait()

    assert [name for name in hidden_entries(table.location(1)) if name.endswith(hidden)], "killed too late"
    [left] = Path(tempfile.gettempdir()).glob(f"acid-compact-{process.pid}-*")  # the killed run removed nothing
    killed = store.compactions.get(compaction_id)
    assert killed.state is CompactionState.WORKING and killed.txn_id is not None
    assert_same_rows(table.rows(1), before)

    later = Metastore(store.url, clock=ManualClock(int(time.time() * 1000) + 10 * WORKER_TIMEOUT_MS))
    try:  # what housekeeping does once the time-outs have passed
        assert later.txns.perform_timeouts() == [killed.txn_id]  # the dead compactor's transaction
        assert [e.id for e in later.compactions.revert_timed_out_workers(WORKER_TIMEOUT_MS)] == [compaction_id]
    finally:
        later.close()
    assert store.compactions.get(compaction_id).state is CompactionState.INITIATED

    retry = run_compact(compaction_id, store.url, acid_home)

    assert retry.returncode == 0, retry.stderr
    assert f"compaction {compaction_id}: compacted" in retry.stdout
    assert not left.exists()  # the next run removed the killed one's scratch directory
    entry = assert_ready_for_cleaning(store, compaction_id)
    assert entry.txn_id != killed.txn_id
    base = f"base_{entry.highest_write_id:07d}_v{entry.txn_id:07d}"
    state = reader_state(table, 1)
    assert state.base is not None and state.base.name == base and state.deltas == ()
    assert hidden_entries(table.location(1)) == []
    assert_same_rows(table.rows(1), before)
    assert fingerprint(table.location(2)) == other_before

    files_after, entry_after = fingerprint(table.location(1)), store.compactions.get(compaction_id)
    again = run_compact(compaction_id, store.url, acid_home)

    assert again.returncode == 0, again.stderr
    assert "nothing to do" in again.stdout
    assert fingerprint(table.location(1)) == files_after
    assert store.compactions.get(compaction_id) == entry_after
