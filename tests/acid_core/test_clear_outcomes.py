"""Clear outcomes without Airflow (issue 14): a failed compaction's queue error is its cause in one line, an unknown
partition's refusal lists the partitions that exist, a manual request without a partition queues every partition
that needs one, and `make run`'s logs are capped. The Airflow side: tests/dags/test_outcomes.py."""

from __future__ import annotations

import io
import time
from pathlib import Path

import pytest

from acid_cli.sql import StatementError, run_script
from acid_core.compaction.attempt import after_run
from acid_core.compaction.requests import listed, partitions_to_compact, require_partition
from acid_core.compaction.worker import CompactionWorker
from acid_core.errors import CorruptFileError, NoSuchObjectError, one_line, one_line_cause
from acid_core.metastore import Metastore
from acid_core.metastore.codes import CompactionState, CompactionType
from acid_platform.processes import copy_capped, rotate_log, start_child

ACID = "STORED AS ORC TBLPROPERTIES ('transactional'='true')"
# what a Spark task's Python error looks like on the driver: a Py4JJavaError holding Spark's and Python's traces
PY4J_TEXT = """An error occurred while calling o71.collectToPython.
: org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 1.0 failed 1 times, most recent \
failure: Lost task 0.0 in stage 1.0 (TID 1) (localhost executor driver): org.apache.spark.api.python.PythonException: \
Traceback (most recent call last):
  File "/venv/lib/python3.11/site-packages/pyspark/worker.py", line 1247, in main
    process()
  File "/work/acid_core/compaction/execute.py", line 88, in run_bucket
    raise CorruptFileError(f"cannot read {path}: not an ORC file")
acid_core.errors.CorruptFileError: cannot read /wh/t/delta_0000002_0000002/bucket_00000: not an ORC file

\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.handlePythonException(PythonRunner.scala:572)
\tat org.apache.spark.scheduler.Task.run(Task.scala:141)
\tat java.base/java.lang.Thread.run(Thread.java:840)

Driver stacktrace:
\tat org.apache.spark.scheduler.DAGScheduler.failJobAndIndependentStages(DAGScheduler.scala:2856)
\tat java.base/java.lang.Thread.run(Thread.java:840)
"""
CAUSE = "CorruptFileError: cannot read /wh/t/delta_0000002_0000002/bucket_00000: not an ORC file"


class Py4JJavaError(Exception):
    """Stands for py4j.protocol.Py4JJavaError, whose str() is the whole Java and Python trace."""


@pytest.fixture
def metastore(metastore_url, tmp_path):
    store = Metastore(metastore_url, warehouse=str(tmp_path / "wh"))
    store.init()
    yield store
    store.close()


def sql(metastore: Metastore, text: str) -> str:
    out = io.StringIO()
    assert run_script(text, metastore=metastore, out=out) == 0
    return out.getvalue()


# --- one-line causes -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("error, expected", [
    (Py4JJavaError(PY4J_TEXT), CAUSE),
    (CorruptFileError("cannot read x: not an ORC file"), "CorruptFileError: cannot read x: not an ORC file"),
    (ValueError("bad\n  value"), "ValueError: bad value"),  # no error line inside: the whole text, one line
    (KeyError("k"), "KeyError: 'k'"),
    (RuntimeError(), "RuntimeError"),
])
def test_an_errors_cause_is_one_line(error, expected):
    assert one_line_cause(error) == expected


def test_one_line_keeps_the_innermost_python_error_and_caps_the_length():
    traceback_text = ("Traceback (most recent call last):\n  File \"x.py\", line 3, in f\n    open(p)\n"
                      "FileNotFoundError: [Errno 2] No such file or directory: '/wh/t'\n\nDuring handling of the above "
                      "exception, another exception occurred:\n\nTraceback (most recent call last):\n"
                      "acid_core.errors.FileSystemError: cannot list /wh/t: [Errno 2] No such file or directory\n")
    assert one_line(traceback_text) == "FileSystemError: cannot list /wh/t: [Errno 2] No such file or directory"
    assert one_line(None) is None and one_line("  plain  text ") == "plain text"
    long = one_line("x" * 5000)
    assert len(long) == 1000 and long.endswith("...")


def test_a_failed_compaction_records_its_cause_in_one_line(metastore):
    sql(metastore, f"CREATE TABLE t (a int) {ACID}; INSERT INTO t VALUES (1); INSERT INTO t VALUES (2)")
    compaction_id = metastore.compactions.enqueue("default", "t", None, CompactionType.MAJOR).compaction_id

    def spark_task_failed(plan):
        raise Py4JJavaError(PY4J_TEXT)

    with pytest.raises(Py4JJavaError):  # the caller (the driver) still gets the whole error for its log
        CompactionWorker(metastore, runner=spark_task_failed).run(compaction_id)

    entry = metastore.compactions.get(compaction_id)
    assert entry.state is CompactionState.FAILED and entry.error_message == CAUSE
    shown = sql(metastore, "SHOW COMPACTIONS").splitlines()
    assert len(shown) == 3 and shown[2].count(CAUSE) == 1  # header, rule, one line for the row


