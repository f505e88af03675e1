"""The one exception hierarchy of the project: every error raised on purpose derives from AcidError."""

from __future__ import annotations


class AcidError(Exception):
    """Base of every error this project raises on purpose."""


class InvalidNameError(AcidError, ValueError):
    """A directory or file name does not follow Hive's ACID naming rules."""


class InvalidValidityListError(AcidError, ValueError):
    """A ValidTxnList or ValidWriteIdList string cannot be parsed."""


class NotEnoughHistoryError(AcidError):
    """No base is usable for the snapshot and the deltas needed to rebuild it were compacted away (Hive's ACID_NOT_ENOUGH_HISTORY)."""


class LayoutError(AcidError):
    """A directory is not laid out as a partition of an ACID table (for instance, the root of a partitioned table)."""


class CorruptFileError(AcidError):
    """A data file cannot be read: truncated, not ORC, or damaged."""


class SchemaMismatchError(AcidError):
    """A file's schema is not the ACID event schema, or does not match the table's columns."""


class UnsortedEventsError(AcidError):
    """An event file is not sorted by (originalTransaction, bucket, rowId), which Hive's readers require."""


class InvalidRowError(AcidError, ValueError):
    """A row handed to the writer does not fit the table's columns."""


class BucketCodecError(AcidError, ValueError):
    """A bucket id or statement id is outside what BucketCodec can encode."""


class FileSystemError(AcidError):
    """A filesystem operation failed (the path and the cause are in the message)."""


class PathOutsideTableError(AcidError):
    """A path resolves outside the table location it must stay in."""


class UsageError(AcidError):
    """A command-line invocation is malformed."""
