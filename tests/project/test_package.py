"""The project as an installed package, not a checkout: build the wheel, install it (not editable) into a fresh venv
outside the checkout, and use `acid` from a directory that has nothing of the source tree.

Offline: the wheel is built without build isolation (setuptools comes from requirements.txt), installed without
dependencies, and the fresh venv finds pyarrow, pyorc and SQLAlchemy through a `.pth` line naming this venv's
site-packages (whose editable-install hook is not read from there, so `acid_core` can only come from the wheel).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parents[2]
SOURCES = ("acid_core", "acid_cli", "acid_platform", "spark_jobs", "pyproject.toml", "README.md")

pytestmark = pytest.mark.slow


def _run(command: list[str], *, cwd: Path, env: dict | None = None, timeout: int = 300) -> str:
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{' '.join(command)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, Path]:
    """(the fresh venv's bin directory, the wheel) with the project installed from its wheel."""
    root = tmp_path_factory.mktemp("package")
    source = root / "source"  # a copy, so the build leaves nothing (build/, *.egg-info) in the checkout
    source.mkdir()
    for name in SOURCES:
        origin = REPOSITORY / name
        if origin.is_dir():
            shutil.copytree(origin, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(origin, source / name)
    wheels = root / "wheels"
    _run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "--wheel-dir",
          str(wheels), str(source)], cwd=root)
    [wheel] = wheels.glob("hive_acid_platform-*.whl")
    environment = root / "venv"
    venv.EnvBuilder(with_pip=False).create(environment)
    purelib = Path(sysconfig.get_paths(vars={"base": str(environment), "platbase": str(environment)})["purelib"])
    (purelib / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    _run([sys.executable, "-m", "pip", "--python", str(environment / "bin" / "python"), "install", "--quiet",
          "--no-deps", "--no-index", str(wheel)], cwd=root)
    return environment / "bin", wheel


def test_the_wheel_carries_the_metastore_schema(installed):
    _, wheel = installed
    names = zipfile.ZipFile(wheel).namelist()
    assert {"acid_core/metastore/sql/postgres/schema.sql", "acid_core/metastore/sql/sqlite/schema.sql"} <= set(names)
    metadata = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("/METADATA"))).decode()
    assert "Requires-Dist: sqlalchemy" in metadata and "Provides-Extra: postgres" in metadata


def test_acid_works_from_the_installed_package(installed, tmp_path):
    bin_dir, _ = installed
    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {key: value for key, value in os.environ.items() if not key.startswith(("ACID_", "PYTHON"))}
    env.update(ACID_HOME=str(work / "home"), PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}")
    origin = _run([str(bin_dir / "python"), "-c", "import acid_core; print(acid_core.__file__)"], cwd=work, env=env)
    assert str(bin_dir.parent) in origin and str(REPOSITORY) not in origin
    metastore = f"sqlite:///{work}/metastore.db"
    acid = str(bin_dir / "acid")
    _run([acid, "metastore", "init", "--metastore", metastore], cwd=work, env=env)
    _run([acid, "sql", "--metastore", metastore,
          "CREATE TABLE t (id int, name string) STORED AS ORC TBLPROPERTIES ('transactional'='true'); "
          "INSERT INTO t VALUES (1, 'a'), (2, 'b'); INSERT INTO t VALUES (3, 'c')"], cwd=work, env=env)
    location = work / "home" / "warehouse" / "t"
    rows = [json.loads(line) for line in
            _run([acid, "read", str(location), "--format", "jsonl"], cwd=work, env=env).splitlines()]
    assert [(row["id"], row["name"]) for row in rows] == [(1, "a"), (2, "b"), (3, "c")]
    state = json.loads(_run([acid, "inspect", str(location), "--write-ids", "default.t:2:9223372036854775807::",
                             "--json"], cwd=work, env=env))
    assert state == {"base": None, "deltas": ["delta_0000001_0000001_0000", "delta_0000002_0000002_0000"],
                     "obsolete": [], "aborted": []}
