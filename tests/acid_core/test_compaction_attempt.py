"""The one set of queue-state rules for running a compaction by id (acid_core.compaction.attempt): what each state
means before a run and after it, and `acid compact run` following them without starting a JVM when it need not.
The Airflow operator's mapping of the same verdicts is exercised by tests/dags."""

from __future__ import annotations

import pytest
from support.queue_tables import creating_tables

from acid_cli import compact as compact_command
from acid_core.compaction.attempt import Result, after_run, before_run
from acid_core.errors import UsageError
from acid_core.metastore import Metastore
from acid_core.metastore.codes import CompactionState, CompactionType
from acid_core.metastore.txns import TxnType

S = CompactionState


@pytest.fixture
def ms(make_ms):
    return creating_tables(make_ms())


def in_state(ms: Metastore, state: CompactionState, *, table: str = "t", worker_id: str = "host-w1") -> int:
    """A compaction of default.<table> brought to `state` the way the worker and the cleaner bring it; its id."""
    if state is S.DID_NOT_INITIATE:
        return ms.compactions.record_did_not_initiate("default", table, None, CompactionType.MAJOR, "no candidates")
    compaction_id = ms.compactions.enqueue("default", table, None, CompactionType.MAJOR).compaction_id
    if state is S.ABORTED:
        ms.compactions.abort_compactions([compaction_id])
    elif state is S.REFUSED:
        ms.compactions.mark_refused(compaction_id, "None of the compaction thresholds met")
    elif state is not S.INITIATED:
        ms.compactions.claim(worker_id=worker_id, compaction_id=compaction_id)
        if state is S.FAILED:
            ms.compactions.mark_failed(compaction_id, "OSError: disk full")
        elif state in (S.READY_FOR_CLEANING, S.SUCCEEDED):
            txn_id = ms.txns.open_txn(txn_type=TxnType.COMPACTION)
            ms.compactions.set_compactor_txn(compaction_id, txn_id, 0)
            ms.compactions.mark_compacted(compaction_id)
            ms.txns.commit(txn_id)
            if state is S.SUCCEEDED:
                ms.compactions.mark_cleaned(compaction_id)
    assert ms.compactions.get(compaction_id).state is state
    return compaction_id


@pytest.mark.parametrize("state, result, message", [
    (S.INITIATED, Result.RUN, "compaction {id}: MAJOR compaction of default.t"),
    (S.READY_FOR_CLEANING, Result.NOTHING_TO_DO,
     "compaction {id} already finished (ready for cleaning); nothing changed"),
    (S.SUCCEEDED, Result.NOTHING_TO_DO, "compaction {id} already finished (succeeded); nothing changed"),
    (S.WORKING, Result.BUSY, "compaction {id} is working on host-w1; not run twice"),
    (S.REFUSED, Result.ERROR, "compaction {id} of default.t is refused: None of the compaction thresholds met"),
    (S.FAILED, Result.ERROR, "compaction {id} of default.t is failed: OSError: disk full"),
    (S.ABORTED, Result.ABORTED, "compaction {id} of default.t aborted by Abort Comapction request"),
    (S.DID_NOT_INITIATE, Result.ERROR, "compaction {id} of default.t is did not initiate: no candidates"),
])
def test_before_run(ms, state, result, message):
    compaction_id = in_state(ms, state)
    verdict = before_run(ms.compactions.get(compaction_id), compaction_id)
    assert (verdict.result, verdict.ok) == (result, result in (Result.RUN, Result.NOTHING_TO_DO))
    assert verdict.message.startswith(message.format(id=compaction_id))
    assert verdict.entry.id == compaction_id


def test_before_run_of_an_unknown_compaction():
    verdict = before_run(None, 4242)
    assert (verdict.result, verdict.message, verdict.ok) == (Result.ERROR, "compaction 4242 does not exist", False)


@pytest.mark.parametrize("state, worker_id, result, message", [
    (S.READY_FOR_CLEANING, "host-w1", Result.COMPACTED, "compaction {id} of default.t: ready for cleaning"),
    (S.SUCCEEDED, None, Result.COMPACTED, "compaction {id} of default.t: succeeded"),
    (S.REFUSED, "host-w1", Result.REFUSED, "None of the compaction thresholds met"),
    (S.FAILED, "host-w1", Result.ERROR, "compaction {id} of default.t failed: OSError: disk full"),
    (S.WORKING, "host-w2", Result.BUSY, "compaction {id} was claimed by host-w1 first"),
    (S.WORKING, "host-w1", Result.INTERRUPTED, "compaction {id} of default.t is still working after spark-submit "
                                               "ended (exit status 0): the driver was killed"),
    (S.WORKING, None, Result.INTERRUPTED, "compaction {id} of default.t is still working"),
    (S.ABORTED, "host-w1", Result.ABORTED, "compaction {id} of default.t aborted by Abort Comapction request"),
])
def test_after_run(ms, state, worker_id, result, message):
    compaction_id = in_state(ms, state)
    verdict = after_run(ms, compaction_id, worker_id=worker_id)
    assert (verdict.result, verdict.ok) == (result, result in (Result.COMPACTED, Result.REFUSED))
    assert verdict.message.startswith(message.format(id=compaction_id)), verdict.message
    assert verdict.warning is None
    assert ms.compactions.get(compaction_id).state is state  # reading the verdict changes nothing


