"""`acid_deploy.shipping`: which settings give a cluster's executors the code and a Python, the options' checks, the
code zip and the packed environment (built here without packages, so in a second; the real environment is built
and run by tests/dags/test_clean_cluster.py)."""

from __future__ import annotations

import ast
import importlib.metadata
import sys
import tarfile
import threading
import zipfile
import zipimport
from pathlib import Path

import pytest

from acid_deploy import shipping
from acid_deploy.shipping import (
    ENV_KEY_FILE,
    EXECUTOR_DISTRIBUTIONS,
    ExecutorOptions,
    ShippingError,
    code_zip,
    combine_conf,
    env_archive,
    executor_conf,
    options_from_env,
    options_from_extra,
)

ROOT = Path(__file__).resolve().parents[2]
MINOR = f"python{sys.version_info.major}.{sys.version_info.minor}"


def test_local_masters_keep_this_interpreter_and_ship_nothing(tmp_path):
    for master in ("local", "local[2]", "local[*]", "local-cluster[2,1,1024]"):
        assert executor_conf(master, ExecutorOptions(build_dir=str(tmp_path))) == {}
    assert list(tmp_path.iterdir()) == []


def test_a_cluster_gets_the_code_zip_and_a_prebuilt_archive_never_this_interpreter(tmp_path):
    options = options_from_extra({"acid-executor-env": "hdfs:///envs/acid.tar.gz"}, build_dir=str(tmp_path))
    for master in ("spark://10.0.0.1:7077", "yarn", "k8s://https://api:6443"):
        conf = executor_conf(master, options)
        assert conf["spark.archives"] == "hdfs:///envs/acid.tar.gz#acid_env"
        assert conf["spark.pyspark.python"] == "./acid_env/bin/python"
        assert conf["spark.pyspark.driver.python"] == sys.executable  # the driver runs here (client mode)
        assert Path(conf["spark.submit.pyFiles"]).parent == tmp_path
        assert not any(sys.executable in value or sys.prefix in value
                       for key, value in conf.items() if key != "spark.pyspark.driver.python")
    assert not list(tmp_path.glob("acid-env-*")), "a prebuilt archive builds nothing here"
    aliased = executor_conf("yarn", options_from_env({"ACID_EXECUTOR_ENV": "s3a://bucket/envs/acid.tgz#py",
                                                      "ACID_SHIP_DIR": str(tmp_path)}))
    assert (aliased["spark.archives"], aliased["spark.pyspark.python"]) == ("s3a://bucket/envs/acid.tgz#py",
                                                                            "./py/bin/python")


def test_nodes_python_and_kubernetes_image(tmp_path):
    installed = executor_conf("spark://h:7077", options_from_extra(
        {"acid-executor-python": "/opt/python/bin/python3.11"}, build_dir=str(tmp_path)))
    assert installed["spark.pyspark.python"] == "/opt/python/bin/python3.11" and "spark.archives" not in installed
    bare = executor_conf("yarn", options_from_env({"ACID_EXECUTOR_ENV": "none", "ACID_SHIP_DIR": str(tmp_path)}))
    assert bare["spark.pyspark.python"] == "python3"  # the nodes' own, as Spark's default: not this interpreter
    image = executor_conf("k8s://https://api:6443", options_from_extra(
        {"acid-container-image": "registry.local/acid:1.0"}, build_dir=str(tmp_path)))
    assert image["spark.kubernetes.container.image"] == "registry.local/acid:1.0"
    assert image["spark.pyspark.python"] == "python3" and "spark.archives" not in image
    with pytest.raises(ShippingError, match=r"acid-container-image 'registry.local/acid:1.0' needs a k8s:// master"):
        executor_conf("spark://h:7077", options_from_extra({"acid-container-image": "registry.local/acid:1.0"}))


@pytest.mark.parametrize("extra, message", [
    ({"acid-executor-evn": "auto"}, "unknown connection extra 'acid-executor-evn'"),
    ({"acid-executor-env": "sometimes"}, "acid-executor-env 'sometimes': expected auto, none, or the URI"),
    ({"acid-executor-env": "hdfs:///envs/acid.whl"}, "acid-executor-env 'hdfs:///envs/acid.whl': expected a .tar.gz"),
    ({"acid-executor-env": "s3a://key:secret@bucket/acid.tar.gz"}, "the URI carries credentials"),
    ({"acid-executor-env": "auto", "acid-executor-python": "/usr/bin/python3"},
     "acid-executor-python '/usr/bin/python3' names the executors' Python, but acid-executor-env 'auto' ships one"),
    ({"acid-executor-python": "bin/python3"}, "acid-executor-python 'bin/python3': expected an absolute path"),
    ({"acid-executor-python-prefix": "usr"}, "acid-executor-python-prefix 'usr': expected an absolute path"),
    ({"acid-executor-env": "none", "acid-executor-python-prefix": "/usr"}, "applies to a built environment only"),
    ({"acid-executor-env": 3}, "acid-executor-env 3: expected a non-empty string"),
    ({"acid-container-image": " img"}, "acid-container-image ' img': expected a non-empty string"),
])
def test_bad_extras_are_one_line_errors_naming_key_and_value(extra, message):
    with pytest.raises(ShippingError, match=re_escape(message)) as raised:
        options_from_extra(extra)
    assert "\n" not in str(raised.value)


