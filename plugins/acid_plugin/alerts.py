"""Alerts through Airflow's notifiers: a deployment chooses the notifier, `acid_core.operations.alerts` decides when to send.

The notifier is any `airflow.sdk.BaseNotifier` (the SMTP, Slack, ... providers' notifiers, or one of your own),
named by the Airflow Variable `acid_notifier` (JSON `{"class": "module.Class", "kwargs": {...}}`) or, when the
Variable is unset, by the environment variables `ACID_NOTIFIER` (import path) and `ACID_NOTIFIER_KWARGS` (a JSON
object); by default `LogNotifier`, which writes the alert to the task log as a warning. The notifier is called with
the task's context plus `acid_alert` (kind, level, summary, compaction_id, database, table, partition, and for a
threshold rule's alert metric, value and threshold), so its templated fields can say `{{ acid_alert.summary }}`. A notifier that fails is logged and never changes the task's outcome.

The threshold rules (`acid_core.operations.alerts.DEFAULT_RULES`) take the deployment's thresholds from the Airflow Variable
`acid_alert_rules` or, when it is unset, the environment variable `ACID_ALERT_RULES` (the same JSON either way:
`{"<rule>": {"warning": <number or null>, "critical": <number or null>}}`, null turning a level off);
`send_escalations` sends a rule's alert once per level it rises to (the Variable `acid_alert_levels.<connection>`
remembers the levels sent).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from typing import Any

from airflow.sdk.bases.notifier import BaseNotifier

from acid_core import settings

NOTIFIER_VARIABLE = "acid_notifier"
RULES_VARIABLE = "acid_alert_rules"
LEVELS_VARIABLE = "acid_alert_levels"
log = logging.getLogger("airflow.task")


class LogNotifier(BaseNotifier):
    """The default: the alert's summary as a warning in the task log (`message` is templated)."""

    template_fields: Sequence[str] = ("message",)

    def __init__(self, *, message: str = "ACID alert {{ acid_alert.kind }} ({{ acid_alert.level }}): "
                                         "{{ acid_alert.summary }}") -> None:
        super().__init__()
        self.message = message

    def notify(self, context) -> None:
        log.warning("%s", self.message)


def configured_notifier() -> BaseNotifier:
    """The deployment's notifier (see the module docstring).

    Raises:
        ValueError: the configuration names no importable BaseNotifier or its kwargs are not a JSON object.
    """
    from airflow.sdk import Variable
    from airflow.sdk.module_loading import import_string

    text = Variable.get(NOTIFIER_VARIABLE, default=None)
    if text:
        try:
            config = json.loads(text)
        except ValueError:
            config = None
        if not isinstance(config, dict) or not isinstance(config.get("class"), str):
            raise ValueError(f'Airflow Variable {NOTIFIER_VARIABLE}: expected JSON {{"class": "module.Class", '
                             f'"kwargs": {{...}}}}, got {text[:200]!r}')
        path, kwargs = config["class"], config.get("kwargs") or {}
    else:
        path = os.environ.get(settings.NOTIFIER.env_var) or f"{__name__}.LogNotifier"
        try:
            kwargs = json.loads(os.environ.get(settings.NOTIFIER_KWARGS.env_var) or "{}")
        except ValueError:
            kwargs = None
    if not isinstance(kwargs, dict):
        raise ValueError(f"notifier {path}: its kwargs must be a JSON object")
    cls = import_string(path)
    if not (isinstance(cls, type) and issubclass(cls, BaseNotifier)):
        raise ValueError(f"notifier {path!r} is not an airflow.sdk.BaseNotifier class")
    return cls(**kwargs)


def send_alerts(context: dict[str, Any] | None, alerts) -> int:
    """Send each `acid_core.operations.alerts.Alert` through the configured notifier; returns how many were sent. Every alert
    is also logged; a notifier that cannot be built or fails is logged as an error, nothing is raised."""
    sent = 0
    for alert in alerts:
        log.warning("ACID alert %s (%s): %s", alert.kind, alert.level, alert.summary)
        try:
            notifier = configured_notifier()
            notifier({**(context or {}), "acid_alert": alert.as_dict()})
            sent += 1
        except Exception as exc:  # an alert must never change what the task reports
            log.error("ACID alert %s not sent: %s: %s", alert.kind, type(exc).__name__, exc)
    return sent


def configured_rules():
    """The threshold rules with the deployment's thresholds (see the module docstring).

    Raises:
        ValueError: the configuration is not a JSON object of rules, or names an unknown rule or a bad threshold.
    """
    from airflow.sdk import Variable

    from acid_core.errors import UsageError
    from acid_core.operations.alerts import rules_with

    text, where = Variable.get(RULES_VARIABLE, default=None), f"Airflow Variable {RULES_VARIABLE}"
    if not text:
        variable = settings.ALERT_RULES.env_var
        text, where = os.environ.get(variable) or "{}", f"environment variable {variable}"
    try:
        overrides = json.loads(text)
    except ValueError:
        overrides = None
    if not isinstance(overrides, dict):
        raise ValueError(f'{where}: expected a JSON object {{"<rule>": {{"warning": <number or null>, '
                         f'"critical": <number or null>}}}}, got {text[:200]!r}')
    try:
        return rules_with(overrides)
    except UsageError as exc:
        raise ValueError(f"{where}: {exc}") from None


def send_escalations(context: dict[str, Any] | None, found, *, conn_id: str) -> list:
    """Send the rule alerts in `found` whose level rose since the last call for this metastore connection
    (`acid_core.operations.alerts.escalations`), and remember the levels (the Variable `acid_alert_levels.<conn_id>`, written
    only when they change). A rule that cleared is logged. Returns the alerts sent."""
    from airflow.sdk import Variable

    from acid_core.operations.alerts import escalations

    key = f"{LEVELS_VARIABLE}.{conn_id}"
    try:
        sent = json.loads(Variable.get(key, default="{}"))
    except ValueError:
        sent = {}
    sent = sent if isinstance(sent, dict) else {}
    fresh, levels = escalations(found, sent)
    for kind in sorted(set(sent) - set(levels)):
        log.info("ACID alert %s cleared (was %s)", kind, sent[kind])
    send_alerts(context, fresh)
    if levels != sent:
        Variable.set(key, json.dumps(levels, sort_keys=True))
    return fresh
