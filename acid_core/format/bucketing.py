"""Which bucket a row belongs to in a `CLUSTERED BY (...) INTO n BUCKETS` table, as Hive computes it.

bucketing_version 2 (Hive 3's default): per column Murmur3 x86_32 (seed 104729) of the value's big-endian bytes (UTF-8 for
strings), combined as `h = 31*h + field_hash`; bucketing_version 1 (Hive 1/2): Java hashCode of each value, same combine.
Bucket = (h & Integer.MAX_VALUE) % n (ObjectInspectorUtils.getBucketNumber). A varchar(n) value is hashed cut to n
characters, a char(n) value cut and without trailing spaces (ObjectInspectorUtils.hashCodeMurmur hashes
HiveChar.getStrippedValue, HiveCharWritable.hashCode likewise), so padded and unpadded char values share a bucket.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from acid_core.errors import InvalidRowError
from acid_core.format.orc_events import Column
from acid_core.format.types import TEXT_KINDS, HiveType, parse_type

MURMUR_SEED = 104729
_INT_TYPES = {"tinyint": ">b", "smallint": ">h", "int": ">i", "bigint": ">q"}
_FLOAT_TYPES = {"float": ">f", "double": ">d"}


def _int32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


def murmur3_32(data: bytes, seed: int = MURMUR_SEED) -> int:
    """MurmurHash3 x86_32 as Hive's org.apache.hive.common.util.Murmur3.hash32 (signed 32-bit result)."""
    c1, c2 = 0xCC9E2D51, 0x1B873593
    h = seed & 0xFFFFFFFF
    blocks = len(data) // 4
    for (k,) in struct.iter_unpack("<I", data[:blocks * 4]):
        k = (k * c1) & 0xFFFFFFFF
        k = ((k << 15) | (k >> 17)) & 0xFFFFFFFF
        k = (k * c2) & 0xFFFFFFFF
        h ^= k
        h = ((h << 13) | (h >> 19)) & 0xFFFFFFFF
        h = (h * 5 + 0xE6546B64) & 0xFFFFFFFF
    tail = data[blocks * 4:]
    k = 0
    for index in reversed(range(len(tail))):
        k = (k << 8) | tail[index]
    if tail:
        k = (k * c1) & 0xFFFFFFFF
        k = ((k << 15) | (k >> 17)) & 0xFFFFFFFF
        k = (k * c2) & 0xFFFFFFFF
        h ^= k
    h ^= len(data)
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & 0xFFFFFFFF
    h ^= h >> 16
    return _int32(h)


_SUPPORTED = (*_INT_TYPES, *_FLOAT_TYPES, "boolean", *TEXT_KINDS)


def _value_bytes(value, kind: str) -> bytes:
    if kind in _INT_TYPES:
        return struct.pack(_INT_TYPES[kind], value)
    if kind in _FLOAT_TYPES:
        return struct.pack(_FLOAT_TYPES[kind], value)
    if kind == "boolean":
        return b"\x01" if value else b"\x00"
    if kind in TEXT_KINDS:
        return str(value).encode("utf-8")
    raise InvalidRowError(f"bucketing on type {kind!r} is not supported (supported: integer types, float, double, "
                          "boolean, string, varchar, char)")


def _java_hash(value, kind: str) -> int:
    """Java hashCode of the value's Hive writable (bucketing_version 1)."""
    if kind in ("tinyint", "smallint", "int"):
        return _int32(value)
    if kind == "bigint":
        return _int32(value ^ ((value & 0xFFFFFFFFFFFFFFFF) >> 32))
    if kind == "boolean":
        return 1 if value else 0
    if kind == "float":
        return struct.unpack(">i", struct.pack(">f", value))[0]
    if kind == "double":
        bits = struct.unpack(">q", struct.pack(">d", value))[0]
        return _int32(bits ^ ((bits & 0xFFFFFFFFFFFFFFFF) >> 32))
    if kind in TEXT_KINDS:
        result = 1
        for byte in str(value).encode("utf-8"):
            result = _int32(31 * result + (byte - 256 if byte > 127 else byte))
        return result
    raise InvalidRowError(f"bucketing on type {kind!r} is not supported")


