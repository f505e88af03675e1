"""`acid compact run COMPACTION_ID`: submit one queued compaction through spark-submit, as the Airflow task does."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
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
    """Run the compaction and wait; the outcome goes to stdout, an error to stderr (exit status 1).

    Spark's own log stays on the terminal as spark-submit prints it.
    """
    environment = dict(os.environ)
    environment.setdefault("PYSPARK_PYTHON", sys.executable)
    environment.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    master = master or environment.get("ACID_SPARK_MASTER") or "local[*]"
    environment.pop("ACID_SPARK_MASTER", None)  # spark-submit's --master decides; the job must not override it
    with tempfile.TemporaryDirectory(prefix="acid-compact-") as scratch:
        result_file = os.path.join(scratch, "result.json")
        command = spark_submit_command(compaction_id, metastore=metastore, master=master) + ["--result-file", result_file]
        try:
            # the job's own output (with the driver's merged stderr) is diagnostics: it goes to our stderr
            status = subprocess.run(command, env=environment, check=False, stdout=sys.stderr).returncode
        except OSError as exc:
            raise AcidError(f"cannot start spark-submit for compaction {compaction_id}: {exc}") from exc
        try:
            with open(result_file, encoding="utf-8") as handle:
                result = json.load(handle)
        except (OSError, ValueError):
            raise AcidError(f"compaction {compaction_id}: spark-submit exited with status {status} without reporting an "
                            "outcome (killed, or Spark failed to start); the queue entry says what happened") from None
    if result["ok"]:
        print(result["message"])
        return 0
    print(f"acid compact: error: {result['message']}", file=sys.stderr)
    return 1
