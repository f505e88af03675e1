"""ValidTxnList / ValidWriteIdList conformance: Hive's storage-api test vectors, string round trips, range answers.

Vectors come from storage-api/src/test/org/apache/hadoop/hive/common/TestValidCompactorWriteIdList.java,
TestValidReaderWriteIdList.java and TestValidReadTxnList.java (hive-acid-reference.md section 3). Hive's table name
there is TableName.fromString("t1", "hive", "default"), whose string form is "hive.default.t1".
"""

from __future__ import annotations

import pytest

from acid_core.errors import AcidError, InvalidValidityListError
from acid_core.format.validity import (
    RangeResponse,
    ValidCleanerWriteIdList,
    ValidCompactorWriteIdList,
    ValidTxnList,
    ValidWriteIdList,
)

MAX = 9223372036854775807
TABLE = "hive.default.t1"
NONE, SOME, ALL = RangeResponse.NONE, RangeResponse.SOME, RangeResponse.ALL


# ---------------------------------------------------------------------------------------------------------------
# TestValidCompactorWriteIdList


@pytest.mark.parametrize("aborted, high_watermark, expected", [
    ((3, 4), 2, NONE),        # minTxnHigh
    ((13, 14), 12, ALL),      # maxTxnLow
    ((), 5, NONE),            # minTxnHighNoExceptions
    ((), 15, ALL),            # maxTxnLowNoExceptions
    ((3, 6), 3, NONE),        # exceptionsAllBelow
    ((8,), 7, NONE),          # exceptionsInMidst
], ids=["minTxnHigh", "maxTxnLow", "minTxnHighNoExceptions", "maxTxnLowNoExceptions", "exceptionsAllBelow",
        "exceptionsInMidst"])
def test_compactor_range_valid_7_9(aborted, high_watermark, expected):
    write_ids = ValidCompactorWriteIdList(table_name=TABLE, aborted_ids=aborted, high_watermark=high_watermark)
    assert write_ids.range_valid(7, 9) is expected


def test_compactor_exceptions_above_high_watermark_are_dropped():
    write_ids = ValidCompactorWriteIdList(table_name=TABLE, aborted_ids=(8, 11, 17, 29), high_watermark=15)
    assert write_ids.exceptions == (8, 11)
    assert write_ids.range_valid(7, 9) is ALL
    assert write_ids.range_valid(12, 16) is NONE


def test_compactor_write_to_string():
    assert str(ValidCompactorWriteIdList(table_name=TABLE, aborted_ids=(7, 9, 10, MAX), high_watermark=8)) \
        == f"{TABLE}:8:{MAX}::7"
    assert str(ValidCompactorWriteIdList()) == f"null:{MAX}:{MAX}::"
    assert str(ValidCompactorWriteIdList(table_name=TABLE, high_watermark=23)) == f"{TABLE}:23:{MAX}::"


def test_compactor_read_from_string():
    write_ids = ValidCompactorWriteIdList.parse(f"{TABLE}:37:{MAX}::7,9,10")
    assert write_ids.table_name == TABLE
    assert write_ids.high_watermark == 37
    assert write_ids.min_open_or_none is None
    assert write_ids.exceptions == (7, 9, 10)
    write_ids = ValidCompactorWriteIdList.parse(f"{TABLE}:21:{MAX}:")
    assert write_ids.high_watermark == 21
    assert write_ids.min_open_or_none is None
    assert write_ids.exceptions == ()


def test_compactor_aborted_txn():
    write_ids = ValidCompactorWriteIdList.parse(f"{TABLE}:5:4::1,2,3")
    assert write_ids.high_watermark == 5
    assert write_ids.min_open_or_none == 4
    assert write_ids.exceptions == (1, 2, 3)
    assert all(write_ids.is_aborted(i) for i in (1, 2, 3)) and not write_ids.is_aborted(4)


@pytest.mark.parametrize("low, high, expected", [(1, 3, NONE), (9, 10, NONE), (6, 7, ALL), (4, 6, SOME),
                                                 (6, 13, SOME)])
