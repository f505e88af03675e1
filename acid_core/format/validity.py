"""Snapshots of which transactions and write ids a reader may see: Hive's ValidTxnList and ValidWriteIdList.

String forms and answers follow storage-api's ValidReadTxnList, ValidReaderWriteIdList, ValidCompactorWriteIdList and
ValidCleanerWriteIdList (hive-acid-reference.md section 3):

* txn list:      ``<hwm>:<minOpenTxn>:<open csv>:<aborted csv>``
* write-id list: ``<db.table>:<hwm>:<minOpenWriteId>:<open csv>:<aborted csv>`` (table ``null`` when unknown)
"""

from __future__ import annotations

import enum
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field, replace

from acid_core.errors import InvalidValidityListError

LONG_MAX = 2**63 - 1


class RangeResponse(enum.Enum):
    """How much of an id range an answer covers (Hive's RangeResponse)."""

    NONE = "NONE"
    SOME = "SOME"
    ALL = "ALL"


def _parse_ids(text: str, source: str) -> tuple[int, ...]:
    """Comma-separated ids; Hive 4 writes runs as `low-high` (e.g. `4-8,10`), which are expanded."""
    if not text:
        return ()
    ids: list[int] = []
    try:
        for part in text.split(","):
            low, dash, high = part.partition("-")
            if dash and low:
                if int(high) < int(low) or int(high) - int(low) > 100_000_000:
                    raise ValueError(part)
                ids.extend(range(int(low), int(high) + 1))
            else:
                ids.append(int(part))
    except ValueError:
        raise InvalidValidityListError(f"{source!r}: {text!r} is not a comma-separated list of ids or id ranges") from None
    return tuple(ids)


