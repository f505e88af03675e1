"""Self-verification of a compaction before it becomes visible: the output holds exactly the events it should.

Hive has shipped compactions that lost rows or wrote them out of order (HIVE-23703, HIVE-25258) and, like Iceberg,
commits whatever its tasks wrote. Here every bucket task counts the ROW__IDs it reads while it merges, and checks the
ROW__ID columns of the file it wrote (`FileChecker`) as the writer decodes them back, a stripe at a time, from the
finished file for `hive.acid.key.index` (so they are decoded once; a file another writer wrote is read back a batch
at a time, `check_file`); it returns the figures (`FileFigures`, in its BucketResult) and the driver compares them
and lists the result directories before the commit (`verify_output`). Checked per bucket file:

* MAJOR: the file's events are the visible insert events read minus the rows the deletes removed: equal counts and
  equal checksums. MINOR: every valid insert event read is in the new delta exactly once, every valid delete event in
  the new delete delta (counts and checksums, each directory on its own).
* REBALANCE renumbers rows (new bucket, new rowIds), so its ROW__IDs cannot be compared with the input's: the count
  (the rows of the task's key interval minus those deleted) is checked, not the checksum.
* Every file: ROW__IDs strictly ascending (Hive's readers need the order, a repeated ROW__ID is a duplicate; in a
  delete delta ascending, as two transactions may each have deleted the row), and every event's bucket property is
  of the file's bucket (`bucket_NNNNN`; BucketCodec V1 with any statement id, or V0).
  A bucket split into parts (several tasks) is checked part by part and across parts: the last ROW__ID of part i is
  below the first of part i+1; the driver's joined file must hold the parts' events (footer and key index only).
* Each result directory holds exactly the bucket files with events (no file missing, none extra, nothing else but
  `_orc_acid_version`), and every task of the plan reported its figures.

The checksum of a set of ROW__IDs is the sum, mod 2**64, of a 64-bit mix of each (writeId w, bucket property b,
rowId r): y = K3 * ((w * K1 + b) * K2 + r), h = y XOR (y >> 32), all mod 2**64 (odd constants K); it is
order-independent, so a merge's input and its output compare without sorting; a lost, repeated or altered event
changes it (a wrong one passes with probability ~2**-64). A mismatch fails the compaction with one line starting
`verification failed: `; the evidence (expected and found, per file) is logged at ERROR; the worker's failure path
aborts the compactor transaction and removes the output, so the table stays as it was. Table property
`compactor.verify` ('true' by default) turns it off.
Cost: memory, two scratch arrays of CHUNK_ROWS per counter (and one batch of the three key columns when a file is
read back here); time, a few numpy passes over the key columns of the rows merged and of the output.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from acid_core import settings
from acid_core.errors import AcidError, BucketCodecError, CorruptFileError, SchemaMismatchError
from acid_core.format.delete_events import Key
from acid_core.format.layout import ACID_FORMAT_FILE, bucket_file_name, parse_bucket_file
from acid_core.format.orc_events import KEY_FIELDS, EventFile
from acid_core.format.rowid import decode_bucket_id, encode_bucket
from acid_core.storage.fs import FileSystem

if TYPE_CHECKING:
    from acid_core.compaction.plan import CompactionPlan

VERIFY_PROPERTY = settings.VERIFY.property_key  # table property: 'false' commits a compaction's output unverified
CHUNK_ROWS = 65_536  # rows hashed at a time (the scratch arrays stay in the CPU's cache)
_MASK = (1 << 64) - 1
_K1 = np.uint64(0x9E3779B97F4A7C15)
_K2 = np.uint64(0xC2B2AE3D27D4EB4F)
_K3 = np.uint64(0x165667B19E3779F9)
_SHIFT = np.uint64(32)
_STATEMENT_IDS = 4096  # BucketCodec V1: statement ids 0..4095 in the low 12 bits
_log = logging.getLogger(__name__)


class CompactionVerificationError(AcidError):
    """A compaction's output does not hold exactly the events its input gives; nothing of it was committed."""