def test_compactor_aborted_range(low, high, expected):
    write_ids = ValidCompactorWriteIdList.parse(f"{TABLE}:11:4::5,6,7,8")
    assert write_ids.range_aborted(low, high) is expected


def test_compactor_list_from_reader_list():
    """TxnUtils.createValidCompactWriteIdList: keep aborted ids; HWM = minOpenWriteId - 1 when something is open."""
    reader = ValidWriteIdList.parse(f"{TABLE}:20:12:12,15:3,18")
    compactor = ValidCompactorWriteIdList.from_reader(reader)
    assert compactor.high_watermark == 11
    assert compactor.exceptions == (3,)
    assert compactor.is_aborted(3)
    assert compactor.range_valid(1, 11) is ALL and compactor.range_valid(1, 12) is NONE
    idle = ValidCompactorWriteIdList.from_reader(ValidWriteIdList.parse(f"{TABLE}:20:{MAX}::3"))
    assert idle.high_watermark == 20 and idle.exceptions == (3,)


def test_compactor_range_is_never_some():
    write_ids = ValidCompactorWriteIdList.parse(f"{TABLE}:10:{MAX}::5")
    assert write_ids.range_valid(1, 10) is ALL   # the aborted 5 inside is skipped while compacting, not a gap
    assert write_ids.range_valid(8, 11) is NONE


# ---------------------------------------------------------------------------------------------------------------
# TestValidReaderWriteIdList


def test_reader_no_exceptions():
    text = str(ValidWriteIdList(table_name=TABLE, high_watermark=1))
    assert text == f"{TABLE}:1:{MAX}::"
    parsed = ValidWriteIdList.parse(text)
    assert parsed.is_valid(1) and not parsed.is_valid(2)


def test_reader_exceptions():
    text = str(ValidWriteIdList(table_name=TABLE, open_ids=(2, 4), high_watermark=5, min_open=4))
    assert text == f"{TABLE}:5:4:2,4:"
    parsed = ValidWriteIdList.parse(text)
    assert [parsed.is_valid(i) for i in range(1, 7)] == [True, False, True, False, True, False]


def test_reader_long_enough_to_compress():
    write_ids = ValidWriteIdList(table_name=TABLE, open_ids=tuple(range(100, 1100)), high_watermark=2000,
                                 min_open=900)
    parsed = ValidWriteIdList.parse(str(write_ids))
    assert all(parsed.is_valid(i) for i in range(0, 100))
    assert not any(parsed.is_valid(i) for i in range(100, 1100))
    assert all(parsed.is_valid(i) for i in range(1100, 2001))
    assert not parsed.is_valid(2001)


def test_reader_aborted_txn():
    write_ids = ValidWriteIdList(table_name=TABLE, open_ids=(4, 6, 10), aborted_ids=(2, 8), high_watermark=11,
                                 min_open=4)
    assert str(write_ids) == f"{TABLE}:11:4:4,6,10:2,8"
    assert [write_ids.is_aborted(i) for i in (2, 4, 6, 8, 10)] == [True, False, False, True, False]


@pytest.mark.parametrize("text", [
    f"{TABLE}:1:{MAX}::",
    f"{TABLE}:5:4:2,4:",
    f"{TABLE}:11:4:4,6,10:2,8",
    f"{TABLE}:11:{MAX}::2,8",
    f"null:{MAX}:{MAX}::",
    f"default.tbl:0:{MAX}::",
])
def test_write_id_list_string_round_trip(text):
    assert str(ValidWriteIdList.parse(text)) == text


def test_reader_table_name_null_is_none():
    assert ValidWriteIdList.parse(f"null:5:{MAX}::").table_name is None
    assert ValidWriteIdList.parse(f"NULL:5:{MAX}::").table_name is None


@pytest.mark.parametrize("text", [f"tbl:100:{MAX}:", f"tbl:100:{MAX}", f"tbl:100:{MAX}::"])
def test_reader_short_forms(text):
    """Hive's readFromString accepts 3, 4 or 5 fields: missing trailing lists are empty."""
    write_ids = ValidWriteIdList.parse(text)
    assert write_ids.high_watermark == 100 and write_ids.exceptions == ()
    assert str(write_ids) == f"tbl:100:{MAX}::"


