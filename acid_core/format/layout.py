"""Hive 3 ACID directory and file names: parsing and exact formatting.

Rules follow Hive's AcidUtils / AcidConstants (see hive-acid-reference.md section 1): write ids and visibility
transaction ids are zero-padded to 7 digits, statement ids to 4, bucket numbers to 5; numbers are parsed as
Java's Long.parseLong does, so padding width does not matter when reading.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from acid_core.errors import InvalidNameError

BASE_PREFIX = "base_"
DELTA_PREFIX = "delta_"
DELETE_DELTA_PREFIX = "delete_delta_"
BUCKET_PREFIX = "bucket_"
VISIBILITY_PREFIX = "_v"
SIDE_FILE_SUFFIX = "_flush_length"
ACID_FORMAT_FILE = "_orc_acid_version"
METADATA_FILE = "_metadata_acid"
ORC_ACID_VERSION = 2
DEFAULT_PARTITION_NAME = "__HIVE_DEFAULT_PARTITION__"
MAX_STATEMENTS_PER_TXN = 10000

_LONG = r"[+-]?[0-9]+"
_LONG_RE = re.compile(_LONG)
_BUCKET_RE = re.compile(r"bucket_([0-9]+)(_[0-9]+)?")
_ORIGINAL_RE = re.compile(r"([0-9]+)_[0-9]+")
_ORIGINAL_COPY_RE = re.compile(r"([0-9]+)_[0-9]+_copy_([0-9]+)")
_HEX2_RE = re.compile(r"[0-9A-Fa-f]{2}")
# The names writers make (unsigned numbers of at most 18 digits, always inside Java's long range), parsed by one
# regular expression; anything else (signs, longer numbers, malformed names) takes the checking path below.
_PLAIN_DELTA_RE = re.compile(r"(delete_)?delta_([0-9]{1,18})_([0-9]{1,18})(?:_([0-9]{1,18}))?(?:_v([0-9]{1,18}))?")
_PLAIN_BASE_RE = re.compile(r"base_([0-9]{1,18})(?:_v([0-9]{1,18}))?")
_JAVA_LONG_MIN = -(2**63)
_JAVA_LONG_MAX = 2**63 - 1


def _parse_long(text: str, name: str, what: str) -> int:
    """Parse like Java's Long.parseLong, naming the directory on failure."""
    if not _LONG_RE.fullmatch(text):
        raise InvalidNameError(f"{name!r}: {what} {text!r} is not a number")
    value = int(text)
    if not _JAVA_LONG_MIN <= value <= _JAVA_LONG_MAX:
        raise InvalidNameError(f"{name!r}: {what} {text!r} is outside the 64-bit range")
    return value


@dataclass(frozen=True, slots=True)
class ParsedBase:
    """A `base_N` or `base_N_vT` directory: the state of the table up to write id N, made visible by transaction T."""

    name: str
    write_id: int
    visibility_txn_id: int = 0

    @property
    def is_compactor_output(self) -> bool:
        """A `_v` suffix marks a base made by the compactor (as opposed to an INSERT OVERWRITE base)."""
        return self.visibility_txn_id > 0


@dataclass(frozen=True, slots=True)
class ParsedDelta:
    """A `delta_*` or `delete_delta_*` directory covering write ids min..max (statement id None when absent)."""

    name: str
    min_write_id: int
    max_write_id: int
    statement_id: int | None = None
    visibility_txn_id: int = 0
    is_delete: bool = False

    @property
    def statement_order(self) -> int:
        """Statement id for ordering: -1 when absent, as in Hive's ParsedDeltaLight."""
        return -1 if self.statement_id is None else self.statement_id

    @property
    def may_contain_side_file(self) -> bool:
        """Only streaming insert deltas (a write-id range, no visibility suffix) can have `_flush_length` files."""
        return not self.is_delete and self.min_write_id != self.max_write_id and self.visibility_txn_id <= 0

    def read_order_key(self) -> tuple[int, int, int, str]:
        """Hive's ParsedDeltaLight.compareTo: min asc, max desc, statement asc, then name (delete_delta_ first)."""
        return (self.min_write_id, -self.max_write_id, self.statement_order, self.name)


