"""Merge-on-read: the rows of one partition under one snapshot, as Hive's vectorized ACID reader returns them.

The read is planned (`acid_core.read.read_plan`: base or original files, then insert deltas, plus delete deltas), then
every insert file is read column-wise, filtered to the write ids the snapshot sees, and stripped of deleted rows.
Delete events are held in a `DeleteRegistry` when they fit under `max_delete_events_in_memory` (Hive's
`hive.transactional.events.mem`), and streamed by `DeleteCursor`s in a sort-merge otherwise.

Over 500 lines because its forms of one read (a whole table, `read_snapshot`; batches, `read_batches`; a unit at a
time for Spark's tasks, `PartitionReader`; the compactor's key-ordered stream, `SnapshotReader.stream`) share the
per-file steps (write-id filter, delete path, column conforming) that make their results equal; split apart, those
steps would drift.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence

import numpy as np
import pyarrow as pa

from acid_core.errors import SchemaMismatchError, UnsortedEventsError, UsageError
from acid_core.format.delete_events import (
    DeleteCursor,
    DeleteRegistry,
    Key,
    KeyArrays,
    read_delete_keys,
    valid_write_id_mask,
    without_deleted,
)
from acid_core.format.orc_events import (
    BATCH_ROWS,
    CURRENT_WRITE_ID,
    INSERT_OPERATION,
    KEY_FIELDS,
    OPERATION,
    ROW,
    EventFile,
)
from acid_core.format.validity import ValidTxnList, ValidWriteIdList
from acid_core.read.read_plan import (
    DEFAULT_MAX_DELETE_EVENTS_IN_MEMORY,
    InsertSource,
    ReadPlan,
    delete_event_count,
    plan_read,
    read_units,
    source_lower_bound,
)
from acid_core.read.sorted_merge import merge_sorted
from acid_core.read.state import get_acid_state
from acid_core.storage.fs import FileSystem, concurrently

ROW_ID_COLUMN = "row__id"
KEY_COLUMNS = ("__owid", "__bucket", "__rowid")


WHOLE_REGISTRY_EVENTS = 1 << 20  # delete events (20 bytes each in memory) a registry holds at once, at most


class SnapshotReader:
    """Reads the insert sources of a plan and applies validity and delete filtering to each, a batch at a time.

    Memory: one batch (about BATCH_BYTES) per insert file being read, whatever its stripes hold (a stripe written by
    Hive decodes to hundreds of MiB), plus the delete events: on the sort-merge path one batch per delete file; with
    the delete events held in memory (`DeleteRegistry`), all of them up to WHOLE_REGISTRY_EVENTS, above that those
    of the key interval of the stripes being read (the files' `hive.acid.key.index` tells which delete stripes can
    hold it), not the partition's.
    """

    def __init__(self, fs: FileSystem, plan: ReadPlan, write_ids: ValidWriteIdList, *, with_keys: bool,
                 max_delete_events_in_memory: int, sort_merge: bool | None = None) -> None:
        """`sort_merge` imposes a delete path decided elsewhere (see `uses_sort_merge`); None decides here."""
        self.fs, self.plan, self.write_ids = fs, plan, write_ids
        self.delete_files = [EventFile(fs, source.path) for source in plan.deletes]
        total = delete_event_count(self.delete_files)
        self.streaming = total > max_delete_events_in_memory if sort_merge is None else sort_merge
        self._use_registry = bool(total) and not self.streaming
        # up to WHOLE_REGISTRY_EVENTS the registry holds every delete event, read once; above, those of the key
        # interval being read, read again for each interval
        self._whole_registry = total <= WHOLE_REGISTRY_EVENTS
        self._registry: tuple[tuple[Key | None, Key | None], DeleteRegistry] | None = None  # the last interval's
        self.need_keys = with_keys or self.streaming or bool(total)
        self.with_keys = with_keys

    def units(self) -> list[tuple[InsertSource, int | None]]:
        """Independent pieces of work: one per stripe of a multi-stripe file, else one per file."""
        return read_units(self.fs, self.plan)

    def _open(self, source: InsertSource) -> EventFile | None:
        """The source's file (None for an empty one), refused when a bucket file lacks the ACID event schema."""
        if source.length == 0:
            return None
        event_file = EventFile(self.fs, source.path, length=source.length)
        if source.synthetic is None and not event_file.is_acid:
            raise SchemaMismatchError(f"{source.path}: a bucket file in an ACID directory does not have the ACID event schema")
        return event_file

    def read(self, unit: tuple[InsertSource, int | None]) -> pa.Table | None:
        """A unit's surviving rows in one table (None when it has none)."""
        pieces = list(self.pieces(unit))
        if not pieces:
            return None
        return pieces[0] if len(pieces) == 1 else pa.concat_tables(pieces)

    def pieces(self, unit: tuple[InsertSource, int | None]) -> Iterator[pa.Table]:
        """A unit's surviving rows a batch at a time: what `read` returns, never a whole stripe at once."""
        source, stripe = unit
        yield from self.stream(source, stripes=None if stripe is None else range(stripe, stripe + 1))

    def stream(self, source: InsertSource, *, after: Key | None = None, up_to: Key | None = None,
               stripes: range | None = None) -> Iterator[pa.Table]:
        """One insert source's surviving rows a batch at a time, in key order (whichever delete path): what a
        compaction merges. Memory: one batch, plus the delete events of the key interval at hand.

        `after` / `up_to` keep only the rows whose key is in (after, up_to] (None: unbounded); of a file with
        `hive.acid.key.index` only the stripes that can hold such keys are read (a key-range task of a rebalance).
        `stripes` reads only those stripes (a read task's unit).
        """
        event_file = self._open(source)
        if event_file is None:
            return
        if not event_file.is_acid or source.synthetic is not None:
            yield from self._original(source, event_file, after, up_to)
            return
        wanted = stripes if stripes is not None else _stripes_between(event_file, after, up_to)
        if not wanted:
            return
        check_events = _may_hold_other_events(event_file)
        columns = [ROW] + (list(KEY_FIELDS) if self.need_keys else []) + (
            [CURRENT_WRITE_ID] if source.check_validity else []) + ([OPERATION] if check_events else [])
        cursors = self._cursors(event_file, wanted.start) if self.streaming else None
        registry = self._registry_for(_interval(event_file, source, wanted)) if self._use_registry else None
        for table in _batches(event_file, columns, wanted):
            if check_events:
                _refuse_acid_v1_events(event_file, table.column(OPERATION))
            keys = KeyArrays(*(table.column(n).to_numpy() for n in KEY_FIELDS)) if self.need_keys else None
            data = _flatten_row(table.column(ROW), table.num_rows)
            keep = valid_write_id_mask(self.write_ids, table.column(CURRENT_WRITE_ID).to_numpy()) \
                if source.check_validity else None
            piece = self._filter(source.path, data, keys, keep, cursors, registry, after, up_to)
            if piece is not None and piece.num_rows:
                yield piece

    def _original(self, source: InsertSource, event_file: EventFile, after: Key | None,
                  up_to: Key | None) -> Iterator[pa.Table]:
        """An original (pre-ACID) file's rows, or a base file read with synthesized ROW__IDs (`synthetic`), a batch
        at a time: the keys are the file's position from the first synthesized rowId."""
        names = [ROW] if event_file.is_acid else list(event_file.row_type.names)
        ids = source.synthetic
        assert ids is not None, "`_open` refuses a non-ACID file without synthesized ids"
        position = ids.first_row_id
        registry = None
        if self._use_registry:
            registry = self._registry_for((source_lower_bound(source),
                                           (ids.write_id, ids.bucket_property, ids.first_row_id + event_file.num_rows)))
        cursors = self._cursors(event_file) if self.streaming else None
        for table in _batches(event_file, names, None):
            data = _flatten_row(table.column(ROW), table.num_rows) if event_file.is_acid else table
            count = data.num_rows
            keys = KeyArrays(np.full(count, ids.write_id, np.int64), np.full(count, ids.bucket_property, np.int32),
                             np.arange(position, position + count, dtype=np.int64))
            position += count
            piece = self._filter(source.path, data, keys, None, cursors, registry, after, up_to)
            if piece is not None and piece.num_rows:
                yield piece

    def _registry_for(self, interval: tuple[Key | None, Key | None]) -> DeleteRegistry:
        """The delete events with keys in [low, high] (None: open), from the delete stripes that can hold them; the
        last interval's registry is kept (the batches of one stripe, the stripes of one unit share it)."""
        if self._whole_registry:
            interval = (None, None)
        if self._registry is not None and self._registry[0] == interval:
            return self._registry[1]
        self._registry = None  # the previous interval's events go before the next ones are read
        low, high = interval
        parts = [read_delete_keys(f, self.write_ids, check_validity=s.check_validity, low=low, high=high)
                 for f, s in zip(self.delete_files, self.plan.deletes)]
        registry = DeleteRegistry(KeyArrays.concat(parts))
        self._registry = (interval, registry)
        return registry

    def _cursors(self, event_file: EventFile, stripe: int = 0) -> list[DeleteCursor]:
        """Delete cursors starting where the insert file (or its stripe `stripe`) starts: delete stripes wholly
        below are skipped by their key index."""
        start = None
        ends = event_file.key_index() if stripe else []
        if stripe and len(ends) == event_file.num_stripes:
            start = ends[stripe - 1]  # the previous stripe's last key: nothing below it can delete a row here
        elif event_file.is_acid and event_file.num_rows:
            # the first key from a small first batch (a 1-row batch size makes the scanner cut the whole stripe
            # into 1-row batches before it can stop: seconds for a stripe of millions of rows)
            batches = event_file.iter_batches(KEY_FIELDS, batch_rows=_SAMPLE_ROWS, stripes=range(stripe, stripe + 1))
            first = next(batches, None)
            batches.close()
            if first is not None and first.num_rows:
                owid, bucket, rowid = (int(first.column(name)[0].as_py()) for name in KEY_FIELDS)
                start = (owid, bucket, rowid)
        return [DeleteCursor(f, self.write_ids, check_validity=s.check_validity, start_key=start)
                for f, s in zip(self.delete_files, self.plan.deletes)]

    def _filter(self, path: str, data: pa.Table, keys: KeyArrays | None, keep: np.ndarray | None,
                cursors: list[DeleteCursor] | None, registry: DeleteRegistry | None, after: Key | None,
                up_to: Key | None) -> pa.Table | None:
        """A batch's rows without those outside (after, up_to], invisible (`keep` False) or deleted."""
        if data.num_rows == 0:
            return None
        if after is not None or up_to is not None:
            assert keys is not None, "a key interval is read with keys (`stream`'s callers read with_keys)"
            inside = keys.between(after, up_to)
            keep = inside if keep is None else keep & inside
        if cursors is not None:
            assert keys is not None, "the sort-merge path reads keys (need_keys)"
            if not keys.is_sorted():
                raise UnsortedEventsError(f"{path}: insert events are not sorted by (originalTransaction, bucket, "
                                          "rowId); Hive's readers require it")
            low, high = keys.first(), keys.last()
            registry = DeleteRegistry(KeyArrays.concat([c.events_between(low, high) for c in cursors]),
                                      ordered=len(cursors) == 1)
        if registry is not None and len(registry):
            assert keys is not None, "a reader with delete events reads keys (need_keys)"
            alive = ~registry.deleted_mask(keys)
            keep = alive if keep is None else keep & alive
        if self.with_keys:
            assert keys is not None, "with_keys reads keys (need_keys)"
            data = data.append_column(KEY_COLUMNS[0], pa.array(keys.owid)).append_column(
                KEY_COLUMNS[1], pa.array(keys.bucket)).append_column(KEY_COLUMNS[2], pa.array(keys.rowid))
        return data if keep is None or keep.all() else data.filter(pa.array(keep))


