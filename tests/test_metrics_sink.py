"""`make run`'s metrics sink: a real UDP listener process on loopback that writes what it receives, one metric line
each with its time, and stops on SIGTERM."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_the_sink_writes_every_metric_line_it_receives(tmp_path):
    port = _free_udp_port()
    log = tmp_path / "metrics.log"
    with open(log, "w") as output:
        sink = subprocess.Popen([sys.executable, "-m", "acid_platform.metrics_sink", "--port", str(port)], cwd=ROOT,
                                stdout=output, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while "listening" not in log.read_text():
            assert sink.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sender:
            sender.sendto(b"acid.compaction_num_initiated:3|g\nacid.cleaner_bytes_removed:4096|c", ("127.0.0.1", port))
            sender.sendto(b"acid.compaction_duration:1234|ms|#type:major", ("127.0.0.1", port))
        while log.read_text().count("acid.") < 3:
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
    finally:
        sink.send_signal(signal.SIGTERM)
        assert sink.wait(timeout=10) == 0
    lines = log.read_text().splitlines()[1:]
    stamp = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ "
    assert [re.sub(stamp, "", line) for line in lines] == [
        "acid.compaction_num_initiated:3|g", "acid.cleaner_bytes_removed:4096|c",
        "acid.compaction_duration:1234|ms|#type:major"]
    assert all(re.match(stamp, line) for line in lines)
