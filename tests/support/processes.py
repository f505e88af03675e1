"""Processes a test started in their own session: list them, and end them all (Spark leaves a Python daemon in its
own process group, so killing the process group is not enough).

Imported as `support.<module>` (tests/support/__init__.py).
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path


def session_members(session_id: int) -> list[int]:
    """Processes of the session `session_id` (field 6 of /proc/PID/stat), the session leader included."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm) "
        if int(fields[3]) == session_id and fields[0] != "Z":
            members.append(int(entry.name))
    return members


def kill_session(session_id: int, *, timeout: float = 30) -> None:
    """SIGKILL every process of a session this test started (by pid), until none is left."""
    deadline = time.monotonic() + timeout
    while members := session_members(session_id):
        for pid in members:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if time.monotonic() > deadline:
            raise AssertionError(f"processes {members} of session {session_id} survived SIGKILL")
        time.sleep(0.05)