@pytest.mark.parametrize("low, high, expected", [
    (1, 2, ALL),      # all exceptions lie above the range
    (3, 3, NONE),     # the one open id
    (1, 5, SOME),
    (6, 10, ALL),
    (9, 12, SOME),    # 11 and 12 are above the HWM
    (11, 12, NONE),   # starts above the HWM
    (3, 5, SOME),
])
def test_reader_range_valid(low, high, expected):
    write_ids = ValidWriteIdList.parse("tbl:10:3:3,5:")
    assert write_ids.range_valid(low, high) is expected


def test_reader_range_valid_none_when_every_id_is_an_exception():
    assert ValidWriteIdList.parse("tbl:10:3:3,4:").range_valid(3, 4) is NONE


@pytest.mark.parametrize("low, high, expected", [
    (5, 6, ALL), (4, 6, SOME), (3, 3, NONE), (1, 2, NONE), (11, 12, NONE), (6, 12, SOME),
])
def test_reader_range_aborted(low, high, expected):
    write_ids = ValidWriteIdList.parse("tbl:10:3:3:5,6")
    assert write_ids.range_aborted(low, high) is expected


def test_reader_is_valid_base():
    write_ids = ValidWriteIdList.parse("tbl:10:5:5:")
    assert write_ids.is_valid_base(4)
    assert not write_ids.is_valid_base(5)
    assert not write_ids.is_valid_base(11)
    nothing_open = ValidWriteIdList.parse(f"tbl:10:{MAX}::")
    assert nothing_open.is_valid_base(10) and not nothing_open.is_valid_base(11)
    assert nothing_open.min_open_or_none is None


# ---------------------------------------------------------------------------------------------------------------
# TestValidReadTxnList


def test_txn_no_exceptions():
    text = str(ValidTxnList(high_watermark=1))
    assert text == f"1:{MAX}::"
    parsed = ValidTxnList.parse(text)
    assert parsed.is_valid(1) and not parsed.is_valid(2)


def test_txn_exceptions():
    text = str(ValidTxnList(open_ids=(2, 4), high_watermark=5, min_open=4))
    assert text == "5:4:2,4:"
    parsed = ValidTxnList.parse(text)
    assert [parsed.is_valid(i) for i in range(1, 7)] == [True, False, True, False, True, False]


def test_txn_long_enough_to_compress():
    txns = ValidTxnList(open_ids=tuple(range(100, 1100)), high_watermark=2000, min_open=900)
    parsed = ValidTxnList.parse(str(txns))
    assert all(parsed.is_valid(i) for i in range(0, 100))
    assert not any(parsed.is_valid(i) for i in range(100, 1100))
    assert all(parsed.is_valid(i) for i in range(1100, 2001))
    assert not parsed.is_valid(2001)


def test_txn_aborted_txn():
    txns = ValidTxnList(open_ids=(4, 6, 10), aborted_ids=(2, 8), high_watermark=11, min_open=4)
    assert str(txns) == "11:4:4,6,10:2,8"
    assert [txns.is_aborted(i) for i in (2, 4, 6, 8, 10)] == [True, False, False, True, False]


def test_txn_list_range_form_is_read():
    """Hive 4's ValidReadTxnList writes runs of >= 5 consecutive ids as `a-b` (TestValidReadTxnList.testAbortedTxnRange
    expects "11:4:4-8,10:2,9") and reads them back; a Hive 4 client's txn list can carry this form."""
    txns = ValidTxnList.parse("11:4:4-8,10:2,9")
    assert txns.exceptions == (2, 4, 5, 6, 7, 8, 9, 10)
    assert [txns.is_aborted(i) for i in (2, 4, 6, 9, 10)] == [True, False, False, True, False]
    assert txns.is_valid(3) and txns.is_valid(11) and not txns.is_valid(6)
    long_run = ValidTxnList.parse("2000:900:100-1099:")
    assert not any(long_run.is_valid(i) for i in range(100, 1100)) and long_run.is_valid(1100)


