"""What Spark executors need to run this project's tasks when their nodes have nothing but Spark and a plain Python.

On a cluster master (`spark://`, `yarn`, `k8s://`) a job ships two things (Spark's "Python Package Management"):
the code of `acid_core` and `spark_jobs` as a zip (`spark.submit.pyFiles`, what `--py-files` sets), built from the
installed packages and named by the hash of their files, and a Python environment packed with venv-pack
(`spark.archives` `<archive>#acid_env`, run as `./acid_env/bin/python`): a dedicated venv holding only what executors
import (`EXECUTOR_DISTRIBUTIONS` and their dependencies, at the versions installed here), named by the hash of that
set and of this Python. Instead of a built environment the settings may name a prebuilt archive (nothing is built
here), an executor Python installed on the nodes, or a Kubernetes container image. The driver runs in client mode
where the job is submitted, on this interpreter; this interpreter's path never reaches the executors. Local masters
keep running everything on this interpreter (no settings at all).

Cost: the code zip is a hash of a few hundred small files per call, rebuilt (about 1 MB) only when one changed; the
environment is built once per requirement set and Python version (about 10-20 s, ~90 MB) and reused from the build
directory afterwards. Both are written under a temporary name and renamed, so a concurrent job never sees half a
file; concurrent builders of one environment wait for each other on a file lock.

Settings (the Airflow connection's extra keys, or environment variables for `acid compact run` and `build_session`):

| extra key | variable | value |
|---|---|---|
| `acid-executor-env` | `ACID_EXECUTOR_ENV` | `auto` (build and ship the environment), `none` (ship none), or an archive URI |
| `acid-executor-python` | `ACID_EXECUTOR_PYTHON` | the executors' Python on the nodes (with `none`; default `python3`) |
| `acid-executor-python-prefix` | `ACID_EXECUTOR_PYTHON_PREFIX` | where the nodes' Python lives (`/usr`), for `auto` |
| `acid-container-image` | `ACID_CONTAINER_IMAGE` | `spark.kubernetes.container.image` (k8s:// masters only) |
| | `ACID_SHIP_DIR` | the build directory (default `$ACID_HOME/ship`, else `~/.cache/acid/ship`) |
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from acid_core.errors import AcidError

SHIPPED_PACKAGES = ("acid_core", "acid_deploy", "spark_jobs")
# What acid_core and spark_jobs import on executors besides the standard library and pyspark (which Spark puts on the
# executors' path itself): tests/acid_deploy/test_shipping.py checks this against their imports.
EXECUTOR_DISTRIBUTIONS = ("pyarrow", "pyorc", "numpy", "sqlalchemy", "sqlglot", "psutil")
ENV_ALIAS = "acid_env"
DEFAULT_EXECUTOR_PYTHON = "python3"  # Spark's own default: the nodes' (or the image's) python3 on PATH
ENV_AUTO, ENV_NONE = "auto", "none"
ENV_KEY_FILE = "acid-env.json"  # in the environment's root: what it was built from (Python, pins)
BUILD_FORMAT = 1  # part of the environment's hash: bump when the way it is built changes

OPTION_KEYS = {"env": "acid-executor-env", "python": "acid-executor-python",
               "python_prefix": "acid-executor-python-prefix", "image": "acid-container-image"}
OPTION_VARIABLES = {"env": "ACID_EXECUTOR_ENV", "python": "ACID_EXECUTOR_PYTHON",
                    "python_prefix": "ACID_EXECUTOR_PYTHON_PREFIX", "image": "ACID_CONTAINER_IMAGE"}
BUILD_DIR_VARIABLE = "ACID_SHIP_DIR"
_LOCAL_MASTER = re.compile(r"local(\[.*\]|-cluster\[.*\])?")
_ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar", ".zip", ".jar")
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)  # fixed, so equal files give an equal zip


class ShippingError(AcidError):
    """The code or Python environment for Spark executors cannot be built, or a setting naming them is wrong."""


@dataclass(frozen=True, slots=True)
class ExecutorOptions:
    """How executors on a cluster get their Python: `env` is `auto`, `none` or an archive URI (`alias` from its
    `#fragment`, default acid_env); `python` the executors' interpreter when no environment is shipped; `image` a
    Kubernetes container image; `python_prefix` where the nodes' Python lives, for a built environment."""

    env: str = ENV_AUTO
    python: str | None = None
    python_prefix: str | None = None
    image: str | None = None
    build_dir: str | None = None