BATCH_BYTES = 4 << 20  # decoded bytes a streamed batch aims at (rows of 1 KB: 4,096 rows, not BATCH_ROWS)
_SAMPLE_ROWS = 1_024


def _batches(event_file: EventFile, columns: list[str], stripes: range | None) -> Iterator[pa.Table]:
    """The columns of the stripes (every stripe: None) a batch at a time: at most BATCH_ROWS rows and about
    BATCH_BYTES decoded bytes (the rows' size measured on the first rows), so memory follows neither a stripe nor
    the width of a row. A file that small is read in one go (no streaming reader to set up for a small delta)."""
    if event_file.num_rows <= BATCH_ROWS and (stripes is None or len(stripes) == event_file.num_stripes):
        table = event_file.read(columns)
        if table.num_rows:
            yield table
        return
    first = 0 if stripes is None else stripes.start
    sample = event_file.iter_batches(columns, batch_rows=_SAMPLE_ROWS, stripes=range(first, first + 1))
    head = next(sample, None)
    sample.close()
    per_row = head.nbytes / head.num_rows if head is not None and head.num_rows else 1.0
    batch_rows = max(_SAMPLE_ROWS, min(BATCH_ROWS, int(BATCH_BYTES / max(per_row, 1.0))))
    for batch in event_file.iter_batches(columns, batch_rows=batch_rows, stripes=stripes):
        if batch.num_rows:
            yield pa.Table.from_batches([batch])


