"""The maintenance platform end to end: the DAGs run with `dag.test()`, compactions as real spark-submit jobs on local
Spark, real table files, and the metastore on SQLite and on a real PostgreSQL server.

Each spark-submit costs several seconds of JVM start-up, so the scenarios are few and each does a lot: one initiator
run queues a minor, a major and an aborted-transaction compaction and one worker run runs all three; a manual run
compacts one chosen partition; a killed compaction is put back by housekeeping and retried by the worker.
"""

from __future__ import annotations

import functools
import random
import signal
import subprocess
import sys
import time

import pytest
from support.dag_support import COLUMNS, ROOT, asset_events, dirs, returned, returned_all, task_states
from support.processes import kill_session

pytestmark = [pytest.mark.airflow, pytest.mark.spark]

# dag.test() keeps the previous run's conf values on the shared DAG object, so every run gives every param.
INITIATOR = {"dry_run": False, "full_scan": False, "fetch_size": 1000, "delta_num_threshold": 10,
             "delta_pct_threshold": 0.1, "aborted_threshold": 1000, "aborted_time_threshold_seconds": 43200,
             "failed_threshold": 2, "failed_retry_seconds": 604800}
WORKER = {"max_compactions": 100}
CLEANER = {"dry_run": False, "retention_seconds": 0, "retry_retention_seconds": 300, "max_attempts": 5,
           "trash_dir": None}
SETTINGS = {"database": "default", "no_auto_compaction": "leave", "delta_num_threshold": None,
            "delta_pct_threshold": None, "clear_thresholds": False}
COMPACT = {"database": "default", "partition": None, "type": "major", "properties": {}, "wait": True}


SQLITE = pytest.param(("sqlite", "local"), id="sqlite")
POSTGRES = pytest.param(("postgres", "local"), id="postgres", marks=pytest.mark.postgres)
SQLITE_S3 = pytest.param(("sqlite", "s3"), id="sqlite-s3")
LOCAL = [SQLITE, POSTGRES]
# Each end-to-end scenario costs a spark-submit per compaction: it runs on the backends where its outcome depends on
# them (the metastore's and the warehouse's own behaviour is tested on both databases and on S3 below the DAGs). The
# platform's default (SQLite, local files) and S3 for the main cycle; PostgreSQL and S3 for the killed compaction
# (housekeeping's transaction abort, the killed job's output left on the object store); the manual run is a DAG
# parameter path, the same on every backend.
MAIN_CYCLE = [SQLITE, SQLITE_S3]
KILLED = [POSTGRES, SQLITE_S3]
MANUAL = [SQLITE]


@pytest.fixture(params=LOCAL)
def backend(request) -> tuple[str, str]:
    """(metastore, warehouse): these scenarios run on a SQLite file and on a fresh database of the test PostgreSQL
    server with a local warehouse; the scenarios above choose theirs, S3 among them."""
    return request.param


@pytest.fixture
def metastore_url(backend, request, tmp_path) -> str:
    if backend[0] == "sqlite":
        return f"sqlite:///{tmp_path}/metastore.db"
    return request.getfixturevalue("postgres_url")


@pytest.fixture
def warehouse(backend, request, tmp_path) -> str:
    if backend[1] == "s3":
        return request.getfixturevalue("s3_warehouse")
    return str(tmp_path / "warehouse")


@pytest.fixture
def make_ms(make_ms, warehouse):
    """The metastores the test opens itself use the connection's warehouse."""
    return functools.partial(make_ms, warehouse=warehouse)


@pytest.fixture(autouse=True)
def no_server_side_copy(backend, request):
    """On S3, nothing a scenario does (writes, spark-submit compactions, cleans) copies an object on the server."""
    server = request.getfixturevalue("s3_server") if backend[1] == "s3" else None
    yield
    if server is not None:
        counts = server.counts()
        assert counts.get("PutObject", 0) + counts.get("CompleteMultipartUpload", 0) > 0, counts  # it ran on S3
        assert not counts.get("CopyObject") and not counts.get("UploadPartCopy"), counts


