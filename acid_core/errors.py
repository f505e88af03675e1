"""The one exception hierarchy of the project: every error raised on purpose derives from AcidError."""

from __future__ import annotations

import re


class AcidError(Exception):
    """Base of every error this project raises on purpose."""


def exit_status(error: AcidError) -> int:
    """A command's exit status for an error it reports: 2 for a usage error, else 1."""
    return 2 if isinstance(error, UsageError) else 1


ERROR_LINE_LIMIT = 1000  # characters of a one-line cause (Hive keeps CQ_ERROR_MESSAGE to one line too)
# `Type: message` or a bare `Type` at the start of a line: a Python or Java class name ending in Error, Exception, ...
_ERROR_LINE = re.compile(r"^(?:[A-Za-z_$][\w$]*\.)*([A-Za-z_$][\w$]*(?:Error|Exception|Exit|Interrupt|Failure|Fault))"
                         r"(?::\s*(.*))?$")
# wrappers whose own line says nothing about the cause (Spark and Py4J report a task's Python error inside them)
_WRAPPERS = frozenset({"Py4JJavaError", "Py4JError", "PythonException", "SparkException", "ExecutionException",
                       "InvocationTargetException", "UndeclaredThrowableException"})


def one_line(text: str | None, *, limit: int = ERROR_LINE_LIMIT, qualified: bool = False) -> str | None:
    """The cause in a possibly multi-line error text (a Python traceback, a Java stack trace, a Py4J error wrapping a
    Spark task's Python traceback) as one line `Type: message`: the innermost error line that is not a wrapper's,
    else the text's last non-blank line; whitespace collapsed, at most `limit` characters. None stays None.
    `qualified` keeps the type's module or package as the text has it (`acid_core.errors.FileSystemError: ...`)."""
    if text is None:
        return None
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    if len(lines) <= 1:
        return _clip(" ".join(lines), limit)
    causes = []
    for line in lines:
        match = _ERROR_LINE.match(line)
        if match and not line.startswith(("at ", "File ")):
            causes.append((match.group(1), match.group(2), line))
    useful = [cause for cause in causes if cause[0] not in _WRAPPERS]
    if useful:
        kind, message, line = useful[-1]  # Python prints the innermost (the raised) error last
        return _clip(line if qualified else f"{kind}: {message}" if message else kind, limit)
    return _clip(lines[-1], limit)


def one_line_cause(error: BaseException, *, limit: int = ERROR_LINE_LIMIT) -> str:
    """What a compaction queue records for a failure: `Type: message` in one line. An AcidError's own message (it
    names the offending value); another error's innermost useful line when its text holds a traceback (Spark's
    Py4JJavaError holds the failed task's Python traceback); the traceback stays in the log."""
    text = str(error)
    if "\n" in text.strip():
        found = one_line(text, limit=limit)
        if found and _ERROR_LINE.match(found):
            return found
    return _clip(f"{type(error).__name__}: {text}" if text.strip() else type(error).__name__, limit)


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


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


class InvalidTypeError(SchemaMismatchError):
    """A Hive type string cannot be parsed, or its parameters are outside Hive's limits."""


class CompactionTaskError(AcidError):
    """A compaction's task failed where it ran (an executor); its text ends with the task's cause, `Type: message`."""


class UnsortedEventsError(AcidError):
    """An event file is not sorted by (originalTransaction, bucket, rowId), which Hive's readers require."""


class InvalidRowError(AcidError, ValueError):
    """A row handed to the writer does not fit the table's columns."""


class BucketCodecError(AcidError, ValueError):
    """A bucket id or statement id is outside what BucketCodec can encode."""


class FileSystemError(AcidError):
    """A filesystem operation failed (the path and the cause are in the message)."""


class DirectoryVanishedError(FileSystemError):
    """A directory a snapshot reads was removed while the snapshot was being read (its reader was not protected)."""


class PathOutsideTableError(AcidError):
    """A path resolves outside the table location it must stay in."""


class UsageError(AcidError):
    """A command-line invocation is malformed."""


class InvalidPoolNameError(UsageError, ValueError):
    """A compaction pool name is empty, over 128 characters, or has characters other than letters, digits, _ - and ."""


class InvalidSettingError(UsageError, ValueError):
    """A setting's value (a property, a parameter, an environment variable) is not of its kind or out of its range."""


class MetastoreError(AcidError):
    """A metastore operation failed; the database transaction was rolled back."""


class MetastoreUnavailableError(MetastoreError):
    """The metastore database cannot be reached or the connection was lost mid-operation."""


class NoSuchTxnError(MetastoreError):
    """No transaction with that id exists (never opened, or already committed and forgotten)."""


class TxnStateError(MetastoreError):
    """The transaction is not in the state the operation needs (e.g. committing an aborted one)."""


class TxnAbortedError(TxnStateError):
    """The transaction was aborted (by a client, a timeout or a conflict)."""


class WriteConflictError(TxnAbortedError):
    """First committer wins: another transaction updated or deleted in the same partition and committed first."""


class LockTimeoutError(MetastoreError):
    """A lock could not be acquired within the requested time; the request was withdrawn."""


class NoSuchLockError(MetastoreError):
    """No lock with that id exists (released, or expired for lack of heartbeats)."""


class NoSuchObjectError(MetastoreError):
    """An unknown database, table or partition."""


class NoSuchPartitionError(NoSuchObjectError):
    """A request names a partition its table does not have; `partitions` are the ones it has."""

    def __init__(self, message: str, partitions: list[str] | tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.partitions = list(partitions)


class AlreadyExistsError(MetastoreError):
    """A database, table or partition with that name already exists."""


class InvalidPropertyError(MetastoreError):
    """A table or database property has a value, or a table a property change, that the catalog refuses."""


class NotTransactionalError(MetastoreError):
    """The table is not a full ACID table (TBLPROPERTIES 'transactional'='true')."""


class CompactionStateError(MetastoreError):
    """The compaction is not in the state the operation needs."""


class DuplicateKeyError(MetastoreError):
    """A row with the same unique key was written concurrently (the operation was rolled back)."""


class StreamBatchError(MetastoreError):
    """A streaming query's micro-batch cannot commit: its transaction is no longer the query's pending one (another
    run of the same query took over) or a later batch committed already."""
