"""A table's changes between two write ids, read from its delta files (not in Hive: no Hive ACID system has a change
feed).

The changes of write ids (after, upto] in one partition are the events those writes left: each insert event an
`insert` of its row, each delete event a `delete` of the ROW__ID it names; an UPDATE is both (Hive's split update:
a delete of the old ROW__ID and an insert under a new one). Only committed write ids count (the snapshot's
ValidWriteIdList), so open and aborted writes contribute nothing. A delete carries the ROW__ID and no column values
(a delete event holds none); the insert change of the same ROW__ID, at or before `after`, carried them.

`plan_changes` lists the partition once and picks the files, with Hive's rules for choosing among original and
minor-compacted deltas (the ones a snapshot read picks, bases left out), so each event is read once. A base in the
way makes the range unreadable there (`ChangesUnavailableError`, naming the oldest write id whose changes are certain
to be readable in that partition):

- a compacted base_N with N > after whose folded deltas are gone (the cleaner removed them; judged by no delta ending
  in (after, N] being left): the changes of (after, N] are not events any more;
- an INSERT OVERWRITE of the range (a committed base_N written by a write, after < N <= upto): it replaced the
  partition's rows without a delete event for each.

A reader lease taken at or before `after` keeps the cleaner from removing deltas a later compaction folds.

Cost: one listing of the partition and of the delta directories of the range; reading, the events of the files
picked, a batch at a time (memory: one batch).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from acid_core.errors import AcidError
from acid_core.format.delete_events import valid_write_id_mask
from acid_core.format.layout import ParsedBase, ParsedDelta
from acid_core.format.orc_events import (
    BUCKET,
    CURRENT_WRITE_ID,
    ORIGINAL_WRITE_ID,
    ROW,
    ROW_ID,
    EventFile,
)
from acid_core.format.validity import ValidTxnList, ValidWriteIdList
from acid_core.read.read_plan import plan_read
from acid_core.read.state import PartitionListing, acid_state, list_partition, with_files
from acid_core.storage.fs import FileSystem

INSERT, DELETE = "insert", "delete"
CHANGE_TYPE, CHANGE_WRITE_ID, ROW_ID_COLUMN = "_change_type", "_change_write_id", "row__id"
ROW_ID_STRUCT = pa.struct([("writeid", pa.int64()), ("bucketid", pa.int32()), ("rowid", pa.int64())])
_EVENT_COLUMNS = (ORIGINAL_WRITE_ID, BUCKET, ROW_ID, CURRENT_WRITE_ID)


class ChangesUnavailableError(AcidError):
    """The changes asked for are no longer events in the table's files."""


@dataclass(frozen=True, slots=True)
class ChangeSource:
    """One file of change events: a delta's insert events or a delete delta's delete events (`length`: the readable
    prefix of a file a streaming writer still writes, from its side file; `synthetic_write_id`: a plain ORC file
    LOAD DATA put in a delta, whose rows are inserts of that write id with ROW__IDs from their position)."""

    path: str
    is_delete: bool
    length: int | None = None
    synthetic: tuple[int, int, int] | None = None  # (write id, bucket property, first row id)


def _check_bases(listing: PartitionListing, *, after: int, upto: int, write_ids: ValidWriteIdList,
                 txns: ValidTxnList, name: str) -> None:
    deltas = [entry.parsed for entry in listing.entries if isinstance(entry.parsed, ParsedDelta)]
    for entry in listing.entries:
        base = entry.parsed
        if not isinstance(base, ParsedBase) or base.write_id <= after:
            continue
        if base.visibility_txn_id and not txns.is_valid(base.visibility_txn_id):
            continue  # a compaction not committed (yet, or ever): nobody reads it
        if base.visibility_txn_id or entry.compacted_marker:
            if not any(after < delta.max_write_id <= base.write_id for delta in deltas):
                raise ChangesUnavailableError(
                    f"{name}: the changes after write id {after} are no longer readable: a major compaction folded "
                    f"the write ids up to {base.write_id} into {base.name} and the cleaner removed their deltas; the "
                    f"oldest write id whose changes are readable here is {base.write_id + 1} (a reader lease taken "
                    "before a compaction keeps its deltas)")
        elif base.write_id <= upto and write_ids.is_valid(base.write_id):
            raise ChangesUnavailableError(
                f"{name}: write id {base.write_id} overwrote it (INSERT OVERWRITE, {base.name}), which leaves no "
                f"delete events: read the changes up to write id {base.write_id - 1}, or from {base.write_id} on")


