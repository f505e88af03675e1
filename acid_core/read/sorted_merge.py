"""A k-way merge of event streams already sorted by Hive's key (originalTransaction, bucket, rowId), in batches.

Every ACID file is in key order (Hive's OrcRawRecordMerger relies on it), so compaction merges its inputs instead of
concatenating and sorting them. Each round takes, from every input's current piece, the rows up to the smallest of
the pieces' last keys (a binary search per input), so at least one piece is used up per round; a round with one
contributor passes a zero-copy slice through, one with several sorts only what it took. In the usual layout (the
base's keys below every delta's) each piece goes through whole.
Inputs with a known lower bound (their directory's lowest write id) are opened only when the merge reaches it.
Memory: one piece (a stripe) per input whose keys overlap the current ones (in the usual layout: one) plus one
round's output; time: linear in rows, plus a sort of the rounds in which inputs interleave.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

import numpy as np
import pyarrow as pa

from acid_core.errors import UnsortedEventsError

Key = tuple[int, int, int]


class _Head:
    """The current piece of one input, its key columns as numpy arrays, and how much of it is used."""

    def __init__(self, pieces: Iterator[pa.Table], key_names: Sequence[str], lower_bound: Key | None = None) -> None:
        self.pieces = pieces
        self.key_names = key_names
        self.lower_bound = lower_bound
        self.table: pa.Table | None = None
        self.keys: tuple[np.ndarray, ...] = ()  # the piece's three key columns (none before the first piece)
        self.start = 0
        self.previous_last: Key | None = None

    def advance(self) -> bool:
        """Load the next non-empty piece; False when the input is exhausted."""
        for table in self.pieces:
            if table.num_rows:
                self.table, self.start = table, 0
                self.keys = tuple(table.column(name).to_numpy() for name in self.key_names)
                first = self.key(0)
                if self.previous_last is None and self.lower_bound is not None and first < self.lower_bound:
                    raise UnsortedEventsError(f"an input of the merge starts at key {first}, below {self.lower_bound}, "
                                              "the lowest its directory's write ids allow")
                if self.previous_last is not None and first < self.previous_last:
                    raise UnsortedEventsError(f"an input of the merge goes back from key {self.previous_last} to "
                                              f"{first}: events must be sorted by (originalTransaction, bucket, rowId)")
                self.previous_last = self.key(table.num_rows - 1)
                return True
        self.table = None
        return False

    @property
    def last_key(self) -> Key:
        """The last key of the current piece."""
        assert self.previous_last is not None, "a head in the merge holds a piece (advance returned True)"
        return self.previous_last

    def key(self, index: int) -> Key:
        return int(self.keys[0][index]), int(self.keys[1][index]), int(self.keys[2][index])

    def take_up_to(self, bound: Key) -> pa.Table | None:
        """The unused rows with key <= bound (a slice); None when there are none."""
        end = _count_up_to(self.keys, bound)
        if end <= self.start:
            return None
        assert self.table is not None, "a head in the merge holds a piece (advance returned True)"
        taken = self.table.slice(self.start, end - self.start)
        self.start = end
        return taken

    @property
    def used_up(self) -> bool:
        assert self.table is not None, "a head in the merge holds a piece (advance returned True)"
        return self.start >= self.table.num_rows


def _count_up_to(keys: tuple[np.ndarray, ...], bound: Key) -> int:
    """How many rows of sorted keys are <= bound: a binary search on each key column within the equal range."""
    owid, bucket, rowid = keys
    low, high = np.searchsorted(owid, bound[0], "left"), np.searchsorted(owid, bound[0], "right")
    if low == high:
        return int(low)
    low2 = low + np.searchsorted(bucket[low:high], bound[1], "left")
    high2 = low + np.searchsorted(bucket[low:high], bound[1], "right")
    if low2 == high2:
        return int(low2)
    return int(low2 + np.searchsorted(rowid[low2:high2], bound[2], "right"))


def merge_sorted(inputs: Iterable[Iterable[pa.Table]], key_names: Sequence[str],
                 lower_bounds: Sequence[Key | None] | None = None) -> Iterator[pa.Table]:
    """Tables of all inputs' rows in key order. Every input yields tables of one schema, sorted by `key_names`
    (three columns: originalTransaction, bucket, rowId) within and across its tables.

    `lower_bounds[i]`, when known, is a key no row of input i is below (a delta's lowest write id, from its
    directory name): an input is not read until the merge reaches that key, so inputs whose keys lie above the
    others (the usual layout: base, then each delta's write ids) are read one after another, and memory is the
    pieces of the inputs that really overlap, not one piece of every input.

    Raises:
        UnsortedEventsError: an input is out of key order, or has a row below its lower bound.
    """
    inputs = list(inputs)
    bounds = list(lower_bounds) if lower_bounds is not None else [None] * len(inputs)
    waiting = sorted(range(len(inputs)), key=lambda i: (bounds[i] is not None, bounds[i] or (0, 0, 0)), reverse=True)
    heads: list[_Head] = []

    def start(index: int) -> None:
        head = _Head(iter(inputs[index]), key_names, bounds[index])
        if head.advance():
            heads.append(head)

    while heads or waiting:
        if not heads:
            start(waiting.pop())
            continue
        bound = min(head.last_key for head in heads)  # the smallest last key of the current pieces
        if waiting and ((next_bound := bounds[waiting[-1]]) is None or next_bound <= bound):
            start(waiting.pop())  # it may hold keys up to `bound`: it joins before anything up to there is taken
            continue
        taken = [(head, piece) for head in heads for piece in [head.take_up_to(bound)] if piece is not None]
        if len(taken) == 1:
            yield taken[0][1]
        elif taken:
            merged = pa.concat_tables([piece for _, piece in taken], promote_options="permissive")
            columns = [merged.column(name).to_numpy() for name in key_names]
            order = np.lexsort((columns[2], columns[1], columns[0]))
            yield merged.take(pa.array(order))
        heads = [head for head in heads if not head.used_up or head.advance()]


__all__ = ["merge_sorted"]
