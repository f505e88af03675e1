"""A model of a table's changes, as the writes made them: what the change-feed tests (tests/acid_core/test_changes.py,
tests/spark_jobs/test_datasource_changes.py) compare the feed with. Imported as `support.change_model`.
"""

from __future__ import annotations

import collections

from support.read_tables import Table, expected_rows


class ChangeModel:
    """Each committed write id's changes, as the writes made them (ROW__IDs read back from the table)."""

    def __init__(self, ms, table: Table) -> None:
        self.ms, self.table = ms, table
        self.by_write: dict[int, list[tuple]] = collections.defaultdict(list)
        self.live: dict[int, tuple] = {}  # id -> (row__id, name)
        self.next_id = 0

    def _row_ids(self) -> dict[int, tuple]:
        return {r["id"]: (tuple(r["row__id"].values()), r["name"])
                for r in expected_rows(self.ms, self.table.info.name)}

    def insert(self, count: int, outcome: str = "commit") -> None:
        ids = list(range(self.next_id, self.next_id + count))
        self.next_id += count
        write_id = self.table.insert([(i, f"v{i}", 1.0) for i in ids], outcome=outcome)
        if outcome == "commit":
            now = self._row_ids()
            for i in ids:
                self.live[i] = now[i]
                self.by_write[write_id].append((write_id, "insert", now[i][0], i, now[i][1]))

    def delete(self, ids: list[int]) -> None:
        write_id = self.table.delete(ids)
        for i in ids:
            row_id, _ = self.live.pop(i)
            self.by_write[write_id].append((write_id, "delete", row_id, None, None))

    def update(self, ids: list[int]) -> None:
        write_id = self.table.update([(i, f"u{i}", 2.0) for i in ids])
        now = self._row_ids()
        for i in ids:
            old, _ = self.live[i]
            self.by_write[write_id] += [(write_id, "delete", old, None, None),
                                        (write_id, "insert", now[i][0], i, now[i][1])]
            self.live[i] = now[i]

    def between(self, after: int, upto: int) -> list[tuple]:
        return sorted(c for w, found in self.by_write.items() if after < w <= upto for c in found)