def _interval(event_file: EventFile, source: InsertSource, stripes: range) -> tuple[Key | None, Key | None]:
    """Keys [low, high] the stripes can hold: by the file's `hive.acid.key.index` (stripe i holds the keys after
    stripe i-1's last key, up to its own), and for the first stripe of a delta by its lowest write id."""
    ends = event_file.key_index()
    if len(ends) != event_file.num_stripes:
        return source_lower_bound(source), None
    low = ends[stripes.start - 1] if stripes.start else source_lower_bound(source)
    return low, ends[stripes.stop - 1]


def _stripes_between(event_file: EventFile, after: Key | None, up_to: Key | None) -> range:
    """The stripes of an event file that can hold keys in (after, up_to]: by the file's `hive.acid.key.index`
    (stripe i holds keys in (last key of stripe i-1, last key of stripe i]); every stripe without a usable index.
    They are consecutive: the keys ascend through the file."""
    count = event_file.num_stripes
    ends = event_file.key_index() if after is not None or up_to is not None else []
    if len(ends) != count:
        return range(count)
    chosen = [i for i in range(count)
              if (after is None or ends[i] > after) and (up_to is None or i == 0 or ends[i - 1] < up_to)]
    return range(chosen[0], chosen[-1] + 1) if chosen else range(0)


