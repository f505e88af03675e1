"""The one place that talks to a filesystem, through pyarrow.fs: local paths now, HDFS and S3 by URI.

Every error is mapped to FileSystemError naming the path. On filesystems whose renames are atomic (local, HDFS),
writes go to a hidden temporary name (leading `.`, which Hive and this library skip when listing) and are renamed
into place, so a crash never leaves a half-written visible file. On object stores (S3 and the like) a rename is a
copy of every byte and a directory cannot be renamed at all: there a file is written under its final name (an
object appears whole or not at all when its upload completes) and a directory's visibility comes from the metastore
(an uncommitted write id or `_v<txn>` suffix), as Hive's direct insert does (`renames_atomically`).
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import tempfile
import threading
import urllib.parse
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import BinaryIO, TypeVar

import pyarrow as pa
import pyarrow.fs as pafs

from acid_core.errors import FileSystemError, PathOutsideTableError


@dataclass(frozen=True, slots=True)
class FileEntry:
    """One child of a directory listing."""

    name: str
    path: str
    is_dir: bool
    size: int


ATOMIC_RENAME_FILESYSTEMS = frozenset({"local", "hdfs"})  # pyarrow type names; the rest are object stores
SMALL_OBJECT_BYTES = 1 << 20  # an object store's files up to this size are read in one request (`open_input`)
MAX_IO_THREADS = 16  # calls in flight at once on a remote filesystem (listings, footers)
_Item = TypeVar("_Item")
_Result = TypeVar("_Result")


def _wrap(action: str, path: str, exc: Exception) -> FileSystemError:
    return FileSystemError(f"cannot {action} {path!r}: {exc}")


def concurrently(function: Callable[[_Item], _Result], items: Sequence[_Item], *, threads: int,
                 inline_below: int = 4) -> list[_Result]:
    """`[function(item) for item in items]`, run on at most `threads` threads (pyarrow's calls release the GIL while
    they wait on the filesystem). Items go in a few contiguous chunks per thread, not one task each, so the pool costs
    a few tasks per thread whatever the count; the first exception (in item order) is raised.

    Fewer than `inline_below` items run here, in order. Cost: time of the items divided by about `threads`;
    memory: the results.
    """
    workers = max(1, min(threads, len(items), MAX_IO_THREADS))
    if workers == 1 or len(items) < inline_below or threading.current_thread().name.startswith(_POOL_PREFIX):
        return [function(item) for item in items]  # (inside the pool: inline, so a task never waits on the pool)
    size = -(-len(items) // (workers * 4))
    chunks = [items[start:start + size] for start in range(0, len(items), size)]
    results: list = [None] * len(chunks)
    errors: dict[int, Exception] = {}
    following = iter(range(len(chunks)))
    taking = threading.Lock()

    def worker() -> None:  # `workers` of these take the chunks in turn: at most `workers` threads at once
        while True:
            with taking:
                index = next(following, None)
            if index is None:
                return
            try:
                results[index] = [function(item) for item in chunks[index]]
            except Exception as exc:
                errors[index] = exc

    for future in [_io_pool().submit(worker) for _ in range(workers)]:
        future.result()
    if errors:
        raise errors[min(errors)]  # the first in item order
    return [result for chunk in results for result in chunk]


_POOL_PREFIX = "acid-io"
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _io_pool() -> ThreadPoolExecutor:
    """The process's one I/O pool (MAX_IO_THREADS threads, started as needed and kept): a read of many small files
    pays no thread start-up (a pool per call cost ~0.5 ms a delta). A forked child (Spark's Python workers) makes
    its own."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=MAX_IO_THREADS, thread_name_prefix=_POOL_PREFIX)
        return _pool


def _forget_pool_in_child() -> None:
    global _pool, _pool_lock
    _pool, _pool_lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_pool_in_child)


def _entry_name(entry: FileEntry) -> str:
    return entry.name


def _list_local(path: str) -> list[FileEntry]:
    """What pyarrow's LocalFileSystem lists (paths `<path>/<name>`, links followed, broken links left out, size 0 for
    a directory), from one `scandir`: the entry types come with the names, so only files need a `stat` (for their
    size). pyarrow's own listing stats every entry and builds objects Python then converts: a partition of 20,000
    delta directories is listed in about a third of the time this way.

    Raises:
        OSError: the directory cannot be listed (FileNotFoundError: it does not exist), or an entry cannot be stat'ed.
    """
    prefix = path.rstrip("/") + "/"
    entries = []
    with os.scandir(path) as found:
        for entry in found:
            name = entry.name
            try:
                if entry.is_dir():
                    entries.append(FileEntry(name, prefix + name, True, 0))
                else:
                    entries.append(FileEntry(name, prefix + name, False, entry.stat().st_size))
            except FileNotFoundError:
                continue  # a broken link, or removed since the listing
    return entries


