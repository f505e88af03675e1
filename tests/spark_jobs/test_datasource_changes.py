"""The `hiveacid` change feed (spark_jobs/datasource_changes.py) through the public API: `changesFrom`/`changesTo` on
a batch read, `readStream` with `changesFrom`; compared with a model of the inserts, updates and deletes made
(`support.change_model`). A streaming read writes into a file sink with its own checkpoint and is stopped and
restarted between writes, one of which commits after a later one: every change comes out once, none is skipped.
"""

from __future__ import annotations

import pytest
from support.change_model import ChangeModel
from support.read_tables import Table

pytestmark = pytest.mark.spark


def as_tuples(rows) -> list[tuple]:
    return sorted((r["_change_write_id"], r["_change_type"], tuple(r["row__id"]), r["id"], r["name"]) for r in rows)


def feed(spark, store, **options):
    reader = spark.read.format("hiveacid").option("metastore", store.url)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load("default.events")


def test_the_change_feed_between_two_write_ids_is_the_models(spark, store):
    table = Table(store, "events")
    model = ChangeModel(store, table)
    model.insert(5)
    model.insert(3)
    model.update([1, 6])
    model.delete([2])
    model.insert(2, outcome="abort")
    model.update([6])
    df = feed(spark, store, changesFrom=0)
    assert df.columns[:3] == ["_change_type", "_change_write_id", "row__id"]
    assert as_tuples(df.collect()) == model.between(0, 6)
    assert as_tuples(feed(spark, store, changesFrom=2, changesTo=4).collect()) == model.between(2, 4)
    assert feed(spark, store, changesFrom=6).count() == 0


def test_changes_carry_their_partition(spark, store):
    table = Table(store, "events", partition_keys=[("region", "string")])
    table.insert([(1, "a", 1.0)], partition={"region": "eu"})
    table.delete([1], partition={"region": "eu"})
    rows = feed(spark, store, changesFrom=0).orderBy("_change_write_id").collect()
    assert [(r["_change_type"], r["id"], r["region"]) for r in rows] == [("insert", 1, "eu"), ("delete", None, "eu")]


def test_changes_to_may_not_pass_an_open_write(spark, store):
    table = Table(store, "events")
    ChangeModel(store, table).insert(2)
    with table.transaction(outcome="open") as write:
        write.insert([(9, "open", 0.0)])
    with pytest.raises(Exception, match="option changesTo 2 of default.events: write id 2 is still open"):
        feed(spark, store, changesFrom=0, changesTo=2).collect()
    assert feed(spark, store, changesFrom=0).count() == 2  # up to the settled write id, 1


def test_a_restarted_change_stream_neither_repeats_nor_skips_a_change(spark, store, tmp_path):
    table = Table(store, "events")
    model = ChangeModel(store, table)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"

    def run() -> list[tuple]:
        query = (spark.readStream.format("hiveacid").option("metastore", store.url).option("changesFrom", 0)
                 .load("default.events").writeStream.format("parquet").option("path", str(out))
                 .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
        assert query.awaitTermination(180)
        assert query.exception() is None
        return as_tuples(spark.read.parquet(str(out)).collect())

    model.insert(3)
    model.update([0])
    assert run() == model.between(0, 2)
    late = table.transaction(outcome="open")  # write id 3 opens, then write id 4 commits before it
    write = late.__enter__()
    write.insert([(50, "late", 5.0)])
    model.delete([1])
    assert run() == model.between(0, 2)  # 4 waits for 3
    write.commit()
    model.by_write[3].append((3, "insert", (3, 536870912, 0), 50, "late"))
    assert run() == model.between(0, 4)
    model.insert(1)
    assert run() == model.between(0, 5)


def test_a_stream_without_changes_from_is_refused(spark, store, tmp_path):
    Table(store, "events")
    query = (spark.readStream.format("hiveacid").option("metastore", store.url).load("default.events")
             .writeStream.format("memory").queryName("refused").option("checkpointLocation", str(tmp_path / "c"))
             .trigger(availableNow=True).start())
    with pytest.raises(Exception, match='a stream reads the changes of default.events: give option\\("changesFrom"'):
        query.awaitTermination(120)
