"""Directory and file names: Hive's TestAcidUtils naming vectors and AcidUtils' parsing rules (reference section 1).

Formatting vectors come from TestAcidUtils.testCreateFilename / testCreateFilenameLargeIds /
testDeleteDeltaSubdirPathGeneration, parsing vectors from testParsing; the rest reproduces ParsedBaseLight.parseBase,
ParsedDeltaLight.parse / compareTo, BUCKET_PATTERN, ORIGINAL_PATTERN(_COPY), hiddenFileFilter and
FileUtils.escapePathName.
"""

from __future__ import annotations

import pytest

from acid_core.errors import AcidError, InvalidNameError
from acid_core.format.layout import (
    ParsedBase,
    ParsedDelta,
    base_dir_name,
    bucket_file_name,
    delta_dir_name,
    escape_partition_value,
    is_hidden,
    is_side_file,
    legacy_bucket_file_name,
    parse_base,
    parse_bucket_file,
    parse_delta,
    parse_directory,
    parse_original_file,
    parse_partition_dir_name,
    partition_dir_name,
    side_file_name,
    unescape_partition_value,
)

LONG_MIN = -9223372036854775808
LONG_MAX = 9223372036854775807


# ---------------------------------------------------------------------------------------------------------------
# Writers: testCreateFilename (bucket 23, min 100, max 200) and friends


def test_create_filename():
    assert legacy_bucket_file_name(1) == "000001_0"
    assert legacy_bucket_file_name(123) == "000123_0"
    bucket = bucket_file_name(23)
    assert f"{base_dir_name(200)}/{bucket}" == "base_0000200/bucket_00023"
    assert f"{delta_dir_name(100, 200, statement_id=0)}/{bucket}" == "delta_0000100_0000200_0000/bucket_00023"
    assert f"{delta_dir_name(100, 200, statement_id=0, delete=True)}/{bucket}" \
        == "delete_delta_0000100_0000200_0000/bucket_00023"
    assert f"{delta_dir_name(100, 200)}/{bucket}" == "delta_0000100_0000200/bucket_00023"        # statement -1
    assert f"{delta_dir_name(100, 200, delete=True)}/{bucket}" == "delete_delta_0000100_0000200/bucket_00023"
    assert f"{delta_dir_name(100, 200, statement_id=7)}/{bucket}" == "delta_0000100_0000200_0007/bucket_00023"
    assert f"{delta_dir_name(100, 200, statement_id=7, delete=True)}/{bucket}" \
        == "delete_delta_0000100_0000200_0007/bucket_00023"


def test_create_filename_large_ids_are_not_truncated():
    assert legacy_bucket_file_name(123456789) == "123456789_0"
    assert base_dir_name(1234567890) == "base_1234567890"
    assert delta_dir_name(1234567880, 1234567890, statement_id=0) == "delta_1234567880_1234567890_0000"
    assert bucket_file_name(123456) == "bucket_123456"
    assert delta_dir_name(1, 2, visibility_txn_id=12345678) == "delta_0000001_0000002_v12345678"


def test_delete_delta_subdir_path_generation():
    assert delta_dir_name(1, 10, delete=True) == "delete_delta_0000001_0000010"
    assert delta_dir_name(1, 10, statement_id=5, delete=True) == "delete_delta_0000001_0000010_0005"


def test_visibility_suffix_formatting():
    assert base_dir_name(10, visibility_txn_id=20) == "base_0000010_v0000020"
    assert base_dir_name(10, visibility_txn_id=0) == "base_0000010"
    assert delta_dir_name(1, 5, visibility_txn_id=20) == "delta_0000001_0000005_v0000020"
    assert delta_dir_name(1, 5, visibility_txn_id=20, delete=True) == "delete_delta_0000001_0000005_v0000020"
    assert delta_dir_name(3, 3, statement_id=2, visibility_txn_id=9) == "delta_0000003_0000003_0002_v0000009"


def test_converted_table_base_name():
    """`base_%07d` of Long.MIN_VALUE: the first major compaction of a converted (originals-only) table."""
    assert base_dir_name(LONG_MIN) == "base_-9223372036854775808"
    parsed = parse_base("base_-9223372036854775808")
    assert parsed.write_id == LONG_MIN and parsed.visibility_txn_id == 0