_S3_SCHEMES = ("s3", "s3a")  # s3a: the Hadoop connector's scheme, which Hive tables on S3 usually carry
_s3_filesystems: dict[tuple, pafs.S3FileSystem] = {}
_s3_lock = threading.Lock()


def _s3_filesystem(location: str) -> tuple[FileSystem, str] | None:
    """An `s3://` or `s3a://` location as (filesystem, `bucket/key`), when the region is configured (AWS_REGION or
    AWS_DEFAULT_REGION): one S3FileSystem per process and configuration, so resolving a location costs no request
    (pyarrow's `from_uri` asks S3 for the bucket's region every time). The endpoint comes from AWS_ENDPOINT_URL_S3 or
    AWS_ENDPOINT_URL (an S3-compatible store), the credentials from the AWS default chain (environment, profile,
    instance or pod role). None when the region is not configured or the URI has options (`?...`): pyarrow's own
    resolution then applies."""
    parts = urllib.parse.urlsplit(location)
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if parts.scheme not in _S3_SCHEMES or parts.query or not parts.netloc or not region:
        return None
    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or None
    key = (region, endpoint, os.environ.get("AWS_ACCESS_KEY_ID"), os.environ.get("AWS_PROFILE"))
    with _s3_lock:
        filesystem = _s3_filesystems.get(key)
        if filesystem is None:
            try:
                filesystem = _s3_filesystems[key] = pafs.S3FileSystem(region=region, endpoint_override=endpoint)
            except (pa.ArrowInvalid, OSError) as exc:
                raise _wrap("open filesystem for", location, exc) from exc
    path = (parts.netloc + parts.path).rstrip("/")
    return FileSystem(filesystem, uri_prefix=f"{parts.scheme}://"), path