def verification_enabled(table) -> bool:
    """The table's `compactor.verify` property ('true' or 'false', any case); True when it is not set.

    Raises:
        UsageError: another value (the message names the table and the value).
    """
    return settings.VERIFY.read(table.param(VERIFY_PROPERTY), what=f"table {table.full_name}: {VERIFY_PROPERTY}")


@dataclass(frozen=True, slots=True)
class Tally:
    """How many ROW__IDs a stream or file held and their order-independent checksum (0 when not computed)."""

    events: int = 0
    checksum: int = 0

    def __add__(self, other: Tally) -> Tally:
        return Tally(self.events + other.events, (self.checksum + other.checksum) & _MASK)

    def __sub__(self, other: Tally) -> Tally:
        return Tally(self.events - other.events, (self.checksum - other.checksum) & _MASK)

    def describe(self, *, checksums: bool = True, noun: str = " events") -> str:
        """`1000 events (checksum 0x...)`; without `checksums` the count alone; `noun=""` leaves out the word."""
        text = f"{self.events}{noun}"
        return f"{text} (checksum 0x{self.checksum:016x})" if checksums else text


class RowIdCounter:
    """Counts (and, with `checksums`, hashes) the ROW__IDs handed to it; a task's working state, not a value."""

    def __init__(self, *, checksums: bool = True) -> None:
        self.checksums = checksums
        self.events = 0
        self.checksum = 0
        self._scratch: tuple[np.ndarray, np.ndarray] | None = None

    @property
    def tally(self) -> Tally:
        return Tally(self.events, self.checksum)

    def add(self, owid: np.ndarray, bucket: np.ndarray, rowid: np.ndarray) -> None:
        """Count the keys given as three parallel arrays (originalTransaction, bucket property, rowId)."""
        count = len(owid)
        self.events += count
        if not self.checksums or not count:
            return
        if self._scratch is None:
            self._scratch = (np.empty(CHUNK_ROWS, np.uint64), np.empty(CHUNK_ROWS, np.uint64))
        owid = np.ascontiguousarray(owid, np.int64).view(np.uint64)
        rowid = np.ascontiguousarray(rowid, np.int64).view(np.uint64)
        total = self.checksum
        for start in range(0, count, CHUNK_ROWS):
            stop = min(start + CHUNK_ROWS, count)
            mixed, scratch = (array[:stop - start] for array in self._scratch)
            owids, buckets = owid[start:stop], bucket[start:stop]
            # Most chunks hold one (writeId, bucket): their ends share it. (Keys in order, as every event file and
            # the merge hold them, then share it throughout; out-of-order keys would come out with another checksum,
            # never pass: they fail the order check or the writer's own.)
            if owids[0] == owids[-1] and buckets[0] == buckets[-1]:
                np.add(rowid[start:stop], _prefix(int(owids[0]), int(buckets[0])), out=mixed)
            else:
                np.multiply(owids, _K1, out=mixed)
                np.copyto(scratch, buckets, casting="unsafe")
                mixed += scratch
                mixed *= _K2
                mixed += rowid[start:stop]
            mixed *= _K3
            np.right_shift(mixed, _SHIFT, out=scratch)
            mixed ^= scratch
            total += int(mixed.sum(dtype=np.uint64))
        self.checksum = total & _MASK

    def add_table(self, table: pa.Table | pa.RecordBatch, names: Sequence[str]) -> None:
        """Count the keys of a table whose key columns are `names` (in KEY_FIELDS order)."""
        if table.num_rows:
            self.add(*(_int_array(table.column(name)) for name in names))


def _prefix(owid: int, bucket: int) -> np.uint64:
    """(owid * K1 + bucket) * K2 mod 2**64, the part of a key's mix before its rowId is added (as `add` computes it
    per row: the bucket property as numpy casts an int32 to uint64)."""
    return np.uint64(((owid & _MASK) * int(_K1) + (bucket & _MASK)) * int(_K2) & _MASK)


