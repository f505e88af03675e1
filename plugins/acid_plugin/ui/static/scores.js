// A table's health score and its breakdown, its partitions with the most deltas and obsolete directories, and the
// scores of all tables: acid_core.operations.health_score, over one page of a table's partitions (at most 200 listed a request).

import {C, Empty, Failure, Live, React, call, colour, h, query, useLive} from "./api.js";
import {ChartCard, HBars} from "./charts.js";

const COMPONENT_PALETTE = {"deltas": "up_for_retry", "delta/base size": "upstream_failed",
                           "obsolete directories": "skipped", "failures": "failed"};
const MAX_TABLES = 50; // tables scored in the all-tables chart, one request each

export function scorePalette(score) { return score >= 80 ? "success" : score >= 50 ? "up_for_retry" : "failed"; }

export function tableLink(database, table, partition) {
  return "?" + query({tab: "tables", table: `${database}.${table}`, partition});
}

export function scorePath(database, table, options) {
  return `tables/${encodeURIComponent(database)}/${encodeURIComponent(table)}/score?` + query(options || {});
}

export function useScore(database, table) {
  return useLive(() => call(scorePath(database, table)), [database, table], {auto: false});
}

export function ScoreBadge({database, table}) {
  const {data, error} = useLive(() => call(scorePath(database, table, {top: 1})), [database, table], {auto: false});
  if (error) { return h(C.Text, {as: "span", color: "fg.error", fontSize: "xs", title: error.message}, "unavailable"); }
  if (!data) { return h(C.Spinner, {size: "xs"}); }
  return h(C.Badge, {colorPalette: scorePalette(data.score), variant: "subtle", fontSize: "sm", "data-score": data.score,
                     title: `health score over ${data.examined} of ${data.total_partitions} partitions`},
    String(Math.round(data.score)));
}

const EXPLAINED = "A partition starts at 100 and loses points: up to 30 for deltas past the table's " +
  "delta.num.threshold, up to 30 for delta/base size past delta.pct.threshold, up to 20 for obsolete and aborted " +
  "directories still on disk, up to 20 for consecutive failed compactions. The table's score is the mean over its " +
  "partitions, and each part of the bar is the mean points lost on that count.";

export function ScoreCard({score}) {
  const lost = score.components.reduce((sum, part) => sum + part.lost, 0);
  const segments = score.components.filter((part) => part.lost > 0);
  const scope = score.total_partitions > score.examined + score.errors
    ? `over partitions ${score.offset + 1}–${score.offset + score.examined} of ${score.total_partitions}`
    : `over ${score.examined} partition${score.examined === 1 ? "" : "s"}`;
  return h(ChartCard, {name: "score", title: `Health score of ${score.database}.${score.table}`, help: EXPLAINED,
                       summary: `score ${score.score} of 100`},
    h(C.Flex, {gap: 4, align: "center"},
      h(C.HStack, {gap: 1, align: "baseline", minW: "6em"},
        h(C.Text, {fontSize: "4xl", fontWeight: "bold", color: `${scorePalette(score.score)}.fg`, lineHeight: 1,
                   id: "health-score", "data-score": score.score}, String(Math.round(score.score))),
        h(C.Text, {fontSize: "sm", color: "fg.muted"}, "/ 100")),
      h(C.Box, {flex: 1},
        h(C.Flex, {h: "18px", borderRadius: "sm", overflow: "hidden", bg: colour("success"), "data-chart-part": "bar",
                   title: `${score.score} left, ${Math.round(lost * 10) / 10} lost`},
          h(C.Box, {flex: `${Math.max(0, 100 - lost)} 0 0`}),
          segments.map((part) => h(C.Box, {key: part.name, flex: `${part.lost} 0 0`, bg: colour(COMPONENT_PALETTE[part.name]),
                                           title: `${part.name}: −${part.lost}`, "data-component": part.name}))),
        h(C.Text, {fontSize: "xs", color: "fg.muted", mt: 1}, scope +
          (score.errors ? `; ${score.errors} could not be listed` : "")))),
    h(C.Table.Root, {size: "sm", mt: 3, id: "score-breakdown"},
      h(C.Table.Header, null, h(C.Table.Row, null, ["Count", "Points lost", "Partitions", "Rule"].map((label) =>
        h(C.Table.ColumnHeader, {key: label}, label)))),
      h(C.Table.Body, null, score.components.map((part) => h(C.Table.Row, {key: part.name, "data-component": part.name},
        h(C.Table.Cell, {whiteSpace: "nowrap"}, h(C.HStack, {gap: 2}, h(C.Box, {w: "10px", h: "10px", borderRadius: "2px",
                                                     bg: colour(COMPONENT_PALETTE[part.name])}), part.name)),
        h(C.Table.Cell, {whiteSpace: "nowrap"}, `−${part.lost} of ${part.max_points}`),
        h(C.Table.Cell, null, String(part.partitions)),
        h(C.Table.Cell, {fontSize: "xs", color: "fg.muted", whiteSpace: "normal"}, part.rule))))));
}

