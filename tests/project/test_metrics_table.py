"""The "Metrics and alerts" tables of docs/operations.md match the code, both ways: every metric the code can send is in the
metrics table with its kind and its Hive constant, and nothing else is; every alert kind is in the alerts table with
the rules' default thresholds, and nothing else is. (`tests/dags/test_metrics_alerts.py` checks what arrives on
the wire against the same table.)"""

from __future__ import annotations

import re

from support.metrics_docs import alerts_table, documented_metrics, metrics_table

from acid_core.operations import alerts
from acid_core.operations.metrics import (
    AcidMetrics,
    DeltaReading,
    PartitionDeltas,
    all_metrics,
    delta_gauges,
    gauges,
    initiator_gauges,
)


def test_the_metrics_table_lists_every_metric_the_code_can_send_and_nothing_else():
    documented = documented_metrics()
    registered = {name: metric.kind for name, metric in all_metrics().items()}

    assert sorted(set(registered) - set(documented)) == [], "sent, but not in the metrics table of docs/operations.md"
    assert sorted(set(documented) - set(registered)) == [], "in the metrics table of docs/operations.md, but never sent"
    assert {name: kind for name, kind in documented.items() if registered[name] != kind} == {}, "kinds differ"
    assert "compaction_error" in documented  # issue 24: it was sent and not documented


def test_the_hive_column_names_the_hive_constant_of_each_metric_that_has_one():
    registered = all_metrics()
    for row in metrics_table():
        hive = row.cells[2]
        constants = [registered[name].hive for name in row.names if registered[name].hive]
        for constant in constants:
            wanted = constant.removeprefix("MetricsConstants.").split()[0]
            assert f"`{wanted}`" in hive, f"{row.names}: the Hive column should name {wanted}"
        if not constants:
            assert hive == "—", f"{row.names}: names of ours, the Hive column should say —"


def test_the_gauge_functions_send_exactly_the_registered_gauges():
    from acid_core.compaction.candidates import Candidate
    from acid_core.compaction.initiator import Decision
    from acid_core.metastore.codes import CompactionType

    deltas = DeltaReading((PartitionDeltas("default", "t", None, 3, 1, 2),))
    decisions = [Decision(Candidate("default", "t", None), CompactionType.MAJOR, "11 deltas")]
    sent = {*gauges(AcidMetrics()), *delta_gauges(deltas), *initiator_gauges(decisions)}

    assert sent == {f"acid.{name}" for name, metric in all_metrics().items() if metric.kind == "gauge"}


def test_the_alerts_table_lists_every_alert_and_the_rules_default_thresholds():
    rows = {row.names[0]: row for row in alerts_table()}

    assert sorted(rows) == sorted(alerts.ALERT_KINDS)
    for rule in alerts.DEFAULT_RULES:
        cell = rows[rule.name].cells[1]
        assert cell.startswith(f"`{rule.metric}` "), f"{rule.name}: docs/operations.md names another gauge: {cell}"
        for level in alerts.LEVELS:
            match = re.search(rf"\b{level} > ([0-9.]+)", cell)
            documented = float(match.group(1)) if match else None
            assert documented == getattr(rule, level), f"{rule.name}: {level} is {getattr(rule, level)}, not {cell}"
