"""Where a table's data lives: the one way the worker, cleaner, housekeeping, writers and readers turn a catalog
entry into a filesystem and a directory, checked to stay inside the table's real location.

A partition name is checked against the table's partition keys (no `..`, no extra components), the table location
must be absolute, and on a local filesystem the partition directory must resolve, symbolic links followed, inside
the table directory's real path: a partition directory replaced by a link to elsewhere is refused, not followed.
Cost: one `realpath` per call on local filesystems, nothing on HDFS or object stores (which have no links).
"""

from __future__ import annotations

from dataclasses import dataclass

from acid_core.errors import LayoutError
from acid_core.metastore.catalog import TableInfo
from acid_core.storage.fs import FileSystem, ensure_inside, is_absolute_location


@dataclass(frozen=True, slots=True)
class DataLocation:
    """A checked table or partition directory: its filesystem, the table root and the directory itself."""

    fs: FileSystem
    table_root: str
    path: str


def data_location(table: TableInfo, partition: str | None = None) -> DataLocation:
    """The directory of `table` (partition None) or of one of its partitions, checked to lie inside the table.

    Raises:
        LayoutError: the table's location is relative.
        MetastoreError: the partition name is not a canonical `k=v/...` name of this table's keys.
        PathOutsideTableError: the directory resolves outside the table's real location (a symbolic link).
        FileSystemError: the filesystem of the location cannot be reached.
    """
    if not is_absolute_location(table.location):
        raise LayoutError(f"table {table.full_name} has the relative location {table.location!r}, which every "
                          "process would resolve differently; set an absolute path or URI")
    fs, root = FileSystem.resolve(table.location)
    path = root if partition is None else fs.join(root, table.check_partition_name(partition))
    return DataLocation(fs, root, ensure_inside(root, path, fs=fs))


__all__ = ["DataLocation", "data_location"]