def _may_hold_other_events(event_file: EventFile) -> bool:
    """Whether an insert file's `hive.acid.stats` counts updates or deletes: Hive 2.x's OrcRecordUpdater records an
    UPDATE's delete count in its insert file's stats (HIVE-17284), so a count there only triggers a look at the
    operation column (`_refuse_acid_v1_events`), which decides."""
    stats = event_file.stats
    return stats is not None and bool(stats.updates or stats.deletes)


def _refuse_acid_v1_events(event_file: EventFile, operations: pa.ChunkedArray) -> None:
    """An insert file must hold only insert events (split-update layout)."""
    if (operations.to_numpy() != INSERT_OPERATION).any():
        raise SchemaMismatchError(
            f"{event_file.path}: insert delta holds update or delete events; the ACID v1 layout (before split-update) "
            "is not supported: run a major compaction in Hive first")


def _flatten_row(row: pa.ChunkedArray, num_rows: int) -> pa.Table:
    """The `row` struct as a table of its fields."""
    fields = row.type
    arrays = [pa.chunked_array([chunk.field(i) for chunk in row.chunks], type=fields.field(i).type)
              for i in range(fields.num_fields)]
    if not arrays:
        return pa.table({"__empty": pa.nulls(num_rows)}).drop_columns(["__empty"])
    return pa.Table.from_arrays(arrays, names=[fields.field(i).name for i in range(fields.num_fields)])


def conform_columns(table: pa.Table, names: Sequence[str], source: str) -> pa.Table:
    """Rename data columns positionally (Hive writes `_col0`...); add nulls for columns the file predates."""
    data_names = [n for n in table.column_names if n not in KEY_COLUMNS]
    if len(data_names) > len(names):
        raise SchemaMismatchError(f"{source}: file has {len(data_names)} columns, the table only {len(names)} ({list(names)})")
    columns = [table.column(n) for n in data_names]
    for _ in range(len(names) - len(data_names)):
        columns.append(pa.nulls(table.num_rows))
    keys = [table.column(n) for n in KEY_COLUMNS if n in table.column_names]
    return pa.Table.from_arrays(columns + keys, names=list(names) + [n for n in KEY_COLUMNS if n in table.column_names])


PARALLEL_UNIT_BYTES = 1 << 20  # on a local disk, units of files at least this big are read on threads