def test_a_launch_error_is_recorded_in_one_line(metastore):
    sql(metastore, f"CREATE TABLE t (a int) {ACID}")
    compaction_id = metastore.compactions.enqueue("default", "t", None, CompactionType.MAJOR).compaction_id

    verdict = after_run(metastore, compaction_id, worker_id="host-airflow.t", launch_error=(
        "Cannot execute: spark-submit --master local[2] compact.py\nTraceback (most recent call last):\n"
        "  File \"spark.py\", line 1\nFileNotFoundError: [Errno 2] No such file or directory: 'spark3-submit'"))

    message = metastore.compactions.get(compaction_id).error_message
    assert message == ("spark-submit did not start the compaction: FileNotFoundError: [Errno 2] No such file or "
                       "directory: 'spark3-submit'")
    assert "\n" not in verdict.message


# --- manual requests -------------------------------------------------------------------------------------------------
def test_an_unknown_partition_is_refused_listing_the_partitions_bounded(metastore):
    days = [f"2026-01-{day:02d}" for day in range(1, 26)]
    sql(metastore, f"CREATE TABLE p (a int) PARTITIONED BY (ds string) {ACID}; "
        + "; ".join(f"INSERT INTO p PARTITION (ds='{day}') VALUES (1)" for day in days))
    table = metastore.catalog.get_table("default", "p")

    with pytest.raises(NoSuchObjectError) as refused:
        require_partition(metastore, table, "ds=2099-01-01")

    message = str(refused.value)
    assert "\n" not in message and message.startswith("table default.p has no partition 'ds=2099-01-01'; its "
                                                      "partitions: ds=2026-01-01, ds=2026-01-02, ")
    assert message.endswith("ds=2026-01-20 and 5 more")
    assert require_partition(metastore, table, "ds=2026-01-25")[-1] == "ds=2026-01-25"
    assert listed([]) == "none" and listed(["a", "b"], limit=1) == "a and 1 more"
    with pytest.raises(StatementError, match="its partitions: ds=2026-01-01"):  # ALTER TABLE says the same
        sql(metastore, "ALTER TABLE p PARTITION (ds='2099-01-01') COMPACT 'major'")


def test_a_request_without_a_partition_names_the_partitions_that_need_compaction(metastore):
    sql(metastore, f"CREATE TABLE p (a int) PARTITIONED BY (ds string) {ACID}; "
                   "INSERT INTO p PARTITION (ds='a') VALUES (1); INSERT INTO p PARTITION (ds='a') VALUES (2); "
                   "INSERT INTO p PARTITION (ds='b') VALUES (3); INSERT INTO p PARTITION (ds='c') VALUES (4); "
                   "INSERT INTO p PARTITION (ds='c') VALUES (5)")
    assert partitions_to_compact(metastore, metastore.catalog.get_table("default", "p")) == ["ds=a", "ds=c"]
    assert sql(metastore, "ALTER TABLE p COMPACT 'major'").splitlines() == [
        "Compaction enqueued with id 1 (ds=a)", "Compaction enqueued with id 2 (ds=c)"]


# --- make run's logs -------------------------------------------------------------------------------------------------
def test_a_childs_log_is_rotated_at_its_cap_keeping_two_generations(tmp_path):
    log = tmp_path / "airflow-standalone.log"
    source = io.BytesIO(b"".join(f"line {i:05d}\n".encode() for i in range(5000)))  # 55,000 bytes

    copy_capped(io.BufferedReader(source, buffer_size=1000), log, max_bytes=10_000, backups=2)

    sizes = [path.stat().st_size for path in (log, log.with_name(log.name + ".1"), log.with_name(log.name + ".2"))]
    assert all(0 < size <= 10_000 for size in sizes)
    assert not log.with_name(log.name + ".3").exists()  # the oldest went
    assert log.read_text().splitlines()[-1] == "line 04999"
    newest_rotated = log.with_name(log.name + ".1").read_text().splitlines()[-1]
    assert int(log.read_text().split()[1]) == int(newest_rotated.split()[1]) + 1  # nothing lost between files

    rotate_log(log, backups=2)  # a new run starts a new log
    assert not log.exists() and log.with_name(log.name + ".1").stat().st_size == sizes[0]


def test_a_started_child_writes_its_output_through_the_cap(tmp_path):
    import signal
    import sys

    log = tmp_path / "writer.log"
    child = start_child("writer", [sys.executable, "-c", "import sys\nfor i in range(3000): print('x' * 99)"],
                        env={"PATH": "/usr/bin:/bin"}, log=log, stop_signal=signal.SIGTERM, cwd=tmp_path,
                        max_bytes=100_000, backups=1)
    child.process.wait(timeout=60)
    child.copier.join(timeout=10)
    deadline = time.monotonic() + 10
    while child.copier.is_alive() and time.monotonic() < deadline:
        time.sleep(0.05)

    rotated = Path(f"{log}.1")
    assert log.stat().st_size <= 100_000 and rotated.stat().st_size <= 100_000
    assert not Path(f"{log}.2").exists()
    assert log.read_text().splitlines()[-1] == "x" * 99
