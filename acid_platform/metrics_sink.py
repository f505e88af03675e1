"""`make run`'s metrics sink: a StatsD listener on loopback that writes every metric line it receives, with the time it
came (`2026-11-26T09:30:00Z airflow.acid.compaction_num_initiated:3|g`), to two files:

- its output, which the launcher makes `logs/metrics.log` (size-capped and rotated like the other logs): everything,
  Airflow's own metrics (scheduler, executor, pools, task durations: most of the lines) and the project's;
- `logs/acid-metrics.log` (under `$ACID_HOME`, or `--acid-log`): the project's `acid.*` metrics only, which is what
  the "Metrics and alerts" table of docs/operations.md lists; capped and rotated the same way (`LOG_MAX_BYTES`, `LOG_BACKUPS`).

A tag shows as Airflow's StatsD client sends it: with `AIRFLOW__METRICS__STATSD_INFLUXDB_ENABLED=True`, InfluxDB-style
after the name (`airflow.acid.compaction_duration,type=major:1234|ms`); plain StatsD (the default) sends none.

Memory: one datagram at a time; it runs until SIGTERM.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import socket
import sys
import time
from pathlib import Path

from acid_platform.processes import LOG_BACKUPS, LOG_MAX_BYTES, rotate_log

MAX_DATAGRAM = 65535
ACID_LOG = "acid-metrics.log"
# `acid.<name>` after at most one prefix component (Airflow's statsd_prefix, default `airflow`)
_ACID_LINE = re.compile(r"^(?:[^.:|,\s]+\.)?acid\.")


def is_acid_line(line: str) -> bool:
    """Whether a StatsD line is one of the project's metrics (`acid.*`, after the deployment's prefix)."""
    return _ACID_LINE.match(line) is not None


class CappedLog:
    """An append-only text file rotated (`rotate_log`) before a write would take it past `max_bytes`, as the
    launcher's logs are; rotated once when opened, so each run starts a fresh file."""

    def __init__(self, path: Path, *, max_bytes: int = LOG_MAX_BYTES, backups: int = LOG_BACKUPS) -> None:
        self.path, self.max_bytes, self.backups = path, max_bytes, backups
        path.parent.mkdir(parents=True, exist_ok=True)
        rotate_log(path, backups=backups)
        self._file = open(path, "a", encoding="utf-8")

    def write(self, text: str) -> None:
        size = self._file.tell()
        if size and size + len(text.encode("utf-8")) > self.max_bytes:
            self._file.close()
            rotate_log(self.path, backups=self.backups)
            self._file = open(self.path, "a", encoding="utf-8")
        self._file.write(text)
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def serve(port: int, *, out=None, acid_log: CappedLog | None = None) -> None:
    """Write the metric lines of every datagram received on UDP 127.0.0.1:`port` to `out` (all of them) and to
    `acid_log` (the `acid.*` ones) until SIGTERM or SIGINT."""
    out = out or sys.stdout
    stop = []
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.append(True))
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as listener:
        listener.bind(("127.0.0.1", port))
        listener.settimeout(0.5)
        also = f"; acid.* metrics also to {acid_log.path}" if acid_log is not None else ""
        print(f"{_now()} listening for StatsD metrics on udp://127.0.0.1:{port}{also}", file=out, flush=True)
        while not stop:
            try:
                datagram = listener.recv(MAX_DATAGRAM)
            except (TimeoutError, InterruptedError):
                continue
            stamp = _now()
            lines = [line for line in datagram.decode("utf-8", "replace").splitlines() if line.strip()]
            out.write("".join(f"{stamp} {line}\n" for line in lines))
            out.flush()
            acid = "".join(f"{stamp} {line}\n" for line in lines if is_acid_line(line))
            if acid and acid_log is not None:
                acid_log.write(acid)


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _default_acid_log() -> Path | None:
    home = os.environ.get("ACID_HOME", "").strip()
    return Path(home) / "logs" / ACID_LOG if home else None


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--acid-log", type=Path, default=_default_acid_log(),
                        help=f"where the acid.* lines go (default: $ACID_HOME/logs/{ACID_LOG}; none without ACID_HOME)")
    arguments = parser.parse_args()
    capped = CappedLog(arguments.acid_log) if arguments.acid_log is not None else None
    try:
        serve(arguments.port, acid_log=capped)
    finally:
        if capped is not None:
            capped.close()