def _read_units(fs: FileSystem, plan: ReadPlan, reader: SnapshotReader, units: list, threads: int) -> list:
    """Every unit read, in order, on up to `threads` threads of the process's I/O pool. On a remote filesystem each
    unit is a task; on a local disk each big unit (a stripe of a multi-stripe file, a file of PARALLEL_UNIT_BYTES or
    more) is one and all the small ones together are one more, read in turn: a small delta's read is a fraction of
    a millisecond, less than handing it to a thread (and a busy machine makes each hand-over cost a scheduling
    slice), while a base and the deltas beside it still overlap."""
    if fs.io_threads > 1:
        groups = [[index] for index in range(len(units))]
    else:
        sizes = _file_sizes(plan)
        big = [stripe is not None or sizes.get(source.path, PARALLEL_UNIT_BYTES) >= PARALLEL_UNIT_BYTES
               for source, stripe in units]
        small = [index for index, is_big in enumerate(big) if not is_big]
        groups = [[index] for index, is_big in enumerate(big) if is_big] + ([small] if small else [])
    tables: list = [None] * len(units)
    read = concurrently(lambda group: [reader.read(units[index]) for index in group], groups, threads=threads,
                        inline_below=2)
    for group, found in zip(groups, read):
        for index, table in zip(group, found):
            tables[index] = table
    return tables


def _file_sizes(plan: ReadPlan) -> dict[str, int]:
    """Bytes of the plan's data files by path, from the partition's listing (no further I/O)."""
    state = plan.state
    if state is None or state.listing is None:
        return {}
    names = ([state.base.name] if state.base is not None else []) + [delta.name for delta in state.deltas]
    return {child.path: child.size for name in names for child in state.listing.children(name) if not child.is_dir}


def execute_read_plan(fs: FileSystem, plan: ReadPlan, write_ids: ValidWriteIdList, *, include_row_id: bool = False,
                      order_by_row_id: bool = False, column_names: Sequence[str] | None = None,
                      max_delete_events_in_memory: int = DEFAULT_MAX_DELETE_EVENTS_IN_MEMORY,
                      threads: int = 2) -> pa.Table:
    """Execute a read plan into one table (data columns, then `row__id` when asked for)."""
    with_keys = include_row_id or order_by_row_id
    reader = SnapshotReader(fs, plan, write_ids, with_keys=with_keys,
                             max_delete_events_in_memory=max_delete_events_in_memory)
    units = reader.units()
    tables = _read_units(fs, plan, reader, units, threads)
    pairs = [(t, source.path) for t, (source, _) in zip(tables, units) if t is not None]
    names = list(column_names) if column_names else _column_names(pairs)
    if not pairs:
        return _empty_result(names, include_row_id)
    table = pa.concat_tables([conform_columns(t, names, path) for t, path in pairs], promote_options="permissive")
    if order_by_row_id:
        order = np.lexsort([table.column(n).to_numpy() for n in reversed(KEY_COLUMNS)])
        table = table.take(pa.array(order))
    return _finish_keys(table, include_row_id)


def _finish_keys(table: pa.Table, include_row_id: bool) -> pa.Table:
    """Turn the key columns into the leading `row__id` struct, or drop them."""
    if include_row_id:
        row_id = pa.StructArray.from_arrays([table.column(n).combine_chunks() for n in KEY_COLUMNS],
                                            names=["writeid", "bucketid", "rowid"])
        table = table.drop_columns(list(KEY_COLUMNS))
        return table.add_column(0, ROW_ID_COLUMN, row_id)
    return table.drop_columns([n for n in KEY_COLUMNS if n in table.column_names])


class PartitionReader:
    """One partition's snapshot read, a unit at a time, each unit's rows in `execute_read_plan`'s output form.

    What a distributed reader runs on its tasks: the driver plans (`plan_read`, `uses_sort_merge`, `read_units`),
    each task builds one PartitionReader per partition it reads, which loads that partition's delete events once
    (or streams them, when `sort_merge`), then reads its units. Concatenating every unit's table in `units()` order
    gives `execute_read_plan` of the same plan (without `order_by_row_id`).
    """

    def __init__(self, fs: FileSystem, plan: ReadPlan, write_ids: ValidWriteIdList, *, column_names: Sequence[str],
                 include_row_id: bool = False, sort_merge: bool | None = None,
                 max_delete_events_in_memory: int = DEFAULT_MAX_DELETE_EVENTS_IN_MEMORY) -> None:
        self._reader = SnapshotReader(fs, plan, write_ids, with_keys=include_row_id,
                                       max_delete_events_in_memory=max_delete_events_in_memory, sort_merge=sort_merge)
        self.column_names = tuple(column_names)
        self.include_row_id = include_row_id

    @property
    def sort_merge(self) -> bool:
        return self._reader.streaming

    def units(self) -> list[tuple[InsertSource, int | None]]:
        return self._reader.units()

    def read_unit(self, unit: tuple[InsertSource, int | None]) -> pa.Table | None:
        """The unit's surviving rows: `row__id` first when asked for, then the data columns named `column_names`
        (files written by Hive say `_col0`...; columns a file predates are null). None when the unit has no rows.

        Raises:
            AcidError: a corrupt or foreign file, or one with more columns than `column_names`.
        """
        table = self._reader.read(unit)
        if table is None or table.num_rows == 0:
            return None
        return _finish_keys(conform_columns(table, self.column_names, unit[0].path), self.include_row_id)

    def read_pieces(self, unit: tuple[InsertSource, int | None]) -> Iterator[pa.Table]:
        """`read_unit` a stripe at a time (the sort-merge path never holds a whole file)."""
        for table in self._reader.pieces(unit):
            yield _finish_keys(conform_columns(table, self.column_names, unit[0].path), self.include_row_id)


