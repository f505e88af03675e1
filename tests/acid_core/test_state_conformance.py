"""getAcidState conformance: Hive's TestAcidUtils cases plus visibility-suffix cases, run on real directories.

The Hive cases are data in acid_utils_cases.py; every case with `hive4_rules` is materialised under tmp_path and
handed to acid_core.read.state.get_acid_state. The cases below them are derived from Hive 4's AcidUtils.processBaseDir,
processDeltaDir, isDirUsable and findBestWorkingDeltas (hive-acid-reference.md section 2).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from support.acid_utils_cases import (
    CASES,
    CASES_BY_NAME,
    DEFAULT_TXNS,
    HIVE2_CASES,
    HIVE4_CASES,
    MAX,
    AcidStateCase,
    acid_dirs,
)

from acid_core.errors import NotEnoughHistoryError
from acid_core.format.validity import ValidCompactorWriteIdList, ValidTxnList, ValidWriteIdList
from acid_core.read.state import DirectoryState, ListedEntry, PartitionListing, acid_state, get_acid_state

BUCKET_BYTES = b"ORC\x00"  # getAcidState never opens data files, so any few bytes do
COMPACTED_MARKER = json.dumps({"thisFileVersion": "0", "dataFormat": "compacted"}).encode()
TRUNCATED_MARKER = json.dumps({"thisFileVersion": "0", "dataFormat": "truncated"}).encode()
_VISIBILITY = re.compile(r"_v[0-9]+")


def materialize(root: Path, files, *, sizes=None, contents=None) -> Path:
    """Create `root/part1` holding `files` (relative paths); return the partition directory."""
    partition = root / "part1"
    partition.mkdir()
    sizes, contents = dict(sizes or {}), dict(contents or {})
    for relative in files:
        target = partition / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        if relative in contents:
            target.write_bytes(contents[relative])
        else:
            target.write_bytes(BUCKET_BYTES[:1] * sizes.get(relative, len(BUCKET_BYTES)))
    return partition


def read_state(partition: Path, write_ids: str, txns: str = DEFAULT_TXNS, *, compactor: bool = False) -> DirectoryState:
    list_class = ValidCompactorWriteIdList if compactor else ValidWriteIdList
    return get_acid_state(str(partition), write_ids=list_class.parse(write_ids), txns=ValidTxnList.parse(txns))


def summary(state: DirectoryState) -> dict:
    """The parts of a DirectoryState the Hive tests assert on, in comparable form."""
    return {
        "base": state.base.name if state.base else None,
        "deltas": [delta.name for delta in state.deltas],
        "obsolete": sorted(state.obsolete),
        "aborted": sorted(state.aborted),
        "original_files": list(state.original_files),
    }


def expected(*, base=None, deltas=(), obsolete=(), aborted=(), original_files=()) -> dict:
    return {"base": base, "deltas": list(deltas), "obsolete": sorted(obsolete), "aborted": sorted(aborted),
            "original_files": list(original_files)}


# ---------------------------------------------------------------------------------------------------------------
# Hive's TestAcidUtils cases (data)


def test_case_data_is_well_formed():
    names = [case.name for case in CASES]
    assert len(names) == len(set(names))
    for case in CASES:
        assert all(not f.startswith("/") and ".." not in f.split("/") for f in case.files), case.name
        assert set(dict(case.file_sizes)) <= set(case.files), case.name
        assert (case.error is None) or (case.base is None and not case.deltas), case.name
    for case in HIVE2_CASES:  # Hive 2.3 cannot parse `_vT` directory names (NumberFormatException)
        directories = {part for path in case.files for part in path.split("/")[:-1]}
        assert not case.name.endswith("_v") and not any(_VISIBILITY.search(d) for d in directories), case.name


@pytest.mark.parametrize("case", HIVE4_CASES, ids=lambda case: case.name)
def test_hive_acid_utils_case(case: AcidStateCase, tmp_path):
    partition = materialize(tmp_path, case.files, sizes=dict(case.file_sizes))
    if case.error is not None:
        with pytest.raises(NotEnoughHistoryError) as raised:
            read_state(partition, case.write_ids, case.txns, compactor=case.compactor)
        assert case.expected_error(str(partition)) in str(raised.value)
        return
    state = read_state(partition, case.write_ids, case.txns, compactor=case.compactor)
    assert summary(state) == expected(base=case.base, deltas=case.deltas, obsolete=case.obsolete,
                                      aborted=case.aborted, original_files=case.original_files)


def test_not_enough_history_message_is_hives_exactly(tmp_path):
    partition = materialize(tmp_path, acid_dirs("delta_2_10", "base_25_v300", "base_100_v300"))
    with pytest.raises(NotEnoughHistoryError) as raised:
        read_state(partition, "tbl:150:7:7:")
    assert str(raised.value) == (
        f"Not enough history available for (150,7).  Oldest available base: {partition}/base_25_v300")


def test_not_enough_history_names_the_first_exception_even_if_aborted(tmp_path):
    """Hive prints writeIdList.getInvalidWriteIds()[0], the smallest open *or aborted* write id."""
    partition = materialize(tmp_path, acid_dirs("delta_2_10", "base_25_v300", "base_100_v300"))
    with pytest.raises(NotEnoughHistoryError) as raised:
        read_state(partition, "tbl:150:7:7:3")
    assert "Not enough history available for (150,3).  Oldest available base: " in str(raised.value)


def test_not_enough_history_without_exceptions_prints_x(tmp_path):
    partition = materialize(tmp_path, acid_dirs("base_5_v20"))
    with pytest.raises(NotEnoughHistoryError) as raised:
        read_state(partition, f"tbl:3:{MAX}:")
    assert f"Not enough history available for (3,x).  Oldest available base: {partition}/base_5_v20" \
        in str(raised.value)


# ---------------------------------------------------------------------------------------------------------------
# Visibility suffix `_vT` on deltas and delete deltas (isDirUsable)

TXNS_COMMITTED = f"30:{MAX}::"   # txn 20 committed
TXNS_OPEN = "30:20:20:"          # txn 20 open
TXNS_ABORTED = f"30:{MAX}::20"   # txn 20 aborted


@pytest.mark.parametrize("prefix", ["delta", "delete_delta"])
@pytest.mark.parametrize("txns, visible, aborted", [
    (TXNS_COMMITTED, True, False),
    (TXNS_OPEN, False, False),
    (TXNS_ABORTED, False, True),
], ids=["committed", "open", "aborted"])
def test_delta_visibility_suffix(tmp_path, prefix, txns, visible, aborted):
    name = f"{prefix}_0000001_0000001_v0000020"
    partition = materialize(tmp_path, acid_dirs(name, "delta_2_2"))
    state = read_state(partition, f"tbl:30:{MAX}:", txns)
    assert summary(state) == expected(deltas=([name] if visible else []) + ["delta_2_2"],
                                      aborted=[name] if aborted else [])


@pytest.mark.parametrize("txns, outcome", [(TXNS_COMMITTED, "read"), (TXNS_OPEN, "invisible"),
                                           (TXNS_ABORTED, "aborted")])
def test_minor_compaction_output_visible_only_once_committed(tmp_path, txns, outcome):
    compacted = ("delete_delta_1_2_v20", "delta_1_2_v20")
    partition = materialize(tmp_path, acid_dirs("delta_1_1", "delete_delta_2_2", "delta_2_2", *compacted))
    state = read_state(partition, f"tbl:30:{MAX}:", txns)
    if outcome == "read":
        want = expected(deltas=compacted, obsolete=["delta_1_1", "delete_delta_2_2", "delta_2_2"])
    else:
        want = expected(deltas=["delta_1_1", "delete_delta_2_2", "delta_2_2"],
                        aborted=compacted if outcome == "aborted" else ())
    assert summary(state) == want


def test_delta_v0_suffix_is_always_visible(tmp_path):
    partition = materialize(tmp_path, acid_dirs("delta_1_1_v0", "delete_delta_1_1_v0"))
    state = read_state(partition, f"tbl:30:{MAX}:", "30:20:20:")
    assert summary(state) == expected(deltas=["delete_delta_1_1_v0", "delta_1_1_v0"])


# ---------------------------------------------------------------------------------------------------------------
# Compactor bases (`_vT`, `_metadata_acid`) against INSERT OVERWRITE bases


def _listing(location: str, names: list[str], markers=()) -> PartitionListing:
    return PartitionListing(location, tuple(ListedEntry(name, True, len(BUCKET_BYTES), (), name in markers)
                                            for name in names))


@pytest.mark.parametrize("order", [["base_0000010", "base_0000010_v0000020"],
                                   ["base_0000010_v0000020", "base_0000010"]], ids=["iow-first", "compactor-first"])
def test_compactor_base_beats_iow_base_of_same_write_id_in_either_listing_order(order):
    state = acid_state(_listing("/t/p", order), write_ids=ValidWriteIdList.parse(f"tbl:30:{MAX}:"),
                       txns=ValidTxnList.parse(TXNS_COMMITTED))
    assert summary(state) == expected(base="base_0000010_v0000020", obsolete=["base_0000010"])


@pytest.mark.parametrize("txns, aborted", [(TXNS_OPEN, []), (TXNS_ABORTED, ["base_0000010_v0000020"])],
                         ids=["compactor-open", "compactor-aborted"])
def test_iow_base_is_read_while_compactor_base_of_same_write_id_is_not_visible(tmp_path, txns, aborted):
    partition = materialize(tmp_path, acid_dirs("base_0000010", "base_0000010_v0000020"))
    state = read_state(partition, f"tbl:30:{MAX}:", txns)
    assert summary(state) == expected(base="base_0000010", aborted=aborted)


@pytest.mark.parametrize("suffix", ["", "_v0"], ids=["plain", "v0"])
def test_v0_base_is_an_insert_overwrite_base(tmp_path, suffix):
    """`_v0` equals no suffix: not compacted, so an aborted write id makes it aborted and an open id below it
    does not hide it (a compactor base_5_v20 would be invalid for tbl:10:4:4:)."""
    name = f"base_5{suffix}"
    partition = materialize(tmp_path, acid_dirs(name, "base_3"))
    assert summary(read_state(partition, f"tbl:10:{MAX}::5")) == expected(base="base_3", aborted=[name])
    assert summary(read_state(partition, "tbl:10:4:4:")) == expected(base=name, obsolete=["base_3"])


def test_compactor_base_above_an_open_write_id_is_not_read(tmp_path):
    partition = materialize(tmp_path, acid_dirs("base_5_v20", "base_3"))
    assert summary(read_state(partition, "tbl:10:4:4:")) == expected(base="base_3")


def test_compactor_base_with_aborted_write_id_is_read(tmp_path):
    partition = materialize(tmp_path, acid_dirs("base_5_v20", "base_3"))
    assert summary(read_state(partition, f"tbl:10:{MAX}::5")) == expected(base="base_5_v20", obsolete=["base_3"])


def test_compactor_base_with_open_write_id_below_it_needs_history(tmp_path):
    partition = materialize(tmp_path, acid_dirs("base_5_v20"))
    with pytest.raises(NotEnoughHistoryError):
        read_state(partition, "tbl:10:3:3:")


@pytest.mark.parametrize("marker, compacted", [(COMPACTED_MARKER, True), (TRUNCATED_MARKER, False), (None, False)],
                         ids=["compacted", "truncated", "absent"])
def test_metadata_acid_marks_a_plain_base_as_compacted(tmp_path, marker, compacted):
    files = acid_dirs("base_5") + (("base_5/_metadata_acid",) if marker else ())
    partition = materialize(tmp_path, files, contents={"base_5/_metadata_acid": marker} if marker else None)
    aborted_state = read_state(partition, f"tbl:10:{MAX}::5")
    assert summary(aborted_state) == (expected(base="base_5") if compacted else expected(aborted=["base_5"]))
    if compacted:
        with pytest.raises(NotEnoughHistoryError):
            read_state(partition, "tbl:10:3:3:")
    else:
        assert summary(read_state(partition, "tbl:10:3:3:")) == expected(base="base_5")


def test_metadata_marker_is_read_by_the_listing():
    assert acid_state(_listing("/t/p", ["base_5"], markers={"base_5"}),
                      write_ids=ValidWriteIdList.parse(f"tbl:10:{MAX}::5")).base.name == "base_5"


# ---------------------------------------------------------------------------------------------------------------
# Aborted write ids, hidden names, original directories


def test_aborted_deltas_and_minor_compacted_delta_over_an_aborted_id(tmp_path):
    partition = materialize(tmp_path, acid_dirs("delta_1_1", "delta_2_2", "delete_delta_2_2", "delta_3_3"))
    assert summary(read_state(partition, f"tbl:3:{MAX}::2")) == expected(
        deltas=["delta_1_1", "delta_3_3"], aborted=["delete_delta_2_2", "delta_2_2"])
    (partition / "delta_1_3_v10").mkdir()
    (partition / "delta_1_3_v10" / "bucket_0").write_bytes(BUCKET_BYTES)
    state = read_state(partition, f"tbl:3:{MAX}::2")
    assert summary(state) == expected(deltas=["delta_1_3_v10"], obsolete=["delta_1_1", "delta_3_3"],
                                      aborted=["delete_delta_2_2", "delta_2_2"])
    assert state.has_uncompacted_aborts


def test_aborted_iow_base_is_aborted_not_read(tmp_path):
    partition = materialize(tmp_path, acid_dirs("base_3", "base_5"))
    assert summary(read_state(partition, f"tbl:10:{MAX}::5")) == expected(base="base_3", aborted=["base_5"])


def test_hidden_names_are_ignored(tmp_path):
    files = acid_dirs("base_1", "_tmp.delta_2_2", ".hive-staging_1") + ("_SUCCESS", ".000000_0.crc")
    partition = materialize(tmp_path, files)
    assert summary(read_state(partition, f"tbl:10:{MAX}:")) == expected(base="base_1")


def test_original_directories_become_obsolete_under_a_base(tmp_path):
    partition = materialize(tmp_path, acid_dirs("base_1") + ("000000_0", "HIVE_UNION_SUBDIR_1/000000_0"))
    assert summary(read_state(partition, f"tbl:10:{MAX}:")) == expected(
        base="base_1", obsolete=["000000_0", "HIVE_UNION_SUBDIR_1"])


# ---------------------------------------------------------------------------------------------------------------
# CLI: `acid inspect PATH --write-ids STR [--txns STR] --json`


@pytest.mark.parametrize("case_name", ["testBaseWithDeleteDeltas", "deleteDeltasWithOpenTxnInRead",
                                       "deltasAndDeleteDeltasWithOpenTxnsNotInCompact"])
def test_cli_inspect_json(tmp_path, case_name):
    case = CASES_BY_NAME[case_name]
    partition = materialize(tmp_path, case.files, sizes=dict(case.file_sizes))
    command = [sys.executable, "-m", "acid_cli.main", "inspect", str(partition), "--write-ids", case.write_ids,
               "--txns", case.txns, "--json"] + (["--compactor"] if case.compactor else [])
    result = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["base"] == case.base
    assert document["deltas"] == list(case.deltas)
    assert sorted(document["obsolete"]) == sorted(case.obsolete)
    assert sorted(document["aborted"]) == sorted(case.aborted)


def test_cli_inspect_not_enough_history_fails_with_hives_message(tmp_path):
    partition = materialize(tmp_path, acid_dirs("delta_2_10", "base_25_v300", "base_100_v300"))
    result = subprocess.run(
        [sys.executable, "-m", "acid_cli.main", "inspect", str(partition), "--write-ids", "tbl:150:7:7:", "--json"],
        capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode != 0
    assert "Not enough history available for (150,7)." in result.stderr
