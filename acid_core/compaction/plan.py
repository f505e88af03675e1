"""What one compaction reads and writes: the directory state under the compactor's snapshot, split per bucket.

Rules from Hive's Worker (hive-acid-reference.md section 7): enough to compact means MAJOR: original files, or more
than one of base + deltas; MINOR: more than one delta, and not just one delta with its delete delta; REBALANCE: always.
Output names are `base_<hwm>_v<txn>` (major, rebalance) or `delta_<min>_<hwm>_v<txn>` and
`delete_delta_<min>_<hwm>_v<txn>` (minor, no statement id). Where renames are atomic (local, HDFS) results are built
in hidden directories `.<name>.tmp-c<compaction id>` and renamed into place when complete; on object stores they are
written under their final names directly, which no reader uses before the compactor transaction `<txn>` commits
(Hive's isDirUsable), so nothing is copied.

A rebalance (Hive 4, unbucketed tables) rewrites every surviving row of the partition, whatever bucket file holds it,
into n new bucket files of about equal size (n: CLUSTERED INTO n BUCKETS, else the number of bucket ids the snapshot's
files have, as Hive counts them). Hive numbers the rows 0.. in key order and gives row i bucket i DIV ceil(rows/n);
here task k takes the key interval (b[k-1], b[k]] whose bounds are picked from the stripes' `hive.acid.key.index` so
the intervals hold about equal row counts, and numbers its rows 0.. in key order. Every task can then run at once,
with no count of the survivors first; each row keeps its write id (originalTransaction = currentTransaction), gets
bucket k and a new rowId, and every file stays in key order.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from acid_core.format.delete_events import Key
from acid_core.format.layout import (
    VISIBILITY_PREFIX,
    base_dir_name,
    compaction_staging_name,
    delta_dir_name,
    parse_directory,
)
from acid_core.format.orc_columnar import DEFAULT_STRIPE_BYTES
from acid_core.format.orc_concat import stripe_row_counts
from acid_core.format.orc_events import KEY_FIELDS, Column, EventFile
from acid_core.format.validity import ValidCompactorWriteIdList, ValidWriteIdList
from acid_core.metastore.codes import CompactionType
from acid_core.read.read_plan import DeleteSource, InsertSource, ReadPlan, file_bucket, plan_read, source_bucket
from acid_core.read.state import DirectoryState
from acid_core.storage.fs import FileSystem, path_of

MAX_SPLIT_PARTS = 256  # parts of one bucket's split major compaction
MIN_PART_ROWS = 1_000_000  # a bucket is split to use idle task slots only into parts of at least this many rows


@dataclass(frozen=True, slots=True)
class BucketWork:
    """The files of one bucket a compaction task reads; a rebalance task reads every file of the partition and
    writes bucket `bucket` from the rows whose key is in (after, up_to] (None: unbounded); a part of a split major
    compaction reads its bucket's files and writes the rows of its key interval as part `part` of the bucket."""

    bucket: int
    inserts: tuple[InsertSource, ...]
    deletes: tuple[DeleteSource, ...]
    after: Key | None = None
    up_to: Key | None = None
    part: int | None = None  # a split major compaction's part of the bucket (key order), concatenated afterwards


@dataclass(frozen=True, slots=True)
class CompactionPlan:
    """Everything a task needs (picklable: Spark ships it to executors)."""

    compaction_id: int
    kind: CompactionType
    location: str
    columns: tuple[Column, ...]
    write_ids: str
    compactor_txn_id: int
    outputs: tuple[tuple[str, str], ...]  # (final name, hidden temporary name; the final name on an object store)
    buckets: tuple[BucketWork, ...]
    compression: str = "ZLIB"
    stripe_bytes: int = DEFAULT_STRIPE_BYTES  # the table's orc.stripe.size: the output writer's buffer
    verify: bool = True  # tasks return the figures `verify.verify_output` checks (compactor.verify='false': not needed)

    @property
    def compactor_write_ids(self) -> ValidCompactorWriteIdList:
        write_ids = ValidCompactorWriteIdList.parse(self.write_ids)
        assert isinstance(write_ids, ValidCompactorWriteIdList)  # parse builds the class it is called on
        return write_ids

    def temp_dir(self, final_name: str) -> str:
        """Where result `final_name` is built, as a path of the filesystem `FileSystem.resolve(location)` gives."""
        return FileSystem.join(path_of(self.location), dict(self.outputs)[final_name])