def _parse_long(text: str, source: str, what: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise InvalidValidityListError(f"{source!r}: {what} {text!r} is not a number") from None


def _csv(ids) -> str:
    return ",".join(str(i) for i in ids)


@dataclass(frozen=True, slots=True)
class _IdList:
    """Shared arithmetic of txn and write-id lists: a high watermark plus sorted exceptions (open or aborted)."""

    high_watermark: int = LONG_MAX
    open_ids: tuple[int, ...] = ()
    aborted_ids: tuple[int, ...] = ()
    min_open: int = LONG_MAX
    exceptions: tuple[int, ...] = field(init=False, repr=False, compare=False)
    _aborted: frozenset[int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        open_ids = tuple(sorted(set(self.open_ids)))
        aborted = tuple(sorted(set(self.aborted_ids)))
        if set(open_ids) & set(aborted):
            raise InvalidValidityListError(f"ids {sorted(set(open_ids) & set(aborted))} are listed as both open and aborted")
        object.__setattr__(self, "open_ids", open_ids)
        object.__setattr__(self, "aborted_ids", aborted)
        object.__setattr__(self, "exceptions", tuple(sorted(open_ids + aborted)))
        object.__setattr__(self, "_aborted", frozenset(aborted))

    def is_valid(self, id_: int) -> bool:
        """Committed as of this snapshot: at or below the high watermark and not an exception."""
        if id_ > self.high_watermark:
            return False
        index = bisect_left(self.exceptions, id_)
        return not (index < len(self.exceptions) and self.exceptions[index] == id_)

    def range_valid(self, low: int, high: int) -> RangeResponse:
        """How many ids in low..high are valid (Hive's isTxnRangeValid / isWriteIdRangeValid)."""
        if low > self.high_watermark:
            return RangeResponse.NONE
        if self.exceptions and self.exceptions[0] > high:
            return RangeResponse.ALL
        count = max(0, high - self.high_watermark)
        count += bisect_right(self.exceptions, high) - bisect_left(self.exceptions, low)
        if count == 0:
            return RangeResponse.ALL
        if count == high - low + 1:
            return RangeResponse.NONE
        return RangeResponse.SOME

    def all_valid(self, low: int, high: int) -> bool:
        """Every id in low..high is valid, row by row (unlike the compactor's range_valid, aborted ids count)."""
        return high <= self.high_watermark and bisect_right(self.exceptions, high) == bisect_left(self.exceptions, low)

    def is_aborted(self, id_: int) -> bool:
        """Known to be aborted."""
        return id_ in self._aborted

    def range_aborted(self, low: int, high: int) -> RangeResponse:
        """How many ids in low..high are aborted (Hive's isTxnRangeAborted / isWriteIdRangeAborted)."""
        if self.high_watermark < low:
            return RangeResponse.NONE
        count = bisect_right(self.aborted_ids, high) - bisect_left(self.aborted_ids, low)
        if count == 0:
            return RangeResponse.NONE
        if count == high - low + 1:
            return RangeResponse.ALL
        return RangeResponse.SOME

    @property
    def min_open_or_none(self) -> int | None:
        """The smallest open id, or None when nothing is open."""
        return None if self.min_open == LONG_MAX else self.min_open

    def _tail(self) -> str:
        if not self.exceptions:
            return f"{self.high_watermark}:{self.min_open}::"
        return f"{self.high_watermark}:{self.min_open}:{_csv(self.open_ids)}:{_csv(self.aborted_ids)}"


def _split_tail(fields: list[str], source: str) -> dict:
    """Parse ``hwm:minOpen[:open[:aborted]]`` as Hive's readFromString (missing trailing fields mean empty)."""
    if len(fields) < 2 or len(fields) > 4:
        raise InvalidValidityListError(f"{source!r}: expected <hwm>:<minOpen>:<open ids>:<aborted ids>")
    high = _parse_long(fields[0], source, "high watermark")
    min_open = _parse_long(fields[1], source, "minimum open id")
    open_ids = _parse_ids(fields[2], source) if len(fields) > 2 else ()
    aborted = _parse_ids(fields[3], source) if len(fields) > 3 else ()
    if not open_ids and not aborted:
        min_open = LONG_MAX
    return {"high_watermark": high, "open_ids": open_ids, "aborted_ids": aborted, "min_open": min_open}


def _build(cls, source: str, **fields):
    """Construct a parsed list, naming the source string in any inconsistency the constructor finds."""
    try:
        return cls(**fields)
    except InvalidValidityListError as exc:
        raise InvalidValidityListError(f"{source!r}: {exc}") from None


@dataclass(frozen=True, slots=True)
class ValidTxnList(_IdList):
    """Hive's ValidReadTxnList: which global transactions a snapshot sees."""

    @classmethod
    def parse(cls, text: str | None) -> ValidTxnList:
        """Parse Hive's string form; None or "" means everything is committed."""
        if not text:
            return cls()
        return _build(cls, text, **_split_tail(text.split(":"), text))

    def __str__(self) -> str:
        return self._tail()


@dataclass(frozen=True, slots=True)
class ValidWriteIdList(_IdList):
    """Hive's ValidReaderWriteIdList: which write ids of one table a snapshot sees."""

    table_name: str | None = None

    @classmethod
    def parse(cls, text: str) -> ValidWriteIdList:
        """Parse ``<db.table>:<hwm>:<minOpen>:<open>:<aborted>``.

        Raises:
            InvalidValidityListError: the string is malformed.
        """
        if not text:
            raise InvalidValidityListError("an empty string is not a ValidWriteIdList (expected <db.table>:<hwm>:<minOpen>:<open>:<aborted>)")
        table, _, rest = text.partition(":")
        if not rest:
            raise InvalidValidityListError(f"{text!r}: expected <db.table>:<hwm>:<minOpen>:<open ids>:<aborted ids>")
        return _build(cls, text, table_name=None if table.lower() == "null" else table,
                      **_split_tail(rest.split(":"), text))

    def is_valid_base(self, write_id: int) -> bool:
        """A compacted base is usable if no write id at or below it is still open (Hive's isValidBase)."""
        return write_id < self.min_open and write_id <= self.high_watermark

    def with_high_watermark(self, high_watermark: int):
        """The same list seen up to a lower (or higher) high watermark."""
        return replace(self, high_watermark=high_watermark)

    def __str__(self) -> str:
        return f"{self.table_name if self.table_name is not None else 'null'}:{self._tail()}"


@dataclass(frozen=True, slots=True)
class ValidCompactorWriteIdList(ValidWriteIdList):
    """The compactor's view: exceptions are aborted ids at or below the high watermark; ranges are ALL or NONE."""

    def __post_init__(self) -> None:
        below = tuple(i for i in set(self.open_ids) | set(self.aborted_ids) if i <= self.high_watermark)
        object.__setattr__(self, "open_ids", ())
        object.__setattr__(self, "aborted_ids", below)
        ValidWriteIdList.__post_init__(self)

    def range_valid(self, low: int, high: int) -> RangeResponse:
        """ALL when the whole range is at or below the high watermark, else NONE: a compactor never takes a straddling delta."""
        return RangeResponse.ALL if self.high_watermark >= high else RangeResponse.NONE

    @classmethod
    def from_reader(cls, reader: ValidWriteIdList) -> ValidCompactorWriteIdList:
        """Hive's TxnUtils.createValidCompactWriteIdList: high watermark = min open write id - 1, aborted ids kept."""
        high = reader.high_watermark if reader.min_open == LONG_MAX else reader.min_open - 1
        return cls(high_watermark=high, aborted_ids=reader.aborted_ids, min_open=reader.min_open,
                   table_name=reader.table_name)


@dataclass(frozen=True, slots=True)
class ValidCleanerWriteIdList(ValidWriteIdList):
    """The cleaner's view: nothing above the high watermark is valid or aborted, so later work is left alone."""

    def range_valid(self, low: int, high: int) -> RangeResponse:
        if high > self.high_watermark:
            return RangeResponse.NONE
        return ValidWriteIdList.range_valid(self, low, high)

    def is_aborted(self, id_: int) -> bool:
        return id_ <= self.high_watermark and ValidWriteIdList.is_aborted(self, id_)

    def range_aborted(self, low: int, high: int) -> RangeResponse:
        if high > self.high_watermark:
            return RangeResponse.NONE
        return ValidWriteIdList.range_aborted(self, low, high)

    @classmethod
    def from_reader(cls, reader: ValidWriteIdList, *, high_watermark: int | None = None) -> ValidCleanerWriteIdList:
        """The cleaner's list built from a reader list, optionally capped at a compaction's highest write id."""
        return cls(high_watermark=reader.high_watermark if high_watermark is None else high_watermark,
                   open_ids=reader.open_ids, aborted_ids=reader.aborted_ids, min_open=reader.min_open,
                   table_name=reader.table_name)