def is_local_master(master: str) -> bool:
    """`local`, `local[n]`, `local[*]`, `local-cluster[...]`: executors on this machine, with this interpreter."""
    return bool(_LOCAL_MASTER.fullmatch(master))


def options_from_extra(extra: Mapping[str, object], *, build_dir: str | None = None) -> ExecutorOptions:
    """The options of an Airflow connection's extra (keys `OPTION_KEYS`; other `acid-` keys are refused).

    Raises:
        ShippingError: an unknown `acid-` key or a bad value, named with the value in one line.
    """
    known = set(OPTION_KEYS.values())
    unknown = sorted(str(key) for key in extra if str(key).startswith("acid-") and key not in known)
    if unknown:
        raise ShippingError(f"unknown connection extra {unknown[0]!r}: expected one of {', '.join(sorted(known))}")
    values = {field: extra.get(key) for field, key in OPTION_KEYS.items()}
    return _parse(values, OPTION_KEYS, build_dir=build_dir)


def options_from_env(environ: Mapping[str, str] | None = None) -> ExecutorOptions:
    """The options of the environment variables `OPTION_VARIABLES` and `ACID_SHIP_DIR` (unset or empty: default).

    Raises:
        ShippingError: a bad value, named with its variable.
    """
    environ = os.environ if environ is None else environ
    values = {field: environ.get(name) or None for field, name in OPTION_VARIABLES.items()}
    return _parse(values, OPTION_VARIABLES, build_dir=environ.get(BUILD_DIR_VARIABLE) or None)


def _parse(values: Mapping[str, object], names: Mapping[str, str], *, build_dir: str | None) -> ExecutorOptions:
    checked: dict[str, str | None] = {}
    for field, value in values.items():
        if value is not None and (not isinstance(value, str) or not value.strip() or value != value.strip()
                                  or any(c in value for c in ",\n\r\t")):
            raise ShippingError(f"{names[field]} {value!r}: expected a non-empty string without spaces around it, "
                                "commas or line breaks")
        checked[field] = value
    python, prefix, image = checked["python"], checked["python_prefix"], checked["image"]
    env = checked["env"] or (ENV_NONE if python or image else ENV_AUTO)
    if env not in (ENV_AUTO, ENV_NONE):
        _check_archive_uri(env, names["env"])
    if python is not None:
        if env != ENV_NONE:
            raise ShippingError(f"{names['python']} {python!r} names the executors' Python, but {names['env']} "
                                f"{env!r} ships one: set {names['env']} to none, or drop {names['python']}")
        if not (os.path.isabs(python) or "/" not in python):
            raise ShippingError(f"{names['python']} {python!r}: expected an absolute path on the nodes "
                                "(/usr/bin/python3.11) or a command on their PATH (python3.11)")
    if prefix is not None:
        if env != ENV_AUTO:
            raise ShippingError(f"{names['python_prefix']} {prefix!r} applies to a built environment only, "
                                f"but {names['env']} is {env!r}: set {names['env']} to auto, or drop it")
        if not os.path.isabs(prefix):
            raise ShippingError(f"{names['python_prefix']} {prefix!r}: expected an absolute path (/usr)")
    if image is not None and any(c.isspace() for c in image):
        raise ShippingError(f"{names['image']} {image!r}: expected a container image name")
    if build_dir is not None and ("," in build_dir or "#" in build_dir):
        raise ShippingError(f"{BUILD_DIR_VARIABLE} {build_dir!r}: a path without ',' or '#' (Spark splits on them)")
    return ExecutorOptions(env=env, python=python, python_prefix=prefix, image=image, build_dir=build_dir)


