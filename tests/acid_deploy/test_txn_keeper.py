"""The transaction keeper (acid_deploy.keeper.py): a real detached process heartbeating a real metastore
transaction while a watched process lives, against housekeeping's timeout on a real clock."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid

import psutil
import pytest

from acid_core.errors import TxnAbortedError, UsageError
from acid_core.metastore import Metastore
from acid_core.metastore.streams import BatchMark
from acid_deploy.keeper import ensure_stream_keeper, start_keeper, stream_record

TIMEOUT_MS = 1500


@pytest.fixture
def metastore(tmp_path):
    """A SQLite metastore on the real clock (the keeper's), timing transactions out after 1.5 s."""
    made = Metastore(f"sqlite:///{tmp_path}/metastore.db", warehouse=str(tmp_path / "warehouse"),
                     txn_timeout_ms=TIMEOUT_MS)
    made.init()
    yield made
    made.close()


def wait_for(condition, seconds: float = 15.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return condition()


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_an_open_transaction_outlives_the_timeout_and_the_keeper_exits_when_it_commits(metastore):
    txn_id = metastore.txns.open_txn(agent_info="long write")
    keeper = start_keeper(metastore.url, txn_id, watch=psutil.Process(), interval_s=0.3)
    assert keeper not in {child.pid for child in psutil.Process().children()}  # detached: nobody's zombie
    assert "metastore.db" not in " ".join(psutil.Process(keeper).cmdline())  # the URL is not on its command line
    deadline = time.monotonic() + 3 * TIMEOUT_MS / 1000
    while time.monotonic() < deadline:  # housekeeping runs all along
        assert metastore.txns.perform_timeouts() == []
        time.sleep(0.2)
    metastore.txns.commit(txn_id)
    assert wait_for(lambda: gone(keeper))


def test_without_a_keeper_the_same_transaction_times_out(metastore):
    txn_id = metastore.txns.open_txn(agent_info="long write")
    assert wait_for(lambda: metastore.txns.perform_timeouts() == [txn_id], 3 * TIMEOUT_MS / 1000)


def test_the_keeper_aborts_the_transaction_when_the_watched_process_dies(metastore):
    driver = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        txn_id = metastore.txns.open_txn(agent_info="long write")
        keeper = start_keeper(metastore.url, txn_id, watch=psutil.Process(driver.pid), interval_s=0.3)
        time.sleep(0.5)
        metastore.txns.heartbeat(txn_id)  # still open
    finally:
        driver.kill()
        driver.wait(timeout=10)
    assert wait_for(lambda: gone(keeper))
    with pytest.raises(TxnAbortedError):
        metastore.txns.heartbeat(txn_id)


def test_a_bad_interval_is_refused(metastore):
    with pytest.raises(UsageError, match="heartbeat interval must be positive, got 0"):
        start_keeper(metastore.url, 1, watch=psutil.Process(), interval_s=0)


def test_a_streams_keeper_heartbeats_each_pending_batch_and_exits_when_idle(metastore):
    stream = ("query", "default", "t")
    keeper = start_keeper(metastore.url, 0, watch=psutil.Process(), interval_s=0.3, stream=stream, idle_s=2)
    for batch in range(2):  # two micro-batches, each longer than the timeout
        txn_id = metastore.txns.open_txn()
        metastore.streams.begin_batch(*stream, txn_id)
        deadline = time.monotonic() + 2 * TIMEOUT_MS / 1000
        while time.monotonic() < deadline:
            assert metastore.txns.perform_timeouts() == []
            time.sleep(0.2)
        metastore.txns.commit(txn_id, batch=BatchMark(*stream, batch))
    assert not gone(keeper)
    assert wait_for(lambda: gone(keeper))  # two seconds without a pending batch


def test_one_keeper_per_stream_on_a_machine_which_forgets_its_record_when_it_stops(metastore):
    stream, other = (("query-" + uuid.uuid4().hex, "default", "t") for _ in range(2))
    first = ensure_stream_keeper(metastore.url, stream, watch=psutil.Process(), interval_s=0.3, idle_s=1)
    assert ensure_stream_keeper(metastore.url, stream, watch=psutil.Process(), interval_s=0.3, idle_s=1) == first
    second = ensure_stream_keeper(metastore.url, other, watch=psutil.Process(), interval_s=0.3, idle_s=1)
    assert second != first
    assert os.path.exists(stream_record(stream)) and os.path.exists(stream_record(other))
    assert wait_for(lambda: gone(first) and gone(second))  # a second without a pending batch
    assert not os.path.exists(stream_record(stream)) and not os.path.exists(stream_record(other))
