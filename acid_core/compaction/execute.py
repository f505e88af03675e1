"""One compaction task: merge the files of one bucket into the result directories' bucket file.

Major: every row the compactor's snapshot sees (deletes applied, aborted writes dropped) keeps its ROW__ID and is
written as an insert event with originalTransaction = currentTransaction = its original write id (what Hive's
query-based major compaction writes). Minor: every valid insert event goes to the new delta and every valid delete
event to the new delete delta, nothing applied. Events are written in key order. Pure acid_core: Spark runs this
function on its executors, the local runner in-process.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from acid_core.compaction.codes import CompactionType
from acid_core.compaction.plan import BucketWork, CompactionPlan
from acid_core.delete_events import KeyArrays, valid_write_id_mask
from acid_core.fs import FileSystem
from acid_core.layout import bucket_file_name
from acid_core.merge import (DEFAULT_MAX_DELETE_EVENTS_IN_MEMORY, KEY_COLUMNS, ReadPlan, SnapshotReader,
                             conform_columns)
from acid_core.orc_columnar import event_table, null_rows, write_event_table
from acid_core.orc_events import CURRENT_WRITE_ID, DELETE_OPERATION, INSERT_OPERATION, KEY_FIELDS, EventFile


@dataclass(frozen=True, slots=True)
class BucketResult:
    bucket: int
    inserts: int
    deletes: int


def _sorted(keys: KeyArrays) -> np.ndarray | None:
    """An order that sorts the keys, or None when they already are (the usual case)."""
    return None if keys.is_sorted() else np.lexsort((keys.rowid, keys.bucket, keys.owid))


def _insert_events(fs: FileSystem, plan: CompactionPlan, work: BucketWork, *, apply_deletes: bool,
                   max_delete_events_in_memory: int) -> pa.Table | None:
    """The bucket's visible insert events as data columns plus key columns, in key order."""
    read = ReadPlan(None, work.inserts, work.deletes if apply_deletes else ())
    reader = SnapshotReader(fs, read, plan.compactor_write_ids, with_keys=True,
                             max_delete_events_in_memory=max_delete_events_in_memory)
    units = reader.units()
    with ThreadPoolExecutor(max_workers=2) as pool:  # stripes decode in parallel (pyarrow releases the GIL)
        tables = list(pool.map(reader.read, units))
    pieces = [(table, unit[0].path) for unit, table in zip(units, tables) if table is not None]
    if not pieces:
        return None
    names = [c.name for c in plan.columns]
    table = pa.concat_tables([conform_columns(t, names, path) for t, path in pieces], promote_options="permissive")
    keys = KeyArrays(*(table.column(n).to_numpy() for n in KEY_COLUMNS))
    order = _sorted(keys)
    return table if order is None else table.take(pa.array(order))


def _write_inserts(fs: FileSystem, plan: CompactionPlan, work: BucketWork, final: str, table: pa.Table) -> int:
    names = [c.name for c in plan.columns]
    owid = table.column(KEY_COLUMNS[0]).to_numpy()
    data = table.select(names).combine_chunks()
    rows = pa.StructArray.from_arrays([data.column(i).chunk(0) if data.column(i).num_chunks
                                       else pa.array([], data.schema.field(i).type) for i in range(len(names))],
                                      names=names)
    events = event_table(INSERT_OPERATION, owid, table.column(KEY_COLUMNS[1]).to_numpy(),
                         table.column(KEY_COLUMNS[2]).to_numpy(), owid, rows)
    path = fs.join(plan.temp_dir(final), bucket_file_name(work.bucket))
    return write_event_table(fs, path, events, compression=plan.compression, columns=plan.columns).inserts


def _write_deletes(fs: FileSystem, plan: CompactionPlan, work: BucketWork, final: str) -> int:
    write_ids = plan.compactor_write_ids
    parts, row_type = [], None
    for source in work.deletes:
        event_file = EventFile(fs, source.path)
        row_type = row_type or event_file.row_type
        table = event_file.read((*KEY_FIELDS, CURRENT_WRITE_ID))
        if source.check_validity:
            table = table.filter(pa.array(valid_write_id_mask(write_ids, table.column(CURRENT_WRITE_ID).to_numpy())))
        parts.append(table)
    if not parts or not sum(p.num_rows for p in parts):
        return 0
    table = pa.concat_tables(parts)
    keys = KeyArrays(*(table.column(n).to_numpy() for n in KEY_FIELDS))
    order = _sorted(keys)
    if order is not None:
        table = table.take(pa.array(order))
    names = [c.name for c in plan.columns]
    fields = [pa.field(name, row_type.field(i).type if i < row_type.num_fields else pa.null())
              for i, name in enumerate(names)]
    events = event_table(DELETE_OPERATION, *(table.column(n).to_numpy() for n in KEY_FIELDS),
                         table.column(CURRENT_WRITE_ID).to_numpy(), null_rows(pa.struct(fields), table.num_rows))
    path = fs.join(plan.temp_dir(final), bucket_file_name(work.bucket))
    return write_event_table(fs, path, events, compression=plan.compression, columns=plan.columns).deletes


def run_bucket(plan: CompactionPlan, work: BucketWork, *,
               max_delete_events_in_memory: int = DEFAULT_MAX_DELETE_EVENTS_IN_MEMORY) -> BucketResult:
    """Compact one bucket into the plan's temporary result directories."""
    fs, _ = FileSystem.resolve(plan.location)
    outputs = [name for name, _ in plan.outputs]
    if plan.kind is CompactionType.MAJOR:
        table = _insert_events(fs, plan, work, apply_deletes=True, max_delete_events_in_memory=max_delete_events_in_memory)
        written = _write_inserts(fs, plan, work, outputs[0], table) if table is not None and table.num_rows else 0
        return BucketResult(work.bucket, written, 0)
    inserted = deleted = 0
    insert_output = next((name for name in outputs if name.startswith("delta_")), None)
    delete_output = next((name for name in outputs if name.startswith("delete_delta_")), None)
    if insert_output and work.inserts:
        table = _insert_events(fs, plan, work, apply_deletes=False, max_delete_events_in_memory=max_delete_events_in_memory)
        if table is not None and table.num_rows:
            inserted = _write_inserts(fs, plan, work, insert_output, table)
    if delete_output and work.deletes:
        deleted = _write_deletes(fs, plan, work, delete_output)
    return BucketResult(work.bucket, inserted, deleted)