def _check_archive_uri(value: str, name: str) -> None:
    match = re.fullmatch(r"(?:([A-Za-z][A-Za-z0-9+.-]*):)?(//([^/]*))?([^#]*)(?:#([A-Za-z0-9_.-]+))?", value)
    if match is None or not (match.group(1) or value.startswith("/")):
        raise ShippingError(f"{name} {value!r}: expected auto, none, or the URI of a packed environment "
                            "(hdfs:///envs/acid.tar.gz, s3a://bucket/acid.tar.gz, /shared/acid.tar.gz)")
    if "@" in (match.group(3) or ""):
        raise ShippingError(f"{name} {value!r}: the URI carries credentials, which Spark logs and shows: give them "
                            "to the filesystem's own configuration instead")
    if not match.group(4).endswith(_ARCHIVE_SUFFIXES):
        raise ShippingError(f"{name} {value!r}: expected a .tar.gz, .tgz, .tar or .zip archive")


def executor_conf(master: str, options: ExecutorOptions, *, driver_python: str | None = None) -> dict[str, str]:
    """The Spark settings that give `master`'s executors this project's code and a Python that runs it.

    Local masters: none (executors run this interpreter, as before). Cluster masters: the code zip
    (`spark.submit.pyFiles`), the environment (`spark.archives`, built when `options.env` is auto) and
    `spark.pyspark.python` for the executors (never this interpreter), `spark.pyspark.driver.python` =
    `driver_python` (default this interpreter: the driver runs here, in client mode), and the container image.

    Raises:
        ShippingError: the options do not fit the master, or the zip or environment cannot be built.
    """
    if options.image is not None and not master.startswith("k8s://"):
        raise ShippingError(f"{OPTION_KEYS['image']} {options.image!r} needs a k8s:// master, not {master!r}")
    if is_local_master(master):
        return {}
    build_dir = resolve_build_dir(options.build_dir)
    conf = {"spark.submit.pyFiles": str(code_zip(build_dir)),
            "spark.pyspark.driver.python": driver_python or sys.executable}
    if options.env == ENV_NONE:
        conf["spark.pyspark.python"] = options.python or DEFAULT_EXECUTOR_PYTHON
    else:
        if options.env == ENV_AUTO:
            archive, alias = str(env_archive(build_dir, python_prefix=options.python_prefix)), ENV_ALIAS
        else:
            archive, _, alias = options.env.partition("#")
            alias = alias or ENV_ALIAS
        conf["spark.archives"] = f"{archive}#{alias}"
        conf["spark.pyspark.python"] = f"./{alias}/bin/python"
    if options.image is not None:
        conf["spark.kubernetes.container.image"] = options.image
    return conf


def combine_conf(conf: Mapping[str, str], shipped: Mapping[str, str]) -> dict[str, str]:
    """`conf` with `shipped` applied; the comma-separated lists (`spark.archives`, `spark.submit.pyFiles`) joined,
    the shipped entries first, so a job's own archives and files still reach the executors."""
    combined = dict(conf)
    for key, value in shipped.items():
        if key in ("spark.archives", "spark.submit.pyFiles") and combined.get(key):
            combined[key] = f"{value},{combined[key]}"
        else:
            combined[key] = value
    return combined


def resolve_build_dir(build_dir: str | None = None) -> Path:
    """`build_dir`, else `ACID_SHIP_DIR`, else `$ACID_HOME/ship`, else `~/.cache/acid/ship`; created if missing."""
    chosen = build_dir or os.environ.get(BUILD_DIR_VARIABLE)
    if not chosen:
        home = os.environ.get("ACID_HOME")
        chosen = os.path.join(home, "ship") if home else os.path.join(Path.home(), ".cache", "acid", "ship")
    path = Path(chosen).resolve()
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ShippingError(f"cannot create the build directory {str(path)!r} for the executors' code and "
                            f"environment: {exc.strerror}; set {BUILD_DIR_VARIABLE} to a writable directory") from None
    return path


