"""An independent, deliberately simple model of an ACID table, to check merge-on-read against.

The model knows nothing of files, directories, stripes or delete registries: it is a dict ROW__ID -> row plus, per
ROW__ID, the write ids that deleted it. A row is visible under a snapshot when the write id that inserted it is valid
and no valid write id deleted it (hive-acid-reference.md section 5). ROW__IDs are plain tuples
(writeId, bucketProperty, rowId) and the BucketCodec V1 formula is spelled out again here on purpose, so a mistake in
acid_core.format.rowid cannot hide itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

LONG_MAX = 2**63 - 1
ModelRowId = tuple[int, int, int]


def v1_bucket_property(bucket: int, statement: int = 0) -> int:
    """BucketCodec V1 written out from the reference: 001 version bits, bucket in 27..16, statement in 11..0."""
    assert 0 <= bucket <= 4095 and 0 <= statement <= 4095
    return (1 << 29) | (bucket << 16) | statement


@dataclass(frozen=True)
class Snapshot:
    """Which write ids a reader sees: at or below the high watermark and neither open nor aborted."""

    high_watermark: int
    open: frozenset[int] = frozenset()
    aborted: frozenset[int] = frozenset()

    def sees(self, write_id: int) -> bool:
        return write_id <= self.high_watermark and write_id not in self.open and write_id not in self.aborted

    def hive_string(self, table: str = "default.t") -> str:
        """Hive's ValidWriteIdList string `<db.table>:<hwm>:<minOpen>:<open>:<aborted>`."""
        min_open = min(self.open) if self.open else LONG_MAX
        return (f"{table}:{self.high_watermark}:{min_open}:{','.join(map(str, sorted(self.open)))}:"
                f"{','.join(map(str, sorted(self.aborted)))}")


@dataclass
class TableModel:
    """Rows by ROW__ID and who deleted them; ROW__IDs assigned as Hive's writers do (per bucket, per statement)."""

    bucket_of: Callable[[tuple], int] = lambda row: 0
    rows: dict[ModelRowId, tuple] = field(default_factory=dict)
    deleted_by: dict[ModelRowId, set[int]] = field(default_factory=dict)

    def insert(self, rows: Iterable[Sequence], *, write_id: int, statement: int = 0) -> list[ModelRowId]:
        """Rows of one statement get rowIds 0, 1, 2... per bucket, in the order given."""
        next_row: dict[int, int] = {}
        assigned = []
        for row in rows:
            row = tuple(row)
            bucket = self.bucket_of(row)
            row_id = (write_id, v1_bucket_property(bucket, statement), next_row.get(bucket, 0))
            next_row[bucket] = row_id[2] + 1
            assert row_id not in self.rows, f"model: {row_id} inserted twice"
            self.rows[row_id] = row
            assigned.append(row_id)
        return assigned

    def add_original_files(self, files_per_bucket: dict[int, list[list[tuple]]]) -> list[ModelRowId]:
        """Pre-ACID files: write id 0, rowIds running across the files of one bucket in the order given."""
        assigned = []
        for bucket, files in files_per_bucket.items():
            row_number = 0
            for rows in files:
                for row in rows:
                    row_id = (0, v1_bucket_property(bucket), row_number)
                    self.rows[row_id] = tuple(row)
                    assigned.append(row_id)
                    row_number += 1
        return assigned

    def delete(self, row_ids: Iterable[ModelRowId], *, write_id: int) -> None:
        for row_id in row_ids:
            self.deleted_by.setdefault(tuple(row_id), set()).add(write_id)

    def update(self, row_ids: Sequence[ModelRowId], new_rows: Sequence[Sequence], *, write_id: int,
               statement: int = 0) -> list[ModelRowId]:
        """Split-update: the old ROW__IDs are deleted and the new rows inserted with new ROW__IDs."""
        self.delete(row_ids, write_id=write_id)
        return self.insert(new_rows, write_id=write_id, statement=statement)

    def visible(self, snapshot: Snapshot | None = None) -> dict[ModelRowId, tuple]:
        """The rows a reader with `snapshot` sees (None: every write id committed)."""
        sees = (lambda write_id: True) if snapshot is None else snapshot.sees
        return {row_id: row for row_id, row in self.rows.items()
                if sees(row_id[0]) and not any(sees(w) for w in self.deleted_by.get(row_id, ()))}


def table_by_row_id(table: pa.Table) -> dict[ModelRowId, tuple]:
    """A read result with a `row__id` column as {(writeid, bucketid, rowid): (column values...)}; ids must be unique."""
    result = {}
    data_names = [name for name in table.column_names if name != "row__id"]
    for record in table.to_pylist():
        row_id = record["row__id"]
        key = (row_id["writeid"], row_id["bucketid"], row_id["rowid"])
        assert key not in result, f"row__id {key} appears twice in the read result"
        result[key] = tuple(record[name] for name in data_names)
    return result


def table_rows(table: pa.Table) -> list[tuple]:
    """Data rows of a read result (no row__id), sorted, for order-insensitive comparison."""
    names = [name for name in table.column_names if name != "row__id"]
    return sorted((tuple(record[name] for name in names) for record in table.to_pylist()), key=repr)


def tree(root) -> list[tuple[str, int | None]]:
    """Every path under `root` (hidden ones too) with its size, None for directories: to prove nothing changed."""
    root = Path(root)
    return sorted((str(path.relative_to(root)), None if path.is_dir() else path.stat().st_size)
                  for path in root.rglob("*"))
