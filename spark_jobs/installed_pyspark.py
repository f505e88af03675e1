"""Spark's Python processes import pyspark and py4j from their installed packages, not from Spark's zips.

Spark puts `$SPARK_HOME/python/lib/pyspark.zip` and py4j's `py4j-<version>-src.zip` first on the Python path of a
spark-submit'd driver and of every Python worker. Python keeps no bytecode for modules imported from a zip, so each
of those processes compiled some 200 of pyspark's modules from their sources: about 0.5 s of CPU per Python worker
and per driver (measured: importing `pyspark.worker` and its Arrow serializers took 0.59-0.64 s of CPU from the
zips and 0.11-0.13 s from the installed package, whose bytecode pip compiled at install time).

`prefer_installed()` takes a zip off `sys.path` only where it is the installed package's own: pyspark's when
SPARK_HOME is the installed `pyspark` package directory (pip's layout), py4j's when the installed py4j has the zip's
version. Anything else (a Spark distribution with a pyspark of its own, no installed package, pyspark already
imported) leaves the path as it is. `spark_jobs` calls it when it is imported, which for a driver is before
`spark_jobs.session` imports pyspark; the local Python workers' daemon (`spark_jobs.python_daemon`) calls it before
it imports pyspark's. Cost: a few `stat`s and one small file read, once per process.
"""

from __future__ import annotations

import importlib.machinery
import os
import re
import sys
from collections.abc import Container, Sequence
from pathlib import Path

_PY4J_ZIP = re.compile(r"py4j-(?P<version>[0-9][0-9A-Za-z.]*)-src\.zip")
_VERSION = re.compile(r"""^__version__\s*=\s*["']([^"']+)["']""", re.MULTILINE)


def prefer_installed() -> None:
    """Take off `sys.path` the Spark zips whose modules the installed pyspark and py4j hold (see the module)."""
    sys.path[:] = without_spark_zips(sys.path, sys.modules)


def without_spark_zips(path: Sequence[str], loaded: Container[str]) -> list[str]:
    """`path` without Spark's pyspark and py4j zips when the installed packages found on the rest of it are the
    same release (both zips or neither); `path` as it is when pyspark or py4j is among the `loaded` modules."""
    path = list(path)
    if "pyspark" in loaded or "py4j" in loaded:
        return path  # already imported from wherever it was found first: mixing the two would be worse
    zips = [entry for entry in path if entry.endswith(".zip") and Path(entry).parent.parts[-2:] == ("python", "lib")]
    others = [entry for entry in path if entry not in zips]
    # both or neither: pyspark's modules import py4j's of their own release
    return others if zips and all(_installed_copy(entry, others) for entry in zips) else path


def _installed_copy(zip_path: str, path: list[str]) -> bool:
    """Whether Spark's zip holds what the package installed on `path` holds: `pyspark.zip` of a SPARK_HOME that is the
    installed pyspark's directory, py4j's zip of the installed py4j's version (any other zip: no)."""
    name = os.path.basename(zip_path)
    if name == "pyspark.zip":
        installed = _installed_package("pyspark", path)
        return installed is not None and os.path.realpath(installed) == os.path.realpath(Path(zip_path).parents[2])
    match = _PY4J_ZIP.fullmatch(name)
    installed = _installed_package("py4j", path) if match else None
    return match is not None and installed is not None and _package_version(installed) == match.group("version")


def _installed_package(name: str, path: list[str]) -> str | None:
    """The directory of package `name` as found on `path`, without importing it; None if it is not there."""
    spec = importlib.machinery.PathFinder.find_spec(name, path)
    if spec is None or not spec.submodule_search_locations or spec.origin is None:
        return None
    return os.path.dirname(spec.origin)


def _package_version(directory: str) -> str | None:
    try:
        with open(os.path.join(directory, "version.py"), encoding="utf-8") as source:
            found = _VERSION.search(source.read())
    except OSError:
        return None
    return found.group(1) if found else None
