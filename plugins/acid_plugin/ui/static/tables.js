// The Tables tab: the transactional tables with their health scores; a table's page shows its score and breakdown,
// its partitions with the most deltas and obsolete directories, its settings (current values, and a form that
// triggers acid_table_settings) and the health of its partitions (acid_core.operations.health: Due, Why not yet, Held by) with
// Compact now on each.

import {AirflowLink, C, Cell, DataTable, Empty, Failure, Live, Pager, React, StateBadge, call, h, post, query, text,
        useLive, where} from "./api.js";
import {ScoreBadge, ScoreCard, TopPartitions, tableLink, useScore} from "./scores.js";

const HEALTH_COLUMNS = ["Partition", "Base", "Deltas", "Delete deltas", "Base size", "Delta size", "Due",
                        "Why not yet", "Queued", "Last compaction", "Failed in a row", "Waiting for the cleaner",
                        "Held by", "Compact now"];
const PAGE = 50;

export function TablesTab() {
  const live = React.useContext(Live);
  const name = live.params.get("table");
  if (!name || !name.includes(".")) { return h(TableList); }
  const [database, table] = name.split(".", 2);
  return h(TableDetail, {key: name, database, table, partition: live.params.get("partition")});
}

function TableList() {
  const {data, error} = useLive(() => call("tables"), [],
                                {busy: (found) => found.tables.some((t) => t.pending_compactions > 0)});
  return h(C.Stack, {gap: 3},
    h(Failure, {error}),
    data && data.tables.length === 0
      ? h(Empty, {title: "No transactional tables yet"},
          "CREATE TABLE ... TBLPROPERTIES ('transactional'='true') in the acid_metastore connection's metastore.")
      : h(DataTable, {id: "tables-table", caption: "Transactional tables",
                      columns: ["Table", "Partition keys", "NO_AUTO_COMPACTION", "Queued or working", "Health score"],
                      rows: (data ? data.tables : []).map((t) => h(C.Table.Row, {key: `${t.database}.${t.table}`},
                        h(Cell, null, h(AirflowLink, {to: tableLink(t.database, t.table)}, `${t.database}.${t.table}`)),
                        h(Cell, null, t.partition_keys.join(", ")),
                        h(Cell, null, String(t.no_auto_compaction)),
                        h(Cell, null, String(t.pending_compactions)),
                        h(Cell, null, h(ScoreBadge, {database: t.database, table: t.table}))))}));
}

function TableDetail({database, table, partition}) {
  const live = React.useContext(Live);
  const [offset, setOffset] = React.useState(0);
  const path = `tables/${encodeURIComponent(database)}/${encodeURIComponent(table)}/health?` +
    query({offset, limit: PAGE, partition});
  const {data, error} = useLive(() => call(path), [path],
                                {busy: (found) => found.partitions.some((p) => p.queued !== null)});
  const score = useScore(database, table);
  return h(C.Stack, {gap: 4},
    h(C.HStack, {gap: 3},
      h(AirflowLink, {to: "?tab=tables"}, "All tables"),
      h(C.Text, {color: "fg.muted"}, "/"),
      h(C.Heading, {size: "md"}, `${database}.${table}`)),
    h(Failure, {error: error || score.error}),
    h(C.SimpleGrid, {columns: {base: 1, xl: 2}, gap: 4},
      score.data ? h(ScoreCard, {score: score.data}) : h(C.Spinner, {size: "sm"}),
      data ? h(Settings, {key: JSON.stringify([data.settings, data.no_auto_compaction_source]), health: data}) : null),
    data ? h(C.Text, {id: "health-summary", fontSize: "sm", color: "fg.muted"},
      `NO_AUTO_COMPACTION: ${data.no_auto_compaction}` +
      (data.no_auto_compaction_source ? ` (${data.no_auto_compaction_source})` : "") + "; thresholds: " +
      data.thresholds.map((t) => `${t.name} = ${t.value} (${t.source})`).join("; ") +
      `; partitions ${data.offset + 1}-${data.offset + data.partitions.length} of ${data.total_partitions}`) : null,
    partition ? h(C.HStack, null, h(C.Text, {fontSize: "sm"}, `Partition ${partition} only.`),
                  h(AirflowLink, {to: tableLink(database, table)}, "Show every partition")) : null,
    data && data.partitions.length === 0 ? h(Empty, {title: "No partitions yet"}, "Writes add them.")
      : h(DataTable, {id: "health-table", columns: HEALTH_COLUMNS, caption: `Health of ${database}.${table}`,
                      rows: (data ? data.partitions : []).map((p) => h(HealthRow, {key: text(p.partition), p, database,
                                                                                  table}))}),
    data && !partition ? h(Pager, {offset: data.offset, limit: PAGE, shown: data.partitions.length,
                                   total: data.total_partitions, onPage: setOffset, what: "partitions"}) : null,
    score.data ? h(C.SimpleGrid, {columns: {base: 1, lg: 2}, gap: 4}, h(TopPartitions, {score: score.data})) : null);
}

