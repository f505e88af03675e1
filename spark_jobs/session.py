"""The one place that builds a SparkSession for this project's jobs and tests.

Defaults: no web UI, shuffle tasks sized by their data (adaptive execution), Arrow for Python data exchange, the
Python workers' memory capped (2g), a UTC session time zone and WARN logging; the `hiveacid` data source
(`spark_jobs.datasource`) registered, with the filter pushdown it prunes partitions by turned on. The master is the argument, else
`ACID_SPARK_MASTER`, else `local[*]`. With a local master the executors run this interpreter (`sys.executable` unless
PYSPARK_PYTHON names another) with this repository on their PYTHONPATH. With a cluster master (Spark standalone,
YARN, Kubernetes) the driver is this process and the executors get what they need from `acid_deploy.shipping`, as
`ACID_EXECUTOR_ENV` and its sibling variables choose: by default the code of `acid_core` and `spark_jobs` as a zip
and a packed Python environment (built once, cached), so their nodes need nothing but Spark and a plain Python of
this version; or a prebuilt archive, a Python installed on the nodes, a Kubernetes image. Under spark-submit
(`spark_jobs/compact.py`), spark-submit's own settings, which the caller made the same way, are used as they are.
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Mapping
from pathlib import Path

import pyspark
from pyspark.sql import SparkSession

from acid_core.errors import AcidError
from acid_core.metastore.properties import PYSPARK_MEMORY_CONF
from acid_deploy.job_conf import DEFAULT_PYSPARK_MEMORY, local_driver_environment, local_python_conf
from acid_deploy.shipping import combine_conf, executor_conf, is_local_master, options_from_env
from spark_jobs.datasource import HiveAcidDataSource

MASTER_ENV = "ACID_SPARK_MASTER"
DEFAULT_MASTER = "local[*]"
REPOSITORY_ROOT = str(Path(__file__).resolve().parent.parent)
FILTER_PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"
SQL_PYTHON_CONF = "spark.sql.execution.pyspark.python"  # the executors' Python of Arrow-based Python tasks
DEFAULT_CONF: Mapping[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    # Shuffles (bucketed writes, deletes, merges) get as many tasks as their data needs: adaptive execution
    # coalesces the 200 initial partitions to about 64 MiB each, not to a fixed count.
    "spark.sql.adaptive.enabled": "true",
    "spark.sql.adaptive.coalescePartitions.enabled": "true",
    "spark.sql.adaptive.coalescePartitions.parallelismFirst": "false",
    "spark.sql.adaptive.advisoryPartitionSizeInBytes": "64m",
    # ... and so does a shuffle whose result is cached (UPDATE's and MERGE's matched rows, written by two or three
    # statements): without this a cached plan keeps the 200 partitions, and each statement ran 200 Python tasks,
    # nearly all empty (a three-row MERGE took 44 s on local[2]; 5 s with it).
    "spark.sql.optimizer.canChangeCachedPlanOutputPartitioning": "true",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.session.timeZone": "UTC",
    # pyarrow allocates with glibc's malloc in the Python workers: mimalloc (pyarrow's default) reserves address space
    # far beyond what it uses, so a worker capped by spark.executor.pyspark.memory (an address-space limit) failed an
    # 8M-row compaction at 1.5 GiB while its RSS peaked near 0.5 GiB; jemalloc keeps freed pages, so a streamed
    # compaction's peak grew with the partition (Hive-shaped, 1M to 32M base rows); malloc gives them back.
    "spark.executorEnv.ARROW_DEFAULT_MEMORY_POOL": "system",
    # glibc gives every new thread (pyarrow's I/O pool, a streamed ORC read, an encoding thread) an arena of 64 MiB
    # of address space: two threads' arenas made a capped worker's 7 MB allocation fail. Two arenas in all, as
    # Hadoop caps them for its containers.
    "spark.executorEnv.MALLOC_ARENA_MAX": "2",
    # Every Python worker is capped (Spark enforces it as an address-space limit): reads, writes and compactions
    # stream a stripe or a batch at a time, so a partition of any size fits; a job may ask for more (conf=...).
    PYSPARK_MEMORY_CONF: DEFAULT_PYSPARK_MEMORY,
    # The `hiveacid` data source prunes partitions from the filters Spark pushes to it (DataSourceReader.pushFilters);
    # Spark 4.3 refuses to read from a Python data source with pushFilters unless this is on.
    FILTER_PUSHDOWN_CONF: "true",
}


# pyspark 4.3 warns once per process, from pyspark.testing.utils (imported by its py4j converters when the first
# SparkConf is made) and again on pandas/Arrow UDFs, that it "does not yet fully support pandas >= 3.0.0": the
# driver's stderr, so every compaction task log, carried it with its full path. The jobs use pandas only through
# Arrow record batches; any other FutureWarning, from pyspark or elsewhere, still shows.
warnings.filterwarnings("ignore", message=r"PySpark does not yet fully support pandas >= 3\.0\.0",
                        category=FutureWarning, module=r"pyspark\.")


# The driver's S3 settings, handed to executors as spark.executorEnv.* in this process (never on a command line; Spark's
# UI redacts the secret key and the token by its default spark.redaction.regex). Executors without them use the AWS
# chain of their nodes (instance or pod role).
OBJECT_STORE_ENV = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION",
                    "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3")


def object_store_conf() -> dict[str, str]:
    """`spark.executorEnv.<name>` for each of OBJECT_STORE_ENV set in this process's environment."""
    return {f"spark.executorEnv.{name}": os.environ[name] for name in OBJECT_STORE_ENV if os.environ.get(name)}


