"""A compaction task's log (issue 24, item 6): its start (the Spark application id and UI), progress lines (at least
every ACID_PROGRESS_SECONDS, and as soon as tasks finish, so a job shorter than that shows one too) and an end line
(tasks, events read and written, bytes), and none of the JVM, Spark and pyspark noise it used to carry; real
warnings and a real Spark task failure still show.

Real `dag.test()` runs of `acid_compact` (one spark-submit per compaction) and `acid_worker` (`--batch`) on local
Spark, read as the other Airflow tests read a task's log: what the task printed (dag.test() writes no log file), with
the default progress interval (5 s, longer than these jobs) and without the test set-up's SPARK_LOCAL_IP, so the
driver starts as on an operator's machine.
"""

from __future__ import annotations

import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from support.dag_support import COLUMNS, insert, returned, returned_all, task_states

COMPACT = {"database": "default", "partition": None, "type": "major", "number_of_buckets": None,
           "pyspark_memory": None, "properties": {}, "pool": None, "wait": True}
WORKER = {"max_compactions": 100, "workers": 1, "batch_seconds": 600, "pool_timeout_seconds": 43200}

# The lines a compaction's task log carried before (issue 24: 8 of its 13 lines), each matched anywhere in a line.
NOISE = [
    # the driver JVM: Spark 4's launcher adds --add-modules=jdk.incubator.vector, the JDK warns about incubator modules
    re.compile(r"WARNING: Using incubator modules"),
    # Spark's Utils.findLocalInetAddress on a host whose name resolves to 127.0.0.1 (two lines)
    re.compile(r"WARN Utils: Your hostname, .* resolves to a loopback address"),
    re.compile(r"WARN Utils: Set SPARK_LOCAL_IP if you need to bind to another address"),
    # pyspark 4.3 with pandas 3 (from pyspark.testing.utils, with its full path)
    re.compile(r"FutureWarning: PySpark does not yet fully support pandas"),
    # pyspark's Python workers under spark.executor.pyspark.memory, at every task (each followed by an empty line)
    re.compile(r"Current mem limits: "),
    re.compile(r"Setting mem limits to "),
    # Spark's Utils when another driver on the host holds the UI port (the start line names the port taken instead)
    re.compile(r"WARN Utils: Service 'SparkUI' could not bind on port \d+\. Attempting port \d+\."),
    # Spark's start-up INFO lines (kept out by spark_jobs/log4j2.properties)
    re.compile(r"INFO SparkContext|Running Spark version|Using Spark's default log4j profile"),
]
SIZE = r"\d+(?:\.\d)? (?:B|KiB|MiB|GiB)"
# An empty line of spark-submit's output (those after the mem limits lines; a traceback has some too)
EMPTY = re.compile(r"\[info\s*\]\s+\[airflow\.task\.hooks\.[\w.]*SparkSubmitHook\]")


@pytest.fixture
def operator_machine(monkeypatch):
    """The environment of an operator's worker: no SPARK_LOCAL_IP (tests/dags/conftest.py sets one), the default
    progress interval."""
    monkeypatch.delenv("SPARK_LOCAL_IP", raising=False)
    monkeypatch.delenv("ACID_PROGRESS_SECONDS", raising=False)


@pytest.fixture
def ui_port_taken():
    """Port 4040, Spark's first UI port, held as another driver on this host would (or held by one already)."""
    holder = socket.socket()
    try:
        holder.bind(("0.0.0.0", 4040))
        holder.listen()
    except OSError:
        pass  # taken already
    try:
        yield
    finally:
        holder.close()


def _table(ms, name: str, days: list[str], rows: int = 100) -> None:
    """`default.<name>` partitioned by ds, three deltas of `rows` rows in each day."""
    ms.catalog.create_table("default", name, COLUMNS, params={"transactional": "true"},
                            partition_keys=[("ds", "string")])
    for day in days:
        for batch in range(3):
            insert(ms, name, day, [(batch * rows + i, f"row {i}") for i in range(rows)])


