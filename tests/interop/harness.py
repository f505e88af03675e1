"""Run Hive 2.3's own ACID readers, writer and getAcidState (HiveAcidHarness.java) from Python tests.

The pyspark wheel ships Hive 2.3.10's jars; `HiveAcidHarness.java` is compiled against them once per test session
and started with `java` for each batch of work (a JVM start costs one to two seconds, so callers should batch:
`read` takes several directories and `batch` runs any mix of jobs in one JVM).

Snapshots are given as Hive 3 ValidWriteIdList strings (``db.tbl:hwm:minOpen:open:aborted``), the same text the
`acid` CLI takes. Hive 2.3 has no write ids: the ids in its file and directory names are transaction ids checked
against one ValidReadTxnList (hive-acid-reference.md section 10), so the string is translated to that list's high
watermark, exceptions (open and aborted alike) and smallest open id. It is parsed here, not with acid_core, so the
oracle does not share code with what it checks.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

JAVA_SOURCE = Path(__file__).with_name("HiveAcidHarness.java")
MAIN_CLASS = "HiveAcidHarness"
LONG_MAX = 2**63 - 1

# Hive 2.3 on Java 17 needs these packages opened to the unnamed module (the list Spark itself passes); without
# java.net it fails while starting.
ADD_OPENS = tuple(f"--add-opens=java.base/{package}=ALL-UNNAMED" for package in (
    "java.lang", "java.lang.invoke", "java.lang.reflect", "java.io", "java.net", "java.nio", "java.util",
    "java.util.concurrent", "java.util.concurrent.atomic", "sun.nio.ch", "sun.nio.cs", "sun.security.action",
    "sun.util.calendar"))

# hive-common 2.3's ValidReadTxnList must win over the newer one in hive-storage-api (both use the same class name).
_FIRST_JARS = ("hive-common-2.3.10.jar", "hive-exec-2.3.10-core.jar")


class HiveHarnessError(RuntimeError):
    """A harness command failed; the message carries the command and Hive's stderr."""


def hive_jars_dir() -> Path:
    """The pyspark wheel's jar directory (Hive 2.3.10, Hadoop client, ORC, Jackson ...)."""
    import pyspark

    return Path(os.path.dirname(pyspark.__file__)) / "jars"


def hive_classpath(jars_dir: Path) -> list[str]:
    """Every jar of the wheel, hive-common first so that Hive 2.3's ValidReadTxnList is the one loaded."""
    jars = sorted(p for p in jars_dir.glob("*.jar"))
    first = [jars_dir / name for name in _FIRST_JARS]
    missing = [str(p) for p in first if not p.exists()]
    if missing:
        raise HiveHarnessError(f"the pyspark wheel lacks Hive 2.3.10 jars: {missing}")
    return [str(p) for p in first] + [str(p) for p in jars if p not in first]


@dataclass(frozen=True, slots=True)
class HiveSnapshot:
    """What Hive 2.3 may read: ids above `high_watermark` or in `exceptions` are invalid.

    `min_open` (the smallest open id) only decides which base may be used; `compactor` selects Hive 2.3's
    ValidCompactorTxnList (a delta is used only if it lies entirely at or below the high watermark).
    """

    high_watermark: int = LONG_MAX
    exceptions: tuple[int, ...] = ()
    min_open: int = LONG_MAX
    compactor: bool = False

    @classmethod
    def from_write_ids(cls, write_ids: str | None, *, compactor: bool = False) -> HiveSnapshot:
        """Translate a Hive 3 ValidWriteIdList string `table:hwm:minOpen:open:aborted` (None = all committed)."""
        if write_ids is None or write_ids == "":
            return cls(compactor=compactor)
        parts = str(write_ids).split(":")
        if len(parts) < 3:
            raise ValueError(f"write-id list {write_ids!r} must look like table:hwm:minOpen[:open[:aborted]]")
        high_watermark, min_open = int(parts[1]), int(parts[2])
        open_ids = _ids(parts[3]) if len(parts) > 3 else ()
        aborted_ids = _ids(parts[4]) if len(parts) > 4 else ()
        exceptions = tuple(sorted(set(open_ids) | set(aborted_ids)))
        if compactor:
            # ValidCompactorTxnList drops exceptions above the high watermark itself.
            return cls(high_watermark, exceptions, compactor=True)
        if min_open == LONG_MAX and open_ids:
            min_open = min(open_ids)
        return cls(high_watermark, exceptions, min_open)

    def to_job(self) -> dict:
        return {"hwm": self.high_watermark, "exceptions": list(self.exceptions), "min_open": self.min_open,
                "compactor": self.compactor}

    def to_args(self) -> list[str]:
        args = ["--hwm", str(self.high_watermark), "--min-open", str(self.min_open),
                "--exceptions", ",".join(str(i) for i in self.exceptions)]
        return args + (["--compactor"] if self.compactor else [])