@pytest.mark.parametrize("call", [
    lambda: base_dir_name(LONG_MAX + 1),
    lambda: delta_dir_name(5, 1),
    lambda: delta_dir_name(1, 2, statement_id=10000),
    lambda: delta_dir_name(1, 2, statement_id=-1),
    lambda: base_dir_name(5, visibility_txn_id=-1),
    lambda: bucket_file_name(-1),
    lambda: legacy_bucket_file_name(-1),
], ids=["write-id-overflow", "min-above-max", "statement-10000", "statement-negative", "visibility-negative",
        "bucket-negative", "legacy-bucket-negative"])
def test_writers_reject_out_of_range_values(call):
    with pytest.raises(InvalidNameError):
        call()


# ---------------------------------------------------------------------------------------------------------------
# Parsers: testParsing and ParsedDeltaLight.parse


def test_parsing():
    base = parse_base("base_000123")
    assert (base.write_id, base.visibility_txn_id) == (123, 0)
    assert not base.is_compactor_output
    assert parse_directory("base_567") == ParsedBase("base_567", 567, 0)
    assert parse_bucket_file("bucket_123").bucket == 123
    for name, is_delete in (("delta_000005_000006", False), ("delete_delta_000005_000006", True)):
        delta = parse_directory(name)
        assert isinstance(delta, ParsedDelta)
        assert (delta.min_write_id, delta.max_write_id, delta.is_delete) == (5, 6, is_delete)
        assert delta.statement_id is None and delta.statement_order == -1
    assert parse_bucket_file("bucket_00001").bucket == 1
    original = parse_original_file("000123_0")
    assert (original.bucket, original.copy) == (123, 0)


@pytest.mark.parametrize("name, expected", [
    ("base_5", (5, 0)),
    ("base_0000010_v0000020", (10, 20)),
    ("base_10_v20", (10, 20)),
    ("base_5_v0", (5, 0)),
    ("base_1234567890123", (1234567890123, 0)),
    (f"base_{LONG_MAX}_v{LONG_MAX}", (LONG_MAX, LONG_MAX)),
])
def test_parse_base(name, expected):
    parsed = parse_base(name)
    assert (parsed.write_id, parsed.visibility_txn_id) == expected
    assert parsed.name == name
    assert parsed.is_compactor_output == (expected[1] > 0)


@pytest.mark.parametrize("name, expected", [
    ("delta_1_1", (1, 1, None, 0, False)),
    ("delta_0000001_0000005", (1, 5, None, 0, False)),
    ("delta_0000001_0000005_0003", (1, 5, 3, 0, False)),
    ("delta_0000001_0000005_v0000020", (1, 5, None, 20, False)),
    ("delta_0000001_0000005_0003_v0000020", (1, 5, 3, 20, False)),
    ("delete_delta_7_7", (7, 7, None, 0, True)),
    ("delete_delta_0000007_0000009_0001_v0000021", (7, 9, 1, 21, True)),
    ("delta_1_1_v0", (1, 1, None, 0, False)),
    ("delta_1234567880_1234567890_0000", (1234567880, 1234567890, 0, 0, False)),
])
def test_parse_delta(name, expected):
    parsed = parse_delta(name)
    assert (parsed.min_write_id, parsed.max_write_id, parsed.statement_id, parsed.visibility_txn_id,
            parsed.is_delete) == expected
    assert parsed.name == name
    assert parse_directory(name) == parsed


@pytest.mark.parametrize("min_id, max_id, statement, visibility, delete", [
    (1, 1, None, 0, False), (1, 10, 5, 0, True), (100, 200, 7, 0, False), (3, 3, 0, 44, True),
    (1234567880, 1234567890, 9999, 1234567891, False), (0, LONG_MAX, None, LONG_MAX, True),
])
def test_delta_name_round_trip(min_id, max_id, statement, visibility, delete):
    name = delta_dir_name(min_id, max_id, statement_id=statement, visibility_txn_id=visibility, delete=delete)
    assert parse_delta(name) == ParsedDelta(name, min_id, max_id, statement, visibility, delete)


@pytest.mark.parametrize("write_id, visibility", [(0, 0), (1, 0), (200, 300), (LONG_MIN, 0), (LONG_MAX, 5)])
def test_base_name_round_trip(write_id, visibility):
    name = base_dir_name(write_id, visibility_txn_id=visibility)
    assert parse_base(name) == ParsedBase(name, write_id, visibility)


