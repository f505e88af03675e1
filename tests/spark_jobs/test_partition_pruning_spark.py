"""Statements on Spark read only the partitions their condition can hold in: an UPDATE of one partition of a
200-partition table lists and reads that partition only, and every answer is the one a full read gives.

The driver's FileSystem calls are recorded (every directory listed, every file opened: the footers the planner
reads), and so is the plan each read hands to Spark's tasks (the files they read), by wrapping the real functions.
"""

from __future__ import annotations

import datetime
import io
import os
import posixpath

import pytest
from support.sql_sessions import run

import spark_jobs.read
from acid_cli.sql.session import Session
from acid_core.read.merge import read_snapshot
from acid_core.storage.fs import FileSystem
from acid_core.write.table_write import TableWrite
from spark_jobs import write

pytestmark = pytest.mark.spark

DAYS = [str(datetime.date(2026, 1, 1) + datetime.timedelta(days=offset)) for offset in range(200)]
ONE = "2026-03-01"  # DAYS[59]


@pytest.fixture
def table(store):
    """`default.events (id int, v string) PARTITIONED BY (day date)`: 200 days, two rows each (ids day*10, day*10+1),
    written in one transaction, plus a second delta in ONE."""
    store.catalog.create_table("default", "events", [("id", "int"), ("v", "string")],
                               partition_keys=[("day", "date")], params={"transactional": "true"})
    with TableWrite.open(store, "default", "events", agent_info="test") as txn:
        for number, day in enumerate(DAYS):
            txn.insert([(number * 10, "a"), (number * 10 + 1, "b")], partition={"day": day})
    with TableWrite.open(store, "default", "events", agent_info="test", partition={"day": ONE}) as txn:
        txn.insert([(5000, "c")], partition={"day": ONE})
    return store.catalog.get_table("default", "events")


def rows(store, info) -> dict[int, tuple[str, str]]:
    """id -> (v, day) of every partition, read by acid_core under a fresh snapshot (not through the code tested)."""
    snapshot = store.txns.snapshot([info.full_name])
    found = {}
    for partition in store.catalog.list_partitions("default", "events"):
        table = read_snapshot(partition.location, write_ids=snapshot.write_ids[info.full_name], txns=snapshot.txns)
        for row in table.to_pylist():
            found[row["id"]] = (row["v"], partition.spec["day"])
    return found


class Recorder:
    """What the driver touches: directories listed, files opened, and the plans of the reads."""

    def __init__(self, monkeypatch, root: str) -> None:
        self.root = root.rstrip("/")
        self.listed: list[str] = []
        self.opened: list[str] = []
        self.plans: list = []
        list_dir, open_input, plan = FileSystem.list_dir, FileSystem.open_input, spark_jobs.read.plan_table_read
        monkeypatch.setattr(FileSystem, "list_dir",
                            lambda fs, path, **options: self.listed.append(path) or list_dir(fs, path, **options))
        monkeypatch.setattr(FileSystem, "open_input", lambda fs, path: self.opened.append(path) or open_input(fs, path))

        def planned(*args, **kwargs):
            self.plans.append(plan(*args, **kwargs))
            return self.plans[-1]

        monkeypatch.setattr(spark_jobs.read, "plan_table_read", planned)

    def clear(self) -> None:
        self.listed.clear()
        self.opened.clear()
        self.plans.clear()

    def partitions_listed(self) -> list[str]:
        """The partition directories listed (`day=...`), in order."""
        return [posixpath.basename(path) for path in self.listed if posixpath.dirname(path) == self.root]

    def partitions_touched(self) -> set[str]:
        """The partition of every path listed or opened, and of every file a read's tasks were given."""
        paths = self.listed + self.opened + [source.path for plan in self.plans for _, source, _ in plan.units]
        paths += [d.path for plan in self.plans for partition in plan.partitions for d in partition.plan.deletes]
        return {posixpath.relpath(path, self.root).split("/")[0] for path in paths if path.startswith(self.root + "/")}


