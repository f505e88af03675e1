"""A metastore restart under load: PostgreSQL is stopped (fast shutdown, as an operator's restart), kept down for 10 s
and started again while a Spark compaction (`acid compact run`, spark-submit on local[2]), a streaming writer and the
cleaner run. Each waits the outage out (`Database.run`'s bounded retries): the compaction ends ready for cleaning and
then succeeded, every streaming transaction commits or aborts cleanly, no row is lost or duplicated, and the
compaction's log shows the retries and the recovery.
"""

from __future__ import annotations

import subprocess
import threading
import time

import pytest
from support.compaction_support import (
    ROOT,
    PartitionedTestTable,
    compact_command,
    compact_environment,
    hidden_entries,
    kill_session,
    make_rows,
)
from support.pg_server import PostgresServer

from acid_core.compaction.cleaner import clean
from acid_core.errors import AcidError
from acid_core.metastore import Metastore
from acid_core.metastore.codes import CompactionState, CompactionType
from acid_core.write.streaming import StreamingConnection

pytestmark = [pytest.mark.spark, pytest.mark.postgres]
DOWN_SECONDS = 10
WAIT_SECONDS = 240


class _Streaming(threading.Thread):
    """Commits one small transaction after another into partition p=2, remembering what committed."""

    def __init__(self, ms: Metastore) -> None:
        super().__init__(name="streaming-writer", daemon=True)
        self.ms, self.stop = ms, threading.Event()
        self.committed: list[int] = []
        self.aborted: list[int] = []
        self.errors: list[str] = []

    def run(self) -> None:
        connection = StreamingConnection(self.ms, "default", "restart_t", partition={"p": 2}, batch_size=5,
                                         heartbeat_interval_s=1.0)
        ids = iter(range(10_000_000, 10_100_000))
        try:
            for _ in range(2_000):  # bounded; stopped by the test long before
                if self.stop.is_set():
                    break
                batch = [next(ids) for _ in range(3)]
                try:
                    connection.begin_transaction()
                    connection.write([(i, "streamed", 0.5) for i in batch])
                    connection.commit_transaction()
                    self.committed.extend(batch)
                except AcidError as exc:
                    self.errors.append(str(exc))
                    try:
                        connection.abort_transaction()
                        self.aborted.extend(batch)
                    except AcidError as again:
                        self.errors.append(f"abort: {again}")
                        return
                time.sleep(0.05)
        finally:
            try:
                connection.close()
            except AcidError as exc:
                self.errors.append(f"close: {exc}")


class _Cleaner(threading.Thread):
    def __init__(self, ms: Metastore) -> None:
        super().__init__(name="cleaner", daemon=True)
        self.ms, self.stop = ms, threading.Event()
        self.errors: list[str] = []

    def run(self) -> None:
        for _ in range(10_000):
            if self.stop.wait(0.5):
                return
            try:
                clean(self.ms, log=lambda line: None)
            except AcidError as exc:
                self.errors.append(str(exc))


def test_a_metastore_restart_under_a_compaction_a_streaming_writer_and_the_cleaner(tmp_path):
    server = PostgresServer.start_new(base_dir=None)
    try:
        url = server.create_database("restart")
        ms = Metastore(url, warehouse=str(tmp_path / "warehouse"))
        ms.init()
        table = PartitionedTestTable.create(ms, "restart_t")
        table.insert(1, make_rows(0, 1_500_000))  # the Spark job takes a few seconds
        for start in range(1_500_000, 1_600_000, 20_000):
            table.insert(1, make_rows(start, 20_000))
        table.insert(2, make_rows(5_000_000, 300))
        before = sorted(table.rows(1).column("id").to_pylist())
        compaction_id = ms.compactions.enqueue("default", "restart_t", table.partition(1),
                                               CompactionType.MAJOR).compaction_id

        writer, cleaner = _Streaming(ms), _Cleaner(ms)
        writer.start()
        cleaner.start()
        log_path = tmp_path / "compaction.log"
        with open(log_path, "w") as log:
            process = subprocess.Popen(compact_command(compaction_id, url), cwd=ROOT, stdout=log, stderr=log,
                                       env=compact_environment(tmp_path / "acid-home"), start_new_session=True)
        try:
            hidden = f".tmp-c{compaction_id}"
            deadline = time.monotonic() + WAIT_SECONDS
            while not any(name.endswith(hidden) for name in hidden_entries(table.location(1))):
                assert process.poll() is None, log_path.read_text()[-4000:]
                assert time.monotonic() < deadline, "the compaction's tasks never started"
                time.sleep(0.05)
            server.halt()  # the compaction's tasks are running
            time.sleep(DOWN_SECONDS)
            server.resume()
            assert process.wait(timeout=WAIT_SECONDS) == 0, log_path.read_text()[-4000:]
        finally:
            kill_session(process.pid)
            process.wait()
        time.sleep(2)  # a few more streaming commits after the restart
        writer.stop.set()
        writer.join(60)
        assert not writer.is_alive()

        log = log_path.read_text()
        assert "metastore unavailable" in log and "metastore available again" in log, log[-4000:]
        assert ms.compactions.get(compaction_id).state in (CompactionState.READY_FOR_CLEANING,
                                                            CompactionState.SUCCEEDED)
        deadline = time.monotonic() + 60
        while ms.compactions.get(compaction_id).state is not CompactionState.SUCCEEDED:
            assert time.monotonic() < deadline, (
                f"not cleaned: {ms.compactions.get(compaction_id)}; cleaner errors {cleaner.errors}; open "
                f"transactions {[t for t in ms.txns.show_transactions() if t.state == 'o']}; "
                f"streaming errors {writer.errors[:3]}")
            time.sleep(0.2)
        cleaner.stop.set()
        cleaner.join(30)
        assert cleaner.errors == []

        assert sorted(table.rows(1).column("id").to_pylist()) == before  # nothing lost or duplicated
        streamed = sorted(i for i in table.rows(2).column("id").to_pylist() if i >= 10_000_000)
        assert streamed == sorted(writer.committed), (len(streamed), len(writer.committed), writer.errors[:3])
        assert writer.committed and not set(writer.aborted) & set(streamed)
        assert writer.errors == [], writer.errors[:3]  # the outage was waited out, not failed
        assert [t for t in ms.txns.show_transactions() if t.state == "o"] == []
        ms.close()
    finally:
        server.stop()