def test_delete_delta_prefix_is_disjoint_from_delta():
    """`delete_delta_` does not start with `delta_` (testDeleteEventDeltaDirPathFilter)."""
    assert parse_directory("delete_delta_000001_000010").is_delete
    assert not parse_directory("delta_000001_000010").is_delete


@pytest.mark.parametrize("name", ["000000_0", "random", "HIVE_UNION_SUBDIR_1", "subdir", "bucket_00000", "basement",
                                  "deltas"])
def test_non_acid_names_are_not_directories(name):
    assert parse_directory(name) is None


# ---------------------------------------------------------------------------------------------------------------
# Malformed names


@pytest.mark.parametrize("name", [
    "base_", "base_abc", "base_5x", "base_5_v", "base_5_vX", "base_5_v1_2", "base_9223372036854775808",
    "base_5_v9223372036854775808",
])
def test_malformed_base_names(name):
    with pytest.raises(InvalidNameError) as raised:
        parse_base(name)
    assert name in str(raised.value)
    assert isinstance(raised.value, AcidError)
    with pytest.raises(InvalidNameError):
        parse_directory(name)


@pytest.mark.parametrize("name", [
    "delta_", "delta_1", "delta_1_", "delta__1", "delta_a_b", "delta_1_2_x", "delta_1_2_3_4", "delta_1_2_v",
    "delta_1_2_vx", "delete_delta_", "delete_delta_1", "delete_delta_1_2_3_4",
    "delta_9223372036854775808_9223372036854775808",
])
def test_malformed_delta_names(name):
    with pytest.raises(InvalidNameError) as raised:
        parse_delta(name)
    assert name in str(raised.value)
    with pytest.raises(InvalidNameError):
        parse_directory(name)


@pytest.mark.parametrize("parse, name", [(parse_base, "delta_1_1"), (parse_base, "000000_0"),
                                         (parse_delta, "base_1"), (parse_delta, "random")])
def test_wrong_prefix(parse, name):
    with pytest.raises(InvalidNameError) as raised:
        parse(name)
    assert name in str(raised.value)


# ---------------------------------------------------------------------------------------------------------------
# Read order: ParsedDeltaLight.compareTo


def test_delta_read_order_is_hives_compare_to():
    names = ["delta_51_60", "delta_11_20", "delta_5_10", "delta_5_20", "delta_60_60_4", "delta_60_60_1",
             "delta_60_60", "delta_40_60", "delete_delta_40_60", "delta_00061_61"]
    ordered = sorted((parse_delta(n) for n in names), key=ParsedDelta.read_order_key)
    assert [d.name for d in ordered] == [
        "delta_5_20", "delta_5_10",                 # min asc, then wider first
        "delta_11_20",
        "delete_delta_40_60", "delta_40_60",        # same range: path order, delete_delta_ first
        "delta_51_60",
        "delta_60_60", "delta_60_60_1", "delta_60_60_4",  # no statement id (-1) before statements
        "delta_00061_61",
    ]


# ---------------------------------------------------------------------------------------------------------------
# Bucket files, side files, original files, hidden names


@pytest.mark.parametrize("name, bucket, attempt", [
    ("bucket_00000", 0, None), ("bucket_0", 0, None), ("bucket_00023", 23, None), ("bucket_00023_5", 23, 5),
    ("bucket_00000_0", 0, 0), ("bucket_123456", 123456, None), ("bucket_536870912", 536870912, None),
])
def test_bucket_file_pattern(name, bucket, attempt):
    parsed = parse_bucket_file(name)
    assert (parsed.bucket, parsed.attempt) == (bucket, attempt)


@pytest.mark.parametrize("name", ["bucket_00000_flush_length", "bucket_0_flush_length", "bucket_", "bucket_abc",
                                  "000000_0", "bucket_00001_x", "_orc_acid_version", "bucket_1_2_3"])
def test_not_bucket_files(name):
    assert parse_bucket_file(name) is None


def test_bucket_file_name_with_attempt():
    assert bucket_file_name(0, attempt=0) == "bucket_00000_0"
    assert bucket_file_name(7, attempt=3) == "bucket_00007_3"
    assert parse_bucket_file(bucket_file_name(7, attempt=3)).attempt == 3


