"""Delete-event lookups for merge-on-read, as Hive's VectorizedOrcAcidRowBatchReader does them.

* `DeleteRegistry`: every applicable delete event in memory, sorted; per (originalWriteId, bucket) a sorted rowId
  array (Hive's ColumnizedDeleteEventRegistry with its CompressedOwid index).
* `DeleteCursor`: one delete file streamed a batch at a time in key order, for the sort-merge path used when the
  delete events exceed the in-memory bound (Hive's SortMergedDeleteEventRegistry).
* `without_deleted`: the cursors applied to a stream already in key order (a compaction's merged inputs).
Keys compare as Hive's RecordIdentifier: originalWriteId, then the packed bucket (signed int), then rowId.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pyarrow as pa

from acid_core.errors import UnsortedEventsError
from acid_core.format.orc_events import CURRENT_WRITE_ID, KEY_FIELDS, EventFile
from acid_core.format.validity import ValidWriteIdList

Key = tuple[int, int, int]


@dataclass(frozen=True, slots=True)
class KeyArrays:
    """Parallel numpy arrays of event keys (and the writing write id)."""

    owid: np.ndarray
    bucket: np.ndarray
    rowid: np.ndarray

    def __len__(self) -> int:
        return len(self.owid)

    def take(self, mask_or_index) -> KeyArrays:
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

    def slice(self, start: int | None, stop: int | None) -> KeyArrays:
        """Rows start..stop as views (no copy)."""
        return KeyArrays(self.owid[start:stop], self.bucket[start:stop], self.rowid[start:stop])

    def position(self, key: Key, *, after: bool = False) -> int:
        """In sorted keys: the index of the first key >= `key` (> `key` with `after`), by binary search."""
        side: Literal["left", "right"] = "right" if after else "left"
        low, high = np.searchsorted(self.owid, key[0], "left"), np.searchsorted(self.owid, key[0], "right")
        if low == high:
            return int(low)
        bucket = self.bucket[low:high]
        low, high = low + np.searchsorted(bucket, key[1], "left"), low + np.searchsorted(bucket, key[1], "right")
        if low == high:
            return int(low)
        return int(low + np.searchsorted(self.rowid[low:high], key[2], side))

    def first(self) -> Key:
        return int(self.owid[0]), int(self.bucket[0]), int(self.rowid[0])

    def last(self) -> Key:
        return int(self.owid[-1]), int(self.bucket[-1]), int(self.rowid[-1])

    @staticmethod
    def concat(parts: list[KeyArrays]) -> KeyArrays:
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


def _batch_keys(batch: pa.RecordBatch, write_ids: ValidWriteIdList, check_validity: bool) -> KeyArrays:
    keys = KeyArrays(*(batch.column(name).to_numpy() for name in KEY_FIELDS))
    if check_validity:
        keys = keys.take(valid_write_id_mask(write_ids, batch.column(CURRENT_WRITE_ID).to_numpy()))
    return keys


def _key_columns(check_validity: bool) -> tuple[str, ...]:
    return (*KEY_FIELDS, CURRENT_WRITE_ID) if check_validity else KEY_FIELDS


def stripes_holding(event_file: EventFile, low: Key | None, high: Key | None) -> range:
    """The stripes of an event file that can hold keys in [low, high] (None: open) by its `hive.acid.key.index`
    (stripe i holds the keys after stripe i-1's last key up to its own); every stripe without a usable index."""
    count = event_file.num_stripes
    ends = event_file.key_index() if low is not None or high is not None else []
    if len(ends) != count:
        return range(count)
    first = next((i for i, end in enumerate(ends) if low is None or end >= low), count)
    stop = next((i for i in range(first + 1, count) if high is not None and ends[i - 1] >= high), count)
    return range(first, stop)


def read_delete_keys(event_file: EventFile, write_ids: ValidWriteIdList, *, check_validity: bool,
                     low: Key | None = None, high: Key | None = None) -> KeyArrays:
    """Keys of the delete events in a file whose deleting write id is valid for the snapshot, read a batch at a time
    (memory: the keys kept plus one batch); with `low`/`high` only those in [low, high], read from the stripes
    that can hold them."""
    parts = []
    for batch in event_file.iter_batches(_key_columns(check_validity), stripes=stripes_holding(event_file, low, high)):
        keys = _batch_keys(batch, write_ids, check_validity)
        if low is not None:
            keys = keys.take(~keys.below(low))
        if high is not None:
            keys = keys.take(keys.below(high) | keys.equal(high))
        parts.append(keys)
    return KeyArrays.concat(parts)


class DeleteRegistry:
    """All applicable delete events in memory, sorted, indexed by (originalWriteId, bucket)."""

    def __init__(self, keys: KeyArrays, *, ordered: bool = False) -> None:
        """`ordered`: the keys are already in key order (one delete file's), so they are not sorted again."""
        if ordered:
            owid, bucket, rowid = keys.owid, keys.bucket, keys.rowid
        else:
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


CURSOR_BATCH_ROWS = 32_768  # delete events a cursor decodes at a time (about 1 MiB of keys)


class DeleteCursor:
    """Streams one delete file's applicable events in key order, a batch at a time (bounded memory however big the
    file's stripes are): the events asked for stay buffered until the stream passes them."""

    def __init__(self, event_file: EventFile, write_ids: ValidWriteIdList, *, check_validity: bool,
                 start_key: Key | None = None, batch_rows: int = CURSOR_BATCH_ROWS) -> None:
        self._path = event_file.path
        event_file.key_index()  # a damaged hive.acid.key.index is refused, as Hive's delete-delta reader does
        self._write_ids = write_ids
        self._check_validity = check_validity
        self._batches = event_file.iter_batches(_key_columns(check_validity), batch_rows=batch_rows,
                                                stripes=stripes_holding(event_file, start_key, None))
        self._start_key = start_key  # events below it are never asked for (a key-interval task's start)
        self._chunks: deque[KeyArrays] = deque()  # loaded events not yet passed, in key order
        self._last: Key | None = None

    def _load_next(self) -> bool:
        for batch in self._batches:
            everything = KeyArrays(*(batch.column(name).to_numpy() for name in KEY_FIELDS))
            if not len(everything):
                continue
            if not everything.is_sorted() or (self._last is not None and everything.first() < self._last):
                raise UnsortedEventsError(f"{self._path}: delete events are not sorted by "
                                          "(originalTransaction, bucket, rowId); Hive's readers require it")
            self._last = everything.last()
            if self._start_key is not None and self._last < self._start_key:
                continue  # wholly below the interval: Hive filters delete events by the split's key interval
            keys = _batch_keys(batch, self._write_ids, self._check_validity) if self._check_validity else everything
            if len(keys):
                self._chunks.append(keys)
                return True
        return False

    def events_between(self, low: Key, high: Key) -> KeyArrays:
        """Events with low <= key <= high; events below `low` are dropped for good, later ones stay buffered."""
        while not self._chunks or self._chunks[-1].last() <= high:
            if not self._load_next():
                break
        while self._chunks and self._chunks[0].last() < low:
            self._chunks.popleft()
        if not self._chunks:
            return KeyArrays.concat([])
        self._chunks[0] = self._chunks[0].slice(self._chunks[0].position(low), None)
        found = []
        for chunk in self._chunks:
            end = chunk.position(high, after=True)
            found.append(chunk.slice(0, end))
            if end < len(chunk):
                break
        return found[0] if len(found) == 1 else KeyArrays.concat(found)


def without_deleted(pieces: Iterable[pa.Table], key_names: Sequence[str], *, cursors: Sequence[DeleteCursor] = (),
                    registry: DeleteRegistry | None = None) -> Iterator[pa.Table]:
    """A stream of tables in key order (key columns `key_names`) without the rows a delete event removes: the events
    of `registry` (all of them in memory), or those `cursors` stream.

    The cursors advance in step with the stream, so memory is one delete batch per delete file and the piece at
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
            lookup = DeleteRegistry(events, ordered=len(cursors) == 1) if len(events) else None
        if lookup is not None and len(lookup):
            keep = ~lookup.deleted_mask(keys)
            if not keep.all():
                table = table.filter(pa.array(keep))
        if table.num_rows:
            yield table
