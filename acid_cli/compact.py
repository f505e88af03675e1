"""`acid compact run COMPACTION_ID`: submit one queued compaction through spark-submit, as the Airflow task does."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from acid_core.errors import AcidError, UsageError

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
    """Run the compaction and wait; returns spark-submit's exit status (the job prints the outcome or the error)."""
    environment = dict(os.environ)
    environment.setdefault("PYSPARK_PYTHON", sys.executable)
    environment.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    command = spark_submit_command(compaction_id, metastore=metastore, master=master)
    try:
        return subprocess.run(command, env=environment, check=False).returncode
    except OSError as exc:
        raise AcidError(f"cannot start spark-submit for compaction {compaction_id}: {exc}") from exc