def _ids(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(",") if part.strip())


def _snapshot(write_ids: object, compactor: bool = False) -> HiveSnapshot:
    """A HiveSnapshot as is; otherwise a write-id list string, or an object whose str() is one (acid_core's lists)."""
    if isinstance(write_ids, HiveSnapshot):
        return write_ids
    return HiveSnapshot.from_write_ids(None if write_ids is None else str(write_ids), compactor=compactor)


def _columns_arg(columns: Sequence[tuple[str, str]]) -> str:
    return ",".join(f"{name}:{type_}" for name, type_ in columns)


class HiveHarness:
    """A compiled HiveAcidHarness and the command line to start it."""

    def __init__(self, classes_dir: Path, classpath: Sequence[str], *, java: str = "java", timeout: float = 120.0):
        self.classes_dir = Path(classes_dir)
        self.classpath = [str(self.classes_dir), *classpath]
        self.java = java
        self.timeout = timeout
        self.jvm_starts = 0

    @classmethod
    def compile(cls, build_dir: Path, *, jars_dir: Path | None = None, timeout: float = 120.0) -> HiveHarness:
        """Compile HiveAcidHarness.java into `build_dir` against the wheel's jars.

        Raises:
            HiveHarnessError: java or javac is missing, or the compilation failed.
        """
        javac, java = shutil.which("javac"), shutil.which("java")
        if javac is None or java is None:
            raise HiveHarnessError("java and javac (JDK 17) must be on PATH to run the Hive interop harness")
        classpath = hive_classpath(jars_dir or hive_jars_dir())
        build_dir = Path(build_dir)
        build_dir.mkdir(parents=True, exist_ok=True)
        command = [javac, "-nowarn", "-encoding", "UTF-8", "-d", str(build_dir), "-cp", os.pathsep.join(classpath),
                   str(JAVA_SOURCE)]
        completed = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
        if completed.returncode != 0:
            raise HiveHarnessError(f"javac failed ({completed.returncode}):\n{completed.stderr[-4000:]}")
        return cls(build_dir, classpath, java=java, timeout=timeout)

    # ------------------------------------------------------------------------------------------------ low level

    def run(self, args: Sequence[str], *, stdin: str | None = None) -> list[dict]:
        """Start the JVM with `args`; return the JSON objects it printed (one per line).

        Raises:
            HiveHarnessError: non-zero exit or timeout, with the command's stderr.
        """
        command = [self.java, "-Xss4m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", *ADD_OPENS,
                   "-cp", os.pathsep.join(self.classpath), MAIN_CLASS, *args]
        self.jvm_starts += 1
        try:
            completed = subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=self.timeout,
                                       check=False)
        except subprocess.TimeoutExpired as exc:
            raise HiveHarnessError(f"HiveAcidHarness {' '.join(args[:1])} timed out after {self.timeout}s:\n"
                                   f"{(exc.stderr or '')[-4000:]}") from exc
        if completed.returncode != 0:
            raise HiveHarnessError(f"HiveAcidHarness {' '.join(args)} failed ({completed.returncode}):\n"
                                   f"{_error_lines(completed.stderr)}")
        return [json.loads(line) for line in completed.stdout.splitlines() if line.strip()]

    def batch(self, jobs: Iterable[Mapping]) -> list[dict]:
        """Run jobs ({"op": "read"|"write"|"state", ...}) in one JVM; one {"ok", "result"|"error"} per job."""
        jobs = list(jobs)
        if not jobs:
            return []
        results = self.run(["batch"], stdin=json.dumps(jobs))
        if len(results) != len(jobs):
            raise HiveHarnessError(f"batch of {len(jobs)} jobs produced {len(results)} results")
        return results

    # ------------------------------------------------------------------------------------------------ jobs

    @staticmethod
    def read_job(paths: str | os.PathLike | Sequence[str | os.PathLike], *, columns: Sequence[tuple[str, str]],
                 write_ids: str | HiveSnapshot | None = None, mode: str = "row") -> dict:
        """A `read` job: rows of one or more partition directories through Hive's row or vectorized reader."""
        if isinstance(paths, (str, os.PathLike)):
            paths = [paths]
        return {"op": "read", "dirs": [str(p) for p in paths], "columns": _columns_arg(columns), "mode": mode,
                **_snapshot(write_ids).to_job()}

    @staticmethod
    def write_job(spec: Mapping) -> dict:
        """A `write` job: one transaction's events for one bucket through Hive 2.3's OrcRecordUpdater."""
        return {"op": "write", **spec}

    @staticmethod
    def state_job(path: str | os.PathLike, *, write_ids: str | HiveSnapshot | None = None,
                  compactor: bool = False) -> dict:
        """A `state` job: Hive 2.3's AcidUtils.getAcidState of one partition directory."""
        return {"op": "state", "dir": str(path), **_snapshot(write_ids, compactor).to_job()}

    def run_jobs(self, jobs: Sequence[Mapping]) -> list:
        """Run jobs in one JVM and return their results, raising on the first failed job."""
        results = []
        for job, outcome in zip(jobs, self.batch(jobs)):
            if not outcome["ok"]:
                raise HiveHarnessError(f"{job['op']} job {_describe_job(job)} failed: {outcome['error']}")
            results.append(outcome["result"])
        return results

    # ------------------------------------------------------------------------------------------------ one-shot

    def hive_read(self, paths, *, columns: Sequence[tuple[str, str]], write_ids: str | HiveSnapshot | None = None,
                  mode: str = "row") -> list[dict]:
        """Rows as Hive 2.3 reads them: `{"row__id": {"writeid", "bucketid", "rowid"}, <column>: value, ...}`."""
        (rows,) = self.run_jobs([self.read_job(paths, columns=columns, write_ids=write_ids, mode=mode)])
        return rows

    def hive_write(self, spec: Mapping | Sequence[Mapping]) -> list[dict]:
        """Write one spec (or several, in order) with OrcRecordUpdater; returns `{"files": [...]}` per spec."""
        specs = [spec] if isinstance(spec, Mapping) else list(spec)
        return self.run_jobs([self.write_job(s) for s in specs])

    def hive_state(self, path, *, write_ids: str | HiveSnapshot | None = None, compactor: bool = False) -> dict:
        """Hive 2.3's getAcidState: `{"base", "deltas", "obsolete", "original"}` (names relative to `path`)."""
        (state,) = self.run_jobs([self.state_job(path, write_ids=write_ids, compactor=compactor)])
        return state


def _describe_job(job: Mapping) -> str:
    return str(job.get("dirs") or job.get("dir") or job.get("partition_dir"))


def _error_lines(stderr: str) -> str:
    """The harness's own error line first, then the tail of the log (stack traces are long)."""
    errors = [line for line in stderr.splitlines() if line.startswith(("error:", "usage error:"))]
    return "\n".join(errors + ["--- stderr tail ---", stderr[-3000:]])


def sort_rows(rows: Iterable[Mapping]) -> list[dict]:
    """Rows ordered by ROW__ID as Hive's RecordIdentifier orders them (write id, bucket property, row id)."""
    return sorted((dict(r) for r in rows),
                  key=lambda r: (r["row__id"]["writeid"], r["row__id"]["bucketid"], r["row__id"]["rowid"]))
