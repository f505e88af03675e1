"""How a compaction queue or history row maps to a `CompactionInfo` and back (COMPACTION_QUEUE's `CQ_*` and
COMPLETED_COMPACTIONS' `CC_*` columns, the same suffixes in both)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from acid_core.metastore.codes import CompactionState, CompactionType


@dataclass(frozen=True, slots=True)
class CompactionInfo:
    """A queue or history entry (history entries have `end_ms`)."""

    id: int
    database: str
    table: str
    partition: str | None
    state: CompactionState
    type: CompactionType
    properties: str | None
    worker_id: str | None
    enqueue_ms: int | None
    start_ms: int | None
    end_ms: int | None
    run_as: str | None
    highest_write_id: int | None
    hadoop_job_id: str | None
    error_message: str | None
    next_txn_id: int | None
    txn_id: int | None
    commit_ms: int | None
    initiator_id: str | None
    initiator_version: str | None
    worker_version: str | None
    pool_name: str | None
    number_of_buckets: int | None
    order_by: str | None
    cleaner_start_ms: int | None = None
    retry_retention_ms: int = 0

    @property
    def full_table_name(self) -> str:
        return f"{self.database}.{self.table}"


_NAMES = [f.name for f in fields(CompactionInfo)]
_SUFFIXES = ["ID", "DATABASE", "TABLE", "PARTITION", "STATE", "TYPE", "TBLPROPERTIES", "WORKER_ID", "ENQUEUE_TIME",
             "START", "END", "RUN_AS", "HIGHEST_WRITE_ID", "HADOOP_JOB_ID", "ERROR_MESSAGE", "NEXT_TXN_ID", "TXN_ID",
             "COMMIT_TIME", "INITIATOR_ID", "INITIATOR_VERSION", "WORKER_VERSION", "POOL_NAME", "NUMBER_OF_BUCKETS",
             "ORDER_BY"]


def info_from_queue(row) -> CompactionInfo:
    values = {name: (None if suffix == "END" else row._mapping[f"CQ_{suffix}"]) for name, suffix in zip(_NAMES, _SUFFIXES)}
    values.update(cleaner_start_ms=row.CQ_CLEANER_START, retry_retention_ms=row.CQ_RETRY_RETENTION or 0)
    return typed_info(values)


def info_from_history(row) -> CompactionInfo:
    return typed_info({name: row._mapping[f"CC_{suffix}"] for name, suffix in zip(_NAMES, _SUFFIXES)})


def typed_info(values: dict[str, Any]) -> CompactionInfo:
    values["state"] = CompactionState(values["state"])
    values["type"] = CompactionType(values["type"])
    return CompactionInfo(**values)


def history_values(info: CompactionInfo, state: CompactionState, end_ms: int,
                   message: str | None) -> dict[str, Any]:
    values = {f"CC_{suffix}": getattr(info, name) for name, suffix in zip(_NAMES, _SUFFIXES)}
    values.update(CC_STATE=state.value, CC_TYPE=info.type.value, CC_END=end_ms)
    if message is not None:
        values["CC_ERROR_MESSAGE"] = message
    return values


__all__ = ["CompactionInfo", "history_values", "info_from_history", "info_from_queue"]
