"""`make run`'s metrics sink: a StatsD listener on loopback that prints every metric it receives, one line each with
the time it came (`2026-11-26T09:30:00Z acid.compaction_duration:1234|ms|#type:major`); the launcher runs it as a
child, so its output is `logs/metrics.log`, size-capped and rotated like the other logs.

Memory: one datagram at a time; it runs until SIGTERM.
"""

from __future__ import annotations

import argparse
import signal
import socket
import sys
import time

MAX_DATAGRAM = 65535


def serve(port: int, *, out=None) -> None:
    """Print the metric lines of every datagram received on UDP 127.0.0.1:`port` until SIGTERM or SIGINT."""
    out = out or sys.stdout
    stop = []
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.append(True))
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as listener:
        listener.bind(("127.0.0.1", port))
        listener.settimeout(0.5)
        print(f"{_now()} listening for StatsD metrics on udp://127.0.0.1:{port}", file=out, flush=True)
        while not stop:
            try:
                datagram = listener.recv(MAX_DATAGRAM)
            except (socket.timeout, InterruptedError):
                continue
            stamp = _now()
            lines = [line for line in datagram.decode("utf-8", "replace").splitlines() if line.strip()]
            out.write("".join(f"{stamp} {line}\n" for line in lines))
            out.flush()


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    serve(parser.parse_args().port)