def entries(location: str) -> list[str]:
    """Every entry of a directory, hidden ones too (local or S3)."""
    from acid_core.storage.fs import FileSystem

    fs, path = FileSystem.resolve(location)
    return [entry.name for entry in fs.list_dir(path, missing_ok=True)]


class Tables:
    """Writes real transactions into real tables of one metastore: embedded-writer inserts and streaming batches."""

    def __init__(self, ms) -> None:
        self.ms = ms
        self.random = random.Random(7)

    def create(self, name: str, *, partitioned: bool):
        return self.ms.catalog.create_table("default", name, COLUMNS, params={"transactional": "true"},
                                            partition_keys=[("ds", "string")] if partitioned else None)

    def insert(self, name: str, ds: str | None, count: int, *, abort: bool = False) -> None:
        from acid_core.write.table import AcidTable

        partition = {"ds": ds} if ds is not None else None
        rows = [(self.random.randrange(2**31), f"{self.random.getrandbits(96):024x}") for _ in range(count)]
        write = AcidTable.load(self.ms, "default", name).new_write(agent_info="test writer", partition=partition)
        write.insert(rows, partition=partition)
        if abort:  # as a killed writer's transaction is aborted: its delta stays for the cleaner
            self.ms.txns.abort(write.txn_id)
        else:
            write.commit()

    def stream(self, name: str, ds: str, transactions: int, *, abort: bool = False) -> None:
        """`transactions` streaming transactions of one row each, one delta per transaction (batches of one)."""
        from acid_core.write.streaming import StreamingConnection

        with StreamingConnection(self.ms, "default", name, partition={"ds": ds}, batch_size=1) as stream:
            for number in range(transactions):
                stream.begin_transaction()
                stream.write([(number, f"streamed-{number}")])
                stream.abort_transaction() if abort else stream.commit_transaction()

    def compact_in_process(self, name: str, ds: str | None) -> None:
        """Set-up only: a base from the local worker, cleaned, so the partition starts as one base."""
        from acid_core.compaction.cleaner import clean
        from acid_core.compaction.worker import CompactionWorker
        from acid_core.metastore.codes import CompactionType

        partition = f"ds={ds}" if ds is not None else None
        compaction_id = self.ms.compactions.enqueue("default", name, partition, CompactionType.MAJOR).compaction_id
        CompactionWorker(self.ms).run(compaction_id)
        clean(self.ms, log=lambda line: None)

    def rows(self, name: str, ds: str | None, snapshot=None) -> list[tuple]:
        from acid_core.read.merge import read_snapshot

        full = f"default.{name}"
        snapshot = snapshot or self.ms.txns.snapshot([full])
        info = self.ms.catalog.get_table("default", name)
        table = read_snapshot(info.partition_location(f"ds={ds}" if ds else None), write_ids=snapshot.write_ids[full],
                              txns=snapshot.txns)
        return sorted(zip(*(table.column(i).to_pylist() for i in range(table.num_columns))))

    def location(self, name: str, ds: str | None) -> str:
        return self.ms.catalog.get_table("default", name).partition_location(f"ds={ds}" if ds else None)


def _map_labels(dag_run) -> list[str]:
    """The UI labels of the mapped compaction tasks (rendered from `map_index_template`)."""
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session

    with create_session() as session:
        return [ti.rendered_map_index for ti in session.query(TaskInstance).filter(
            TaskInstance.dag_id == dag_run.dag_id, TaskInstance.run_id == dag_run.run_id,
            TaskInstance.task_id == "compact")]


