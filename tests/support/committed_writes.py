"""One committed write into a test table, as a real writer makes it (transaction, write id, components, a delta):
shared by the Airflow and the ACID view tests. Imported as `support.committed_writes`."""

from __future__ import annotations


def insert(ms, table: str, ds: str | None, rows: list[tuple]) -> int:
    """One committed transaction writing `rows` as a delta of `default.<table>` (partition `ds=<ds>` when given);
    returns its transaction id."""
    from acid_core.metastore.txns import Operation
    from acid_core.writer import EmbeddedWriter

    info = ms.catalog.get_table("default", table)
    partition = {"ds": ds} if ds is not None else None
    name = ms.catalog.add_partition("default", table, partition).name if ds is not None else None
    txn_id = ms.txns.open_txn()
    write_id = ms.txns.allocate_write_ids([txn_id], "default", table)[txn_id]
    ms.txns.add_components(txn_id, "default", table, [name], Operation.INSERT)
    EmbeddedWriter(info.location, columns=info.columns, partition_keys=["ds"] if ds is not None else []).insert(
        rows, write_id=write_id, partition=partition)
    ms.txns.commit(txn_id)
    return txn_id
