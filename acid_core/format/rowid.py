"""Row identity: ROW__ID (writeId, bucketId, rowId) and Hive's BucketCodec for the packed `bucket` value.

BucketCodec V1 (Hive 3+): bits 31..29 = 001, bits 27..16 = bucket (writer) id, bits 11..0 = statement id.
V0 (Hive 1/2): the whole value is the bucket id. The version is the top three bits (hive-acid-reference.md section 4).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from acid_core.errors import BucketCodecError

_MAX_BUCKET = 4095
_MAX_STATEMENT = 4095
_V1_FLAG = 1 << 29


def codec_version(bucket_property: int) -> int:
    """The BucketCodec version stored in the top three bits of the packed value."""
    return (bucket_property & 0xE0000000) >> 29


def encode_bucket(bucket_id: int, statement_id: int = 0) -> int:
    """BucketCodec V1 encoding of a bucket (writer) id and a statement id.

    Raises:
        BucketCodecError: either id is outside 0..4095.
    """
    if not 0 <= bucket_id <= _MAX_BUCKET:
        raise BucketCodecError(f"bucket id {bucket_id} is outside 0..{_MAX_BUCKET} (BucketCodec V1)")
    statement_id = max(statement_id, 0)
    if statement_id > _MAX_STATEMENT:
        raise BucketCodecError(f"statement id {statement_id} is outside 0..{_MAX_STATEMENT} (BucketCodec V1)")
    return _V1_FLAG | (bucket_id << 16) | statement_id


def decode_bucket_id(bucket_property: int) -> int:
    """The bucket (writer) id of a packed value, V0 or V1.

    Raises:
        BucketCodecError: the version bits name no known codec.
    """
    version = codec_version(bucket_property)
    if version == 0:
        return bucket_property
    if version == 1:
        return (bucket_property & 0x0FFF0000) >> 16
    raise BucketCodecError(f"bucket value {bucket_property} has unknown BucketCodec version {version}")


def decode_statement_id(bucket_property: int) -> int:
    """The statement id of a packed value (0 for V0)."""
    version = codec_version(bucket_property)
    if version == 0:
        return 0
    if version == 1:
        return bucket_property & 0xFFF
    raise BucketCodecError(f"bucket value {bucket_property} has unknown BucketCodec version {version}")


def decode_bucket_ids(bucket_properties: np.ndarray) -> np.ndarray:
    """Vectorised decode_bucket_id over an int32 array (V0 values pass through)."""
    values = bucket_properties.astype(np.int64) & 0xFFFFFFFF
    version = values >> 29
    if np.any((version != 0) & (version != 1)):
        bad = int(bucket_properties[(version != 0) & (version != 1)][0])
        raise BucketCodecError(f"bucket value {bad} has unknown BucketCodec version {codec_version(bad & 0xFFFFFFFF)}")
    return np.where(version == 1, (values & 0x0FFF0000) >> 16, values).astype(np.int32)


@dataclass(frozen=True, slots=True, order=True)
class RowId:
    """Hive's ROW__ID: (writeId, bucketId as the packed bucket property, rowId); ordered as Hive's RecordIdentifier."""

    write_id: int
    bucket_property: int
    row_id: int

    def to_json(self) -> dict:
        """The `row__id` object printed by `acid read`."""
        return {"writeid": self.write_id, "bucketid": self.bucket_property, "rowid": self.row_id}
