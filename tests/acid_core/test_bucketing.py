"""Hive's bucket placement; Murmur3 vectors were computed with Hive's own org.apache.hive.common.util.Murmur3."""

from __future__ import annotations

import struct

import pytest

from acid_core.errors import InvalidRowError
from acid_core.format.bucketing import bucket_function, bucket_hash, murmur3_32
from acid_core.format.orc_events import Column, parse_columns


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


def test_bucket_numbers_of_a_batch_match_the_row_by_row_function_for_every_type_and_version():
    """The vectorized bucketing (Spark inserts) against the per-row function (Hive's algorithm, checked against
    Hive's own values above): every supported type, nulls, multi-byte and 4-byte UTF-8, empty strings, strings of
    every tail length, varchar cut and char cut and right-trimmed, extreme and negative numbers, both versions."""
    import random

    import numpy as np
    import pyarrow as pa

    from acid_core.format.bucketing import bucket_numbers

    rng = random.Random(7)
    alphabet = "ab ZÅ€中😀éxyz0123 "

    def text() -> str:
        return "".join(rng.choice(alphabet) for _ in range(rng.choice([0, 1, 2, 3, 4, 5, 7, 8, 9, 15, 40, 300])))

    columns = [Column("a", "tinyint"), Column("b", "smallint"), Column("c", "int"), Column("d", "bigint"),
               Column("e", "float"), Column("f", "double"), Column("g", "boolean"), Column("h", "string"),
               Column("i", "varchar(5)"), Column("j", "char(6)")]
    count = 2000
    values = {
        "a": [rng.choice([None, rng.randint(-128, 127)]) for _ in range(count)],
        "b": [rng.choice([None, rng.randint(-32768, 32767)]) for _ in range(count)],
        "c": [rng.choice([None, rng.randint(-2 ** 31, 2 ** 31 - 1)]) for _ in range(count)],
        "d": [rng.choice([None, rng.randint(-2 ** 63, 2 ** 63 - 1)]) for _ in range(count)],
        "e": [rng.choice([None, float(np.float32(rng.uniform(-1e6, 1e6)))]) for _ in range(count)],
        "f": [rng.choice([None, rng.uniform(-1e300, 1e300), 0.0, -0.0]) for _ in range(count)],
        "g": [rng.choice([None, True, False]) for _ in range(count)],
        "h": [rng.choice([None, text()]) for _ in range(count)],
        "i": [rng.choice([None, text()]) for _ in range(count)],
        "j": [rng.choice([None, text() + "  "]) for _ in range(count)],
    }
    arrow_types = {"a": pa.int8(), "b": pa.int16(), "c": pa.int32(), "d": pa.int64(), "e": pa.float32(),
                   "f": pa.float64(), "g": pa.bool_(), "h": pa.string(), "i": pa.string(), "j": pa.large_string()}
    batch = pa.RecordBatch.from_pydict({name: pa.array(v, arrow_types[name]) for name, v in values.items()})
    rows = list(zip(*(values[c.name] for c in columns)))
    for version in (1, 2):
        for bucketed in (["a"], ["b"], ["c"], ["d"], ["e"], ["f"], ["g"], ["h"], ["i"], ["j"], ["c", "h", "d", "j"]):
            place = bucket_function(columns, bucketed, 37, version=version)
            expected = [place(row) for row in rows]
            assert bucket_numbers(columns, bucketed, 37, batch, version=version).tolist() == expected, \
                (version, bucketed)
    sliced = batch.slice(17, 500)  # a slice's offsets do not start at 0
    place = bucket_function(columns, ["h", "j"], 8)
    assert bucket_numbers(columns, ["h", "j"], 8, sliced).tolist() == [place(row) for row in rows[17:517]]
