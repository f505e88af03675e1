"""Alerts through Airflow's notifiers: a deployment chooses the notifier, `acid_core.alerts` decides when to send.

The notifier is any `airflow.sdk.BaseNotifier` (the SMTP, Slack, ... providers' notifiers, or one of your own),
named by the Airflow Variable `acid_notifier` (JSON `{"class": "module.Class", "kwargs": {...}}`) or, when the
Variable is unset, by the environment variables `ACID_NOTIFIER` (import path) and `ACID_NOTIFIER_KWARGS` (a JSON
object); by default `LogNotifier`, which writes the alert to the task log as a warning. The notifier is called with
the task's context plus `acid_alert` (kind, summary, compaction_id, database, table, partition), so its templated
fields can say `{{ acid_alert.summary }}`. A notifier that fails is logged and never changes the task's outcome.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any, Sequence

from airflow.sdk.bases.notifier import BaseNotifier

NOTIFIER_VARIABLE = "acid_notifier"
log = logging.getLogger("airflow.task")


class LogNotifier(BaseNotifier):
    """The default: the alert's summary as a warning in the task log (`message` is templated)."""

    template_fields: Sequence[str] = ("message",)

    def __init__(self, *, message: str = "ACID alert {{ acid_alert.kind }}: {{ acid_alert.summary }}") -> None:
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
        path = os.environ.get("ACID_NOTIFIER") or f"{__name__}.LogNotifier"
        try:
            kwargs = json.loads(os.environ.get("ACID_NOTIFIER_KWARGS") or "{}")
        except ValueError:
            kwargs = None
    if not isinstance(kwargs, dict):
        raise ValueError(f"notifier {path}: its kwargs must be a JSON object")
    cls = import_string(path)
    if not (isinstance(cls, type) and issubclass(cls, BaseNotifier)):
        raise ValueError(f"notifier {path!r} is not an airflow.sdk.BaseNotifier class")
    return cls(**kwargs)


def send_alerts(context: dict[str, Any] | None, alerts) -> int:
    """Send each `acid_core.alerts.Alert` through the configured notifier; returns how many were sent. Every alert
    is also logged; a notifier that cannot be built or fails is logged as an error, nothing is raised."""
    sent = 0
    for alert in alerts:
        log.warning("ACID alert %s: %s", alert.kind, alert.summary)
        try:
            notifier = configured_notifier()
            notifier({**(context or {}), "acid_alert": alert.as_dict()})
            sent += 1
        except Exception as exc:  # an alert must never change what the task reports
            log.error("ACID alert %s not sent: %s: %s", alert.kind, type(exc).__name__, exc)
    return sent