def test_side_files():
    assert side_file_name("bucket_00000") == "bucket_00000_flush_length"
    assert is_side_file("bucket_00000_flush_length")
    assert not is_side_file("bucket_00000")
    assert parse_bucket_file(side_file_name(bucket_file_name(3))) is None


@pytest.mark.parametrize("name, may_contain", [
    ("delta_1_5", True), ("delta_0000001_0000005_0000", True), ("delta_1_1", False), ("delete_delta_1_5", False),
    ("delta_1_5_v10", False), ("delta_1_5_v0", True),
])
def test_only_streaming_insert_deltas_may_contain_side_files(name, may_contain):
    assert parse_delta(name).may_contain_side_file is may_contain


@pytest.mark.parametrize("name, bucket, copy", [
    ("000000_0", 0, 0), ("000001_1", 1, 0), ("000002_0", 2, 0), ("000000_0_copy_1", 0, 1),
    ("000000_0_copy_2", 0, 2), ("000123_0_copy_12", 123, 12), ("123456789_0", 123456789, 0),
    ("subdir/000002_0", 2, 0), ("HIVE_UNION_SUBDIR_1/000003_0_copy_4", 3, 4),
])
def test_original_file_names(name, bucket, copy):
    parsed = parse_original_file(name)
    assert (parsed.name, parsed.bucket, parsed.copy) == (name, bucket, copy)


@pytest.mark.parametrize("name, hidden", [
    ("_done", True), ("_SUCCESS", True), (".hive-staging_hive_2024", True), ("_orc_acid_version", True),
    ("_metadata_acid", True), ("_tmp.delta_1_1", True), (".000000_0.crc", True),
    ("000000_0", False), ("base_1", False), ("delta_1_1", False), ("delete_delta_1_1", False), ("random", False),
    ("bucket_00000", False),
])
def test_hidden_names(name, hidden):
    assert is_hidden(name) is hidden


# ---------------------------------------------------------------------------------------------------------------
# Partition directory names (FileUtils.escapePathName / unescapePathName, Warehouse.makePartName)


@pytest.mark.parametrize("value, escaped", [
    ("2024-01-01", "2024-01-01"), ("a=b/c", "a%3Db%2Fc"), ("10:30", "10%3A30"), ("100%", "100%25"),
    ("what?", "what%3F"), ('say "hi"', "say %22hi%22"), ("a#b*c", "a%23b%2Ac"), ("x\\y", "x%5Cy"),
    ("{[^]}", "%7B%5B%5E%5D}"), ("tab\there", "tab%09here"), ("it's", "it%27s"), ("é ü", "é ü"),
])
def test_escape_partition_value(value, escaped):
    assert escape_partition_value(value) == escaped
    assert unescape_partition_value(escaped) == value


def test_unescape_leaves_invalid_escapes_alone():
    assert unescape_partition_value("100%") == "100%"
    assert unescape_partition_value("%zz") == "%zz"


def test_partition_dir_name():
    assert partition_dir_name({"ds": "2024-01-01"}) == "ds=2024-01-01"
    assert partition_dir_name({"DS": "2024-01-01", "hr": None}) == "ds=2024-01-01/hr=__HIVE_DEFAULT_PARTITION__"
    assert partition_dir_name({"k": ""}) == "k=__HIVE_DEFAULT_PARTITION__"
    assert partition_dir_name({"k": "a/b"}) == "k=a%2Fb"


def test_partition_dir_name_round_trip():
    spec = {"ds": "2024-01-01", "city": "São Paulo", "odd": "a=b/c:d%"}
    assert parse_partition_dir_name(partition_dir_name(spec)) == spec
    assert list(parse_partition_dir_name("b=2/a=1")) == ["b", "a"]


@pytest.mark.parametrize("path", ["ds", "ds=1/hr", "=1", "ds=1//hr=2"])
def test_malformed_partition_paths(path):
    with pytest.raises(InvalidNameError) as raised:
        parse_partition_dir_name(path)
    assert path in str(raised.value)


def test_empty_partition_spec_is_rejected():
    with pytest.raises(InvalidNameError):
        partition_dir_name({})