def plan_changes(fs: FileSystem, location: str, *, after: int, upto: int, write_ids: ValidWriteIdList,
                 txns: ValidTxnList | None = None, name: str | None = None) -> list[ChangeSource]:
    """The files holding the events of write ids (after, upto] in the partition at `location` (`name` says which in
    errors).

    Raises:
        ChangesUnavailableError: a base folded or overwrote changes of the range (module docstring).
        FileSystemError: the partition cannot be listed.
    """
    txns = txns if txns is not None else ValidTxnList()
    listing = list_partition(fs, location, missing_ok=True)
    _check_bases(listing, after=after, upto=upto, write_ids=write_ids, txns=txns, name=name or location)
    deltas_only = PartitionListing(location, tuple(e for e in listing.entries if isinstance(e.parsed, ParsedDelta)))
    state = acid_state(deltas_only, write_ids=write_ids, txns=txns)
    state = dataclasses.replace(state, deltas=tuple(d for d in state.deltas
                                                    if d.max_write_id > after and d.min_write_id <= upto))
    plan = plan_read(fs, with_files(fs, state), write_ids)
    sources = [ChangeSource(source.path, False, source.length,
                            None if source.synthetic is None else
                            (source.synthetic.write_id, source.synthetic.bucket_property,
                             source.synthetic.first_row_id))
               for source in plan.inserts]
    sources += [ChangeSource(source.path, True) for source in plan.deletes]
    return sources


def _row_ids(owid: pa.Array, bucket: pa.Array, row_id: pa.Array) -> pa.StructArray:
    return pa.StructArray.from_arrays([owid.cast(pa.int64()), bucket.cast(pa.int32()), row_id.cast(pa.int64())],
                                      fields=list(ROW_ID_STRUCT))


def change_batches(fs: FileSystem, source: ChangeSource, *, after: int, upto: int, write_ids: ValidWriteIdList,
                   row_type: pa.StructType) -> Iterator[pa.Table]:
    """The changes one file holds for the committed write ids in (after, upto], a batch at a time:
    `_change_type`, `_change_write_id`, `row__id`, then the table's columns (`row_type`; nulls for a delete).

    Raises:
        CorruptFileError: the file cannot be read.
    """
    file = EventFile(fs, source.path, length=source.length)
    if source.synthetic is not None:
        write_id, bucket, first = source.synthetic
        if not (after < write_id <= upto and write_ids.is_valid(write_id)):
            return
        position = first
        for batch in file.iter_batches(list(row_type.names)):
            count = batch.num_rows
            row_ids = _row_ids(pa.array(np.full(count, write_id)), pa.array(np.full(count, bucket)),
                               pa.array(np.arange(position, position + count)))
            position += count
            rows = pa.StructArray.from_arrays(batch.columns, fields=list(row_type))
            yield _changes(INSERT, pa.array(np.full(count, write_id)), row_ids, rows, row_type)
        return
    columns = list(_EVENT_COLUMNS) + ([] if source.is_delete else [ROW])
    for batch in file.iter_batches(columns):
        current = batch.column(CURRENT_WRITE_ID).to_numpy()
        keep = (current > after) & (current <= upto) & valid_write_id_mask(write_ids, current)
        if not keep.any():
            continue
        chosen = batch.filter(pa.array(keep))
        row_ids = _row_ids(chosen.column(ORIGINAL_WRITE_ID), chosen.column(BUCKET), chosen.column(ROW_ID))
        rows = None if source.is_delete else chosen.column(ROW)
        yield _changes(DELETE if source.is_delete else INSERT, chosen.column(CURRENT_WRITE_ID), row_ids, rows,
                       row_type)


def _changes(kind: str, change_write_id: pa.Array, row_ids: pa.StructArray, rows: pa.StructArray | None,
             row_type: pa.StructType) -> pa.Table:
    count = len(row_ids)
    names = [CHANGE_TYPE, CHANGE_WRITE_ID, ROW_ID_COLUMN]
    arrays = [pa.repeat(pa.scalar(kind), count), change_write_id.cast(pa.int64()), row_ids]
    for index, field in enumerate(row_type):
        names.append(field.name)
        arrays.append(pa.nulls(count, field.type) if rows is None else rows.field(index))
    return pa.Table.from_arrays(arrays, names=names)


__all__ = ["CHANGE_TYPE", "CHANGE_WRITE_ID", "DELETE", "INSERT", "ROW_ID_COLUMN", "ROW_ID_STRUCT", "ChangeSource",
           "ChangesUnavailableError", "change_batches", "plan_changes"]
