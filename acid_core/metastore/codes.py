"""Compaction types and queue states: Hive's one-letter codes (COMPACTION_QUEUE.CQ_TYPE / CQ_STATE) and the words
SHOW COMPACTIONS prints for them. The one definition every layer uses (the queue, the worker, `acid sql`, the DAGs).

Imports nothing heavy, so DAG files may use it at parse time.
"""

from __future__ import annotations

import enum

from acid_core.errors import MetastoreError, UsageError


class CompactionType(str, enum.Enum):
    MAJOR = "a"
    MINOR = "i"
    REBALANCE = "r"
    ABORT_TXN_CLEANUP = "c"

    @classmethod
    def parse(cls, text: str) -> CompactionType:
        """`major` / `minor` / `rebalance` (any case), as ALTER TABLE ... COMPACT takes them."""
        try:
            return REQUESTABLE_TYPES[text.strip().lower()]
        except KeyError:
            raise MetastoreError(f"compaction type {text!r} is not 'major', 'minor' or 'rebalance'") from None

    @property
    def display(self) -> str:
        return {"a": "MAJOR", "i": "MINOR", "r": "REBALANCE", "c": "ABORT_TXN_CLEANUP"}[self.value]


# The types a request may name (ALTER TABLE ... COMPACT 'major'|'minor'|'rebalance', the acid_compact DAG), by word.
REQUESTABLE_TYPES = {"major": CompactionType.MAJOR, "minor": CompactionType.MINOR,
                     "rebalance": CompactionType.REBALANCE}
# CLUSTERED INTO n BUCKETS of a rebalance: Hive's bucket id limit (BucketCodec V1 holds 0..4095).
MAX_REBALANCE_BUCKETS = 4096
REBALANCE_BUCKETED_MESSAGE = "Cannot execute rebalancing compaction on bucketed tables."  # Hive's text


def check_number_of_buckets(kind: CompactionType, number: int | None) -> None:
    """A request's CLUSTERED INTO n BUCKETS: a rebalance's only, 1..4096.

    Raises:
        UsageError: given for a major or minor compaction, or out of range.
    """
    if number is None:
        return
    if kind is not CompactionType.REBALANCE:
        raise UsageError(f"CLUSTERED INTO {number} BUCKETS applies to a 'rebalance' compaction only, not "
                         f"'{kind.display.lower()}'")
    if isinstance(number, bool) or not isinstance(number, int) or not 1 <= number <= MAX_REBALANCE_BUCKETS:
        raise UsageError(f"number of buckets of a rebalance compaction must be a whole number in "
                         f"1..{MAX_REBALANCE_BUCKETS}, got {number!r}")


class CompactionState(str, enum.Enum):
    INITIATED = "i"
    WORKING = "w"
    READY_FOR_CLEANING = "r"
    FAILED = "f"
    SUCCEEDED = "s"
    DID_NOT_INITIATE = "a"
    REFUSED = "c"
    ABORTED = "x"

    @property
    def display(self) -> str:
        return {"i": "initiated", "w": "working", "r": "ready for cleaning", "f": "failed", "s": "succeeded",
                "a": "did not initiate", "c": "refused", "x": "aborted"}[self.value]

    @classmethod
    def parse(cls, text: str) -> CompactionState:
        for state in cls:
            if text.strip().lower() in (state.display, state.name.lower()):
                return state
        raise MetastoreError(f"compaction state {text!r} is not one of {[s.display for s in cls]}")


# Entries in COMPACTION_QUEUE; the other states are history (COMPLETED_COMPACTIONS).
QUEUE_STATES = (CompactionState.INITIATED, CompactionState.WORKING, CompactionState.READY_FOR_CLEANING)
# Not compacted yet: ALTER TABLE ... COMPACT ... AND WAIT waits while the entry is in one (Hive's DDLTask).
PENDING_STATES = (CompactionState.INITIATED, CompactionState.WORKING)