class SparkSetupError(AcidError):
    """The Spark installation cannot run this project's jobs (for example pyspark's Python and JVM parts differ)."""


def resolve_master(master: str | None = None) -> str:
    """The master URL: the argument, else `ACID_SPARK_MASTER`, else `local[*]`."""
    return master or os.environ.get(MASTER_ENV) or DEFAULT_MASTER


def session_conf(master: str, conf: Mapping[str, object] | None = None, *,
                 shipped: Mapping[str, str] | None = None) -> dict[str, str]:
    """Every setting `build_session` applies: the defaults, then (local masters only) this repository on the Python
    workers' PYTHONPATH and their daemon (`acid_deploy.job_conf.local_python_conf`), then `conf`, which wins (e.g.
    `{"spark.ui.enabled": "true"}` to get the UI back), then `shipped` (`acid_deploy.shipping.executor_conf` of a
    cluster master: code zip and archives joined to any in `conf`, the executors' Python)."""
    settings = dict(DEFAULT_CONF)
    if is_local_master(master):  # Spark adds its own entries and the driver's $PYTHONPATH to this
        settings["spark.executorEnv.PYTHONPATH"] = REPOSITORY_ROOT
        settings.update(local_python_conf(master))
    settings.update({str(key): str(value).lower() if isinstance(value, bool) else str(value)
                     for key, value in (conf or {}).items()})
    return combine_conf(settings, shipped or {})


def build_session(app_name: str, *, master: str | None = None, conf: Mapping[str, object] | None = None,
                  data_source: bool = True) -> SparkSession:
    """A SparkSession named `app_name` on `resolve_master(master)` with `session_conf` applied, logging at WARN, the
    `hiveacid` data source registered unless `data_source` is False.

    Registering costs an application a Python process that Spark starts first to look up the data sources installed
    in Python (1-1.7 s of CPU and of a compaction's wall time on two cores): jobs that never name a data source,
    such as a compaction, which reads and writes its files itself, leave it out.

    If a session already runs in this process, Spark returns it (its master and static settings stay as they were).

    Raises:
        SparkSetupError: pyspark's Python files and its JVM jars are different Spark versions (another package, such
            as pyspark-client, overwrote pyspark's Python files), which breaks every Python function run on Spark.
        ShippingError: a cluster master, and the `ACID_EXECUTOR_*` settings are wrong or the executors' code or
            environment cannot be built.
    """
    if master is None and not os.environ.get(MASTER_ENV) and os.environ.get("PYSPARK_GATEWAY_PORT"):
        # Launched by spark-submit: its --master (and --conf) already configured the JVM; do not override them.
        builder = SparkSession.builder.appName(app_name)
        for key, value in {FILTER_PUSHDOWN_CONF: "true", **object_store_conf(), **(conf or {})}.items():
            builder = builder.config(str(key), str(value))
        session = builder.getOrCreate()
        session.sparkContext.setLogLevel("WARN")
        check_pyspark_versions(session)
        if data_source:
            register_data_source(session)
        return session
    resolved = resolve_master(master)
    for name, value in local_driver_environment(resolved, os.environ).items():  # before the JVM starts
        os.environ.setdefault(name, value)
    shipped = executor_conf(resolved, options_from_env())  # {} for local masters
    if not shipped:
        # pyspark starts local Python workers with $PYSPARK_PYTHON, else `python3` from PATH: make it this interpreter.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name).master(resolved)
    for key, value in session_conf(resolved, {**object_store_conf(), **(conf or {})}, shipped=shipped).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    if shipped:
        # spark-submit hands spark.pyspark.python to its driver as PYSPARK_PYTHON, which pyspark reads once into
        # pythonExec, the executors' interpreter of every Python function; this process is the driver itself.
        session.sparkContext.pythonExec = shipped["spark.pyspark.python"]
    session.sparkContext.setLogLevel("WARN")
    check_pyspark_versions(session)
    if data_source:
        register_data_source(session)
    return session


def register_data_source(session: SparkSession) -> None:
    """Register the `hiveacid` data source so that its planning runs on the driver's Python and its tasks on the
    executors'. Spark runs a Python data source's planners (schema, partitions, the writer, commits) in Python workers
    on the driver with the interpreter the source was registered with (pyspark's `pythonExec`), and its read and
    write tasks with `spark.sql.execution.pyspark.python` when set: where the executors run a shipped environment
    (`./acid_env/bin/python`, a path only they have), the source is registered with this interpreter and that setting
    names theirs."""
    context = session.sparkContext
    executors = context.pythonExec
    if not executors or os.path.isabs(executors) or executors == sys.executable:
        session.dataSource.register(HiveAcidDataSource)
        return
    session.conf.set(SQL_PYTHON_CONF, executors)
    context.pythonExec = sys.executable
    try:
        session.dataSource.register(HiveAcidDataSource)
    finally:
        context.pythonExec = executors



def check_pyspark_versions(session: SparkSession) -> None:
    """Stop the session and raise SparkSetupError when pyspark's Python files and JVM jars are different versions."""
    python_version, jvm_version = pyspark.__version__, session.version
    if python_version != jvm_version:
        session.stop()
        raise SparkSetupError(
            f"pyspark's Python files are Spark {python_version} but its JVM jars are Spark {jvm_version}; Python "
            f"functions on Spark fail with mismatched versions. Reinstall one Spark version, e.g. "
            f"`pip install --no-deps --force-reinstall pyspark=={jvm_version}` after any package that ships pyspark's "
            "Python files (pyspark-client)")
