"""How the on-demand DAGs end a request that cannot or need not be carried out: one line for people, a structured
result for API callers.

A refusal (an unknown table or partition, a malformed or out-of-range value) fails the task with one line naming the
problem, and no traceback, and pushes the XCom `outcome` `{"ok": false, "reason": ..., ...}` (partitions that exist,
when one was unknown), which the REST API serves (`/api/v2/dags/<dag>/dagRuns/<run>/taskInstances/<task>/xcomEntries
/outcome`). (Airflow 3 gives a task no way to write its run's note: the Execution API has none.)
A request with nothing to do ends as skipped, with the reason in the log and in `outcome` (`"ok": true`).
Light: DAG files import it at parse time.
"""

from __future__ import annotations

import logging
from typing import Any

OUTCOME_KEY = "outcome"


def push_outcome(ti, *, ok: bool, reason: str, **details: Any) -> dict:
    """Push `{"ok", "reason", **details}` as the XCom `outcome` of task instance `ti`; returns it."""
    outcome = {"ok": ok, "reason": reason, **details}
    if ti is not None:
        ti.xcom_push(key=OUTCOME_KEY, value=outcome)
    return outcome


class Refused(SystemExit):
    """Ends a task failed, its reason the last line of its log: Airflow's task runner logs a `SystemExit` as one line,
    `Task exited exit_code=<reason>`, where any other exception (AirflowFailException too) gets 13 frames of
    Airflow's traceback. The task needs `retries=0`, as a refusal is final."""


def refuse(ti, reason: str, **details: Any) -> BaseException:
    """The exception that fails the task with `reason` (logged as one line, no traceback; give the task `retries=0`),
    after pushing the outcome."""
    push_outcome(ti, ok=False, reason=reason, **details)
    logging.getLogger("airflow.task").error("%s", reason)
    return Refused(reason)


def nothing_to_do(ti, reason: str, **details: Any) -> Exception:
    """The exception that ends the task as skipped with `reason`, after pushing the outcome (`ok`: true)."""
    from airflow.sdk.exceptions import AirflowSkipException

    push_outcome(ti, ok=True, reason=reason, **details)
    logging.getLogger("airflow.task").info("%s", reason)
    return AirflowSkipException(reason)