function due(p) {
  if (p.error) { return p.error; }
  return p.due ? `${p.due}: ${p.reason}` : `no: ${p.reason}`;
}

function HealthRow({p, database, table}) {
  const last = p.last_compaction;
  const bad = p.past_failed_threshold || p.error;
  return h(C.Table.Row, {"data-partition": text(p.partition), bg: bad ? "failed.subtle" : undefined},
    h(Cell, {whiteSpace: "nowrap"}, p.partition === null ? "(table)"
      : h(AirflowLink, {to: tableLink(database, table, p.partition)}, p.partition)),
    h(Cell, {fontSize: "xs"}, text(p.base)),
    h(Cell, null, p.deltas), h(Cell, null, p.delete_deltas),
    h(Cell, {whiteSpace: "nowrap"}, p.base_size), h(Cell, {whiteSpace: "nowrap"}, p.delta_size),
    h(Cell, {minW: "14em", color: p.error ? "fg.error" : undefined, "data-due": p.due || "no"}, due(p)),
    h(Cell, {minW: "16em"}, `${p.why}: ${p.why_detail}` + (p.since ? ` (since ${p.since})` : "")),
    h(Cell, null, p.queued ? `${p.queued[0]} (${p.queued[1]})` : ""),
    h(Cell, null, last ? h(C.Stack, {gap: 0.5}, h(C.Text, null, `${last.id} ${last.type}`),
                           h(C.Box, null, h(StateBadge, {state: last.state})),
                           h(C.Text, {fontSize: "xs", color: "fg.muted"}, text(last.ended))) : ""),
    h(Cell, null, p.consecutive_failures + (p.past_failed_threshold ? " (past failed.compacts.threshold)" : "")),
    h(Cell, {fontSize: "xs", minW: "10em", overflowWrap: "anywhere"}, p.obsolete.concat(p.aborted).join(" ")),
    h(Cell, {fontSize: "xs", minW: "14em"}, p.held_by.map((holder) => holder.detail).join("; ")),
    h(Cell, null, h(CompactNow, {database, table, partition: p.partition})));
}

function CompactNow({database, table, partition}) {
  const live = React.useContext(Live);
  const [type, setType] = React.useState("major");
  const [wait, setWait] = React.useState(true);
  const [sending, setSending] = React.useState(false);
  const submit = async (event) => {
    event.preventDefault();
    setSending(true);
    try {
      const run = await post("compactions", {database, table, partition, type, wait});
      live.say("info", `acid_compact triggered for ${where(database, table, partition)}`, run);
    } catch (failure) { live.say("error", failure.message); }
    setSending(false);
  };
  return h("form", {className: "compact", onSubmit: submit},
    h(C.Stack, {gap: 1, minW: "11em"},
      h(C.NativeSelect.Root, {size: "xs"},
        h(C.NativeSelect.Field, {name: "type", value: type, onChange: (e) => setType(e.target.value),
                                 "aria-label": "compaction type"},
          ["major", "minor", "rebalance"].map((kind) => h("option", {key: kind, value: kind}, kind))),
        h(C.NativeSelect.Indicator)),
      h(C.Checkbox.Root, {size: "sm", checked: wait, onCheckedChange: (e) => setWait(Boolean(e.checked))},
        h(C.Checkbox.HiddenInput, {name: "wait"}), h(C.Checkbox.Control),
        h(C.Checkbox.Label, {fontSize: "xs"}, "run it in this DAG run")),
      h(C.Button, {type: "submit", size: "xs", loading: sending}, "Compact now")));
}

