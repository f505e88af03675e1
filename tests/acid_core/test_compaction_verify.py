"""A compaction checks its own output before it commits (acid_core.compaction.verify), with the in-process runner.

A fault no real run can be made to cause is injected by replacing the task's event writer (`execute._write_events`)
for one bucket of one result directory with a faulty one (a row dropped, repeated, out of order, of another bucket;
a bucket file missing or extra), pyarrow's ORC writer under it (a row lost), the planner's key-interval cut
(`plan.split_keys`) or the names of a split bucket's parts. Each compaction must be
refused before its commit with one line starting "verification failed: ", its queue entry failed, its compactor
transaction aborted, no new base or delta left (hidden or visible), the table's rows (ROW__IDs included) unchanged
and readable, and the evidence logged at ERROR. A correct compaction passes and says so in its outcome.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import types
from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.orc as pa_orc
import pytest
from support.model import table_by_row_id, tree

from acid_core.compaction import execute, verify
from acid_core.compaction import plan as planning
from acid_core.compaction.execute import run_bucket
from acid_core.compaction.verify import (
    CompactionVerificationError,
    RowIdCounter,
    Tally,
    check_file,
    verification_enabled,
)
from acid_core.compaction.worker import CompactionWorker, local_runner
from acid_core.errors import UsageError
from acid_core.format import orc_columnar
from acid_core.format.orc_events import BUCKET, OPERATION, AcidStats
from acid_core.format.rowid import RowId, encode_bucket
from acid_core.format.validity import ValidCompactorWriteIdList
from acid_core.metastore.codes import CompactionState, CompactionType
from acid_core.read.merge import read_snapshot
from acid_core.read.state import get_acid_state
from acid_core.storage.fs import FileSystem
from acid_core.write.table_write import TableWrite

MAJOR, MINOR, REBALANCE = CompactionType.MAJOR, CompactionType.MINOR, CompactionType.REBALANCE
COLUMNS = [("id", "int"), ("name", "string")]


# ---------------------------------------------------------------------------------------------------------------
# A table written in real transactions: two buckets, two insert deltas, a delete delta


def write(ms, table: str, *, rows=(), deletes=(), writer_id: int = 0) -> None:
    """One committed write transaction: insert `rows` (as writer `writer_id`), delete the rows of ROW__IDs `deletes`."""
    handle = TableWrite.open(ms, "default", table, agent_info="test")
    if rows:
        handle.insert(rows, writer_id=writer_id)
    if deletes:
        handle.delete(deletes)
    handle.commit()


def rows_of(ms, table: str) -> dict:
    """ROW__ID -> row, as a reader under a fresh metastore snapshot sees the table."""
    name = f"default.{table}"
    at = ms.txns.snapshot([name])
    location = ms.catalog.get_table("default", table).location
    return table_by_row_id(read_snapshot(location, write_ids=at.write_ids[name], txns=at.txns, include_row_id=True))


def filled(ms, table: str = "t", *, bucketed: bool = True, params: dict | None = None) -> str:
    """Two buckets (CLUSTERED BY id INTO 2 BUCKETS, or two writers of an unbucketed table), 60 rows in two insert
    deltas, every 7th row deleted; returns the table's location."""
    ms.catalog.create_table("default", table, COLUMNS, bucket_columns=["id"] if bucketed else (),
                            num_buckets=2 if bucketed else None, params={"transactional": "true", **(params or {})})
    if bucketed:
        write(ms, table, rows=[(i, f"r{i}") for i in range(40)])
        write(ms, table, rows=[(i, f"r{i}") for i in range(40, 60)])
    else:
        for writer in (0, 1):
            write(ms, table, rows=[(i, f"r{i}") for i in range(writer, 60, 2)], writer_id=writer)
    doomed = [RowId(*key) for key, row in sorted(rows_of(ms, table).items()) if row[0] % 7 == 0]
    write(ms, table, deletes=doomed)
    return ms.catalog.get_table("default", table).location


def queue(ms, kind: CompactionType, table: str = "t", **options) -> int:
    enqueued = ms.compactions.enqueue("default", table, None, kind, **options)
    assert enqueued.accepted, enqueued.message
    return enqueued.compaction_id


# ---------------------------------------------------------------------------------------------------------------
# Faulty writers: what a buggy merge or writer would leave in a bucket file


