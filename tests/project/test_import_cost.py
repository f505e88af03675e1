"""What a process pays at start-up for the modules every `acid` command, Airflow task and Spark Python worker imports:
pandas (about 0.35 s, pulled in by pyarrow.dataset) is imported only by the code that needs it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


@pytest.mark.parametrize("module", ["acid_cli.main", "acid_core.metastore", "acid_core.read.merge",
                                    "acid_core.compaction.worker", "spark_jobs.datasource"])
def test_importing_it_leaves_pandas_and_pyarrow_dataset_out(module):
    probe = f"import json, sys, {module}; print(json.dumps([m for m in ('pandas', 'pyarrow.dataset') if m in sys.modules]))"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(result.stdout.splitlines()[-1]) == [], f"importing {module} imports them"


@pytest.mark.parametrize("module", ["acid_core.compaction.execute", "acid_core.compaction.plan",
                                    "acid_core.metastore.codes"])
def test_what_a_compaction_task_unpickles_leaves_sqlalchemy_out(module):
    """A compaction task's function refers to `run_bucket` and its plan (spark_jobs/compact.py): the executor's Python
    worker imports these modules, not the metastore's stores (SQLAlchemy and the stores cost about 0.2 s a process)."""
    probe = f"import json, sys, {module}; print(json.dumps([m for m in ('sqlalchemy', 'acid_core.metastore.store') if m in sys.modules]))"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(result.stdout.splitlines()[-1]) == [], f"importing {module} imports them"
