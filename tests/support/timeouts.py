"""Housekeeping timing transactions out in a thread while a test's write runs: shared by the hiveacid write and
streaming tests whose writes outlast the timeout. Imported as `support.timeouts`."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from acid_core.metastore import Metastore


@contextmanager
def timing_out(url: str, timeout_ms: int) -> Iterator[list[int]]:
    """Yields the list of transactions housekeeping (a metastore with `timeout_ms`) aborted every 0.2 s meanwhile."""
    housekeeping = Metastore(url, txn_timeout_ms=timeout_ms)
    stop, aborted = threading.Event(), []

    def time_out() -> None:
        while not stop.wait(0.2):
            aborted.extend(housekeeping.txns.perform_timeouts())

    thread = threading.Thread(target=time_out, daemon=True)
    thread.start()
    try:
        yield aborted
    finally:
        stop.set()
        thread.join(timeout=10)
        housekeeping.close()
