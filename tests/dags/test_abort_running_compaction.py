"""A compaction aborted while it runs (the ACID view's Abort: `abort_compactions(..., working=True)`) ends its Airflow
task skipped with "... aborted by <who>", emits no asset event, counts in `acid.compaction_aborted`, and leaves the
table as it was: same rows, no new base or delta, no hidden result directory, the entry `aborted` (not `failed`) in
SHOW COMPACTIONS. Through the real DAGs with `dag.test()`: a batch worker slot (`acid_worker`) and one compaction
per task (`acid_compact`).

The abort is real and comes while the compaction's Spark job runs: a thread of the test polls the metastore and the
partition directory until the entry is `working` and its hidden result directory exists (the worker makes it just
before its Spark job starts), then aborts it as the view does; just after the abort that directory still lacks the
ACID format file the worker writes once the job has ended. The job takes several seconds on local[2], most of them
starting its Python workers: a 1.5-million-row partition adds under a second to it (its tasks merge millions of rows
a second) and five seconds to the test's writing, so the partition holds 300,000 rows. The worker finds the abort at
its next heartbeat (at most every 10 s: it cancels the job) or, when the job ends first, as it goes to mark the entry
compacted; either way it fails the attempt without touching the aborted entry, removes its output, and the operator
ends the task by the entry's state.
"""

from __future__ import annotations

import os
import threading
import time

import pytest
from support.dag_support import COLUMNS, asset_events, dirs, insert, returned, returned_all, task_states
from support.statsd_support import StatsdListener, metrics_to

# Airflow's own stats.initialize (run again by airflow.sdk.serde) drops a StatsD client without closing its socket.
pytestmark = [pytest.mark.airflow, pytest.mark.spark, pytest.mark.slow, pytest.mark.filterwarnings(
    "ignore:Exception ignored in. <socket.socket:pytest.PytestUnraisableExceptionWarning")]

BY = "admin from the ACID view"
BIG = 300_000  # rows in the partition's first delta (see above)
ROWS = BIG + 2  # and two one-row deltas after it
COMPACT = {"database": "default", "table": "t", "partition": "ds=d1", "type": "major", "number_of_buckets": None,
           "pyspark_memory": None, "properties": {}, "pool": None, "wait": True}
WORKER = {"max_compactions": 100, "workers": 1, "batch_seconds": 600, "pool_timeout_seconds": 43200}
WATCH_SECONDS = 240  # the watcher gives up after this long (the DAG run then fails the test's assertions)


@pytest.fixture(scope="module")
def statsd():
    listener = StatsdListener()
    with metrics_to(listener):
        yield listener
    listener.close()


class AbortWhenWorking(threading.Thread):
    """Aborts the compaction of `default.t` partition `ds=d1` as the ACID view does, as soon as it is `working` and
    its hidden result directory (`.<name>_v<txn>.tmp-c<id>`) exists in `location`: polls the metastore (a connection
    of its own) every `poll` seconds, at most `seconds` long. Records the id, the abort's answer, when, and what the hidden directories held just after it."""

    def __init__(self, url: str, warehouse: str, location: str, *, seconds: float = WATCH_SECONDS,
                 poll: float = 0.02) -> None:
        super().__init__(daemon=True, name="abort-when-working")
        self.url, self.warehouse, self.location = url, warehouse, location
        self.seconds, self.poll = seconds, poll
        self.stopped = threading.Event()
        self.compaction_id: int | None = None
        self.answer: dict[int, str] | None = None
        self.result_files: dict[str, list[str] | None] = {}  # what they held just after the abort
        self.aborted_at: float | None = None  # time.monotonic()
        self.error: BaseException | None = None

    def run(self) -> None:
        from acid_core.metastore import Metastore
        from acid_core.metastore.codes import CompactionState

        store = Metastore(self.url, warehouse=self.warehouse)
        try:
            deadline = time.monotonic() + self.seconds
            for _ in range(int(self.seconds / self.poll) + 1):
                if self.stopped.is_set() or time.monotonic() > deadline:
                    return
                for entry in store.compactions.show(database="default", table="t", partition="ds=d1",
                                                    state=CompactionState.WORKING):
                    hidden = [name for name in os.listdir(self.location) if name.endswith(f".tmp-c{entry.id}")]
                    if hidden:
                        self.compaction_id = entry.id
                        self.answer = store.compactions.abort_compactions([entry.id], by=BY, working=True)
                        self.aborted_at = time.monotonic()
                        self.result_files = {name: _listing(os.path.join(self.location, name)) for name in hidden}
                        return
                self.stopped.wait(self.poll)
        except BaseException as exc:  # reported by the test
            self.error = exc
        finally:
            store.close()

    def finish(self) -> None:
        self.stopped.set()
        self.join(timeout=30)
        assert not self.is_alive(), "the watcher did not stop"
        assert self.error is None, f"the watcher failed: {self.error!r}"
        assert self.compaction_id is not None, "the compaction was never seen working with its hidden directory"