def _column_names(pairs: list[tuple[pa.Table, str]]) -> list[str]:
    """Column names from the widest file read (file names are used when the caller gives none)."""
    best: list[str] = []
    for table, _ in pairs:
        names = [n for n in table.column_names if n not in KEY_COLUMNS]
        if len(names) > len(best):
            best = names
    return best


def _empty_result(names: Sequence[str], include_row_id: bool) -> pa.Table:
    columns = {name: pa.array([], pa.null()) for name in names}
    table = pa.table(columns) if columns else pa.table({})
    if include_row_id:
        row_id_type = pa.struct([("writeid", pa.int64()), ("bucketid", pa.int32()), ("rowid", pa.int64())])
        table = table.add_column(0, ROW_ID_COLUMN, pa.array([], row_id_type))
    return table


def _plan_snapshot(location: str, write_ids: ValidWriteIdList | None, txns: ValidTxnList | None, *,
                   missing_ok: bool, fs: FileSystem | None) -> tuple[FileSystem, ValidWriteIdList, ReadPlan]:
    """The filesystem, the write-id list (None: everything committed) and the read plan of one directory."""
    if fs is None:
        fs, location = FileSystem.resolve(location)
    write_ids = write_ids if write_ids is not None else ValidWriteIdList()
    state = get_acid_state(location, write_ids=write_ids, txns=txns, ignore_empty_files=True, missing_ok=missing_ok,
                           fs=fs)
    return fs, write_ids, plan_read(fs, state, write_ids)


def _result_schema(row_types: Sequence[pa.StructType], names: Sequence[str], include_row_id: bool) -> pa.Schema:
    """The schema of a streamed read, from the files' row types (footers only): each data column's type from the
    first file that has it (positional, as `conform_columns` names them)."""
    if not row_types:
        return _empty_result(names, include_row_id).schema
    types: list[pa.DataType] = [pa.null()] * len(names)
    for row_type in row_types:
        for index in range(min(len(names), row_type.num_fields)):
            if pa.types.is_null(types[index]):
                types[index] = row_type.field(index).type
    keys = [pa.array([], pa.int64()), pa.array([], pa.int32()), pa.array([], pa.int64())]
    empty = pa.table([pa.array([], t) for t in types] + keys, names=list(names) + list(KEY_COLUMNS))
    return _finish_keys(empty, include_row_id).schema


