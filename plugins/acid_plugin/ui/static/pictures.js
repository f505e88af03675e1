// The Charts tab: the compaction queue over the last hours (how many waited and worked, how long the oldest had
// waited, against the alert thresholds), compactions per hour by outcome, how long they worked, and table health
// (scores of all tables, or one table's breakdown and top partitions). All from the metastore's own history
// (acid_core.operations.history_stats, acid_core.operations.health_score); nothing else is needed.

import {C, Failure, PALETTE, React, call, h, query, useLive} from "./api.js";
import {BarChart, ChartCard, LineChart, clock, drawnThresholds, formatSeconds} from "./charts.js";
import {NoTable, ScoreCard, TableScores, TopPartitions, useScore} from "./scores.js";

const WINDOWS = [[6, "6 hours"], [12, "12 hours"], [24, "24 hours"], [72, "3 days"], [168, "7 days"]];
const OUTCOME_PALETTE = {"succeeded": PALETTE.succeeded, "failed": PALETTE.failed, "refused": PALETTE.refused,
                         "aborted": PALETTE.aborted, "did not initiate": PALETTE["did not initiate"]};

function Choice({name, label, value, options, onChange}) {
  return h(C.HStack, {gap: 2},
    h(C.Text, {fontSize: "sm"}, label),
    h(C.NativeSelect.Root, {size: "sm", width: "14em"},
      h(C.NativeSelect.Field, {name, value, "aria-label": label, onChange: (e) => onChange(e.target.value)},
        options.map(([key, text]) => h("option", {key, value: key}, text))),
      h(C.NativeSelect.Indicator)));
}

// Axis labels for a series of `count` steps of `step` ms from `since`: a label every few hours (or so).
function timeLabels(since, step, count) {
  const every = Math.max(1, Math.round(count / 8));
  return Array.from({length: count + 1}, (_, index) => index % every === 0 ? clock(since + index * step) : "");
}

function stat(label, value, help, palette) {
  return h(C.Stat.Root, {key: label, borderWidth: "1px", borderRadius: "md", p: 3, minW: "11em"},
    h(C.Stat.Label, null, label),
    h(C.Stat.ValueText, {color: palette ? `${palette}.fg` : undefined}, value),
    help ? h(C.Stat.HelpText, {fontSize: "xs"}, help) : null);
}

function Summary({stats}) {
  const limits = stats.oldest_waiting_thresholds_s;
  const oldest = stats.oldest_waiting_now_s;
  const level = limits.critical !== null && oldest > limits.critical ? "failed"
    : limits.warning !== null && oldest > limits.warning ? "up_for_retry" : null;
  return h(C.SimpleGrid, {columns: {base: 2, md: 5}, gap: 3, "data-testid": "chart-summary"},
    stat("Waiting now", String(stats.waiting_now), "initiated entries"),
    stat("Oldest waiting", stats.waiting_now ? formatSeconds(oldest) : "–",
         `alert at ${formatSeconds(limits.warning)} / ${formatSeconds(limits.critical)}`, level),
    stat("Working now", String(stats.working_now)),
    stat("Ended in the window", String(stats.ended), "by outcome below"),
    stat("Working time", stats.median_s === null ? "–" : `${formatSeconds(stats.median_s)} median`,
         stats.p95_s === null ? null : `p95 ${formatSeconds(stats.p95_s)}, longest ${formatSeconds(stats.max_s)}`));
}

function QueueCharts({stats}) {
  const steps = stats.queue;
  const times = steps.map((one) => one.start_ms);
  const labels = times.map((time) => `${clock(time)}–${clock(time + stats.step_ms)} UTC`);
  const ticks = timeLabels(stats.since_ms, stats.step_ms, steps.length);
  const stepWords = formatSeconds(stats.step_ms / 1000);
  const busy = steps.some((one) => one.waiting || one.working);
  const limits = stats.oldest_waiting_thresholds_s;
  const thresholds = [["warning", limits.warning, "up_for_retry"], ["critical", limits.critical, "failed"]]
    .filter(([, value]) => value !== null)
    .map(([level, value, palette]) => ({value, palette, label: `${level} ${formatSeconds(value)}`}));
  const oldest = steps.map((one) => one.oldest_waiting_s);
  const drawn = drawnThresholds(oldest, thresholds);
  return [
    h(ChartCard, {key: "depth", name: "queue-depth", title: "Queue depth",
                  help: `The most entries waiting (initiated) and working at any moment of each ${stepWords}`,
                  empty: busy ? null : "Nothing waited or worked in this window.",
                  summary: `peak ${Math.max(0, ...steps.map((one) => one.waiting))} waiting`,
                  legend: [{label: "waiting", palette: PALETTE.initiated}, {label: "working", palette: PALETTE.working}]},
      h(BarChart, {labels, tickLabels: ticks, series: [
        {name: "working", palette: PALETTE.working, values: steps.map((one) => one.working)},
        {name: "waiting", palette: PALETTE.initiated, values: steps.map((one) => one.waiting)}]})),
    h(ChartCard, {key: "oldest", name: "oldest-waiting", title: "Oldest waiting entry",
                  help: "How long the oldest queued entry had waited (compaction_oldest_enqueue_age_in_sec), against " +
                        "the alert thresholds (Cloudera: 1 h warning, 12 h critical)",
                  empty: oldest.some((value) => value > 0) ? null : "No entry waited in this window.",
                  summary: `longest wait ${formatSeconds(Math.max(0, ...oldest))}`,
                  legend: [{label: "oldest wait", palette: PALETTE.initiated, line: true}].concat(
                    thresholds.map((line) => ({palette: line.palette, line: true, dashed: true,
                      label: drawn.includes(line) ? line.label : `${line.label} (above this scale)`})))},
      h(LineChart, {times, step: stats.step_ms, values: oldest, name: "oldest wait", palette: PALETTE.initiated,
                    seconds: true, format: formatSeconds, thresholds, tickLabels: ticks})),
  ];
}