def test_a_compaction_aborted_while_its_run_started_is_aborted_not_failed(ms):
    """ABORT COMPACTIONS between the launcher's check and the driver's claim: the driver finds it aborted and exits
    with an error, yet the verdict is the abort (in the words it recorded), and nothing is recorded failed."""
    compaction_id = in_state(ms, S.INITIATED)
    assert before_run(ms.compactions.get(compaction_id), compaction_id).result is Result.RUN
    ms.compactions.abort_compactions([compaction_id])
    verdict = after_run(ms, compaction_id, worker_id="host-airflow.t", launch_error="exit status 1")
    assert (verdict.result, verdict.ok, verdict.warning) == (Result.ABORTED, False, None)
    assert verdict.message == f"compaction {compaction_id} of default.t aborted by Abort Comapction request"
    assert ms.compactions.get(compaction_id).state is S.ABORTED


@pytest.mark.parametrize("recorded, said", [
    ("Compaction Aborted by Abort Comapction request.", "aborted by Abort Comapction request"),
    ("Compaction aborted by admin from the ACID view.", "aborted by admin from the ACID view"),
    ("aborted from the ACID view by admin", "aborted from the ACID view by admin"),
    ("operator's request", "aborted by request: operator's request"),
    (None, "aborted by request"),
])
def test_aborted_message_takes_the_words_the_abort_recorded(ms, recorded, said):
    from dataclasses import replace

    from acid_core.compaction.attempt import aborted_message

    entry = replace(ms.compactions.get(in_state(ms, S.ABORTED)), error_message=recorded, partition="ds=1")
    assert aborted_message(entry) == f"compaction {entry.id} of default.t partition ds=1 {said}"


def test_after_run_warns_when_the_launcher_failed_after_the_commit(ms):
    compaction_id = in_state(ms, S.READY_FOR_CLEANING)
    verdict = after_run(ms, compaction_id, worker_id="host-w1", launch_error="exit status 1")
    assert verdict.result is Result.COMPACTED
    assert verdict.warning == "spark-submit reported an error after the compaction committed: exit status 1"


def test_a_run_that_never_claimed_the_entry_is_recorded_failed(ms):
    compaction_id = in_state(ms, S.INITIATED)
    verdict = after_run(ms, compaction_id, worker_id="host-airflow.t", launch_error="no spark3-submit binary")
    assert verdict.result is Result.ERROR
    entry = ms.compactions.get(compaction_id)
    assert (entry.state, entry.worker_id) == (S.FAILED, "host-airflow.t")
    assert entry.error_message == "spark-submit did not start the compaction: no spark3-submit binary"
    assert verdict.message == f"compaction {compaction_id} of default.t failed: {entry.error_message}"


def test_after_run_of_a_compaction_that_is_gone(ms):
    assert after_run(ms, 4242, worker_id=None).message == "compaction 4242 does not exist (any more)"


# --- acid compact run follows the same rules --------------------------------------------------------------------------

def _no_spark_submit(*args, **kwargs):
    raise AssertionError("spark-submit must not be started")


def test_cli_reports_nothing_to_do_without_starting_spark(ms, capsys, monkeypatch):
    monkeypatch.setattr(compact_command, "spark_submit", _no_spark_submit)
    compaction_id = in_state(ms, S.READY_FOR_CLEANING)
    before = ms.compactions.get(compaction_id)
    assert compact_command.run(compaction_id, metastore=ms.url) == 0
    out, err = capsys.readouterr()
    assert out == f"compaction {compaction_id}: nothing to do: compaction {compaction_id} already finished " \
                  "(ready for cleaning); nothing changed\n" and err == ""
    assert ms.compactions.get(compaction_id) == before


@pytest.mark.parametrize("state, problem", [
    (S.WORKING, "is working on host-w1; not run twice"), (S.REFUSED, "of default.t is refused"),
    (S.FAILED, "of default.t is failed: OSError: disk full"), (None, "compaction 4242 does not exist"),
    (S.ABORTED, "of default.t aborted by Abort Comapction request"),
])
def test_cli_refuses_what_may_not_run_without_starting_spark(ms, capsys, monkeypatch, state, problem):
    monkeypatch.setattr(compact_command, "spark_submit", _no_spark_submit)
    compaction_id = in_state(ms, state) if state is not None else 4242
    assert compact_command.run(compaction_id, metastore=ms.url) == 1
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("acid compact: error: ") and problem in err


def test_cli_records_a_spark_submit_that_cannot_start_as_failed_like_airflow(ms, capsys, monkeypatch):
    def missing(*args, **kwargs):
        raise UsageError("spark-submit was not found: install pyspark")

    monkeypatch.setattr(compact_command, "spark_submit", missing)
    compaction_id = in_state(ms, S.INITIATED)
    assert compact_command.run(compaction_id, metastore=ms.url) == 1
    entry = ms.compactions.get(compaction_id)
    assert entry.state is S.FAILED
    assert entry.error_message == ("spark-submit did not start the compaction: cannot start spark-submit: "
                                   "spark-submit was not found: install pyspark")
    assert f"acid compact: error: compaction {compaction_id} of default.t failed: spark-submit did not start" in \
        capsys.readouterr().err