def _listing(path: str) -> list[str] | None:
    """The names in directory `path`, None when it is gone."""
    try:
        return sorted(os.listdir(path))
    except FileNotFoundError:
        return None


def _big_partition(ms) -> str:
    """`default.t` partitioned by ds; partition ds=d1 gets a delta of BIG rows and two one-row deltas (committed
    writes). Returns the partition's location."""
    ms.catalog.create_table("default", "t", COLUMNS, params={"transactional": "true"},
                            partition_keys=[("ds", "string")])
    insert(ms, "t", "d1", [(i, f"name-{i % 997:03d}") for i in range(BIG)])
    insert(ms, "t", "d1", [(BIG, "last-but-one")])
    insert(ms, "t", "d1", [(BIG + 1, "last")])
    return ms.catalog.get_table("default", "t").partition_location("ds=d1")


def _reader_view(ms, location: str) -> tuple[list[str], list[str]]:
    """What a reader uses under a snapshot taken now (base and deltas), and the visible entries of the directory."""
    from acid_core.read.state import get_acid_state

    snapshot = ms.txns.snapshot(["default.t"])
    state = get_acid_state(location, write_ids=snapshot.write_ids["default.t"], txns=snapshot.txns)
    used = ([state.base.name] if state.base is not None else []) + [delta.name for delta in state.deltas]
    return used, dirs(location)


def _assert_unchanged(ms, location: str, before: tuple[list[str], list[str]]) -> None:
    """The partition reads as before: the same directories used, nothing new visible, no hidden output left, the
    same rows; no transaction left open (the compactor's was aborted)."""
    import pyarrow.compute as pc

    from acid_core.read.merge import read_snapshot

    assert _reader_view(ms, location) == before
    assert [name for name in os.listdir(location) if name.startswith(".")] == [], "hidden output left behind"
    snapshot = ms.txns.snapshot(["default.t"])
    rows = read_snapshot(location, write_ids=snapshot.write_ids["default.t"], txns=snapshot.txns)
    assert rows.num_rows == ROWS
    assert pc.sum(rows.column("id")).as_py() == ROWS * (ROWS - 1) // 2  # ids 0 .. ROWS-1, each once
    assert ms.txns.min_open_txn() is None


def _assert_aborted_entry(ms, compaction_id: int) -> None:
    """SHOW COMPACTIONS shows the entry aborted by the view (not failed), its worker's failure not recorded over it."""
    from acid_core.metastore.codes import CompactionState

    [shown] = ms.compactions.show(compaction_id=compaction_id)
    assert (shown.state, shown.error_message) == (CompactionState.ABORTED, f"Compaction Aborted by {BY}.")
    assert ms.compactions.show(database="default", table="t", state=CompactionState.FAILED) == []


def _assert_caught_running(watcher: AbortWhenWorking) -> None:
    """Its result directory was still hidden just after the abort, without the ACID format file the worker writes
    once its tasks have ended: the abort came while the Spark job ran."""
    from acid_core.format.layout import ACID_FORMAT_FILE

    assert watcher.result_files and all(
        files is not None and ACID_FORMAT_FILE not in files for files in watcher.result_files.values()), \
        f"aborted too late: {watcher.result_files}"


def _stop_path(output: str) -> str:
    """How the driver found the abort (for the report): at a heartbeat (its Spark job cancelled), or when it went to
    mark the entry compacted (the job had ended)."""
    if "heartbeat lost" in output:
        return "heartbeat (job cancelled)"
    return "commit (mark compacted refused)" if "cannot mark compacted" in output else "unknown"


