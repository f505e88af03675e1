"""The columnar event-file writer: pyarrow's ORC writer plus the Hive user metadata patched into the tail.

Used where events arrive as Arrow columns (compaction, Spark writes): it writes millions of events per second where
the row-wise pyorc writer (orc_events.EventFileWriter) manages a few hundred thousand. The file is built in a scratch
file, its per-stripe last keys are read back for `hive.acid.key.index`, `hive.acid.stats` and `hive.acid.version`
are added to the footer, and only then is it put in place.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.orc as pa_orc

from acid_core.delete_events import KeyArrays
from acid_core.errors import SchemaMismatchError, UnsortedEventsError
from acid_core.fs import FileSystem, local_scratch, put_scratch
from acid_core.orc_events import (ACID_VERSION, CURRENT_WRITE_ID, EVENT_FIELDS, KEY_FIELDS, KEY_INDEX_KEY, OPERATION,
                                  ORIGINAL_WRITE_ID, ROW, STATS_KEY, VERSION_KEY, AcidStats, BUCKET, ROW_ID)
from acid_core.orc_tail import with_user_metadata

_COMPRESSION = {"ZLIB": "zlib", "SNAPPY": "snappy", "NONE": "uncompressed"}
DEFAULT_STRIPE_BYTES = 64 * 1024 * 1024


def event_table(operation: np.ndarray | int, original: np.ndarray, bucket: np.ndarray, row_id: np.ndarray,
                current: np.ndarray, rows: pa.StructArray) -> pa.Table:
    """An Arrow table in the ACID event schema (column order and types as Hive's OrcRecordUpdater writes them)."""
    count = len(original)
    operations = np.full(count, operation, np.int32) if np.isscalar(operation) else np.asarray(operation, np.int32)
    return pa.Table.from_arrays(
        [pa.array(operations, pa.int32()), pa.array(original, pa.int64()), pa.array(bucket, pa.int32()),
         pa.array(row_id, pa.int64()), pa.array(current, pa.int64()), rows],
        names=list(EVENT_FIELDS))


def rows_struct(data: pa.Table) -> pa.StructArray:
    """The table's columns as the `row` struct of insert events."""
    if data.num_columns == 0:
        raise SchemaMismatchError("insert events need at least one column")
    combined = data.combine_chunks()
    return pa.StructArray.from_arrays([combined.column(i).chunk(0) if combined.column(i).num_chunks else
                                       pa.array([], combined.schema.field(i).type) for i in range(combined.num_columns)],
                                      fields=list(combined.schema))


def null_rows(row_type: pa.StructType, count: int) -> pa.StructArray:
    """The all-null `row` struct of delete events."""
    return pa.nulls(count, row_type)


def _check(table: pa.Table, destination: str) -> None:
    if table.column_names != list(EVENT_FIELDS):
        raise SchemaMismatchError(f"{destination}: events need columns {list(EVENT_FIELDS)}, got {table.column_names}")
    keys = KeyArrays(*(table.column(name).to_numpy() for name in KEY_FIELDS))
    if not keys.is_sorted():
        raise UnsortedEventsError(f"{destination}: events are not sorted by (originalTransaction, bucket, rowId); "
                                  "Hive's readers require it")


def write_event_table(fs: FileSystem, destination: str, table: pa.Table, *, compression: str = "ZLIB",
                      stripe_bytes: int = DEFAULT_STRIPE_BYTES) -> AcidStats:
    """Write an event table as one ORC bucket file with Hive's ACID user metadata; nothing is visible until done.

    Raises:
        SchemaMismatchError: not the event schema, or a compression Hive 3.1 cannot read.
        UnsortedEventsError: events out of key order.
        FileSystemError: `destination` exists or cannot be written.
    """
    if compression.upper() not in _COMPRESSION:
        raise SchemaMismatchError(f"compression {compression!r} is not one of {sorted(_COMPRESSION)} "
                                  "(Hive 3.1 cannot read ZSTD)")
    _check(table, destination)
    operations = table.column(OPERATION).to_numpy()
    stats = AcidStats(int((operations == 0).sum()), int((operations == 1).sum()), int((operations == 2).sum()))
    with local_scratch(fs, destination) as scratch:
        pa_orc.write_table(table, scratch.path, compression=_COMPRESSION[compression.upper()], file_version="0.12",
                           stripe_size=stripe_bytes)
        written = pa_orc.ORCFile(scratch.path)
        key_index = []
        for stripe in range(written.nstripes):
            keys = written.read_stripe(stripe, columns=list(KEY_FIELDS))
            last = keys.num_rows - 1
            key_index.append("%d,%d,%d;" % (keys.column(0)[last].as_py(), keys.column(1)[last].as_py(),
                                            keys.column(2)[last].as_py()))
        ps_length = scratch.read_tail(1)[0]
        footer_length = _footer_length(scratch.read_tail(ps_length + 1))
        tail = scratch.read_tail(footer_length + ps_length + 1)
        cut, new_tail = with_user_metadata(tail, {KEY_INDEX_KEY: "".join(key_index).encode(),
                                                  STATS_KEY: stats.serialize(),
                                                  VERSION_KEY: ACID_VERSION.encode()}, path=destination)
        scratch.replace_tail(cut, new_tail)
        put_scratch(fs, scratch, destination)
    return stats


def _footer_length(postscript_and_length: bytes) -> int:
    from acid_core.orc_tail import parse_postscript

    return parse_postscript(postscript_and_length[:-1]).footer_length


__all__ = ["event_table", "rows_struct", "null_rows", "write_event_table", "ORIGINAL_WRITE_ID", "BUCKET", "ROW_ID",
           "CURRENT_WRITE_ID", "ROW"]