class FileSystem:
    """A pyarrow filesystem plus the few operations the ACID layout needs."""

    def __init__(self, filesystem: pafs.FileSystem | None = None, *, uri_prefix: str = "") -> None:
        self._fs = filesystem or pafs.LocalFileSystem()
        self._uri_prefix = uri_prefix

    @classmethod
    def resolve(cls, location: str) -> tuple[FileSystem, str]:
        """A filesystem and a path for a local path or a URI (`file://`, `hdfs://`, `s3://`, ...).

        Raises:
            FileSystemError: the URI's scheme is unknown or the filesystem cannot be reached.
        """
        if "://" not in location:
            return cls(), os.path.abspath(location)
        found = _s3_filesystem(location)
        if found is not None:
            return found
        try:
            filesystem, path = pafs.FileSystem.from_uri(location)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError) as exc:
            raise _wrap("open filesystem for", location, exc) from exc
        bare = location.split("?", 1)[0].rstrip("/")
        prefix = bare[:len(bare) - len(path.rstrip("/"))] if bare.endswith(path.rstrip("/")) else ""
        return cls(filesystem, uri_prefix=prefix), path

    def uri(self, path: str) -> str:
        """The location another process resolves to `path` on this filesystem (`s3://bucket/key` for
        `bucket/key`; a local path as it is)."""
        return self._uri_prefix + path

    @property
    def io_threads(self) -> int:
        """Listings worth running at once: one on a local filesystem (a listing there is a few system calls, each
        taking and dropping the GIL, so threads only contend), `MAX_IO_THREADS` elsewhere (each call waits on the
        network)."""
        return 1 if isinstance(self._fs, pafs.LocalFileSystem) else MAX_IO_THREADS

    @property
    def renames_atomically(self) -> bool:
        """Renaming a file or a directory is one atomic metadata operation (local, HDFS). False on object stores, where
        writers put data under its final name and the metastore decides what readers see; appending to a file is
        possible exactly where renames are atomic (an object store writes an object whole)."""
        return self._fs.type_name in ATOMIC_RENAME_FILESYSTEMS

    @property
    def arrow(self) -> pafs.FileSystem:
        """The underlying pyarrow filesystem (for readers that take one)."""
        return self._fs

    @staticmethod
    def join(*parts: str) -> str:
        return posixpath.join(*parts)

    def info(self, path: str) -> pafs.FileInfo:
        try:
            return self._fs.get_file_info(path)
        except OSError as exc:
            raise _wrap("stat", path, exc) from exc

    def exists(self, path: str) -> bool:
        return self.info(path).type != pafs.FileType.NotFound

    def is_dir(self, path: str) -> bool:
        return self.info(path).type == pafs.FileType.Directory

    def list_dir(self, path: str, *, missing_ok: bool = False) -> list[FileEntry]:
        """Children of a directory, sorted by name; none for a directory that does not exist if `missing_ok`.
        Links are followed; a broken link is left out (as pyarrow does).

        Cost: one listing, plus one `stat` per file (not per directory) on a local filesystem.

        Raises:
            FileSystemError: the directory does not exist (unless `missing_ok`) or cannot be listed.
        """
        try:
            if isinstance(self._fs, pafs.LocalFileSystem):
                entries = _list_local(path)
            else:
                infos = self._fs.get_file_info(pafs.FileSelector(path, recursive=False))
                entries = [FileEntry(info.base_name, info.path, info.type == pafs.FileType.Directory, info.size or 0)
                           for info in infos]
        except FileNotFoundError as exc:
            if missing_ok:
                return []
            raise FileSystemError(f"directory {path!r} does not exist") from exc
        except OSError as exc:
            raise _wrap("list", path, exc) from exc
        if len(entries) > 1:
            entries.sort(key=_entry_name)
        return entries

    def is_symlink(self, path: str) -> bool:
        """A symbolic link (local filesystems; pyarrow's own calls follow links, so destructive code asks first)."""
        return isinstance(self._fs, pafs.LocalFileSystem) and os.path.islink(path)

    def file_size(self, path: str) -> int:
        info = self.info(path)
        if info.type != pafs.FileType.File:
            raise FileSystemError(f"{path!r} is not a file")
        return info.size

    def open_input(self, path: str) -> pa.NativeFile:
        """A random-access file. On an object store a small file (`SMALL_OBJECT_BYTES` or less: the typical delta)
        is read whole, in one GET, into memory: an ORC reader reads the tail, the footer and every stream of a
        stripe separately, each a request of its own on an object store."""
        try:
            opened = self._fs.open_input_file(path)
            if self.renames_atomically or opened.size() > SMALL_OBJECT_BYTES:
                return opened
            with opened:
                return pa.BufferReader(opened.read())
        except OSError as exc:
            raise _wrap("open", path, exc) from exc

    def read_bytes(self, path: str, length: int | None = None) -> bytes:
        """The whole file, or its first `length` bytes."""
        with self.open_input(path) as stream:
            try:
                return stream.read() if length is None else stream.read_at(length, 0)
            except OSError as exc:
                raise _wrap("read", path, exc) from exc

    def make_dirs(self, path: str) -> None:
        try:
            self._fs.create_dir(path, recursive=True)
        except OSError as exc:
            raise _wrap("create directory", path, exc) from exc

    def rename(self, source: str, target: str) -> None:
        """Move a file or directory; refuses to replace an existing target. On an object store a directory is
        copied object by object (server-side copies) and then deleted: neither atomic nor cheap, so only the
        cleaner's trash does that there; every write path writes final names directly instead.

        Raises:
            FileSystemError: the target exists, or the move fails.
        """
        if self.exists(target):
            raise FileSystemError(f"cannot move {source!r} to {target!r}: the target already exists")
        try:
            if self.renames_atomically or self.info(source).type != pafs.FileType.Directory:
                self._fs.move(source, target)
                return
            pafs.copy_files(source, target, source_filesystem=self._fs, destination_filesystem=self._fs)
            self._fs.delete_dir(source)
        except OSError as exc:
            raise _wrap(f"move to {target!r}", source, exc) from exc

    def delete_file(self, path: str) -> None:
        try:
            self._fs.delete_file(path)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise _wrap("delete", path, exc) from exc

    def delete_dir(self, path: str) -> None:
        try:
            self._fs.delete_dir(path)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise _wrap("delete directory", path, exc) from exc

    def write_atomically(self, path: str, data: bytes) -> None:
        """Write a small file through a hidden temporary name and rename it into place (on an object store: one
        upload under its final name, which is atomic there)."""
        if not self.renames_atomically:
            try:
                with self._fs.open_output_stream(path) as stream:
                    stream.write(data)
            except OSError as exc:
                raise _wrap("write", path, exc) from exc
            return
        parent, name = posixpath.split(path)
        temp = self.join(parent, f".{name}.tmp-{uuid.uuid4().hex[:12]}")
        try:
            with self._fs.open_output_stream(temp) as stream:
                stream.write(data)
        except OSError as exc:
            self.delete_file(temp)
            raise _wrap("write", path, exc) from exc
        try:
            self.rename(temp, path)
        except FileSystemError:
            self.delete_file(temp)
            raise

    def append_bytes(self, path: str, data: bytes) -> None:
        """Append to a file (streaming side files); the filesystem must support appends (local, HDFS)."""
        try:
            with self._fs.open_append_stream(path) as stream:
                stream.write(data)
        except (OSError, pa.ArrowNotImplementedError) as exc:
            raise _wrap("append to", path, exc) from exc

    def open_output(self, path: str) -> pa.NativeFile:
        try:
            return self._fs.open_output_stream(path)
        except OSError as exc:
            raise _wrap("create", path, exc) from exc

    def cut_for_appending(self, path: str, length: int):
        """On a local filesystem: cut the file to its first `length` bytes and return a binary file appending to it;
        elsewhere None (object stores cannot cut a file, and copying it is what the caller does instead)."""
        if not isinstance(self._fs, pafs.LocalFileSystem):
            return None
        try:
            os.truncate(path, length)
            return open(path, "ab")
        except OSError as exc:
            raise _wrap("cut", path, exc) from exc