@pytest.mark.timeout(300)
def test_a_batch_compaction_aborted_while_its_spark_job_runs_ends_the_task_skipped(
        acid_connection, warehouse, make_ms, dagbag, monkeypatch, statsd, capfd):
    from acid_core.metastore.codes import CompactionType

    monkeypatch.setenv("ACID_PROGRESS_SECONDS", "1")  # the driver's progress lines show the job running
    ms = make_ms()
    location = _big_partition(ms)
    compaction_id = ms.compactions.enqueue("default", "t", "ds=d1", CompactionType.MAJOR).compaction_id
    before = _reader_view(ms, location)
    events_before = (asset_events("acid_compacted"), asset_events("acid_compacted.default.t"))
    aborted_before, failed_before = statsd.count("acid.compaction_aborted"), statsd.count("acid.compaction_failed")
    capfd.readouterr()
    watcher = AbortWhenWorking(acid_connection, warehouse, location)
    watcher.start()
    try:
        run = dagbag.get_dag("acid_worker").test(run_conf=WORKER)
        ended = time.monotonic()
    finally:
        watcher.finish()

    assert (watcher.compaction_id, watcher.answer) == (compaction_id, {compaction_id: "Successfully aborted compaction"})
    _assert_caught_running(watcher)
    assert run.state == "success"
    assert task_states(run) == {"list_compactions": "success", "compact[0]": "skipped"}
    message = f"compaction {compaction_id} of default.t partition ds=d1 aborted by {BY}"
    [batch] = returned_all(run, "compact")
    assert [(s["compaction_id"], s["state"], s["message"]) for s in batch["compactions"]] == [
        (compaction_id, "aborted", message)]
    output = "".join(capfd.readouterr())
    assert f"1 compaction aborted: {message}" in output  # the skip's reason
    _assert_aborted_entry(ms, compaction_id)
    assert (asset_events("acid_compacted"), asset_events("acid_compacted.default.t")) == events_before
    assert statsd.count("acid.compaction_aborted") == aborted_before + 1
    assert statsd.count("acid.compaction_failed") == failed_before
    _assert_unchanged(ms, location, before)
    print(f"acid_worker: aborted with {watcher.result_files} present; the DAG run ended {ended - watcher.aborted_at:.1f} s "
          f"later; the driver found the abort at its {_stop_path(output)}")


@pytest.mark.timeout(300)
def test_a_compaction_aborted_while_its_spark_job_runs_ends_its_acid_compact_task_skipped(
        acid_connection, warehouse, make_ms, dagbag, monkeypatch, statsd, capfd):
    monkeypatch.setenv("ACID_PROGRESS_SECONDS", "1")
    ms = make_ms()
    location = _big_partition(ms)
    before = _reader_view(ms, location)
    events_before = (asset_events("acid_compacted"), asset_events("acid_compacted.default.t"))
    aborted_before, failed_before = statsd.count("acid.compaction_aborted"), statsd.count("acid.compaction_failed")
    capfd.readouterr()
    watcher = AbortWhenWorking(acid_connection, warehouse, location)
    watcher.start()
    try:
        run = dagbag.get_dag("acid_compact").test(run_conf=COMPACT)
        ended = time.monotonic()
    finally:
        watcher.finish()

    [compaction_id] = returned(run, "enqueue")
    assert (watcher.compaction_id, watcher.answer) == (compaction_id, {compaction_id: "Successfully aborted compaction"})
    _assert_caught_running(watcher)
    assert run.state == "success"
    assert task_states(run) == {"enqueue": "success", "run_now": "success", "compact[0]": "skipped"}
    message = f"compaction {compaction_id} of default.t partition ds=d1 aborted by {BY}"
    assert [(s["compaction_id"], s["state"], s["message"]) for s in returned_all(run, "compact")] == [
        (compaction_id, "aborted", message)]
    output = "".join(capfd.readouterr())
    assert message in output  # the task log says who aborted it
    _assert_aborted_entry(ms, compaction_id)
    assert (asset_events("acid_compacted"), asset_events("acid_compacted.default.t")) == events_before
    assert statsd.count("acid.compaction_aborted") == aborted_before + 1
    assert statsd.count("acid.compaction_failed") == failed_before
    _assert_unchanged(ms, location, before)
    print(f"acid_compact: aborted with {watcher.result_files} present; the DAG run ended {ended - watcher.aborted_at:.1f} s "
          f"later; the driver found the abort at its {_stop_path(output)}")
