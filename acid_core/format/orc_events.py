"""ORC ACID event files: the exact event schema, user metadata and side files (hive-acid-reference.md section 4).

Writing goes through pyorc (it can set ORC user metadata and cut stripes where we say, which the key index needs);
reading goes through pyarrow's columnar ORC reader. Every row of an event file is
``struct<operation:int, originalTransaction:bigint, bucket:int, rowId:bigint, currentTransaction:bigint, row:struct<...>>``.
"""

from __future__ import annotations

import functools
import struct as _struct
from collections.abc import Generator, Iterable, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.orc as pa_orc
import pyorc

from acid_core.errors import CorruptFileError, InvalidTypeError, SchemaMismatchError
from acid_core.format.orc_concat import concatenate
from acid_core.format.orc_stripe_range import StripeRangeFile
from acid_core.format.types import parse_type
from acid_core.storage.fs import FileSystem

OPERATION, ORIGINAL_WRITE_ID, BUCKET, ROW_ID, CURRENT_WRITE_ID, ROW = (
    "operation", "originalTransaction", "bucket", "rowId", "currentTransaction", "row")
EVENT_FIELDS = (OPERATION, ORIGINAL_WRITE_ID, BUCKET, ROW_ID, CURRENT_WRITE_ID, ROW)
KEY_FIELDS = (ORIGINAL_WRITE_ID, BUCKET, ROW_ID)
_EVENT_TYPES = (pa.int32(), pa.int64(), pa.int32(), pa.int64(), pa.int64())

INSERT_OPERATION, UPDATE_OPERATION, DELETE_OPERATION = 0, 1, 2
KEY_INDEX_KEY = "hive.acid.key.index"
STATS_KEY = "hive.acid.stats"
VERSION_KEY = "hive.acid.version"
ACID_VERSION = "2"
DEFAULT_STRIPE_ROWS = 1_000_000
# pyorc hands rows to ORC in batches of this size; stripes are cut only at batch boundaries.
_BATCH_ROWS = 1024
# Hive 3.1's ORC reader (ORC 1.5) has no ZSTD, so only what every Hive 3 cluster can read is offered.
COMPRESSIONS = {"ZLIB": pyorc.CompressionKind.ZLIB, "SNAPPY": pyorc.CompressionKind.SNAPPY,
                "NONE": pyorc.CompressionKind.NONE}


@dataclass(frozen=True, slots=True)
class Column:
    """A table column: a name and a Hive/ORC type string such as `int`, `string` or `decimal(10,2)`."""

    name: str
    type: str


def parse_columns(columns: Iterable[Column | tuple[str, str]]) -> tuple[Column, ...]:
    """Validate table columns; their types come back in canonical form (`acid_core.format.types`).

    Raises:
        SchemaMismatchError: no columns, a duplicate name, or a type that is not a Hive type (InvalidTypeError).
    """
    given = tuple(c if isinstance(c, Column) else Column(*c) for c in columns)
    if not given:
        raise SchemaMismatchError("a table needs at least one column")
    seen, result = set(), []
    for column in given:
        if not column.name or column.name.lower() in seen:
            raise SchemaMismatchError(f"column name {column.name!r} is empty or repeated")
        seen.add(column.name.lower())
        try:
            result.append(Column(column.name, str(parse_type(column.type))))
        except InvalidTypeError as exc:
            raise InvalidTypeError(f"column {column.name!r}: {exc}") from None
    return tuple(result)


def row_struct(columns: Sequence[Column]) -> str:
    """The ORC type string of the `row` struct (ORC's spelling: field names quoted where ORC needs it)."""
    return "struct<" + ",".join(f"{c.name}:{parse_type(c.type).orc_name()}" for c in columns) + ">"


def event_schema(columns: Sequence[Column]) -> str:
    """The ORC type string of an ACID event file for these table columns."""
    return (f"struct<{OPERATION}:int,{ORIGINAL_WRITE_ID}:bigint,{BUCKET}:int,{ROW_ID}:bigint,"
            f"{CURRENT_WRITE_ID}:bigint,{ROW}:{row_struct(columns)}>")