def _split_visibility(rest: str, name: str) -> tuple[str, int]:
    """Split `<rest>_v<T>` of directory `name` into rest and T (0 when there is no suffix)."""
    index = rest.find(VISIBILITY_PREFIX)
    if index < 0:
        return rest, 0
    return rest[:index], _parse_long(rest[index + len(VISIBILITY_PREFIX):], name, "visibility transaction id")


def parse_base(name: str) -> ParsedBase:
    """Parse `base_N[_vT]`.

    Raises:
        InvalidNameError: the name does not start with `base_` or a number is malformed.
    """
    plain = _PLAIN_BASE_RE.fullmatch(name)
    if plain is not None:
        visibility = plain.group(2)
        return ParsedBase(name, int(plain.group(1)), int(visibility) if visibility else 0)
    if not name.startswith(BASE_PREFIX):
        raise InvalidNameError(f"{name!r} is not a base directory name (expected base_<writeId>[_v<txnId>])")
    rest, visibility = _split_visibility(name[len(BASE_PREFIX):], name)
    return ParsedBase(name=name, write_id=_parse_long(rest, name, "write id"), visibility_txn_id=visibility)


def parse_delta(name: str) -> ParsedDelta:
    """Parse `delta_a_b[_s][_vT]` or `delete_delta_a_b[_s][_vT]`.

    Raises:
        InvalidNameError: the prefix is wrong, a part is missing or a number is malformed.
    """
    plain = _PLAIN_DELTA_RE.fullmatch(name)
    if plain is not None:
        delete, low, high, statement, visibility = plain.groups()
        low_id, high_id = int(low), int(high)
        if low_id <= high_id:
            return ParsedDelta(name, low_id, high_id, None if statement is None else int(statement),
                               int(visibility) if visibility else 0, delete is not None)
    if name.startswith(DELETE_DELTA_PREFIX):
        is_delete, prefix = True, DELETE_DELTA_PREFIX
    elif name.startswith(DELTA_PREFIX):
        is_delete, prefix = False, DELTA_PREFIX
    else:
        raise InvalidNameError(f"{name!r} is not a delta directory name (expected delta_<min>_<max>[_<stmt>][_v<txnId>])")
    rest, visibility = _split_visibility(name[len(prefix):], name)
    parts = rest.split("_")
    if len(parts) not in (2, 3):
        raise InvalidNameError(f"{name!r}: expected {prefix}<min>_<max>[_<stmt>][_v<txnId>]")
    low = _parse_long(parts[0], name, "minimum write id")
    high = _parse_long(parts[1], name, "maximum write id")
    if low > high:
        raise InvalidNameError(f"{name!r}: minimum write id {low} is above maximum {high}")
    statement = _parse_long(parts[2], name, "statement id") if len(parts) == 3 else None
    return ParsedDelta(name, low, high, statement, visibility, is_delete)


def parse_directory(name: str) -> ParsedBase | ParsedDelta | None:
    """Parse a base or delta directory name; None for a name with no ACID prefix (an original directory)."""
    if name.startswith(BASE_PREFIX):
        return parse_base(name)
    if name.startswith(DELTA_PREFIX) or name.startswith(DELETE_DELTA_PREFIX):
        return parse_delta(name)
    return None


def _check_id(value: int, what: str) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not _JAVA_LONG_MIN <= value <= _JAVA_LONG_MAX:
        raise InvalidNameError(f"{what} {value!r} must be a 64-bit integer")


def _visibility_suffix(visibility_txn_id: int) -> str:
    _check_id(visibility_txn_id, "visibility transaction id")
    if visibility_txn_id < 0:
        raise InvalidNameError(f"visibility transaction id {visibility_txn_id} must not be negative")
    return "" if visibility_txn_id == 0 else f"{VISIBILITY_PREFIX}{visibility_txn_id:07d}"