def _int_array(column) -> np.ndarray:
    """A key column as a numpy array (nulls, which no valid event has, as -1: they then fail the checks)."""
    if column.null_count:
        column = column.fill_null(-1)
    return column.to_numpy()


@dataclass(frozen=True, slots=True)
class FileCheck:
    """What reading one written file's ROW__ID columns back found."""

    found: Tally
    disorder: tuple[Key, Key] | None = None  # the first ROW__ID out of order: (the one before, it)
    foreign_bucket: int | None = None  # the first bucket property that is not of the file's bucket
    first: Key | None = None
    last: Key | None = None
    unreadable: str | None = None  # why the file could not be read back


class FileChecker:
    """Checks an event file's ROW__IDs as its key columns come, a batch or a stripe at a time: counts and hashes
    them, and notes the first out of order and the first of another bucket; a task's working state, not a value."""

    def __init__(self, bucket: int, *, checksums: bool = True, strict: bool = True) -> None:
        self.bucket, self.checksums, self.strict = bucket, checksums, strict
        self._counter = RowIdCounter(checksums=checksums)
        self._low = encode_bucket(bucket)
        self._disorder: tuple[Key, Key] | None = None
        self._foreign: int | None = None
        self._first: Key | None = None
        self._last: Key | None = None

    @property
    def events(self) -> int:
        return self._counter.events

    def add(self, keys: pa.RecordBatch | pa.Table) -> None:
        """The next keys of the file, in file order: columns KEY_FIELDS."""
        if not keys.num_rows:
            return
        owid, prop, rowid = (_int_array(keys.column(name)) for name in KEY_FIELDS)
        self._counter.add(owid, prop, rowid)
        if self._foreign is None:
            self._foreign = _foreign_bucket(prop, self.bucket, self._low)
        if self._disorder is None:
            self._disorder = _first_disorder(owid, prop, rowid, self._last, strict=self.strict)
        if self._first is None:
            self._first = _key(owid, prop, rowid, 0)
        self._last = _key(owid, prop, rowid, -1)

    def result(self, *, unreadable: str | None = None) -> FileCheck:
        if unreadable is not None:
            return FileCheck(self._counter.tally, unreadable=unreadable)
        return FileCheck(self._counter.tally, self._disorder, self._foreign, self._first, self._last)


def check_file(fs: FileSystem, path: str, bucket: int, *, checksums: bool = True, strict: bool = True) -> FileCheck:
    """Read the ROW__ID columns of the event file at `path`, a batch at a time (memory: one batch of three
    columns, however big the file), and check them (`FileChecker`)."""
    checker = FileChecker(bucket, checksums=checksums, strict=strict)
    try:
        for batch in EventFile(fs, path).iter_batches(KEY_FIELDS):
            checker.add(batch)
    except (CorruptFileError, SchemaMismatchError) as exc:
        return checker.result(unreadable=str(exc))
    return checker.result()


def _key(owid: np.ndarray, prop: np.ndarray, rowid: np.ndarray, index: int) -> Key:
    return int(owid[index]), int(prop[index]), int(rowid[index])


def _foreign_bucket(prop: np.ndarray, bucket: int, low: int) -> int | None:
    """The first bucket property of `prop` that names another bucket than `bucket`: V1 (any statement id) or V0."""
    smallest, largest = int(prop.min()), int(prop.max())
    if low <= smallest and largest < low + _STATEMENT_IDS or smallest == largest == bucket:
        return None
    inside = (prop == bucket) | ((prop >= low) & (prop < low + _STATEMENT_IDS))
    return None if inside.all() else int(prop[np.argmin(inside)])