def bucket_hash(values: Sequence, types: Sequence[str], *, version: int = 2) -> int:
    """Hive's combined hash of the bucketing column values (null hashes to 0); `types` are Hive type strings."""
    return _combined_hash(values, [parse_type(t) for t in types], version)


def _combined_hash(values: Sequence, types: Sequence[HiveType], version: int) -> int:
    combined = 0
    for value, hive_type in zip(values, types):
        kind = hive_type.kind
        if value is not None and hive_type.length is not None:  # char, varchar: the value Hive holds and hashes
            value = str(value)[:hive_type.length]
            value = value.rstrip(" ") if kind == "char" else value
        if value is None:
            field_hash = 0
        elif version == 2:
            field_hash = murmur3_32(_value_bytes(value, kind))
        else:
            field_hash = _java_hash(value, kind)
        combined = _int32(31 * combined + field_hash)
    return combined


def bucket_function(columns: Sequence[Column], bucket_columns: Sequence[str], bucket_count: int, *,
                    version: int = 2) -> Callable[[tuple], int]:
    """A function from a row tuple (in table column order) to its bucket number.

    Raises:
        InvalidRowError: a bucketing column is unknown or of an unsupported type, or the version is not 1 or 2.
    """
    if version not in (1, 2):
        raise InvalidRowError(f"bucketing_version {version!r} must be 1 or 2")
    positions, types = [], []
    by_name = {c.name.lower(): (i, c.type) for i, c in enumerate(columns)}
    for name in bucket_columns:
        if name.lower() not in by_name:
            raise InvalidRowError(f"bucketing column {name!r} is not a table column ({[c.name for c in columns]})")
        position, type_name = by_name[name.lower()]
        hive_type = parse_type(type_name)
        if hive_type.kind not in _SUPPORTED:
            raise InvalidRowError(f"bucketing column {name!r} has type {type_name!r}, which bucketing does not support "
                                  "(integer types, float, double, boolean, string, varchar, char)")
        positions.append(position)
        types.append(hive_type)

    def place(row: tuple) -> int:
        return (_combined_hash([row[p] for p in positions], types, version) & 0x7FFFFFFF) % bucket_count

    return place


# --- vectorized: a whole Arrow batch at once ---------------------------------------------------------------------
_M32 = np.uint64(0xFFFFFFFF)
_C1, _C2 = np.uint64(0xCC9E2D51), np.uint64(0x1B873593)
_INT_WIDTHS = {"tinyint": 1, "smallint": 2, "int": 4, "bigint": 8}


def _rotl(k: np.ndarray, r: int) -> np.ndarray:
    return ((k << np.uint64(r)) | (k >> np.uint64(32 - r))) & _M32


def _mix_block(h: np.ndarray, k: np.ndarray) -> np.ndarray:
    k = (k * _C1) & _M32
    k = _rotl(k, 15)
    k = (k * _C2) & _M32
    h = h ^ k
    h = _rotl(h, 13)
    return (h * np.uint64(5) + np.uint64(0xE6546B64)) & _M32


def _mix_tail(h: np.ndarray, k: np.ndarray, has_tail: np.ndarray) -> np.ndarray:
    k = (k * _C1) & _M32
    k = _rotl(k, 15)
    k = (k * _C2) & _M32
    return np.where(has_tail, h ^ k, h)


def _finish(h: npt.NDArray[np.uint64], length: np.ndarray) -> np.ndarray:
    h = h ^ length.astype(np.uint64)
    h ^= h >> np.uint64(16)
    h = (h * np.uint64(0x85EBCA6B)) & _M32
    h ^= h >> np.uint64(13)
    h = (h * np.uint64(0xC2B2AE35)) & _M32
    h ^= h >> np.uint64(16)
    return h