def temp_name(final_name: str, compaction_id: int) -> str:
    return compaction_staging_name(final_name, compaction_id)


def is_leftover_of(name: str, compaction_id: int) -> bool:
    """A hidden result directory left by an earlier attempt of this compaction."""
    return name.startswith(".") and name.endswith(compaction_staging_name("", compaction_id)[1:])


def is_output_of_attempt(name: str, compaction_id: int, txn_id: int) -> bool:
    """A result directory of the attempt of this compaction under compactor transaction `txn_id`: hidden
    (`.<name>_v<txn>.tmp-c<id>`) or already renamed (`<name>_v<txn>`). Every result name carries its attempt's
    transaction, so one attempt never takes away another's (a worker presumed dead may still be running)."""
    suffix = f"{VISIBILITY_PREFIX}{txn_id:07d}"
    if name.startswith("."):
        return name.endswith(compaction_staging_name(suffix, compaction_id)[1:])
    return name.endswith(suffix) and parse_directory(name) is not None


def enough_to_compact(state: DirectoryState, kind: CompactionType) -> bool:
    """Hive's Worker.isEnoughToCompact (a rebalance always is)."""
    if kind is CompactionType.REBALANCE:
        return True
    if kind is CompactionType.MAJOR:
        return bool(state.original_files) or len(state.deltas) + (1 if state.base else 0) > 1
    if len(state.deltas) < 2:
        return False
    if len(state.deltas) == 2:
        first, second = state.deltas
        return first.is_delete == second.is_delete
    return True


def output_names(state: DirectoryState, kind: CompactionType, write_ids: ValidWriteIdList, txn_id: int) -> list[str]:
    high = write_ids.high_watermark
    if kind in (CompactionType.MAJOR, CompactionType.REBALANCE):
        return [base_dir_name(high, visibility_txn_id=txn_id)]
    low = min(delta.min_write_id for delta in state.deltas)
    names = []
    if any(not delta.is_delete for delta in state.deltas):
        names.append(delta_dir_name(low, high, visibility_txn_id=txn_id))
    if any(delta.is_delete for delta in state.deltas):
        names.append(delta_dir_name(low, high, visibility_txn_id=txn_id, delete=True))
    return names


