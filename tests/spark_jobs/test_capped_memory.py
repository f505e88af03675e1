"""Compaction, reads and writes of one bucket several times bigger than the Python workers' memory cap.

Spark enforces `spark.executor.pyspark.memory` as an address-space limit (RLIMIT_AS) on every Python worker, so a
task that held the bucket would die. One single-bucket partition, built four times (tests/support/big_partition.py): a base
of 1M rows and four insert deltas of 0.45M (write ids 1-5) plus a delete delta of 10% of every write (write id 6),
rows of about 1 KB: 2.6 GB decoded after deletes, 1.8 GB in the deltas alone, 20 MB on disk (ZLIB). The cap is 768
MiB, of which a Python worker with pyarrow loaded takes about 0.4 GiB.

- major, minor and rebalance compact it on local Spark with the same rows after (and the same ROW__IDs, for major
  and minor; the same write ids in four buckets for rebalance);
- a Spark read scans it; a Spark insert writes as much through one task into one bucket file;
- the control: one task that holds the whole partition (what compaction did before it streamed) dies of the cap;
- the same partition laid out as Hive's writer lays it out (ORC closes a stripe at 64 MiB of compressed streams: the
  base is one stripe of 1M rows, about 1 GiB decoded, more than the cap): a major compaction in one task and a Spark
  read stream inside that stripe and keep every row; the control, one task decoding that stripe at once, dies.
All run in one Spark application (tests/support/capped_jobs.py): a SparkContext's settings are fixed for its life.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from support.big_partition import build, digest, register_copy  # noqa: E402
from support.capped_jobs import MEMORY_SIGNS  # noqa: E402

from acid_core.format.orc_concat import stripe_row_counts  # noqa: E402
from acid_core.metastore import Metastore  # noqa: E402
from acid_core.storage.fs import FileSystem  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.slow]
CAP = "768m"
CAP_BYTES = 768 << 20
JOBS = Path(__file__).resolve().parents[1] / "support" / "capped_jobs.py"


@pytest.fixture(scope="module")
def capped(tmp_path_factory):
    root = tmp_path_factory.mktemp("capped")
    url, warehouse = f"sqlite:///{root}/metastore.db", str(root / "warehouse")
    store = Metastore(url, warehouse=warehouse)
    store.init()
    # Each layout is written once; the other tables of it are hard links to its files (the same rows and write ids:
    # a compaction only reads its inputs).
    built = build(store, "plain", base_rows=1_000_000, deltas=4, delta_rows=450_000, payload_bytes=1000,
                  stripe_bytes=8 << 20)
    for name in ("major", "minor", "rebalance"):
        register_copy(store, built, name, str(root / "warehouse" / name), link=True,
                      params={"orc.stripe.size": str(8 << 20)})
    hive = build(store, "hive_plain", base_rows=1_000_000, deltas=4, delta_rows=450_000, payload_bytes=1000,
                 layout="hive")
    register_copy(store, hive, "hive_major", str(root / "warehouse" / "hive_major"), link=True,
                  params={"orc.stripe.size": str(64 << 20)})
    before = digest(store, "plain")  # the six tables hold the same rows
    hive_base = str(next(Path(store.catalog.get_table("default", "hive_plain").location).glob("base_*/bucket_*")))
    store.close()
    result_file = root / "results.json"
    process = subprocess.run([sys.executable, str(JOBS), url, warehouse, CAP, str(result_file)],
                             cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True, timeout=900)
    assert process.returncode == 0, process.stderr[-4000:]
    return built, before, json.loads(result_file.read_text()), hive_base


def test_the_partition_is_several_times_the_cap(capped):
    built, before, _, _ = capped
    assert before["payload_bytes"] > 3 * CAP_BYTES and built.decoded_bytes > 3 * CAP_BYTES
    assert before["rows"] == built.rows - built.deleted and before["buckets"] == [0]


@pytest.mark.parametrize("kind", ["major", "minor", "hive_major"])  # hive_major: streams inside a Hive stripe
def test_major_and_minor_keep_every_row_and_row_id_under_the_cap(capped, kind):
    _, before, results, _ = capped
    result = results[kind]
    assert result["ok"], result["error"]
    assert result["result"] == "compacted", result["message"]
    assert result["after"] == before


def test_rebalance_keeps_every_row_and_write_id_under_the_cap(capped):
    _, before, results, _ = capped
    result = results["rebalance"]
    assert result["ok"], result["error"]
    assert result["result"] == "compacted" and "in 4 buckets" in result["message"], result["message"]
    after = result["after"]
    assert after["buckets"] == [0, 1, 2, 3]
    assert {k: after[k] for k in ("rows", "id_sum", "payload_bytes", "by_write_id")} == {
        k: before[k] for k in ("rows", "id_sum", "payload_bytes", "by_write_id")}


@pytest.mark.parametrize("job", ["read", "hive_read"])  # hive_read: streams inside a Hive stripe
def test_a_spark_read_scans_it_under_the_cap(capped, job):
    _, before, results, _ = capped
    result = results[job]
    assert result["ok"], result["error"]
    assert (result["rows"], result["id_sum"], result["payload_bytes"]) == (
        before["rows"], before["id_sum"], before["payload_bytes"])


def test_a_spark_insert_writes_as_much_into_one_bucket_under_the_cap(capped):
    _, _, results, _ = capped
    result = results["write"]
    assert result["ok"], result["error"]
    rows = 2_600_000  # capped_jobs.WRITE_ROWS
    after = result["after"]
    assert result["inserted"] == after["rows"] == rows and after["buckets"] == [0]
    assert after["id_sum"] == rows * (rows - 1) // 2 and after["payload_bytes"] == rows * 1000 > 3 * CAP_BYTES


def test_the_control_holding_the_whole_partition_dies_of_the_cap(capped):
    result = capped[2]["whole_partition"]
    assert not result["ok"], "the whole partition fit in the cap: the other tests prove nothing"
    # MemoryError (decoding a stripe), pyarrow's ArrowMemoryError (an allocation elsewhere), or the worker crashing
    # when an allocation inside native code fails: wherever it runs out
    assert re.search(MEMORY_SIGNS, result["error"]), result["error"]


def test_a_hive_shaped_stripe_decodes_to_more_than_the_cap(capped):
    built, _, results, hive_base = capped
    rows = stripe_row_counts(FileSystem(), hive_base)
    assert rows[0] >= 1_000_000  # the whole base in its first stripe, as Hive's writer would leave it
    assert rows[0] * built.decoded_bytes / (built.rows - built.deleted) > 1.2 * CAP_BYTES
    control = results["whole_stripe"]
    assert not control["ok"], "one decoded stripe fit in the cap: the Hive-shaped tests prove nothing"
    assert re.search(MEMORY_SIGNS, control["error"]), control["error"]