function OutcomeCharts({stats}) {
  const outcomes = stats.outcomes;
  const series = (rows) => outcomes.map((outcome, index) => ({
    name: outcome, palette: OUTCOME_PALETTE[outcome], values: rows.map((row) => row.counts[index])}));
  const legend = outcomes.map((outcome) => ({label: outcome, palette: OUTCOME_PALETTE[outcome]}));
  const hours = stats.hours.map((hour) => `${clock(hour.start_ms)}–${clock(hour.start_ms + 3600000)} UTC`);
  const every = Math.max(1, Math.round(stats.hours.length / 8));
  const buckets = stats.durations.map((bucket) => bucket.high_s === null ? `≥ ${formatSeconds(bucket.low_s)}`
    : `${formatSeconds(bucket.low_s)}–${formatSeconds(bucket.high_s)}`);
  const bucketTicks = stats.durations.map((bucket) => bucket.high_s === null ? `≥${formatSeconds(bucket.low_s)}`
    : `<${formatSeconds(bucket.high_s)}`);
  const worked = stats.durations.some((bucket) => bucket.counts.some(Boolean));
  return [
    h(ChartCard, {key: "hours", name: "outcomes-per-hour", title: "Compactions per hour, by outcome",
                  help: "When each ended: committed (succeeded), failed, refused (nothing to do), aborted, or not " +
                        "queued by the initiator (did not initiate)",
                  empty: stats.ended ? null : "No compaction ended in this window.", legend,
                  summary: `${stats.ended} compactions ended`},
      h(BarChart, {labels: hours, series: series(stats.hours),
                   tickLabels: stats.hours.map((hour, index) => index % every === 0 ? clock(hour.start_ms) : "")})),
    h(ChartCard, {key: "durations", name: "durations", title: "Working time",
                  help: "How long compactions that ended in the window worked (start to commit or end), by outcome",
                  empty: worked ? null : "No compaction worked in this window.", legend: legend.slice(0, 4),
                  summary: `median ${formatSeconds(stats.median_s)}`},
      h(BarChart, {labels: buckets, tickLabels: bucketTicks, series: series(stats.durations).slice(0, 4)})),
  ];
}

function TableHealth({chosen}) {
  const [database, table] = chosen.split(".", 2);
  const score = useScore(database, table);
  if (score.error) { return h(Failure, {error: score.error}); }
  if (!score.data) { return h(C.Spinner, {size: "sm"}); }
  return h(C.SimpleGrid, {columns: {base: 1, lg: 2}, gap: 4},
    h(C.Box, {gridColumn: {lg: "span 2"}}, h(ScoreCard, {score: score.data})), h(TopPartitions, {score: score.data}));
}

export function ChartsTab() {
  const [hours, setHours] = React.useState("12");
  const [chosen, setChosen] = React.useState("");
  const tables = useLive(() => call("tables"), [], {auto: false});
  const [database, table] = chosen ? chosen.split(".", 2) : [null, null];
  const {data, error} = useLive(() => call("stats/history?" + query({hours, database, table})), [hours, chosen],
                                {busy: (found) => found.waiting_now + found.working_now > 0});
  const names = tables.data ? tables.data.tables.map((t) => `${t.database}.${t.table}`) : [];
  return h(C.Stack, {gap: 4},
    h(C.HStack, {gap: 6, wrap: "wrap"},
      h(Choice, {name: "hours", label: "Last", value: hours, onChange: setHours,
                 options: WINDOWS.map(([value, text]) => [String(value), text])}),
      h(Choice, {name: "table", label: "Table", value: chosen, onChange: setChosen,
                 options: [["", "all tables"]].concat(names.map((name) => [name, name]))})),
    h(Failure, {error}),
    data ? h(Summary, {stats: data}) : h(C.Spinner, {size: "sm"}),
    data && data.complete_since_ms > data.since_ms ? h(C.Text, {fontSize: "xs", color: "fg.muted"},
      `History before ${clock(data.complete_since_ms)} UTC was not read (${data.rows_read} rows at most a request).`)
      : null,
    data ? h(C.SimpleGrid, {columns: {base: 1, lg: 2}, gap: 4},
      h(QueueCharts, {stats: data}), h(OutcomeCharts, {stats: data})) : null,
    h(C.Text, {fontSize: "xs", color: "fg.muted"}, "From COMPACTION_QUEUE and COMPLETED_COMPACTIONS; the history " +
      "keeps the newest few entries per partition and state (Hive's retention), so a partition compacted more often " +
      "than that shows fewer."),
    h(C.Heading, {size: "md", mt: 2}, "Table health"),
    chosen ? h(TableHealth, {key: chosen, chosen}) : h(C.SimpleGrid, {columns: {base: 1, lg: 2}, gap: 4},
      h(TableScores), h(NoTable)));
}
