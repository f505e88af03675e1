"""A class-data-sharing archive of the classes a Spark driver loads, made once per machine and Spark and JDK install,
so the tests' spark-submit JVMs map those classes instead of loading and verifying them (JDK 13+'s dynamic CDS:
`-XX:ArchiveClassesAtExit` once, `-XX:SharedArchiveFile` after). A local Spark application then starts in about 5 s
instead of 9 s here; the tests start several dozen.

The first test that needs a JVM starts a process in the background that makes the archive (one at a time, under an
flock: a second maker finds the lock held and leaves), by a small job that touches what the tests' jobs do (a
session, SQL, ORC, a Python worker through Arrow), under `.cache/jvm/` of the checkout, named for what it depends on
(the JDK, Spark's jars, the JVM options). No test waits for it: the JVMs started before it is there run without it
(on a fresh clone the other worker used to wait 50 s for it). A JVM whose class path differs (a standalone cluster's
daemons, the Hive interop harness) ignores it; `-Xlog:cds=off` keeps that quiet. If the archive cannot be made, the
tests run without it: it saves time, it proves nothing. A maker still running when its test process ends is stopped.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import functools
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / ".cache" / "jvm"
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"
DUMP_TIMEOUT_S = 300

_JOB = """
import sys
import pyarrow as pa
from pyspark.sql import SparkSession
spark = SparkSession.builder.master("local[1]").appName("cds-archive").getOrCreate()
frame = spark.range(1000).selectExpr("id", "cast(id as string) as name", "id / 8 as amount")
frame = frame.mapInArrow(lambda batches: batches, frame.schema)
frame.write.mode("overwrite").orc(sys.argv[1])
spark.read.orc(sys.argv[1]).createOrReplaceTempView("t")
spark.sql("select name, count(*) from t group by name order by 2 desc limit 3").collect()
spark.stop()
"""


def _spark_home() -> Path | None:
    try:
        import pyspark
    except ImportError:
        return None
    return Path(pyspark.__file__).resolve().parent


@functools.cache
def archive_path(jvm_options: str) -> Path | None:
    """Where the archive for this JDK, Spark install and these options lives (made or not); None without java or
    pyspark. The JVM ignores an archive once a jar on its class path has another size or modification time (the
    same Spark reinstalled), so both name it."""
    java = shutil.which("java")
    home = _spark_home()
    if java is None or home is None or not (home / "jars").is_dir():
        return None
    java = os.path.realpath(java)
    jars = sorted((entry.name, stat.st_size, stat.st_mtime_ns)
                  for entry in os.scandir(home / "jars") for stat in [entry.stat()])
    key = hashlib.sha256(repr((java, os.stat(java).st_mtime_ns, jars, jvm_options)).encode()).hexdigest()[:16]
    return CACHE / f"spark-{key}.jsa"


def options_with_archive(jvm_options: str) -> str:
    """`jvm_options` plus the archive's if it is there; else `jvm_options` alone, with the archive's maker started in
    the background (once per process)."""
    path = archive_path(jvm_options)
    if path is None:
        return jvm_options
    if not path.exists():
        _start_maker(path, jvm_options)
        return jvm_options
    return f"{jvm_options} -XX:SharedArchiveFile={path} {QUIET}"


_maker: subprocess.Popen | None = None


def _start_maker(path: Path, jvm_options: str) -> None:
    global _maker
    if _maker is not None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.parent / f"{path.name}.log", "w") as log:
        _maker = subprocess.Popen([sys.executable, __file__, str(path), jvm_options], stdout=log,
                                  stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    atexit.register(_stop_maker)


def _stop_maker() -> None:
    if _maker is not None and _maker.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(_maker.pid, signal.SIGKILL)  # its spark-submit and JVM too: a partial archive is never used
        _maker.wait()


def _make(path: Path, jvm_options: str) -> None:
    with open(f"{path}.lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return  # another process is making it
        if path.exists():
            return
        with tempfile.TemporaryDirectory(prefix="cds-archive-") as scratch:
            job = Path(scratch) / "job.py"
            job.write_text(_JOB)
            partial = Path(f"{path}.partial")  # beside it: renamed into place whole
            partial.unlink(missing_ok=True)
            environment = {**os.environ, "SPARK_SUBMIT_OPTS": f"{jvm_options} -XX:ArchiveClassesAtExit={partial} "
                                                              f"{QUIET} -Xlog:cds+map=off",
                           "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
            spark_submit = Path(sys.executable).parent / "spark-submit"
            with contextlib.suppress(OSError, subprocess.TimeoutExpired):
                done = subprocess.run([str(spark_submit), str(job), str(Path(scratch) / "out")], env=environment,
                                      capture_output=True, timeout=DUMP_TIMEOUT_S, check=False)
                if done.returncode == 0 and partial.exists():
                    os.replace(partial, path)
            partial.unlink(missing_ok=True)
        for stale in path.parent.glob("spark-*.jsa"):  # made for a Spark, JDK or options no longer here
            if stale != path:
                stale.unlink(missing_ok=True)


if __name__ == "__main__":  # the maker: `python jvm_archive.py <archive path> <JVM options>`
    _make(Path(sys.argv[1]), sys.argv[2])
