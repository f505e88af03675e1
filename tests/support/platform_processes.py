"""The platform's processes as the `make run` tests see them: a free loopback port, a clean environment for
`python -m acid_platform`, and the processes and sessions a run started (to find and kill what it left behind).
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def clean_environment(acid_home: Path, **variables: str) -> dict[str, str]:
    """This process's environment without Airflow, ACID or Spark settings (the test suite's own), plus ACID_HOME."""
    environ = {name: value for name, value in os.environ.items()
               if not name.startswith(("AIRFLOW", "ACID_", "PYSPARK", "SPARK_"))}
    environ.update({"ACID_HOME": str(acid_home), "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
                    "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port()), **variables})
    return environ


def sessions_of(root: psutil.Process) -> tuple[dict[int, float], set[int]]:
    """Every descendant of `root` (pid -> create time) and the sessions they and `root` are in."""
    processes, sessions = {}, {os.getsid(root.pid)}
    for process in root.children(recursive=True):
        try:
            processes[process.pid] = process.create_time()
            sessions.add(os.getsid(process.pid))
        except (psutil.Error, OSError):
            continue
    return processes, sessions


def leftovers(processes: dict[int, float], sessions: set[int]) -> list[str]:
    left = []
    for process in psutil.process_iter(["pid", "create_time", "cmdline", "status"]):
        try:
            if process.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            same = processes.get(process.pid) == process.info["create_time"]
            if same or os.getsid(process.pid) in sessions:
                left.append(f"{process.pid} {' '.join(process.info['cmdline'] or [])[:120]}")
        except (psutil.Error, OSError):
            continue
    return left


def kill_sessions(sessions: set[int]) -> None:
    for process in psutil.process_iter():
        try:
            if os.getsid(process.pid) in sessions:
                process.kill()
        except (psutil.Error, OSError):
            continue
