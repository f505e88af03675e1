"""What one compaction reads and writes: the directory state under the compactor's snapshot, split per bucket.

Rules from Hive's Worker (hive-acid-reference.md section 7): enough to compact means MAJOR: original files, or more
than one of base + deltas; MINOR: more than one delta, and not just one delta with its delete delta. Output names are
`base_<hwm>_v<txn>` (major) or `delta_<min>_<hwm>_v<txn>` and `delete_delta_<min>_<hwm>_v<txn>` (minor, no statement
id). Results are built in hidden directories `.<name>.tmp-c<compaction id>` and renamed into place when complete.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from acid_core.compaction.codes import CompactionType
from acid_core.fs import FileSystem
from acid_core.layout import (VISIBILITY_PREFIX, base_dir_name, compaction_staging_name, delta_dir_name,
                              parse_directory)
from acid_core.merge import DeleteSource, InsertSource, file_bucket, plan_read, source_bucket
from acid_core.orc_columnar import DEFAULT_STRIPE_BYTES
from acid_core.orc_events import Column
from acid_core.state import DirectoryState
from acid_core.validity import ValidCompactorWriteIdList, ValidWriteIdList


@dataclass(frozen=True, slots=True)
class BucketWork:
    """The files of one bucket a compaction task reads."""

    bucket: int
    inserts: tuple[InsertSource, ...]
    deletes: tuple[DeleteSource, ...]


@dataclass(frozen=True, slots=True)
class CompactionPlan:
    """Everything a task needs (picklable: Spark ships it to executors)."""

    compaction_id: int
    kind: CompactionType
    location: str
    columns: tuple[Column, ...]
    write_ids: str
    compactor_txn_id: int
    outputs: tuple[tuple[str, str], ...]  # (final name, hidden temporary name)
    buckets: tuple[BucketWork, ...]
    compression: str = "ZLIB"
    stripe_bytes: int = DEFAULT_STRIPE_BYTES  # the table's orc.stripe.size: the output writer's buffer

    @property
    def compactor_write_ids(self) -> ValidCompactorWriteIdList:
        return ValidCompactorWriteIdList.parse(self.write_ids)

    def temp_dir(self, final_name: str) -> str:
        return FileSystem.join(self.location, dict(self.outputs)[final_name])


def temp_name(final_name: str, compaction_id: int) -> str:
    return compaction_staging_name(final_name, compaction_id)


def is_leftover_of(name: str, compaction_id: int) -> bool:
    """A hidden result directory left by an earlier attempt of this compaction."""
    return name.startswith(".") and name.endswith(compaction_staging_name("", compaction_id)[1:])


def is_output_of_attempt(name: str, compaction_id: int, txn_id: int) -> bool:
    """A result directory of the attempt of this compaction under compactor transaction `txn_id`: hidden
    (`.<name>_v<txn>.tmp-c<id>`) or already renamed (`<name>_v<txn>`). Every result name carries its attempt's
    transaction, so one attempt never takes away another's (a worker presumed dead may still be running)."""
    suffix = f"{VISIBILITY_PREFIX}{txn_id:07d}"
    if name.startswith("."):
        return name.endswith(compaction_staging_name(suffix, compaction_id)[1:])
    return name.endswith(suffix) and parse_directory(name) is not None


def enough_to_compact(state: DirectoryState, kind: CompactionType) -> bool:
    """Hive's Worker.isEnoughToCompact."""
    if kind is CompactionType.MAJOR:
        return bool(state.original_files) or len(state.deltas) + (1 if state.base else 0) > 1
    if len(state.deltas) < 2:
        return False
    if len(state.deltas) == 2:
        first, second = state.deltas
        return first.is_delete == second.is_delete
    return True


def output_names(state: DirectoryState, kind: CompactionType, write_ids: ValidWriteIdList, txn_id: int) -> list[str]:
    high = write_ids.high_watermark
    if kind is CompactionType.MAJOR:
        return [base_dir_name(high, visibility_txn_id=txn_id)]
    low = min(delta.min_write_id for delta in state.deltas)
    names = []
    if any(not delta.is_delete for delta in state.deltas):
        names.append(delta_dir_name(low, high, visibility_txn_id=txn_id))
    if any(delta.is_delete for delta in state.deltas):
        names.append(delta_dir_name(low, high, visibility_txn_id=txn_id, delete=True))
    return names


def build_plan(fs: FileSystem, state: DirectoryState, *, compaction_id: int, kind: CompactionType,
               columns: tuple[Column, ...], write_ids: ValidCompactorWriteIdList, txn_id: int,
               compression: str = "ZLIB", stripe_bytes: int = DEFAULT_STRIPE_BYTES) -> CompactionPlan:
    """Group the snapshot's files by bucket (the file name's bucket number, as Hive's compactor splits its work)."""
    if kind is CompactionType.MINOR:  # a minor compaction merges deltas only; the base and originals stay
        state = dataclasses.replace(state, base=None, original_files=())
    read = plan_read(fs, state, write_ids)
    buckets: dict[int, tuple[list, list]] = {}
    for source in read.inserts:
        buckets.setdefault(source_bucket(source), ([], []))[0].append(source)
    for source in read.deletes:
        buckets.setdefault(file_bucket(source.path), ([], []))[1].append(source)
    names = output_names(state, kind, write_ids, txn_id)
    return CompactionPlan(
        compaction_id=compaction_id, kind=kind, location=state.location, columns=columns, write_ids=str(write_ids),
        compactor_txn_id=txn_id, outputs=tuple((name, temp_name(name, compaction_id)) for name in names),
        buckets=tuple(BucketWork(b, tuple(i), tuple(d)) for b, (i, d) in sorted(buckets.items())),
        compression=compression, stripe_bytes=stripe_bytes)
