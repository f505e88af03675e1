"""Dependency direction and deployment-file consistency."""

from __future__ import annotations

import ast
import json
import os
import pkgutil
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


def _imported_modules(package: str) -> dict[str, set[str]]:
    found = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        names = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module.split(".")[0])
        found[str(path.relative_to(ROOT))] = names
    return found


@pytest.mark.parametrize("package, forbidden", [
    ("acid_core", {"pyspark", "airflow", "acid_deploy", "spark_jobs", "acid_cli", "plugins", "dags"}),
    ("acid_deploy", {"pyspark", "airflow", "spark_jobs", "acid_cli", "acid_platform", "plugins", "dags"}),
    ("spark_jobs", {"airflow", "plugins", "dags"}),
    ("acid_cli", {"acid_platform", "airflow", "plugins", "dags"}),
    ("acid_platform", {"acid_cli", "spark_jobs", "plugins", "dags"}),  # `make run` uses the core, not the CLI
])
def test_packages_import_only_downstream(package, forbidden):
    offenders = {path: sorted(names & forbidden) for path, names in _imported_modules(package).items() if names & forbidden}
    assert offenders == {}


def _lint_imports(root: Path) -> subprocess.CompletedProcess:
    """`lint-imports` (the contracts in pyproject.toml) run as `make test` runs it, on the tree at `root`."""
    environment = {**os.environ, "PYTHONPATH": str(root / "plugins"), "COLUMNS": "250"}
    return subprocess.run([str(Path(sys.executable).parent / "lint-imports"), "--no-cache"], cwd=root, env=environment,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("path, injected, broken", [
    (None, None, None),
    ("dags/acid_table_settings.py", "import acid_cli.sql.ddl", "Nothing imports the CLI"),
    ("acid_platform/settings.py", "from acid_cli import main", "Nothing imports the CLI"),
    ("plugins/acid_plugin/hooks.py", "import spark_jobs.compact", "The Airflow code refers to spark_jobs by path"),
    ("acid_core/storage/fs.py", "import acid_plugin.hooks", "Airflow code: dags -> plugins (acid_plugin) -> acid_deploy"),
    ("acid_core/format/layout.py", "from dags import acid_compact", "Airflow code: dags -> plugins"),
    ("acid_core/format/layout.py", "import pyspark.sql", "acid_core imports no engine, orchestrator or front end"),
    ("acid_core/metastore/codes.py", "import spark_jobs.session", "Spark jobs: spark_jobs -> acid_deploy -> acid_core"),
    ("spark_jobs/session.py", "from airflow.sdk import dag", "spark_jobs imports no Airflow code"),
    ("acid_deploy/launch.py", "import acid_plugin.operators", "Airflow code: dags -> plugins (acid_plugin) -> acid_deploy"),
    ("acid_deploy/shipping.py", "import pyspark", "acid_deploy builds commands and settings"),
    ("acid_core/write/table_write.py", "import acid_deploy.launch", "acid_core imports no engine, orchestrator"),
    # the rooms inside acid_core: a lower room importing a higher one, and the two side-by-side rooms each other
    ("acid_core/format/layout.py", "import acid_core.read.merge", "acid_core in rooms"),
    ("acid_core/metastore/txns.py", "from acid_core.compaction import worker", "acid_core in rooms"),
    ("acid_core/storage/fs.py", "import acid_core.format.layout", "acid_core in rooms"),
    ("acid_core/read/state.py", "import acid_core.metastore.txns", "acid_core in rooms"),
    ("acid_core/write/writer.py", "import acid_core.operations.health", "acid_core in rooms"),
])
def test_the_import_contracts_hold_and_a_forbidden_import_breaks_one(tmp_path, path, injected, broken):
    """The contracts run on a copy of the tree: as it is they hold (so they see the real code, dags/ and plugins/
    included); with one forbidden import added, lint-imports fails naming the contract."""
    for name in ("acid_core", "acid_deploy", "acid_cli", "acid_platform", "spark_jobs", "plugins", "dags"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    if path is not None:
        with open(tmp_path / path, "a", encoding="utf-8") as source:
            source.write(f"\n{injected}  # injected by the test\n")
    result = _lint_imports(tmp_path)
    output = result.stdout + result.stderr
    if broken is None:
        assert result.returncode == 0, output
        assert re.search(r"Contracts: \d+ kept, 0 broken", output), output
    else:
        assert result.returncode == 1, output
        assert f"{broken}" in output and "BROKEN" in output, output
        assert re.search(rf"^{re.escape(broken)}.* BROKEN$", output, re.M), output


def test_no_test_imports_another_test_or_the_benchmarks():
    """What tests share lives in tests/support; a test module imported by another runs its collection twice and
    couples two files nobody reads together, and bench/ is not part of the suite."""
    test_modules = {path.stem for path in (ROOT / "tests").rglob("test_*.py")}
    found = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        text = path.read_text()
        for node in ast.walk(ast.parse(text, filename=str(path))):
            names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
            found += [f"{path.relative_to(ROOT)} imports {name}" for name in names
                      if name.split(".")[0] in test_modules | {"bench", "conftest"}]
        if re.search(r"sys\.path\.insert\([^)]*bench", text):
            found.append(f"{path.relative_to(ROOT)} puts bench/ on sys.path")
    assert not found, found


def test_acid_core_imports_without_spark_or_airflow():
    """Import every acid_core module (every room's too) with pyspark and airflow made unimportable: nothing pulls them
    in transitively."""
    import acid_core

    modules = [m.name for m in pkgutil.walk_packages(acid_core.__path__, prefix="acid_core.")]
    script = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('pyspark', 'airflow'):\n"
        "            raise ImportError('blocked: ' + name)\n"
        "sys.meta_path.insert(0, Block())\n"
        f"for name in {modules!r}:\n"
        "    __import__(name)\n"
        "print('ok', len(sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert len(modules) >= 50


def test_docker_compose_names_only_things_that_exist():
    compose = yaml.safe_load((ROOT / "docker-compose.yaml").read_text())
    bin_dir = Path(sys.executable).parent
    dockerfile = (ROOT / "docker/Dockerfile").read_text()
    for name, service in compose["services"].items():
        build = service.get("build")
        if build:
            assert (ROOT / build["context"] / build["dockerfile"]).is_file(), name
            assert re.search(rf"^FROM .+ AS {re.escape(build['target'])}$", dockerfile, re.M), f"{name}: no stage"
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("."):
                assert (ROOT / source).exists(), f"{name}: volume source {source} is missing"
        command = service.get("command")
        if command and build:  # our images: what they run is installed by requirements.txt (others: their own)
            assert (bin_dir / command[0]).exists(), f"{name}: command {command[0]!r} is not installed by requirements.txt"
        for key, value in (service.get("environment") or {}).items():
            for folder in ("dags", "plugins"):
                if str(value).endswith(f"/src/{folder}"):
                    assert (ROOT / folder).is_dir(), key
    environment = compose["x-airflow"]["environment"]
    for key in ("AIRFLOW_CONN_ACID_METASTORE", "AIRFLOW_CONN_SPARK_DEFAULT"):
        assert json.loads(environment[key])["conn_type"], key
    # the pool the DAGs use (read from the source: importing Airflow here would configure it for this process)
    [pool] = re.findall(r'^COMPACTION_POOL = "([^"]+)"', (ROOT / "plugins/acid_plugin/operators.py").read_text(), re.M)
    assert compose["services"]["airflow-pool"]["command"][:4] == ["airflow", "pools", "set", pool]
    for line in dockerfile.splitlines():
        if line.startswith("COPY "):
            for source in line.split()[1:-1]:
                assert (ROOT / source).exists(), f"Dockerfile copies missing {source}"


def test_only_fs_module_touches_the_filesystem():
    """All table-data file access in acid_core goes through acid_core/storage/fs.py (pyarrow.fs), so HDFS and S3 work like
    local paths. The metastore package is a database client: it reads its own schema files and places the SQLite file.
    shipping.py builds the Spark executors' code zip and Python environment on the submitting machine's own disk (a
    build directory, venv and pip), and compaction/launch.py finds the job file and spark-submit there and sets
    spark-submit's environment: never table data."""
    direct = {"os", "pathlib", "shutil", "glob", "tempfile", "io"}
    offenders = {}
    for path, names in _imported_modules("acid_core").items():
        if path.endswith(("/fs.py", "/shipping.py", "/compaction/launch.py")) or "/metastore/" in path:
            continue
        calls_open = any(isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "open"
                         for node in ast.walk(ast.parse((ROOT / path).read_text())))
        if names & direct or calls_open:
            offenders[path] = sorted(names & direct) + (["open()"] if calls_open else [])
    assert offenders == {}


def test_compose_keeps_the_metastore_password_out_of_the_connection_host():
    compose = yaml.safe_load((ROOT / "docker-compose.yaml").read_text())
    connection = json.loads(compose["x-airflow"]["environment"]["AIRFLOW_CONN_ACID_METASTORE"])
    assert "@" not in connection["host"] and connection["login"] and connection["password"]


def _strings(value, where: str):
    """Every string in a parsed YAML document, with where it is; JSON inside a string (an Airflow connection) too."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(item, f"{where}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _strings(item, f"{where}[{index}]")
    elif isinstance(value, str):
        yield where, value
        try:
            inner = json.loads(value)
        except ValueError:
            return
        if isinstance(inner, (dict, list)):
            yield from _strings(inner, f"{where}(json)")


def test_compose_puts_no_password_inside_a_url():
    """A URL is shown by logs, Airflow's UI and `ps`: passwords reach the processes only through a connection's
    password field or a variable of their own (PGPASSWORD, ACID_METASTORE_PASSWORD)."""
    compose = yaml.safe_load((ROOT / "docker-compose.yaml").read_text())
    credentials = re.compile(r"://[^/@\s:]+:[^/@\s]*@")  # scheme://user:password@
    found = {where: value for where, value in _strings(compose, "compose") if credentials.search(value)}
    assert found == {}
    environment = compose["x-airflow"]["environment"]
    assert environment["ACID_METASTORE_PASSWORD"] and environment["PGPASSWORD"]
    assert re.fullmatch(r"postgresql\+psycopg2://\w+@postgres:5432/\w+", environment["ACID_METASTORE_URL"])
    assert re.fullmatch(r"postgresql\+psycopg2://\w+@postgres:5432/\w+",
                        environment["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"])
    assert credentials.search("postgresql+psycopg2://acid:acid@postgres:5432/acid_metastore")  # what it would catch


def test_compose_spark_nodes_share_nothing_with_airflow_but_postgres_and_s3():
    """The multi-host shape: the warehouse is on the object store (MinIO), the Spark nodes run an image without this
    project and mount nothing, and the jobs ship their code and Python environment to them."""
    compose = yaml.safe_load((ROOT / "docker-compose.yaml").read_text())
    services = compose["services"]
    for name in ("spark-master", "spark-worker"):
        assert services[name]["build"]["target"] == "spark-node" and not services[name].get("volumes"), name
    environment = compose["x-airflow"]["environment"]
    metastore = json.loads(environment["AIRFLOW_CONN_ACID_METASTORE"])
    assert metastore["extra"]["warehouse"].startswith("s3://") and environment["ACID_WAREHOUSE"].startswith("s3://")
    aws = json.loads(environment[f"AIRFLOW_CONN_{metastore['extra']['aws_conn_id'].upper()}"])
    assert aws["conn_type"] == "aws" and aws["login"] and aws["password"]
    assert aws["extra"]["endpoint_url"] == "http://minio:9000" and "minio" in services
    spark = json.loads(environment["AIRFLOW_CONN_SPARK_DEFAULT"])
    assert spark["extra"]["acid-executor-env"] == "auto"
    assert not any(volume.split(":")[0] == "warehouse" for service in services.values()
                   for volume in service.get("volumes", []))
    stages = re.findall(r"^FROM .+ AS (\S+)$", (ROOT / "docker/Dockerfile").read_text(), re.M)
    spark_node = (ROOT / "docker/Dockerfile").read_text().split("AS spark-node", 1)[1].split("\nFROM ", 1)[0]
    assert stages[-1] == "platform" and "acid_core" not in spark_node  # `docker build` alone builds the platform
