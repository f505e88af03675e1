"""The platform's settings from the environment, the environment its processes get, and the checks made before
anything starts (ACID_HOME writable, the API port free, Java present)."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from acid_core import settings as registry
from acid_core.errors import AcidError, UsageError
from acid_core.metastore import default_url, default_warehouse
from acid_core.metastore.engine import ENV_PASSWORD, ENV_URL, split_credentials, with_credentials
from acid_core.metastore.pools import POOLS_VARIABLE, PoolSetting, parse_pools

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_PORT = registry.API_PORT.default
DEFAULT_HOST = registry.API_HOST.default  # the generated login is a plaintext file: listen on loopback unless told otherwise
METASTORE_CONN_ID = "acid_metastore"
SPARK_CONN_ID = "spark_default"
SPARK_MASTER = "local[2]"
POOL = "acid_compaction"  # the default compaction pool's Airflow pool; a labelled pool <name> has POOL_<name>
INTERVALS = (registry.INITIATOR_INTERVAL, registry.WORKER_INTERVAL, registry.CLEANER_INTERVAL)
DEMO_INTERVALS = {setting.env_var: "60" for setting in INTERVALS}  # the demo's schedules, unless they are set
# Environment connections win over the ones stored in Airflow's DB: drop these so the DAGs use what set-up stored.
SHADOWING_VARIABLES = ("AIRFLOW_CONN_ACID_METASTORE", "AIRFLOW_CONN_SPARK_DEFAULT")


@dataclass(frozen=True, slots=True)
class Settings:
    """Where the platform keeps its state and how Airflow is reached, from the environment (see `load_settings`)."""

    acid_home: Path
    metastore_url: str
    warehouse: str
    port: int
    host: str
    worker_threads: int
    compaction_pools: tuple[PoolSetting, ...] = ()  # ACID_COMPACTION_POOLS: labelled pools and their slots
    repo: Path = ROOT
    demo_writer: bool = True  # ACID_DEMO_WRITER: start the demo writer (off: the platform on the user's own tables)

    @property
    def airflow_pools(self) -> dict[str, int]:
        """Each Airflow pool the worker DAGs use and its slots: `acid_compaction` with the worker threads, and
        `acid_compaction_<name>` for each labelled pool, with its own slots or, if none are given, the same."""
        return {POOL: self.worker_threads, **{f"{POOL}_{pool.name}": pool.slots or self.worker_threads
                                              for pool in self.compaction_pools}}

    @property
    def airflow_home(self) -> Path:
        return self.acid_home / "airflow"

    @property
    def logs(self) -> Path:
        return self.acid_home / "logs"

    @property
    def dags_folder(self) -> Path:
        return self.repo / "dags"

    @property
    def plugins_folder(self) -> Path:
        return self.repo / "plugins"

    @property
    def local_host(self) -> str:
        """The address this machine reaches the API server on (loopback when it listens on every interface)."""
        if self.host in ("", "0.0.0.0", "localhost"):
            return "127.0.0.1"
        if self.host == "::":
            return "[::1]"
        return f"[{self.host}]" if ":" in self.host else self.host

    @property
    def api_url(self) -> str:
        return f"http://{self.local_host}:{self.port}"

    @property
    def ui_url(self) -> str:
        loopback = self.local_host in ("127.0.0.1", "[::1]")
        return f"http://{'localhost' if loopback else self.local_host}:{self.port}"


def load_settings(environ: Mapping[str, str] | None = None, *, repo: Path = ROOT) -> Settings:
    """The settings from ACID_HOME, AIRFLOW__API__PORT / AIRFLOW__API__HOST, ACID_WORKER_THREADS and
    ACID_COMPACTION_POOLS.

    Raises:
        UsageError: a value that is not usable (the message names the variable and the value).
    """
    environ = os.environ if environ is None else environ
    home_text = environ.get(registry.ACID_HOME.env_var, "").strip()
    acid_home = Path(home_text).expanduser().resolve() if home_text else repo / ".acid-home"
    port = registry.API_PORT.from_environ(environ)
    threads = registry.WORKER_THREADS.from_environ(environ)
    pools = parse_pools(environ.get(POOLS_VARIABLE))
    host = environ.get(registry.API_HOST.env_var, "").strip() or DEFAULT_HOST
    writer_text = registry.DEMO_WRITER.from_environ(environ)
    for setting in INTERVALS:
        setting.from_environ(environ)
    with _environment({ENV_URL: environ.get(ENV_URL), ENV_PASSWORD: environ.get(ENV_PASSWORD),
                       "ACID_WAREHOUSE": environ.get("ACID_WAREHOUSE")}):
        try:
            url, warehouse = default_url(str(acid_home)), default_warehouse(str(acid_home))
        except AcidError as exc:
            raise UsageError(str(exc)) from None
    return Settings(acid_home=acid_home, metastore_url=url, warehouse=warehouse, port=port, host=host,
                    worker_threads=threads, compaction_pools=pools, repo=repo, demo_writer=writer_text == "on")


@contextlib.contextmanager
def _environment(values: Mapping[str, str | None]):
    """Temporarily set (or, for None, remove) environment variables of this process."""
    saved = {name: os.environ.get(name) for name in values}
    try:
        for name, value in values.items():
            if value:
                os.environ[name] = value
            else:
                os.environ.pop(name, None)
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def platform_environment(settings: Settings, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of the set-up, the writer and `airflow standalone` (and so of every Airflow task).

    Locations are always under ACID_HOME; the demo schedule and Airflow switches only when the caller has not set them.
    """
    environ = {name: value for name, value in (os.environ if base is None else base).items()
               if name not in SHADOWING_VARIABLES}
    bin_dir = str(Path(sys.executable).parent)  # the venv's bin: airflow, spark-submit, acid (not resolved: a symlink)
    path = [bin_dir] + [entry for entry in environ.get("PATH", os.defpath).split(os.pathsep) if entry != bin_dir]
    # the metastore's password, if any, in a variable of its own: never inside a URL (which logs and `ps` show)
    bare, login, password = split_credentials(settings.metastore_url)
    environ.pop(ENV_PASSWORD, None)
    if password:
        environ[ENV_PASSWORD] = password
    environ.update({
        "ACID_HOME": str(settings.acid_home),
        "ACID_WAREHOUSE": settings.warehouse,
        ENV_URL: with_credentials(bare, login, None),
        "AIRFLOW_HOME": str(settings.airflow_home),
        "ACID_WORKER_THREADS": str(settings.worker_threads),  # the worker DAGs start as many workers a run
        "AIRFLOW_CONFIG": str(settings.airflow_home / "airflow.cfg"),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{settings.airflow_home / 'airflow.db'}",
        "AIRFLOW__CORE__DAGS_FOLDER": str(settings.dags_folder),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(settings.plugins_folder),
        "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(settings.logs / "airflow"),
        "AIRFLOW__LOGGING__DAG_PROCESSOR_CHILD_PROCESS_LOG_DIRECTORY": str(settings.logs / "dag_processor"),
        "AIRFLOW__API__PORT": str(settings.port),
        "AIRFLOW__API__HOST": settings.host,
        "PATH": os.pathsep.join(path),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    })
    defaults = {
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",  # the maintenance DAGs run without a click
        # Task processes reach the API server here; Airflow's default assumes port 8080.
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{settings.api_url}/execution/",
        # The LocalExecutor forks `parallelism` workers up front (default 32): a few are plenty for these DAGs.
        "AIRFLOW__CORE__PARALLELISM": str(sum(settings.airflow_pools.values()) + 4),
        # Metrics (Airflow's and the acid.* ones) as StatsD to loopback, where the launcher's sink writes them to
        # logs/metrics.log (acid_platform.metrics_sink); 8125 unless another process holds it
        "AIRFLOW__METRICS__STATSD_ON": "True",
        "AIRFLOW__METRICS__STATSD_HOST": "127.0.0.1",
        "AIRFLOW__METRICS__STATSD_PORT": str(8125 if _udp_bindable(8125) else _free_port(socket.SOCK_DGRAM)),
        # tags (the compaction type) on the wire, as InfluxDB-style StatsD: plain StatsD would drop them
        "AIRFLOW__METRICS__STATSD_INFLUXDB_ENABLED": "True",
        **DEMO_INTERVALS,
    }
    for name, value in defaults.items():
        if not environ.get(name, "").strip():
            environ[name] = value
    # The scheduler and the triggerer serve task logs on these ports (all interfaces); another Airflow may hold them.
    for name, port in (("AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT", 8793),
                       ("AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT", 8794)):
        if not environ.get(name, "").strip():
            environ[name] = str(port if _bindable("", port) else _free_port())
    return environ


