"""The ACID metrics through Airflow's `Stats` (StatsD, DogStatsD or OpenTelemetry, as the `[metrics]` settings say).

Names are `acid.*` (after the deployment's `statsd_prefix`/`otel_prefix`, default `airflow`): the gauges of
`acid_core.operations.metrics` from the `acid_housekeeping` DAG's `metrics` task every minute and from each initiator poll,
per compaction a timer and counters from `AcidCompactionOperator` and `acid_worker`'s batch tasks, per cleaning
counters from `acid_cleaner`. Every name is one of `acid_core.operations.metrics.all_metrics()` (`metric_name` refuses any
other), which the "Metrics and alerts" table of docs/operations.md lists (`tests/project/test_metrics_table.py`). The `type` tag of a
compaction's metrics reaches the wire with DogStatsD, OpenTelemetry, or StatsD with
`[metrics] statsd_influxdb_enabled`; plain StatsD drops tags. Nothing is sent when metrics are off (Airflow's
NoStatsLogger).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from acid_core.operations.metrics import COMPACTION_OUTCOMES, RUN_COUNTERS, metric_name


def _stats():
    """Airflow's task-side Stats, set up from the `[metrics]` configuration if this process has not done so: the
    task runner does it before a task, but a task run in-process (`dag.test()`) gets only the default no-op."""
    from airflow.sdk.configuration import conf
    from airflow.sdk.observability import stats
    from airflow.sdk.observability.metrics import stats_utils

    factory = stats_utils.get_stats_factory()
    if getattr(_state(), "_factory", None) is not factory:  # the module keeps the factory it was initialised with
        close_client()
        stats.initialize(factory=factory, export_legacy_names=conf.getboolean("metrics", "legacy_names_on",
                                                                             fallback=False))
    return stats


def _state():
    """The module that holds Stats' factory and client (`airflow.sdk.observability.stats` re-exports its functions
    only, not its globals)."""
    from airflow.sdk.observability import stats

    return sys.modules[stats.initialize.__module__]


def close_client() -> None:
    """Close the socket of the StatsD client Airflow's Stats holds, if any (`initialize` drops it unclosed)."""
    client = getattr(getattr(_state(), "_backend", None), "statsd", None)
    if callable(getattr(client, "close", None)):
        client.close()


def emit_gauges(values: Mapping[str, float]) -> None:
    """Set each gauge (`acid.<name>` -> value, as `acid_core.operations.metrics` names them)."""
    stats = _stats()
    for name, value in values.items():
        stats.gauge(name, value)


def emit_compaction(*, compaction_type: str, outcome: str, stats_of_run: Mapping[str, Any]) -> None:
    """One finished compaction run: its outcome counter (`acid.compaction_<outcome>`, one of COMPACTION_OUTCOMES:
    `compacted`, `refused`, `failed`, `interrupted`, `aborted`, `busy` (another worker had claimed it), `error` (any
    other ending: the entry vanished or is in a state no run leaves)), and (when the driver reported them) its
    duration timer and events and bytes read and written."""
    stats = _stats()
    tags = {"type": compaction_type.lower()}
    outcome = outcome.replace(" ", "_")
    stats.incr(metric_name(f"compaction_{outcome if outcome in COMPACTION_OUTCOMES else 'error'}"), tags=tags)
    if "duration_seconds" in stats_of_run:
        stats.timing(metric_name("compaction_duration"), float(stats_of_run["duration_seconds"]) * 1000, tags=tags)
    for key in RUN_COUNTERS:
        if key in stats_of_run:
            stats.incr(metric_name(f"compaction_{key}"), count=int(stats_of_run[key]), tags=tags)
    if stats_of_run.get("metastore_retries"):  # the driver's: outages it waited out
        stats.incr(metric_name("metastore_retries"), count=int(stats_of_run["metastore_retries"]))


def emit_metastore_outages(since: Mapping[str, int], *, retries: int | None = None) -> None:
    """Metastore outages this process waited out since `since` (`acid_core.metastore.engine.outage_counts`):
    `acid.metastore_retries` (attempts that failed and were retried) and `acid.metastore_unavailable` (operations
    that gave up); `retries` adds those another process (a Spark driver) reported. Nothing is sent for none."""
    from acid_core.metastore.engine import outage_counts

    now = outage_counts()
    failed = now["failures"] - since.get("failures", 0) + (retries or 0)
    gave_up = now["gave_up"] - since.get("gave_up", 0)
    if failed or gave_up:
        stats = _stats()
        if failed:
            stats.incr(metric_name("metastore_retries"), count=failed)
        if gave_up:
            stats.incr(metric_name("metastore_unavailable"), count=gave_up)


def emit_cleaning(results) -> None:
    """One cleaner cycle (`acid_core.compaction.cleaner.CleanResult`s): entries cleaned, entries whose cleaning
    failed, and the directories and bytes removed (dry runs count nothing)."""
    stats = _stats()
    done = [r for r in results if r.outcome != "dry run"]
    stats.incr(metric_name("cleaner_cleaned"), count=sum(1 for r in done if r.outcome == "cleaned"))
    stats.incr(metric_name("cleaner_errors"), count=sum(1 for r in done if r.outcome in ("error", "failed")))
    stats.incr(metric_name("cleaner_directories_removed"), count=sum(len(r.removed) for r in done))
    stats.incr(metric_name("cleaner_bytes_removed"), count=sum(r.bytes_removed for r in done))
