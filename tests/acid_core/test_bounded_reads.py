"""`acid read` streams: its memory follows a batch, not the partition (it used to build every row as a Python dict)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from acid_core.format.layout import base_dir_name, bucket_file_name
from acid_core.format.orc_columnar import EventStreamWriter, event_table
from acid_core.storage.fs import FileSystem

ROOT = Path(__file__).resolve().parents[2]
READ = textwrap.dedent("""
    import json, resource, sys
    from acid_cli.main import main
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    status = main(["read", sys.argv[1], "--row-id", "--format", "jsonl"])
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"status": status, "growth_kib": peak - before}), file=sys.stderr)
""")


def _partition(location: Path, rows: int) -> None:
    """A base of `rows` rows in one bucket, in stripes of about 4 MB."""
    path = location / base_dir_name(1) / bucket_file_name(0)
    with EventStreamWriter(FileSystem(), str(path), stripe_bytes=4 << 20) as writer:
        for start in range(0, rows, 50_000):
            ids = np.arange(start, min(start + 50_000, rows))
            noise = np.random.default_rng(start).integers(0, 2**62, len(ids))
            data = pa.StructArray.from_arrays([pa.array(ids), pa.array(noise.astype(str).astype(object))],
                                              names=["id", "payload"])
            writer.write(event_table(0, np.full(len(ids), 1), np.full(len(ids), 536870912), ids, np.full(len(ids), 1),
                                     data))
        writer.close()
    (location / base_dir_name(1) / "_orc_acid_version").write_text("2")


def _read_growth_mib(location: Path, rows: int) -> float:
    _partition(location, rows)
    process = subprocess.run([sys.executable, "-c", READ, str(location)], cwd=ROOT, capture_output=True, text=True,
                             timeout=600)
    figures = json.loads(process.stderr.strip().splitlines()[-1])
    assert figures["status"] == 0 and process.stdout.count("\n") == rows
    last = json.loads(process.stdout[process.stdout.rindex("\n", 0, len(process.stdout) - 1) + 1:])
    assert last["row__id"] == {"writeid": 1, "bucketid": 536870912, "rowid": rows - 1} and last["id"] == rows - 1
    return figures["growth_kib"] / 1024


@pytest.mark.slow
def test_acid_read_memory_does_not_follow_the_partition(tmp_path):
    """Four times the rows (0.2M -> 0.8M): `acid read --format jsonl` used to hold every row as a dict (about 0.76 KB
    a row, so some 450 MB more); streaming a batch at a time it grows by a small fraction of that."""
    small = _read_growth_mib(tmp_path / "small", 200_000)
    large = _read_growth_mib(tmp_path / "large", 800_000)
    assert large - small < 100, (small, large)
