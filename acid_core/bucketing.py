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

from acid_core.errors import InvalidRowError
from acid_core.orc_events import Column
from acid_core.types import TEXT_KINDS, HiveType, parse_type

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
