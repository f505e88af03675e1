"""Session fixture `hive`: HiveAcidHarness.java compiled once against the pyspark wheel's Hive 2.3.10 jars."""

from __future__ import annotations

import shutil

import pytest

from .harness import HiveHarness, HiveHarnessError


@pytest.fixture(scope="session")
def hive(tmp_path_factory) -> HiveHarness:
    """A compiled harness; the interop tests are skipped when no JDK or no pyspark wheel is installed."""
    if shutil.which("java") is None or shutil.which("javac") is None:
        pytest.skip("the Hive interop tests need java and javac (JDK 17) on PATH")
    try:
        import pyspark  # noqa: F401  (only its jar directory is used)
    except ImportError:
        pytest.skip("the Hive interop tests need the pyspark wheel (it ships Hive 2.3.10's jars)")
    try:
        return HiveHarness.compile(tmp_path_factory.mktemp("hive-harness-classes"))
    except HiveHarnessError as exc:
        pytest.fail(str(exc))
