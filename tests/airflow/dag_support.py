"""Shared by the Airflow tests: reading a `dag.test()` run's task states and XComs, and listing table directories.

Imported as a top-level module (pytest puts `tests/airflow` on `sys.path`, as for `tests/spark/compaction_support.py`).
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COLUMNS = (("id", "int"), ("name", "string"))


def returned(dag_run, task_id: str, *, key: str = "return_value"):
    """The XCom `key` of an unmapped task in `dag_run` (its return value by default)."""
    [value] = returned_all(dag_run, task_id, key=key)
    return value


def returned_all(dag_run, task_id: str, *, key: str = "return_value") -> list:
    """The XCom `key` of every instance of a (mapped) task in `dag_run`, in map-index order."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        query = XComModel.get_many(run_id=dag_run.run_id, key=key, dag_ids=dag_run.dag_id, task_ids=task_id)
        rows = session.execute(query.with_only_columns(XComModel.map_index, XComModel.value)).all()
        return [XComModel.deserialize_value(row) for row in sorted(rows, key=lambda row: row.map_index)]


def task_states(dag_run) -> dict[str, str]:
    """`task_id` (with `[map index]` for mapped instances) -> state."""
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session

    with create_session() as session:
        tis = session.query(TaskInstance).filter(TaskInstance.dag_id == dag_run.dag_id,
                                                 TaskInstance.run_id == dag_run.run_id).all()
        return {(ti.task_id if ti.map_index < 0 else f"{ti.task_id}[{ti.map_index}]"): ti.state for ti in tis}


def dirs(location: Path | str) -> list[str]:
    """The visible entries of a table or partition directory, sorted."""
    return sorted(p.name for p in Path(location).iterdir() if not p.name.startswith((".", "_")))
