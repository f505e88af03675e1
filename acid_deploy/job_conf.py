"""The Spark settings of one compaction job, Hive style: what a run asks for beats the table, which beats the database.

Any `compactor.spark.<name>` property (Hive's `compactor.` prefix for job settings, like
`compactor.mapreduce.map.memory.mb`) sets `spark.<name>` for the job: executor memory and cores, the Python workers'
memory cap `spark.executor.pyspark.memory`, dynamic allocation, ... (resources and tuning only:
`acid_core.metastore.properties.spark_conf_of` says which); Hive's job queue (`hive.compactor.job.queue`, per table
`compactor.hive.compactor.job.queue`) becomes `spark.yarn.queue`. Sources, strongest first: the request's
`WITH OVERWRITE TBLPROPERTIES (...)` (also what the acid_compact DAG's params queue), the table's properties, the
database's, then what the launcher was configured with (the operator's `conf`), then the defaults
(`spark.executor.pyspark.memory` = `DEFAULT_PYSPARK_MEMORY`). Light: DAG files and the CLI may import it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from acid_core import settings
from acid_core.metastore.properties import PYSPARK_MEMORY_CONF, spark_conf_of, spark_memory_mib

# Streaming compaction of the default 64 MiB stripes with a dozen open inputs (base, ten deltas, the delete delta)
# peaks under 1.5 GiB of address space, of which ~0.4 GiB is the Python worker with pyarrow loaded.
DEFAULT_PYSPARK_MEMORY = settings.PYSPARK_MEMORY.default


def compaction_spark_conf(table_params: Mapping[str, str], request_properties: str | Mapping[str, str] | None, *,
                          configured: Mapping[str, str] | None = None,
                          database_params: Mapping[str, str] | None = None) -> dict[str, str]:
    """The settings to add to one compaction's spark-submit `--conf`s (the launcher's own settings are kept unless a
    property sets the same name).

    Args:
        table_params: the table's properties.
        request_properties: the queue entry's CQ_TBLPROPERTIES (a JSON object, as stored) or a mapping.
        configured: the launcher's own settings; they beat only the default.
        database_params: the table's database's properties.

    Raises:
        InvalidPropertyError: a property names a Spark setting a table may not choose, or holds an unusable value
            (the message names the source and the property).
    """
    if isinstance(request_properties, str):
        request_properties = json.loads(request_properties) if request_properties else {}
    chosen: dict[str, str] = {}
    for what, source in (("database", database_params or {}), ("table", table_params),
                         ("compaction request", request_properties or {})):  # weakest first: later wins
        for key, value in source.items():
            found = spark_conf_of(key, value, what=what)
            if found is not None:
                chosen[found[0]] = found[1]
    if PYSPARK_MEMORY_CONF not in chosen:
        value = (configured or {}).get(PYSPARK_MEMORY_CONF)
        if value is not None:
            spark_memory_mib(value, what=f"the launcher's setting {PYSPARK_MEMORY_CONF!r}")
        chosen[PYSPARK_MEMORY_CONF] = value.strip() if value is not None else DEFAULT_PYSPARK_MEMORY
    return dict(sorted(chosen.items()))


def local_driver_environment(master: str, environ: Mapping[str, str]) -> dict[str, str]:
    """`{"SPARK_LOCAL_IP": "127.0.0.1"}` for a local master (`local[*]`, `local-cluster[...]`: driver and executors on
    this machine) on a host whose name resolves to a loopback address, unless `environ` sets SPARK_LOCAL_IP; else {}.

    Spark's `Utils.findLocalInetAddress` would otherwise pick another interface's address and warn twice ("Your
    hostname, h, resolves to a loopback address: 127.0.0.1; using ... instead", "Set SPARK_LOCAL_IP if you need to
    bind to another address"), although a local application talks over loopback only. A cluster master gets
    nothing: there the warning says something true (its executors must reach the driver at a routable address).
    """
    import ipaddress
    import socket

    from acid_deploy.shipping import is_local_master

    if environ.get("SPARK_LOCAL_IP") or not is_local_master(master):
        return {}
    try:
        address = ipaddress.ip_address(socket.gethostbyname(socket.gethostname()))
    except (OSError, ValueError):  # the name does not resolve: Spark says so itself
        return {}
    return {"SPARK_LOCAL_IP": "127.0.0.1"} if address.is_loopback else {}


PYTHON_DAEMON_CONF = "spark.python.daemon.module"
LOCAL_PYTHON_DAEMON = "spark_jobs.python_daemon"


def local_python_conf(master: str) -> dict[str, str]:
    """For a local master, the Python workers' daemon `spark_jobs.python_daemon`: pyspark's own, but its workers
    import pyspark from the installed package rather than compile it from Spark's zip (`spark_jobs.installed_pyspark`,
    about 0.5 s of CPU per worker). Local executors run this machine's interpreter with this project importable, as
    every task of the jobs needs; a cluster's executors get the zip of `acid_deploy.shipping` per task, after their
    daemon started, so they keep pyspark's daemon: {}."""
    from acid_deploy.shipping import is_local_master

    return {PYTHON_DAEMON_CONF: LOCAL_PYTHON_DAEMON} if is_local_master(master) else {}