def base_dir_name(write_id: int, *, visibility_txn_id: int = 0) -> str:
    """`base_%07d` plus `_v%07d` when made visible by a compactor transaction."""
    _check_id(write_id, "write id")
    return f"{BASE_PREFIX}{write_id:07d}{_visibility_suffix(visibility_txn_id)}"


def delta_dir_name(min_write_id: int, max_write_id: int, *, statement_id: int | None = None,
                   visibility_txn_id: int = 0, delete: bool = False) -> str:
    """`delta_%07d_%07d[_%04d][_v%07d]` (or `delete_delta_...`); no statement part for minor-compaction output."""
    _check_id(min_write_id, "minimum write id")
    _check_id(max_write_id, "maximum write id")
    if min_write_id > max_write_id:
        raise InvalidNameError(f"minimum write id {min_write_id} is above maximum {max_write_id}")
    prefix = DELETE_DELTA_PREFIX if delete else DELTA_PREFIX
    name = f"{prefix}{min_write_id:07d}_{max_write_id:07d}"
    if statement_id is not None:
        if not isinstance(statement_id, int) or not 0 <= statement_id < MAX_STATEMENTS_PER_TXN:
            raise InvalidNameError(f"statement id {statement_id!r} must be in 0..{MAX_STATEMENTS_PER_TXN - 1}")
        name += f"_{statement_id:04d}"
    return name + _visibility_suffix(visibility_txn_id)


@dataclass(frozen=True, slots=True)
class BucketFile:
    """A `bucket_NNNNN[_attempt]` data file inside a base or delta directory."""

    name: str
    bucket: int
    attempt: int | None = None


def is_side_file(name: str) -> bool:
    """A streaming `_flush_length` side file (never data)."""
    return name.endswith(SIDE_FILE_SUFFIX)


def parse_bucket_file(name: str) -> BucketFile | None:
    """Parse `bucket_N[_attempt]`; None for anything else (side files included), as Hive's bucketFileFilter."""
    if is_side_file(name):
        return None
    match = _BUCKET_RE.fullmatch(name)
    if match is None:
        return None
    attempt = int(match.group(2)[1:]) if match.group(2) else None
    return BucketFile(name=name, bucket=int(match.group(1)), attempt=attempt)


def bucket_file_name(bucket: int, *, attempt: int | None = None) -> str:
    """`bucket_%05d`, with `_<attempt>` for direct-insert writers."""
    if not isinstance(bucket, int) or bucket < 0:
        raise InvalidNameError(f"bucket {bucket!r} must be a non-negative integer")
    return f"{BUCKET_PREFIX}{bucket:05d}" + ("" if attempt is None else f"_{attempt}")


def legacy_bucket_file_name(bucket: int) -> str:
    """Old-style (original, pre-ACID) file name `%06d_0`."""
    if not isinstance(bucket, int) or bucket < 0:
        raise InvalidNameError(f"bucket {bucket!r} must be a non-negative integer")
    return f"{bucket:06d}_0"


def side_file_name(bucket_file: str) -> str:
    """The `_flush_length` side file of a streaming bucket file."""
    return bucket_file + SIDE_FILE_SUFFIX


@dataclass(frozen=True, slots=True)
class OriginalFile:
    """A pre-ACID file (`000000_0`, `000000_0_copy_1`, or any other visible name) read as if written by write id 0."""

    name: str
    bucket: int
    copy: int = 0


def parse_original_file(name: str) -> OriginalFile:
    """Bucket and copy number of an original file as Hive's BucketMetaData; bucket 0 for names of no known pattern."""
    base_name = name.rsplit("/", 1)[-1]
    match = _ORIGINAL_COPY_RE.fullmatch(base_name)
    if match:
        return OriginalFile(name, int(match.group(1)), int(match.group(2)))
    match = _ORIGINAL_RE.fullmatch(base_name)
    if match:
        return OriginalFile(name, int(match.group(1)))
    bucket = parse_bucket_file(base_name)
    return OriginalFile(name, bucket.bucket if bucket else 0)


@dataclass(frozen=True, slots=True)
class WriteStaging:
    """A hidden directory where a write transaction builds `final` before renaming it into place."""

    final: str
    txn_id: int


