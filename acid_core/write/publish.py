"""The one publish step: how a directory a transaction wrote becomes a directory readers may find.

Every writer here (`TableWrite` for `acid sql`, Spark, the demo and the embedded writer; streaming ingest; the
compactor) builds a result directory under a hidden staging name beside its final name (`layout.write_staging_name`,
or the compactor's hidden `.compactor-…` names) where renames are atomic, or under its final name directly on an
object store, where an uncommitted write id or a `_v<txn>` suffix hides it. `Publication` then completes each one
with Hive's ACID format file (`_orc_acid_version`, holding 2, as `AcidUtils.OrcAcidVersion.writeVersionFile` does)
and renames it into place; `discard` removes everything it staged or published. `write_format_file` is the only
code that writes the format file.

Cost: one small write per directory and one rename (a directory rename on HDFS and local disks; nothing on an object
store, which never renames); moving files into a directory that already exists (a second writer of the same write and
statement id, as Hive's parallel writers do) costs one rename per file.
"""

from __future__ import annotations

from dataclasses import dataclass

from acid_core.errors import AcidError
from acid_core.format.layout import ACID_FORMAT_FILE, ORC_ACID_VERSION
from acid_core.storage.fs import FileSystem, ensure_inside


def write_format_file(fs: FileSystem, directory: str) -> None:
    """Write Hive's ACID format file into `directory` (atomically: readers see the whole file or none)."""
    fs.write_atomically(fs.join(directory, ACID_FORMAT_FILE), str(ORC_ACID_VERSION).encode())


@dataclass(frozen=True, slots=True)
class Staged:
    """One directory of a publication: built at `staging`, readable at `final` (the same path on an object store)."""

    staging: str
    final: str

    @property
    def in_place(self) -> bool:
        return self.staging == self.final


class Publication:
    """The directories one transaction writes into one table, published together and discarded together.

    Only directories named for the transaction (its write id, or a compactor's `_v<txn>` / hidden attempt name) are
    staged, so discarding removes nothing another transaction wrote.
    """

    def __init__(self, fs: FileSystem, root: str | None = None) -> None:
        self.fs = fs
        self.root = root  # every staged directory must resolve inside it (a symbolic link may not lead out)
        self._staged: list[Staged] = []
        self._published = 0

    def stage(self, staging: str, final: str) -> None:
        """Remember a directory built at `staging` that `publish` makes readable at `final` (once).

        Raises:
            PathOutsideTableError: either path resolves outside the publication's root.
        """
        if self.root is not None:
            staging, final = (ensure_inside(self.root, path, fs=self.fs) for path in (staging, final))
        entry = Staged(staging, final)
        if entry not in self._staged:
            self._staged.append(entry)

    @property
    def pending(self) -> tuple[Staged, ...]:
        """What is staged and not published yet."""
        return tuple(self._staged[self._published:])

    @property
    def published(self) -> tuple[str, ...]:
        """The final directories published so far, in order."""
        return tuple(entry.final for entry in self._staged[:self._published])

    def publish(self) -> tuple[str, ...]:
        """Complete every pending directory with the format file and rename it into place: a directory that already
        exists under the final name (another writer of the same write and statement id) takes the staged files.
        Returns every final directory published so far.

        Raises:
            AcidError: a staged file would replace one already published under the same name.
        """
        fs = self.fs
        for entry in self.pending:
            write_format_file(fs, entry.staging)
            if not entry.in_place:
                if fs.exists(entry.final):
                    self._move_files(entry)
                else:
                    fs.rename(entry.staging, entry.final)
            self._published += 1
        return self.published

    def _move_files(self, entry: Staged) -> None:
        fs = self.fs
        present = {child.name for child in fs.list_dir(entry.final)}
        files = [child for child in fs.list_dir(entry.staging) if not child.is_dir]
        clashes = sorted(child.name for child in files if child.name in present and child.name != ACID_FORMAT_FILE)
        if clashes:
            raise AcidError(f"{entry.final}: {', '.join(clashes)} already exist: write id and statement id were "
                            "used twice")
        for child in files:
            if child.name != ACID_FORMAT_FILE or child.name not in present:
                fs.rename(child.path, fs.join(entry.final, child.name))
        fs.delete_dir(entry.staging)

    def discard(self) -> None:
        """Remove every staged and every published directory (none is readable: its transaction is not committed;
        a final directory not yet published is left alone, it may be another call's). Safe to call twice."""
        for index, entry in enumerate(self._staged):
            self.fs.delete_dir(entry.staging)
            if index < self._published and not entry.in_place:
                self.fs.delete_dir(entry.final)
        self._staged, self._published = [], 0


__all__ = ["Publication", "Staged", "write_format_file"]
