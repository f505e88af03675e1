// Charts drawn as SVG in Airflow's colours (its theme's state palettes, as CSS variables, so dark mode follows): bars
// over time or over buckets (stacked by series), a line with threshold lines, horizontal bars whose labels are links.
// Every mark has a tooltip (<title>) and data-* attributes naming its series and value; each chart has a text summary
// for screen readers.

import {AirflowLink, C, colour, h} from "./api.js";

const WIDTH = 640;
const MARGIN = {left: 58, right: 12, top: 12, bottom: 26};
const AXIS = "var(--chakra-colors-fg-muted)";
const GRID = "var(--chakra-colors-border)";
const TIME_STEPS_S = [1, 5, 10, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400];

export function formatSeconds(seconds) {
  if (seconds === null || seconds === undefined) { return "–"; }
  if (seconds < 60) { return `${Math.round(seconds)} s`; }
  if (seconds < 3600) { return `${Math.round(seconds / 6) / 10} min`; }
  if (seconds < 86400) { return `${Math.round(seconds / 360) / 10} h`; }
  return `${Math.round(seconds / 8640) / 10} d`;
}

export function clock(ms) { return new Date(ms).toISOString().slice(11, 16); }

// Round ticks from 0 to at least `max`: counts step by 1, 2 or 5 x 10^n; seconds by round durations.
export function ticks(max, {seconds = false} = {}) {
  const top = Math.max(max, seconds ? 60 : 1);
  let step;
  if (seconds) {
    step = TIME_STEPS_S.find((candidate) => top / candidate <= 4) || TIME_STEPS_S[TIME_STEPS_S.length - 1];
  } else {
    const power = 10 ** Math.floor(Math.log10(top / 4));
    step = [1, 2, 5, 10].map((factor) => factor * power).find((candidate) => top / candidate <= 4);
    step = Math.max(1, step);
  }
  const found = [];
  for (let value = 0; value < top + step; value += step) { found.push(value); if (value >= top) { break; } }
  return found;
}

export function Legend({items}) {
  return h(C.HStack, {gap: 4, wrap: "wrap", fontSize: "xs", color: "fg.muted", mt: 1},
    items.map((item) => h(C.HStack, {key: item.label, gap: 1},
      h(C.Box, {as: "span", display: "inline-block", w: "12px", h: item.line ? "0" : "10px", borderRadius: "2px",
                borderTopWidth: item.line ? "2px" : 0, borderStyle: item.dashed ? "dashed" : "solid",
                borderColor: colour(item.palette), bg: item.line ? "transparent" : colour(item.palette)}),
      h(C.Text, {as: "span"}, item.label))));
}

export function ChartCard({name, title, help, legend, empty, summary, children}) {
  return h(C.Card.Root, {variant: "outline", size: "sm", "data-chart": name, "data-empty": empty ? "true" : "false"},
    h(C.Card.Header, {pb: 0},
      h(C.Card.Title, {fontSize: "md"}, title),
      help ? h(C.Card.Description, {fontSize: "xs"}, help) : null),
    h(C.Card.Body, {pt: 2},
      empty ? h(C.Text, {color: "fg.muted", fontSize: "sm", py: 6, textAlign: "center"}, empty)
        : h(C.Box, {role: "img", "aria-label": summary || title}, children),
      legend && !empty ? h(Legend, {items: legend}) : null));
}

function Axes({height, yTicks, yMax, format, xLabels}) {
  const plot = height - MARGIN.top - MARGIN.bottom;
  const y = (value) => MARGIN.top + plot - (value / yMax) * plot;
  return h("g", {fontSize: 10, fill: AXIS},
    yTicks.map((value) => h("g", {key: value},
      h("line", {x1: MARGIN.left, x2: WIDTH - MARGIN.right, y1: y(value), y2: y(value), stroke: GRID,
                 strokeWidth: 1}),
      h("text", {x: MARGIN.left - 6, y: y(value) + 4, textAnchor: "end"}, format(value)))),
    xLabels.map(([x, label]) => h("text", {key: `${x}-${label}`, x, y: height - 8, textAnchor: "middle"}, label)));
}

// Bars per category, stacked by series: `series` [{name, palette, values}], `labels` one per category (tooltips),
// `tickLabels` the categories' axis labels (sparser), `format` for the y axis.
export function BarChart({labels, tickLabels, series, height = 200, seconds = false, format = String, thresholds = []}) {
  const totals = labels.map((_, index) => series.reduce((sum, one) => sum + (one.values[index] || 0), 0));
  const yTicks = ticks(Math.max(0, ...totals, ...thresholds.map((t) => t.value)), {seconds});
  const yMax = yTicks[yTicks.length - 1];
  const plot = height - MARGIN.top - MARGIN.bottom;
  const band = (WIDTH - MARGIN.left - MARGIN.right) / Math.max(1, labels.length);
  const gap = Math.min(4, band * 0.2);
  const bars = [];
  labels.forEach((label, index) => {
    let base = 0;
    for (const one of series) {
      const value = one.values[index] || 0;
      if (value > 0) {
        const top = MARGIN.top + plot - ((base + value) / yMax) * plot;
        bars.push(h("rect", {key: `${one.name}-${index}`, x: MARGIN.left + index * band + gap / 2, y: top,
                             width: Math.max(1, band - gap), height: (value / yMax) * plot, fill: colour(one.palette),
                             "data-series": one.name, "data-index": index, "data-value": value},
          h("title", null, `${label}: ${format(value)} ${one.name}`)));
      }
      base += value;
    }
  });
  const xLabels = (tickLabels || labels).map((text, index) => text ? [MARGIN.left + (index + 0.5) * band, text] : null)
    .filter(Boolean);
  return h("svg", {viewBox: `0 0 ${WIDTH} ${height}`, width: "100%", preserveAspectRatio: "xMidYMid meet"},
    h(Axes, {height, yTicks, yMax, format, xLabels}),
    thresholds.map((line) => h(ThresholdLine, Object.assign({key: line.label, height, yMax}, line))),
    bars);
}