def _first_disorder(owid: np.ndarray, prop: np.ndarray, rowid: np.ndarray, before: Key | None, *, strict: bool
                    ) -> tuple[Key, Key] | None:
    """The first pair of neighbours (the batch's first key after `before` included) not ascending (`strict`: or
    equal)."""
    if before is not None and (before >= _key(owid, prop, rowid, 0) if strict else before > _key(owid, prop, rowid, 0)):
        return before, _key(owid, prop, rowid, 0)
    if len(owid) < 2:
        return None
    o0, o1, b0, b1, r0, r1 = owid[:-1], owid[1:], prop[:-1], prop[1:], rowid[:-1], rowid[1:]
    last_ok = r0 < r1 if strict else r0 <= r1
    if owid.min() == owid.max() and prop.min() == prop.max():  # one (writeId, bucket): the rowIds decide
        ascending = last_ok
    else:
        ascending = (o0 < o1) | ((o0 == o1) & ((b0 < b1) | ((b0 == b1) & last_ok)))
    if ascending.all():
        return None
    at = int(np.argmin(ascending))
    return _key(owid, prop, rowid, at), _key(owid, prop, rowid, at + 1)


@dataclass(frozen=True, slots=True)
class FileFigures:
    """A task's figures for one file it wrote (or should have): a bucket file, or a part of one."""

    directory: str  # the result directory's final name
    bucket: int
    part: int | None
    expected: Tally
    found: FileCheck | None  # None: no file was written
    checksums: bool = True  # False for a rebalance: rows are renumbered, only counts compare
    strict: bool = True  # False for a delete delta: a ROW__ID may be deleted by two transactions


def file_figures(fs: FileSystem, path: str, checker: FileChecker, *, directory: str, part: int | None,
                 expected: Tally) -> FileFigures:
    """A task's figures for the file it wrote at `path`, or for no file. `checker` holds what the writer read back
    of the file's key columns (EventStreamWriter's key_observer, before the file was put in place): those figures
    stand when the file's footer counts as many rows; otherwise (another writer, or the file changed since) the
    file is read back here."""
    found = None
    if fs.exists(path):
        try:
            rows = EventFile(fs, path).num_rows
        except (CorruptFileError, SchemaMismatchError):
            rows = None
        found = checker.result() if rows == checker.events else check_file(
            fs, path, checker.bucket, checksums=checker.checksums, strict=checker.strict)
    return FileFigures(directory, checker.bucket, part, expected, found, checker.checksums, checker.strict)


def verify_output(fs: FileSystem, plan: CompactionPlan, results: Sequence) -> int:
    """Compare the figures the tasks returned (`results`: their BucketResults) with each other and with the result
    directories' listings, after the parts of split buckets were joined and before anything is renamed or committed.
    Returns the number of bucket files verified.

    Raises:
        CompactionVerificationError: a file holds other events than expected, out of order or of another bucket; a
            bucket file is missing or extra; a task reported no figures. Every problem is logged at ERROR.
    """
    problems: list[str] = []
    units = {(work.bucket, work.part) for work in plan.buckets}
    reported: dict[tuple[int, int | None], int] = defaultdict(int)
    per_file: dict[tuple[str, int], list[FileFigures]] = defaultdict(list)
    for result in results:
        figures = getattr(result, "figures", None)
        if figures is None:
            continue
        reported[(result.bucket, getattr(result, "part", None))] += 1
        for figure in figures:
            per_file[(figure.directory, figure.bucket)].append(figure)
    for bucket, part in sorted(units - reported.keys(), key=lambda unit: (unit[0], unit[1] or 0)):
        problems.append(f"the task of bucket {bucket}{_part(part)} reported no figures")
    for (bucket, part), times in sorted(reported.items(), key=lambda item: (item[0][0], item[0][1] or 0)):
        if (bucket, part) not in units:
            problems.append(f"a task reported figures for bucket {bucket}{_part(part)}, which the plan does not have")
        elif times > 1:
            problems.append(f"the task of bucket {bucket}{_part(part)} reported its figures {times} times")
    split = {work.bucket for work in plan.buckets if work.part is not None}
    verified = 0
    for final, _ in plan.outputs:
        directory = plan.temp_dir(final)
        present = {entry.name for entry in fs.list_dir(directory, missing_ok=True)}
        wanted: set[int] = set()
        for (name, bucket), figures in sorted(per_file.items()):
            if name != final:
                continue
            expected, found, issues = _combined(figures)
            file_name = bucket_file_name(bucket)
            if expected.events:
                wanted.add(bucket)
                if not issues and file_name not in present:
                    issues = ["its task wrote it, the directory does not hold it"]
            if not issues and bucket in split and found is not None:
                issues = _joined_file_issues(fs, fs.join(directory, file_name), found)
            if issues:
                problems.append(f"{final}/{file_name}: {'; '.join(issues)}")
        for name in sorted(present - {ACID_FORMAT_FILE}):
            parsed = parse_bucket_file(name)
            if parsed is None or parsed.attempt is not None:
                problems.append(f"{final}/{name}: not a bucket file (a result directory holds only bucket files)")
            elif parsed.bucket not in wanted:
                problems.append(f"{final}/{name}: expected no file (no events for bucket {parsed.bucket}), found one")
            else:
                verified += 1
    if problems:
        for problem in problems:
            _log.error("compaction %s of %s: verification failed: %s", plan.compaction_id, plan.location, problem)
        more = f" (and {len(problems) - 1} more problems, logged at ERROR)" if len(problems) > 1 else ""
        raise CompactionVerificationError(f"verification failed: {problems[0]}{more}; nothing was committed, the "
                                          "table is unchanged")
    return verified


