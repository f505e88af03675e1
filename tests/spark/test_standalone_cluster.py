"""`acid compact run ID --master spark://...` on a real Spark standalone cluster: a master and one worker started from
the pyspark installation on 127.0.0.1, so the bucket tasks run in a separate executor JVM, as in production."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from acid_core.metastore.compactions import CompactionState, CompactionType
from compaction_support import AcidTable, kill_session, make_rows, run_compact

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SPARK_CLASS = Path(sys.executable).parent / "spark-class"
LOOPBACK = "127.0.0.1"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((LOOPBACK, 0))
        return probe.getsockname()[1]


def master_status(web_port: int) -> dict:
    """The standalone master's JSON status page (loopback only, never through a proxy)."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(f"http://{LOOPBACK}:{web_port}/json/", timeout=5) as response:
        return json.load(response)


def wait_for(condition, *, timeout: float, what: str, logs: list[Path]):
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = condition()
        except (OSError, ValueError):  # not listening yet, or the web UI still starting (no JSON yet)
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            tails = "\n".join(f"--- {log}:\n{log.read_text()[-3000:]}" for log in logs if log.exists())
            raise AssertionError(f"{what} within {timeout} s\n{tails}")
        time.sleep(0.25)


@pytest.fixture
def standalone_cluster(tmp_path):
    """A master and one worker (1 core, 1 GiB) on loopback; both stopped, with everything they started, afterwards."""
    master_port, master_web, worker_web = free_port(), free_port(), free_port()
    environment = dict(os.environ, SPARK_LOCAL_IP=LOOPBACK, SPARK_LOG_DIR=str(tmp_path / "spark-logs"),
                       SPARK_WORKER_DIR=str(tmp_path / "spark-work"), PYSPARK_PYTHON=sys.executable)
    commands = {
        "master": [str(SPARK_CLASS), "org.apache.spark.deploy.master.Master", "--host", LOOPBACK,
                   "--port", str(master_port), "--webui-port", str(master_web)],
        "worker": [str(SPARK_CLASS), "org.apache.spark.deploy.worker.Worker", f"spark://{LOOPBACK}:{master_port}",
                   "--host", LOOPBACK, "--cores", "1", "--memory", "1g", "--webui-port", str(worker_web),
                   "--work-dir", str(tmp_path / "spark-work")],
    }
    processes: list[subprocess.Popen] = []
    logs = [tmp_path / f"{name}.log" for name in commands]

    def stop() -> None:
        for process in processes:
            try:
                os.killpg(process.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for process in processes:
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                pass
            kill_session(process.pid)  # the worker's executors and their Python workers too
            process.wait()

    try:
        for (name, command), log in zip(commands.items(), logs):
            with open(log, "w") as output:
                processes.append(subprocess.Popen(command, env=environment, stdout=output, stderr=subprocess.STDOUT,
                                                  stdin=subprocess.DEVNULL, start_new_session=True))
            if name == "master":
                wait_for(lambda: master_status(master_web).get("status") == "ALIVE", timeout=90,
                         what="the standalone master did not come up", logs=logs)
        wait_for(lambda: [w for w in master_status(master_web)["workers"] if w["state"] == "ALIVE"], timeout=90,
                 what="the worker did not register with the master", logs=logs)
        yield f"spark://{LOOPBACK}:{master_port}", master_web, logs
    finally:
        stop()


def test_compaction_runs_on_a_standalone_cluster(standalone_cluster, store, tmp_path):
    master, master_web, logs = standalone_cluster
    table = AcidTable.create(store, "cluster_t")
    table.insert(1, make_rows(0, 20_000))
    table.insert(1, make_rows(20_000, 5_000))
    table.delete(1, table.row_ids(1)[::3])
    before = table.rows(1)
    queued = store.compactions.enqueue("default", "cluster_t", table.partition(1), CompactionType.MAJOR)

    # --master names the cluster; it must win over ACID_SPARK_MASTER (local[2] here), its documented default
    result = run_compact(queued.compaction_id, store.url, tmp_path / "acid-home", "--master", master,
                         master="local[2]")

    work_logs = sorted((tmp_path / "spark-work").rglob("std*"))
    assert result.returncode == 0, result.stderr[-4000:] + "".join(p.read_text()[-2000:] for p in work_logs)
    assert f"compaction {queued.compaction_id}: compacted" in result.stdout
    entry = store.compactions.get(queued.compaction_id)
    assert entry.state is CompactionState.READY_FOR_CLEANING
    assert "-spark-app-" in entry.worker_id, f"the job did not run on {master}: worker id {entry.worker_id}"
    completed = [app["name"] for app in master_status(master_web)["completedapps"]]
    assert completed == [f"acid-compaction-{queued.compaction_id}"]
    assert (table.location(1) / f"base_{entry.highest_write_id:07d}_v{entry.txn_id:07d}").is_dir()
    assert table.rows(1).equals(before)
