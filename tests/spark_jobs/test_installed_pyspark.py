"""Spark's Python processes import pyspark and py4j from the installed packages where Spark's zips are theirs
(`spark_jobs.installed_pyspark`): a real local Spark application's Python worker, a spark-submit'd driver, and the
rule on made-up layouts (a pip install, a Spark distribution, other versions)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from spark_jobs.installed_pyspark import without_spark_zips

VERSION = "0.10.9.9"


def _package(root: Path, name: str, version: str | None = None) -> Path:
    directory = root / name
    directory.mkdir(parents=True)
    (directory / "__init__.py").write_text("")
    if version is not None:
        (directory / "version.py").write_text(f"__version__ = '{version}'\n")
    return directory


def _pip_layout(tmp_path: Path, py4j_version: str = VERSION) -> tuple[list[str], list[str]]:
    """site-packages with pyspark (SPARK_HOME) and py4j, and the path Spark gives its Python processes."""
    site = tmp_path / "site-packages"
    pyspark = _package(site, "pyspark", "4.3.0")
    _package(site, "py4j", py4j_version)
    lib = pyspark / "python" / "lib"
    lib.mkdir(parents=True)
    zips = [str(lib / "pyspark.zip"), str(lib / f"py4j-{VERSION}-src.zip")]
    for entry in zips:
        Path(entry).write_bytes(b"")
    return [str(tmp_path / "job"), *zips, str(site)], zips


def test_the_zips_of_the_installed_packages_are_taken_off_the_path(tmp_path):
    path, zips = _pip_layout(tmp_path)
    assert without_spark_zips(path, {}) == [entry for entry in path if entry not in zips]


def test_a_py4j_of_another_release_keeps_both_zips(tmp_path):
    path, _ = _pip_layout(tmp_path, py4j_version="0.10.9.7")
    assert without_spark_zips(path, {}) == path


def test_a_spark_distribution_of_its_own_keeps_its_zips(tmp_path):
    """SPARK_HOME=/opt/spark with a pyspark installed elsewhere: Spark's zip is the one that fits its JVM."""
    path, _ = _pip_layout(tmp_path / "pip")
    lib = tmp_path / "opt" / "spark" / "python" / "lib"
    lib.mkdir(parents=True)
    spark_zips = [str(lib / "pyspark.zip"), str(lib / f"py4j-{VERSION}-src.zip")]
    for entry in spark_zips:
        Path(entry).write_bytes(b"")
    distribution = [path[0], *spark_zips, path[-1]]
    assert without_spark_zips(distribution, {}) == distribution


def test_nothing_installed_or_already_imported_leaves_the_path(tmp_path):
    path, _ = _pip_layout(tmp_path)
    assert without_spark_zips(path, {"pyspark": object()}) == path
    assert without_spark_zips(path[:-1], {}) == path[:-1]  # site-packages not on the path: no installed pyspark
    assert without_spark_zips([str(tmp_path)], {}) == [str(tmp_path)]


@pytest.mark.spark
def test_a_local_python_worker_runs_the_projects_daemon_and_the_installed_pyspark(spark):
    def where(_):
        import os
        import sys

        import py4j
        import pyspark
        with open(f"/proc/{os.getppid()}/cmdline", "rb") as daemon:
            parent = daemon.read().replace(b"\0", b" ").decode()
        yield {"pyspark": pyspark.__file__, "py4j": py4j.__file__, "daemon": parent,
               "zips": [entry for entry in sys.path if entry.endswith(".zip")]}

    [worker] = spark.sparkContext.parallelize([0], 1).mapPartitions(where).collect()
    import py4j
    import pyspark

    assert "-m spark_jobs.python_daemon" in worker["daemon"], worker
    assert worker["pyspark"] == pyspark.__file__ and worker["py4j"] == py4j.__file__, worker
    assert not any(entry.endswith(("pyspark.zip", "-src.zip")) for entry in worker["zips"]), worker


@pytest.mark.spark
def test_a_spark_submitted_driver_imports_the_installed_pyspark(tmp_path):
    """spark-submit puts Spark's zips first on its driver's path; importing spark_jobs takes them off."""
    job = tmp_path / "job.py"
    job.write_text("import json, sys\nzips = lambda: [e for e in sys.path if e.endswith(('pyspark.zip', '-src.zip'))]\n"
                   "before = zips()\nimport spark_jobs\nimport pyspark\n"
                   "print(json.dumps({'before': before, 'pyspark': pyspark.__file__, 'after': zips()}))\n")
    spark_submit = Path(sys.executable).parent / "spark-submit"
    environment = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
                       SPARK_LOCAL_IP="127.0.0.1")
    done = subprocess.run([str(spark_submit), "--master", "local[1]", str(job)], env=environment, cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    import pyspark

    assert any(entry.endswith("pyspark.zip") for entry in seen["before"]), seen  # what Spark gives its drivers
    assert seen["after"] == [] and seen["pyspark"] == pyspark.__file__, seen
