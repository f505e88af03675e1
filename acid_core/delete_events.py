"""Delete-event lookups for merge-on-read, as Hive's VectorizedOrcAcidRowBatchReader does them.

* `DeleteRegistry`: every applicable delete event in memory, sorted; per (originalWriteId, bucket) a sorted rowId
  array (Hive's ColumnizedDeleteEventRegistry with its CompressedOwid index).
* `DeleteCursor`: one delete file streamed stripe by stripe in key order, for the sort-merge path used when the
  delete events exceed the in-memory bound (Hive's SortMergedDeleteEventRegistry).
* `without_deleted`: the cursors applied to a stream already in key order (a compaction's merged inputs).
Keys compare as Hive's RecordIdentifier: originalWriteId, then the packed bucket (signed int), then rowId.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Iterator, Sequence

import numpy as np
import pyarrow as pa

from acid_core.errors import UnsortedEventsError
from acid_core.orc_events import CURRENT_WRITE_ID, KEY_FIELDS, EventFile
from acid_core.validity import ValidWriteIdList

Key = tuple[int, int, int]


@dataclass(frozen=True, slots=True)
class KeyArrays:
    """Parallel numpy arrays of event keys (and the writing write id)."""

    owid: np.ndarray
    bucket: np.ndarray
    rowid: np.ndarray

    def __len__(self) -> int:
        return len(self.owid)

    def take(self, mask_or_index) -> "KeyArrays":
        return KeyArrays(self.owid[mask_or_index], self.bucket[mask_or_index], self.rowid[mask_or_index])

    def below(self, key: Key) -> np.ndarray:
        """Mask of keys strictly below `key` in RecordIdentifier order."""
        k0, k1, k2 = key
        return (self.owid < k0) | ((self.owid == k0) & ((self.bucket < k1) | ((self.bucket == k1) & (self.rowid < k2))))

    def between(self, after: Key | None, up_to: Key | None) -> np.ndarray:
        """Mask of keys in (after, up_to]; None leaves that side open."""
        inside = np.ones(len(self), dtype=bool)
        if after is not None:
            inside &= ~self.below(after) & ~self.equal(after)
        if up_to is not None:
            inside &= self.below(up_to) | self.equal(up_to)
        return inside

    def equal(self, key: Key) -> np.ndarray:
        return (self.owid == key[0]) & (self.bucket == key[1]) & (self.rowid == key[2])

    def is_sorted(self) -> bool:
        """Keys are non-decreasing, as Hive requires of every event file."""
        if len(self) < 2:
            return True
        o, b, r = self.owid, self.bucket, self.rowid
        ascending = (o[:-1] < o[1:]) | ((o[:-1] == o[1:]) & ((b[:-1] < b[1:]) | ((b[:-1] == b[1:]) & (r[:-1] <= r[1:]))))
        return bool(ascending.all())

    def first(self) -> Key:
        return int(self.owid[0]), int(self.bucket[0]), int(self.rowid[0])

    def last(self) -> Key:
        return int(self.owid[-1]), int(self.bucket[-1]), int(self.rowid[-1])

    @staticmethod
    def concat(parts: list["KeyArrays"]) -> "KeyArrays":
        if not parts:
            return KeyArrays(np.empty(0, np.int64), np.empty(0, np.int32), np.empty(0, np.int64))
        return KeyArrays(np.concatenate([p.owid for p in parts]), np.concatenate([p.bucket for p in parts]),
                         np.concatenate([p.rowid for p in parts]))


def valid_write_id_mask(write_ids: ValidWriteIdList, current: np.ndarray) -> np.ndarray:
    """Vectorised `write_ids.is_valid` over an array of write ids."""
    mask = current <= write_ids.high_watermark
    if write_ids.exceptions:
        mask &= ~np.isin(current, np.asarray(write_ids.exceptions, dtype=np.int64))
    return mask


def read_delete_keys(event_file: EventFile, write_ids: ValidWriteIdList, *, check_validity: bool,
                     stripe: int | None = None) -> KeyArrays:
    """Keys of the delete events in a file (or one stripe) whose deleting write id is valid for the snapshot."""
    table = event_file.read((*KEY_FIELDS, CURRENT_WRITE_ID), stripe=stripe)
    keys = KeyArrays(*(table.column(name).to_numpy() for name in KEY_FIELDS))
    if check_validity:
        keys = keys.take(valid_write_id_mask(write_ids, table.column(CURRENT_WRITE_ID).to_numpy()))
    return keys


class DeleteRegistry:
    """All applicable delete events in memory, sorted, indexed by (originalWriteId, bucket)."""

    def __init__(self, keys: KeyArrays) -> None:
        order = np.lexsort((keys.rowid, keys.bucket, keys.owid))
        owid, bucket, rowid = keys.owid[order], keys.bucket[order], keys.rowid[order]
        self._size = len(owid)
        self._rowids: dict[tuple[int, int], np.ndarray] = {}
        if self._size:
            change = np.flatnonzero((owid[1:] != owid[:-1]) | (bucket[1:] != bucket[:-1])) + 1
            starts = np.concatenate(([0], change))
            ends = np.concatenate((change, [self._size]))
            for start, end in zip(starts.tolist(), ends.tolist()):
                self._rowids[(int(owid[start]), int(bucket[start]))] = rowid[start:end]

    def __len__(self) -> int:
        return self._size

    def deleted_mask(self, keys: KeyArrays) -> np.ndarray:
        """Mask of the given rows that a delete event removes; rows of one (owid, bucket) run are looked up together."""
        deleted = np.zeros(len(keys), dtype=bool)
        if not self._size or not len(keys):
            return deleted
        owid, bucket, rowid = keys.owid, keys.bucket, keys.rowid
        change = np.flatnonzero((owid[1:] != owid[:-1]) | (bucket[1:] != bucket[:-1])) + 1
        starts = np.concatenate(([0], change)).tolist()
        ends = np.concatenate((change, [len(keys)])).tolist()
        run_owids = owid[starts].tolist()
        run_buckets = bucket[starts].tolist()
        for start, end, run_owid, run_bucket in zip(starts, ends, run_owids, run_buckets):
            removed = self._rowids.get((run_owid, run_bucket))
            if removed is None:
                continue
            deleted[start:end] = _members(rowid[start:end], removed)
        return deleted


def _members(run: np.ndarray, removed: np.ndarray) -> np.ndarray:
    """Which of `run` occur in the sorted array `removed`: a bitmap over a dense rowId range, else binary search."""
    low, high = int(run.min()), int(run.max())
    if len(run) >= 64 and high - low < 4 * len(run):
        bitmap = np.zeros(high - low + 1, dtype=bool)
        window = removed[np.searchsorted(removed, low):np.searchsorted(removed, high, side="right")]
        bitmap[window - low] = True
        return bitmap[run - low]
    position = np.searchsorted(removed, run)
    np.minimum(position, len(removed) - 1, out=position)
    return removed[position] == run


class DeleteCursor:
    """Streams one delete file's applicable events in key order, a stripe at a time (bounded memory)."""

    def __init__(self, event_file: EventFile, write_ids: ValidWriteIdList, *, check_validity: bool,
                 start_key: Key | None = None) -> None:
        self._file = event_file
        self._write_ids = write_ids
        self._check_validity = check_validity
        self._stripe = 0
        stripe_ends = event_file.key_index()
        if start_key is not None and len(stripe_ends) == event_file.num_stripes:
            # Skip whole stripes whose last key is below where the insert file starts (Hive filters by key interval).
            while self._stripe < len(stripe_ends) and stripe_ends[self._stripe] < start_key:
                self._stripe += 1
        self._buffer = KeyArrays.concat([])

    def _load_next_stripe(self) -> bool:
        if self._stripe >= self._file.num_stripes:
            return False
        keys = read_delete_keys(self._file, self._write_ids, check_validity=self._check_validity, stripe=self._stripe)
        self._stripe += 1
        if not keys.is_sorted():
            raise UnsortedEventsError(f"{self._file.path}: delete events are not sorted by "
                                      "(originalTransaction, bucket, rowId); Hive's readers require it")
        self._buffer = KeyArrays.concat([self._buffer, keys])
        return True

    def events_between(self, low: Key, high: Key) -> KeyArrays:
        """Events with low <= key <= high; events below `low` are dropped for good, later ones stay buffered."""
        while not len(self._buffer) or self._buffer.last() <= high:
            if not self._load_next_stripe():
                break
        self._buffer = self._buffer.take(~self._buffer.below(low))
        return self._buffer.take(self._buffer.between(None, high))


def without_deleted(pieces: Iterable[pa.Table], key_names: Sequence[str], *, cursors: Sequence[DeleteCursor] = (),
                    registry: DeleteRegistry | None = None) -> Iterator[pa.Table]:
    """A stream of tables in key order (key columns `key_names`) without the rows a delete event removes: the events
    of `registry` (all of them in memory), or those `cursors` stream.

    The cursors advance in step with the stream, so memory is one delete stripe per delete file and the piece at
    hand, whatever the number of rows or deletes: how a compaction applies its bucket's deletes after the k-way merge
    of its inputs (Hive's OrcRawRecordMerger sees the delete events in the same merge). A piece nothing deletes from
    passes through uncopied.
    """
    for table in pieces:
        if not table.num_rows:
            continue
        keys = KeyArrays(*(table.column(name).to_numpy() for name in key_names))
        lookup = registry
        if lookup is None:
            events = KeyArrays.concat([cursor.events_between(keys.first(), keys.last()) for cursor in cursors])
            lookup = DeleteRegistry(events) if len(events) else None
        if lookup is not None and len(lookup):
            keep = ~lookup.deleted_mask(keys)
            if not keep.all():
                table = table.filter(pa.array(keep))
        if table.num_rows:
            yield table
