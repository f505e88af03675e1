"""`acid compact run COMPACTION_ID`: submit one queued compaction through spark-submit, as the Airflow task does.

The queue entry decides, with the same core rules as the Airflow operator (`acid_core.compaction.attempt`), whether
to start spark-submit at all and what the run did; the driver's own report only adds detail to the message. What
spark-submit gets (job file, arguments, settings, the executors' code and Python, the driver's environment) is built
by `acid_deploy.launch`, as for the Airflow task; here the executors' options come from `ACID_EXECUTOR_ENV`
and its sibling variables (`acid_deploy.shipping`), and the master from `--master`, `ACID_SPARK_MASTER` or local[*].
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from typing import TYPE_CHECKING

from acid_core.errors import AcidError

if TYPE_CHECKING:
    from acid_core.compaction.attempt import Verdict
    from acid_deploy.launch import SparkSubmit


def run(compaction_id: int, *, metastore: str | None = None, master: str | None = None) -> int:
    """Run the compaction and wait; the outcome goes to stdout, an error to stderr (exit status 1).

    Spark's own output (warnings and errors of the driver, the job's lines) goes to stderr as spark-submit prints it.
    """
    from acid_core.compaction.attempt import Result, after_run, before_run
    from acid_core.metastore import Metastore
    from acid_deploy import launch
    from acid_deploy.shipping import options_from_env

    store = Metastore(metastore, pool_size=1)
    try:
        before = before_run(store.compactions.get(compaction_id), compaction_id)
        if before.result is not Result.RUN:  # nothing to do, or nothing that running would mend: no JVM started
            return _finish(before, compaction_id)
        master = master or os.environ.get(launch.MASTER_VARIABLE) or launch.DEFAULT_MASTER
        with _scratch_directory() as scratch:
            result_file = os.path.join(scratch, "result.json")  # the driver's report
            try:
                submission = launch.submission(
                    name=f"{launch.NAME}-{compaction_id}", master=master,
                    arguments=launch.compaction_arguments(compaction_id, result_file=result_file),
                    job_conf=launch.job_conf(store, before.entry),
                    shipped=launch.shipped_conf(master, options_from_env()), metastore_url=metastore)
            except AcidError as exc:
                print(f"acid compact: error: compaction {compaction_id}: {exc}", file=sys.stderr)
                return 1
            reported, launch_error = _submit(submission, result_file)
        after = after_run(store, compaction_id, worker_id=(reported or {}).get("worker_id"), launch_error=launch_error)
        detail = reported["message"] if reported is not None and bool(reported.get("ok")) == after.ok else None
        return _finish(after, compaction_id, detail)
    finally:
        store.close()


SCRATCH_PREFIX = "acid-compact-"
_SCRATCH_NAME = re.compile(re.escape(SCRATCH_PREFIX) + r"([1-9][0-9]*)-[^/]+")


def _scratch_directory() -> tempfile.TemporaryDirectory:
    """This run's scratch directory (the driver writes its report there), `acid-compact-<pid>-...` in the system's
    temporary directory, made after removing those of `acid compact run` processes that are gone."""
    sweep_scratch(tempfile.gettempdir())
    return tempfile.TemporaryDirectory(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-")


def sweep_scratch(root: str) -> list[str]:
    """Remove the scratch directories under `root` whose `acid compact run` process no longer lives (killed with
    SIGKILL, it removed nothing); only this user's directories, never through a symbolic link. Returns the paths
    removed. A directory of a live process, of another user or of another name is left alone."""
    import psutil

    removed: list[str] = []
    try:
        entries = list(os.scandir(root))
    except OSError:
        return removed
    for entry in entries:
        named = _SCRATCH_NAME.fullmatch(entry.name)
        if named is None or psutil.pid_exists(int(named[1])):  # alive (another user's too), or a zombie
            continue
        try:
            if not entry.is_dir(follow_symlinks=False) or entry.stat(follow_symlinks=False).st_uid != os.getuid():
                continue
            shutil.rmtree(entry.path)
        except OSError:
            continue  # removed meanwhile, or not ours to remove
        removed.append(entry.path)
    return removed


def spark_submit(submission: SparkSubmit) -> int:
    """Run `submission` to its end; its exit status. The job's output (with the driver's merged stderr) is
    diagnostics: it goes to our stderr.

    Raises:
        LaunchError: no spark-submit on the PATH it gets.
        OSError: spark-submit could not be started.
    """
    from acid_deploy.launch import find_spark_submit

    environment = submission.process_environment(os.environ)
    return subprocess.run(submission.command(find_spark_submit(environment)), env=environment, check=False,
                          stdout=sys.stderr).returncode


def _submit(submission: SparkSubmit, result_file: str) -> tuple[dict | None, str | None]:
    """spark-submit the job to the end: (the driver's report, None when it wrote none; what went wrong launching or
    running it, None when spark-submit exited 0)."""
    try:
        status = spark_submit(submission)
    except (AcidError, OSError) as exc:
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
