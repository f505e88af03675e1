"""The `acid` command line, run as a real process: `python -m acid_cli.main inspect|read ...`.

Exit status 0 on success, 1 when the operation fails (the message names the path or value), 2 on bad usage.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support.model import tree, v1_bucket_property

from acid_core.format.rowid import RowId
from acid_core.write.writer import EmbeddedWriter

B0, B1 = v1_bucket_property(0), v1_bucket_property(1)
ROOT = Path(__file__).resolve().parents[2]


def acid(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "acid_cli.main", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=60)


@pytest.fixture(scope="module")
def table(tmp_path_factory) -> Path:
    """Write 1: four rows over two buckets; write 2 deletes one; write 3 (aborted) inserts; write 4 updates one."""
    location = tmp_path_factory.mktemp("cli") / "t"
    writer = EmbeddedWriter(str(location), columns=[("id", "int"), ("name", "string")], bucket_count=2,
                            bucket_function=lambda row: row[0] % 2)
    writer.insert([(1, "one"), (2, "two"), (3, None), (4, "four-long-name")], write_id=1)
    writer.delete([RowId(1, B0, 0)], write_id=2)          # deletes id 2
    writer.insert([(5, "aborted")], write_id=3)
    writer.update([RowId(1, B1, 1)], [(3, "three")], write_id=4)  # id 3 gets a name
    return location


def test_inspect_json(table):
    result = acid("inspect", str(table), "--write-ids", "default.t:4:9223372036854775807::3", "--json")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert list(document) == ["base", "deltas", "obsolete", "aborted"]
    assert document == {
        "base": None,
        "deltas": ["delta_0000001_0000001_0000", "delete_delta_0000002_0000002_0000",
                   "delete_delta_0000004_0000004_0000", "delta_0000004_0000004_0000"],
        "obsolete": [],
        "aborted": ["delta_0000003_0000003_0000"],
    }


def test_inspect_text(table):
    result = acid("inspect", str(table), "--write-ids", "default.t:2:9223372036854775807::")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["role", "directory"]
    assert [line.split() for line in lines[2:]] == [["base"], ["delta", "delta_0000001_0000001_0000"],
                                                    ["delta", "delete_delta_0000002_0000002_0000"]]


def test_read_jsonl_with_row_id(table):
    result = acid("read", str(table), "--format", "jsonl", "--row-id", "--write-ids",
                  "default.t:4:9223372036854775807::3")
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert records == [
        {"row__id": {"writeid": 1, "bucketid": B0, "rowid": 1}, "id": 4, "name": "four-long-name"},
        {"row__id": {"writeid": 1, "bucketid": B1, "rowid": 0}, "id": 1, "name": "one"},
        {"row__id": {"writeid": 4, "bucketid": B1, "rowid": 0}, "id": 3, "name": "three"},
    ]
    assert [list(r) for r in records] == [["row__id", "id", "name"]] * 3
    assert [list(r["row__id"]) for r in records] == [["writeid", "bucketid", "rowid"]] * 3


def test_read_jsonl_defaults_and_options(table):
    everything = acid("read", str(table), "--format", "jsonl", "--columns", "a, b", "--max-delete-events", "0")
    assert everything.returncode == 0, everything.stderr
    # No --write-ids: every write id counts as committed, write 3 included; ordered by row__id.
    assert [json.loads(line) for line in everything.stdout.splitlines()] == [
        {"a": 4, "b": "four-long-name"}, {"a": 1, "b": "one"}, {"a": 5, "b": "aborted"}, {"a": 3, "b": "three"}]
    before_delete = acid("read", str(table), "--format", "jsonl", "--write-ids", "default.t:1:9223372036854775807::")
    assert [json.loads(line)["id"] for line in before_delete.stdout.splitlines()] == [2, 4, 1, 3]


def test_read_table_format_is_aligned(table):
    result = acid("read", str(table), "--row-id", "--write-ids", "default.t:4:3:3:")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    header, rule, rows = lines[0], lines[1], lines[2:]
    assert header.split() == ["row__id", "id", "name"]
    assert set(rule) <= {"-", " "}
    starts = [i for i, ch in enumerate(rule) if ch == "-" and (i == 0 or rule[i - 1] == " ")]
    assert len(starts) == 3 and len(rows) == 3
    for line in [header, *rows]:
        for start in starts[1:]:
            assert line[start - 2:start] == "  " and line[start] != " ", (line, start)
    widths = [len(dashes) for dashes in rule.split("  ")]
    assert widths[2] == len("four-long-name")
    assert json.loads(rows[0][:widths[0]]) == {"writeid": 1, "bucketid": B0, "rowid": 1}
    assert rows[0][starts[1]:].split() == ["4", "four-long-name"]


def test_read_table_shows_null(tmp_path):
    EmbeddedWriter(str(tmp_path), columns=[("id", "int"), ("name", "string")]).insert([(1, None)], write_id=1)
    result = acid("read", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[2].split() == ["1", "NULL"]


def test_read_empty_table(tmp_path):
    result = acid("read", str(tmp_path), "--format", "jsonl")
    assert (result.returncode, result.stdout) == (0, "")


@pytest.mark.parametrize(("args", "named"), [
    (("read", "{missing}"), "{missing}"),
    (("read", "{table}", "--write-ids", "default.t:notanumber:1::"), "notanumber"),
    (("read", "{table}", "--txns", "x:y"), "x:y"),
    (("inspect", "{table}", "--write-ids", "bogus"), "bogus"),
    (("read", "{bad_dir}"), "delta_abc_1"),
    (("read", "{corrupt}"), "bucket_00000"),
])
def test_errors_exit_1_and_name_the_culprit(table, tmp_path, args, named):
    bad_dir = tmp_path / "bad_dir"
    (bad_dir / "delta_abc_1").mkdir(parents=True)
    corrupt = tmp_path / "corrupt"
    (corrupt / "delta_0000001_0000001_0000").mkdir(parents=True)
    (corrupt / "delta_0000001_0000001_0000" / "bucket_00000").write_bytes(b"ORC not really")
    paths = {"missing": str(tmp_path / "missing"), "table": str(table), "bad_dir": str(bad_dir),
             "corrupt": str(corrupt)}
    before = tree(tmp_path), tree(table)
    result = acid(*(arg.format(**paths) for arg in args))
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert result.stdout == ""
    assert result.stderr.startswith(f"acid {args[0]}: error: ")
    assert named.format(**paths) in result.stderr
    assert "Traceback" not in result.stderr
    assert (tree(tmp_path), tree(table)) == before


@pytest.mark.parametrize("args", [
    (),
    ("frobnicate",),
    ("inspect", "{table}"),                                   # --write-ids is required
    ("read", "{table}", "--format", "csv"),
    ("read", "{table}", "--max-delete-events", "many"),
    ("read",),
])
def test_usage_errors_exit_2(table, args):
    result = acid(*(arg.format(table=table) for arg in args))
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "usage:" in result.stderr and "Traceback" not in result.stderr