def _noise(output: str, *, empty: bool = True) -> list[str]:
    """The lines of NOISE in `output`; with `empty`, spark-submit's empty lines too (a run without a traceback has
    none)."""
    return [line for line in output.splitlines()
            if any(pattern.search(line) for pattern in NOISE) or (empty and EMPTY.search(line))]


def _line(output: str, pattern: str) -> int:
    """The index of the first line of `output` that `pattern` matches (search); fails naming the pattern."""
    for index, line in enumerate(output.splitlines()):
        if re.search(pattern, line):
            return index
    raise AssertionError(f"no line matches {pattern!r} in:\n{output[-6000:]}")


def _application(ms, compaction_id: int) -> str:
    entry = ms.compactions.get(compaction_id)
    assert re.fullmatch(r"local-\d+/job\d+", entry.hadoop_job_id or ""), entry.hadoop_job_id
    return entry.hadoop_job_id.split("/")[0]


@pytest.mark.airflow
@pytest.mark.spark
def test_a_compaction_task_logs_start_progress_and_end_and_no_noise(acid_connection, make_ms, dagbag, capfd,
                                                                    operator_machine, ui_port_taken):
    ms = make_ms()
    _table(ms, "t", ["d1"])
    capfd.readouterr()

    run = dagbag.get_dag("acid_compact").test(run_conf={**COMPACT, "table": "t", "partition": "ds=d1"})

    assert run.state == "success", task_states(run)
    output = "".join(capfd.readouterr())
    [compaction_id] = returned(run, "enqueue")
    application = _application(ms, compaction_id)
    start = _line(output, rf"compaction {compaction_id}: Spark application {application}, UI http://\S+:40(?!40)\d\d")
    progress = _line(output, rf"progress: compaction {compaction_id}: \d+ s: tasks 1/1 done, \d+ running; "
                             r"300 events read, 300 written")
    outcome = _line(output, rf"compaction {compaction_id}: compacted: major compaction {compaction_id} wrote base_")
    end = _line(output, rf"end: compaction {compaction_id}: compacted in \d+\.\d s: tasks 1/1 done; 300 events "
                        rf"read, 300 written; {SIZE} read, {SIZE} written")
    assert start < progress < outcome < end
    assert _noise(output) == []
    assert returned_all(run, "compact")[0]["state"] == "ready for cleaning"


@pytest.mark.airflow
@pytest.mark.spark
def test_a_batch_logs_each_compaction_and_no_noise(acid_connection, make_ms, dagbag, capfd, operator_machine):
    """Two small partitions share one Spark job of the batch application (SparkRunner.run_group): each still gets
    its start, its progress (its own tasks and events) and its end line."""
    from acid_core.metastore.codes import CompactionType

    ms = make_ms()
    _table(ms, "t", ["d1", "d2"])
    ids = [ms.compactions.enqueue("default", "t", f"ds={day}", CompactionType.MAJOR).compaction_id
           for day in ("d1", "d2")]
    capfd.readouterr()

    run = dagbag.get_dag("acid_worker").test(run_conf=WORKER)

    assert run.state == "success", task_states(run)
    output = "".join(capfd.readouterr())
    application = _application(ms, ids[0])
    batch = _line(output, rf"compaction batch: Spark application {application}, UI http://\S+:\d+")
    for compaction_id in ids:
        start = _line(output, rf"compaction {compaction_id}: major compaction of default\.t partition ds=d\d in "
                              rf"Spark application {application} as worker ")
        progress = _line(output, rf"progress: compaction {compaction_id}: \d+ s: tasks 1/1 done(, \d+ running)?; "
                                 r"300 events read, 300 written( \(one Spark job with compaction \d+: \d+ running\))? ")
        end = _line(output, rf"end: compaction {compaction_id}: compacted in \d+\.\d s: tasks 1/1 done; 300 events "
                            rf"read, 300 written; {SIZE} read, {SIZE} written")
        assert batch < start < progress < end
    assert _noise(output) == []


