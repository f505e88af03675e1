"""How the ACID view shows metastore values: times in words, errors in one line, worker ids as task instances.

Pure functions; no Airflow or database access.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

from acid_core.errors import one_line

# `<host>-airflow.<dag>.<task>[<map index>].try<n>` (acid_plugin.operators._worker_id)
_WORKER = re.compile(r"-airflow\.(?P<dag>[A-Za-z0-9_]+)\.(?P<task>[A-Za-z0-9_.]+?)(?:\[(?P<map>\d+)\])?"
                     r"\.try(?P<try>\d+)$")
MAX_ERROR_CHARS = 300
ACTIVE_STATES = ("initiated", "working")  # listed above the history, never paged away
_INTERVAL = re.compile(r"^(?:(?P<days>\d+) days?, )?(?P<h>\d+):(?P<m>\d\d):(?P<s>\d\d)$")


@dataclass(frozen=True, slots=True)
class WorkerTask:
    """The Airflow task attempt a worker id names."""

    dag_id: str
    task_id: str
    map_index: int
    try_number: int


def parse_worker_id(worker_id: str | None) -> WorkerTask | None:
    """The task attempt of an Airflow worker id, or None for any other worker (`acid compact run`, Hive's)."""
    match = _WORKER.search(worker_id or "")
    if match is None:
        return None
    return WorkerTask(match["dag"], match["task"], int(match["map"]) if match["map"] else -1, int(match["try"]))


def task_instance_path(task: WorkerTask, run_id: str | None) -> str:
    """The path of the task instance's page in Airflow 3's UI (of the task across runs when the run is unknown)."""
    from urllib.parse import quote

    dag, name = quote(task.dag_id, safe=""), quote(task.task_id, safe="")
    if run_id is None:
        return f"/dags/{dag}/tasks/{name}"
    path = f"/dags/{dag}/runs/{quote(run_id, safe='')}/tasks/{name}"
    return path + (f"/mapped/{task.map_index}" if task.map_index >= 0 else "")


def dag_run_path(dag_id: str, run_id: str) -> str:
    """The path of a DAG run's page in Airflow 3's UI."""
    from urllib.parse import quote

    return f"/dags/{quote(dag_id, safe='')}/runs/{quote(run_id, safe='')}"


def interval_seconds(summary: str | None) -> int | None:
    """The seconds of a timedelta schedule as Airflow summarises it (`0:01:00`, `1 day, 0:00:00`); None for any
    other schedule (cron, assets, none)."""
    match = _INTERVAL.match((summary or "").strip())
    if match is None:
        return None
    return int(match["days"] or 0) * 86400 + int(match["h"]) * 3600 + int(match["m"]) * 60 + int(match["s"])


def working_ms(entry, now_ms: int) -> int | None:
    """How long a compaction worked: from its start to its commit (or its end: failed, refused, aborted), or until
    now while it works; None when it never started."""
    if not entry.start_ms or entry.state.display == "did not initiate":  # never queued, never worked
        return None
    end = entry.commit_ms or entry.end_ms or (now_ms if entry.state.display == "working" else None)
    return max(0, end - entry.start_ms) if end else None


def format_duration(ms: int | None) -> str | None:
    """`850 ms`, `42 s`, `3 min 5 s`, `2 h 10 min`; None stays None."""
    if ms is None:
        return None
    if ms < 1000:
        return f"{ms} ms"
    seconds = ms // 1000
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min" + (f" {seconds % 60} s" if seconds % 60 else "")
    return f"{seconds // 3600} h" + (f" {seconds % 3600 // 60} min" if seconds % 3600 // 60 else "")


def one_line_error(message: str | None) -> str | None:
    """The cause of an error in one line (`acid_core.errors.one_line`, the type as qualified as the text has it), cut
    to MAX_ERROR_CHARS: Hive keeps one line per compaction in SHOW COMPACTIONS."""
    return one_line(message, limit=MAX_ERROR_CHARS, qualified=True) if message else message


def format_time(ms: int | None, now_ms: int) -> str | None:
    """`2026-01-01 12:00:03 UTC (3 min ago)`; None stays None."""
    if not ms:
        return None
    when = dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return f"{when} ({format_age(now_ms - ms)})"


def format_age(ms: int) -> str:
    """`12 s ago`, `3 min ago`, `2 h ago`, `4 d ago` (`in ...` for the future)."""
    seconds = abs(ms) // 1000
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            amount = f"{seconds // size} {unit}"
            break
    else:
        amount = f"{seconds} s"
    return f"{amount} ago" if ms >= 0 else f"in {amount}"


def format_bytes(size: int) -> str:
    """`532 B`, `1.5 KiB`, `3.2 GiB`."""
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"  # not reached


def setting_fields(settings) -> list[dict]:
    """The settings form's number fields, one per registry setting (`acid_core.settings`): the Param it sets, the
    label and Hive key, the table property, the allowed range (HTML `min`, `max`, `step`) and its description."""
    fields = []
    for setting in settings:
        bounds = setting.bounds
        fields.append({"name": setting.param_name, "key": setting.hive_key,
                       "label": (setting.hive_key or setting.param_name).removeprefix("hive.compactor."),
                       "property": setting.property_key, "description": setting.description,
                       "allowed": setting.expected(), "min": bounds.minimum if bounds else None,
                       "max": bounds.maximum if bounds else None,
                       "step": 1 if setting.kind == "integer" else "any", "default": setting.default})
    return fields
