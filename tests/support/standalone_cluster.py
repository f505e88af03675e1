"""A Spark standalone cluster on loopback for tests: a master and one worker (1 core, 1 GiB) started from the pyspark
installation, stopped with everything they started; the worker either in this environment or in a clean one (another
working directory, no PYTHONPATH, no PYSPARK_PYTHON, only a plain Python that cannot import acid_core or pyarrow on
PATH), like a node that has nothing but Spark and Python. Also the plain Python, and the executors' settings that
point `acid_deploy.shipping` at a build directory shared by every test of a run.

Imported as `support.<module>` (tests/support/__init__.py).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from support.processes import kill_session

LOOPBACK = "127.0.0.1"
PYSPARK_HOME = Path(list(importlib.util.find_spec("pyspark").submodule_search_locations)[0])
SPARK_CLASS = PYSPARK_HOME / "bin" / "spark-class"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((LOOPBACK, 0))
        return probe.getsockname()[1]


def master_status(web_port: int) -> dict:
    """The standalone master's JSON status page (loopback only, never through a proxy)."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(f"http://{LOOPBACK}:{web_port}/json/", timeout=5) as response:
        return json.load(response)


def wait_for(condition, *, timeout: float, what: str, logs: list[Path]):
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = condition()
        except (OSError, ValueError):  # not listening yet, or the web UI still starting (no JSON yet)
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            tails = "\n".join(f"--- {log}:\n{log.read_text()[-3000:]}" for log in logs if log.exists())
            raise AssertionError(f"{what} within {timeout} s\n{tails}")
        time.sleep(0.25)


@dataclass(frozen=True)
class Cluster:
    master: str  # spark://127.0.0.1:PORT
    web_port: int
    work_dir: Path  # the worker's: one app-<id>/<executor id>/ directory per application
    logs: list[Path]

    def completed_apps(self) -> list[str]:
        return [app["name"] for app in master_status(self.web_port)["completedapps"]]

    def executor_logs(self) -> str:
        """The tails of every executor's stdout and stderr, for assertion messages."""
        return "".join(f"--- {path}:\n{path.read_text()[-2000:]}\n" for path in sorted(self.work_dir.rglob("std*")))


@dataclass(frozen=True)
class PlainPython:
    """A Python of the driver's version that cannot import acid_core or pyarrow, and the prefix that the packed
    environment's interpreter link must use to reach it on a node (None: the driver's own base interpreter)."""

    executable: Path
    prefix: str | None


def plain_python() -> PlainPython:
    """The system's `/usr/bin/python3.<minor>` when it is a plain Python of the driver's version (a node's Python,
    reached through venv-pack's python prefix), else the base interpreter the driver's venv was made from."""
    system = Path(f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}")
    if system.exists() and not Path(sys.base_prefix).samefile("/usr") and cannot_import(system, "pyarrow"):
        return PlainPython(system, "/usr")
    return PlainPython(Path(sys.base_prefix, "bin", f"python{sys.version_info.major}.{sys.version_info.minor}"), None)


def cannot_import(python: Path, module: str, *, env: dict[str, str] | None = None, cwd: Path | None = None) -> bool:
    result = subprocess.run([str(python), "-c", f"import {module}"], env=env, cwd=cwd, capture_output=True,
                            check=False)
    return result.returncode != 0 and b"ModuleNotFoundError" in result.stderr


def clean_environment(root: Path, python: Path) -> dict[str, str]:
    """A node's environment: PATH with `python3` = `python` and the system's tools only, Java, SPARK_HOME; no
    PYTHONPATH, no PYSPARK_PYTHON, nothing of this test run's virtualenv."""
    bin_dir = root / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "python3").symlink_to(python)
    (bin_dir / "python").symlink_to(python)
    java = Path(shutil.which("java") or "/usr/bin/java").resolve()
    home = root / "home"
    home.mkdir()
    return {"PATH": f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin", "HOME": str(home),
            "JAVA_HOME": os.environ.get("JAVA_HOME") or str(java.parent.parent), "SPARK_HOME": str(PYSPARK_HOME),
            "LANG": "C.UTF-8"}


