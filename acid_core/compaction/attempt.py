"""What a request to run one queued compaction by id means for its queue entry, before the run and after it.

One set of rules for every path that runs a compaction by id: the worker itself (`CompactionWorker.run`), the Airflow
operator and `acid compact run` (both of which start `spark_jobs/compact.py` with spark-submit). They agree on when
to run, when there is nothing to do, and what the entry says happened; each front end only maps the `Result` to its
own vocabulary (an Airflow exception, an exit status). Cost: one queue read, and at most one compare-and-swap.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from acid_core.errors import CompactionStateError, one_line
from acid_core.metastore import Metastore
from acid_core.metastore.codes import CompactionState
from acid_core.metastore.compaction_rows import CompactionInfo


class Result(str, enum.Enum):
    RUN = "run"  # before: the entry is initiated; go
    NOTHING_TO_DO = "nothing to do"  # before: it was compacted already (ready for cleaning, succeeded)
    COMPACTED = "compacted"  # after: ready for cleaning (or cleaned already)
    REFUSED = "refused"  # after: not enough to compact (Hive's refusal): a success without work
    BUSY = "busy"  # another worker holds it: not run twice
    INTERRUPTED = "interrupted"  # after: still ours and working, so the run died; housekeeping puts it back
    ABORTED = "aborted"  # before or after: ABORT COMPACTIONS took it (an operator's request, not a failure)
    ERROR = "error"  # unknown, failed, or in a state nothing can run


@dataclass(frozen=True, slots=True)
class Verdict:
    """A `Result` with the one-line message to show, the entry it was read from, and a warning worth logging."""

    result: Result
    message: str
    entry: CompactionInfo | None = None
    warning: str | None = None

    @property
    def ok(self) -> bool:
        """The request is satisfied (or may go on): run, nothing to do, compacted, refused."""
        return self.result in (Result.RUN, Result.NOTHING_TO_DO, Result.COMPACTED, Result.REFUSED)


def describe(entry: CompactionInfo) -> str:
    """`db.table` or `db.table partition k=v`."""
    name = entry.full_table_name
    return f"{name} partition {entry.partition}" if entry.partition else name


def aborted_message(entry: CompactionInfo) -> str:
    """`compaction 4 of db.t partition ds=1 aborted by <who or what>`, in the words the abort recorded in the entry's
    error message (Hive's ABORT COMPACTIONS writes "Compaction Aborted by Abort Comapction request.", spelling
    included: "aborted by Abort Comapction request")."""
    recorded = (one_line(entry.error_message) or "").strip().rstrip(".")
    found = re.search(r"\baborted\s+(\S.*)", recorded, flags=re.IGNORECASE)  # "aborted by admin", "aborted from..."
    how = found.group(1) if found else (f"by request: {recorded}" if recorded else "by request")
    return f"compaction {entry.id} of {describe(entry)} aborted {how}"


def before_run(entry: CompactionInfo | None, compaction_id: int) -> Verdict:
    """Whether compaction `compaction_id`, whose queue entry is `entry` (None: unknown), should run now.

    Only an initiated entry runs (Hive's worker takes initiated entries only). One that is ready for cleaning or
    succeeded was compacted already: nothing to do, and nothing changes. One another worker holds is not run twice.
    One aborted (ABORT COMPACTIONS, the ACID view's Abort) is not run: the abort is its outcome. A refused, failed or
    not-initiated one is an error: the request cannot be met by running it.
    """
    if entry is None:
        return Verdict(Result.ERROR, f"compaction {compaction_id} does not exist")
    state, where = entry.state, describe(entry)
    if state is CompactionState.INITIATED:
        return Verdict(Result.RUN, f"compaction {compaction_id}: {entry.type.display} compaction of {where}", entry)
    if state in (CompactionState.READY_FOR_CLEANING, CompactionState.SUCCEEDED):
        return Verdict(Result.NOTHING_TO_DO, f"compaction {compaction_id} already finished ({state.display}); "
                       "nothing changed", entry)
    if state is CompactionState.WORKING:
        return Verdict(Result.BUSY, f"compaction {compaction_id} is working on {entry.worker_id}; not run twice", entry)
    if state is CompactionState.ABORTED:
        return Verdict(Result.ABORTED, aborted_message(entry), entry)
    return Verdict(Result.ERROR, f"compaction {compaction_id} of {where} is {state.display}: "
                   f"{entry.error_message or 'only an initiated compaction can run'}", entry)


def after_run(metastore: Metastore, compaction_id: int, *, worker_id: str | None, launch_error: str | None = None,
              launcher: str = "spark-submit") -> Verdict:
    """What the queue entry says a run that has ended did.

    Args:
        worker_id: the id the run claimed the entry with; None when the run chose its own and did not report it
            (then a working entry counts as this run's).
        launch_error: what the launcher reported (an exit status, an exception), if anything.
        launcher: the launcher's name, for the messages.

    An entry still initiated means the run never claimed it (no binary, no cluster, bad configuration): that is
    recorded as a failure in the queue, as Hive's worker records one, so SHOW COMPACTIONS shows it and the
    initiator's failed.compacts.threshold counts it (compare-and-swap: an entry someone else claimed meanwhile is
    left alone). An entry aborted meanwhile (ABORT COMPACTIONS while the run was starting, or while it held the
    entry) is `ABORTED` whatever the launcher reported: the abort, not the run, decided how it ended.
    """
    entry = metastore.compactions.get(compaction_id)
    if entry is not None and entry.state is CompactionState.INITIATED:
        message = one_line(f"{launcher} did not start the compaction: "
                           f"{one_line(launch_error) or 'it ended without claiming it'}")
        assert message is not None  # one_line returns None for None only
        try:
            metastore.compactions.claim(worker_id=worker_id or f"{metastore.db.identity.host}-launcher",
                                        compaction_id=compaction_id)
            metastore.compactions.mark_failed(compaction_id, message)
        except CompactionStateError:
            pass
        entry = metastore.compactions.get(compaction_id)
    if entry is None:
        return Verdict(Result.ERROR, f"compaction {compaction_id} does not exist (any more)")
    state, where = entry.state, describe(entry)
    if state in (CompactionState.READY_FOR_CLEANING, CompactionState.SUCCEEDED):
        warning = (f"{launcher} reported an error after the compaction committed: {launch_error}"
                   if launch_error else None)
        return Verdict(Result.COMPACTED, f"compaction {compaction_id} of {where}: {state.display}", entry, warning)
    if state is CompactionState.REFUSED:
        return Verdict(Result.REFUSED, entry.error_message or "refused", entry)
    if state is CompactionState.FAILED:
        return Verdict(Result.ERROR, f"compaction {compaction_id} of {where} failed: {entry.error_message}", entry)
    if state is CompactionState.ABORTED:
        return Verdict(Result.ABORTED, aborted_message(entry), entry)
    if state is CompactionState.WORKING:
        if worker_id is not None and entry.worker_id != worker_id:
            return Verdict(Result.BUSY, f"compaction {compaction_id} was claimed by {entry.worker_id} first", entry)
        return Verdict(Result.INTERRUPTED, f"compaction {compaction_id} of {where} is still working after {launcher} "
                       f"ended ({launch_error or 'exit status 0'}): the driver was killed. Housekeeping "
                       "(acid_housekeeping) puts it back to initiated after the worker time-out and the next "
                       "worker run (acid_worker) retries it", entry)
    return Verdict(Result.ERROR, f"compaction {compaction_id} of {where} is {state.display}: "
                   f"{entry.error_message or 'it did not run to the end'}", entry)
