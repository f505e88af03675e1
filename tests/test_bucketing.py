"""Hive's bucket placement; Murmur3 vectors were computed with Hive's own org.apache.hive.common.util.Murmur3."""

from __future__ import annotations

import struct

import pytest

from acid_core.bucketing import bucket_function, bucket_hash, murmur3_32
from acid_core.errors import InvalidRowError
from acid_core.orc_events import parse_columns


@pytest.mark.parametrize("data, expected", [
    (struct.pack(">i", 42), 1960085659),
    (struct.pack(">q", 1234567890123), -254696621),
    ("hello wörld".encode(), -1442364487),
    (b"abc", -885266671),
])
def test_murmur3_matches_hive(data, expected):
    assert murmur3_32(data) == expected


def test_version_1_uses_java_hash_codes():
    # Java: Integer.hashCode(7) == 7, "ab".hashCode() via Text bytes: 31*(31*1+97)+98 == 4066
    assert bucket_hash([7], ["int"], version=1) == 7
    assert bucket_hash(["ab"], ["string"], version=1) == 4066
    assert bucket_hash([7, "ab"], ["int", "string"], version=1) == 31 * 7 + 4066
    assert bucket_hash([None], ["int"]) == 0


def test_bucket_function_places_rows_in_range():
    columns = parse_columns([("id", "int"), ("name", "string")])
    place = bucket_function(columns, ["id"], 4)
    buckets = {place((i, "x")) for i in range(200)}
    assert buckets == {0, 1, 2, 3}
    assert place((42, "x")) == (1960085659 & 0x7FFFFFFF) % 4


def test_bucket_function_rejects_unknown_or_unsupported_columns():
    columns = parse_columns([("id", "int"), ("tags", "array<string>")])
    with pytest.raises(InvalidRowError, match="'missing'"):
        bucket_function(columns, ["missing"], 2)
    with pytest.raises(InvalidRowError, match="tags"):
        bucket_function(columns, ["tags"], 2)


@pytest.mark.parametrize("version", [1, 2])
def test_char_and_varchar_hash_the_value_hive_holds(version):
    """Hive hashes a char value without its padding and both cut to their length (ObjectInspectorUtils)."""
    assert bucket_hash(["ab   "], ["char(5)"], version=version) == bucket_hash(["ab"], ["string"], version=version)
    assert bucket_hash(["abcdefg"], ["char(3)"], version=version) == bucket_hash(["abc"], ["string"], version=version)
    assert bucket_hash(["abcdefg"], ["varchar(3)"], version=version) == bucket_hash(["abc"], ["string"],
                                                                                     version=version)
    assert bucket_hash(["ab  "], ["varchar(5)"], version=version) != bucket_hash(["ab"], ["string"], version=version)
    place = bucket_function(parse_columns([("c", "char(5)")]), ["c"], 7, version=version)
    assert place(("ab",)) == place(("ab   ",))
