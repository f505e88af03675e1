"""Hive's compaction worker protocol, independent of where the bucket tasks run (in-process, or on Spark).

claim (initiated -> working) -> open the compactor transaction -> shared_read lock -> ValidCompactorWriteIdList
(high watermark = lowest open write id - 1) -> directory state -> refuse if not enough to compact -> bucket tasks
write hidden result directories -> publish them under their `_v<txn>` names (`acid_core.write.publish`; on an object
store the tasks write the `_v<txn>` names directly) -> ready for cleaning -> commit.
The result is invisible to every reader until the commit (the `_v` suffix). A failure aborts the transaction, removes
what was written and marks the entry failed; a killed attempt leaves only hidden or `_v<aborted>` directories, which
the retry (or the cleaner) removes. Running a compaction that already finished changes nothing.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from acid_core import settings
from acid_core.compaction.attempt import Result, before_run
from acid_core.compaction.execute import BucketResult, join_parts, run_bucket
from acid_core.compaction.plan import (
    CompactionPlan,
    build_plan,
    enough_to_compact,
    is_leftover_of,
    is_output_of_attempt,
)
from acid_core.compaction.verify import verification_enabled, verify_output
from acid_core.errors import AcidError, CompactionStateError, MetastoreUnavailableError, one_line_cause
from acid_core.format.layout import ParsedDelta, parse_directory
from acid_core.format.validity import RangeResponse, ValidCompactorWriteIdList, ValidWriteIdList
from acid_core.metastore import Metastore
from acid_core.metastore.codes import REBALANCE_BUCKETED_MESSAGE, CompactionType
from acid_core.metastore.compaction_rows import CompactionInfo
from acid_core.metastore.locations import data_location
from acid_core.metastore.locks import LOCK_TIMEOUT_MS, LockComponent, LockType
from acid_core.metastore.txns import StagingRecord, TxnType, full_table_name
from acid_core.read.state import DirectoryState, get_acid_state
from acid_core.storage.fs import FileSystem
from acid_core.write.publish import Publication

# Runs a plan's bucket tasks. A runner with a `split_rows` attribute gets a major compaction's bucket of more rows
# than that split into key-interval parts, one task each, as many as a multiple of its `parallelism` (SparkRunner:
# its tasks run at once), and a bucket of a plan with fewer buckets than that split over the idle slots (parts of at
# least plan.MIN_PART_ROWS); local_runner has neither.
Runner = Callable[[CompactionPlan], Sequence[BucketResult]]
_log = logging.getLogger("acid_core.compaction")
HEARTBEAT_SECONDS = 10.0  # at most: an abort (or a lost transaction) stops a compaction within this
REFUSED_MESSAGE = "None of the compaction thresholds met, compaction request is refused!"  # Hive's text


def _check_no_deletes_above(fs: FileSystem, location: str, reader: ValidWriteIdList, high_watermark: int) -> None:
    """A rebalance must not leave a committed delete delta above its high watermark: its events name rows by their
    old ROW__IDs, which the new base gives to other rows. (The high watermark stops below the lowest open write id,
    so a delete committed after an earlier write that is still open would be left above it.)

    Raises:
        CompactionStateError: there is one; the rebalance can run once the open write ends.
    """
    for entry in fs.list_dir(location, missing_ok=True):
        parsed = parse_directory(entry.name) if entry.is_dir else None
        if (isinstance(parsed, ParsedDelta) and parsed.is_delete and parsed.max_write_id > high_watermark
                and reader.range_valid(max(parsed.min_write_id, high_watermark + 1),
                                       parsed.max_write_id) is not RangeResponse.NONE):
            blocking = reader.min_open_or_none
            raise CompactionStateError(
                f"rebalance of {location} cannot run yet: {entry.name} holds deletes above the compaction's high "
                f"watermark {high_watermark}" + (f" (write id {blocking} is still open)" if blocking else "")
                + "; their rows would get new ROW__IDs. Run it again once that write ends")


def stripe_size(table) -> int:
    """The table's `orc.stripe.size` (bytes, Hive's ORC table property), else Hive's default of 64 MiB: how much a
    compaction's output writer buffers before it writes a stripe.

    Raises:
        UsageError: the property is not a whole number within the registry's bounds (at least 64 KiB).
    """
    key = settings.STRIPE_SIZE.property_key
    return settings.STRIPE_SIZE.read(table.param(key), what=f"table {table.full_name}: {key}")


def input_bytes(state: DirectoryState) -> int:
    """Bytes of the files a compaction of `state` reads: the base's, the current deltas' and the original files."""
    listing = state.listing
    if listing is None:
        return 0
    names = ([state.base.name] if state.base is not None else []) + [delta.name for delta in state.deltas]
    total = sum(child.size for name in names for child in listing.children(name) if not child.is_dir)
    wanted = set(state.original_files)
    total += sum(entry.size for entry in listing.entries if not entry.is_dir and entry.name in wanted)
    return total + sum(f.size for f in listing.original_dir_files if f.name in wanted)


def local_runner(plan: CompactionPlan) -> list[BucketResult]:
    """Run every bucket task in this process, one after another, each encoding its output on a second thread
    (nothing else of this process runs meanwhile)."""
    return [run_bucket(plan, work, background=True) for work in plan.buckets]


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a run did: `compacted`, `refused`, `nothing to do` (already finished), with numbers for the log and the
    metrics: events written (`inserts`, `deletes`) and read, bytes of the input and output directories' files."""

    compaction_id: int
    result: str
    message: str
    inserts: int = 0
    deletes: int = 0
    events_read: int = 0
    bytes_read: int = 0
    bytes_written: int = 0