@pytest.mark.parametrize("backend", MAIN_CYCLE, indirect=True)
def test_initiator_queues_worker_compacts_on_spark_and_cleaner_waits_for_open_readers(acid_connection, make_ms,
                                                                                      dagbag):
    from acid_core.compaction.initiator import find_candidates
    from acid_core.metastore.codes import CompactionState

    ms = make_ms()
    tables = Tables(ms)
    tables.create("sales", partitioned=True)
    tables.create("quiet", partitioned=False)
    for ds in ("a", "b", "c"):  # each partition starts as one base of incompressible rows
        tables.insert("sales", ds, 10_000)
        tables.insert("sales", ds, 10_000)
        tables.compact_in_process("sales", ds)
    tables.stream("sales", "a", 11)  # 11 small deltas > delta.num.threshold 10, tiny next to the base: minor
    tables.insert("sales", "b", 6_000)  # delta bytes / base bytes > delta.pct.threshold 0.1: major
    tables.stream("sales", "c", 3, abort=True)  # 3 aborted transactions > aborted_threshold 2 (below): major
    for _ in range(12):
        tables.insert("quiet", None, 1)
    settings = dagbag.get_dag("acid_table_settings").test(
        run_conf={**SETTINGS, "table": "quiet", "no_auto_compaction": "true"})
    assert settings.state == "success"
    quiet_before = dirs(tables.location("quiet", None))
    history_before = len(ms.compactions.show())
    initiator = dagbag.get_dag("acid_initiator")

    dry = initiator.test(run_conf={**INITIATOR, "dry_run": True, "aborted_threshold": 2})

    assert dry.state == "success"
    decisions = {d["partition"]: d for d in returned(dry, "poll", key="decisions")}
    assert {name: d["type"] for name, d in decisions.items()} == {
        "default.sales/ds=a": "MINOR", "default.sales/ds=b": "MAJOR", "default.sales/ds=c": "MAJOR",
        "default.quiet": None}
    assert "no_auto_compaction" in decisions["default.quiet"]["reason"]
    assert "aborted transactions" in decisions["default.sales/ds=c"]["reason"]
    assert len(ms.compactions.show()) == history_before and ms.compactions.initiated() == []
    assert task_states(dry) == {"poll": "success", "wake_workers": "skipped"}  # nothing queued, no asset event

    reader = ms.txns.open_txn()  # a reader whose snapshot predates the compactions
    reader_snapshot = ms.txns.snapshot(["default.sales"], current_txn=reader)
    rows_before = {ds: tables.rows("sales", ds, reader_snapshot) for ds in "abc"}
    dirs_before = {ds: dirs(tables.location("sales", ds)) for ds in "abc"}
    assert len(dirs_before["a"]) == 12 and len(dirs_before["c"]) == 4

    queued_events = asset_events("acid_compaction_queued")
    polled = initiator.test(run_conf={**INITIATOR, "aborted_threshold": 2})

    assert polled.state == "success"
    assert task_states(polled) == {"poll": "success", "wake_workers": "success"}  # no compaction in the poll's run
    queued = returned(polled, "poll")["queued"]
    assert sorted(entry.id for entry in ms.compactions.initiated()) == sorted(queued) and len(queued) == 3
    assert {ds: dirs(tables.location("sales", ds)) for ds in "abc"} == dirs_before  # nothing compacted yet
    assert asset_events("acid_compaction_queued") == queued_events + 1  # which starts acid_worker

    run = dagbag.get_dag("acid_worker").test(run_conf=WORKER)

    assert run.state == "success"
    # one worker slot (ACID_WORKER_THREADS unset): one task ran the three in one Spark application, oldest first
    assert task_states(run) == {"list_compactions": "success", "compact[0]": "success"}
    assert returned(run, "list_compactions") == [{"max_compactions": 100}]
    assert returned(run, "list_compactions", key="waiting") == sorted(queued)
    [batch] = returned_all(run, "compact")
    assert batch["applications"] == 1 and batch["stopped"] == "queue empty"
    results = {r["partition"]: r for r in batch["compactions"]}
    assert {p: (r["type"], r["state"]) for p, r in results.items()} == {
        "ds=a": ("MINOR", "ready for cleaning"), "ds=b": ("MAJOR", "ready for cleaning"),
        "ds=c": ("MAJOR", "ready for cleaning")}
    assert [r["compaction_id"] for r in batch["compactions"]] == sorted(queued)  # oldest first
    assert _map_labels(run) == [f"3 compactions: {min(queued)}-{max(queued)}"]
    assert asset_events("acid_compacted") >= 1
    entries_after = [ms.compactions.get(r["compaction_id"]) for r in results.values()]
    for entry in entries_after:
        assert "-airflow.acid_worker.compact[0].try1" in entry.worker_id  # the task that ran it
    application = entries_after[0].hadoop_job_id.split("/")[0]
    assert all(entry.hadoop_job_id.split("/")[0] == application for entry in entries_after)
    assert dirs(tables.location("quiet", None)) == quiet_before and ms.compactions.show(table="quiet") == []
    new_dirs = {ds: set(dirs(tables.location("sales", ds))) - set(dirs_before[ds]) for ds in "abc"}
    assert [name.split("_v")[0].split("_")[0] for name in new_dirs["a"]] == ["delta"]
    assert [name.split("_v")[0].split("_")[0] for name in new_dirs["b"]] == ["base"]
    assert new_dirs["c"] == set()  # nothing to merge: the aborted deltas are left for the cleaner

    cleaner = dagbag.get_dag("acid_cleaner")
    waiting = cleaner.test(run_conf=CLEANER)

    assert waiting.state == "success"
    for ds in "abc":  # the open reader still reads the inputs: nothing removed, same rows
        assert set(dirs_before[ds]) <= set(dirs(tables.location("sales", ds)))
        assert tables.rows("sales", ds, reader_snapshot) == rows_before[ds]
        assert tables.rows("sales", ds) == rows_before[ds]  # and a new snapshot reads the compacted result
    assert {ms.compactions.get(r["compaction_id"]).state for r in results.values()} == {
        CompactionState.READY_FOR_CLEANING}

    ms.txns.commit(reader)
    cleaned = cleaner.test(run_conf=CLEANER)

    assert cleaned.state == "success"
    assert {ms.compactions.get(r["compaction_id"]).state for r in results.values()} == {CompactionState.SUCCEEDED}
    # the compactions' inputs removed: the minor one's deltas (its base stays), the major one's base and delta
    assert set(dirs(tables.location("sales", "a"))) == {dirs_before["a"][0], *new_dirs["a"]}
    assert set(dirs(tables.location("sales", "b"))) == new_dirs["b"]
    assert dirs(tables.location("sales", "c")) == dirs_before["c"][:1]  # the base; the aborted deltas removed
    for ds in "abc":
        assert tables.rows("sales", ds) == rows_before[ds]
    # the cleaned partitions' writes and aborts are forgotten: only the never-compacted table is still a candidate
    assert [c.full_partition_name for c in find_candidates(ms, last_checked_ms=None, aborted_threshold=2,
                                                           aborted_time_threshold_ms=-1)] == ["default.quiet"]


