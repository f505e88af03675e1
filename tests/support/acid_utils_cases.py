"""Hive's TestAcidUtils directory cases as data (hive-acid-reference.md section 9, cases 1-17 and 19).

Each `AcidStateCase` is a partition directory (the files to create under it) plus a snapshot (a Hive 3/4
ValidWriteIdList string and a ValidTxnList string) and what Hive's getAcidState answers for it. Names and expected
values are copied from `ql/src/test/org/apache/hadoop/hive/ql/io/TestAcidUtils.java` (Hive 4 for cases 1-16; the
Hive 2.x/3.x versions for testBestBase, which the newest Hive no longer has).

Conventions:

* `files` lists every file to create, relative to the partition directory; each ACID directory holds a `bucket_0`
  file as in Hive's MockFileSystem set-up. Files not named in `file_sizes` get a few bytes; `file_sizes` gives
  Hive's 0-byte files (`_done`, the 0-byte original `subdir/000000_0`).
* Expected names are relative to the partition directory. `obsolete` and `aborted` are sets (Hive's own order
  is listing order); `deltas` and `original_files` are in Hive's order (read order; originals sorted by path).
* `error` is a substring of the expected error message; `{P}` stands for the partition directory's path.
* `hive2_shared` marks cases with no `_v` names whose answer Hive 2.3's getAcidState gives too.
* `hive4_rules` is False for the few Hive-2.3-only answers (testBestBase (d)-(f) with plain base names): Hive 4
  treats a base without `_v` suffix or `_metadata_acid` marker as an INSERT OVERWRITE base, visible when its
  write id is committed, so it answers differently. acid_core follows Hive 4, so only cases with `hive4_rules`
  are run against it; the Hive 2.3 harness runs every case with `hive2_shared`.

Importing this module has no side effects.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX = 9223372036854775807
LONG_MIN = -9223372036854775808
DEFAULT_TXNS = f"1000:{MAX}::"
PARTITION_PLACEHOLDER = "{P}"


@dataclass(frozen=True, slots=True)
class AcidStateCase:
    """One getAcidState call: a partition layout, a snapshot, and Hive's answer."""

    name: str
    files: tuple[str, ...]
    write_ids: str
    txns: str = DEFAULT_TXNS
    compactor: bool = False
    file_sizes: tuple[tuple[str, int], ...] = ()
    base: str | None = None
    deltas: tuple[str, ...] = ()
    obsolete: frozenset[str] = frozenset()
    original_files: tuple[str, ...] = ()
    aborted: frozenset[str] = frozenset()
    error: str | None = None
    hive2_shared: bool = False
    hive4_rules: bool = True
    note: str = ""

    def size_of(self, path: str, default: int) -> int:
        """The size to create `path` with: Hive's size where the test names one, else `default`."""
        return dict(self.file_sizes).get(path, default)

    def expected_error(self, partition_path: str) -> str | None:
        """The error substring with `{P}` replaced by the partition directory's path."""
        if self.error is None:
            return None
        return self.error.replace(PARTITION_PLACEHOLDER, partition_path.rstrip("/"))


def acid_dirs(*names: str, extras: dict[str, tuple[str, ...]] | None = None) -> tuple[str, ...]:
    """`<dir>/bucket_0` for each ACID directory, plus extra files named per directory."""
    extras = extras or {}
    files: list[str] = []
    for name in names:
        files.append(f"{name}/bucket_0")
        files.extend(f"{name}/{extra}" for extra in extras.get(name, ()))
    return tuple(files)


def _case(name: str, files: tuple[str, ...], write_ids: str, **kwargs) -> AcidStateCase:
    obsolete = kwargs.pop("obsolete", ())
    aborted = kwargs.pop("aborted", ())
    return AcidStateCase(name=name, files=files, write_ids=write_ids, obsolete=frozenset(obsolete),
                         aborted=frozenset(aborted), **kwargs)


_ORIGINALS_WITH_COPIES = ("000000_0", "000000_0_copy_1", "000000_0_copy_2", "000001_1", "000002_0", "random",
                          "_done", "subdir/000000_0")
