"""The filesystem module: paths and URIs resolve alike; errors name the path; nothing escapes a table location."""

from __future__ import annotations

import pytest

from acid_core.errors import FileSystemError, PathOutsideTableError
from acid_core.format.validity import ValidWriteIdList
from acid_core.read.merge import read_snapshot
from acid_core.read.state import get_acid_state
from acid_core.storage.fs import FileSystem, ensure_inside
from acid_core.write.writer import EmbeddedWriter


def test_file_uri_and_plain_path_see_the_same_table(tmp_path):
    uri = f"file://{tmp_path}/t"
    EmbeddedWriter(uri, columns=[("id", "int")]).insert([(1,), (2,)], write_id=1)
    assert (tmp_path / "t" / "delta_0000001_0000001_0000" / "bucket_00000").is_file()
    ids = ValidWriteIdList.parse("db.t:1:9223372036854775807::")
    assert get_acid_state(uri, write_ids=ids).to_json() == get_acid_state(str(tmp_path / "t"), write_ids=ids).to_json()
    assert read_snapshot(uri).to_pylist() == read_snapshot(str(tmp_path / "t")).to_pylist() == [{"id": 1}, {"id": 2}]


def test_listing_a_missing_directory_names_it(tmp_path):
    fs = FileSystem()
    with pytest.raises(FileSystemError, match="nowhere"):
        fs.list_dir(str(tmp_path / "nowhere"))


def test_atomic_write_leaves_no_temp_and_refuses_to_replace(tmp_path):
    fs = FileSystem()
    target = str(tmp_path / "f")
    fs.write_atomically(target, b"2")
    assert [p.name for p in tmp_path.iterdir()] == ["f"]
    with pytest.raises(FileSystemError, match="already exists"):
        fs.write_atomically(target, b"3")
    assert (tmp_path / "f").read_bytes() == b"2"
    assert [p.name for p in tmp_path.iterdir()] == ["f"]


@pytest.mark.parametrize("path", ["/w/t/../u", "/w/other", "/w/t/../../etc"])
def test_paths_outside_the_table_are_refused(path):
    with pytest.raises(PathOutsideTableError, match="outside the table location"):
        ensure_inside("/w/t", path)


def test_paths_inside_the_table_are_normalised():
    assert ensure_inside("/w/t", "/w/t/p=1/./delta_1_1") == "/w/t/p=1/delta_1_1"


def test_concurrently_keeps_order_raises_the_first_failure_in_item_order_and_runs_each_item_once():
    import threading

    from acid_core.storage.fs import concurrently

    calls: list[int] = []
    lock = threading.Lock()

    def square(item: int) -> int:
        with lock:
            calls.append(item)
        if item in (7, 30):
            raise ValueError(f"item {item}")
        return item * item

    assert concurrently(lambda item: item * item, list(range(40)), threads=4) == [i * i for i in range(40)]
    with pytest.raises(ValueError, match="item 7"):
        concurrently(square, list(range(40)), threads=4)
    assert sorted(calls) == sorted(set(calls))  # nothing ran twice
