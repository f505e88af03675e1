"""Shared by the Airflow tests: reading a `dag.test()` run's task states, XComs and asset events, writing rows and
listing table directories.

Imported as `support.<module>` (tests/support/__init__.py).
"""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

from support.committed_writes import insert  # noqa: F401  (re-exported to the tests)

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
    """The visible entries of a table or partition directory (local or on S3), sorted."""
    from acid_core.storage.fs import FileSystem

    fs, path = FileSystem.resolve(str(location))
    return sorted(e.name for e in fs.list_dir(path, missing_ok=True) if not e.name.startswith((".", "_")))


def asset_events(name: str) -> int:
    """How many events asset `name` has had (in this test session's Airflow database)."""
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session

    with create_session() as session:
        return session.query(AssetEvent).join(AssetModel, AssetEvent.asset_id == AssetModel.id).filter(
            AssetModel.name == name).count()


class SparkSubmitRecord:
    """What a recording `spark3-submit` saw: one JSON line per command, its arguments and its environment."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def exists(self) -> bool:
        return self.path.exists()

    def commands(self) -> list[dict]:
        return [json.loads(line) for line in self.path.read_text().splitlines()] if self.path.exists() else []

    @property
    def argv(self) -> list[str]:
        """The last command's arguments."""
        return self.commands()[-1]["argv"]

    @property
    def env(self) -> dict[str, str]:
        """The last command's environment."""
        return self.commands()[-1]["env"]

    def confs(self) -> dict[str, str]:
        """The last command's `--conf`s."""
        argv = self.argv
        return dict(argv[i + 1].split("=", 1) for i, arg in enumerate(argv) if arg == "--conf")


def install_recording_spark_submit(directory: Path, monkeypatch) -> SparkSubmitRecord:
    """A real `spark3-submit` first on PATH that records each command and starts nothing (so a compaction's entry is
    never claimed and its task fails, as a job that died before its driver ran); `spark_default` names it."""
    bin_dir = directory / "bin"
    bin_dir.mkdir()
    record = directory / "spark-submit.jsonl"
    script = bin_dir / "spark3-submit"
    script.write_text(f"#!{sys.executable}\nimport json, os, sys\n"
                      f"open({str(record)!r}, 'a').write(json.dumps({{'argv': sys.argv[1:], 'env': dict(os.environ)}})"
                      " + '\\n')\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps(
        {"conn_type": "spark", "host": "local[2]", "extra": {"spark-binary": "spark3-submit"}}))
    return SparkSubmitRecord(record)
