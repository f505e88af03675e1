"""Under CI a test never skips for a missing tool: the Hive interoperability tests fail with one clear line when the
Java compiler is missing (as the PostgreSQL and browser tests already do), and are skipped elsewhere."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ONE_INTEROP_TEST = "tests/interop/test_hive_interop.py::test_our_plain_table_rows_are_the_expected_ones"


def _run_without_javac(tmp_path: Path, *, ci: str | None) -> subprocess.CompletedProcess:
    """pytest on one interop test with a PATH that has java (and this Python) but no javac."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    java = shutil.which("java")
    assert java is not None, "java must be installed for this test"
    (bin_dir / "java").symlink_to(java)
    env = {key: value for key, value in os.environ.items() if key not in ("CI", "JAVA_HOME")}
    env["PATH"] = str(bin_dir)
    if ci is not None:
        env["CI"] = ci
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", ONE_INTEROP_TEST],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def test_under_ci_a_missing_javac_fails_the_interop_tests_in_one_line(tmp_path):
    result = _run_without_javac(tmp_path, ci="true")
    assert result.returncode == 1, result.stdout[-2000:]
    assert "CI is set and the Hive interop tests need java and javac (JDK 17) on PATH" in result.stdout
    assert "1 error" in result.stdout or "1 failed" in result.stdout


def test_outside_ci_a_missing_javac_skips_them(tmp_path):
    result = _run_without_javac(tmp_path, ci=None)
    assert result.returncode == 0 and "1 skipped" in result.stdout, result.stdout[-2000:]