function current(value, source) { return source ? `${value} (${source})` : String(value); }

// The table's auto-compaction settings as they are now, and a form that changes them through acid_table_settings.
// Its number fields (name, label, range, description) are the settings registry's (health.form, acid_core.settings).
function Settings({health}) {
  const live = React.useContext(Live);
  const own = health.settings;
  const [noAuto, setNoAuto] = React.useState("leave");
  const [values, setValues] = React.useState(
    Object.fromEntries(health.form.map((f) => [f.name, own[f.name] || ""])));
  const [clear, setClear] = React.useState(false);
  const noAutoNow = health.no_auto_compaction
    ? `true (${health.no_auto_compaction_source === "table" ? "table property" : "database property"})`
    : (own.no_auto_compaction !== null ? `false (table property ${own.no_auto_compaction})` : "false (not set)");
  const number = (value, before) => (value === "" || String(value) === String(before || "")) ? null : Number(value);
  const submit = async (event) => {
    event.preventDefault();
    const body = {no_auto_compaction: noAuto, clear_thresholds: clear, ...Object.fromEntries(
      health.form.map((f) => [f.name, clear ? null : number(values[f.name], own[f.name])]))};
    try {
      const run = await post(`tables/${encodeURIComponent(health.database)}/${encodeURIComponent(health.table)}/settings`,
                             body);
      live.say("info", `acid_table_settings triggered for ${health.database}.${health.table}`, run);
    } catch (failure) { live.say("error", failure.message); }
  };
  const field = (label, now, control, title) => h(C.Field.Root, {width: "auto", title},
    h(C.Field.Label, {fontSize: "sm"}, label), control, h(C.Field.HelperText, {fontSize: "xs"}, `now: ${now}`));
  const threshold = (f) => health.thresholds.find((t) => t.name === f.key) || {value: f.default, source: "default"};
  return h(C.Card.Root, {variant: "outline", size: "sm"},
    h(C.Card.Header, {pb: 0}, h(C.Card.Title, {fontSize: "md"}, "Settings"),
      h(C.Card.Description, {fontSize: "xs"}, "Applied by a run of acid_table_settings (ALTER TABLE ... SET " +
        "TBLPROPERTIES); empty threshold fields leave them as they are.")),
    h(C.Card.Body, null, h("form", {id: "settings", onSubmit: submit},
      h(C.HStack, {gap: 4, align: "flex-end", wrap: "wrap"},
        field("NO_AUTO_COMPACTION", noAutoNow, h(C.NativeSelect.Root, {size: "sm", width: "8em"},
          h(C.NativeSelect.Field, {name: "no_auto_compaction", value: noAuto, onChange: (e) => setNoAuto(e.target.value)},
            ["leave", "true", "false", "clear"].map((value) => h("option", {key: value, value}, value))),
          h(C.NativeSelect.Indicator))),
        ...health.form.map((f) => field(f.label, current(threshold(f).value, threshold(f).source), h(C.Input, {
          key: f.name, name: f.name, type: "number", min: f.min ?? undefined, max: f.max ?? undefined, step: f.step,
          size: "sm", width: "8em", value: values[f.name], placeholder: String(threshold(f).value),
          onChange: (e) => setValues({...values, [f.name]: e.target.value})}),
          `${f.property}: ${f.description} (${f.allowed})`)),
        h(C.Checkbox.Root, {size: "sm", checked: clear, onCheckedChange: (e) => setClear(Boolean(e.checked)), pb: 6},
          h(C.Checkbox.HiddenInput, {name: "clear_thresholds"}), h(C.Checkbox.Control),
          h(C.Checkbox.Label, null, "clear both thresholds")),
        h(C.Box, {pb: 6}, h(C.Button, {type: "submit", size: "sm"}, "Apply"))))));
}
