"""One committed write into a test table, as a real writer makes it (transaction, write id, components, a delta):
shared by the Airflow and the ACID view tests. Imported as `support.committed_writes`."""

from __future__ import annotations


def insert(ms, table: str, ds: str | None, rows: list[tuple]) -> int:
    """One committed transaction writing `rows` as a delta of `default.<table>` (partition `ds=<ds>` when given);
    returns its transaction id."""
    from acid_core.write.table import AcidTable

    partition = {"ds": ds} if ds is not None else None
    with AcidTable.load(ms, "default", table).new_write(agent_info="test write", partition=partition) as write:
        write.insert(rows, partition=partition)
    return write.txn_id