function ThresholdLine({value, label, palette, height, yMax}) {
  if (value > yMax) { return null; }
  const plot = height - MARGIN.top - MARGIN.bottom;
  const y = MARGIN.top + plot - (value / yMax) * plot;
  return h("g", {"data-threshold": label},
    h("line", {x1: MARGIN.left, x2: WIDTH - MARGIN.right, y1: y, y2: y, stroke: colour(palette), strokeWidth: 1.5,
               strokeDasharray: "6 4"}),
    h("text", {x: WIDTH - MARGIN.right - 4, y: y - 4, textAnchor: "end", fontSize: 11, fill: colour(palette)}, label));
}

// Which threshold lines a line chart of `values` draws (those near enough to the data to read on its scale).
export function drawnThresholds(values, thresholds) {
  return thresholds.filter((line) => line.value <= Math.max(...values, 0) * 1.5);
}

// A value over time: one point per step (drawn at the step's end), filled below, with dashed threshold lines.
export function LineChart({times, step, values, name, palette, height = 200, seconds = false, format = String,
                           thresholds = [], tickLabels}) {
  const shown = drawnThresholds(values, thresholds);
  const yTicks = ticks(Math.max(0, ...values, ...shown.map((line) => line.value)), {seconds});
  const yMax = yTicks[yTicks.length - 1];
  const plot = height - MARGIN.top - MARGIN.bottom;
  const band = (WIDTH - MARGIN.left - MARGIN.right) / Math.max(1, times.length);
  const point = (value, index) => [MARGIN.left + (index + 1) * band, MARGIN.top + plot - (value / yMax) * plot];
  const points = values.map(point);
  const line = points.map(([x, y]) => `${x.toFixed(1)},${y.toFixed(1)}`).join(" ");
  const floor = MARGIN.top + plot;
  const area = `${MARGIN.left},${floor} ${MARGIN.left},${points.length ? points[0][1].toFixed(1) : floor} ${line} ` +
    `${points.length ? points[points.length - 1][0].toFixed(1) : MARGIN.left},${floor}`;
  const xLabels = (tickLabels || []).map((text, index) => text ? [MARGIN.left + index * band, text] : null)
    .filter(Boolean);
  return h("svg", {viewBox: `0 0 ${WIDTH} ${height}`, width: "100%", preserveAspectRatio: "xMidYMid meet"},
    h(Axes, {height, yTicks, yMax, format, xLabels}),
    h("polygon", {points: area, fill: colour(palette, "muted"), opacity: 0.6}),
    h("polyline", {points: line, fill: "none", stroke: colour(palette), strokeWidth: 2, "data-series": name}),
    shown.map((one) => h(ThresholdLine, Object.assign({key: one.label, height, yMax}, one))),
    points.map(([x, y], index) => values[index] > 0 ? h("circle", {key: index, cx: x, cy: y, r: 2.5,
      fill: colour(palette), "data-series": name, "data-index": index, "data-value": values[index]},
      h("title", null, `${clock(times[index])}–${clock(times[index] + step)} UTC: ${format(values[index])}`)) : null));
}

// Horizontal bars, one per item ({label, value, to, title}); the label links to `to` (inside Airflow's UI).
export function HBars({items, palette, format = String, max, mark}) {
  const top = Math.max(max || 0, ...items.map((item) => item.value), mark ? mark.value : 0, 1);
  return h(C.Stack, {gap: 1.5, role: "list"},
    items.map((item) => h(C.Grid, {key: item.label, templateColumns: "minmax(8em, 14em) 1fr 5em", gap: 2,
                                    alignItems: "center", role: "listitem", "data-bar": item.label,
                                    "data-value": item.value},
      h(C.Box, {fontSize: "sm", truncate: true, title: item.label},
        item.to ? h(AirflowLink, {to: item.to}, item.label) : item.label),
      h(C.Box, {position: "relative", h: "14px", bg: "bg.muted", borderRadius: "sm", title: item.title},
        h(C.Box, {h: "100%", w: `${(100 * item.value) / top}%`, bg: colour(item.palette || palette),
                  borderRadius: "sm"}),
        mark ? h(C.Box, {position: "absolute", top: "-3px", bottom: "-3px", left: `${(100 * mark.value) / top}%`,
                         borderLeftWidth: "2px", borderStyle: "dashed", borderColor: colour(mark.palette),
                         title: mark.label}) : null),
      h(C.Text, {fontSize: "sm", textAlign: "right"}, format(item.value)))));
}