function partitionItems(score, field, what) {
  return score[field === "deltas" ? "most_deltas" : "most_obsolete"].map((part) => ({
    label: part.partition === null ? "(table)" : part.partition, value: part[field],
    to: tableLink(score.database, score.table, part.partition),
    title: `${part.partition || score.table}: ${part[field]} ${what}, score ${part.score}`}));
}

export function TopPartitions({score}) {
  const threshold = score.delta_num_threshold;
  const deltas = partitionItems(score, "deltas", "deltas");
  const obsolete = partitionItems(score, "obsolete", "obsolete or aborted directories");
  const scope = `of ${score.database}.${score.table}, among its ${score.examined} listed partitions; a name opens its health`;
  return [
    h(ChartCard, {key: "deltas", name: "top-deltas", title: "Partitions with the most deltas", help: scope,
                  empty: deltas.length ? null : "No partition has a delta: everything is compacted.",
                  legend: threshold ? [{label: `delta.num.threshold ${threshold}`, palette: "failed", line: true,
                                        dashed: true}] : null},
      h(HBars, {items: deltas, palette: "up_for_retry",
                mark: threshold ? {value: threshold, palette: "failed", label: `delta.num.threshold ${threshold}`} : null})),
    h(ChartCard, {key: "obsolete", name: "top-obsolete", title: "Partitions with the most obsolete directories",
                  help: scope + "; the cleaner removes them once nothing can read them (Held by says what waits)",
                  empty: obsolete.length ? null : "No obsolete or aborted directory is left on disk."},
      h(HBars, {items: obsolete, palette: "skipped"})),
  ];
}

// The score of every table (worst first), fetched two at a time.
export function TableScores() {
  const live = React.useContext(Live);
  const [scores, setScores] = React.useState(null);
  const [error, setError] = React.useState(null);
  React.useEffect(() => {
    let gone = false;
    (async () => {
      const listed = (await call("tables")).tables.slice(0, MAX_TABLES);
      const found = [];
      for (let index = 0; index < listed.length && !gone; index += 2) {
        const pair = listed.slice(index, index + 2);
        const answers = await Promise.all(pair.map((t) => call(scorePath(t.database, t.table, {top: 1})).catch(() => null)));
        answers.forEach((answer) => { if (answer) { found.push(answer); } });
        if (!gone) { setScores([...found]); }
      }
      if (!gone && !listed.length) { setScores([]); }
    })().catch((failure) => { if (!gone) { setError(failure); } });
    return () => { gone = true; };
  }, [live.manual]);
  if (error) { return h(Failure, {error}); }
  const items = (scores || []).slice().sort((a, b) => a.score - b.score).map((one) => ({
    label: `${one.database}.${one.table}`, value: one.score, palette: scorePalette(one.score),
    to: tableLink(one.database, one.table), title: one.components.map((part) => `${part.name} −${part.lost}`).join(", ")}));
  return h(ChartCard, {name: "table-scores", title: "Health score by table", summary: `${items.length} tables`,
                       help: "Worst first; a name opens the table's breakdown and partitions. " + EXPLAINED,
                       empty: scores && !items.length ? "No transactional table yet." : null},
    scores ? h(HBars, {items, max: 100, format: (value) => String(Math.round(value))}) : h(C.Spinner, {size: "sm"}));
}

export function NoTable() {
  return h(Empty, {title: "Choose a table"}, "Its health score, breakdown and top partitions are drawn here.");
}