def build_plan(fs: FileSystem, state: DirectoryState, *, compaction_id: int, kind: CompactionType,
               columns: tuple[Column, ...], write_ids: ValidCompactorWriteIdList, txn_id: int,
               compression: str = "ZLIB", stripe_bytes: int = DEFAULT_STRIPE_BYTES,
               number_of_buckets: int | None = None, split_rows: int | None = None,
               parallelism: int = 1, verify: bool = True) -> CompactionPlan:
    """Group the snapshot's files by bucket (the file name's bucket number, as Hive's compactor splits its work); a
    rebalance splits them by key interval into `number_of_buckets` tasks instead. With `split_rows`, a major
    compaction's bucket of more rows than that is split by key interval into parts of about that many rows, one task
    each; the parts are concatenated stripe by stripe into the bucket's file afterwards (`execute.join_parts`), so
    every ROW__ID and the one file per bucket stay as they are. `verify`: the tasks count what they merge and read
    their output back, for the check before the commit (`verify.verify_output`)."""
    if kind is CompactionType.MINOR:  # a minor compaction merges deltas only; the base and originals stay
        state = dataclasses.replace(state, base=None, original_files=())
    read = plan_read(fs, state, write_ids)
    if kind is CompactionType.REBALANCE:
        works = rebalance_works(fs, read, number_of_buckets)
    else:
        buckets: dict[int, tuple[list[InsertSource], list[DeleteSource]]] = {}
        for source in read.inserts:
            buckets.setdefault(source_bucket(source), ([], []))[0].append(source)
        for delete in read.deletes:
            buckets.setdefault(file_bucket(delete.path), ([], []))[1].append(delete)
        slots = max(1, parallelism)
        spread = -(-slots // max(1, len(buckets)))  # parts per bucket that would keep every slot busy
        works = tuple(work for b, (i, d) in sorted(buckets.items())
                      for work in _split(fs, BucketWork(b, tuple(i), tuple(d)),
                                         split_rows if kind is CompactionType.MAJOR else None, slots, spread))
    names = output_names(state, kind, write_ids, txn_id)
    return CompactionPlan(
        compaction_id=compaction_id, kind=kind, location=fs.uri(state.location), columns=columns, write_ids=str(write_ids),
        compactor_txn_id=txn_id,
        outputs=tuple((name, temp_name(name, compaction_id) if fs.renames_atomically else name) for name in names),
        buckets=works, compression=compression, stripe_bytes=stripe_bytes, verify=verify)


def _split(fs: FileSystem, work: BucketWork, split_rows: int | None, parallelism: int,
           spread: int = 1) -> list[BucketWork]:
    """A bucket's work, or its parts by key interval (footers only): a bucket of more than `split_rows` rows in parts
    of about `split_rows` rows, as many as a multiple of `parallelism` (the tasks that run at once) so that no part
    runs alone at the end; and, while the plan has fewer buckets than task slots, a bucket of at least two
    MIN_PART_ROWS in up to `spread` parts of at least MIN_PART_ROWS rows, so that the idle slots share it."""
    if not split_rows:
        return [work]
    rows = sum(EventFile(fs, s.path, length=s.length).num_rows for s in work.inserts
               if s.synthetic is None and s.length != 0)
    parts = part_count(rows, split_rows, parallelism, spread)
    if parts < 2:
        return [work]
    bounds = split_keys(fs, work.inserts, parts)
    if not bounds:
        return [work]
    edges: list[Key | None] = [None, *bounds, None]
    return [dataclasses.replace(work, after=edges[k], up_to=edges[k + 1], part=k) for k in range(len(edges) - 1)]


def part_count(rows: int, split_rows: int, parallelism: int, spread: int = 1) -> int:
    """How many parts `_split` cuts a bucket of `rows` rows into (1: not split)."""
    parts = -(-rows // split_rows)
    if parts >= parallelism:
        parts = -(-parts // parallelism) * parallelism
    else:
        parts = max(parts, min(spread, rows // MIN_PART_ROWS))
    return max(1, min(parts, MAX_SPLIT_PARTS))


def rebalance_works(fs: FileSystem, read: ReadPlan, number_of_buckets: int | None) -> tuple[BucketWork, ...]:
    """The tasks of a rebalance: bucket k takes the keys in (bounds[k-1], bounds[k]]. Without a number, as many
    buckets as the snapshot's files have bucket ids (Hive's default). Only file footers are read."""
    if not read.inserts:
        return ()
    count = number_of_buckets or len({source_bucket(s) for s in read.inserts} | {file_bucket(d.path)
                                                                                 for d in read.deletes})
    bounds = split_keys(fs, read.inserts, count)
    edges: list[Key | None] = [None, *bounds, None]
    return tuple(BucketWork(k, read.inserts, read.deletes, after=edges[k], up_to=edges[k + 1])
                 for k in range(len(edges) - 1))


DECODE_SHARE = 0.3  # of a compaction's time per row, the decoding (bench/RESULTS.md: ORC encoding ~60%, decoding ~27%)


def split_keys(fs: FileSystem, sources: Sequence[InsertSource], parts: int) -> list[Key]:
    """Up to parts-1 increasing keys that cut the sources' rows into about equal parts.

    Cut points come from each stripe's last key (`hive.acid.key.index`); a stripe bigger than a sixteenth of a part
    also gives keys from inside it, so parts stay within about a sixteenth of a part of each other: interpolated in
    the rowId range between the previous stripe's last key and its own when both are of one (writeId, bucket), else
    read from its three key columns (a batch at a time). A cut need not be a row's key: parts are key intervals.
    A cut moves to the end of its stripe when the parts it makes uneven cost less than what a part starting inside
    the stripe decodes in vain (about DECODE_SHARE of a row's work for each row before its first key): with Hive's
    stripes of ~10M rows this decides the split's balance.
    Files without an index (originals, some writers') count for no cut.
    Memory: a batch of keys; time: footers, plus the key columns of the big stripes that start a run.
    """
    files = []
    for source in sources:
        if source.synthetic is None and source.length != 0:
            event_file = EventFile(fs, source.path, length=source.length)
            if event_file.is_acid and event_file.num_rows and len(event_file.key_index()) == event_file.num_stripes:
                files.append((source, event_file))
    total = sum(f.num_rows for _, f in files)
    if parts < 2 or not total:
        return []
    step = max(1, total // (parts * 32))
    marks: list[tuple[Key, int]] = []
    for source, event_file in files:
        ends = event_file.key_index()
        counts = stripe_row_counts(fs, source.path) if source.length is None else \
            [event_file.num_rows // event_file.num_stripes] * event_file.num_stripes
        for stripe, (end, rows) in enumerate(zip(ends, counts)):
            previous = ends[stripe - 1] if stripe else None
            if rows > step and previous is not None and previous[:2] == end[:2] and end[2] - previous[2] >= rows:
                # One (writeId, bucket) run from the previous stripe's last key to this one's: cut its rowId range
                # in proportion (rowIds ascend, about evenly in a compacted or written file), nothing decoded.
                cuts = list(range(step, rows, step)) + [rows]
                span, seen = end[2] - previous[2], 0
                for count in cuts:
                    marks.append(((end[0], end[1], previous[2] + span * count // rows), count - seen))
                    seen = count
                continue
            if rows < 2 * step:
                marks.append((end, rows))
                continue
            # the stripe's keys a batch at a time (a stripe written by Hive holds millions of rows): a cut every
            # `step` rows and at the last row
            last: Key | None = None
            previous_cut, position, cut = -1, 0, step - 1
            for batch in event_file.iter_batches(KEY_FIELDS, stripes=range(stripe, stripe + 1)):
                columns = [batch.column(name).to_numpy() for name in KEY_FIELDS]
                while cut < position + batch.num_rows:
                    at = cut - position
                    marks.append(((int(columns[0][at]), int(columns[1][at]), int(columns[2][at])), cut - previous_cut))
                    previous_cut, cut = cut, cut + step
                if batch.num_rows:
                    last = (int(columns[0][-1]), int(columns[1][-1]), int(columns[2][-1]))
                position += batch.num_rows
            if last is not None and previous_cut < position - 1:
                marks.append((last, position - 1 - previous_cut))
    marks.sort()
    reached = list(itertools.accumulate(rows for _, rows in marks))  # rows up to and including each mark
    total = reached[-1]
    stripe_ends = {end for _, event_file in files for end in event_file.key_index()}
    free = [i for i, (key, _) in enumerate(marks[:-1]) if key in stripe_ends]
    bounds: list[Key] = []
    for k in range(1, parts):
        target = total * k / parts
        chosen = next(i for i, rows in enumerate(reached) if rows >= target)
        # A part that starts inside a stripe decodes the stripe from its start and drops the rows before its first
        # key (pyarrow cannot seek to a row inside a stripe): cut at the next stripe end instead when that makes the
        # parts less uneven than the decoding would cost.
        before = max((reached[i] for i in free if reached[i] < target), default=0)
        after = next((i for i in free if reached[i] >= target), None)
        if after is not None and reached[after] - target < DECODE_SHARE * (target - before):
            chosen = after
        if chosen < len(marks) - 1 and (not bounds or marks[chosen][0] > bounds[-1]):
            bounds.append(marks[chosen][0])
    return bounds