def _bindable(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def _udp_bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _free_port(kind: int = socket.SOCK_STREAM) -> int:
    with socket.socket(socket.AF_INET, kind) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def prepare_home(settings: Settings) -> None:
    """Create ACID_HOME's directories and check that they are writable.

    Raises:
        UsageError: ACID_HOME cannot be created or written.
    """
    try:
        for directory in (settings.acid_home, settings.airflow_home, settings.logs):
            directory.mkdir(parents=True, exist_ok=True)
        if "://" not in settings.warehouse:
            Path(settings.warehouse).mkdir(parents=True, exist_ok=True)
        probe = settings.acid_home / f".write-test-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise UsageError(f"ACID_HOME={settings.acid_home} is not usable: {exc.strerror or exc} "
                         f"({exc.filename or settings.acid_home}); set ACID_HOME to a writable directory") from None


def check_port(settings: Settings) -> None:
    """Refuse a port that something already listens on, or that this user cannot bind.

    Raises:
        UsageError: the port is taken (the message names it).
    """
    hint = f"stop what uses it or choose another port, e.g. AIRFLOW__API__PORT={settings.port % 65535 + 1} make run"
    with contextlib.suppress(OSError), socket.create_connection((settings.local_host.strip("[]"), settings.port),
                                                                timeout=0.5):
        raise UsageError(f"AIRFLOW__API__PORT={settings.port}: port {settings.port} is already in use "
                         f"(something answers on {settings.local_host}:{settings.port}); {hint}")
    family = socket.AF_INET6 if ":" in settings.host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((settings.host, settings.port))
        except OSError as exc:
            raise UsageError(f"AIRFLOW__API__PORT={settings.port}: cannot listen on {settings.host}:{settings.port}: "
                             f"{exc.strerror or exc}; {hint}") from None


def check_java(environ: Mapping[str, str]) -> str:
    """The `java` Spark will run; raises AcidError naming what to install when there is none."""
    java_home = environ.get("JAVA_HOME")
    candidate = Path(java_home) / "bin" / "java" if java_home else None
    if candidate is not None and os.access(candidate, os.X_OK):
        return str(candidate)
    found = shutil.which("java", path=environ.get("PATH"))
    if found is None:
        raise AcidError("Spark needs Java 17, but `java` is neither on PATH nor in JAVA_HOME: install a JDK "
                        "(e.g. `apt-get install openjdk-17-jdk-headless`) and run again")
    return found
