"""A Spark write killed (SIGKILL, driver and executors) after its tasks staged their files leaves hidden staging in the
partitions it wrote; housekeeping removes it once the transaction times out, and readers never saw any of it."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from support.compaction_support import ROOT, compact_environment
from support.processes import kill_session

from acid_core.format.layout import parse_write_staging_name
from acid_core.metastore import Metastore
from acid_core.operations.housekeeping import housekeep
from acid_core.read.merge import read_snapshot

pytestmark = pytest.mark.spark

# The child is a real Spark application; its driver SIGKILLs itself (and so loses its executors) once every task has
# written its staged files and the driver is about to publish them.
CHILD = textwrap.dedent("""
    import os, signal, sys
    from acid_core.metastore import Metastore
    from spark_jobs import write
    from spark_jobs.session import build_session

    store = Metastore(sys.argv[1], warehouse=sys.argv[2])
    spark = build_session("killed-write", master="local[2]")
    write._record = lambda txn, operations: os.kill(os.getpid(), signal.SIGKILL)  # before the commit publishes
    rows = [(i, f"n{i}", f"2026-01-0{1 + i % 2}") for i in range(40)]
    write.insert(store, "default", "parts", spark.createDataFrame(rows, "id bigint, name string, ds string")
                 .repartition(2))
""")


def _hidden(path: Path) -> list[Path]:
    return sorted(p for p in path.rglob(".*") if p.is_dir())


def test_a_killed_spark_write_leaves_staging_that_housekeeping_removes(tmp_path):
    url, warehouse = f"sqlite:///{tmp_path}/metastore.db", str(tmp_path / "warehouse")
    store = Metastore(url, warehouse=warehouse, txn_timeout_ms=1)
    store.init()
    table = store.catalog.create_table("default", "parts", [("id", "bigint"), ("name", "string")],
                                       partition_keys=[("ds", "string")], params={"transactional": "true"})
    process = subprocess.Popen([sys.executable, "-c", CHILD, url, warehouse], cwd=ROOT, text=True,
                               env=compact_environment(tmp_path / "home"), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, start_new_session=True)
    try:
        _, stderr = process.communicate(timeout=300)
    finally:
        kill_session(process.pid)
    assert process.returncode == -9, stderr[-3000:]

    root = Path(table.location)
    staging = _hidden(root)
    (txn,) = [info for info in store.txns.show_transactions()]
    assert txn.state == "o" and len(staging) == 2  # one staging directory in each partition written, nothing else
    assert {p.parent.name for p in staging} == {"ds=2026-01-01", "ds=2026-01-02"}
    assert all(parse_write_staging_name(p.name).txn_id == txn.txn_id for p in staging)
    assert not any(p.name.startswith("delta_") for p in root.rglob("*"))
    assert store.catalog.list_partitions("default", "parts") == []

    time.sleep(0.05)  # past the 1 ms hive.txn.timeout
    report = housekeep(store)
    assert report.timed_out_txns == (txn.txn_id,) and report.problems == ()
    assert sorted(report.removed_staging) == sorted(str(p) for p in staging) and _hidden(root) == []
    assert housekeep(store).removed_staging == ()
    snapshot = store.txns.snapshot([table.full_name])
    for partition in root.iterdir():
        assert read_snapshot(str(partition), write_ids=snapshot.write_ids[table.full_name],
                             txns=snapshot.txns).num_rows == 0
    store.close()
