"""Which directories a snapshot reads, and which are obsolete or aborted: Hive's AcidUtils.getAcidState.

`acid_state` is a pure function over a `PartitionListing`; `list_partition` and `get_acid_state` do the I/O.
The rules and their order are Hive's (hive-acid-reference.md section 2); comments name the Hive step each reproduces.

Cost: one listing of the partition, then one of each directory the snapshot reads; every name parsed once and the
listing indexed by name, so time and memory are linear in the directories (plus sorting the deltas read).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from functools import partial

from acid_core.errors import DirectoryVanishedError, FileSystemError, LayoutError, NotEnoughHistoryError
from acid_core.format.layout import METADATA_FILE, ParsedBase, ParsedDelta, is_hidden, parse_directory
from acid_core.format.validity import RangeResponse, ValidTxnList, ValidWriteIdList
from acid_core.storage.fs import FileEntry, FileSystem, concurrently

_JAVA_LONG_MIN = -(2**63)


@dataclass(frozen=True, slots=True)
class ListedEntry:
    """A visible child of a partition directory; ACID directories carry their own children and their parsed name
    (`parsed`, None for a file or an original directory)."""

    name: str
    is_dir: bool
    size: int = 0
    children: tuple[FileEntry, ...] = ()
    compacted_marker: bool = False
    parsed: ParsedBase | ParsedDelta | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class PartitionListing:
    """Everything getAcidState needs to know about one partition directory, gathered in one pass, indexed by name."""

    location: str
    entries: tuple[ListedEntry, ...]
    original_dir_files: tuple[FileEntry, ...] = ()
    _by_name: dict[str, ListedEntry] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_name", {entry.name: entry for entry in self.entries})

    def entry(self, name: str) -> ListedEntry | None:
        """The entry of that name, if listed (a dictionary lookup)."""
        return self._by_name.get(name)

    def children(self, name: str) -> tuple[FileEntry, ...]:
        """Files inside the named base or delta directory."""
        entry = self._by_name.get(name)
        return entry.children if entry is not None else ()


@dataclass(frozen=True, slots=True)
class DirectoryState:
    """The result of getAcidState for one snapshot of one partition."""

    location: str
    base: ParsedBase | None
    deltas: tuple[ParsedDelta, ...]
    obsolete: tuple[str, ...]
    aborted: tuple[str, ...]
    original_files: tuple[str, ...]
    has_uncompacted_aborts: bool = False
    listing: PartitionListing | None = field(default=None, repr=False, compare=False)

    def to_json(self) -> dict:
        """The stable JSON form printed by `acid inspect --json`."""
        return {
            "base": self.base.name if self.base else None,
            "deltas": [delta.name for delta in self.deltas],
            "obsolete": list(self.obsolete),
            "aborted": list(self.aborted),
        }


def _read_compacted_marker(fs: FileSystem, path: str) -> bool:
    """`_metadata_acid` says dataFormat == "compacted" (Hive's MetaDataFile.isCompacted)."""
    try:
        document = json.loads(fs.read_bytes(path).decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise FileSystemError(f"{path!r} is not a valid {METADATA_FILE} JSON document: {exc}") from exc
    return isinstance(document, dict) and document.get("dataFormat") == "compacted"


def _list_files_recursively(fs: FileSystem, root: str, prefix: str, location: str) -> list[FileEntry]:
    """Original files below a non-ACID subdirectory.

    Raises:
        LayoutError: the subdirectory holds ACID directories, so `location` is a partitioned table's root (or deeper
            layout mistake) rather than a partition: reading its event files as original files would be wrong.
    """
    found = []
    for entry in fs.list_dir(root):
        if is_hidden(entry.name):
            continue
        relative = f"{prefix}/{entry.name}" if prefix else entry.name
        if entry.is_dir:
            if parse_directory(entry.name) is not None:
                raise LayoutError(f"{location!r} is not a partition directory: its subdirectory {relative!r} is an ACID "
                                  "directory; point at a partition (e.g. <table>/<key>=<value>) instead")
            found.extend(_list_files_recursively(fs, entry.path, relative, location))
        else:
            found.append(FileEntry(relative, entry.path, False, entry.size))
    return found


def _compacted_marker(fs: FileSystem, directory: str) -> bool:
    """Whether a base without a `_v` suffix carries `_metadata_acid` saying it was compacted. A base removed while we
    look (a cleaner finishing an obsolete one) reads as unmarked; if the snapshot then needs it, loading its files
    fails loudly."""
    path = fs.join(directory, METADATA_FILE)
    try:
        if not fs.exists(path):
            return False
        return _read_compacted_marker(fs, path)
    except FileSystemError:
        if fs.exists(path):
            raise
        return False


def list_partition(fs: FileSystem, location: str, *, missing_ok: bool = False) -> PartitionListing:
    """List a partition directory's entries (one listing; ACID directories are listed later, and only those the
    snapshot reads), original files and original subdirectories.

    `missing_ok` lists a directory that does not exist as empty (a partition registered before anything was
    written to it); otherwise that is an error.

    Raises:
        FileSystemError: the directory is missing (unless `missing_ok`) or unreadable.
        InvalidNameError: a directory carries an ACID prefix but a malformed name.
    """
    entries: list[ListedEntry] = []
    original_dir_files: list[FileEntry] = []
    # A directory missing when listed holds nothing a snapshot taken before can see: writers create it before they
    # commit and cleaners never remove it. (Checking again afterwards would race a writer creating it.)
    for entry in fs.list_dir(location, missing_ok=missing_ok):
        name = entry.name
        if name.startswith(("_", ".")):  # is_hidden, inlined: this loop runs once per directory of the partition
            continue
        if not entry.is_dir:
            entries.append(ListedEntry(name, False, entry.size))
            continue
        parsed = parse_directory(name)
        if parsed is None:
            original_dir_files.extend(_list_files_recursively(fs, entry.path, entry.name, location))
            entries.append(ListedEntry(entry.name, True))
            continue
        marker = isinstance(parsed, ParsedBase) and parsed.visibility_txn_id == 0 and _compacted_marker(fs, entry.path)
        entries.append(ListedEntry(entry.name, True, compacted_marker=marker, parsed=parsed))
    return PartitionListing(location, tuple(entries), tuple(original_dir_files))


def _list_read_directory(fs: FileSystem, path: str) -> tuple[FileEntry, ...]:
    """The children of a directory the snapshot reads.

    Raises:
        DirectoryVanishedError: it does not exist (any more).
    """
    try:
        return tuple(fs.list_dir(path))
    except FileSystemError as exc:
        if fs.exists(path):
            raise
        raise DirectoryVanishedError(f"directory {path!r}, which this snapshot reads, does not exist any more: it was "
                                     "removed while the snapshot was open (a reader must hold a transaction or a "
                                     "reader lease for the cleaner to keep what it reads)") from exc


def with_files(fs: FileSystem, state: DirectoryState) -> DirectoryState:
    """The state with the files of the directories it reads (base and deltas) listed, and only those: an obsolete or
    aborted directory removed by a cleaner meanwhile is never touched.

    Cost: one listing per directory read, `fs.io_threads` of them at a time; time and memory linear in the entries.

    Raises:
        DirectoryVanishedError: a directory the snapshot reads does not exist (any more): its reader was not protected by
            a transaction or a reader lease while a cleaner ran, or someone removed it by hand.
    """
    if state.listing is None:
        return state
    needed = {delta.name for delta in state.deltas} | ({state.base.name} if state.base else set())
    unlisted = [entry for entry in state.listing.entries if entry.name in needed and entry.is_dir and not entry.children]
    if not unlisted:
        return state
    location = state.location
    prefix = location if not location or location.endswith("/") else location + "/"  # fs.join, without a call each
    listed = concurrently(partial(_list_read_directory, fs), [prefix + entry.name for entry in unlisted],
                          threads=fs.io_threads)
    replaced = {}
    for entry, children in zip(unlisted, listed):
        size = 0
        for child in children:
            if not child.is_dir and not child.name.startswith(("_", ".")):  # is_hidden, inlined (once per file)
                size += child.size
        replaced[entry.name] = ListedEntry(entry.name, True, size, children, entry.compacted_marker, entry.parsed)
    entries = tuple([replaced.get(entry.name, entry) for entry in state.listing.entries])
    return replace(state, listing=replace(state.listing, entries=entries))


def get_acid_state(location: str, *, write_ids: ValidWriteIdList, txns: ValidTxnList | None = None,
                   ignore_empty_files: bool = False, missing_ok: bool = False,
                   fs: FileSystem | None = None) -> DirectoryState:
    """List `location`, compute its directory state for the snapshot (see acid_state) and list the files of the
    directories it reads. `missing_ok`: a location that does not exist is an empty partition.

    Cost: one listing of the partition, one per base or delta the snapshot reads (none of obsolete ones).
    """
    if fs is None:
        fs, location = FileSystem.resolve(location)
    state = acid_state(list_partition(fs, location, missing_ok=missing_ok), write_ids=write_ids, txns=txns,
                       ignore_empty_files=ignore_empty_files)
    return with_files(fs, state)


class _Walk:
    """Mutable scratch state of one acid_state call (never escapes it)."""

    def __init__(self, write_ids: ValidWriteIdList, txns: ValidTxnList) -> None:
        self.write_ids, self.txns = write_ids, txns
        self.base: ParsedBase | None = None
        self.oldest_base: tuple[ParsedBase, bool] | None = None
        self.obsolete: list[str] = []
        self.aborted: list[str] = []
        self.current: list[ParsedDelta] = []
        self.uncompacted_aborts = False

    def usable(self, name: str, visibility_txn_id: int) -> bool:
        """Hive's isDirUsable: a `_vT` directory is read only once transaction T committed."""
        if self.txns.is_valid(visibility_txn_id):
            return True
        if self.txns.is_aborted(visibility_txn_id):
            self.aborted.append(name)
        return False

    def valid_base(self, base: ParsedBase, compacted: bool) -> bool:
        """Hive's isValidBase.

        Hive 4 also accepts any base with write id <= minOpenWriteId; that would let a reader see an INSERT OVERWRITE
        base written by the still-open transaction holding minOpenWriteId, so we accept only write ids strictly below.
        """
        if base.write_id == _JAVA_LONG_MIN:
            return True
        min_open = self.write_ids.min_open_or_none
        if min_open is not None and base.write_id < min_open:
            return base.write_id <= self.write_ids.high_watermark
        if compacted:
            return self.write_ids.is_valid_base(base.write_id)
        return self.write_ids.is_valid(base.write_id)

    def add_base(self, base: ParsedBase, marker: bool) -> None:
        """Hive's processBaseDir."""
        if not self.usable(base.name, base.visibility_txn_id):
            return
        compacted = base.visibility_txn_id > 0 or marker
        if self.oldest_base is None or base.write_id < self.oldest_base[0].write_id:
            self.oldest_base = (base, compacted)
        if self.write_ids.is_aborted(base.write_id) and not compacted:
            self.aborted.append(base.name)
            return
        best = self.base
        if (best is None or best.write_id < base.write_id
                or (best.write_id == base.write_id and compacted and self.txns.is_valid(base.visibility_txn_id))):
            if self.valid_base(base, compacted):
                if best is not None:
                    self.obsolete.append(best.name)
                self.base = base
        else:
            self.obsolete.append(base.name)

    def add_delta(self, delta: ParsedDelta) -> None:
        """Hive's processDeltaDir."""
        if not self.usable(delta.name, delta.visibility_txn_id):
            return
        aborted = self.write_ids.range_aborted(delta.min_write_id, delta.max_write_id)
        if aborted is RangeResponse.ALL:
            self.aborted.append(delta.name)
            return
        if aborted is RangeResponse.SOME:
            self.uncompacted_aborts = True
        if self.write_ids.range_valid(delta.min_write_id, delta.max_write_id) is not RangeResponse.NONE:
            self.current.append(delta)

    def best_working_deltas(self) -> list[ParsedDelta]:
        """Hive's findBestWorkingDeltas: walk deltas in read order, keep those that extend coverage."""
        chosen: list[ParsedDelta] = []
        covered = self.base.write_id if self.base else 0
        last_statement = -1
        previous: ParsedDelta | None = None
        for delta in sorted(self.current, key=ParsedDelta.read_order_key):
            if delta.max_write_id > covered:
                if self.write_ids.range_valid(covered + 1, delta.max_write_id) is not RangeResponse.NONE:
                    chosen.append(delta)
                    covered = delta.max_write_id
                    last_statement = delta.statement_order
                    previous = delta
            elif delta.max_write_id == covered and last_statement >= 0:
                chosen.append(delta)
                previous = delta
            elif (previous is not None and delta.min_write_id == previous.min_write_id
                  and delta.max_write_id == previous.max_write_id
                  and delta.statement_order == previous.statement_order):
                chosen.append(delta)
                previous = delta
            else:
                self.obsolete.append(delta.name)
        return chosen

    def not_enough_history(self, location: str) -> NotEnoughHistoryError:
        exceptions = self.write_ids.exceptions  # Hive prints the first invalid write id, open or aborted
        shown = str(exceptions[0]) if exceptions else "x"
        assert self.oldest_base is not None, "called when the oldest base does not cover the snapshot"
        oldest = f"{location.rstrip('/')}/{self.oldest_base[0].name}"
        return NotEnoughHistoryError(
            f"Not enough history available for ({self.write_ids.high_watermark},{shown}).  Oldest available base: {oldest}")


def acid_state(listing: PartitionListing, *, write_ids: ValidWriteIdList, txns: ValidTxnList | None = None,
               ignore_empty_files: bool = False) -> DirectoryState:
    """Hive's getAcidState over a listing: the chosen base, current deltas in read order, obsolete and aborted names.

    `ignore_empty_files` leaves zero-length original files out (readers); the compactor and cleaner keep them so that
    they become obsolete and get cleaned.

    Raises:
        NotEnoughHistoryError: only compacted bases exist and none is valid for the snapshot.
    """
    walk = _Walk(write_ids, txns if txns is not None else ValidTxnList())
    original_files: list[str] = []
    original_dirs: list[str] = []
    for entry in listing.entries:
        if not entry.is_dir:
            if entry.size > 0 or not ignore_empty_files:
                original_files.append(entry.name)
            continue
        parsed = entry.parsed if entry.parsed is not None else parse_directory(entry.name)
        if isinstance(parsed, ParsedBase):
            walk.add_base(parsed, entry.compacted_marker)
        elif isinstance(parsed, ParsedDelta):
            walk.add_delta(parsed)
        else:
            original_dirs.append(entry.name)
    if walk.base is not None:
        walk.obsolete.extend(original_files)
        walk.obsolete.extend(original_dirs)
        original_files = []
    else:
        original_files.extend(f.name for f in listing.original_dir_files if f.size > 0 or not ignore_empty_files)
    deltas = walk.best_working_deltas()
    if walk.oldest_base is not None and walk.base is None and walk.oldest_base[1]:
        raise walk.not_enough_history(listing.location)
    return DirectoryState(
        location=listing.location,
        base=walk.base,
        deltas=tuple(deltas),
        obsolete=tuple(sorted(walk.obsolete)),
        aborted=tuple(sorted(walk.aborted)),
        original_files=tuple(sorted(original_files)),
        has_uncompacted_aborts=walk.uncompacted_aborts,
        listing=listing,
    )