_WRITE_STAGING_RE = re.compile(r"\.(.+)\.tmp-t([0-9]+)(?:-[0-9a-f]+)?")


def write_staging_name(final: str, txn_id: int, *, attempt: str | None = None) -> str:
    """`.<final>.tmp-t<txn>[-<attempt>]`: the staging directory of transaction `txn_id`'s `final` directory, beside it
    in the partition. Readers skip it (hidden); housekeeping finds a killed write's leftovers by the transaction id.
    `attempt` (lower-case hex) keeps two writers of one transaction apart; Spark tasks of one write share the name."""
    _check_id(txn_id, "transaction id")
    if attempt is not None and not re.fullmatch(r"[0-9a-f]+", attempt):
        raise InvalidNameError(f"staging attempt {attempt!r} must be lower-case hexadecimal")
    return f".{final}.tmp-t{txn_id}" + (f"-{attempt}" if attempt else "")


def parse_write_staging_name(name: str) -> WriteStaging | None:
    """The staging directory a write transaction made (see `write_staging_name`), or None for any other name."""
    match = _WRITE_STAGING_RE.fullmatch(name)
    return WriteStaging(match.group(1), int(match.group(2))) if match else None


def compaction_staging_name(final: str, compaction_id: int) -> str:
    """`.<final>.tmp-c<compaction id>`: where a compaction builds a result directory before renaming it into place."""
    return f".{final}.tmp-c{compaction_id}"


COMPACTION_PARTS_DIR = ".parts"  # inside a compaction's hidden result directory: the key-range parts of a bucket


def compaction_part_name(bucket: int, part: int) -> str:
    """`bucket_NNNNN-PPPPP`: part `part` (in key order) of bucket `bucket`, in the result's hidden `.parts` directory,
    before the parts are concatenated into the bucket's one file."""
    return f"{bucket_file_name(bucket)}-{part:05d}"


def is_hidden(name: str) -> bool:
    """Hive's hiddenFileFilter: names starting with `_` or `.` are not data."""
    return name.startswith("_") or name.startswith(".")


# Hive's FileUtils.escapePathName escapes these characters (and control characters) as %XX in partition values.
_PARTITION_ESCAPES = frozenset('"#%\'*/:=?\\\x7f{[]^')


def escape_partition_value(value: str) -> str:
    """Escape a partition key or value the way Hive's FileUtils.escapePathName does."""
    return "".join(f"%{ord(ch):02X}" if ch in _PARTITION_ESCAPES or ord(ch) < 0x20 else ch for ch in value)


def unescape_partition_value(text: str) -> str:
    """Inverse of escape_partition_value (Hive's FileUtils.unescapePathName)."""
    out, index = [], 0
    while index < len(text):
        if text[index] == "%" and _HEX2_RE.fullmatch(text[index + 1:index + 3]):
            out.append(chr(int(text[index + 1:index + 3], 16)))
            index += 3
        else:
            out.append(text[index])
            index += 1
    return "".join(out)


def partition_dir_name(spec: Mapping[str, str | None]) -> str:
    """`k1=v1/k2=v2` for an ordered partition spec; None values become Hive's default partition name."""
    if not spec:
        raise InvalidNameError("a partition spec needs at least one key")
    parts = []
    for key, value in spec.items():
        if not key:
            raise InvalidNameError(f"partition spec {dict(spec)!r} has an empty key")
        shown = DEFAULT_PARTITION_NAME if value is None or value == "" else escape_partition_value(str(value))
        parts.append(f"{escape_partition_value(key.lower())}={shown}")
    return "/".join(parts)


def parse_partition_dir_name(path: str) -> dict[str, str]:
    """Parse `k1=v1/k2=v2` back into an ordered spec.

    Raises:
        InvalidNameError: a path component is not `key=value`.
    """
    spec: dict[str, str] = {}
    for component in path.strip("/").split("/"):
        key, sep, value = component.partition("=")
        if not sep or not key:
            raise InvalidNameError(f"partition path {path!r}: component {component!r} is not key=value")
        spec[unescape_partition_value(key)] = unescape_partition_value(value)
    return spec
