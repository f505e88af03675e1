"""ROW__ID and Hive's BucketCodec (hive-acid-reference.md section 4, BucketCodec.java)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from acid_core.errors import AcidError, BucketCodecError
from acid_core.format.rowid import (
    RowId,
    codec_version,
    decode_bucket_id,
    decode_bucket_ids,
    decode_statement_id,
    encode_bucket,
)


@pytest.mark.parametrize(("bucket", "statement", "expected"), [
    (0, 0, 536870912),            # reference: bucket 0 stmt 0 -> 0x20000000
    (1, 0, 536936448),            # reference: bucket 1 stmt 0 -> 0x20010000
    (23, 7, 0x20000000 | 23 << 16 | 7),
    (4095, 4095, 0x2FFF0FFF),     # both 12-bit fields full, reserved bits stay 0
    (0, -1, 536870912),           # BucketCodec.encode uses max(statementId, 0)
])
def test_v1_encode(bucket, statement, expected):
    assert encode_bucket(bucket, statement) == expected


def test_v1_encode_default_statement_is_zero():
    assert encode_bucket(5) == encode_bucket(5, 0) == 0x20050000


@pytest.mark.parametrize(("bucket", "statement", "shown"), [
    (4096, 0, "4096"), (-1, 0, "-1"), (0, 4096, "4096"), (1 << 20, 0, str(1 << 20)),
])
def test_v1_encode_out_of_range(bucket, statement, shown):
    with pytest.raises(BucketCodecError, match=shown) as caught:
        encode_bucket(bucket, statement)
    assert isinstance(caught.value, AcidError) and isinstance(caught.value, ValueError)


@pytest.mark.parametrize(("value", "version", "bucket", "statement"), [
    (536870912, 1, 0, 0),
    (536936448, 1, 1, 0),
    (0x20000000 | 23 << 16 | 7, 1, 23, 7),
    (0x2FFF0FFF, 1, 4095, 4095),
    (0, 0, 0, 0),                 # V0: the whole value is the bucket id (Hive 1/2 files)
    (5, 0, 5, 0),
    (4095, 0, 4095, 0),
    (70000, 0, 70000, 0),
])
def test_decode(value, version, bucket, statement):
    assert codec_version(value) == version
    assert decode_bucket_id(value) == bucket
    assert decode_statement_id(value) == statement


def test_decode_round_trips_every_bucket_and_some_statements():
    for bucket in range(4096):
        for statement in (0, 1, bucket % 4096, 4095):
            value = encode_bucket(bucket, statement)
            assert (codec_version(value), decode_bucket_id(value), decode_statement_id(value)) == (1, bucket, statement)


@pytest.mark.parametrize("value", [2 << 29, 3 << 29, 7 << 29, -1, -(2**31)])
def test_decode_unknown_version(value):
    with pytest.raises(BucketCodecError, match="version"):
        decode_bucket_id(value)
    with pytest.raises(BucketCodecError, match="version"):
        decode_statement_id(value)


def test_decode_bucket_ids_vectorised():
    values = np.array([5, 536870912, 536936448, encode_bucket(4095, 9), 0], dtype=np.int32)
    assert decode_bucket_ids(values).tolist() == [5, 0, 1, 4095, 0]
    assert decode_bucket_ids(values).tolist() == [decode_bucket_id(int(v)) for v in values]


def test_decode_bucket_ids_rejects_unknown_version():
    with pytest.raises(BucketCodecError, match="version"):
        decode_bucket_ids(np.array([536870912, 2 << 29], dtype=np.int32))
    with pytest.raises(BucketCodecError):
        decode_bucket_ids(np.array([-1], dtype=np.int32))


def test_row_id_orders_as_record_identifier():
    """writeId, then the packed bucket, then rowId (RecordIdentifier.compareToInternal)."""
    b0, b1 = encode_bucket(0), encode_bucket(1)
    ids = [RowId(2, b0, 0), RowId(1, b1, 0), RowId(1, b0, 1000), RowId(1, b0, 2), RowId(0, b1, 7),
           RowId(1, encode_bucket(0, 1), 0)]
    assert sorted(ids) == [RowId(0, b1, 7), RowId(1, b0, 2), RowId(1, b0, 1000), RowId(1, encode_bucket(0, 1), 0),
                           RowId(1, b1, 0), RowId(2, b0, 0)]
    assert RowId(1, b1, 0) > RowId(1, b0, 99) > RowId(0, b1, 10**12)
    assert sorted(ids) == sorted(ids, key=lambda r: (r.write_id, r.bucket_property, r.row_id))


def test_row_id_is_a_frozen_hashable_value():
    row_id = RowId(3, 536870912, 4)
    assert row_id == RowId(3, 536870912, 4) and len({row_id, RowId(3, 536870912, 4)}) == 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        row_id.row_id = 5  # type: ignore[misc]
    assert row_id.to_json() == {"writeid": 3, "bucketid": 536870912, "rowid": 4}
