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
    zips = [entry for entry in path if entry.endswith(".zip") and _in_spark_python_lib(entry)]
    if not zips:
        return path
    others = [entry for entry in path if entry not in zips]
    remove: list[str] = []
    for entry in zips:
        name = os.path.basename(entry)
        if name == "pyspark.zip":
            installed = _installed_package("pyspark", others)
            spark_home = os.path.dirname(os.path.dirname(os.path.dirname(entry)))
            if installed is not None and os.path.realpath(installed) == os.path.realpath(spark_home):
                remove.append(entry)
        elif match := _PY4J_ZIP.fullmatch(name):
            installed = _installed_package("py4j", others)
            if installed is not None and _package_version(installed) == match.group("version"):
                remove.append(entry)
    if len(remove) != len(zips):  # pyspark's modules import py4j's of their own release
        return path
    return others


def _in_spark_python_lib(entry: str) -> bool:
    parent = os.path.dirname(entry)
    return os.path.basename(parent) == "lib" and os.path.basename(os.path.dirname(parent)) == "python"


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
