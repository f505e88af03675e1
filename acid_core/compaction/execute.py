"""One compaction task: merge the files of one bucket into the result directories' bucket file.

Major: every row the compactor's snapshot sees (deletes applied, aborted writes dropped) keeps its ROW__ID and is
written as an insert event with originalTransaction = currentTransaction = its original write id (what Hive's
query-based major compaction writes). Minor: every valid insert event goes to the new delta and every valid delete
event to the new delete delta, nothing applied. Rebalance: as major, for one key interval of the whole partition,
renumbered into one new bucket (plan.py). Events are written in key order: each input file streams its stripes
into a k-way merge (`sorted_merge`) whose output is written as it comes (`EventStreamWriter`), as Hive's
OrcRawRecordMerger feeds its OrcRecordUpdater. Pure acid_core: Spark runs this function on its executors, the local
runner in-process. With `plan.verify` a task also counts the ROW__IDs it reads (and those the deletes remove) and
checks those of its file as the writer decodes them back for `hive.acid.key.index`, returning the figures the
driver compares before the commit (`verify`): the data is checked where it is.
Memory: a stripe per input file and per delete file plus the output's stripe buffer, not the bucket; time: linear
in events.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from acid_core.compaction.plan import BucketWork, CompactionPlan
from acid_core.compaction.verify import FileChecker, FileFigures, RowIdCounter, Tally, file_figures
from acid_core.format.delete_events import DeleteCursor, valid_write_id_mask, without_deleted
from acid_core.format.layout import COMPACTION_PARTS_DIR, bucket_file_name, compaction_part_name
from acid_core.format.orc_columnar import EventStreamWriter, event_table, null_rows, rows_struct
from acid_core.format.orc_events import (
    BATCH_ROWS,
    CURRENT_WRITE_ID,
    DELETE_OPERATION,
    INSERT_OPERATION,
    KEY_FIELDS,
    AcidStats,
    EventFile,
    join_event_files,
)
from acid_core.format.rowid import encode_bucket
from acid_core.format.types import arrow_struct
from acid_core.metastore.codes import CompactionType
from acid_core.read.merge import KEY_COLUMNS, SnapshotReader, conform_columns
from acid_core.read.read_plan import ReadPlan, source_lower_bound
from acid_core.read.sorted_merge import merge_sorted
from acid_core.storage.fs import FileSystem


@dataclass(frozen=True, slots=True)
class BucketResult:
    """What one task did: events written and read, and (`plan.verify`) the figures of each file it wrote."""

    bucket: int
    inserts: int
    deletes: int
    events_read: int = 0  # insert and delete events read from the inputs (before deletes and validity applied)
    part: int | None = None  # the part of a split bucket the task wrote
    figures: tuple[FileFigures, ...] | None = None  # None: not verified (plan.verify off)


@dataclass(slots=True)
class _Counters:
    """A verifying task's counts of the insert events it read, and of the pieces of its merged stream the deletes
    took rows from, before and after (their difference: the rows the deletes removed)."""

    read: RowIdCounter
    merged: RowIdCounter
    kept: RowIdCounter

    @classmethod
    def make(cls, *, checksums: bool) -> _Counters:
        return cls(*(RowIdCounter(checksums=checksums) for _ in range(3)))

    @property
    def expected(self) -> Tally:
        """The events the output must hold: those read, minus those the deletes removed."""
        return self.read.tally - (self.merged.tally - self.kept.tally)


def _insert_stream(fs: FileSystem, plan: CompactionPlan, work: BucketWork, *,
                   apply_deletes: bool, read: list[int] | None = None,
                   counters: _Counters | None = None) -> Iterator[pa.Table]:
    """The bucket's visible insert events as data columns plus key columns, in key order, a piece at a time: every
    file streams its stripes into a k-way merge, and the bucket's delete events are applied to the merged stream by
    one cursor per delete file (memory: a stripe per input and per delete file, whatever the bucket holds). A
    key-interval task keeps only its interval, and reads only the files and stripes that can hold it. `read[0]`
    counts the rows read; `counters` the ROW__IDs read, and those the deletes removed (`_counted_deletes`)."""
    write_ids = plan.compactor_write_ids
    read = read if read is not None else [0]
    reader = SnapshotReader(fs, ReadPlan(None, work.inserts, ()), write_ids, with_keys=True,
                            max_delete_events_in_memory=0)
    names = [c.name for c in plan.columns]
    row_type = arrow_struct(plan.columns)

    def conformed(source) -> Iterator[pa.Table]:
        for piece in reader.stream(source, after=work.after, up_to=work.up_to):
            piece = _declared_types(conform_columns(piece, names, source.path), row_type)
            read[0] += piece.num_rows
            if counters is not None:
                counters.read.add_table(piece, KEY_COLUMNS)
            # A stripe goes on in slices (views), so what is copied downstream (deletes dropped, events built)
            # is a slice at a time while the stripe waits to be used up, not a second stripe.
            for start in range(0, piece.num_rows, BATCH_ROWS):
                yield piece.slice(start, BATCH_ROWS)

    # A key-interval task (rebalance, part of a split bucket) skips the files whose lowest write id lies above its
    # interval (the deltas, for every part of a base's range) without opening them; its rows all lie above `after`.
    sources = [(source, source_lower_bound(source)) for source in work.inserts]
    sources = [(source, bound) for source, bound in sources
               if work.up_to is None or bound is None or bound <= work.up_to]
    bounds = [bound if work.after is None else work.after if bound is None else max(bound, work.after)
              for _, bound in sources]
    merged = merge_sorted([conformed(source) for source, _ in sources], KEY_COLUMNS, bounds)
    if not apply_deletes or not work.deletes:
        return merged
    cursors = [DeleteCursor(EventFile(fs, source.path), write_ids, check_validity=source.check_validity,
                            start_key=work.after) for source in work.deletes]
    if counters is None:
        return without_deleted(merged, KEY_COLUMNS, cursors=cursors)
    return _counted_deletes(merged, cursors, counters)


def _counted_deletes(merged: Iterator[pa.Table], cursors: list[DeleteCursor],
                     counters: _Counters) -> Iterator[pa.Table]:
    """`without_deleted`, a piece at a time, counting the pieces the deletes took rows from as they went in and as
    they came out (a piece nothing deletes from comes out as it went in: nothing to count, the two would cancel).
    (Hashing both is cheaper than carrying row numbers through the filter to hash only the rows removed.)"""
    for piece in merged:
        kept = next(without_deleted((piece,), KEY_COLUMNS, cursors=cursors), None)
        if kept is not piece:
            counters.merged.add_table(piece, KEY_COLUMNS)
            if kept is not None:
                counters.kept.add_table(kept, KEY_COLUMNS)
        if kept is not None:
            yield kept


def _declared_types(table: pa.Table, row_type: pa.StructType) -> pa.Table:
    """Data columns cast to the table's declared primitive types, so every piece of a merge has one schema (files
    written before a column was added or widened hold nulls or narrower types)."""
    for index in range(row_type.num_fields):
        target = row_type.field(index).type
        column = table.column(index)
        if column.type != target and not pa.types.is_nested(target):
            table = table.set_column(index, table.field(index).with_type(target), column.cast(target))
    return table


def _output_path(fs: FileSystem, plan: CompactionPlan, work: BucketWork, final: str) -> str:
    """The file a task writes in result directory `final`: its bucket's, or its part of a split bucket."""
    if work.part is None:
        return fs.join(plan.temp_dir(final), bucket_file_name(work.bucket))
    return fs.join(plan.temp_dir(final), COMPACTION_PARTS_DIR, compaction_part_name(work.bucket, work.part))