@pytest.mark.parametrize("backend", MANUAL, indirect=True)
def test_manual_run_compacts_the_chosen_partition(acid_connection, make_ms, dagbag):
    ms = make_ms()
    tables = Tables(ms)
    tables.create("p", partitioned=True)
    for ds in ("2026-01-01", "2026-01-01", "2026-01-01", "2026-01-02"):
        tables.insert("p", ds, 3)
    part, other = tables.location("p", "2026-01-01"), tables.location("p", "2026-01-02")
    rows_before, other_before = tables.rows("p", "2026-01-01"), dirs(other)
    assert len(rows_before) == 9 and len(dirs(part)) == 3

    run = dagbag.get_dag("acid_compact").test(
        run_conf={**COMPACT, "table": "p", "partition": "ds=2026-01-01", "type": "major"})

    assert run.state == "success"
    result = returned(run, "compact")  # compact is mapped over enqueue's ids: one here
    assert [result["compaction_id"]] == returned(run, "enqueue")
    assert (result["state"], result["type"], result["partition"]) == ("ready for cleaning", "MAJOR", "ds=2026-01-01")
    assert ms.compactions.get(result["compaction_id"]).worker_id.endswith("-airflow.acid_compact.compact[0].try1")
    assert [name for name in dirs(part) if name.startswith("base_")]
    assert tables.rows("p", "2026-01-01") == rows_before
    assert dirs(other) == other_before

    queued_only = dagbag.get_dag("acid_compact").test(
        run_conf={**COMPACT, "table": "p", "partition": "ds=2026-01-02", "type": "minor", "wait": False})

    assert queued_only.state == "success"
    assert task_states(queued_only) == {"enqueue": "success", "run_now": "success", "compact": "skipped"}
    assert [entry.id for entry in ms.compactions.initiated()] == returned(queued_only, "enqueue")


