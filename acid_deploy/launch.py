"""What a compaction's spark-submit is: the one builder that the Airflow operators and `acid compact run` share.

A `SparkSubmit` says everything about one submission of `spark_jobs/compact.py`: the master, the application name,
the Spark settings (the launcher's own, the compaction's `compactor.spark.*` properties from
`acid_deploy.job_conf`, the executors' code and Python from `acid_deploy.shipping`, the driver's quiet log4j2
configuration), the job file and its arguments (one compaction, or a `--batch` of a pool), and the environment
spark-submit and its driver get. The metastore URL reaches the driver through that environment with its password
apart (`acid_core.metastore.engine.driver_environment`): never on the command line, which spark-submit and Airflow
log, and never in `repr()` or `settings()`. So the deploy mode is client: the driver runs where spark-submit is
started, like Hive's worker thread, on this interpreter.

The CLI runs `SparkSubmit.command()` itself; the Airflow operators hand the same fields to the apache-spark
provider (its SparkSubmitHook writes the same command line: `command()` follows its order).

Why here: this is the one package both front ends may import (import contracts in pyproject.toml: `acid_plugin`
refers to `spark_jobs` by path only and nothing imports `acid_cli`). It imports neither Spark nor Airflow, finds the
job file without importing `spark_jobs`, and is deployment code next to `job_conf` and `acid_deploy.shipping`, which
it composes: when those leave the storage core for a deployment package of their own, this module goes with them.
Cost: no I/O but a `find_spec` and, on cluster masters, `acid_deploy.shipping`'s (cached) builds.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from acid_core.errors import AcidError

JOB_PACKAGE = "spark_jobs"
JOB_FILE = "compact.py"
LOG_CONFIG = "log4j2.properties"  # beside the job file: the driver JVM logs warnings and errors only
NAME = "acid-compaction"  # the Spark application's name: acid-compaction-<id>, acid-compaction-batch
SPARK_SUBMIT = "spark-submit"
DEFAULT_MASTER = "local[*]"
MASTER_VARIABLE = "ACID_SPARK_MASTER"  # what spark_jobs.session would take for the master: spark-submit's --master wins
JAVA_OPTIONS_CONF = "spark.driver.extraJavaOptions"


class LaunchError(AcidError):
    """A compaction's spark-submit cannot be built: no job file or spark-submit, or a deploy mode it cannot use."""


@dataclass(frozen=True, slots=True)
class SparkSubmit:
    """One spark-submit of the compaction job. `environment` holds the variables to set over the launcher's own
    (the metastore password among them): it is left out of `repr()`, and never part of `command()`."""

    master: str
    name: str
    conf: Mapping[str, str]
    application: str
    arguments: tuple[str, ...]
    environment: Mapping[str, str] = field(repr=False)
    deploy_mode: str | None = None

    def command(self, binary: str = SPARK_SUBMIT) -> list[str]:
        """spark-submit's argv, in the order the provider's SparkSubmitHook writes it (master, settings, name, deploy
        mode, job file, its arguments), so that `acid compact run` and the Airflow task run the same command."""
        command = [binary, "--master", self.master]
        for key, value in self.conf.items():
            command += ["--conf", f"{key}={value}"]
        command += ["--name", self.name]
        if self.deploy_mode:
            command += ["--deploy-mode", self.deploy_mode]
        return [*command, self.application, *self.arguments]

    def process_environment(self, inherited: Mapping[str, str]) -> dict[str, str]:
        """spark-submit's whole environment: `inherited` (this process's) with `environment` set over it."""
        return {**inherited, **self.environment}


