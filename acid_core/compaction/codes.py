"""Compaction types and queue states: Hive's one-letter codes (COMPACTION_QUEUE.CQ_TYPE / CQ_STATE) and the words
SHOW COMPACTIONS prints for them. The one definition every layer uses (the queue, the worker, `acid sql`, the DAGs).

Imports nothing heavy, so DAG files may use it at parse time.
"""

from __future__ import annotations

import enum

from acid_core.errors import MetastoreError


class CompactionType(str, enum.Enum):
    MAJOR = "a"
    MINOR = "i"
    REBALANCE = "r"
    ABORT_TXN_CLEANUP = "c"

    @classmethod
    def parse(cls, text: str) -> "CompactionType":
        """`major` / `minor` (any case), as ALTER TABLE ... COMPACT takes them."""
        try:
            return REQUESTABLE_TYPES[text.strip().lower()]
        except KeyError:
            raise MetastoreError(f"compaction type {text!r} is not 'major' or 'minor'") from None

    @property
    def display(self) -> str:
        return {"a": "MAJOR", "i": "MINOR", "r": "REBALANCE", "c": "ABORT_TXN_CLEANUP"}[self.value]


# The types a request may name (ALTER TABLE ... COMPACT 'major'|'minor', the acid_compact DAG), by their word.
REQUESTABLE_TYPES = {"major": CompactionType.MAJOR, "minor": CompactionType.MINOR}


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
    def parse(cls, text: str) -> "CompactionState":
        for state in cls:
            if text.strip().lower() in (state.display, state.name.lower()):
                return state
        raise MetastoreError(f"compaction state {text!r} is not one of {[s.display for s in cls]}")


# Entries in COMPACTION_QUEUE; the other states are history (COMPLETED_COMPACTIONS).
QUEUE_STATES = (CompactionState.INITIATED, CompactionState.WORKING, CompactionState.READY_FOR_CLEANING)
# Not compacted yet: ALTER TABLE ... COMPACT ... AND WAIT waits while the entry is in one (Hive's DDLTask).
PENDING_STATES = (CompactionState.INITIATED, CompactionState.WORKING)