def _murmur_bytes(data: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Murmur3 x86_32 (Hive's seed) of each value data[offsets[i]:offsets[i+1]] (uint8), as uint64 holding 32 bits.
    Work follows the bytes: one pass per 4-byte block index, over the rows that have that block."""
    starts, lengths = offsets[:-1].astype(np.int64), np.diff(offsets).astype(np.int64)
    h = np.full(len(lengths), MURMUR_SEED, dtype=np.uint64)
    blocks = lengths // 4
    padded = np.concatenate([data, np.zeros(4, dtype=np.uint8)]).astype(np.uint64)
    order = np.argsort(-blocks, kind="stable")  # longest first: the rows with a block b are a prefix
    longer_than = len(blocks) - np.cumsum(np.bincount(blocks))  # longer_than[b]: rows with more than b blocks
    for block in range(int(blocks.max(initial=0))):
        rows = order[:longer_than[block]]
        at = starts[rows] + 4 * block
        k = padded[at] | (padded[at + 1] << np.uint64(8)) | (padded[at + 2] << np.uint64(16)) | (padded[at + 3] << np.uint64(24))
        h[rows] = _mix_block(h[rows], k)
    tails = lengths - 4 * blocks
    at = starts + 4 * blocks
    k = np.zeros(len(lengths), dtype=np.uint64)
    for index in (2, 1, 0):
        k = np.where(tails > index, (k << np.uint64(8)) | padded[np.minimum(at + index, len(data))], k)
    h = _mix_tail(h, k, tails > 0)
    return _finish(h, lengths)


def _murmur_fixed(values: np.ndarray, width: int) -> np.ndarray:
    """`_murmur_bytes` of every value's `width` big-endian bytes, for fixed-width values: the 4-byte blocks are
    columns of one view of the array (no gathering), in uint32 arithmetic (numpy wraps it modulo 2**32, as the hash
    does), `width // 4` passes over the rows."""
    count = len(values)
    raw = np.ascontiguousarray(values.astype(values.dtype.newbyteorder(">"))).view(np.uint8).reshape(count, width)
    h = np.full(count, MURMUR_SEED, dtype=np.uint32)
    blocks = width // 4
    c1, c2 = np.uint32(0xCC9E2D51), np.uint32(0x1B873593)
    if blocks:
        words = raw[:, :blocks * 4].copy().view("<u4")  # (count, blocks): each block read little-endian
        for block in range(blocks):
            k = words[:, block] * c1
            k = (k << np.uint32(15)) | (k >> np.uint32(17))
            k *= c2
            h ^= k
            h = (h << np.uint32(13)) | (h >> np.uint32(19))
            h = h * np.uint32(5) + np.uint32(0xE6546B64)
    if width % 4:
        k = np.zeros(count, dtype=np.uint32)
        for index in reversed(range(blocks * 4, width)):
            k = (k << np.uint32(8)) | raw[:, index].astype(np.uint32)
        k *= c1
        k = (k << np.uint32(15)) | (k >> np.uint32(17))
        k *= c2
        h ^= k
    h ^= np.uint32(width)
    h ^= h >> np.uint32(16)
    h *= np.uint32(0x85EBCA6B)
    h ^= h >> np.uint32(13)
    h *= np.uint32(0xC2B2AE35)
    h ^= h >> np.uint32(16)
    return h.astype(np.uint64)


def _text_values(array: pa.Array, hive_type: HiveType) -> pa.Array:
    """Strings as Hive holds them for hashing: varchar(n) cut to n characters, char(n) cut and right-trimmed."""
    array = array.cast(pa.large_string())
    if hive_type.length is not None:
        array = pc.utf8_slice_codeunits(array, 0, hive_type.length)
        if hive_type.kind == "char":
            array = pc.utf8_rtrim(array, characters=" ")
    return array


def _java_string_hash(data: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Java's Text hash of each value: h = 31*h + (signed byte), from 1 (bucketing_version 1), mod 2**32."""
    lengths = np.diff(offsets).astype(np.int64)
    max_length = int(lengths.max(initial=0))
    powers = np.ones(max_length + 1, dtype=np.uint64)
    for i in range(1, max_length + 1):
        powers[i] = (powers[i - 1] * np.uint64(31)) & _M32
    sums = np.zeros(len(lengths), dtype=np.uint64)
    if len(data):
        row_of_byte = np.repeat(np.arange(len(lengths)), lengths)
        from_end = offsets[1:].astype(np.int64)[row_of_byte] - 1 - np.arange(len(data), dtype=np.int64)
        signed = data.view(np.int8).astype(np.int64).astype(np.uint64)  # two's complement: sums wrap mod 2**64
        terms = signed * powers[from_end]
        nonempty = lengths > 0
        sums[nonempty] = np.add.reduceat(terms, offsets[:-1].astype(np.int64)[nonempty])
    return (powers[lengths] + sums) & _M32


def _column_hash(array: pa.Array, hive_type: HiveType, version: int) -> np.ndarray:
    """Hive's per-field hash of every value of one column, as uint64 holding 32 bits (null: 0)."""
    kind = hive_type.kind
    valid = ~np.asarray(array.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    if kind in TEXT_KINDS:
        text = _text_values(array, hive_type).fill_null("")
        offsets = np.frombuffer(text.buffers()[1], dtype=np.int64)[text.offset:text.offset + len(text) + 1]
        data = np.frombuffer(text.buffers()[2], dtype=np.uint8) if text.buffers()[2] is not None else \
            np.zeros(0, dtype=np.uint8)
        data, offsets = data[offsets[0]:offsets[-1]], offsets - offsets[0]
        hashed = _murmur_bytes(data, offsets) if version == 2 else _java_string_hash(data, offsets)
    elif kind == "boolean":
        values = np.asarray(array.fill_null(False).to_numpy(zero_copy_only=False), dtype=bool)
        hashed = _murmur_fixed(values.astype(np.uint8), 1) if version == 2 else values.astype(np.uint64)
    elif kind in _INT_WIDTHS or kind in _FLOAT_TYPES:
        width = _INT_WIDTHS.get(kind) or (4 if kind == "float" else 8)
        dtype = f"i{width}" if kind in _INT_WIDTHS else f"f{width}"
        values = np.asarray(array.fill_null(0).to_numpy(zero_copy_only=False)).astype(dtype)
        if version == 2:  # Murmur3 of the big-endian bytes
            hashed = _murmur_fixed(values, width)
        elif width == 8:  # Java's Long/Double hashCode: the bits folded
            bits = values.view(np.uint64)
            hashed = (bits ^ (bits >> np.uint64(32))) & _M32
        elif kind == "float":  # Float.floatToIntBits
            hashed = values.view(np.uint32).astype(np.uint64)
        else:  # the int value itself
            hashed = values.astype(np.int64).astype(np.uint64) & _M32
    else:
        raise InvalidRowError(f"bucketing on type {kind!r} is not supported")
    return np.where(valid, hashed, np.uint64(0))


def bucket_numbers(columns: Sequence[Column], bucket_columns: Sequence[str], bucket_count: int,
                   batch: pa.RecordBatch | pa.Table, *, version: int = 2) -> np.ndarray:
    """The bucket number of every row of `batch` (its columns named as the table's), as `bucket_function` gives it
    row by row, computed on whole Arrow columns: time and memory follow the batch's bytes.

    Raises:
        InvalidRowError: as `bucket_function`.
    """
    bucket_function(columns, bucket_columns, bucket_count, version=version)  # the same checks and messages
    by_name = {c.name.lower(): c for c in columns}
    combined = np.zeros(batch.num_rows, dtype=np.uint64)
    for name in bucket_columns:
        column = by_name[name.lower()]
        array = batch.column(batch.schema.get_field_index(column.name))
        if isinstance(array, pa.ChunkedArray):
            array = array.combine_chunks()
        combined = (combined * np.uint64(31) + _column_hash(array, parse_type(column.type), version)) & _M32
    return ((combined & np.uint64(0x7FFFFFFF)) % np.uint64(bucket_count)).astype(np.int64)