def job_path() -> str:
    """Absolute path of spark_jobs/compact.py, found without importing spark_jobs (nor pyspark).

    Raises:
        LaunchError: the spark_jobs package is not installed.
    """
    spec = importlib.util.find_spec(JOB_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise LaunchError(f"the {JOB_PACKAGE} package is not importable: install this project (pip install -e .)")
    return os.path.join(list(spec.submodule_search_locations)[0], JOB_FILE)


def quiet_driver_java_options(job_file: str | None = None) -> str:
    """The driver JVM's log4j2 configuration shipped beside the job (spark_jobs/log4j2.properties: warnings and
    errors only), so Spark's start-up chatter stays out of the task log and the terminal."""
    path = os.path.join(os.path.dirname(job_file or job_path()), LOG_CONFIG)
    return f"-Dlog4j2.configurationFile=file:{path}"


def job_conf(metastore, entry, *, configured: Mapping[str, str] | None = None) -> dict[str, str]:
    """The Spark settings of queue entry `entry` (`acid_deploy.job_conf.compaction_spark_conf`): its
    request's `compactor.spark.*` properties, its table's, its database's, over the launcher's `configured` ones.

    Raises:
        InvalidPropertyError: a property names a Spark setting a table may not choose, or holds an unusable value.
        MetastoreError: the table or its database cannot be read.
    """
    from acid_deploy.job_conf import compaction_spark_conf

    table = metastore.catalog.get_table(entry.database, entry.table)
    database = metastore.catalog.get_database(entry.database)
    return compaction_spark_conf(table.params, entry.properties, configured=configured,
                                 database_params=database.params)


def shipped_conf(master: str, options, *, deploy_mode: str | None = None) -> dict[str, str]:
    """`acid_deploy.shipping.executor_conf`: the settings that give `master`'s executors this project's code and a
    Python ({} on local masters, whose executors run this interpreter).

    Raises:
        LaunchError: deploy mode cluster (the driver runs Hive's worker protocol where spark-submit starts).
        ShippingError: the options do not fit the master, or the code or environment cannot be built.
    """
    from acid_deploy.shipping import executor_conf

    if deploy_mode not in (None, "client"):
        raise LaunchError(f"deploy mode {deploy_mode!r} is not supported: the driver runs Hive's worker protocol "
                          "where spark-submit is started (client mode)")
    return executor_conf(master, options)


def compaction_arguments(compaction_id: int, *, worker_id: str | None = None,
                         result_file: str | None = None) -> tuple[str, ...]:
    """The job's arguments for one compaction; without `worker_id` the driver names itself (<host>-spark-<app>)."""
    arguments = ["--compaction-id", str(compaction_id)]
    if worker_id is not None:
        arguments += ["--worker-id", worker_id]
    if result_file is not None:
        arguments += ["--result-file", result_file]
    return tuple(arguments)


def batch_arguments(*, pool: str | None, other_than: Sequence[str], pool_timeout_ms: int, worker_id: str,
                    result_file: str, max_compactions: int, max_seconds: float, job_conf: Mapping[str, str],
                    configured: Mapping[str, str]) -> tuple[str, ...]:
    """The job's arguments for a `--batch` of compaction pool `pool` (or of every pool but `other_than`, theirs too
    after `pool_timeout_ms`) whose compactions have the settings `job_conf`, made with the launcher's `configured`
    ones (of which only `spark.executor.pyspark.memory` counts: `job_conf.compaction_spark_conf`)."""
    from acid_core.metastore.properties import PYSPARK_MEMORY_CONF

    if pool is not None:
        which = ["--pool", pool]
    else:
        which = ["--other-than", ",".join(other_than)] if other_than else []
        which += ["--pool-timeout-ms", str(pool_timeout_ms)] if pool_timeout_ms else []
    launcher_conf = {PYSPARK_MEMORY_CONF: configured[PYSPARK_MEMORY_CONF]} if PYSPARK_MEMORY_CONF in configured else {}
    return ("--batch", *which, "--worker-id", worker_id, "--result-file", result_file,
            "--max-compactions", str(max_compactions), "--max-seconds", f"{max_seconds:.0f}",
            "--job-conf", json.dumps(dict(job_conf), sort_keys=True), "--launcher-conf", json.dumps(launcher_conf))


def submission(*, name: str, arguments: Sequence[str], master: str, job_conf: Mapping[str, str],
                 shipped: Mapping[str, str], configured: Mapping[str, str] | None = None,
                 metastore_url: str | None = None, warehouse: str | None = None,
                 own_environment: Mapping[str, str] | None = None, deploy_mode: str | None = None,
                 application: str | None = None, environ: Mapping[str, str] | None = None) -> SparkSubmit:
    """The spark-submit of the compaction job with `arguments`.

    Args:
        name: the Spark application's name.
        arguments: `compaction_arguments` or `batch_arguments`.
        master: the master spark-submit gets (`--master`).
        job_conf: the compaction's settings (`job_conf`); they beat `configured`.
        shipped: `shipped_conf` for `master`, applied last (its file lists joined with the others').
        configured: the launcher's own settings (the operator's `conf`).
        metastore_url: the metastore the driver uses (None: the one its inherited environment names).
        warehouse: ACID_WAREHOUSE for the driver (None: inherited).
        own_environment: the launcher's own variables (the operator's `env_vars`); they win.
        application: another job file than spark_jobs/compact.py (the operator's `application`).
        environ: the environment spark-submit inherits (default this process's).

    Raises:
        LaunchError: the job file cannot be found.
        MetastoreError: `metastore_url` cannot be parsed (its text is not shown).
    """
    from acid_deploy.job_conf import local_python_conf
    from acid_deploy.shipping import combine_conf

    job_file = job_path()
    conf = combine_conf({**local_python_conf(master), **(configured or {}), **job_conf}, shipped)
    conf.setdefault(JAVA_OPTIONS_CONF, quiet_driver_java_options(job_file))
    environment = driver_environment(master=master, shipped=shipped, metastore_url=metastore_url,
                                     warehouse=warehouse, own=own_environment,
                                     environ=os.environ if environ is None else environ)
    return SparkSubmit(master=master, name=name, conf=dict(sorted(conf.items())), application=application or job_file,
                       arguments=tuple(arguments), environment=environment, deploy_mode=deploy_mode)


def driver_environment(*, master: str, shipped: Mapping[str, str], metastore_url: str | None = None,
                       warehouse: str | None = None, own: Mapping[str, str] | None = None,
                       environ: Mapping[str, str]) -> dict[str, str]:
    """The variables spark-submit (and so its client-mode driver) gets over `environ`: the metastore URL and its
    password apart, the warehouse, this interpreter for the driver, the executors' Python (on a cluster the
    shipped one, which replaces any PYSPARK_PYTHON of `environ`, which spark-submit would give the executors; on a
    local master this interpreter), this interpreter's bin first on PATH (its spark-submit), ACID_SPARK_MASTER
    emptied (spark-submit's --master decides), SPARK_LOCAL_IP on loopback where
    `job_conf.local_driver_environment` says, then `own`, which wins."""
    from acid_core.metastore.engine import driver_environment as metastore_environment
    from acid_deploy.job_conf import local_driver_environment

    own = dict(own or {})
    environment = metastore_environment(metastore_url) if metastore_url else {}
    if warehouse:
        environment["ACID_WAREHOUSE"] = warehouse
    environment.update({
        "PYSPARK_PYTHON": shipped.get("spark.pyspark.python", sys.executable),
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "PATH": os.pathsep.join([os.path.dirname(sys.executable), environ.get("PATH", "")]),
        MASTER_VARIABLE: "",
        **local_driver_environment(master, {**environ, **own}),
    })
    return {**environment, **own}


def find_spark_submit(environment: Mapping[str, str], binary: str = SPARK_SUBMIT) -> str:
    """The spark-submit that `environment`'s PATH finds (this interpreter's, where pyspark installs one, first).

    Raises:
        LaunchError: there is none.
    """
    found = shutil.which(binary, path=environment.get("PATH"))
    if found is None:
        raise LaunchError(f"{binary} was not found: install pyspark (requirements.txt) or put Spark's bin on PATH")
    return found
