"""`acid compact run ID --master spark://...` on a real Spark standalone cluster: a master and one worker started from
the pyspark installation on 127.0.0.1, so the bucket tasks run in a separate executor JVM, as in production. The
worker here shares this run's virtualenv, named as the executors' Python (`ACID_EXECUTOR_ENV=none`,
`ACID_EXECUTOR_PYTHON`): nodes with the project installed. tests/dags/test_clean_cluster.py runs on a worker that
has nothing but Spark and a plain Python."""

from __future__ import annotations

import sys

import pytest
from support.compaction_support import PartitionedTestTable, make_rows, run_compact
from support.standalone_cluster import standalone_cluster as start_cluster

from acid_core.metastore.codes import CompactionState, CompactionType

pytestmark = [pytest.mark.spark, pytest.mark.slow]


@pytest.fixture
def standalone_cluster(tmp_path):
    """A master and one worker (1 core, 1 GiB) on loopback, in this environment."""
    with start_cluster(tmp_path) as cluster:
        yield cluster


def test_compaction_runs_on_a_standalone_cluster(standalone_cluster, store, tmp_path, monkeypatch):
    cluster = standalone_cluster
    table = PartitionedTestTable.create(store, "cluster_t")
    table.insert(1, make_rows(0, 20_000))
    table.insert(1, make_rows(20_000, 5_000))
    table.delete(1, table.row_ids(1)[::3])
    before = table.rows(1)
    queued = store.compactions.enqueue("default", "cluster_t", table.partition(1), CompactionType.MAJOR)
    monkeypatch.setenv("ACID_EXECUTOR_ENV", "none")
    monkeypatch.setenv("ACID_EXECUTOR_PYTHON", sys.executable)
    monkeypatch.setenv("ACID_SHIP_DIR", str(tmp_path / "ship"))

    # --master names the cluster; it must win over ACID_SPARK_MASTER (local[2] here), its documented default
    result = run_compact(queued.compaction_id, store.url, tmp_path / "acid-home", "--master", cluster.master,
                         master="local[2]")

    assert result.returncode == 0, result.stderr[-4000:] + cluster.executor_logs()
    assert f"compaction {queued.compaction_id}: compacted" in result.stdout
    entry = store.compactions.get(queued.compaction_id)
    assert entry.state is CompactionState.READY_FOR_CLEANING
    assert "-spark-app-" in entry.worker_id, f"the job did not run on {cluster.master}: worker id {entry.worker_id}"
    assert cluster.completed_apps() == [f"acid-compaction-{queued.compaction_id}"]
    assert (table.location(1) / f"base_{entry.highest_write_id:07d}_v{entry.txn_id:07d}").is_dir()
    assert table.rows(1).equals(before)
    # the code went as a zip (spark.submit.pyFiles), with no environment: the nodes' Python was named instead
    [shipped_zip] = (tmp_path / "ship").glob("acid-code-*.zip")
    assert list(cluster.work_dir.glob(f"app-*/*/{shipped_zip.name}"))
    assert not list(cluster.work_dir.glob("app-*/*/acid_env"))
