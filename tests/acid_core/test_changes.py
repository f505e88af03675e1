"""A table's changes between two write ids (acid_core/read/changes.py), against a model of the writes: random inserts,
updates and deletes through real transactions (some aborted, one left open), every range (a, b] compared; and the
ranges a base makes unreadable: a major compaction whose deltas the cleaner removed, an INSERT OVERWRITE.
"""

from __future__ import annotations

import random

import pytest
from support.change_model import ChangeModel as Model
from support.cleaner_tables import quiet
from support.read_tables import Table

from acid_core.compaction.cleaner import clean
from acid_core.compaction.worker import CompactionWorker
from acid_core.format.layout import base_dir_name
from acid_core.format.types import arrow_struct
from acid_core.metastore.codes import CompactionType
from acid_core.read.changes import ChangesUnavailableError, change_batches, plan_changes
from acid_core.storage.fs import FileSystem


def changes(ms, table: Table, after: int, upto: int) -> list[tuple]:
    """(change write id, type, ROW__ID, id, name) of every change in (after, upto], sorted."""
    snapshot = ms.txns.snapshot([table.info.full_name])
    write_ids = snapshot.write_ids[table.info.full_name]
    fs, location = FileSystem.resolve(table.info.location)
    found = []
    for source in plan_changes(fs, location, after=after, upto=upto, write_ids=write_ids, txns=snapshot.txns,
                               name=table.info.full_name):
        for batch in change_batches(fs, source, after=after, upto=upto, write_ids=write_ids,
                                    row_type=arrow_struct(table.info.columns)):
            found += [(r["_change_write_id"], r["_change_type"], tuple(r["row__id"].values()), r["id"], r["name"])
                      for r in batch.to_pylist()]
    return sorted(found)


@pytest.mark.parametrize("seed", [1, 2])
def test_every_range_of_random_writes_gives_the_models_changes(ms, seed):
    """Each write id from 0 to the highest as the start, and several ends after it."""
    chooser = random.Random(seed)
    table = Table(ms, "events")
    model = Model(ms, table)
    model.insert(6)
    for _ in range(10):
        action = chooser.choice(["insert", "insert", "update", "delete", "aborted"])
        live = sorted(model.live)
        if action == "insert" or not live:
            model.insert(chooser.randint(1, 4))
        elif action == "update":
            model.update(chooser.sample(live, min(len(live), 2)))
        elif action == "delete":
            model.delete(chooser.sample(live, 1))
        else:
            model.insert(2, outcome="abort")  # an aborted write changes nothing
    highest = ms.txns.snapshot(["default.events"]).write_ids["default.events"].high_watermark
    for after in range(highest + 1):
        for upto in sorted({after, min(after + 1, highest), min(after + 3, highest), highest}):
            assert changes(ms, table, after, upto) == model.between(after, upto), (after, upto)


def test_an_open_write_contributes_nothing_until_it_commits(ms):
    table = Table(ms, "events")
    model = Model(ms, table)
    model.insert(3)
    with table.transaction(outcome="open") as write:
        write.insert([(100, "open", 0.0)])
        open_write = write
    assert changes(ms, table, 0, open_write.write_id) == model.between(0, 1)
    open_write.commit()
    assert [c[3] for c in changes(ms, table, 1, 2)] == [100]


def test_a_minor_compaction_keeps_every_change_once(ms):
    table = Table(ms, "events")
    model = Model(ms, table)
    for _ in range(3):
        model.insert(3)
    model.update([1, 4])
    model.delete([7])
    compaction = ms.compactions.enqueue("default", "events", None, CompactionType.MINOR).compaction_id
    CompactionWorker(ms).run(compaction)
    assert changes(ms, table, 0, 5) == model.between(0, 5)  # the compacted deltas and the originals both listed
    clean(ms, log=quiet([]))
    assert changes(ms, table, 0, 5) == model.between(0, 5)  # the compacted ones only
    assert changes(ms, table, 2, 4) == model.between(2, 4)


def test_a_major_compaction_cleaned_away_names_the_oldest_readable_write_id(ms):
    table = Table(ms, "events")
    model = Model(ms, table)
    for _ in range(3):
        model.insert(2)
    compaction = ms.compactions.enqueue("default", "events", None, CompactionType.MAJOR).compaction_id
    CompactionWorker(ms).run(compaction)
    assert changes(ms, table, 1, 3) == model.between(1, 3)  # the folded deltas are still there
    clean(ms, log=quiet([]))
    model.insert(2)
    with pytest.raises(ChangesUnavailableError, match=r"default.events.*oldest write id whose changes are readable "
                                                      r"here is 4"):
        changes(ms, table, 1, 4)
    assert changes(ms, table, 3, 4) == model.between(3, 4)


def test_a_reader_lease_taken_before_the_compaction_keeps_the_changes_readable(ms):
    table = Table(ms, "events")
    model = Model(ms, table)
    model.insert(2)
    lease = ms.leases.acquire("default", "events", owner="change consumer at write id 1")
    model.insert(2)
    model.delete([0])
    compaction = ms.compactions.enqueue("default", "events", None, CompactionType.MAJOR).compaction_id
    CompactionWorker(ms).run(compaction)
    clean(ms, log=quiet([]))
    assert changes(ms, table, 1, 3) == model.between(1, 3)  # the cleaner waited for the lease
    ms.leases.release(lease.lease_id)
    clean(ms, log=quiet([]))
    with pytest.raises(ChangesUnavailableError, match="oldest write id whose changes are readable here is 4"):
        changes(ms, table, 1, 3)


def test_an_insert_overwrite_in_the_range_is_refused(ms):
    table = Table(ms, "events")
    Model(ms, table).insert(2)
    with table.transaction() as write:  # INSERT OVERWRITE: a base of the write's own id
        final = table.info.location + "/" + base_dir_name(write.write_id)
        staging = write.location().fs.join(table.info.location, write.staging_name(base_dir_name(write.write_id)))
        write.location().fs.make_dirs(staging)
        write.staged(staging, final)
    with pytest.raises(ChangesUnavailableError, match="write id 2 overwrote it"):
        changes(ms, table, 0, 2)
    assert changes(ms, table, 2, 2) == []
