"""Hive's Cleaner (Cleaner.java, handler/CompactionCleaner.java): remove what a finished compaction made obsolete.

For each entry `ready_to_clean` returns (every snapshot that could still read the old directories has ended):
table dropped -> mark cleaned; `no_cleanup`='true' -> refuse; else compute the directory state with the cleaner's
snapshot (txn high watermark = CQ_NEXT_TXN_ID - 1, write ids capped at CQ_HIGHEST_WRITE_ID so a later compaction's
obsoletes wait for their own entry), delete (or move to a trash directory) its obsolete and aborted entries, then
verify with an empty ValidTxnList + ValidCleanerWriteIdList(table, highest write id) and mark cleaned only if nothing
obsolete or aborted up to the watermark remains. Deleting is idempotent, so a rerun finishes a run that crashed.
Never touches a path outside the partition location and never follows a symbolic link.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass

from acid_core import settings
from acid_core.errors import AcidError, CompactionStateError, NoSuchObjectError, PathOutsideTableError, UsageError
from acid_core.format.validity import LONG_MAX, ValidCleanerWriteIdList, ValidTxnList
from acid_core.metastore import Metastore
from acid_core.metastore.compaction_rows import CompactionInfo
from acid_core.metastore.compactions import CLEANER_MAX_ATTEMPTS, CLEANER_RETRY_RETENTION_MS, CompactionState
from acid_core.metastore.locations import data_location
from acid_core.metastore.txns import full_table_name
from acid_core.read.state import DirectoryState, get_acid_state
from acid_core.storage.fs import FileSystem, ensure_inside, is_absolute_location

NO_CLEANUP_MESSAGE = "Skipping cleanup: the table has 'no_cleanup'='true'"


@dataclass(frozen=True, slots=True)
class CleanResult:
    """What the cleaner did with one queue entry.

    `outcome` is one of: `cleaned` (marked cleaned), `incomplete` (something obsolete remains; retried next run),
    `dry run`, `table dropped` (marked cleaned), `refused` (no_cleanup, marked refused), `skipped` (no_cleanup but
    the queue could not refuse it), `error` (retried after a back-off), `failed` (gave up after the last attempt:
    marked failed). `removed` lists the paths deleted, moved to the trash, or (dry run) that would be;
    `skipped_paths` those left alone (symbolic links, paths outside the table).
    """

    compaction_id: int
    table: str
    partition: str | None
    outcome: str
    removed: tuple[str, ...] = ()
    skipped_paths: tuple[str, ...] = ()
    message: str = ""
    bytes_removed: int = 0  # the files directly inside the removed entries (what a dry run would remove)


def clean(metastore: Metastore, *, dry_run: bool = False, retention_ms: int = settings.RETENTION.default_ms, trash_dir: str | None = None,
          retry_retention_ms: int = CLEANER_RETRY_RETENTION_MS, max_attempts: int = CLEANER_MAX_ATTEMPTS,
          log: Callable[[str], None] = print) -> list[CleanResult]:
    """Clean every compaction that is ready (Hive's Cleaner, one cycle).

    Args:
        dry_run: list what would be removed; change nothing (no files, no queue states).
        retention_ms: extra time after the compaction's commit before its inputs are removed
            (hive.compactor.cleaner.retention.time.seconds with delayed cleanup enabled).
        trash_dir: move removed entries under `<trash_dir>/<run id>/<database>/<table>[/<partition>]/` on the same
            filesystem instead of deleting them.
        retry_retention_ms, max_attempts: an entry whose cleaning fails waits 2^attempts x `retry_retention_ms`
            before the next try (hive.compactor.cleaner.retry.retention.time) and is marked failed when a retry
            fails after `max_attempts` retries (hive.compactor.cleaner.retry.maxattempts).
        log: called with one line per action and per path.

    Entries whose compactor transaction aborted after they were marked ready for cleaning are failed first (see
    CompactionQueue.fail_abandoned), so they cannot hold back the cleaning of their partition.

    Raises:
        UsageError: `trash_dir` is relative or has a `..` component.
    """
    if trash_dir is not None:
        _check_trash_dir(trash_dir)
    run_id = f"{metastore.db.clock.now_ms()}-{uuid.uuid4().hex[:8]}"
    if not dry_run:
        for entry in metastore.compactions.fail_abandoned():
            log(f"compaction {entry.id} ({_where(entry)}): failed: its compactor transaction {entry.txn_id} aborted "
                "after it was marked ready for cleaning; later compactions of the partition are cleaned instead")
    results = []
    for entry in metastore.compactions.ready_to_clean(retention_ms=retention_ms):
        try:
            result = _clean_entry(metastore, entry, dry_run=dry_run, trash_dir=trash_dir, run_id=run_id, log=log)
        except AcidError as exc:
            result = _record_error(metastore, entry, f"{type(exc).__name__}: {exc}", dry_run=dry_run,
                                   retry_retention_ms=retry_retention_ms, max_attempts=max_attempts)
        log(f"compaction {entry.id} ({_where(entry)}): {result.outcome}"
            + (f": {result.message}" if result.message else ""))
        results.append(result)
    return results


def _check_trash_dir(trash_dir: str) -> None:
    """A trash directory must be absolute (a relative one would land under whatever directory the cleaner runs in)
    and free of `..` components.

    Raises:
        UsageError: it is not.
    """
    if not isinstance(trash_dir, str) or not trash_dir.strip():
        raise UsageError(f"trash directory {trash_dir!r} is empty: give an absolute path or URI")
    if not is_absolute_location(trash_dir):
        raise UsageError(f"trash directory {trash_dir!r} is relative: give an absolute path or URI, outside every "
                         "table location")
    if ".." in trash_dir.split("://", 1)[-1].split("/"):
        raise UsageError(f"trash directory {trash_dir!r} has a '..' component: give it without one")


def _record_error(metastore: Metastore, entry: CompactionInfo, error: str, *, dry_run: bool,
                  retry_retention_ms: int, max_attempts: int) -> CleanResult:
    """Back off (the entry waits before the next try) or, after `max_attempts` retries, mark it failed."""
    def result(outcome: str, message: str) -> CleanResult:
        return CleanResult(entry.id, entry.full_table_name, entry.partition, outcome, message=message)

    if dry_run:
        return result("error", f"{error}; nothing recorded (dry run)")
    try:
        after = metastore.compactions.record_cleaner_error(entry.id, error, retry_retention_ms=retry_retention_ms,
                                                           max_attempts=max_attempts)
    except AcidError as exc:
        return result("error", f"{error}; left for the next run (recording the error failed too: {exc})")
    if after.state is CompactionState.FAILED:
        return result("failed", after.error_message or error)
    return result("error", f"{error}; retried in {after.retry_retention_ms // 1000} s or later")


def _where(entry: CompactionInfo) -> str:
    return entry.full_table_name + (f"/{entry.partition}" if entry.partition else "")


def _clean_entry(metastore: Metastore, entry: CompactionInfo, *, dry_run: bool, trash_dir: str | None, run_id: str,
                 log: Callable[[str], None]) -> CleanResult:
    removed_bytes = 0

    def result(outcome: str, removed=(), skipped=(), message: str = "") -> CleanResult:
        return CleanResult(entry.id, entry.full_table_name, entry.partition, outcome, tuple(removed), tuple(skipped),
                           message, removed_bytes)

    queue = metastore.compactions
    try:
        table = metastore.catalog.get_table(entry.database, entry.table)
    except NoSuchObjectError:
        if not dry_run:
            try:
                queue.mark_cleaned(entry.id)
            except CompactionStateError:
                pass  # DROP TABLE removed the queue entry with the table (Hive's CleanupRecordsFunction)
        return result("table dropped", message="the table no longer exists")
    if (table.param("no_cleanup") or "").lower() == "true":
        if dry_run:
            return result("refused", message=NO_CLEANUP_MESSAGE + " (dry run)")
        try:
            queue.mark_refused(entry.id, NO_CLEANUP_MESSAGE)
        except CompactionStateError as exc:
            return result("skipped", message=f"{NO_CLEANUP_MESSAGE}; the queue cannot refuse it: {exc}")
        return result("refused", message=NO_CLEANUP_MESSAGE)

    where = data_location(table, entry.partition)
    fs, table_root, location = where.fs, where.table_root, where.path
    if not fs.exists(location):
        if not dry_run:
            queue.mark_cleaned(entry.id)
        return result("cleaned", message=f"{location} does not exist; nothing to clean")

    name = full_table_name(entry.database, entry.table)
    txns = _cleaner_txns(metastore, entry)
    state = get_acid_state(location, write_ids=_cleaner_write_ids(metastore, entry, name), txns=txns, fs=fs)
    doomed = sorted(set(state.obsolete) | set(state.aborted))
    trash = None
    if trash_dir is not None and not dry_run:
        trash = _trash_location(fs, trash_dir, run_id, entry, table_root, location)
    removed, skipped = [], []
    for child in doomed:
        path = fs.join(location, child)
        try:
            path = ensure_inside(location, path)
        except PathOutsideTableError:
            skipped.append(path)
            log(f"skipped {path}: outside {location}")
            continue
        link = _symbolic_link_in(fs, path)
        if link is not None:
            skipped.append(path)
            log(f"skipped {path}: {link} is a symbolic link, which the cleaner never follows")
            continue
        removed_bytes += _bytes_in(fs, path)
        if dry_run:
            log(f"would remove {path}")
        elif trash is not None:
            target = fs.join(trash, child)
            fs.rename(path, target)
            log(f"moved {path} to {target}")
        else:
            if fs.is_dir(path):
                fs.delete_dir(path)
            else:
                fs.delete_file(path)
            log(f"removed {path}")
        removed.append(path)

    if dry_run:
        return result("dry run", removed, skipped, f"would remove {len(removed)} of {len(doomed)} entries")
    remaining = _remaining(fs, location, entry, txns)
    if remaining:
        return result("incomplete", removed, skipped,
                      f"still obsolete or aborted: {', '.join(remaining)}; left for the next run")
    queue.mark_cleaned(entry.id)
    return result("cleaned", removed, skipped, f"removed {len(removed)} entries" + (f" into {trash}" if trash else ""))


def _bytes_in(fs: FileSystem, path: str) -> int:
    """The bytes of the files directly inside `path` (a base or delta holds only files), or of the file itself: one
    listing per entry about to be removed (removing a directory on an object store lists it anyway)."""
    if fs.is_dir(path):
        return sum(child.size for child in fs.list_dir(path, missing_ok=True) if not child.is_dir)
    return fs.file_size(path)


def _cleaner_txns(metastore: Metastore, entry: CompactionInfo) -> ValidTxnList:
    """Hive's createValidTxnListForCleaner: high watermark = CQ_NEXT_TXN_ID - 1, the aborted txns at or below it."""
    current = metastore.txns.valid_txns()
    if entry.next_txn_id is not None:
        high = min(current.high_watermark, entry.next_txn_id - 1)
    else:  # no compactor transaction recorded: everything below the lowest open transaction
        high = current.high_watermark if current.min_open == LONG_MAX else current.min_open - 1
    open_ids = tuple(t for t in current.open_ids if t <= high)  # none, as ready_to_clean waited for them
    return ValidTxnList(high_watermark=high, open_ids=open_ids,
                        aborted_ids=tuple(t for t in current.aborted_ids if t <= high),
                        min_open=min(open_ids, default=LONG_MAX))


def _cleaner_write_ids(metastore: Metastore, entry: CompactionInfo, name: str) -> ValidCleanerWriteIdList:
    """The reader's write ids, capped at the compaction's highest write id (later work is left alone)."""
    reader = metastore.txns.snapshot([name]).write_ids[name]
    return ValidCleanerWriteIdList.from_reader(reader, high_watermark=entry.highest_write_id)


def _remaining(fs: FileSystem, location: str, entry: CompactionInfo, txns: ValidTxnList) -> list[str]:
    """Hive's verification: obsolete or aborted entries left up to the watermark, every write id up to it committed.

    Transactions are seen as the cleaning pass saw them (up to CQ_NEXT_TXN_ID - 1), not all committed as in Hive:
    a later compaction's base beyond the watermark, committed meanwhile, would otherwise be a compacted base no
    write-id list up to the watermark may use, and the check would fail with "not enough history" and hold back the
    cleaning of the whole partition.
    """
    name = full_table_name(entry.database, entry.table)
    high = entry.highest_write_id if entry.highest_write_id is not None else LONG_MAX
    state: DirectoryState = get_acid_state(location, write_ids=ValidCleanerWriteIdList(table_name=name,
                                                                                        high_watermark=high),
                                           txns=txns, fs=fs)
    return sorted(set(state.obsolete) | set(state.aborted))


def _symbolic_link_in(fs: FileSystem, path: str) -> str | None:
    """The first symbolic link at or below `path` on a local filesystem (pyarrow's listing follows links; we must not).
    HDFS and object stores need no check: a recursive delete there removes links, not their targets."""
    if fs.arrow.type_name != "local":
        return None
    if fs.is_symlink(path):
        return path
    if not fs.is_dir(path):
        return None
    for child in fs.list_dir(path):
        found = _symbolic_link_in(fs, child.path)
        if found is not None:
            return found
    return None


def _trash_location(fs: FileSystem, trash_dir: str, run_id: str, entry: CompactionInfo, table_root: str,
                    location: str) -> str:
    """`<trash>/<run id>/<db>/<table>[/<partition>]`, on the table's filesystem and outside the table.

    Raises:
        UsageError: the trash is on another filesystem or inside the table location.
    """
    trash_fs, trash_root = FileSystem.resolve(trash_dir)
    if trash_fs.arrow.type_name != fs.arrow.type_name:
        raise UsageError(f"trash directory {trash_dir!r} is on a {trash_fs.arrow.type_name} filesystem, the table "
                         f"{entry.full_table_name} on {fs.arrow.type_name}: give a trash directory on the same one")
    if not fs.renames_atomically and trash_root.split("/", 1)[0] != table_root.split("/", 1)[0]:
        # an object store moves by server-side copy: within one bucket, never across buckets (or regions)
        raise UsageError(f"trash directory {trash_dir!r} is not in the bucket of table {entry.full_table_name} "
                         f"({table_root.split('/', 1)[0]!r}): give a trash directory in the same bucket")
    try:
        ensure_inside(table_root, trash_root)
    except PathOutsideTableError:
        pass
    else:
        raise UsageError(f"trash directory {trash_dir!r} is inside the table location {table_root!r}: choose one "
                         "outside it")
    relative = location[len(table_root):].strip("/")
    parts = [trash_root, run_id, entry.database, entry.table] + ([relative] if relative else [])
    target = fs.join(*parts)
    fs.make_dirs(target)
    return target