@dataclass(frozen=True, slots=True)
class AcidStats:
    """`hive.acid.stats`: counts of insert, update and delete events in a file."""

    inserts: int = 0
    updates: int = 0
    deletes: int = 0

    def serialize(self) -> bytes:
        return f"{self.inserts},{self.updates},{self.deletes}".encode()

    @classmethod
    def parse(cls, text: str, path: str) -> AcidStats:
        try:
            inserts, updates, deletes = (int(part) for part in text.split(","))
        except ValueError:
            raise CorruptFileError(f"{path}: user metadata {STATS_KEY}={text!r} is not '<inserts>,<updates>,<deletes>'") from None
        return cls(inserts, updates, deletes)


class EventFileWriter:
    """Writes one bucket file of ACID events, cutting stripes every `stripe_rows` events and recording the key index.

    Events must be handed over in key order (originalTransaction, bucket, rowId), which Hive's readers rely on.
    """

    def __init__(self, stream, columns: Sequence[Column], *, compression: str = "ZLIB",
                 stripe_rows: int = DEFAULT_STRIPE_ROWS, batch_rows: int = _BATCH_ROWS) -> None:
        if compression.upper() not in COMPRESSIONS:
            raise SchemaMismatchError(f"compression {compression!r} is not one of {sorted(COMPRESSIONS)} "
                                      "(Hive 3.1 cannot read ZSTD)")
        self._writer = pyorc.Writer(stream, event_schema(columns), compression=COMPRESSIONS[compression.upper()],
                                    stripe_size=1 << 40, batch_size=batch_rows, struct_repr=pyorc.StructRepr.TUPLE)
        # A stripe cut must fall on a batch boundary, or pyorc still holds rows the stripe should contain.
        # Streaming writers use batch_rows=1 so that every flush reaches the file.
        self._stripe_rows = max(1, -(-stripe_rows // batch_rows)) * batch_rows
        self._in_stripe = 0
        self._key_index: list[str] = []
        self._last_key: tuple[int, int, int] | None = None
        self._counts = [0, 0, 0]

    def write(self, events: Sequence[tuple], *, operation: int) -> None:
        """Write events `(operation, originalTransaction, bucket, rowId, currentTransaction, row_tuple_or_None)`.

        All events of one call carry `operation` (an insert or a delete batch), which the stats count.
        """
        if operation not in (INSERT_OPERATION, UPDATE_OPERATION, DELETE_OPERATION):
            raise SchemaMismatchError(f"operation {operation!r} is not 0 (insert), 1 (update) or 2 (delete)")
        self._counts[operation] += len(events)
        start = 0
        while start < len(events):
            take = min(len(events) - start, self._stripe_rows - self._in_stripe)
            chunk = events[start:start + take]
            self._writer.writerows(chunk)
            last = chunk[-1]
            self._last_key = (last[1], last[2], last[3])
            self._in_stripe += take
            start += take
            if self._in_stripe >= self._stripe_rows:
                self._end_stripe()

    def _end_stripe(self) -> None:
        if self._in_stripe:
            self.flush()

    def flush(self) -> int:
        """End the current stripe and write an intermediate footer; returns the length a reader may use
        (what a streaming writer records in the `_flush_length` side file)."""
        if self._in_stripe:
            assert self._last_key is not None, "a stripe with rows has a last key"
            self._key_index.append("{},{},{};".format(*self._last_key))
            self._in_stripe = 0
        return self._writer.write_intermediate_footer()

    @property
    def stats(self) -> AcidStats:
        return AcidStats(*self._counts)

    def close(self) -> AcidStats:
        """Finish the last stripe, store Hive's user metadata and close the ORC file."""
        if self._in_stripe:
            assert self._last_key is not None, "a stripe with rows has a last key"
            self._key_index.append("{},{},{};".format(*self._last_key))
        self._writer.set_user_metadata(**{
            KEY_INDEX_KEY: "".join(self._key_index).encode(),
            STATS_KEY: self.stats.serialize(),
            VERSION_KEY: ACID_VERSION.encode(),
        })
        self._writer.close()
        return self.stats


def _check_event_schema(schema: pa.Schema, path: str) -> bool:
    """True for an ACID event schema, False for a plain (original) file; raise for a broken event schema."""
    names = [name.lower() for name in schema.names]
    expected = [name.lower() for name in EVENT_FIELDS]
    if names[:5] != expected[:5]:
        return False
    if names != expected:
        raise SchemaMismatchError(f"{path}: columns {schema.names} are not the ACID event schema {list(EVENT_FIELDS)}")
    for field_, expected_type in zip(schema, _EVENT_TYPES):
        if field_.type != expected_type:
            raise SchemaMismatchError(f"{path}: ACID column {field_.name!r} has type {field_.type}, expected {expected_type}")
    if not pa.types.is_struct(schema.field(5).type):
        raise SchemaMismatchError(f"{path}: ACID column 'row' has type {schema.field(5).type}, expected a struct")
    return True


def side_file_length(fs: FileSystem, side_path: str) -> int | None:
    """The last flushed length recorded in a `_flush_length` side file; None when it does not exist.

    Raises:
        CorruptFileError: the side file exists but holds no complete length (Hive: "found but is not readable").
    """
    if not fs.exists(side_path):
        return None
    data = fs.read_bytes(side_path)
    if len(data) < 8:
        raise CorruptFileError(f"{side_path} found but is not readable (holds {len(data)} bytes, no complete length); "
                               "the streaming writer may still be opening it: wait and retry")
    usable = len(data) - len(data) % 8
    return _struct.unpack(">q", data[usable - 8:usable])[0]


BATCH_ROWS = 131_072  # rows a streamed read (EventFile.iter_batches) decodes at a time


@functools.cache
def _orc_format():
    """pyarrow.dataset's ORC format, imported when a streamed read first needs it: the module imports pandas (about
    0.35 s), which every process importing the metastore paid at start-up (the `acid` command, tasks, Spark workers)."""
    import pyarrow.dataset as pa_ds

    return pa_ds.OrcFileFormat()


class EventFile:
    """An opened ORC file of a base, delta or delete delta (or an original file), read column-wise with pyarrow."""

    def __init__(self, fs: FileSystem, path: str, *, length: int | None = None) -> None:
        self.path = path
        self._fs = fs
        self._prefix: pa.Buffer | None = None  # the readable first `length` bytes of a file still being written
        try:
            if length is None:
                source = fs.open_input(path)
            else:
                self._prefix = pa.py_buffer(fs.read_bytes(path, length))
                source = pa.BufferReader(self._prefix)
            self._orc = pa_orc.ORCFile(source)
            schema = self._orc.schema
        except (pa.ArrowException, OSError, IndexError) as exc:
            raise CorruptFileError(f"{path}: not a readable ORC file ({exc})") from exc
        self.is_acid = _check_event_schema(schema, path)
        self.row_type: pa.StructType = schema.field(5).type if self.is_acid else pa.struct(list(schema))
        metadata = self._orc.metadata or {}
        self._metadata = {k.decode() if isinstance(k, bytes) else k: v.decode() if isinstance(v, bytes) else v
                          for k, v in dict(metadata).items()}

    @property
    def num_rows(self) -> int:
        return self._orc.nrows

    @property
    def num_stripes(self) -> int:
        return self._orc.nstripes

    @property
    def file_length(self) -> int:
        """Bytes of the file (of its readable prefix, for a file opened at a flushed length)."""
        return self._orc.file_length

    @property
    def stats(self) -> AcidStats | None:
        text = self._metadata.get(STATS_KEY)
        return None if text is None else AcidStats.parse(text, self.path)

    @property
    def user_metadata(self) -> dict[str, str]:
        return dict(self._metadata)

    def key_index(self) -> list[tuple[int, int, int]]:
        """The last key of each stripe from `hive.acid.key.index`."""
        text = self._metadata.get(KEY_INDEX_KEY, "")
        keys = []
        for part in filter(None, text.split(";")):
            try:
                owid, bucket, row_id = (int(value) for value in part.split(","))
            except ValueError:
                raise CorruptFileError(f"{self.path}: {KEY_INDEX_KEY} entry {part!r} is not '<writeId>,<bucket>,<rowId>'") from None
            keys.append((owid, bucket, row_id))
        return keys

    def iter_batches(self, columns: Sequence[str], *, batch_rows: int = BATCH_ROWS,
                     stripes: range | None = None) -> Generator[pa.RecordBatch, None, None]:
        """The named top-level columns, in file order, at most `batch_rows` rows at a time: ORC's row reader
        streams through the stripes, so memory is a batch plus the compressed streams of the stripe at hand however
        many rows a stripe holds (a file written by Hive holds millions of rows in one 64 MiB stripe), where
        `read(stripe=)` decodes a whole stripe at once. `stripes` (consecutive) reads only those: the reader starts
        at the first of them without decoding the stripes before it (`orc_stripe_range`). Time: linear in the rows
        before the last batch taken, from the first stripe read.

        Raises:
            CorruptFileError: the data cannot be decoded.
            MemoryError: the process's memory (or its cap) ran out.
        """
        if stripes is not None and not len(stripes):
            return
        whole = stripes is None or (stripes.start == 0 and stripes.stop >= self.num_stripes)
        source = self.path if self._prefix is None else pa.BufferReader(self._prefix)
        filesystem = self._fs.arrow if self._prefix is None else None
        handle = None
        try:
            if not whole:
                assert stripes is not None, "no stripes chosen reads the whole file"
                handle = self._fs.open_input(self.path) if self._prefix is None else pa.BufferReader(self._prefix)
                source, filesystem = StripeRangeFile(handle, self.path, stripes.start, stripes.stop), None
            fragment = _orc_format().make_fragment(source, filesystem=filesystem)
            batches = fragment.to_batches(columns=list(columns), batch_size=batch_rows, batch_readahead=1,
                                          fragment_readahead=1, use_threads=False)
            yield from batches
        except pa.ArrowMemoryError as exc:
            raise MemoryError(f"{self.path}: out of memory decoding a batch of {batch_rows} rows ({exc}); a Spark "
                              "job's Python workers are capped by spark.executor.pyspark.memory") from exc
        except (pa.ArrowException, OSError, IndexError) as exc:
            raise CorruptFileError(f"{self.path}: cannot decode ORC data ({exc})") from exc
        finally:
            if handle is not None:
                handle.close()

    def read(self, columns: Sequence[str], *, stripe: int | None = None) -> pa.Table:
        """Read the named top-level columns (event fields, or table columns of an original file).

        Raises:
            CorruptFileError: the data cannot be decoded (truncated or damaged file).
        """
        try:
            if stripe is None:
                return self._orc.read(columns=list(columns))
            batch = self._orc.read_stripe(stripe, columns=list(columns))
            return pa.Table.from_batches([batch])
        except pa.ArrowMemoryError as exc:  # not damage: the process's memory (or its cap) ran out
            where = "the whole file" if stripe is None else f"stripe {stripe}"
            raise MemoryError(f"{self.path}: out of memory decoding {where} ({exc}); a Spark job's Python workers "
                              "are capped by spark.executor.pyspark.memory") from exc
        except (pa.ArrowException, OSError, IndexError) as exc:
            raise CorruptFileError(f"{self.path}: cannot decode ORC data ({exc})") from exc


def join_event_files(fs: FileSystem, sources: Sequence[str], destination: str) -> int:
    """Concatenate event files whose keys follow one another (each source's keys above the previous source's), stripe
    by stripe, into `destination`, one event file with the user metadata Hive's writer gives one file
    (`hive.acid.key.index`: the sources' entries in order; `hive.acid.stats`: their sums; `hive.acid.version`).
    Returns the rows written. On a local filesystem the first source becomes `destination` in place (used up).
    Memory: a copy buffer; time: one pass over the bytes of the sources but the first.

    Raises:
        SchemaMismatchError: the sources differ in schema or compression.
        CorruptFileError: a source is not an event file with `hive.acid.stats` (`EventStreamWriter` writes them).
    """
    files = [EventFile(fs, path) for path in sources]
    stats = []
    for file in files:
        if file.stats is None:
            raise CorruptFileError(f"{file.path}: an event file to join without {STATS_KEY}")
        stats.append(file.stats)
    metadata = {KEY_INDEX_KEY: "".join(f.user_metadata.get(KEY_INDEX_KEY, "") for f in files).encode(),
                STATS_KEY: AcidStats(sum(s.inserts for s in stats), sum(s.updates for s in stats),
                                     sum(s.deletes for s in stats)).serialize(),
                VERSION_KEY: ACID_VERSION.encode()}
    return concatenate(fs, sources, destination, user_metadata=metadata, consume_first=True)
