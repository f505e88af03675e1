"""`acid compact run COMPACTION_ID`: submit one queued compaction through spark-submit, as the Airflow task does.

The queue entry decides, with the same core rules as the Airflow operator (`acid_core.compaction.attempt`), whether
to start spark-submit at all and what the run did; the driver's own report only adds detail to the message. The driver
runs here (client mode) on this interpreter; on a cluster master the executors get the code and a Python environment
from `acid_core.shipping`, as `ACID_EXECUTOR_ENV` and its sibling variables choose, never this interpreter's path.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from acid_core.errors import AcidError, UsageError

if TYPE_CHECKING:
    from acid_core.compaction.attempt import Verdict

COMPACT_JOB = Path(__file__).resolve().parent.parent / "spark_jobs" / "compact.py"


def spark_submit_command(compaction_id: int, *, metastore: str | None = None, master: str | None = None,
                         spark_conf: dict[str, str] | None = None) -> list[str]:
    """The spark-submit command line for one compaction (the Airflow operator builds the same one)."""
    submit = shutil.which("spark-submit", path=str(Path(sys.executable).parent)) or shutil.which("spark-submit")
    if submit is None:
        raise UsageError("spark-submit was not found: install pyspark (requirements.txt) or put Spark's bin on PATH")
    command = [submit, "--master", master or os.environ.get("ACID_SPARK_MASTER", "local[*]"),
               "--name", f"acid-compaction-{compaction_id}"]
    for key, value in sorted((spark_conf or {}).items()):
        command += ["--conf", f"{key}={value}"]
    command += [str(COMPACT_JOB), "--compaction-id", str(compaction_id)]
    if metastore:
        command += ["--metastore", metastore]
    return command


def run(compaction_id: int, *, metastore: str | None = None, master: str | None = None) -> int:
    """Run the compaction and wait; the outcome goes to stdout, an error to stderr (exit status 1).

    Spark's own log stays on the terminal as spark-submit prints it.
    """
    from acid_core.compaction.attempt import Result, after_run, before_run
    from acid_core.compaction.job_conf import compaction_spark_conf
    from acid_core.metastore import Metastore
    from acid_core.shipping import combine_conf, executor_conf, options_from_env

    store = Metastore(metastore, pool_size=1)
    try:
        before = before_run(store.compactions.get(compaction_id), compaction_id)
        if before.result is not Result.RUN:  # nothing to do, or nothing that running would mend: no JVM started
            return _finish(before, compaction_id)
        try:  # the job's Spark settings: the request's compactor.spark.* properties, the table's, the database's
            table = store.catalog.get_table(before.entry.database, before.entry.table)
            database = store.catalog.get_database(before.entry.database)
            job_conf = compaction_spark_conf(table.params, before.entry.properties, database_params=database.params)
            master = master or os.environ.get("ACID_SPARK_MASTER") or "local[*]"
            shipped = executor_conf(master, options_from_env())  # {} on local masters: this interpreter, as before
        except AcidError as exc:
            print(f"acid compact: error: compaction {compaction_id}: {exc}", file=sys.stderr)
            return 1
        reported, launch_error = _submit(compaction_id, metastore=metastore, master=master,
                                         spark_conf=combine_conf(job_conf, shipped),
                                         executor_python=shipped.get("spark.pyspark.python"))
        after = after_run(store, compaction_id, worker_id=(reported or {}).get("worker_id"), launch_error=launch_error)
        detail = reported["message"] if reported is not None and bool(reported.get("ok")) == after.ok else None
        return _finish(after, compaction_id, detail)
    finally:
        store.close()


def _submit(compaction_id: int, *, metastore: str | None, master: str, spark_conf: dict[str, str],
            executor_python: str | None = None) -> tuple[dict | None, str | None]:
    """spark-submit the job to the end: (the driver's report, None when it wrote none; what went wrong launching or
    running it, None when spark-submit exited 0). `executor_python` (a cluster's executors' Python) replaces any
    PYSPARK_PYTHON of this environment, which spark-submit would otherwise give the executors."""
    environment = dict(os.environ)
    if executor_python is not None:
        environment["PYSPARK_PYTHON"] = executor_python
        environment["PYSPARK_DRIVER_PYTHON"] = sys.executable
    environment.setdefault("PYSPARK_PYTHON", sys.executable)
    environment.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    environment.pop("ACID_SPARK_MASTER", None)  # spark-submit's --master decides; the job must not override it
    if metastore:  # through the environment, its password apart: never on spark-submit's command line
        from acid_core.metastore.engine import driver_environment

        environment.update(driver_environment(metastore))
        metastore = None
    with tempfile.TemporaryDirectory(prefix="acid-compact-") as scratch:
        result_file = os.path.join(scratch, "result.json")
        try:
            command = spark_submit_command(compaction_id, metastore=metastore, master=master, spark_conf=spark_conf)
            # the job's own output (with the driver's merged stderr) is diagnostics: it goes to our stderr
            status = subprocess.run(command + ["--result-file", result_file], env=environment, check=False,
                                    stdout=sys.stderr).returncode
        except (UsageError, OSError) as exc:
            return None, f"cannot start spark-submit: {exc}"
        try:
            with open(result_file, encoding="utf-8") as handle:
                reported = json.load(handle)
        except (OSError, ValueError):
            reported = None  # killed, or Spark failed to start: the queue entry says what happened
        return reported, None if status == 0 else f"exit status {status}"


def _finish(verdict: Verdict, compaction_id: int, detail: str | None = None) -> int:
    """Print a verdict (the driver's `detail` instead of its message when there is one); the exit status."""
    if verdict.warning:
        print(f"acid compact: warning: {verdict.warning}", file=sys.stderr)
    if verdict.ok:
        print(detail or f"compaction {compaction_id}: {verdict.result.value}: {verdict.message}")
        return 0
    print(f"acid compact: error: {detail or verdict.message}", file=sys.stderr)
    return 1
