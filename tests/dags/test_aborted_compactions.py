"""An abort is an outcome, not a failure (issue 23, item 8): a compaction aborted (ABORT COMPACTIONS, the ACID view's
Abort) while its Airflow task runs ends the task skipped with "... aborted by <who or what>", emits no asset event
and counts in `acid.compaction_aborted`, for one compaction per task (`acid_compact`) and for a batch worker slot
(`acid_worker`), through the real DAGs with `dag.test()`.

The abort is real and comes at a real moment: a `spark3-submit` first on PATH aborts the compaction through the
metastore, as the ACID view does, once the task has checked the entry and started spark-submit, then hands over to
the real spark-submit, whose driver finds the entry aborted (one compaction) or no longer waiting (a batch).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
from pathlib import Path

import pytest
from support.dag_support import COLUMNS, dirs, insert, returned, returned_all, task_states
from support.statsd_support import StatsdListener, metrics_to

# Airflow's own stats.initialize (run again by airflow.sdk.serde) drops a StatsD client without closing its socket.
pytestmark = [pytest.mark.airflow, pytest.mark.filterwarnings(
    "ignore:Exception ignored in. <socket.socket:pytest.PytestUnraisableExceptionWarning")]

COMPACT = {"database": "default", "partition": None, "type": "major", "number_of_buckets": None,
           "pyspark_memory": None, "properties": {}, "pool": None, "wait": True}
WORKER = {"max_compactions": 100, "workers": 1, "batch_seconds": 600, "pool_timeout_seconds": 43200}
ABORTED_BY = "aborted by Abort Comapction request"  # Hive's words (ABORT COMPACTIONS), spelling included


@pytest.fixture(scope="module")
def statsd():
    listener = StatsdListener()
    with metrics_to(listener):
        yield listener
    listener.close()


def install_aborting_spark_submit(directory: Path, monkeypatch, metastore_url: str, *,
                                  abort: list[int] | None = None) -> Path:
    """A `spark3-submit` first on PATH (named by `spark_default`) that aborts compactions `abort` (None: every
    waiting one) in the metastore, as the ACID view's Abort does, records what the abort answered, and then runs the
    real spark-submit with its arguments. Returns the record file (one JSON object per call: id -> answer)."""
    real = shutil.which("spark-submit", path=os.pathsep.join([os.path.dirname(sys.executable), os.environ["PATH"]]))
    assert real is not None, "spark-submit (pyspark) must be installed"
    bin_dir = directory / "bin"
    bin_dir.mkdir()
    record = directory / "aborts.jsonl"
    script = bin_dir / "spark3-submit"
    script.write_text(
        f"#!{sys.executable}\n"
        "import json, os, sys\n"
        "from acid_core.metastore import Metastore\n"
        f"store = Metastore({metastore_url!r})\n"
        f"ids = {abort!r}\n"
        "if ids is None:\n"
        "    ids = [entry.id for entry in store.compactions.initiated()]\n"
        "answered = store.compactions.abort_compactions(ids)\n"
        "store.close()\n"
        f"open({str(record)!r}, 'a').write(json.dumps({{str(k): v for k, v in answered.items()}}) + '\\n')\n"
        f"os.execv({real!r}, [{real!r}] + sys.argv[1:])\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps(
        {"conn_type": "spark", "host": "local[2]", "extra": {"deploy-mode": "client", "spark-binary": "spark3-submit"}}))
    return record


def _table(ms, days: list[str]) -> None:
    """`default.t` partitioned by ds, two one-row committed deltas in each day."""
    ms.catalog.create_table("default", "t", COLUMNS, params={"transactional": "true"},
                            partition_keys=[("ds", "string")])
    for day in days:
        for number in range(2):
            insert(ms, "t", day, [(number, day)])


def _events(name: str) -> list[dict]:
    """The `extra` of each event of asset `name`, oldest first."""
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session

    with create_session() as session:
        return [event.extra for event in session.query(AssetEvent).join(
            AssetModel, AssetEvent.asset_id == AssetModel.id).filter(AssetModel.name == name).order_by(AssetEvent.id)]


def _location(ms, day: str) -> str:
    return ms.catalog.get_table("default", "t").partition_location(f"ds={day}")


@pytest.mark.spark
def test_compactions_aborted_while_their_tasks_run_or_wait_end_them_skipped(acid_connection, make_ms, dagbag,
                                                                             tmp_path, monkeypatch, statsd, capfd):
    """acid_compact queues two compactions, one mapped task each. Once the first task has started spark-submit,
    both are aborted: the first one's driver finds its entry aborted; the second task finds it so before it starts
    anything. Both tasks are skipped saying so; the run succeeds; no asset event; each counted once."""
    from acid_core.metastore.codes import CompactionState

    ms = make_ms()
    _table(ms, ["d1", "d2"])
    dirs_before = {day: dirs(_location(ms, day)) for day in ("d1", "d2")}
    aborts = install_aborting_spark_submit(tmp_path, monkeypatch, acid_connection)
    events_before = (len(_events("acid_compacted")), len(_events("acid_compacted.default.t")))
    aborted_before, failed_before = statsd.count("acid.compaction_aborted"), statsd.count("acid.compaction_failed")

    run = dagbag.get_dag("acid_compact").test(run_conf={**COMPACT, "table": "t"})

    ids = returned(run, "enqueue")
    assert len(ids) == 2
    assert [json.loads(line) for line in aborts.read_text().splitlines()] == [
        {str(i): "Successfully aborted compaction" for i in ids}]  # one spark-submit: the second never started one
    assert run.state == "success"
    assert task_states(run) == {"enqueue": "success", "run_now": "success", "compact[0]": "skipped",
                                "compact[1]": "skipped"}
    entries = [ms.compactions.get(i) for i in ids]
    messages = [f"compaction {e.id} of default.t partition {e.partition} {ABORTED_BY}" for e in entries]
    assert [(s["compaction_id"], s["state"], s["message"]) for s in returned_all(run, "compact")] == [
        (i, "aborted", message) for i, message in zip(ids, messages)]
    output = "".join(capfd.readouterr())
    assert all(message in output for message in messages)  # the task logs say who or what aborted them
    assert [(e.state, e.worker_id) for e in entries] == [(CompactionState.ABORTED, None)] * 2  # nothing failed
    assert (len(_events("acid_compacted")), len(_events("acid_compacted.default.t"))) == events_before
    assert statsd.count("acid.compaction_aborted") == aborted_before + 2
    assert statsd.count("acid.compaction_failed") == failed_before
    assert {day: dirs(_location(ms, day)) for day in ("d1", "d2")} == dirs_before  # nothing written


@pytest.mark.spark
def test_a_batch_with_an_aborted_compaction_among_others_succeeds_listing_it(acid_connection, make_ms, dagbag,
                                                                             tmp_path, monkeypatch, statsd):
    """The entry the worker slot started its application for is aborted before the driver takes it; the driver runs
    the others. The task succeeds, its summary lists the aborted one, and the asset event names only the others."""
    from acid_core.metastore.codes import CompactionState, CompactionType

    ms = make_ms()
    days = ["d1", "d2", "d3"]
    _table(ms, days)
    ids = [ms.compactions.enqueue("default", "t", f"ds={day}", CompactionType.MAJOR).compaction_id for day in days]
    dirs_before = dirs(_location(ms, "d1"))
    install_aborting_spark_submit(tmp_path, monkeypatch, acid_connection, abort=[ids[0]])
    events_before = len(_events("acid_compacted"))
    aborted_before = statsd.count("acid.compaction_aborted")
    compacted_before = statsd.count("acid.compaction_compacted")
    failed_before = statsd.count("acid.compaction_failed")

    run = dagbag.get_dag("acid_worker").test(run_conf=WORKER)

    assert run.state == "success" and task_states(run)["compact[0]"] == "success"
    [batch] = returned_all(run, "compact")
    summaries = {summary["compaction_id"]: summary for summary in batch["compactions"]}
    assert sorted(summaries) == ids
    assert (summaries[ids[0]]["state"], summaries[ids[0]]["message"]) == (
        "aborted", f"compaction {ids[0]} of default.t partition ds=d1 {ABORTED_BY}")
    assert [summaries[i]["state"] for i in ids[1:]] == ["ready for cleaning"] * 2
    assert [ms.compactions.get(i).state for i in ids] == [CompactionState.ABORTED] + [
        CompactionState.READY_FOR_CLEANING] * 2
    [event] = _events("acid_compacted")[events_before:]
    assert [extra["compaction_id"] for extra in event["compactions"]] == ids[1:]  # not the aborted one
    assert statsd.count("acid.compaction_aborted") == aborted_before + 1
    assert statsd.count("acid.compaction_compacted") == compacted_before + 2
    assert statsd.count("acid.compaction_failed") == failed_before
    assert dirs(_location(ms, "d1")) == dirs_before


@pytest.mark.spark
def test_a_batch_whose_every_compaction_was_aborted_is_skipped(acid_connection, make_ms, dagbag, tmp_path,
                                                              monkeypatch, statsd, capfd):
    from acid_core.metastore.codes import CompactionType

    ms = make_ms()
    _table(ms, ["d1"])
    compaction_id = ms.compactions.enqueue("default", "t", "ds=d1", CompactionType.MAJOR).compaction_id
    install_aborting_spark_submit(tmp_path, monkeypatch, acid_connection, abort=[compaction_id])
    events_before = len(_events("acid_compacted"))
    aborted_before = statsd.count("acid.compaction_aborted")

    run = dagbag.get_dag("acid_worker").test(run_conf=WORKER)

    assert run.state == "success" and task_states(run)["compact[0]"] == "skipped"
    message = f"compaction {compaction_id} of default.t partition ds=d1 {ABORTED_BY}"
    [batch] = returned_all(run, "compact")
    assert [(s["compaction_id"], s["state"], s["message"]) for s in batch["compactions"]] == [
        (compaction_id, "aborted", message)]
    assert f"1 compaction aborted: {message}" in "".join(capfd.readouterr())
    assert len(_events("acid_compacted")) == events_before
    assert statsd.count("acid.compaction_aborted") == aborted_before + 1