def package_files(packages: tuple[str, ...] = SHIPPED_PACKAGES) -> list[tuple[str, Path]]:
    """(name inside the zip, file) of every file of the installed `packages`, found with importlib (no import), in
    name order; bytecode and hidden files left out.

    Raises:
        ShippingError: a package is not installed.
    """
    files = []
    for package in packages:
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            raise ShippingError(f"the package {package!r} is not importable here: install this project "
                                "(pip install -e .) before shipping it to executors")
        root = Path(list(spec.submodule_search_locations)[0])
        for directory, subdirectories, names in os.walk(root):
            subdirectories[:] = sorted(d for d in subdirectories if d != "__pycache__" and not d.startswith("."))
            for name in names:
                if not name.startswith(".") and not name.endswith((".pyc", ".pyo")):
                    path = Path(directory, name)
                    files.append((f"{package}/{path.relative_to(root).as_posix()}", path))
    return sorted(files)


def code_zip(build_dir: Path, *, packages: tuple[str, ...] = SHIPPED_PACKAGES) -> Path:
    """`acid-code-<hash>.zip` in `build_dir`: `packages` (`acid_core`, `spark_jobs`) as installed now (made when
    missing)."""
    files = [(name, path.read_bytes()) for name, path in package_files(packages)]
    digest = hashlib.sha256()
    for name, data in files:
        digest.update(f"{name}\0{len(data)}\0".encode())
        digest.update(data)
    target = build_dir / f"acid-code-{digest.hexdigest()[:20]}.zip"
    if target.exists():
        return target
    with _temporary(target) as temporary:
        with zipfile.ZipFile(temporary, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            for name, data in files:
                info = zipfile.ZipInfo(name, date_time=_ZIP_TIME)
                info.compress_type = zipfile.ZIP_DEFLATED
                info.external_attr = 0o644 << 16
                archive.writestr(info, data)
    return target


def executor_requirements(distributions: tuple[str, ...] = EXECUTOR_DISTRIBUTIONS) -> dict[str, str]:
    """Normalised name -> installed version of `distributions` and everything they require (extras aside), as
    installed in this interpreter: the environment pins exactly what the driver runs.

    Raises:
        ShippingError: one of `distributions` is not installed.
    """
    pins: dict[str, str] = {}
    pending = [(name, True) for name in distributions]
    while pending:
        name, required = pending.pop()
        key = re.sub(r"[-_.]+", "-", name).lower()
        if key in pins:
            continue
        try:
            distribution = importlib.metadata.distribution(key)
        except importlib.metadata.PackageNotFoundError:
            if required:
                raise ShippingError(f"{name!r}, which executors import, is not installed here: install the "
                                    "project's requirements.txt") from None
            continue  # a dependency for another platform or Python (its marker left it out here)
        pins[key] = distribution.version
        for requirement in distribution.requires or []:
            if not re.search(r"extra\s*==", requirement):
                named = re.match(r"[A-Za-z0-9._-]+", requirement)
                assert named is not None, f"requirement {requirement!r} starts with a distribution name"
                pending.append((named.group(), False))
    return dict(sorted(pins.items()))


def python_tag() -> str:
    """This interpreter as the environment's hash sees it: implementation, version, machine."""
    return f"{sys.implementation.name}-{platform.python_version()}-{sys.platform}-{platform.machine()}"


def env_archive(build_dir: Path, *, python_prefix: str | None = None,
                requirements: Mapping[str, str] | None = None) -> Path:
    """`acid-env-<hash>.tar.gz` in `build_dir`: a venv of `requirements` (default `executor_requirements()`) on this
    Python, packed with venv-pack; built when missing, under a lock that concurrent builders wait on.

    `python_prefix` relinks the environment's Python to `<prefix>/bin/python3.<minor>` on the nodes (venv-pack's
    `--python-prefix`); without it, the nodes need this Python at this same path (`sys.base_prefix`).

    Raises:
        ShippingError: the venv, pip or venv-pack failed (the tool's message is in the error).
    """
    pins = dict(executor_requirements() if requirements is None else requirements)
    key = json.dumps({"format": BUILD_FORMAT, "python": python_tag(), "base": sys.base_prefix,
                      "python_prefix": python_prefix, "pins": pins}, sort_keys=True)
    name = f"acid-env-{hashlib.sha256(key.encode()).hexdigest()[:20]}"
    target = build_dir / f"{name}.tar.gz"
    if target.exists():
        return target
    with _locked(build_dir / f".{name}.lock"):
        if target.exists():  # another builder finished while this one waited
            return target
        with tempfile.TemporaryDirectory(prefix=f".{name}.build-", dir=build_dir) as scratch:
            venv = Path(scratch, "venv")
            _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], "create the executors' venv")
            if pins:
                _run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "--no-deps",
                      "--disable-pip-version-check", "--no-input", "--quiet",
                      *(f"{pin}=={version}" for pin, version in pins.items())],
                     "install the executors' packages (pip honours PIP_INDEX_URL / PIP_FIND_LINKS)")
            (venv / ENV_KEY_FILE).write_text(key + "\n")
            with _temporary(target) as temporary:
                _pack(venv, temporary, python_prefix)
        (build_dir / f"{name}.json").write_text(key + "\n")
    return target