def test_variables_are_named_in_their_errors():
    with pytest.raises(ShippingError, match=r"^ACID_EXECUTOR_ENV 'sometimes': expected auto"):
        options_from_env({"ACID_EXECUTOR_ENV": "sometimes"})
    with pytest.raises(ShippingError, match=r"^ACID_SHIP_DIR '/a,b'"):
        options_from_env({"ACID_SHIP_DIR": "/a,b"})
    assert options_from_env({}) == ExecutorOptions()


def test_combined_settings_keep_the_jobs_own_archives_and_files():
    combined = combine_conf({"spark.archives": "hdfs:///x.tar.gz#x", "spark.executor.memory": "2g"},
                            {"spark.archives": "/b/env.tar.gz#acid_env", "spark.submit.pyFiles": "/b/code.zip"})
    assert combined == {"spark.archives": "/b/env.tar.gz#acid_env,hdfs:///x.tar.gz#x", "spark.executor.memory": "2g",
                        "spark.submit.pyFiles": "/b/code.zip"}


def test_code_zip_holds_the_installed_packages_and_is_made_once(tmp_path):
    first = code_zip(tmp_path)
    assert code_zip(tmp_path) == first and first.name.startswith("acid-code-")
    assert [path.name for path in tmp_path.iterdir()] == [first.name]  # no temporary file left behind
    names = zipfile.ZipFile(first).namelist()
    assert "acid_deploy/shipping.py" in names and "spark_jobs/compact.py" in names
    assert "acid_core/metastore/sql/sqlite/schema.sql" in names  # package data too
    assert not [name for name in names if "__pycache__" in name or name.endswith(".pyc")]
    assert zipimport.zipimporter(str(first)).find_spec("spark_jobs") is not None


def test_code_zip_follows_the_source(tmp_path, monkeypatch):
    package = tmp_path / "src" / "acid_shipping_probe"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("VERSION = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path / "src"))
    build_dir = tmp_path / "build"
    build_dir.mkdir()
    before = code_zip(build_dir, packages=("acid_shipping_probe",))
    (package / "__init__.py").write_text("VERSION = 2\n")
    after = code_zip(build_dir, packages=("acid_shipping_probe",))
    assert before != after and zipfile.ZipFile(after).read("acid_shipping_probe/__init__.py") == b"VERSION = 2\n"
    with pytest.raises(ShippingError, match="the package 'acid_no_such_package' is not importable here"):
        code_zip(build_dir, packages=("acid_no_such_package",))


def test_env_archive_relinks_python_to_the_nodes_prefix(tmp_path):
    archive = env_archive(tmp_path, python_prefix="/usr", requirements={})
    with tarfile.open(archive) as packed:
        links = {member.name: member.linkname for member in packed.getmembers() if member.name.startswith("bin/py")}
        config = packed.extractfile("pyvenv.cfg").read().decode()
        assert ENV_KEY_FILE in packed.getnames()
    # venv-pack alone would write /usr/bin/python3.113.11 here (its prefix rewrite of a pythonX.Y link)
    assert f"/usr/bin/{MINOR}" in links.values(), links
    assert all(target in ("python", "python3", MINOR, f"/usr/bin/{MINOR}") for target in links.values()), links
    assert "home = /usr/bin" in config
    plain = env_archive(tmp_path, requirements={})
    assert plain != archive
    with tarfile.open(plain) as packed:
        targets = {member.linkname for member in packed.getmembers() if member.name.startswith("bin/py")}
    assert any(target.startswith(sys.base_prefix) for target in targets), targets
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == sorted(
        [archive.name, plain.name, archive.name.replace(".tar.gz", ".json"), plain.name.replace(".tar.gz", ".json")])


def test_concurrent_builders_build_one_environment(tmp_path, monkeypatch):
    packed = []
    real_pack = shipping._pack

    def counting_pack(venv, output, python_prefix):
        packed.append(output)
        real_pack(venv, output, python_prefix)

    monkeypatch.setattr(shipping, "_pack", counting_pack)
    results: list[Path] = []
    threads = [threading.Thread(target=lambda: results.append(env_archive(tmp_path, requirements={})))
               for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(packed) == 1 and len(set(results)) == 1 and results[0].exists()


def test_executor_requirements_pin_what_is_installed_here():
    pins = shipping.executor_requirements()
    for name in EXECUTOR_DISTRIBUTIONS:
        assert pins[name] == importlib.metadata.version(name)
    with pytest.raises(ShippingError, match="'no-such-dist', which executors import, is not installed"):
        shipping.executor_requirements(("no-such-dist",))


def test_executor_distributions_cover_what_acid_core_and_spark_jobs_import():
    """Every third-party module the shipped packages import comes with EXECUTOR_DISTRIBUTIONS (pyspark comes with
    Spark; venv-pack only builds the environment, on the driver)."""
    imported = set()
    for package in shipping.SHIPPED_PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Import):
                    imported.update(alias.name.split(".")[0] for alias in node.names)
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    imported.add(node.module.split(".")[0])
    third_party = imported - set(sys.stdlib_module_names) - {"__future__", "pyspark", "venv_pack",
                                                               *shipping.SHIPPED_PACKAGES}
    distributions = importlib.metadata.packages_distributions()
    shipped = set(shipping.executor_requirements())
    missing = {module for module in third_party
               if not {name.lower() for name in distributions.get(module, [module])} & shipped}
    assert not missing, f"imported by the shipped packages but not in EXECUTOR_DISTRIBUTIONS: {sorted(missing)}"


def re_escape(text: str) -> str:
    import re

    return re.escape(text)