@contextlib.contextmanager
def standalone_cluster(root: Path, *, worker_environment: dict[str, str] | None = None,
                       worker_cwd: Path | None = None) -> Iterator[Cluster]:
    """A master (in this environment) and one worker (in `worker_environment`, default this one with
    PYSPARK_PYTHON = this interpreter, run in `worker_cwd`) on loopback; both stopped, with what they started, after."""
    master_port, master_web, worker_web = free_port(), free_port(), free_port()
    work_dir, log_dir = root / "spark-work", root / "spark-logs"
    spark_settings = {"SPARK_LOCAL_IP": LOOPBACK, "SPARK_LOG_DIR": str(log_dir), "SPARK_WORKER_DIR": str(work_dir),
                      "SPARK_DAEMON_JAVA_OPTS": os.environ.get("SPARK_SUBMIT_OPTS", "")}  # tests/conftest.py's
    master_environment = dict(os.environ, **spark_settings, PYSPARK_PYTHON=sys.executable)
    worker_environment = dict(master_environment if worker_environment is None else worker_environment,
                              **spark_settings)
    # the executors' JVMs, which the worker starts with its environment and the application's options only: the
    # tests' JVM options (C1, serial collector, the class archive once made) as the drivers have them
    worker_environment["JAVA_TOOL_OPTIONS"] = os.environ.get("SPARK_SUBMIT_OPTS", "")
    commands = {
        "master": ([str(SPARK_CLASS), "org.apache.spark.deploy.master.Master", "--host", LOOPBACK,
                    "--port", str(master_port), "--webui-port", str(master_web)], master_environment, None),
        "worker": ([str(SPARK_CLASS), "org.apache.spark.deploy.worker.Worker", f"spark://{LOOPBACK}:{master_port}",
                    "--host", LOOPBACK, "--cores", "1", "--memory", "1g", "--webui-port", str(worker_web),
                    "--work-dir", str(work_dir)], worker_environment, worker_cwd),
    }
    processes: list[subprocess.Popen] = []
    logs = [root / f"{name}.log" for name in commands]

    def stop() -> None:
        for process in processes:
            try:
                os.killpg(process.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for process in processes:
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                pass
            kill_session(process.pid)  # the worker's executors and their Python workers too
            process.wait()

    try:
        for (name, (command, environment, cwd)), log in zip(commands.items(), logs):
            with open(log, "w") as output:
                processes.append(subprocess.Popen(command, env=environment, cwd=cwd, stdout=output,
                                                  stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                                  start_new_session=True))
            if name == "master":
                wait_for(lambda: master_status(master_web).get("status") == "ALIVE", timeout=90,
                         what="the standalone master did not come up", logs=logs)
        wait_for(lambda: [w for w in master_status(master_web)["workers"] if w["state"] == "ALIVE"], timeout=90,
                 what="the worker did not register with the master", logs=logs)
        yield Cluster(f"spark://{LOOPBACK}:{master_port}", master_web, work_dir, logs)
    finally:
        stop()


def shared_build_dir(tmp_path_factory) -> Path:
    """The build directory of the executors' code zip and environment for the whole run (built once, then reused:
    `acid_deploy.shipping` names both by content hash)."""
    path = tmp_path_factory.getbasetemp() / "acid-ship"
    path.mkdir(exist_ok=True)
    return path


def build_executor_env(build_dir: Path, python_prefix: str | None) -> tuple[Path, float]:
    """The packed environment the drivers of this run will ship (built now, under the lock, when missing), and the
    seconds it took here (a cache hit takes milliseconds)."""
    from acid_deploy.shipping import env_archive

    started = time.monotonic()
    archive = env_archive(build_dir, python_prefix=python_prefix)
    return archive, time.monotonic() - started