def _pack(venv: Path, output: Path, python_prefix: str | None) -> None:
    """venv-pack `venv` into `output` (tar.gz). venv-pack's python_prefix rewrites a link to `<base>/bin/python...` by
    replacing its `<base>/bin/python` prefix with `<prefix>/bin/python3.<minor>` (so `python3.11` would become
    `python3.113.11`): the venv's absolute interpreter links are pointed at `<base>/bin/python` first."""
    try:
        import venv_pack
    except ImportError:
        raise ShippingError("venv-pack is not installed: pip install venv-pack (requirements.txt), or set "
                            f"{OPTION_KEYS['env']} / {OPTION_VARIABLES['env']} to a prebuilt archive") from None
    if python_prefix is not None:
        home = next(line.split("=", 1)[1].strip() for line in (venv / "pyvenv.cfg").read_text().splitlines()
                    if line.split("=", 1)[0].strip() == "home")
        for link in (venv / "bin").iterdir():
            if link.is_symlink() and os.path.isabs(os.readlink(link)):
                link.unlink()
                link.symlink_to(os.path.join(os.path.dirname(home), "bin", "python"))
    try:
        venv_pack.pack(prefix=str(venv), output=str(output), format="tar.gz", python_prefix=python_prefix, force=True)
    except venv_pack.VenvPackException as exc:
        raise ShippingError(f"venv-pack could not pack the executors' environment: {exc}") from None


def _run(command: list[str], what: str) -> None:
    result = subprocess.run(command, capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL)
    if result.returncode != 0:
        detail = " ".join((result.stderr or result.stdout).strip().splitlines()[-3:])
        raise ShippingError(f"cannot {what}: {' '.join(command[:4])} ... exited {result.returncode}: {detail}")


@contextlib.contextmanager
def _temporary(target: Path) -> Iterator[Path]:
    """A temporary path beside `target`, renamed to it on success (atomic: readers see all of it or nothing)."""
    descriptor, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(descriptor)
    try:
        yield Path(name)
        os.chmod(name, 0o644)
        os.replace(name, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive flock on `path` (released by the kernel should the holder die)."""
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def main(argv: list[str] | None = None) -> int:
    """`python -m acid_deploy.shipping code|env [--python-prefix P] [--build-dir D]`: build and print the path (to
    upload a prebuilt environment, e.g. to hdfs:///envs/, and name it in acid-executor-env)."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m acid_deploy.shipping", description=main.__doc__)
    parser.add_argument("what", choices=["code", "env"])
    parser.add_argument("--python-prefix", help="where the nodes' Python lives (venv-pack --python-prefix)")
    parser.add_argument("--build-dir", help=f"default: {BUILD_DIR_VARIABLE}, $ACID_HOME/ship or ~/.cache/acid/ship")
    args = parser.parse_args(argv)
    try:
        build_dir = resolve_build_dir(args.build_dir)
        print(code_zip(build_dir) if args.what == "code" else env_archive(build_dir, python_prefix=args.python_prefix))
    except ShippingError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