def _part(part: int | None) -> str:
    return "" if part is None else f" part {part}"


def _combined(figures: list[FileFigures]) -> tuple[Tally, Tally | None, list[str]]:
    """A bucket's expected and found figures from its one task or its parts (in key order), and what is wrong."""
    figures = sorted(figures, key=lambda figure: -1 if figure.part is None else figure.part)
    checksums = all(figure.checksums for figure in figures)
    strict = all(figure.strict for figure in figures)
    expected = sum((figure.expected for figure in figures), Tally())
    written = [figure.found for figure in figures if figure.found is not None]
    issues: list[str] = []
    unreadable = next((check.unreadable for check in written if check.unreadable), None)
    if unreadable:
        return expected, None, [f"cannot be read back: {unreadable}"]
    found = sum((check.found for check in written), Tally()) if written else None
    if found is None and expected.events:
        issues.append(f"expected {expected.describe(checksums=checksums)}, found no file")
    elif found is not None and (found.events != expected.events or (checksums and found.checksum != expected.checksum)):
        issues.append(f"expected {expected.describe(checksums=checksums)}, "
                      f"found {found.describe(checksums=checksums, noun='')}")
    disorder = next((check.disorder for check in written if check.disorder), None)
    for before, after in zip(written, written[1:]):
        if (disorder is None and before.last is not None and after.first is not None
                and (before.last >= after.first if strict else before.last > after.first)):
            disorder = before.last, after.first
    if disorder is not None:
        issues.append(f"ROW__IDs not {'strictly ' if strict else ''}ascending: {disorder[1]} after {disorder[0]}")
    foreign = next((check.foreign_bucket for check in written if check.foreign_bucket is not None), None)
    if foreign is not None:
        issues.append(f"an event has bucket property {foreign} (bucket {_bucket_id(foreign)}), not of this file's "
                      f"bucket {figures[0].bucket}")
    return expected, found, issues


def _bucket_id(bucket_property: int) -> str:
    try:
        return str(decode_bucket_id(bucket_property & 0xFFFFFFFF))
    except BucketCodecError:
        return "of no known BucketCodec"


def _joined_file_issues(fs: FileSystem, path: str, parts: Tally) -> list[str]:
    """What is wrong with the driver's concatenation of a bucket's parts (footer only): its row count is not the
    parts', or its key index (the last key of each stripe) is not ascending."""
    try:
        joined = EventFile(fs, path)
        index = joined.key_index()
    except (CorruptFileError, SchemaMismatchError) as exc:
        return [f"the file joined from its parts cannot be read: {exc}"]
    if joined.num_rows != parts.events:
        return [f"the file joined from its parts holds {joined.num_rows} events, the parts {parts.events}"]
    if any(not before < after for before, after in zip(index, index[1:])):
        return ["the file joined from its parts has stripes out of key order (hive.acid.key.index)"]
    return []
