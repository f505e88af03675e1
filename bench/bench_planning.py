"""Planning one partition: its listing plus Hive's getAcidState (`get_acid_state`: the directory state and the files of
every directory the snapshot reads), at 4,000 and 20,000 deltas, measured side by side in one run.

Partition: `delta_N_N_0000` directories, each holding one small `bucket_00000`, every write id committed, so the
snapshot reads all of them. Goal: at most 0.3 s at 20,000 deltas, and time linear in the deltas (a ratio of about 5).
Run: `.venv/bin/python bench/bench_planning.py [--root DIR] [--repeats N]`; `planning_figures` is what
bench_history.py prints.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from acid_core.format.layout import bucket_file_name, delta_dir_name
from acid_core.format.validity import ValidWriteIdList
from acid_core.read.state import acid_state, get_acid_state, list_partition
from acid_core.storage.fs import FileSystem

GOAL_SECONDS = 0.3  # at 20,000 deltas
_COMPLETE = ".bench-complete"  # hidden (readers skip it): the directory holds every delta, reuse it


def build_partition(location: Path, deltas: int) -> None:
    """`deltas` single-file delta directories under `location`, made once and reused by later runs."""
    if (location / _COMPLETE).exists():
        return
    location.mkdir(parents=True, exist_ok=True)
    for write_id in range(1, deltas + 1):
        directory = location / delta_dir_name(write_id, write_id, statement_id=0)
        directory.mkdir(exist_ok=True)
        (directory / bucket_file_name(0)).write_bytes(b"ORC")
    (location / _COMPLETE).write_text(str(deltas))


def _plan(location: str, write_ids: ValidWriteIdList, deltas: int) -> tuple[float, float]:
    """Seconds of `get_acid_state` (listing, state, the files of every directory read) and, apart, of the listing and
    the state alone (what the files' listings add is the difference: a few system calls per directory)."""
    fs = FileSystem()
    start = time.perf_counter()
    state = get_acid_state(location, write_ids=write_ids, fs=fs)
    seconds = time.perf_counter() - start
    if len(state.deltas) != deltas or len(state.listing.children(state.deltas[-1].name)) != 1:
        raise AssertionError(f"{location}: planned {len(state.deltas)} deltas, {deltas} expected")
    start = time.perf_counter()
    acid_state(list_partition(fs, location), write_ids=write_ids)
    return seconds, time.perf_counter() - start


def planning_figures(root: str, delta_counts=(4000, 20000), repeats: int = 5) -> list[dict]:
    """Median seconds of listing and planning a partition of each size (one warm-up round, then `repeats` rounds,
    the sizes interleaved so that they see the same machine), and each median's ratio to the smallest size's.

    Returns:
        `[{"deltas": n, "seconds": median, "ratio": median / median of the first size, "state_seconds": median of
        the listing and the state without the directories' files}, ...]`, in `delta_counts` order. Partitions are
        built under `root` (`deltas_<n>`) and reused across calls.
    """
    locations = {}
    for count in delta_counts:
        location = Path(root) / f"deltas_{count}"
        build_partition(location, count)
        locations[count] = str(location)
    write_ids = {count: ValidWriteIdList.parse(f"bench.planning:{count}:{2**63 - 1}::") for count in delta_counts}
    samples: dict[int, list[tuple[float, float]]] = {count: [] for count in delta_counts}
    for round_ in range(repeats + 1):
        for count in delta_counts:
            seconds = _plan(locations[count], write_ids[count], count)
            if round_:
                samples[count].append(seconds)
    medians = {count: statistics.median(full for full, _ in values) for count, values in samples.items()}
    first = medians[delta_counts[0]]
    return [{"deltas": count, "seconds": medians[count], "ratio": medians[count] / first,
             "state_seconds": statistics.median(state for _, state in samples[count])} for count in delta_counts]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", help="where to build the partitions (kept, and reused next time); default: a "
                                       "temporary directory")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-planning-") as scratch:
        root = args.root or scratch
        load_before = os.getloadavg()
        figures = planning_figures(root, repeats=args.repeats)
        load_after = os.getloadavg()
    print(f"planning one partition (listing + get_acid_state, the files of every delta listed), medians of "
          f"{args.repeats} interleaved repetitions; load average {load_before[0]:.1f} before, {load_after[0]:.1f} "
          f"after ({os.cpu_count()} cores: above about {os.cpu_count()} other work shared them)")
    for figure in figures:
        print(f"  {figure['deltas']:>6,} deltas  {figure['seconds'] * 1000:7.1f} ms   ratio {figure['ratio']:4.2f}x   "
              f"(of which the partition's listing and the state: {figure['state_seconds'] * 1000:5.1f} ms; the rest "
              f"lists the files of each delta)")
    last = figures[-1]
    verdict = "met" if last["seconds"] <= GOAL_SECONDS else "MISSED"
    print(f"goal: <= {GOAL_SECONDS * 1000:.0f} ms at {last['deltas']:,} deltas: {verdict}")


if __name__ == "__main__":
    main()
