"""Planning a partition's read under one snapshot: which files, from which directories, in what order and in what
independent pieces (Hive's AcidUtils + OrcRawRecordMerger planning), and which delete path it takes.

`plan_read` turns a directory state into insert sources (base or original files, then insert deltas, each with its
write-id and synthetic-id facts) and delete sources; `read_units` splits the inserts into stripes; `uses_sort_merge`
applies Hive's `hive.transactional.events.mem` rule. Footers are opened on a thread pool (`read_footers`), once.
Cost: one footer per file at most; no data is read here. `acid_core.read.merge` reads what is planned.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from acid_core.format.delete_events import Key
from acid_core.format.layout import (
    ParsedDelta,
    is_hidden,
    parse_bucket_file,
    parse_directory,
    parse_original_file,
    side_file_name,
)
from acid_core.format.orc_events import EventFile, side_file_length
from acid_core.format.rowid import encode_bucket
from acid_core.format.validity import ValidWriteIdList
from acid_core.read.state import DirectoryState
from acid_core.storage.fs import FileSystem, concurrently

DEFAULT_MAX_DELETE_EVENTS_IN_MEMORY = 10_000_000

@dataclass(frozen=True, slots=True)
class SyntheticIds:
    """ROW__IDs for a file without ACID columns (original or raw file): one write id and bucket, rowIds from `first_row_id`."""

    write_id: int
    bucket_property: int
    first_row_id: int


@dataclass(frozen=True, slots=True)
class InsertSource:
    """One file holding insert events (or plain rows) to read."""

    path: str
    check_validity: bool
    length: int | None = None
    synthetic: SyntheticIds | None = None


@dataclass(frozen=True, slots=True)
class DeleteSource:
    """One delete-delta bucket file."""

    path: str
    check_validity: bool


@dataclass(frozen=True, slots=True)
class ReadPlan:
    """What a snapshot read of one partition opens, in read order."""

    state: DirectoryState | None  # None: a plan of given sources, without a directory listing (a compaction's)
    inserts: tuple[InsertSource, ...]
    deletes: tuple[DeleteSource, ...]


def _data_files(state: DirectoryState, directory: str) -> list[tuple[str, str]]:
    """(name, path) of the data files in a base or delta directory: visible names that are not side files."""
    children = state.listing.children(directory) if state.listing else ()
    return [(child.name, child.path) for child in children
            if not child.is_dir and not is_hidden(child.name) and not child.name.endswith("_flush_length")]


def _original_sources(fs: FileSystem, names: Sequence[tuple[str, str]], write_id: int,
                      statement_id: int) -> list[InsertSource]:
    """Original (or raw) files: rowIds run on across the files of one bucket in sorted-name order (Hive's OriginalReaderPair)."""
    next_row: dict[int, int] = {}
    sources = []
    for name, path in sorted(names):
        bucket = parse_original_file(name).bucket
        first = next_row.get(bucket, 0)
        next_row[bucket] = first + EventFile(fs, path).num_rows
        sources.append(InsertSource(path, False, synthetic=SyntheticIds(write_id, encode_bucket(bucket, statement_id), first)))
    return sources


def plan_read(fs: FileSystem, state: DirectoryState, write_ids: ValidWriteIdList) -> ReadPlan:
    """The files a snapshot reads, in Hive's read order: base (or originals), insert deltas; and the delete deltas."""
    inserts: list[InsertSource] = []
    deletes: list[DeleteSource] = []
    if state.base is not None:
        inserts.extend(InsertSource(path, False) for _, path in _data_files(state, state.base.name))
    elif state.original_files:
        paths = [(name, fs.join(state.location, name)) for name in state.original_files]
        inserts.extend(_original_sources(fs, paths, 0, 0))
    for delta in state.deltas:
        check = not write_ids.all_valid(delta.min_write_id, delta.max_write_id)
        files = _data_files(state, delta.name)
        if delta.is_delete:
            deletes.extend(DeleteSource(path, check) for _, path in files)
            continue
        inserts.extend(_delta_insert_sources(fs, delta, files, check))
    return ReadPlan(state, tuple(inserts), tuple(deletes))


def _delta_insert_sources(fs: FileSystem, delta: ParsedDelta, files: list[tuple[str, str]],
                          check: bool) -> list[InsertSource]:
    sources: list[InsertSource] = []
    raw: list[tuple[str, str]] = []
    for name, path in files:
        if parse_bucket_file(name) is None:
            raw.append((name, path))
            continue
        length = side_file_length(fs, side_file_name(path)) if delta.may_contain_side_file else None
        sources.append(InsertSource(path, check, length))
    if raw:  # LOAD DATA into a full-ACID table leaves plain ORC files in delta_x_x_s: ids come from the name
        sources.extend(_original_sources(fs, raw, delta.min_write_id, delta.statement_id or 0))
    return sources


def file_bucket(path: str) -> int:
    """The bucket a data file holds, from its name (`bucket_N`, or an original file's `0000N_0`)."""
    name = path.rsplit("/", 1)[-1]
    parsed = parse_bucket_file(name)
    return parsed.bucket if parsed else parse_original_file(name).bucket


def source_bucket(source: InsertSource) -> int:
    """The bucket of an insert source's rows: delete events for them sit in the delete deltas' file of that bucket
    (Hive writes a delete event into the bucket of the row it deletes)."""
    return (source.synthetic.bucket_property >> 16) & 0xFFF if source.synthetic else file_bucket(source.path)


def source_lower_bound(source: InsertSource) -> Key | None:
    """A key no row of the source is below, known without reading it: an original file's first synthesized ROW__ID,
    an insert delta's lowest write id (its directory name: every insert event there has originalTransaction in the
    delta's write-id range; ACID v1 update events, which do not, are refused when read); None for a base."""
    if source.synthetic is not None:
        ids = source.synthetic
        return ids.write_id, ids.bucket_property, ids.first_row_id
    parsed = parse_directory(source.path.rstrip("/").rsplit("/", 2)[-2])
    if isinstance(parsed, ParsedDelta) and not parsed.is_delete:
        return parsed.min_write_id, -(2**31), -(2**63)
    return None


def delete_event_count(delete_files: Sequence[EventFile]) -> int:
    """Delete events in the files by their `hive.acid.stats` (row count when absent): what picks the delete path."""
    return sum(f.stats.deletes if f.stats is not None else f.num_rows for f in delete_files)


FOOTER_THREADS = 16  # footers a planner opens at once, whatever the number of files


@dataclass(frozen=True, slots=True)
class Footer:
    """What planning a read takes from a file's footer: its stripes, its delete events (by `hive.acid.stats`, the
    row count when absent) and its length in bytes."""

    path: str
    stripes: int
    delete_events: int
    length: int


def read_footer(fs: FileSystem, path: str) -> Footer:
    """Open one file's footer (its tail; no data is read).

    Raises:
        CorruptFileError: not a readable ORC file.
        SchemaMismatchError: a file whose schema is neither Hive's event schema nor a plain row schema.
    """
    event_file = EventFile(fs, path)
    stats = event_file.stats
    return Footer(path, event_file.num_stripes, stats.deletes if stats is not None else event_file.num_rows,
                  event_file.file_length)


def read_footers(files: Sequence[tuple[FileSystem, str]]) -> list[Footer]:
    """The footers of `(filesystem, path)` pairs, in order, opened `FOOTER_THREADS` at a time on a remote filesystem
    (pyarrow reads a file's tail without holding the GIL): a planner waits about one round trip per
    `FOOTER_THREADS` files, not per file. On a local disk a footer is a tenth of a millisecond: one thread (handing
    each to a thread would cost more, and far more on a busy machine)."""
    threads = FOOTER_THREADS if any(fs.io_threads > 1 for fs, _ in files) else 1
    return concurrently(lambda file: read_footer(*file), files, threads=threads)


def _footers_of(fs: FileSystem, paths: Sequence[str], known: Mapping[str, Footer] | None) -> Mapping[str, Footer]:
    """Footers by path: those given in `known`, the others opened here (concurrently)."""
    known = known or {}
    missing = [path for path in paths if path not in known]
    if not missing:
        return known
    return {**known, **{footer.path: footer for footer in read_footers([(fs, path) for path in missing])}}


def uses_sort_merge(fs: FileSystem, deletes: Sequence[DeleteSource], *,
                    max_delete_events_in_memory: int = DEFAULT_MAX_DELETE_EVENTS_IN_MEMORY,
                    footers: Mapping[str, Footer] | None = None) -> bool:
    """Whether a read streams its delete events in a sort-merge: more of them than fit the in-memory bound.

    Hive's VectorizedOrcAcidRowBatchReader falls back to its SortMergedDeleteEventRegistry the same way. Only file
    footers are read (those not in `footers`, by path); a distributed reader decides once on its driver and hands
    the answer to every task.
    """
    known = _footers_of(fs, [source.path for source in deletes], footers)
    return sum(known[source.path].delete_events for source in deletes) > max_delete_events_in_memory


def footer_paths(plan: ReadPlan) -> list[str]:
    """The files whose footers `read_units` and `uses_sort_merge` read: the insert files it does not know the length
    of from a side file, and the delete files."""
    return [source.path for source in plan.inserts if source.length is None] + [source.path for source in plan.deletes]


def read_units(fs: FileSystem, plan: ReadPlan, *,
               footers: Mapping[str, Footer] | None = None) -> list[tuple[InsertSource, int | None]]:
    """Independent pieces of work, `(insert source, stripe or None)`: one per stripe of a multi-stripe file, on
    either delete path (the sort-merge starts its delete cursors at the stripe's first key, found from the previous
    stripe's `hive.acid.key.index` entry), else one per file. Footers not in `footers` (by path) are opened here."""
    split = [source for source in plan.inserts if source.synthetic is None and source.length is None]
    known = _footers_of(fs, [source.path for source in split], footers)
    units: list[tuple[InsertSource, int | None]] = []
    for source in plan.inserts:
        if source.synthetic is None and source.length is None:
            stripes = known[source.path].stripes
            if stripes > 1:
                units.extend((source, stripe) for stripe in range(stripes))
                continue
        units.append((source, None))
    return units