@pytest.mark.parametrize("text", ["1000:55:50:", f"1000:{MAX}::", "11:4:4,6,10:2,8", f"30:{MAX}::20", "5:4:2,4:"])
def test_txn_list_string_round_trip(text):
    assert str(ValidTxnList.parse(text)) == text


@pytest.mark.parametrize("text", [None, ""])
def test_txn_list_empty_means_everything_committed(text):
    txns = ValidTxnList.parse(text)
    assert txns.high_watermark == MAX and txns.exceptions == ()
    assert txns.is_valid(1) and txns.range_valid(1, 10**12) is ALL


def test_txn_list_short_forms():
    """Fewer than 3 fields: no exceptions; 3 fields: open ids only (Hive's readFromString)."""
    assert ValidTxnList.parse(f"5:{MAX}").exceptions == ()
    three = ValidTxnList.parse("5:3:3")
    assert three.exceptions == (3,) and not three.is_aborted(3) and not three.is_valid(3)


@pytest.mark.parametrize("low, high, expected", [
    (1, 2, ALL), (3, 3, NONE), (1, 5, SOME), (11, 12, NONE), (9, 12, SOME), (6, 10, ALL),
])
def test_txn_range_valid(low, high, expected):
    assert ValidTxnList.parse("10:3:3,5:").range_valid(low, high) is expected


@pytest.mark.parametrize("low, high, expected", [(5, 6, ALL), (4, 6, SOME), (3, 3, NONE), (11, 12, NONE)])
def test_txn_range_aborted(low, high, expected):
    assert ValidTxnList.parse("10:3:3:5,6").range_aborted(low, high) is expected


def test_visibility_txn_zero_is_always_valid():
    """isDirUsable: visibility txn 0 (no `_v` suffix) is valid in every snapshot."""
    for text in ("30:20:20:", f"30:{MAX}::20", "1:1:1:", None):
        assert ValidTxnList.parse(text).is_valid(0)


# ---------------------------------------------------------------------------------------------------------------
# ValidCleanerWriteIdList


def test_cleaner_range_valid_is_none_above_high_watermark():
    cleaner = ValidCleanerWriteIdList.from_reader(ValidWriteIdList.parse(f"{TABLE}:10:{MAX}::4"))
    assert cleaner.range_valid(5, 11) is NONE
    assert cleaner.range_valid(5, 10) is ALL
    assert cleaner.range_valid(3, 5) is SOME


def test_cleaner_capped_high_watermark():
    cleaner = ValidCleanerWriteIdList.from_reader(ValidWriteIdList.parse(f"{TABLE}:20:{MAX}::"), high_watermark=12)
    assert cleaner.high_watermark == 12
    assert cleaner.range_valid(1, 12) is ALL and cleaner.range_valid(1, 13) is NONE


# ---------------------------------------------------------------------------------------------------------------
# Parse errors: InvalidValidityListError (an AcidError and a ValueError) naming the offending string


@pytest.mark.parametrize("text", [
    "",
    "tbl",
    "tbl:",
    "tbl:abc:5::",
    f"tbl:5:{MAX}:x:",
    f"tbl:5:{MAX}::1,,2",
])
def test_write_id_list_parse_errors(text):
    with pytest.raises(InvalidValidityListError) as raised:
        ValidWriteIdList.parse(text)
    assert isinstance(raised.value, AcidError) and isinstance(raised.value, ValueError)
    if text:
        assert text in str(raised.value)


def test_id_listed_both_open_and_aborted_is_rejected():
    """Stricter than Hive (whose readFromString would keep the id twice): the message names the id."""
    with pytest.raises(InvalidValidityListError, match=r"\[3\]"):
        ValidWriteIdList.parse("tbl:5:3:3:3")


@pytest.mark.parametrize("text", ["abc", "x:5::", "5:y::", "5:3:1,two:", "5:3::1;2"])
def test_txn_list_parse_errors(text):
    with pytest.raises(InvalidValidityListError) as raised:
        ValidTxnList.parse(text)
    assert text in str(raised.value)