@pytest.mark.airflow
@pytest.mark.spark
def test_a_failing_spark_task_still_shows_with_its_end_line(acid_connection, make_ms, dagbag, capfd, caplog,
                                                            operator_machine):
    ms = make_ms()
    _table(ms, "t", ["d1"])
    location = Path(ms.catalog.get_table("default", "t").partition_location("ds=d1"))
    [broken, *_] = sorted(location.glob("delta_*/bucket_*"))
    data = broken.read_bytes()  # its first half overwritten: the footer reads (planning goes on), the rows do not
    broken.write_bytes(data[:3] + b"\xff" * (len(data) // 2 - 3) + data[len(data) // 2:])
    capfd.readouterr()

    run = dagbag.get_dag("acid_compact").test(run_conf={**COMPACT, "table": "t", "partition": "ds=d1"})

    assert run.state == "failed", task_states(run)
    output = "".join(capfd.readouterr())
    [compaction_id] = returned(run, "enqueue")
    start = _line(output, rf"compaction {compaction_id}: Spark application local-\d+, UI http")
    lost = _line(output, r"WARN TaskSetManager: Lost task 0\.0 in stage \d+\.0 .*PythonException")  # Spark's own
    failed = _line(output, rf"compaction {compaction_id} failed: ")
    end = _line(output, rf"end: compaction {compaction_id}: failed in \d+\.\d s: tasks 0/1 done; 0 events read, 0 "
                        r"written; nothing committed")
    assert start < lost < failed < end
    assert _noise(output, empty=False) == []
    assert any(record.levelname == "WARNING" and record.getMessage().startswith(  # our own warning, as before
        f"ACID alert compaction_failed (warning): compaction {compaction_id} (major)") for record in caplog.records)


@pytest.mark.airflow
def test_only_the_known_noise_is_left_out_of_the_task_log():
    from acid_plugin.operators import without_known_noise

    lines = ["WARNING: Using incubator modules: jdk.incubator.vector\n",
             "Current mem limits: -1 of max -1\n", "\n",
             "Setting mem limits to 2147483648 of max 2147483648\n", "\n",
             "Current mem limits: 2147483648 of max 2147483648\n", "\n",
             "compaction 1: Spark application local-1, UI http://localhost:4040\n",
             "\n",  # not after a known line: kept
             "WARNING: Using incubator modules: jdk.incubator.foreign\n",  # not the one Spark adds
             "Failed to set memory limit: not allowed\n",
             "26/11/27 14:23:03 WARN TaskSetManager: Lost task 0.0 in stage 0.0 (TID 0)\n",
             "Current mem limits: -1 of max -1 and more\n"]

    assert list(without_known_noise(lines)) == lines[7:]


def test_the_pandas_warning_is_left_out_only_when_pyspark_gives_it():
    """spark_jobs.session's filter names pyspark's modules and its one message: the same words from anywhere else,
    and any other FutureWarning of pyspark's, still show (a fresh interpreter: pytest puts its own filters first)."""
    script = """if True:
        import warnings
        import spark_jobs.session
        text = "PySpark does not yet fully support pandas >= 3.0.0. Some features may not work correctly."
        warnings.warn_explicit(text, FutureWarning, "utils.py", 127, module="pyspark.testing.utils")
        warnings.warn_explicit(text, FutureWarning, "ours.py", 1, module="spark_jobs.ours")
        warnings.warn_explicit("something else", FutureWarning, "utils.py", 2, module="pyspark.sql.utils")
    """
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)

    assert [line for line in result.stderr.splitlines() if "FutureWarning" in line] == [
        "ours.py:1: FutureWarning: PySpark does not yet fully support pandas >= 3.0.0. Some features may not work "
        "correctly.", "utils.py:2: FutureWarning: something else"]


def test_the_empty_lines_of_interleaved_workers_noise_are_left_out_too():
    """Two Python workers starting at once print their memory lines first and their empty lines after."""
    from acid_plugin.operators import without_known_noise

    lines = ["Current mem limits: -1 of max -1\n", "Current mem limits: -1 of max -1\n", "\n", "\n",
             "Setting mem limits to 2147483648 of max 2147483648\n", "\n",
             "compaction 2: 3 tasks\n", "\n"]  # an empty line after a line that says something: kept

    assert list(without_known_noise(lines)) == lines[6:]
