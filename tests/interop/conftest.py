"""Session fixture `hive`: HiveAcidHarness.java compiled once against the pyspark wheel's Hive 2.3.10 jars."""

from __future__ import annotations

import os
import shutil

import pytest

from .harness import HiveHarness, HiveHarnessError


def _unavailable(message: str) -> None:
    """A missing tool fails the interop tests under CI (they are the project's evidence that Hive reads what it
    writes: a run without them must not pass), as a missing PostgreSQL or browser does, and skips them elsewhere."""
    if os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no"):
        pytest.fail(f"CI is set and {message}", pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="session")
def hive(tmp_path_factory) -> HiveHarness:
    """A compiled harness; without a JDK or the pyspark wheel the interop tests fail under CI, else are skipped."""
    if shutil.which("java") is None or shutil.which("javac") is None:
        _unavailable("the Hive interop tests need java and javac (JDK 17) on PATH")
    try:
        import pyspark  # noqa: F401  (only its jar directory is used)
    except ImportError:
        _unavailable("the Hive interop tests need the pyspark wheel (it ships Hive 2.3.10's jars)")
    try:
        return HiveHarness.compile(tmp_path_factory.mktemp("hive-harness-classes"))
    except HiveHarnessError as exc:
        pytest.fail(str(exc))