def _write_events(fs: FileSystem, plan: CompactionPlan, work: BucketWork, final: str,
                  events: Iterator[pa.Table], background: bool, checker: FileChecker | None = None) -> AcidStats | None:
    """Write event tables as they come into the bucket's file of result directory `final` (ORC encoding on a
    thread of its own with `background`); no file (None) when there are none. `checker` sees the file's key
    columns as the writer reads them back."""
    path = _output_path(fs, plan, work, final)
    writer = None
    try:
        for table in events:
            if writer is None:
                writer = EventStreamWriter(fs, path, compression=plan.compression, stripe_bytes=plan.stripe_bytes,
                                           columns=plan.columns, background=background,
                                           key_observer=None if checker is None else checker.add)
            writer.write(table)
        return writer.close() if writer is not None else None
    except BaseException:
        if writer is not None:
            writer.abort()
        raise


def _write_inserts(fs: FileSystem, plan: CompactionPlan, work: BucketWork, final: str,
                   pieces: Iterator[pa.Table], background: bool, checker: FileChecker | None = None) -> int:
    """Insert events (originalTransaction = currentTransaction = the row's write id) written piece by piece; no
    file when no row survives."""
    names = [c.name for c in plan.columns]

    def events() -> Iterator[pa.Table]:
        for table in pieces:
            owid = table.column(KEY_COLUMNS[0]).to_numpy()
            yield event_table(INSERT_OPERATION, owid, table.column(KEY_COLUMNS[1]).to_numpy(),
                              table.column(KEY_COLUMNS[2]).to_numpy(), owid, rows_struct(table.select(names)))

    stats = _write_events(fs, plan, work, final, events(), background, checker)
    return stats.inserts if stats is not None else 0