@pytest.fixture
def session(spark, store):
    out = io.StringIO()
    session = Session(store, out, "jsonl")
    session.engine()._spark = spark  # share the test session instead of building another
    yield session
    session._engine._spark = None


def test_an_update_of_one_partition_of_200_lists_and_reads_only_that_partition(session, store, table, monkeypatch):
    before = rows(store, table)
    recorder = Recorder(monkeypatch, table.location)
    [message] = run(session, f"UPDATE events SET v = upper(v) WHERE day = '{ONE}' AND id % 2 = 0")
    assert message["message"].startswith("Updated 2 rows of default.events")
    assert recorder.partitions_listed() == [f"day={ONE}"]
    assert recorder.partitions_touched() == {f"day={ONE}"}
    [plan] = recorder.plans
    assert [partition.location for partition in plan.partitions] == [f"{table.location}/day={ONE}"]
    assert sorted(os.path.basename(os.path.dirname(source.path)) for _, source, _ in plan.units) == [
        "delta_0000001_0000001_0000", "delta_0000002_0000002_0000"]
    assert len(recorder.opened) == 2  # the two footers, opened by the planner; nothing else on the driver
    expected = dict(before)
    expected.update({590: ("A", ONE), 5000: ("C", ONE)})
    assert rows(store, table) == expected


def test_deletes_merges_and_queries_prune_and_stay_correct(session, store, table, monkeypatch):
    model = rows(store, table)
    recorder = Recorder(monkeypatch, table.location)
    spark = session.engine().spark

    summary = write.delete(spark, store, "default", "events",
                           "day IN ('2026-01-01', DATE '2026-07-19') AND id % 2 = 1")
    assert summary.deleted == 2 and recorder.partitions_touched() == {"day=2026-01-01", "day=2026-07-19"}
    del model[1], model[1991]
    assert rows(store, table) == model

    recorder.clear()
    result = run(session, "SELECT day, count(*) AS n FROM events e WHERE e.day BETWEEN '2026-02-27' AND '2026-03-02' "
                          "GROUP BY day ORDER BY day")
    assert result == [{"day": "2026-02-27", "n": 2}, {"day": "2026-02-28", "n": 2}, {"day": ONE, "n": 3},
                      {"day": "2026-03-02", "n": 2}]
    assert recorder.partitions_listed() == ["day=2026-02-27", "day=2026-02-28", f"day={ONE}", "day=2026-03-02"]

    recorder.clear()  # one view over the table serves both query blocks: it holds what either may read
    result = run(session, "SELECT id FROM events WHERE day = '2026-01-03' UNION ALL "
                          "SELECT id FROM default.events WHERE day IN ('2026-01-05') ORDER BY id")
    assert result == [{"id": 20}, {"id": 21}, {"id": 40}, {"id": 41}]
    assert recorder.partitions_listed() == ["day=2026-01-03", "day=2026-01-05"]

    recorder.clear()
    run(session, "CREATE TABLE src (id int, v string) STORED AS ORC TBLPROPERTIES ('transactional'='true'); "
                 "INSERT INTO src VALUES (590, 'm'), (7777, 'n')")
    run(session, f"MERGE INTO events t USING src s ON t.id = s.id AND t.day = '{ONE}' "
                 "WHEN MATCHED THEN UPDATE SET v = s.v "
                 "WHEN NOT MATCHED THEN INSERT VALUES (s.id, s.v, DATE '2026-12-24')")
    assert recorder.partitions_touched() == {f"day={ONE}"}  # the target's; the new partition is written, not read
    model.update({590: ("m", ONE), 7777: ("n", "2026-12-24")})
    assert rows(store, table) == model

    recorder.clear()  # a condition that says nothing certain of day: every partition, and the same answer
    result = run(session, "SELECT count(*) AS n FROM events WHERE day = '2026-01-02' OR id = 7777")
    assert result == [{"n": 3}]
    assert len(recorder.partitions_listed()) == 201
