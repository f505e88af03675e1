"""A table's health score (0-100) with its breakdown, and its partitions with the most deltas and the most obsolete
directories: Amoro's per-table health score in Hive's terms, computed from `acid_core.operations.health` (so with the thresholds
the initiator applies to the table).

Points a partition loses, out of 100:
- deltas, up to 30: past the table's delta.num.threshold, 30 x (deltas - threshold) / threshold, so all 30 at twice
  the threshold (deltas count delete deltas too, as the initiator counts them);
- delta/base size, up to 30: past delta.pct.threshold, 30 x (ratio - threshold) / threshold; a partition without a
  base is judged by its delta count only, as the initiator judges it;
- obsolete and aborted directories still on disk, up to 20: all 20 at Hive's
  metastore.deltametrics.obsolete.delta.num.threshold (100 directories), in proportion below it;
- failures, up to 20: 10 per consecutive failed compaction, all 20 once past failed.compacts.threshold.
The table's score is the mean of its examined partitions' scores; each component's share is the mean of its points.

Cost: `acid_core.operations.health.table_health` of one page (at most `MAX_PAGE` partitions listed), then a sort.
"""

from __future__ import annotations

from dataclasses import dataclass

from acid_core.errors import UsageError
from acid_core.metastore import Metastore
from acid_core.operations.health import MAX_PAGE, PartitionHealth, table_health

DELTAS, SIZE, OBSOLETE, FAILURES = "deltas", "delta/base size", "obsolete directories", "failures"
MAX_POINTS = {DELTAS: 30.0, SIZE: 30.0, OBSOLETE: 20.0, FAILURES: 20.0}
OBSOLETE_FULL = 100  # Hive's metastore.deltametrics.obsolete.delta.num.threshold
POINTS_PER_FAILURE = 10.0
DEFAULT_TOP = 10
MAX_TOP = 50


@dataclass(frozen=True, slots=True)
class ScoreComponent:
    """One part of the breakdown: the mean points a partition loses on it (of `max_points`), how many partitions
    lose any, and the rule with the table's numbers."""

    name: str
    max_points: float
    lost: float
    partitions: int
    rule: str


@dataclass(frozen=True, slots=True)
class PartitionScore:
    partition: str | None
    score: float
    deltas: int  # delta and delete-delta directories of the current snapshot
    obsolete: int  # obsolete and aborted directories still on disk
    delta_ratio: float | None  # delta bytes / base bytes (None: no base)
    consecutive_failures: int
    lost: tuple[float, ...]  # points lost per component (MAX_POINTS order)


@dataclass(frozen=True, slots=True)
class TableScore:
    database: str
    table: str
    score: float
    components: tuple[ScoreComponent, ...]
    examined: int  # partitions scored (those that could be listed)
    errors: int  # partitions of the page that could not be listed
    total_partitions: int
    offset: int
    limit: int
    delta_num_threshold: int  # the table's, as the initiator reads them
    delta_pct_threshold: float
    most_deltas: tuple[PartitionScore, ...]  # the `top` with the most deltas (any)
    most_obsolete: tuple[PartitionScore, ...]  # the `top` with the most obsolete directories (any)
    lowest: tuple[PartitionScore, ...]  # the `top` lowest scores under 100


def partition_score(part: PartitionHealth, *, delta_num_threshold: int, delta_pct_threshold: float,
                    failed_threshold: int) -> PartitionScore:
    """The points one partition loses on each component (see the module's rules)."""
    deltas = part.deltas + part.delete_deltas
    ratio = part.delta_bytes / part.base_bytes if part.base is not None and part.base_bytes > 0 else None
    over_count = (deltas - delta_num_threshold) / delta_num_threshold if delta_num_threshold > 0 else float(deltas)
    over_size = 0.0 if ratio is None else ((ratio - delta_pct_threshold) / delta_pct_threshold
                                           if delta_pct_threshold > 0 else ratio)
    obsolete = len(part.obsolete) + len(part.aborted)
    failed = part.past_failed_threshold or (failed_threshold > 0 and part.consecutive_failures >= failed_threshold)
    lost = (MAX_POINTS[DELTAS] * _fraction(over_count), MAX_POINTS[SIZE] * _fraction(over_size),
            MAX_POINTS[OBSOLETE] * _fraction(obsolete / OBSOLETE_FULL),
            MAX_POINTS[FAILURES] if failed else min(MAX_POINTS[FAILURES],
                                                    POINTS_PER_FAILURE * part.consecutive_failures))
    return PartitionScore(part.partition, round(100 - sum(lost), 1), deltas, obsolete, ratio,
                          part.consecutive_failures, tuple(round(points, 2) for points in lost))


def table_score(metastore: Metastore, database: str, table: str, *, offset: int = 0, limit: int = MAX_PAGE,
                top: int = DEFAULT_TOP) -> TableScore:
    """The score of one page of `database.table`'s partitions (in name order), its breakdown and its top partitions.

    Raises:
        UsageError: a page outside acid_core.operations.health's bounds, or `top` outside 1..MAX_TOP.
        NoSuchObjectError, NotTransactionalError: no such full ACID table.
    """
    if not 1 <= top <= MAX_TOP:
        raise UsageError(f"top {top}: give a number of partitions in 1..{MAX_TOP}")
    health = table_health(metastore, database, table, offset=offset, limit=limit)
    num, pct, failed = (t.value for t in health.thresholds)
    scored = [partition_score(p, delta_num_threshold=int(num), delta_pct_threshold=float(pct),
                              failed_threshold=int(failed)) for p in health.partitions if p.error is None]
    names = tuple(MAX_POINTS)
    rules = {
        DELTAS: f"past delta.num.threshold {int(num)}: 30 x (deltas - {int(num)}) / {int(num)}, all 30 at "
                f"{2 * int(num)} deltas",
        SIZE: f"past delta.pct.threshold {pct:g}: 30 x (delta/base - {pct:g}) / {pct:g}, all 30 at {2 * pct:g}; "
              "no base: judged by the delta count only",
        OBSOLETE: f"obsolete and aborted directories still on disk: all 20 at {OBSOLETE_FULL} (Hive's "
                  "obsolete.delta.num.threshold), in proportion below",
        FAILURES: f"{POINTS_PER_FAILURE:g} per consecutive failed compaction, all 20 at failed.compacts.threshold "
                  f"{int(failed)}",
    }
    count = len(scored)
    components = tuple(ScoreComponent(
        name, MAX_POINTS[name], round(sum(p.lost[index] for p in scored) / count, 2) if count else 0.0,
        sum(1 for p in scored if p.lost[index] > 0), rules[name]) for index, name in enumerate(names))
    score = round(sum(p.score for p in scored) / count, 1) if count else 100.0
    return TableScore(
        health.database, health.table, score, components, count, len(health.partitions) - count,
        health.total_partitions, health.offset, health.limit, int(num), float(pct),
        most_deltas=tuple(sorted((p for p in scored if p.deltas), key=lambda p: (-p.deltas, p.partition or "")))[:top],
        most_obsolete=tuple(sorted((p for p in scored if p.obsolete),
                                   key=lambda p: (-p.obsolete, p.partition or "")))[:top],
        lowest=tuple(sorted((p for p in scored if p.score < 100), key=lambda p: (p.score, p.partition or "")))[:top])


def _fraction(over: float) -> float:
    return min(1.0, max(0.0, over))


__all__ = ["DEFAULT_TOP", "MAX_POINTS", "MAX_TOP", "OBSOLETE_FULL", "PartitionScore", "ScoreComponent", "TableScore",
           "partition_score", "table_score"]
