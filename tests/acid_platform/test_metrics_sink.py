"""`make run`'s metrics sink: a real UDP listener process on loopback that writes what it receives, one metric line
each with its time, all of it to its output (logs/metrics.log) and the project's `acid.*` lines to their own capped
file (logs/acid-metrics.log), and stops on SIGTERM."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_the_sink_writes_every_metric_line_it_receives_and_the_acid_ones_to_their_own_file(tmp_path):
    port = _free_udp_port()
    log, acid_log = tmp_path / "metrics.log", tmp_path / "logs" / "acid-metrics.log"
    with open(log, "w") as output:
        sink = subprocess.Popen([sys.executable, "-m", "acid_platform.metrics_sink", "--port", str(port),
                                 "--acid-log", str(acid_log)], cwd=ROOT, stdout=output, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while "listening" not in log.read_text():
            assert sink.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sender:
            sender.sendto(b"acid.compaction_num_initiated:3|g\nacid.cleaner_bytes_removed:4096|c", ("127.0.0.1", port))
            sender.sendto(b"airflow.scheduler_heartbeat:1|c\nairflow.dag.acid_worker.compact.duration:5|ms",
                          ("127.0.0.1", port))
            sender.sendto(b"airflow.acid.compaction_duration,type=major:1234|ms", ("127.0.0.1", port))
        while log.read_text().count("\n") < 6:
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
    finally:
        sink.send_signal(signal.SIGTERM)
        assert sink.wait(timeout=10) == 0
    lines = log.read_text().splitlines()[1:]
    stamp = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ "
    assert [re.sub(stamp, "", line) for line in lines] == [
        "acid.compaction_num_initiated:3|g", "acid.cleaner_bytes_removed:4096|c", "airflow.scheduler_heartbeat:1|c",
        "airflow.dag.acid_worker.compact.duration:5|ms", "airflow.acid.compaction_duration,type=major:1234|ms"]
    assert all(re.match(stamp, line) for line in lines)
    assert f"acid.* metrics also to {acid_log}" in log.read_text().splitlines()[0]
    acid_lines = acid_log.read_text().splitlines()
    assert [re.sub(stamp, "", line) for line in acid_lines] == [
        "acid.compaction_num_initiated:3|g", "acid.cleaner_bytes_removed:4096|c",
        "airflow.acid.compaction_duration,type=major:1234|ms"]  # Airflow's own (an acid_ DAG's included) left out
    assert all(re.match(stamp, line) for line in acid_lines)


def test_the_acid_metrics_file_is_capped_and_rotated(tmp_path):
    from acid_platform.metrics_sink import CappedLog

    path = tmp_path / "acid-metrics.log"
    path.write_text("the previous run\n")
    capped = CappedLog(path, max_bytes=100, backups=2)
    try:
        for number in range(12):
            capped.write(f"2026-01-01T00:00:00Z airflow.acid.num_locks:{number}|g\n")  # 40 bytes a line
    finally:
        capped.close()
    files = {p.name: p.read_text() for p in tmp_path.iterdir()}
    assert set(files) == {"acid-metrics.log", "acid-metrics.log.1", "acid-metrics.log.2"}  # the oldest went
    assert all(len(text.encode()) <= 100 for text in files.values())
    assert files["acid-metrics.log"].splitlines()[-1].endswith("num_locks:11|g")
    assert "the previous run" not in files["acid-metrics.log"]
