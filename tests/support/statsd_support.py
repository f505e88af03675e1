"""A StatsD sink on loopback for the Airflow tests that check the `acid.*` metrics: every line Airflow's task-side
`Stats` sends while `metrics_to(listener)` is in effect (the `[metrics]` settings are read from the environment when
the StatsD client is made, so it sets them and makes a new client; afterwards metrics are off again).

Imported as `support.<module>` (tests/support/__init__.py).
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time

import pytest


class StatsdListener:
    """A UDP StatsD sink on 127.0.0.1: every received line, in order."""

    def __init__(self) -> None:
        self.socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.socket.bind(("127.0.0.1", 0))
        self.socket.settimeout(0.2)
        self.port = self.socket.getsockname()[1]
        self.lines: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._receive, daemon=True, name="statsd-listener")
        self._thread.start()

    def _receive(self) -> None:
        while not self._stop.is_set():
            try:
                data = self.socket.recv(65535)
            except OSError:
                continue
            self.lines.extend(data.decode().splitlines())

    def received(self) -> list[tuple[str, dict[str, str], float, str]]:
        """Every line received: (name, its InfluxDB-style tags, value, StatsD type)."""
        time.sleep(0.3)  # UDP: let the last packets arrive
        found = []
        for line in list(self.lines):
            metric, _, rest = line.partition(":")
            value, _, metric_kind = rest.partition("|")
            name, *tags = metric.split(",")
            found.append((name, dict(tag.split("=", 1) for tag in tags), float(value), metric_kind.split("|")[0]))
        return found

    def values(self, name: str, kind: str, **tags: str) -> list[float]:
        """The values received for `airflow.<name>` of StatsD type `kind` (c, g, ms), with these tags if any."""
        return [value for metric, sent_tags, value, metric_kind in self.received()
                if metric == f"airflow.{name}" and metric_kind == kind and tags.items() <= sent_tags.items()]

    def count(self, name: str) -> float:
        """The sum of counter `airflow.<name>` received so far."""
        return sum(self.values(name, "c"))

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.socket.close()


@contextlib.contextmanager
def metrics_to(listener: StatsdListener):
    """Airflow's metrics on, as StatsD to `listener`, for the duration; off again afterwards."""
    from acid_plugin.metrics import close_client
    from airflow.sdk.observability import stats
    from airflow.sdk.observability.metrics import stats_utils

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AIRFLOW__METRICS__STATSD_ON", "True")
        patch.setenv("AIRFLOW__METRICS__STATSD_HOST", "127.0.0.1")
        patch.setenv("AIRFLOW__METRICS__STATSD_PORT", str(listener.port))
        patch.setenv("AIRFLOW__METRICS__STATSD_PREFIX", "airflow")
        close_client()
        stats.initialize(factory=stats_utils.get_stats_factory(), export_legacy_names=False)  # a client to our port
        try:
            yield listener
        finally:
            close_client()
    stats.initialize(factory=stats_utils.get_stats_factory(), export_legacy_names=False)  # metrics off again