def read_batches(location: str, *, write_ids: ValidWriteIdList | None = None, txns: ValidTxnList | None = None,
                 include_row_id: bool = False, order_by_row_id: bool = False,
                 column_names: Sequence[str] | None = None,
                 max_delete_events_in_memory: int = DEFAULT_MAX_DELETE_EVENTS_IN_MEMORY, batch_rows: int = 65_536,
                 missing_ok: bool = False, fs: FileSystem | None = None) -> pa.RecordBatchReader:
    """`read_snapshot` as a stream of record batches: every file yields its stripes (deletes applied per stripe), in
    file order, or merged in `row__id` order (`order_by_row_id`: the files are each in key order, so a k-way merge).
    Memory: a stripe per file being merged (one stripe without ordering), not the partition, and the delete events:
    up to `max_delete_events_in_memory` of them held at once (Hive's hive.transactional.events.mem), above that (or
    with 0) streamed, one stripe per delete file. Same arguments as `read_snapshot`; the schema comes from the
    files' footers.
    """
    if batch_rows < 1:
        raise UsageError(f"batch_rows must be at least 1, got {batch_rows!r}")
    fs, write_ids, plan = _plan_snapshot(location, write_ids, txns, missing_ok=missing_ok, fs=fs)
    # In row__id order the files' streams are merged first and the deletes applied to the merged stream once (one
    # delete stripe per delete file on the sort-merge path, not one per merged file); in file order each file's
    # stream applies them itself, one file after another.
    deletes_after_merge = order_by_row_id and bool(plan.deletes)
    reader = SnapshotReader(fs, dataclasses.replace(plan, deletes=()) if deletes_after_merge else plan, write_ids,
                            with_keys=include_row_id or order_by_row_id,
                            max_delete_events_in_memory=max_delete_events_in_memory)
    row_types = [event_file.row_type for source in plan.inserts if (event_file := reader._open(source)) is not None]
    if column_names:
        names = list(column_names)
    else:
        names = list(max(row_types, key=lambda row_type: row_type.num_fields, default=pa.struct([])).names)
    schema = _result_schema(row_types, names, include_row_id)

    def pieces(source: InsertSource):
        for table in reader.stream(source):
            yield conform_columns(table, names, source.path)

    streams = [pieces(source) for source in plan.inserts]
    if order_by_row_id:
        tables = merge_sorted(streams, KEY_COLUMNS, [source_lower_bound(source) for source in plan.inserts])
        if deletes_after_merge:
            tables = _without_deleted(fs, plan, write_ids, tables, max_delete_events_in_memory)
    else:
        tables = (t for stream in streams for t in stream)

    def batches():
        for table in tables:
            table = _finish_keys(table, include_row_id)
            if table.schema != schema:
                table = table.cast(schema)
            yield from table.to_batches(max_chunksize=batch_rows)

    return pa.RecordBatchReader.from_batches(schema, batches())


def _without_deleted(fs: FileSystem, plan: ReadPlan, write_ids: ValidWriteIdList, tables: Iterator[pa.Table],
                     max_delete_events_in_memory: int) -> Iterator[pa.Table]:
    """A stream in key order without its deleted rows: the delete events in one registry when they fit the bound,
    else one cursor per delete file advancing with the stream."""
    files = [EventFile(fs, source.path) for source in plan.deletes]
    if delete_event_count(files) > max_delete_events_in_memory:
        return without_deleted(tables, KEY_COLUMNS, cursors=[DeleteCursor(f, write_ids, check_validity=s.check_validity)
                                                             for f, s in zip(files, plan.deletes)])
    registry = DeleteRegistry(KeyArrays.concat([read_delete_keys(f, write_ids, check_validity=s.check_validity)
                                                for f, s in zip(files, plan.deletes)]))
    return without_deleted(tables, KEY_COLUMNS, registry=registry)


def read_snapshot(location: str, *, write_ids: ValidWriteIdList | None = None, txns: ValidTxnList | None = None,
                  include_row_id: bool = False, order_by_row_id: bool = False, column_names: Sequence[str] | None = None,
                  max_delete_events_in_memory: int = DEFAULT_MAX_DELETE_EVENTS_IN_MEMORY, threads: int = 2,
                  missing_ok: bool = False, fs: FileSystem | None = None) -> pa.Table:
    """Rows of one partition (or unpartitioned table) directory under a snapshot.

    Args:
        location: the partition directory (local path or URI).
        write_ids: the table's ValidWriteIdList; None means every write id is committed.
        txns: the ValidTxnList deciding visibility of `_vT` directories; None means all committed.
        include_row_id: add a `row__id` struct column (writeid, bucketid, rowid) first.
        order_by_row_id: sort rows by row__id (otherwise they come in file order).
        column_names: names for the data columns (files written by Hive carry `_col0`...).
        max_delete_events_in_memory: above this many delete events, stream them in a sort-merge.
        missing_ok: a directory that does not exist reads as no rows (a partition registered in the catalog before
            anything was written to it); otherwise it is an error, as a mistyped path should be.

    Raises:
        AcidError: an unreadable directory, a corrupt file, or a snapshot the directory cannot serve.
    """
    fs, write_ids, plan = _plan_snapshot(location, write_ids, txns, missing_ok=missing_ok, fs=fs)
    return execute_read_plan(fs, plan, write_ids, include_row_id=include_row_id, order_by_row_id=order_by_row_id,
                     column_names=column_names, max_delete_events_in_memory=max_delete_events_in_memory,
                     threads=threads)