class LocalScratch:
    """A local file to build a data file in before it is put in place (ORC tails are patched in place locally)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def size(self) -> int:
        return os.path.getsize(self.path)

    def read_tail(self, length: int) -> bytes:
        with open(self.path, "rb") as handle:
            handle.seek(max(0, self.size() - length))
            return handle.read()

    def open_for_writing(self) -> BinaryIO:
        """A binary file object on the scratch file (for writers that stream rows)."""
        return open(self.path, "wb")

    def replace_tail(self, cut: int, new_tail: bytes) -> None:
        """Drop the last `cut` bytes and append `new_tail`."""
        with open(self.path, "r+b") as handle:
            handle.truncate(self.size() - cut)
            handle.seek(0, os.SEEK_END)
            handle.write(new_tail)


@contextlib.contextmanager
def local_scratch(fs: FileSystem, destination: str) -> Iterator[LocalScratch]:
    """A scratch file for `destination`: a hidden file beside it on a local filesystem (so putting it in place is a
    rename), else a local temporary file that is copied up. Removed if not put in place."""
    if isinstance(fs.arrow, pafs.LocalFileSystem):
        parent, name = posixpath.split(destination)
        fs.make_dirs(parent)
        path = posixpath.join(parent, f".{name}.scratch-{uuid.uuid4().hex[:12]}")
    else:
        handle, path = tempfile.mkstemp(prefix="acid-", suffix=".orc")
        os.close(handle)
    try:
        yield LocalScratch(path)
    finally:
        if os.path.exists(path):
            os.remove(path)


def put_scratch(fs: FileSystem, scratch: LocalScratch, destination: str) -> None:
    """Move a finished scratch file to `destination` (which must not exist).

    Raises:
        FileSystemError: the destination exists or the copy fails.
    """
    if fs.exists(destination):
        raise FileSystemError(f"cannot write {destination!r}: it already exists")
    try:
        if isinstance(fs.arrow, pafs.LocalFileSystem):
            os.rename(scratch.path, destination)
        else:
            pafs.copy_files(scratch.path, destination, source_filesystem=pafs.LocalFileSystem(),
                            destination_filesystem=fs.arrow)
    except OSError as exc:
        raise _wrap("write", destination, exc) from exc


def path_of(location: str) -> str:
    """The path a `FileSystem.resolve(location)` filesystem takes for `location`: `bucket/key` for an object store URI
    (`s3://bucket/key`), the URI's path for others (`hdfs://nn:8020/x` -> `/x`), a local path as it is."""
    if "://" not in location:
        return location
    parts = urllib.parse.urlsplit(location)
    if parts.scheme in _S3_SCHEMES or parts.scheme in ("gs", "gcs", "abfs", "abfss"):
        return (parts.netloc + parts.path).rstrip("/")
    return parts.path


def _is_within(root: str, path: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def is_absolute_location(location: str) -> bool:
    """A URI (`scheme://...`) or an absolute local path: the same directory whichever process resolves it."""
    return "://" in location or posixpath.isabs(location)


def ensure_inside(root: str, path: str, *, fs: FileSystem | None = None) -> str:
    """Normalise `path` and check it lies inside `root`: no `..` escapes and, given a local `fs`, no symbolic link
    leading out (both sides resolved to their real paths, so a root that is itself a link is fine).

    Raises:
        PathOutsideTableError: the path leaves the root.
    """
    root_norm = posixpath.normpath(root)
    path_norm = posixpath.normpath(path)
    if not _is_within(root_norm, path_norm):
        raise PathOutsideTableError(f"{path!r} is outside the table location {root!r}")
    if fs is not None and isinstance(fs.arrow, pafs.LocalFileSystem):
        real_root, real_path = os.path.realpath(root_norm), os.path.realpath(path_norm)
        if not _is_within(real_root, real_path):
            raise PathOutsideTableError(f"{path!r} is outside the table location {root!r}: it resolves to "
                                        f"{real_path!r} through a symbolic link, outside {real_root!r}")
    return path_norm
