"""`AcidCompactionOperator`: run one queued compaction with the apache-spark provider's SparkSubmitOperator.

The Spark application is `spark_jobs/compact.py`; the driver follows Hive's worker protocol and records the outcome
in the compaction queue, which is what this operator reports: `ready for cleaning` (or `refused`, or already
finished) succeeds, `failed` fails the task with the queue's error message. The metastore URL reaches the driver
through its environment (never on the command line, which spark-submit and Airflow log), so client deploy mode is
assumed: the driver runs where the task runs, like Hive's worker thread.
"""

from __future__ import annotations

import os
import re
import socket
import sys
from typing import Any, Sequence

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk.exceptions import AirflowException, AirflowFailException, AirflowSkipException

COMPACTION_POOL = "acid_compaction"  # the Airflow pool; its slots are hive.compactor.worker.threads


def compact_job_path() -> str:
    """Absolute path of spark_jobs/compact.py (found without importing pyspark)."""
    import importlib.util

    spec = importlib.util.find_spec("spark_jobs")
    if spec is None or not spec.submodule_search_locations:
        raise AirflowFailException("the spark_jobs package is not importable: install this project (pip install -e .)")
    return os.path.join(list(spec.submodule_search_locations)[0], "compact.py")


class AcidCompactionOperator(SparkSubmitOperator):
    """Runs compaction `compaction_id` of the `acid_metastore` connection's queue as a spark-submit job.

    Returns `{"compaction_id", "table", "partition", "type", "state", "message"}`. An entry that another worker
    holds is skipped; one that already finished is reported without running anything. Mapped instances can be
    labelled in the UI with `map_index_template="{{ acid_compaction }}"` ("4: major db.table partition ds=1").
    """

    template_fields: Sequence[str] = (*SparkSubmitOperator.template_fields, "compaction_id")
    ui_color = "#f4a460"

    def __init__(self, *, compaction_id: int | str, acid_metastore_conn_id: str = "acid_metastore",
                 conn_id: str = "spark_default", **kwargs: Any) -> None:
        kwargs.setdefault("name", "acid-compaction")
        super().__init__(conn_id=conn_id, **kwargs)
        self.compaction_id = compaction_id
        self.acid_metastore_conn_id = acid_metastore_conn_id

    def execute(self, context) -> dict:
        from acid_core.metastore.compactions import CompactionState
        from acid_plugin.hooks import AcidMetastoreHook

        compaction_id = int(self.compaction_id)
        metastore_hook = AcidMetastoreHook(self.acid_metastore_conn_id)
        before = self._entry(metastore_hook, compaction_id)
        context["acid_compaction"] = f"{compaction_id}: {before.type.display.lower()} {_where(before)}"  # map label
        if before.state in (CompactionState.READY_FOR_CLEANING, CompactionState.SUCCEEDED, CompactionState.REFUSED):
            self.log.info("compaction %d is %s already; nothing to run", compaction_id, before.state.display)
            return _summary(before, "already finished")
        if before.state is CompactionState.WORKING:
            raise AirflowSkipException(f"compaction {compaction_id} is working on {before.worker_id}; not run twice")
        if before.state is not CompactionState.INITIATED:
            raise AirflowFailException(f"compaction {compaction_id} of {_where(before)} is {before.state.display}: "
                                       f"{before.error_message or 'only an initiated compaction can run'}")

        worker_id = _worker_id(context, compaction_id)
        self.name = f"acid-compaction-{compaction_id}"
        self.application = self.application or compact_job_path()
        self.application_args = ["--compaction-id", str(compaction_id), "--worker-id", worker_id]
        python_bin = os.path.dirname(sys.executable)
        self.env_vars = {
            "ACID_METASTORE_URL": metastore_hook.get_url(),
            "ACID_WAREHOUSE": metastore_hook.get_warehouse(),
            "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable,
            "PATH": os.pathsep.join([python_bin, os.environ.get("PATH", "")]),
            **(self.env_vars or {}),
        }
        self.log.info("compaction %d: %s %s of %s as worker %s", compaction_id, before.type.display,
                      "compaction", _where(before), worker_id)
        submit_error: AirflowException | None = None
        try:
            super().execute(context)
        except (AirflowException, OSError) as exc:  # the queue entry says what happened; the exit status does not
            submit_error = exc
        finally:
            self._close_submit_pipe()
        after = self._entry(metastore_hook, compaction_id)
        if after.state is CompactionState.INITIATED:
            after = self._record_failed_start(metastore_hook, compaction_id, worker_id, submit_error)
        if after.state in (CompactionState.READY_FOR_CLEANING, CompactionState.SUCCEEDED):
            if submit_error is not None:
                self.log.warning("spark-submit reported an error after the compaction committed: %s", submit_error)
            self.log.info("compaction %d of %s: %s", compaction_id, _where(after), after.state.display)
            return _summary(after, "compacted")
        if after.state is CompactionState.REFUSED:
            self.log.info("compaction %d of %s refused: %s", compaction_id, _where(after), after.error_message)
            return _summary(after, after.error_message or "refused")
        if after.state is CompactionState.FAILED:
            raise AirflowFailException(f"compaction {compaction_id} of {_where(after)} failed: {after.error_message}")
        if after.worker_id != worker_id:
            raise AirflowSkipException(f"compaction {compaction_id} was claimed by {after.worker_id} first")
        raise AirflowException(
            f"compaction {compaction_id} of {_where(after)} is still {after.state.display} after spark-submit ended "
            f"({submit_error or 'exit status 0'}): the driver was killed. acid_housekeeping puts it back to "
            "initiated after worker_timeout_seconds and the next acid_initiator run retries it")

    def _record_failed_start(self, hook, compaction_id: int, worker_id: str, error: BaseException | None):
        """spark-submit ended before its driver claimed the entry (no binary, no master, bad configuration): record
        the failure in the queue, as Hive's worker does, so SHOW COMPACTIONS shows it and the initiator's
        failed.compacts.threshold counts it. Compare-and-swap: an entry someone else claimed meanwhile is left alone."""
        from acid_core.errors import CompactionStateError

        message = f"spark-submit did not start the compaction: {error or 'exit status 0 without claiming it'}"
        with hook.metastore() as metastore:
            try:
                metastore.compactions.claim(worker_id=worker_id, compaction_id=compaction_id)
                metastore.compactions.mark_failed(compaction_id, message[:4000])
            except CompactionStateError:
                pass
            return metastore.compactions.get(compaction_id)

    def _close_submit_pipe(self) -> None:
        """The provider's hook reads spark-submit's output to the end but leaves the pipe open."""
        process = getattr(self._hook, "_submit_sp", None) if self._hook is not None else None
        if process is not None and process.stdout is not None and not process.stdout.closed:
            process.stdout.close()

    def _entry(self, hook, compaction_id: int):
        with hook.metastore() as metastore:
            entry = metastore.compactions.get(compaction_id)
        if entry is None:
            raise AirflowFailException(f"compaction {compaction_id} does not exist in the metastore of connection "
                                       f"{self.acid_metastore_conn_id!r}")
        return entry


def _where(entry) -> str:
    name = f"{entry.database}.{entry.table}"
    return f"{name} partition {entry.partition}" if entry.partition else name


def _summary(entry, message: str) -> dict:
    return {"compaction_id": entry.id, "table": f"{entry.database}.{entry.table}", "partition": entry.partition,
            "type": entry.type.display, "state": entry.state.display, "message": message}


def _worker_id(context, compaction_id: int) -> str:
    """`<host>-airflow.<dag>.<task>[<map index>].try<n>`: which task attempt holds the compaction. SHOW COMPACTIONS
    splits a worker id at its last "-" into host and worker (Hive's `host-threadId`), so the task part has none."""
    ti = context["ti"]
    index = f"[{ti.map_index}]" if getattr(ti, "map_index", -1) >= 0 else ""
    task = re.sub(r"[^A-Za-z0-9_.\[\]]", "_", f"airflow.{ti.dag_id}.{ti.task_id}{index}.try{ti.try_number}")
    return f"{socket.gethostname()}-{task}"[:128]
