"""Major compaction with the table on an S3-compatible server vs on local disk, side by side in one run, and the S3
requests one compaction makes, by kind.

Table (as bench_snapshot_read.py builds it): base N rows + 10 insert deltas (1% each) + 5 delete deltas covering 10% of
all rows, bucket 0, ZLIB. Each repetition copies it, untimed, to a new local directory and to a new prefix of a
bucket on the S3 server (tests/s3_server.py: moto's server on loopback, in a process of its own, counting requests),
registers both copies with write ids 1..16 committed and runs one major compaction of each:
`CompactionWorker(metastore, runner=SparkRunner(spark)).run(id)` in this process, the whole worker protocol (claim,
compactor transaction, lock, listing, footers, plan, the Spark job, results, commit) on one SparkSession (local[2])
built once. On S3 the result is written under its final `base_N_v<txn>` name (no rename, no server-side copy).

The S3 server is moto's, written in Python and serving over HTTP on loopback: its per-request cost is not a real
object store's, so the ratio says what the object-store path costs here, and the request counts (which do not
depend on the server) say what it would cost on S3: a GET per footer and per stripe range read, a multipart upload
per file written, one listing per directory.

Run: `.venv/bin/python bench/bench_s3.py [--rows N] [--repeats R]` (about 2 minutes at the default size).
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import pyarrow.fs as pafs

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from bench_snapshot_read import COLUMNS, build_table  # noqa: E402
from support.s3_server import S3Server  # noqa: E402

from acid_core.compaction.worker import CompactionWorker  # noqa: E402
from acid_core.metastore import Metastore  # noqa: E402
from acid_core.metastore.codes import CompactionType  # noqa: E402
from spark_jobs.compact import SparkRunner  # noqa: E402
from spark_jobs.session import build_session  # noqa: E402

WRITES = 16  # write ids in the table: base 1, insert deltas 2..11, delete deltas 12..16
BUCKET = "bench-warehouse"


class Bench:
    def __init__(self, scratch: Path, server: S3Server, spark, rows: int) -> None:
        self.scratch, self.server, self.spark = scratch, server, spark
        self.metastore = Metastore(f"sqlite:///{scratch}/metastore.db", warehouse=str(scratch / "warehouse"))
        self.metastore.init()
        self.pristine = scratch / "pristine"
        build_table(self.pristine, rows, 10, max(rows // 100, 1), 0.10)
        self.s3 = pafs.S3FileSystem(region=os.environ["AWS_DEFAULT_REGION"], endpoint_override=server.endpoint)
        server.make_bucket(BUCKET)
        self.worker = CompactionWorker(self.metastore, worker_id="bench", runner=SparkRunner(spark))
        self.copies = 0
        self.bytes = sum(path.stat().st_size for path in self.pristine.rglob("*") if path.is_file())

    def register(self, location: str) -> int:
        """Record a table at `location`, commit write ids 1..16 for it, queue a major compaction (not timed)."""
        self.copies += 1
        name = f"copy_{self.copies}"
        self.metastore.catalog.create_table("default", name, COLUMNS, location=location,
                                            params={"transactional": "true"})
        txns = self.metastore.txns
        for _ in range(WRITES):
            txn_id = txns.open_txn()
            txns.allocate_write_ids([txn_id], "default", name)
            txns.commit(txn_id)
        return self.metastore.compactions.enqueue("default", name, None, CompactionType.MAJOR).compaction_id

    def local(self) -> float:
        location = self.scratch / f"local-{self.copies + 1}"
        shutil.copytree(self.pristine, location)
        compaction_id = self.register(str(location))
        os.sync()
        seconds = self._run(compaction_id)
        shutil.rmtree(location)
        return seconds

    def on_s3(self) -> tuple[float, dict[str, int]]:
        prefix = f"{BUCKET}/table-{self.copies + 1}"
        pafs.copy_files(str(self.pristine), prefix, source_filesystem=pafs.LocalFileSystem(),
                        destination_filesystem=self.s3)
        compaction_id = self.register(f"s3://{prefix}")
        self.server.reset_counts()
        seconds = self._run(compaction_id)
        counts = self.server.reset_counts()
        self.s3.delete_dir(prefix)
        return seconds, counts

    def _run(self, compaction_id: int) -> float:
        start = time.perf_counter()
        outcome = self.worker.run(compaction_id)
        seconds = time.perf_counter() - start
        assert outcome.result == "compacted", outcome
        return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows in the base")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        server = S3Server(Path(scratch) / "s3-server.log")
        try:
            os.environ.update(server.environment)  # before the session starts: its Python workers inherit it
            spark = build_session("acid-bench-s3", master="local[2]")
            try:
                bench = Bench(Path(scratch), server, spark, args.rows)
                load_before = os.getloadavg()[0]
                local, remote, counts = [], [], []
                for round_ in range(args.repeats + 1):  # one warm-up round, then interleaved repetitions
                    local_seconds = bench.local()
                    s3_seconds, requests = bench.on_s3()
                    if round_:
                        local.append(local_seconds)
                        remote.append(s3_seconds)
                        counts.append(requests)
                load_after = os.getloadavg()[0]
            finally:
                spark.stop()
        finally:
            server.stop()
        report(args, bench, local, remote, counts, (load_before, load_after))


def report(args, bench: Bench, local: list[float], remote: list[float], counts: list[dict[str, int]],
           load: tuple[float, float]) -> None:
    local_ms, remote_ms = statistics.median(local) * 1000, statistics.median(remote) * 1000
    print(f"table: base {args.rows:,} rows + 10 insert deltas + 5 delete deltas (10% of rows deleted), "
          f"{bench.bytes / 2**20:.1f} MiB in 16 directories")
    print(f"local[2], one SparkSession, medians of {args.repeats} interleaved repetitions; load average "
          f"{load[0]:.1f} before, {load[1]:.1f} after (2 cores: above ~2.5 other work shared them)")
    print()
    print(f"major compaction, table on local disk          {local_ms:7.0f} ms")
    print(f"major compaction, table on the S3 server       {remote_ms:7.0f} ms   ratio {remote_ms / local_ms:4.2f}x")
    print()
    print("S3 requests of one major compaction (median of the repetitions; the same in every one):")
    kinds = sorted({kind for run in counts for kind in run if kind != "bytes uploaded"})
    medians = collections.OrderedDict((kind, statistics.median(run.get(kind, 0) for run in counts)) for kind in kinds)
    for kind, value in medians.items():
        print(f"  {kind:28s} {value:6.0f}")
    print(f"  {'all requests':28s} {sum(medians.values()):6.0f}")
    copies = sum(run.get("CopyObject", 0) + run.get("UploadPartCopy", 0) for run in counts)
    print(f"  server-side copies in all runs: {copies}; bytes uploaded per compaction: "
          f"{statistics.median(run.get('bytes uploaded', 0) for run in counts) / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