def _write_rebalanced(fs: FileSystem, plan: CompactionPlan, work: BucketWork, final: str,
                      pieces: Iterator[pa.Table], background: bool, checker: FileChecker | None = None) -> int:
    """A rebalance task's rows as insert events of bucket `work.bucket`, rowIds 0.. in key order; each keeps its
    write id (originalTransaction = currentTransaction), as Hive's rebalance keeps ROW__ID.writeId."""
    names = [c.name for c in plan.columns]
    bucket_property = encode_bucket(work.bucket)
    written = 0

    def events() -> Iterator[pa.Table]:
        nonlocal written
        for table in pieces:
            owid, count = table.column(KEY_COLUMNS[0]).to_numpy(), table.num_rows
            yield event_table(INSERT_OPERATION, owid, np.full(count, bucket_property, np.int32),
                              np.arange(written, written + count, dtype=np.int64), owid,
                              rows_struct(table.select(names)))
            written += count

    stats = _write_events(fs, plan, work, final, events(), background, checker)
    return stats.inserts if stats is not None else 0


def _delete_stream(fs: FileSystem, plan: CompactionPlan, work: BucketWork, read: list[int],
                   counter: RowIdCounter | None = None) -> tuple[Iterator[pa.Table], pa.StructType]:
    """The bucket's valid delete events (keys and writing write id), in key order, a batch at a time (bounded
    however many events a delete stripe holds); `counter` counts their ROW__IDs as they are read."""
    write_ids = plan.compactor_write_ids
    files = [EventFile(fs, source.path) for source in work.deletes]

    def batches(event_file: EventFile, check_validity: bool) -> Iterator[pa.Table]:
        for batch in event_file.iter_batches((*KEY_FIELDS, CURRENT_WRITE_ID)):
            table = pa.Table.from_batches([batch])
            read[0] += table.num_rows
            if check_validity:
                table = table.filter(pa.array(valid_write_id_mask(write_ids,
                                                                  table.column(CURRENT_WRITE_ID).to_numpy())))
            if counter is not None:
                counter.add_table(table, KEY_FIELDS)
            yield table

    row_type = files[0].row_type
    names = [c.name for c in plan.columns]
    fields = pa.struct([pa.field(name, row_type.field(i).type if i < row_type.num_fields else pa.null())
                        for i, name in enumerate(names)])
    merged = merge_sorted([batches(f, source.check_validity) for f, source in zip(files, work.deletes)], KEY_FIELDS)
    return merged, fields


def _write_deletes(fs: FileSystem, plan: CompactionPlan, work: BucketWork, final: str, background: bool,
                   read: list[int], counter: RowIdCounter | None = None, checker: FileChecker | None = None) -> int:
    pieces, row_type = _delete_stream(fs, plan, work, read, counter)

    def events() -> Iterator[pa.Table]:
        for table in pieces:
            original, bucket, row_id = (table.column(n).to_numpy() for n in KEY_FIELDS)
            yield event_table(DELETE_OPERATION, original, bucket, row_id, table.column(CURRENT_WRITE_ID).to_numpy(),
                              null_rows(row_type, table.num_rows))

    stats = _write_events(fs, plan, work, final, events(), background, checker)
    return stats.deletes if stats is not None else 0