_ORIGINALS = ("000000_0", "000001_1", "000002_0", "random", "_done", "subdir/000000_0")
_EMPTY_ORIGINALS = (("_done", 0), ("subdir/000000_0", 0))

# testBestBase layout; the `_v` variants carry a committed visibility txn (300 <= 1000, the txn list's HWM).
_BEST_BASE = ("base_5", "base_10", "base_25", "delta_98_100", "base_100", "delta_120_130", "base_200")
_BEST_BASE_V = ("base_5_v300", "base_10_v300", "base_25_v300", "delta_98_100", "base_100_v300", "delta_120_130",
                "base_200_v300")

_V = {name: f"{name}_v300" for name in ("base_5", "base_10", "base_25", "base_100", "base_200")}
_NO_HISTORY_125_5 = "Not enough history available for (125,5).  Oldest available base: {P}/"
_NO_HISTORY_150_7 = "Not enough history available for (150,7).  Oldest available base: {P}/"

CASES: tuple[AcidStateCase, ...] = (
    # 1. testOriginal: only original files; `_done` is hidden; files in subdirectories are originals too.
    _case("testOriginal", _ORIGINALS_WITH_COPIES, f"tbl:100:{MAX}:", file_sizes=_EMPTY_ORIGINALS,
          original_files=("000000_0", "000000_0_copy_1", "000000_0_copy_2", "000001_1", "000002_0", "random",
                          "subdir/000000_0"),
          hive2_shared=True),
    # 2. testOriginalDeltas: originals stay without a base; delta_101_101 is above the HWM (ignored, not obsolete).
    _case("testOriginalDeltas",
          _ORIGINALS + acid_dirs("delta_025_025", "delta_029_029", "delta_025_030", "delta_050_100", "delta_101_101"),
          f"tbl:100:{MAX}:", file_sizes=_EMPTY_ORIGINALS,
          deltas=("delta_025_030", "delta_050_100"),
          obsolete={"delta_025_025", "delta_029_029"},
          original_files=("000000_0", "000001_1", "000002_0", "random", "subdir/000000_0"),
          hive2_shared=True),
    # 3. testBaseDeltas: delta_90_120 straddles the HWM after delta_050_105: dropped, not obsolete.
    _case("testBaseDeltas",
          acid_dirs("base_5", "base_10", "base_49", "delta_025_025", "delta_029_029", "delta_025_030",
                    "delta_050_105", "delta_90_120"),
          f"tbl:100:{MAX}:",
          base="base_49", deltas=("delta_050_105",),
          obsolete={"base_5", "base_10", "delta_025_030", "delta_025_025", "delta_029_029"},
          hive2_shared=True),
    # 4. testObsoleteOriginals: a base makes every original file obsolete.
    _case("testObsoleteOriginals", acid_dirs("base_10", "base_5") + ("000000_0", "000001_1"), f"tbl:150:{MAX}:",
          base="base_10", obsolete={"base_5", "000000_0", "000001_1"},
          hive2_shared=True),
    # 5. testOverlapingDelta: padding width does not matter; a wider delta shadows narrower ones inside it.
    _case("testOverlapingDelta",
          acid_dirs("delta_0000063_63", "delta_000062_62", "delta_00061_61", "delta_40_60", "delta_0060_60",
                    "delta_052_55", "base_50"),
          f"tbl:100:{MAX}:",
          base="base_50", deltas=("delta_40_60", "delta_00061_61", "delta_000062_62", "delta_0000063_63"),
          obsolete={"delta_052_55", "delta_0060_60"},
          hive2_shared=True),
    # 6. testOverlapingDelta2: statement ids; every statement delta of the newest txn is kept.
    _case("testOverlapingDelta2",
          acid_dirs("delta_0000063_63_0", "delta_000062_62_0", "delta_000062_62_3", "delta_00061_61_0", "delta_40_60",
                    "delta_0060_60_1", "delta_0060_60_4", "delta_0060_60_7", "delta_052_55", "delta_058_58",
                    "base_50"),
          f"tbl:100:{MAX}:",
          base="base_50",
          deltas=("delta_40_60", "delta_00061_61_0", "delta_000062_62_0", "delta_000062_62_3", "delta_0000063_63_0"),
          obsolete={"delta_052_55", "delta_058_58", "delta_0060_60_1", "delta_0060_60_4", "delta_0060_60_7"},
          hive2_shared=True),
    # 7. deltasWithOpenTxnInRead: delta_2_5 contains the open write id 4 but is still read (SOME valid).
    _case("deltasWithOpenTxnInRead", acid_dirs("delta_1_1", "delta_2_5"), "tbl:100:4:4", txns="1000:55:50:",
          deltas=("delta_1_1", "delta_2_5"),
          hive2_shared=True),
    # 8. deltasWithOpenTxnInRead2: deltas of the open write id 4 and above the HWM are not read (nor obsolete).
    _case("deltasWithOpenTxnInRead2",
          acid_dirs("delta_1_1", "delta_2_5", "delta_4_4_1", "delta_4_4_3", "delta_101_101_1"),
          "tbl:100:4:4", txns="1000:55:50:",
          deltas=("delta_1_1", "delta_2_5"),
          hive2_shared=True),
    # 9. deltasWithOpenTxnsNotInCompact: the compactor never takes a delta reaching above its HWM.
    _case("deltasWithOpenTxnsNotInCompact", acid_dirs("delta_1_1", "delta_2_5"), f"tbl:4:{MAX}", compactor=True,
          deltas=("delta_1_1",),
          hive2_shared=True),
    # 10. deltasWithOpenTxnsNotInCompact2: same, with a streaming side file left in delta_2_5.
    _case("deltasWithOpenTxnsNotInCompact2",
          acid_dirs("delta_1_1", "delta_2_5", "delta_6_10", extras={"delta_2_5": ("bucket_0_flush_length",)}),
          f"tbl:3:{MAX}", compactor=True,
          deltas=("delta_1_1",),
          hive2_shared=True),
    # 11. testBaseWithDeleteDeltas: delete_delta_x_y sorts before delta_x_y; delete_delta_110_110 is above the HWM.
    _case("testBaseWithDeleteDeltas",
          acid_dirs("base_5", "base_10", "base_49", "delta_025_025", "delta_029_029", "delete_delta_029_029",
                    "delta_025_030", "delete_delta_025_030", "delta_050_105", "delete_delta_050_105",
                    "delete_delta_110_110"),
          f"tbl:100:{MAX}:",
          base="base_49", deltas=("delete_delta_050_105", "delta_050_105"),
          obsolete={"base_5", "base_10", "delete_delta_025_030", "delta_025_030", "delta_025_025",
                    "delete_delta_029_029", "delta_029_029"},
          hive2_shared=True),
    # 12. testOverlapingDeltaAndDeleteDelta.
    _case("testOverlapingDeltaAndDeleteDelta",
          acid_dirs("delta_0000063_63", "delta_000062_62", "delta_00061_61", "delete_delta_00064_64", "delta_40_60",
                    "delete_delta_40_60", "delta_0060_60", "delta_052_55", "delete_delta_052_55", "base_50"),
          f"tbl:100:{MAX}:",
          base="base_50",
          deltas=("delete_delta_40_60", "delta_40_60", "delta_00061_61", "delta_000062_62", "delta_0000063_63",
                  "delete_delta_00064_64"),
          obsolete={"delete_delta_052_55", "delta_052_55", "delta_0060_60"},
          hive2_shared=True),
    # 13. testMinorCompactedDeltaMakesInBetweenDelteDeltaObsolete.
    _case("testMinorCompactedDeltaMakesInBetweenDelteDeltaObsolete",
          acid_dirs("delta_40_60", "delete_delta_50_50"), f"tbl:100:{MAX}:",
          deltas=("delta_40_60",), obsolete={"delete_delta_50_50"},
          hive2_shared=True),
    # 14. deltasAndDeleteDeltasWithOpenTxnsNotInCompact.
    _case("deltasAndDeleteDeltasWithOpenTxnsNotInCompact",
          acid_dirs("delta_1_1", "delete_delta_2_2", "delta_2_5", "delete_delta_2_5", "delete_delta_7_7",
                    "delta_6_10", extras={"delta_2_5": ("bucket_0_flush_length",)}),
          f"tbl:4:{MAX}:", compactor=True,
          deltas=("delta_1_1", "delete_delta_2_2"),
          hive2_shared=True),
    # 15. deleteDeltasWithOpenTxnInRead: delete_delta_3_3 lies inside [delete_]delta_2_5, so it is obsolete
    #     (Hive asserts only that it is not read; findBestWorkingDeltas puts it in the obsolete list).
    _case("deleteDeltasWithOpenTxnInRead",
          acid_dirs("delta_1_1", "delta_2_5", "delete_delta_2_5", "delete_delta_3_3", "delta_4_4_1", "delta_4_4_3",
                    "delta_101_101_1"),
          "tbl:100:4:4", txns="1000:55:50:",
          deltas=("delta_1_1", "delete_delta_2_5", "delta_2_5"),
          obsolete={"delete_delta_3_3"},
          hive2_shared=True),
    # 16. testRecursiveDirListingIs(Not)ReusedWhenSnapshot*: default (empty) reader list; _orc_acid_version is hidden.
    _case("testRecursiveDirListing", ("base_0/bucket_0", "base_0/_orc_acid_version"), f"null:{MAX}:{MAX}::",
          base="base_0",
          hive2_shared=True),

    # 17. testBestBase (Hive 2.x/3.x). Plain names: in Hive 4 these are INSERT OVERWRITE bases, valid when their
    #     write id is committed; (a), (b), (c), (g) answer the same under Hive 2.3 and Hive 4 rules.
    _case("testBestBase_a", acid_dirs(*_BEST_BASE), f"tbl:150:{MAX}:",
          base="base_100", deltas=("delta_120_130",),
          obsolete={"base_10", "base_25", "base_5", "delta_98_100"},
          hive2_shared=True, note="base_200 is above the HWM: neither chosen nor obsolete"),
    _case("testBestBase_b", acid_dirs(*_BEST_BASE), f"tbl:10:{MAX}:",
          base="base_10", obsolete={"base_5"},
          hive2_shared=True),
    _case("testBestBase_c", acid_dirs(*_BEST_BASE), "tbl:150:121:121:99",
          base="base_100", deltas=("delta_120_130",),
          obsolete={"base_10", "base_25", "base_5", "delta_98_100"},
          hive2_shared=True, note="121 open, 99 aborted; Hive 2 string was 150:121:99:121"),
    _case("testBestBase_g", acid_dirs(f"base_{LONG_MIN}", "delta_1_1", "base_100"), f"tbl:1:{MAX}:",
          base=f"base_{LONG_MIN}", deltas=("delta_1_1",),
          hive2_shared=True, note="base_-9223372036854775808: first compaction of a converted table, always valid"),
    # (d)-(f) as Hive 2.3 answers them (no IOW bases in Hive 2): not enough history.
    _case("testBestBase_d", acid_dirs(*_BEST_BASE), "tbl:125:5:5:",
          error=_NO_HISTORY_125_5 + "base_5", hive2_shared=True, hive4_rules=False),
    _case("testBestBase_e", acid_dirs("delta_1_10", "delta_12_25", "base_25", "base_100"), "tbl:150:7:7:",
          error=_NO_HISTORY_150_7 + "base_25", hive2_shared=True, hive4_rules=False),
    _case("testBestBase_f", acid_dirs("delta_2_10", "base_25", "base_100"), "tbl:150:7:7:",
          error=_NO_HISTORY_150_7 + "base_25", hive2_shared=True, hive4_rules=False),
    # The same plain-name (d)-(f) under Hive 4 rules: IOW bases with committed write ids are read.
    _case("testBestBase_d_iow", acid_dirs(*_BEST_BASE), "tbl:125:5:5:",
          base="base_100", deltas=("delta_120_130",),
          obsolete={"base_5", "base_10", "base_25", "delta_98_100"}),
    _case("testBestBase_e_iow", acid_dirs("delta_1_10", "delta_12_25", "base_25", "base_100"), "tbl:150:7:7:",
          base="base_100", obsolete={"base_25", "delta_1_10", "delta_12_25"}),
    _case("testBestBase_f_iow", acid_dirs("delta_2_10", "base_25", "base_100"), "tbl:150:7:7:",
          base="base_100", obsolete={"base_25", "delta_2_10"}),
    # Compactor bases (`_v300`, txn 300 committed). Rule relied on (Hive 4 AcidUtils.isValidBase/processBaseDir):
    # a compacted base is valid only if writeIdList.isValidBase(w), i.e. w < minOpenWriteId and w <= HWM; when
    # bases exist, none is valid and the oldest usable one is compacted, getAcidState throws ACID_NOT_ENOUGH_HISTORY.
    _case("testBestBase_a_v", acid_dirs(*_BEST_BASE_V), f"tbl:150:{MAX}:",
          base=_V["base_100"], deltas=("delta_120_130",),
          obsolete={_V["base_10"], _V["base_25"], _V["base_5"], "delta_98_100"}),
    _case("testBestBase_b_v", acid_dirs(*_BEST_BASE_V), f"tbl:10:{MAX}:",
          base=_V["base_10"], obsolete={_V["base_5"]}),
    _case("testBestBase_c_v", acid_dirs(*_BEST_BASE_V), "tbl:150:121:121:99",
          base=_V["base_100"], deltas=("delta_120_130",),
          obsolete={_V["base_10"], _V["base_25"], _V["base_5"], "delta_98_100"}),
    # (d) holds only with the strict rule w < minOpenWriteId. Hive 4's isValidBase has an extra early
    # `w <= minOpenWriteId -> valid` branch, under which base_5_v300 would be chosen (deltas delta_98_100 and
    # delta_120_130, nothing obsolete) instead of this error; acid_core deliberately keeps the strict rule.
    _case("testBestBase_d_v", acid_dirs(*_BEST_BASE_V), "tbl:125:5:5:",
          error=_NO_HISTORY_125_5 + _V["base_5"]),
    _case("testBestBase_e_v", acid_dirs("delta_1_10", "delta_12_25", "base_25_v300", "base_100_v300"),
          "tbl:150:7:7:", error=_NO_HISTORY_150_7 + "base_25_v300"),
    _case("testBestBase_f_v", acid_dirs("delta_2_10", "base_25_v300", "base_100_v300"), "tbl:150:7:7:",
          error=_NO_HISTORY_150_7 + "base_25_v300"),
    _case("testBestBase_g_v", acid_dirs(f"base_{LONG_MIN}", "delta_1_1", "base_100_v300"), f"tbl:1:{MAX}:",
          base=f"base_{LONG_MIN}", deltas=("delta_1_1",)),

    # 19. [derived] visibility of a compactor base (isDirUsable + processBaseDir).
    _case("visibility_base_committed_v", acid_dirs("base_0000010_v0000020"), f"tbl:30:{MAX}:",
          txns=f"30:{MAX}::", base="base_0000010_v0000020"),
    _case("visibility_base_open_v", acid_dirs("base_0000010_v0000020"), f"tbl:30:{MAX}:",
          txns="30:20:20:", note="skipped: not chosen, not obsolete, not aborted, no history error"),
    _case("visibility_base_aborted_v", acid_dirs("base_0000010_v0000020"), f"tbl:30:{MAX}:",
          txns=f"30:{MAX}::20", aborted={"base_0000010_v0000020"}),
    _case("visibility_compactor_beats_iow_base_v", acid_dirs("base_0000010", "base_0000010_v0000020"),
          f"tbl:30:{MAX}:", txns=f"30:{MAX}::",
          base="base_0000010_v0000020", obsolete={"base_0000010"}),
)

CASES_BY_NAME: dict[str, AcidStateCase] = {case.name: case for case in CASES}
HIVE2_CASES: tuple[AcidStateCase, ...] = tuple(case for case in CASES if case.hive2_shared)
HIVE4_CASES: tuple[AcidStateCase, ...] = tuple(case for case in CASES if case.hive4_rules)
