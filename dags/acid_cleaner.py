"""acid_cleaner: Hive's Cleaner on a schedule — remove what finished compactions made obsolete.

No work at import time: acid_core and the hook are imported inside the task.
"""

from __future__ import annotations

from acid_plugin.assets import COMPACTED
from acid_plugin.params import ABSOLUTE_PATH, schedule_interval, setting_params
from airflow.sdk import AssetOrTimeSchedule, DeltaTriggerTimetable, Param, dag, task

from acid_core import settings

# The registry's settings this DAG takes as Params: checked in the task (the trigger form would clamp a number to a
# schema range without a word).
SETTINGS = settings.for_dag("acid_cleaner")
TRASH_DIR_EXPECTED = "expected an absolute path or a filesystem URI (s3://bucket/trash) with no '..' and no spaces"

DOC_MD = """
### ACID cleaner

Runs one cycle of Hive's Cleaner (`acid_core.compaction.cleaner.clean`) against the metastore of the
`acid_metastore` connection.

**What it deletes.** For each compaction in state `ready for cleaning` whose inputs no open snapshot can still read,
the base and delta directories the compaction made obsolete, and directories written by aborted transactions up to
the compaction's highest write id. Then it verifies nothing obsolete remains and marks the compaction `succeeded`.

**Safety rules.**
- `dry_run` (default false) lists what would be removed and changes nothing: no files, no queue states.
- `retention_seconds` waits that long after a compaction committed before removing its inputs
  (`hive.compactor.cleaner.retention.time.seconds` with delayed cleanup).
- `trash_dir` moves removed directories under `<trash_dir>/<run id>/...` on the same filesystem instead of deleting.
- Never touches a path outside the table's location, never follows a symbolic link, and refuses tables with
  `no_cleanup`='true'. Deleting is idempotent: a crashed run is finished by the next one.
- A cleaning that fails (the error is logged and kept in the queue entry) is retried after
  2^attempts x `retry_retention_seconds`, and marked `failed` when it still fails after `max_attempts` retries.

**When it runs.** After every compaction task that emits the `acid_compacted` asset (from `acid_worker` or
`acid_compact`), and on a timer, `ACID_CLEANER_INTERVAL_SECONDS` (default 300), for entries that had to wait for an
open transaction, a reader lease or the retention time. Hive's Cleaner polls every 5 s
(`hive.compactor.cleaner.run.interval`).
"""


@dag(
    dag_id="acid_cleaner",
    description="Hive's Cleaner: remove what finished compactions made obsolete, once no reader needs it",
    schedule=AssetOrTimeSchedule(
        timetable=DeltaTriggerTimetable(schedule_interval(settings.CLEANER_INTERVAL)), assets=[COMPACTED]),
    catchup=False,
    max_active_runs=1,
    tags=["acid", "maintenance"],
    doc_md=DOC_MD,
    params={
        "dry_run": Param(False, type="boolean", description="List what would be removed; change nothing."),
        **setting_params(SETTINGS),
    },
)
def acid_cleaner():
    @task
    def clean_compactions(params=None) -> list[dict]:
        """One cleaner cycle; returns one dict per queue entry handled."""
        import dataclasses
        import logging
        import re

        from acid_plugin.hooks import AcidMetastoreHook
        from acid_plugin.metrics import emit_cleaning
        from acid_plugin.params import check_setting_params
        from airflow.sdk.exceptions import AirflowFailException

        from acid_core.compaction.cleaner import clean

        log = logging.getLogger("airflow.task")
        try:
            check_setting_params(params, SETTINGS)
            if params["trash_dir"] and not re.match(ABSOLUTE_PATH, params["trash_dir"]):
                raise ValueError(f"trash_dir {params['trash_dir']!r} is refused: {TRASH_DIR_EXPECTED}")
        except ValueError as exc:
            raise AirflowFailException(f"cleaner: {exc}") from None
        with AcidMetastoreHook().metastore() as metastore:
            results = clean(metastore, dry_run=bool(params["dry_run"]),
                            retention_ms=int(params["retention_seconds"]) * 1000,
                            trash_dir=params["trash_dir"] or None,
                            retry_retention_ms=int(params["retry_retention_seconds"]) * 1000,
                            max_attempts=int(params["max_attempts"]), log=log.info)
        emit_cleaning(results)
        summary = [dataclasses.asdict(result) for result in results]
        for entry in summary:
            entry["removed"] = list(entry["removed"])
            entry["skipped_paths"] = list(entry["skipped_paths"])
        log.info("cleaner: %d compactions handled", len(summary))
        return summary

    clean_compactions()


acid_cleaner()