Fault = Callable[[pa.Table], pa.Table]


def dropped(events: pa.Table) -> pa.Table:
    return pa.concat_tables([events.slice(0, events.num_rows // 2), events.slice(events.num_rows // 2 + 1)])


def repeated(events: pa.Table) -> pa.Table:
    middle = events.num_rows // 2
    return pa.concat_tables([events.slice(0, middle + 1), events.slice(middle)])


def swapped(events: pa.Table) -> pa.Table:
    order = np.arange(events.num_rows)
    order[[0, 1]] = order[[1, 0]]
    return events.take(pa.array(order))


def of_another_bucket(events: pa.Table) -> pa.Table:
    """One event's bucket property says bucket 1 (BucketCodec V1), the file is bucket 0's."""
    buckets = events.column(BUCKET).to_numpy().copy()
    buckets[len(buckets) // 2] = encode_bucket(1)
    return events.set_column(events.schema.get_field_index(BUCKET), BUCKET, pa.array(buckets, pa.int32()))


def unchanged(events: pa.Table) -> pa.Table:
    return events


def faulty_writer(monkeypatch, target: str, fault: Fault | str, *, bucket: int = 0) -> None:
    """Replace the task's event writer for bucket `bucket` of the result directory whose name starts with `target`:
    it writes `fault(events)` with pyarrow's plain ORC writer (which checks no order; the task then reads the file
    back itself), or, for "missing", no file, for "extra", the right file plus a copy named as bucket 7's.
    Everything else is written as usual."""
    real = execute._write_events

    def write_events(fs, plan, work, final, events, background, checker=None):
        if not final.startswith(target) or work.bucket != bucket:
            return real(fs, plan, work, final, events, background, checker)
        if fault == "missing":
            for _ in events:  # the merge runs; nothing reaches the file
                pass
            return None
        if fault == "extra":
            stats = real(fs, plan, work, final, events, background, checker)
            path = execute._output_path(fs, plan, work, final)
            shutil.copyfile(path, os.path.join(os.path.dirname(path), "bucket_00007"))
            return stats
        table = fault(pa.concat_tables(list(events)))
        pa_orc.write_table(table, execute._output_path(fs, plan, work, final))
        operations = table.column(OPERATION).to_numpy()
        return AcidStats(int((operations == 0).sum()), 0, int((operations == 2).sum()))

    monkeypatch.setattr(execute, "_write_events", write_events)


def refused(ms, location: str, compaction_id: int, caplog, *, worker: CompactionWorker | None = None) -> str:
    """Run the compaction, which must be refused by its verification: returns the error's text after checking that
    nothing is left of it and the table reads as before."""
    files, rows = tree(location), rows_of(ms, "t")
    caplog.set_level(logging.ERROR, logger="acid_core.compaction.verify")
    with pytest.raises(CompactionVerificationError) as raised:
        (worker or CompactionWorker(ms)).run(compaction_id)
    message = str(raised.value)
    assert message.startswith("verification failed: ") and "\n" not in message
    info = ms.compactions.get(compaction_id)
    assert info.state is CompactionState.FAILED
    assert info.error_message == f"CompactionVerificationError: {message}"  # the queue's `Type: message` line
    assert [(t.txn_id, t.state) for t in ms.txns.show_transactions()] == [(info.txn_id, "a")]  # aborted
    assert tree(location) == files  # no new base or delta, visible or hidden
    assert rows_of(ms, "t") == rows
    logged = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert logged and all(f"compaction {compaction_id} of" in line and "verification failed: " in line
                          for line in logged)
    return message


# ---------------------------------------------------------------------------------------------------------------
# Correct compactions pass


@pytest.mark.parametrize("kind", [MAJOR, MINOR], ids=["major", "minor"])
def test_a_correct_compaction_is_verified_and_committed(ms, kind):
    location = filled(ms)
    rows = rows_of(ms, "t")
    outcome = CompactionWorker(ms).run(queue(ms, kind))
    assert outcome.result == "compacted" and outcome.message.endswith(", verified"), outcome.message
    assert rows_of(ms, "t") == rows
    assert any(name.startswith("base_" if kind is MAJOR else "delta_") for name in os.listdir(location))


def test_the_figures_a_task_returns_match_its_file(ms):
    location = filled(ms)
    runs = []

    def observing(plan):
        results = local_runner(plan)
        runs.append((plan, results))
        return results

    CompactionWorker(ms, runner=observing).run(queue(ms, MAJOR))
    (plan, results), = runs
    assert [r.bucket for r in results] == [0, 1]
    for result in results:
        (figures,) = result.figures
        assert figures.directory == plan.outputs[0][0] and figures.bucket == result.bucket
        assert figures.found.found == figures.expected and figures.expected.events == result.inserts
        assert figures.found.disorder is None and figures.found.foreign_bucket is None
        again = check_file(FileSystem.resolve(location)[0],
                           os.path.join(location, figures.directory, f"bucket_{result.bucket:05d}"), result.bucket)
        assert again.found == figures.expected  # the committed file, read back again


@pytest.mark.parametrize("kind", [MAJOR, MINOR], ids=["major", "minor"])
def test_the_written_files_are_checked_as_the_writer_reads_them_back_not_read_again(ms, monkeypatch, kind):
    """The key columns the writer decodes for hive.acid.key.index are the ones checked: no second decode."""
    filled(ms)

    def read_again(*args, **options):
        raise AssertionError(f"read back a second time: {args[1]}")

    monkeypatch.setattr(verify, "check_file", read_again)
    outcome = CompactionWorker(ms).run(queue(ms, kind))
    assert outcome.message.endswith(", verified"), outcome.message


def test_the_checksum_ignores_order_and_sees_a_changed_row_id():
    owid, bucket, rowid = (np.array([5, 5, 6, 6], np.int64), np.full(4, encode_bucket(0), np.int32),
                           np.array([0, 1, 0, 1], np.int64))
    forward, backward, changed = RowIdCounter(), RowIdCounter(), RowIdCounter()
    forward.add(owid, bucket, rowid)
    backward.add(owid[::-1], bucket[::-1], rowid[::-1])
    changed.add(owid, bucket, np.array([0, 1, 0, 2], np.int64))
    assert forward.tally == backward.tally and forward.tally.events == 4
    assert changed.tally.events == 4 and changed.tally.checksum != forward.tally.checksum
    parts = RowIdCounter()
    parts.add(owid[:1], bucket[:1], rowid[:1])
    parts.add(owid[1:], bucket[1:], rowid[1:])
    assert parts.tally == forward.tally and parts.tally - Tally(1, 0) != forward.tally
    mixed, runs = RowIdCounter(), RowIdCounter()  # a chunk of one (writeId, bucket) takes a shorter path: same sums
    mixed.add(owid, bucket, rowid)
    runs.add(owid[:2], bucket[:2], rowid[:2])
    runs.add(owid[2:], bucket[2:], rowid[2:])
    assert runs.tally == mixed.tally


def test_rows_of_every_statement_id_are_of_their_bucket(ms):
    """A multi-statement transaction's rows carry their statement id in the bucket property (BucketCodec V1)."""
    ms.catalog.create_table("default", "t", COLUMNS, params={"transactional": "true"})
    handle = TableWrite.open(ms, "default", "t", agent_info="test")
    handle.insert([(1, "a"), (2, "b")], statement_id=0)
    handle.insert([(3, "c")], statement_id=2)
    handle.commit()
    write(ms, "t", rows=[(4, "d")])
    outcome = CompactionWorker(ms).run(queue(ms, MAJOR))
    assert outcome.message.endswith(", verified") and len(rows_of(ms, "t")) == 4


# ---------------------------------------------------------------------------------------------------------------
# Faults are refused before the commit


FAULTS = {"dropped": dropped, "repeated": repeated, "swapped": swapped, "of-another-bucket": of_another_bucket,
          "missing": "missing", "extra": "extra"}
# (compaction, result directory the fault is in)
WHERE = {"major": (MAJOR, "base_"), "minor-inserts": (MINOR, "delta_"), "minor-deletes": (MINOR, "delete_delta_")}


def expected_message(name: str) -> str:
    """What the message says of the file, as a pattern."""
    events = r"expected (\d+) events \(checksum 0x[0-9a-f]{16}\)"
    return {
        "dropped": events + r", found (\d+) \(checksum 0x[0-9a-f]{16}\)",
        "repeated": events + r", found (\d+) \(checksum 0x[0-9a-f]{16}\)",
        "swapped": r"ROW__IDs not (strictly )?ascending: \(\d+, \d+, \d+\) after \(\d+, \d+, \d+\)",
        "of-another-bucket": events + r", found \d+ \(checksum 0x[0-9a-f]{16}\); "
                             r"(ROW__IDs not (strictly )?ascending: [^;]+; )?an event has bucket property "
                             rf"{encode_bucket(1)} \(bucket 1\), not of this file's bucket 0",
        "missing": r"expected (\d+) events \(checksum 0x[0-9a-f]{16}\), found no file",
        "extra": r"expected no file \(no events for bucket 7\), found one",
    }[name]


@pytest.mark.parametrize("fault", list(FAULTS))
@pytest.mark.parametrize("where", list(WHERE))
def test_a_faulty_output_is_refused_before_the_commit(ms, caplog, monkeypatch, where, fault):
    kind, target = WHERE[where]
    location = filled(ms)
    bucket = 1 if fault == "missing" else 0
    faulty_writer(monkeypatch, target, FAULTS[fault], bucket=bucket)
    message = refused(ms, location, queue(ms, kind), caplog)
    file_name = "bucket_00007" if fault == "extra" else f"bucket_{bucket:05d}"
    prefix = rf"^verification failed: {target}[0-9_v]+/{file_name}: "
    pattern = prefix + expected_message(fault)
    match = re.match(pattern, message)
    assert match, (pattern, message)
    if fault in ("dropped", "repeated"):
        expected, found = int(match.group(1)), int(match.group(2))
        assert found == expected + (1 if fault == "repeated" else -1)
    if fault == "repeated" and target != "delete_delta_":  # a ROW__ID twice in a base or delta
        assert "ROW__IDs not strictly ascending" in message
    if fault == "swapped":
        assert "expected" not in message  # the same events, only out of order

    monkeypatch.undo()  # the writer mended: the retry compacts
    outcome = CompactionWorker(ms).run(queue(ms, kind))
    assert outcome.result == "compacted" and outcome.message.endswith(", verified")


def test_the_faulty_writer_itself_passes_when_it_writes_the_right_events(ms, monkeypatch):
    """The harness above is not what fails: its plain ORC writer with no fault writes a file that verifies."""
    filled(ms)
    faulty_writer(monkeypatch, "base_", unchanged)
    outcome = CompactionWorker(ms).run(queue(ms, MAJOR))
    assert outcome.message.endswith(", verified")


class _OrcWriterThatLosesARow(pa_orc.ORCWriter):
    """pyarrow's ORC writer, except that the first row handed to it never reaches the file."""

    lost = False

    def write(self, table):
        if not self.lost and table.num_rows:
            table, self.lost = table.slice(1), True
        super().write(table)


def test_a_row_lost_inside_the_orc_writer_is_refused(ms, caplog, monkeypatch):
    """Below the event writer: the encoder loses a row. The figures come from the key columns the writer reads back
    from the finished file (its hive.acid.key.index pass), which hold one row fewer than the merge gave it."""
    location = filled(ms)
    monkeypatch.setattr(orc_columnar, "pa_orc", types.SimpleNamespace(ORCWriter=_OrcWriterThatLosesARow,
                                                                       ORCFile=pa_orc.ORCFile))
    message = refused(ms, location, queue(ms, MAJOR), caplog)
    match = re.match(r"verification failed: base_\d+_v\d+/bucket_00000: expected (\d+) events \(checksum "
                     r"0x[0-9a-f]{16}\), found (\d+) ", message)
    assert match and int(match.group(2)) == int(match.group(1)) - 1, message


def test_a_task_that_reports_nothing_is_refused(ms, caplog):
    """A runner that loses one task's result (its file written all the same): the bucket cannot be vouched for."""
    location = filled(ms)

    def losing(plan):
        return local_runner(plan)[:1]

    message = refused(ms, location, queue(ms, MAJOR), caplog, worker=CompactionWorker(ms, runner=losing))
    assert message.startswith("verification failed: the task of bucket 1 reported no figures")
    assert "more problems" in message  # its file is there, unaccounted for: logged too
    assert any("bucket_00001: expected no file" in r.getMessage() for r in caplog.records)


def test_a_rebalance_checks_counts_order_and_bucket_not_checksums(ms, caplog, monkeypatch):
    """A rebalance renumbers rows: its figures are counts, so a dropped row shows as a count."""
    location = filled(ms, bucketed=False)
    rows = rows_of(ms, "t")
    faulty_writer(monkeypatch, "base_", dropped)
    message = refused(ms, location, queue(ms, REBALANCE, number_of_buckets=2), caplog)
    assert message.startswith("verification failed: base_")
    assert "/bucket_00000: expected 25 events, found 24;" in message and "checksum" not in message
    monkeypatch.undo()
    outcome = CompactionWorker(ms).run(queue(ms, REBALANCE, number_of_buckets=2))
    assert outcome.message.endswith(", verified")
    assert sorted(rows_of(ms, "t").values()) == sorted(rows.values())


def test_overlapping_parts_of_a_split_bucket_are_refused(ms, caplog, monkeypatch):
    """A planner that cuts a bucket into overlapping key intervals: every part writes what it read, so the counts
    agree, but part 0 ends above where part 2 starts (the rows in between twice)."""
    location = filled(ms)
    real = planning.split_keys

    def overlapping(fs, sources, parts):
        return sorted(real(fs, sources, parts), reverse=True)

    class Splitting:
        split_rows, parallelism = 10, 1

        def __call__(self, plan):
            return local_runner(plan)

    monkeypatch.setattr(planning, "split_keys", overlapping)
    message = refused(ms, location, queue(ms, MAJOR), caplog, worker=CompactionWorker(ms, runner=Splitting()))
    assert "ROW__IDs not strictly ascending" in message and "expected" not in message, message
    monkeypatch.undo()
    outcome = CompactionWorker(ms, runner=Splitting()).run(queue(ms, MAJOR))
    assert outcome.message.endswith(", verified") and "tasks)" in outcome.message


def test_parts_joined_out_of_order_are_refused(ms, caplog, monkeypatch):
    """The driver's join of a split bucket's parts is checked too (its footer and key index): here part names that
    are not zero-padded, so that `-10` sorts before `-2` and the parts are joined out of key order."""
    location = filled(ms)

    class Splitting:
        split_rows, parallelism = 2, 1

        def __call__(self, plan):
            assert len(plan.buckets) > 2 * 11  # parts -10 and up in each bucket
            return local_runner(plan)

    monkeypatch.setattr(execute, "compaction_part_name", lambda bucket, part: f"bucket_{bucket:05d}-{part}")
    message = refused(ms, location, queue(ms, MAJOR), caplog, worker=CompactionWorker(ms, runner=Splitting()))
    assert "/bucket_00000: the file joined from its parts has stripes out of key order" in message


# ---------------------------------------------------------------------------------------------------------------
# The setting


def test_compactor_verify_false_commits_unverified(ms, monkeypatch):
    """The escape hatch (and the bench's baseline): no check, whatever the tasks wrote."""
    filled(ms, params={"compactor.verify": "FALSE"})
    faulty_writer(monkeypatch, "base_", dropped)
    outcome = CompactionWorker(ms).run(queue(ms, MAJOR))
    assert outcome.result == "compacted"
    assert outcome.message.endswith(", not verified (compactor.verify is off)")


def test_the_setting_takes_true_or_false_only(ms):
    ms.catalog.create_table("default", "t", COLUMNS, params={"transactional": "true", "compactor.verify": "yes"})
    with pytest.raises(UsageError, match=r"default\.t: compactor\.verify must be 'true' or 'false', got 'yes'"):
        verification_enabled(ms.catalog.get_table("default", "t"))
    ms.catalog.create_table("default", "u", COLUMNS, params={"transactional": "true"})
    assert verification_enabled(ms.catalog.get_table("default", "u"))


def test_a_plan_without_verification_returns_no_figures(ms):
    location = filled(ms)
    fs, path = FileSystem.resolve(location)
    at = ms.txns.snapshot(["default.t"])
    write_ids = ValidCompactorWriteIdList.from_reader(at.write_ids["default.t"])
    state = get_acid_state(path, write_ids=write_ids, txns=at.txns, fs=fs)
    plan = planning.build_plan(fs, state, compaction_id=7, kind=MAJOR, columns=tuple(
        ms.catalog.get_table("default", "t").columns), write_ids=write_ids, txn_id=99, verify=False)
    for _, temp in plan.outputs:
        fs.make_dirs(fs.join(path, temp))
    assert {run_bucket(plan, work).figures for work in plan.buckets} == {None}
