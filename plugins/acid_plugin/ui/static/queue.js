// The Compactions tab: SHOW COMPACTIONS with its filters. Queued and working entries are listed apart, above the
// history, all of them (never paged away), each with its Abort button; the history is paged, newest first.

import {AirflowLink, C, Cell, ConfirmDialog, DataTable, Empty, Failure, Live, Pager, React, StateBadge, Time, call,
        h, post, query, text, useLive, where} from "./api.js";

const STATES = ["initiated", "working", "ready for cleaning", "succeeded", "failed", "refused", "did not initiate",
                "aborted"];
const COLUMNS = ["Id", "Table", "Partition", "Type", "State", "Pool", "Worker", "Enqueued", "Started", "Ended",
                 "Duration", "Error or note", ""];
const PAGE = 100;
const NO_FILTERS = {database: "", table: "", partition: "", pool: "", state: "", type: ""};

function Select({name, value, onChange, options, placeholder}) {
  return h(C.NativeSelect.Root, {size: "sm", width: "10em"},
    h(C.NativeSelect.Field, {name, value, onChange: (event) => onChange(event.target.value), "aria-label": name},
      h("option", {value: ""}, placeholder), options.map((option) => h("option", {key: option, value: option}, option))),
    h(C.NativeSelect.Indicator));
}

function Filters({applied, onApply}) {
  const [values, setValues] = React.useState(applied);
  const set = (name) => (value) => setValues(Object.assign({}, values, {[name]: value}));
  const input = (name) => h(C.Input, {key: name, name, size: "sm", width: "10em", placeholder: name,
                                      value: values[name], onChange: (event) => set(name)(event.target.value)});
  return h("form", {id: "queue-filters", onSubmit: (event) => { event.preventDefault(); onApply(values); }},
    h(C.HStack, {gap: 2, wrap: "wrap"},
      ["database", "table", "partition", "pool"].map(input),
      h(Select, {name: "state", value: values.state, onChange: set("state"), options: STATES, placeholder: "any state"}),
      h(Select, {name: "type", value: values.type, onChange: set("type"), options: ["major", "minor", "rebalance"],
                 placeholder: "any type"}),
      h(C.Button, {type: "submit", size: "sm"}, "Show"),
      h(C.Button, {size: "sm", variant: "ghost", onClick: () => { setValues(NO_FILTERS); onApply(NO_FILTERS); }},
        "Clear")));
}

function Row({entry, onAbort}) {
  const failed = entry.state === "failed";
  return h(C.Table.Row, {"data-id": entry.id, "data-state": entry.state},
    h(Cell, null, entry.id),
    h(Cell, null, `${entry.database}.${entry.table}`),
    h(Cell, null, text(entry.partition)),
    h(Cell, null, entry.type),
    h(Cell, null, h(StateBadge, {state: entry.state})),
    h(Cell, null, entry.pool),
    h(Cell, {minW: "14em", maxW: "20em", overflowWrap: "anywhere"}, entry.worker_task_url
      ? h(AirflowLink, {to: entry.worker_task_url, title: "the Airflow task instance that ran it",
                        overflowWrap: "anywhere", whiteSpace: "normal"}, entry.worker_id)
      : text(entry.worker_id)),
    h(Cell, null, h(Time, {value: entry.enqueued})),
    h(Cell, null, h(Time, {value: entry.started})),
    h(Cell, null, h(Time, {value: entry.ended})),
    h(Cell, {whiteSpace: "nowrap"}, text(entry.duration)),
    h(Cell, {minW: "16em", color: failed ? "failed.fg" : "fg.muted"}, text(entry.error)),
    h(Cell, null, entry.active ? h(C.Button, {size: "xs", variant: "outline", "aria-label": `Abort compaction ${entry.id}`,
                                            onClick: () => onAbort(entry)}, "Abort") : null));
}

function emptyQueue(data, filtered) {
  if (filtered) { return h(Empty, {title: "No queued or working compaction matches these filters"}); }
  const initiator = data.initiator || {};
  const every = initiator.interval_s ? `the initiator polls every ${initiator.interval_s} s` :
    (initiator.schedule ? `the initiator runs on its schedule (${initiator.schedule})` : "the initiator queues them");
  return h(Empty, {title: `Nothing queued yet: ${every}`},
    initiator.paused ? h(C.Text, null, "acid_initiator is paused, so nothing is queued automatically: unpause it (",
                         h(AirflowLink, {to: "/dags/acid_initiator"}, "acid_initiator"), ") or use Compact now.")
      : "Due partitions are queued at its next poll; Compact now (Tables tab) queues one at once.");
}

export function CompactionsTab() {
  const live = React.useContext(Live);
  const [filters, setFilters] = React.useState(NO_FILTERS);
  const [offset, setOffset] = React.useState(0);
  const [asking, setAsking] = React.useState(null); // the entry the dialog names (kept while it closes)
  const [open, setOpen] = React.useState(false);
  const ask = (entry) => { setAsking(entry); setOpen(true); };
  const {data, error} = useLive(() => call("compactions?" + query(Object.assign({}, filters, {offset, limit: PAGE}))),
                                [filters, offset], {busy: (found) => found.compactions.some((entry) => entry.active)});
  const filtered = Object.values(filters).some(Boolean);
  const apply = (values) => { setFilters(values); setOffset(0); };
  const abort = async (entry) => {
    setOpen(false);
    try {
      await post(`compactions/${entry.id}/abort`);
      live.say("neutral", `Compaction ${entry.id} aborted`);
    } catch (failure) { live.say("error", failure.message); }
  };
  const active = data ? data.compactions.filter((entry) => entry.active) : [];
  const history = data ? data.compactions.filter((entry) => !entry.active) : [];
  const asked = asking && where(asking.database, asking.table, asking.partition);
  return h(C.Stack, {gap: 4},
    h(Filters, {applied: filters, onApply: apply}),
    h(Failure, {error}),
    h(C.Box, null,
      h(C.Heading, {size: "md", mb: 2}, `Queued and working (${active.length}${data && data.more_active ? "+" : ""})`),
      data && active.length === 0 ? emptyQueue(data, filtered)
        : h(DataTable, {id: "queue-active", columns: COLUMNS, caption: "Queued and working compactions",
                        rows: active.map((entry) => h(Row, {key: entry.id, entry, onAbort: ask}))})),
    h(C.Box, null,
      h(C.Heading, {size: "md", mb: 2}, "History"),
      data && history.length === 0 && offset === 0
        ? h(Empty, {title: filtered ? "No finished compaction matches these filters" : "No compaction has finished yet"},
            "Compactions move here when they are compacted (ready for cleaning), cleaned (succeeded), failed, " +
            "refused or aborted.")
        : h(DataTable, {id: "queue-history", columns: COLUMNS, caption: "Compaction history",
                        rows: history.map((entry) => h(Row, {key: entry.id, entry, onAbort: ask}))}),
      data ? h(Pager, {offset, limit: PAGE, shown: history.length, more: data.more, onPage: setOffset,
                       what: "entries"}) : null),
    h(ConfirmDialog, {
      open, title: asking ? `Abort compaction ${asking.id}?` : "",
      body: asking ? `Compaction ${asking.id} (${asking.type}) of ${asked} ` + (asking.state === "working"
        ? "stops: its transaction is aborted, nothing it wrote becomes visible, and its task ends skipped."
        : "moves to history as aborted and does not run; a task waiting to run it ends skipped.") : "",
      confirmLabel: "Abort compaction", onConfirm: () => abort(asking), onCancel: () => setOpen(false)}));
}