@dataclass(frozen=True, slots=True)
class _Prepared:
    """A compaction ready for its tasks: its entry, transaction, plan and directory state."""

    info: CompactionInfo
    txn_id: int
    plan: CompactionPlan
    state: DirectoryState
    fs: FileSystem
    location: str


@dataclass(slots=True)
class _Attempt:
    """One compaction of a group as it goes (mutable: the group's bookkeeping, never shared)."""

    info: CompactionInfo
    txn_id: int | None = None
    prepared: _Prepared | None = None
    outcome: Outcome | None = None
    error: Exception | None = None
    stop: threading.Event = field(default_factory=threading.Event)
    lost: str | None = None  # why its transaction can no longer commit (set by the heartbeat thread)

    @property
    def ready(self) -> _Prepared:
        """Its prepared compaction: every attempt `_start` neither failed nor ended has one."""
        assert self.prepared is not None, f"compaction {self.info.id} was not prepared"
        return self.prepared

    @property
    def result(self) -> Outcome | BaseException:
        """The error it failed with, else its outcome: every attempt has one of them once it ended."""
        if self.error is not None:
            return self.error
        assert self.outcome is not None, f"compaction {self.info.id} has not ended"
        return self.outcome


class CompactionWorker:
    def __init__(self, metastore: Metastore, *, worker_id: str | None = None, runner: Runner = local_runner,
                 lock_timeout_ms: int = LOCK_TIMEOUT_MS, job_id: str | None = None) -> None:
        self.metastore = metastore
        self.worker_id = worker_id or f"{socket.gethostname()}-local"
        self.runner = runner
        self.lock_timeout_ms = lock_timeout_ms
        self.job_id = job_id  # recorded as the entry's HadoopJobId once claimed (the Spark application id)

    def run(self, compaction_id: int) -> Outcome:
        """Run one queued compaction to the end; an entry compacted already is left as it is ("nothing to do").

        Raises:
            CompactionStateError: the entry may not run (`attempt.before_run`: unknown, held by another worker,
                refused, failed...); nothing changed.
            AcidError: the compaction failed; it is marked failed (with this message) and nothing it wrote is visible.
        """
        queue = self.metastore.compactions
        verdict = before_run(queue.get(compaction_id), compaction_id)
        if verdict.result is Result.NOTHING_TO_DO:
            return Outcome(compaction_id, Result.NOTHING_TO_DO.value, verdict.message)
        if verdict.result is not Result.RUN:
            raise CompactionStateError(verdict.message)
        info = queue.claim(worker_id=self.worker_id, compaction_id=compaction_id)
        assert info is not None  # a claim of a given id raises CompactionStateError rather than return None
        return self.run_claimed(info)

    def run_claimed(self, info: CompactionInfo) -> Outcome:
        """Run a compaction this worker has just claimed (`working`, its worker id ours) to the end.

        Raises:
            AcidError: the compaction failed; it is marked failed (with this message) and nothing it wrote is visible.
        """
        [outcome] = self.run_claimed_group([info])
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    def run_claimed_group(self, infos: Sequence[CompactionInfo]) -> list[Outcome | BaseException]:
        """Run compactions this worker has just claimed, their tasks in one `runner.run_group` call when the runner
        has one (SparkRunner: one Spark job for them all, so small partitions share a job and its slots), each one's
        protocol on its own: its transaction, lock, snapshot and commit, or its failure (marked failed, its output
        removed) without touching the others. Returns each one's Outcome or the error it failed with, in order."""
        started = [_Attempt(info) for info in infos]
        try:
            for attempt in started:
                self._start(attempt)
            planned = [a for a in started if a.error is None and a.outcome is None]
            if planned:
                for attempt, results in zip(planned, self._run_plans([a.ready.plan for a in planned])):
                    if attempt.lost is not None:  # its transaction can no longer commit
                        self._failed(attempt, CompactionStateError(attempt.lost))
                        continue
                    if isinstance(results, BaseException):
                        self._failed(attempt, results)
                        continue
                    try:
                        attempt.outcome = self._finish(attempt.ready, results)
                    except Exception as exc:
                        self._failed(attempt, exc)
            return [a.result for a in started]
        except BaseException as exc:  # interrupted: every attempt still in hand fails (housekeeping if killed)
            for attempt in started:
                if attempt.error is None and attempt.outcome is None:
                    self._failed(attempt, exc)
            raise
        finally:
            for attempt in started:
                attempt.stop.set()

    def _start(self, attempt: _Attempt) -> None:
        """Open the compactor transaction (heartbeated) and prepare the plan; a compaction that ends here (refused,
        nothing to merge) gets its outcome, one that fails its error."""
        info = attempt.info
        try:
            if self.job_id:
                self.metastore.compactions.set_hadoop_job_id(info.id, self.job_id, worker_id=self.worker_id)
            kind = TxnType.REBALANCE_COMPACTION if info.type is CompactionType.REBALANCE else TxnType.COMPACTION
            attempt.txn_id = self.metastore.compactions.open_compactor_txn(
                info.id, self.metastore.txns, worker_id=self.worker_id, txn_type=kind,
                agent_info=f"compactor {self.worker_id}")
            threading.Thread(target=self._heartbeat, args=(attempt,), daemon=True,
                             name=f"compaction-{info.id}-heartbeat").start()
            prepared = self._prepare(info, attempt.txn_id)
        except Exception as exc:
            self._failed(attempt, exc)
            return
        if isinstance(prepared, Outcome):
            attempt.outcome = prepared
        else:
            attempt.prepared = prepared

    def _run_plans(self, plans: list[CompactionPlan]) -> list:
        """Each plan's task results, or the error its tasks failed with."""
        group = getattr(self.runner, "run_group", None)
        if group is not None and len(plans) > 1:
            return group(plans)
        found: list = []
        for plan in plans:
            try:
                found.append(self.runner(plan))
            except Exception as exc:
                found.append(exc)
        return found

    def _failed(self, attempt: _Attempt, error: BaseException) -> None:
        attempt.error = error if isinstance(error, Exception) else AcidError(f"interrupted: {error!r}")
        attempt.stop.set()
        self._fail(attempt.info, attempt.txn_id, error)

    def _heartbeat(self, attempt: _Attempt) -> None:
        """Keep the compactor transaction alive while tasks run (Hive's worker heartbeats too), so housekeeping does
        not time it out under a long compaction.

        A heartbeat the metastore cannot take (each call already waits out a short outage) is logged and tried again
        every few seconds; when none has succeeded for hive.txn.timeout, or the transaction was aborted, the attempt
        is marked lost (`_Attempt.lost`) and its running tasks are cancelled: it stops with that one-line reason
        instead of finishing work it could no longer commit."""
        txn_id = attempt.txn_id
        assert txn_id is not None  # the thread starts once the compactor transaction is open
        txns = self.metastore.txns
        timeout_s = txns.txn_timeout_ms / 1000
        interval = max(1.0, min(timeout_s / 4, HEARTBEAT_SECONDS))
        renewed = time.monotonic()
        failing_since: float | None = None
        while not attempt.stop.wait(interval if failing_since is None else min(interval, 5.0)):
            try:
                txns.heartbeat(txn_id)
            except MetastoreUnavailableError as exc:
                silent = time.monotonic() - renewed
                failing_since = failing_since or time.monotonic()
                if silent < timeout_s:
                    _log.warning("compaction %d: heartbeat of transaction %d failed, %.0f s before hive.txn.timeout "
                                 "(%.0f s): %s", attempt.info.id, attempt.txn_id, timeout_s - silent, timeout_s, exc)
                    continue
                self._lose(attempt, f"heartbeat lost: transaction {attempt.txn_id} was not renewed for "
                                    f"{silent:.0f} s (hive.txn.timeout {timeout_s:.0f} s): {one_line_cause(exc)}")
                return
            except AcidError as exc:  # aborted (timed out, or by an operator) or gone: nothing can commit now
                self._lose(attempt, f"heartbeat lost: {exc}")
                return
            else:
                if failing_since is not None:
                    _log.warning("compaction %d: heartbeat of transaction %d renewed after %.0f s of failures",
                                 attempt.info.id, attempt.txn_id, time.monotonic() - failing_since)
                    failing_since = None
                renewed = time.monotonic()

    def _lose(self, attempt: _Attempt, reason: str) -> None:
        attempt.lost = reason
        _log.error("compaction %d: %s; stopping it", attempt.info.id, reason)
        cancel = getattr(self.runner, "cancel", None)
        if cancel is not None:
            try:
                cancel(attempt.info.id)
            except Exception as exc:  # the tasks then run to their end and the attempt fails after them
                _log.warning("compaction %d: could not cancel its tasks: %s", attempt.info.id, one_line_cause(exc))

    def _prepare(self, info: CompactionInfo, txn_id: int) -> Outcome | _Prepared:
        """Everything before the tasks run: lock, snapshot, directory state, plan, hidden result directories. An
        Outcome when the compaction ends here (refused, nothing to merge)."""
        store = self.metastore
        table = store.catalog.require_transactional(info.database, info.table)
        where = data_location(table, info.partition)
        fs, location = where.fs, where.path
        if not fs.renames_atomically:  # results under their final names: the transaction is remembered (not
            # forgotten by housekeeping, which would make a `_v<txn>` name valid) until they are committed or removed
            store.txns.register_staging(txn_id, info.database, info.table, info.partition)
        rebalance = info.type is CompactionType.REBALANCE
        if rebalance and table.num_buckets > 0:
            store.compactions.mark_refused(info.id, REBALANCE_BUCKETED_MESSAGE)
            store.txns.commit(txn_id)
            return Outcome(info.id, Result.REFUSED.value, REBALANCE_BUCKETED_MESSAGE)
        # Hive's locks: a rebalance renumbers rows, so it excludes other writers (EXCL_WRITE) and is recorded as an
        # update (WRITE_SET at commit); major and minor compactions only read (SHARED_READ).
        lock = LockType.EXCL_WRITE if rebalance else LockType.SHARED_READ
        store.locks.acquire([LockComponent(info.database, info.table, info.partition, lock)],
                            txn_id=txn_id, timeout_ms=self.lock_timeout_ms, agent_info=f"compaction {info.id}")
        name = full_table_name(info.database, info.table)
        snapshot = store.txns.snapshot([name], current_txn=txn_id)
        write_ids = ValidCompactorWriteIdList.from_reader(snapshot.write_ids[name])
        store.compactions.set_compactor_txn(info.id, txn_id, write_ids.high_watermark, worker_id=self.worker_id)
        self._remove_leftovers(fs, location, info.id)
        if rebalance:
            _check_no_deletes_above(fs, location, snapshot.write_ids[name], write_ids.high_watermark)
        state = get_acid_state(location, write_ids=write_ids, txns=snapshot.txns, missing_ok=True, fs=fs)
        if not enough_to_compact(state, info.type):
            if state.obsolete or state.aborted:
                store.compactions.mark_compacted(info.id)  # nothing to merge, but the cleaner has work
                store.txns.commit(txn_id)
                return Outcome(info.id, Result.COMPACTED.value,
                               "nothing to merge; obsolete or aborted directories left for the cleaner")
            store.compactions.mark_refused(info.id, REFUSED_MESSAGE)
            store.txns.commit(txn_id)
            return Outcome(info.id, Result.REFUSED.value, REFUSED_MESSAGE)
        plan = build_plan(fs, state, compaction_id=info.id, kind=info.type, columns=table.columns, write_ids=write_ids,
                          txn_id=txn_id, compression=(table.param("orc.compress") or "ZLIB").upper(),
                          stripe_bytes=stripe_size(table), number_of_buckets=info.number_of_buckets,
                          split_rows=getattr(self.runner, "split_rows", None),
                          parallelism=getattr(self.runner, "parallelism", 1), verify=verification_enabled(table))
        for _, temp in plan.outputs:
            fs.make_dirs(fs.join(location, temp))
        return _Prepared(info, txn_id, plan, state, fs, location)

    def _finish(self, prepared: _Prepared, results: Sequence[BucketResult]) -> Outcome:
        """Everything after the tasks ran: parts joined, the output verified (unless the table's compactor.verify is
        'false'), format files, renames, ready for cleaning, commit.

        Raises:
            CompactionVerificationError: the output is not what the input gives (`verify.verify_output`); nothing
                was renamed or committed, and the failure path removes the output.
        """
        store, info, txn_id, plan, state = (self.metastore, prepared.info, prepared.txn_id, prepared.plan,
                                            prepared.state)
        fs, location = prepared.fs, prepared.location
        job = getattr(self.runner, "job_label", None)  # the Spark job that ran it, once known: HadoopJobId
        if job and job != self.job_id:
            store.compactions.set_hadoop_job_id(info.id, job, worker_id=self.worker_id)
        join_parts(fs, plan)
        # Before anything becomes visible: the tasks' figures against each other and the result directories' listing
        # (the table's compactor.verify, read when the plan was made).
        verified = plan.verify
        if verified:
            verify_output(fs, plan, results)
        publication = Publication(fs)  # a failure from here on: `_fail` removes this attempt's output by its names
        for final, temp in plan.outputs:  # temp is final where built in place (an object store)
            publication.stage(fs.join(location, temp), fs.join(location, final))
        publication.publish()
        store.compactions.mark_compacted(info.id)
        store.txns.commit(txn_id)
        inserts, deletes = sum(r.inserts for r in results), sum(r.deletes for r in results)
        written = ", ".join(final for final, _ in plan.outputs)
        buckets = len({work.bucket for work in plan.buckets})
        tasks = f" ({len(plan.buckets)} tasks)" if len(plan.buckets) != buckets else ""
        bytes_written = sum(entry.size for final, _ in plan.outputs
                            for entry in fs.list_dir(fs.join(location, final), missing_ok=True) if not entry.is_dir)
        return Outcome(info.id, Result.COMPACTED.value, f"{info.type.display.lower()} compaction {info.id} wrote "
                       f"{written}: {inserts} insert and {deletes} delete events in {buckets} buckets{tasks}"
                       + (", verified" if verified else ", not verified (compactor.verify is off)"),
                       inserts, deletes, events_read=sum(r.events_read for r in results),
                       bytes_read=input_bytes(state), bytes_written=bytes_written)

    @staticmethod
    def _remove_leftovers(fs: FileSystem, location: str, compaction_id: int) -> None:
        """Hidden result directories of an earlier, killed attempt of this compaction."""
        if not fs.exists(location):
            return
        for entry in fs.list_dir(location):
            if entry.is_dir and is_leftover_of(entry.name, compaction_id):
                fs.delete_dir(entry.path)

    def _fail(self, info: CompactionInfo, txn_id: int | None, error: BaseException) -> None:
        """Abort the compactor transaction, remove this attempt's output, record the failure."""
        store = self.metastore
        if txn_id is not None:
            try:
                store.txns.abort(txn_id)
            except AcidError:
                pass
        try:
            where = data_location(store.catalog.get_table(info.database, info.table), info.partition)
            if txn_id is not None:  # this attempt's output only: a newer attempt may be writing beside it
                for entry in where.fs.list_dir(where.path, missing_ok=True):
                    if entry.is_dir and is_output_of_attempt(entry.name, info.id, txn_id):
                        where.fs.delete_dir(entry.path)  # never visible: its transaction is aborted
                if not where.fs.renames_atomically:
                    store.txns.forget_staging(StagingRecord(txn_id, info.database, info.table, info.partition))
        except AcidError:
            pass
        try:
            current = store.compactions.get(info.id)
            still_ours = (current is not None and current.worker_id == self.worker_id
                          and current.txn_id in (None, txn_id) and current.end_ms is None)
            if still_ours:  # a worker presumed dead must not fail the attempt that replaced it
                store.compactions.mark_failed(info.id, one_line_cause(error))  # the traceback: the log
        except AcidError:
            pass