@pytest.mark.parametrize("backend", KILLED, indirect=True)
def test_killed_compaction_is_put_back_by_housekeeping_and_retried(acid_connection, make_ms, dagbag, tmp_path):
    from acid_core.metastore.codes import CompactionState, CompactionType

    ms = make_ms()
    tables = Tables(ms)
    tables.create("k", partitioned=False)
    for _ in range(3):
        tables.insert("k", None, 150_000)  # big enough that the Spark tasks take a few seconds
    rows_before, dirs_before = tables.rows("k", None), dirs(tables.location("k", None))
    compaction_id = ms.compactions.enqueue("default", "k", None, CompactionType.MAJOR).compaction_id
    hidden = f".tmp-c{compaction_id}"

    def results_of_attempt() -> list[str]:  # hidden where renames are atomic; on S3 the final `_v<txn>` names
        return [name for name in entries(tables.location("k", None))
                if name.endswith(hidden) or (name.startswith("base_") and "_v" in name)]

    with open(tmp_path / "killed.log", "w") as log:  # a worker that dies mid-job: `acid compact run` killed
        process = subprocess.Popen([sys.executable, "-m", "acid_cli.main", "compact", "run", str(compaction_id),
                                    "--metastore", acid_connection, "--master", "local[1]"], cwd=ROOT,
                                   stdout=log, stderr=log, start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while not results_of_attempt():
            assert process.poll() is None, (tmp_path / "killed.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "the compaction never started writing"
            time.sleep(0.02)
        process.send_signal(signal.SIGKILL)
    finally:
        kill_session(process.pid)
        process.wait()
    killed = ms.compactions.get(compaction_id)
    assert killed.state is CompactionState.WORKING and killed.txn_id is not None
    worker = dagbag.get_dag("acid_worker")

    blocked = worker.test(run_conf=WORKER)  # the entry is 'working': nothing to run yet

    assert blocked.state == "success" and returned(blocked, "list_compactions") == []
    time.sleep(max(0.0, killed.start_ms / 1000 + 1.1 - time.time()))
    housekeeping = dagbag.get_dag("acid_housekeeping").test(run_conf={
        "worker_timeout_seconds": 1, "txn_timeout_seconds": 300, "lease_timeout_seconds": 300, "history_succeeded": 3,
        "history_failed": 3, "history_did_not_initiate": 2, "history_refused": 3, "history_timeout_seconds": 604800})

    assert housekeeping.state == "success"
    assert returned(housekeeping, "housekeep_metastore")["reverted_compactions"] == [compaction_id]
    assert ms.compactions.get(compaction_id).state is CompactionState.INITIATED
    assert results_of_attempt() == []
    assert tables.rows("k", None) == rows_before

    retried = worker.test(run_conf=WORKER)

    assert retried.state == "success"
    assert returned(retried, "list_compactions", key="waiting") == [compaction_id]
    assert returned_all(retried, "compact")[0]["compactions"][0]["state"] == "ready for cleaning"
    assert tables.rows("k", None) == rows_before
    cleaned = dagbag.get_dag("acid_cleaner").test(run_conf=CLEANER)
    assert cleaned.state == "success"
    assert ms.compactions.get(compaction_id).state is CompactionState.SUCCEEDED
    [base] = dirs(tables.location("k", None))
    assert base.startswith("base_") and base not in dirs_before
    assert tables.rows("k", None) == rows_before


def test_compaction_whose_spark_job_cannot_start_is_recorded_failed(acid_connection, make_ms, dagbag, monkeypatch):
    """No spark-submit binary of that name: the task fails and the queue says why (SHOW COMPACTIONS, retries)."""
    import json
    import shutil

    from acid_core.metastore.codes import CompactionState

    assert shutil.which("spark3-submit") is None
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps(
        {"conn_type": "spark", "host": "local[2]", "extra": {"spark-binary": "spark3-submit"}}))
    ms = make_ms()
    tables = Tables(ms)
    tables.create("t", partitioned=False)
    for _ in range(2):
        tables.insert("t", None, 2)
    dirs_before = dirs(tables.location("t", None))

    run = dagbag.get_dag("acid_compact").test(run_conf={**COMPACT, "table": "t"})

    assert run.state == "failed"
    assert task_states(run)["compact[0]"] == "failed"
    [compaction_id] = returned(run, "enqueue")
    entry = ms.compactions.get(compaction_id)
    assert entry.state is CompactionState.FAILED
    assert "spark-submit did not start the compaction" in entry.error_message and "spark3-submit" in entry.error_message
    assert dirs(tables.location("t", None)) == dirs_before


@pytest.mark.parametrize("dag_id, conf", [
    ("acid_initiator", {"delta_num_threshold": "10; DROP TABLE TXNS"}), ("acid_initiator", {"dry_run": "yes"})])
def test_initiator_and_worker_refuse_hostile_params(acid_connection, make_ms, dagbag, dag_id, conf):
    from airflow.sdk.definitions.param import ParamValidationError

    ms = make_ms()
    Tables(ms).create("t", partitioned=False)

    with pytest.raises(ParamValidationError):
        dagbag.get_dag(dag_id).test(run_conf={**(INITIATOR if dag_id == "acid_initiator" else WORKER), **conf})

    assert ms.compactions.show() == []


@pytest.mark.parametrize("dag_id, conf, expected", [
    ("acid_initiator", {"delta_num_threshold": -1}, "delta_num_threshold must be a whole number >= 0, got -1"),
    ("acid_initiator", {"fetch_size": 0}, "fetch_size must be a whole number from 1 to 5000, got 0"),
    ("acid_initiator", {"fetch_size": 10**6}, "fetch_size must be a whole number from 1 to 5000, got 1000000"),
    ("acid_worker", {"max_compactions": 10**9}, "max_compactions must be a whole number from 0 to 10000"),
    ("acid_worker", {"max_compactions": -1}, "max_compactions must be a whole number from 0 to 10000, got -1")])
def test_initiator_and_worker_refuse_out_of_range_numbers_in_words(acid_connection, make_ms, dagbag, capfd, dag_id,
                                                                   conf, expected):
    """Ranges are checked by the tasks: the trigger form clamps a number to a schema range without a word."""
    ms = make_ms()
    Tables(ms).create("t", partitioned=False)

    run = dagbag.get_dag(dag_id).test(run_conf={**(INITIATOR if dag_id == "acid_initiator" else WORKER), **conf})

    assert run.state == "failed" and expected in "".join(capfd.readouterr())
    assert ms.compactions.show() == []


@pytest.mark.parametrize("trash_dir", ["../trash", "relative/trash", "/tmp/../etc", "/tmp/x/..", "s3://b/../t"])
def test_cleaner_refuses_relative_or_dotted_trash_dir(acid_connection, make_ms, dagbag, capfd, trash_dir):
    make_ms()
    run = dagbag.get_dag("acid_cleaner").test(run_conf={**CLEANER, "trash_dir": trash_dir})
    assert run.state == "failed"
    assert f"trash_dir {trash_dir!r} is refused: expected an absolute path" in "".join(capfd.readouterr())