def run_bucket(plan: CompactionPlan, work: BucketWork, *, background: bool = False) -> BucketResult:
    """Compact one bucket into the plan's temporary result directories. `background`: encode the output on a second
    thread, for a task that has a second core to itself (a Spark task has spark.task.cpus of them)."""
    fs, _ = FileSystem.resolve(plan.location)
    outputs = [name for name, _ in plan.outputs]
    read = [0]  # events read, counted as the streams are consumed
    if plan.kind in (CompactionType.MAJOR, CompactionType.REBALANCE):
        renumbered = plan.kind is CompactionType.REBALANCE  # new ROW__IDs: counts compare, checksums cannot
        counters = _Counters.make(checksums=not renumbered) if plan.verify else None
        checker = FileChecker(work.bucket, checksums=not renumbered) if plan.verify else None
        pieces = _insert_stream(fs, plan, work, apply_deletes=True, read=read, counters=counters)
        write = _write_rebalanced if renumbered else _write_inserts
        inserted = write(fs, plan, work, outputs[0], pieces, background, checker)
        figures = None if checker is None or counters is None else (  # both or neither: plan.verify
            file_figures(fs, _output_path(fs, plan, work, outputs[0]), checker, directory=outputs[0], part=work.part,
                         expected=counters.expected),)
        return BucketResult(work.bucket, inserted, 0, read[0], part=work.part, figures=figures)
    inserted = deleted = 0
    found: list[FileFigures] = []
    insert_output = next((name for name in outputs if name.startswith("delta_")), None)
    delete_output = next((name for name in outputs if name.startswith("delete_delta_")), None)
    if insert_output and work.inserts:
        counters = _Counters.make(checksums=True) if plan.verify else None
        checker = FileChecker(work.bucket) if plan.verify else None
        inserted = _write_inserts(fs, plan, work, insert_output,
                                  _insert_stream(fs, plan, work, apply_deletes=False, read=read, counters=counters),
                                  background, checker)
        if checker is not None and counters is not None:  # both or neither: plan.verify
            found.append(file_figures(fs, _output_path(fs, plan, work, insert_output), checker,
                                      directory=insert_output, part=work.part, expected=counters.read.tally))
    if delete_output and work.deletes:
        counter = RowIdCounter() if plan.verify else None
        checker = FileChecker(work.bucket, strict=False) if plan.verify else None  # a row deleted twice: two events
        deleted = _write_deletes(fs, plan, work, delete_output, background, read, counter, checker)
        if checker is not None and counter is not None:  # both or neither: plan.verify
            found.append(file_figures(fs, _output_path(fs, plan, work, delete_output), checker,
                                      directory=delete_output, part=work.part, expected=counter.tally))
    return BucketResult(work.bucket, inserted, deleted, read[0], part=work.part,
                        figures=tuple(found) if plan.verify else None)


def join_parts(fs: FileSystem, plan: CompactionPlan) -> None:
    """After the tasks of a split major compaction: concatenate each bucket's parts, in key order, stripe by stripe
    into the bucket's one file, with the user metadata of one file (`hive.acid.key.index`: the parts' entries in
    order; `hive.acid.stats`: their sums), then remove the parts. A part no row survived in wrote no file.
    Memory: a copy buffer; time: one pass over the parts' bytes but the first's, which on a local filesystem
    becomes the bucket's file in place (the driver's, once per split bucket)."""
    split = sorted({work.bucket for work in plan.buckets if work.part is not None})
    if not split:
        return
    final = plan.outputs[0][0]
    parts_dir = fs.join(plan.temp_dir(final), COMPACTION_PARTS_DIR)
    present = {entry.name for entry in fs.list_dir(parts_dir, missing_ok=True)}
    for bucket in split:
        names = [compaction_part_name(bucket, work.part) for work in plan.buckets
                 if work.bucket == bucket and work.part is not None]
        paths = [fs.join(parts_dir, name) for name in sorted(n for n in names if n in present)]
        if not paths:
            continue
        join_event_files(fs, paths, fs.join(plan.temp_dir(final), bucket_file_name(bucket)))
    fs.delete_dir(parts_dir)
